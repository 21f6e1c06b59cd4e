"""From per-request records (send time, TTFT, E2E latency, token counts) to a ``MeasuredRun``: the arrival
process the client offered and the metrics as `vllm bench serve` defines them.

Arrival process (when the file does not state it): the requests' send times give the rate, (n - 1) / (last send
- first send), and the burstiness, the gamma shape 1 / CV^2 of the gaps between consecutive sends (1: Poisson).
Gaps more regular than CV 0.1 (a constant-rate client) are replayed with shape ``MAX_BURSTINESS``; requests all
sent at once are an unbounded rate.

Metrics, over the completed requests (seconds in, milliseconds out): TTFT; TPOT = (E2E - TTFT) / (output
tokens - 1) per request with more than one output token; ITL from the per-token gaps when the file has them,
else sum(E2E - TTFT) / sum(output tokens - 1), which is the mean of those gaps; E2EL; throughputs over the span
from the first send to the last completion."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from twin.errors import TwinInputError
from twin.fitting.measured_run import METRIC_KEYS, LengthSample, MeasuredRun, PromptPool
from twin.results.metrics import describe

MAX_BURSTINESS = 100.0
METRIC_PERCENTILES = (90, 99)


@dataclass
class RequestTimes:
    """Every request a run sent, in send order: send times (s, any origin), TTFT and E2E latency (s; NaN where
    the request failed), prompt and output tokens, ``ok`` (completed), and optionally the completed requests'
    gaps between output tokens (s; one array per request, in any order: only their pool is used)."""

    send_s: np.ndarray
    ttft_s: np.ndarray
    e2el_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    ok: np.ndarray
    itl_s: list[np.ndarray] | None = None

    def check(self, where: str, names: dict[str, str]) -> None:
        """Completed requests need a prompt, an output and TTFT <= E2E; ``names`` maps ttft/e2el/prompt/output
        to the file's field names for the error message."""
        if not self.ok.any():
            raise TwinInputError(f"{where}: no completed request (every one failed or lacks its timings)")
        for i in np.flatnonzero(self.ok):
            if not self.prompt_tokens[i] >= 1:
                raise TwinInputError(f"{where}: {names['prompt']}[{i}] = {self.prompt_tokens[i]:g}: a completed "
                                     f"request needs a prompt of >= 1 token")
            if not self.output_tokens[i] >= 1:
                raise TwinInputError(f"{where}: {names['output']}[{i}] = {self.output_tokens[i]:g}: a completed "
                                     f"request needs >= 1 output token")
            if self.ttft_s[i] > self.e2el_s[i] + 1e-9:
                raise TwinInputError(f"{where}: request {i}: {names['ttft']} ({self.ttft_s[i]:g} s) exceeds "
                                     f"{names['e2el']} ({self.e2el_s[i]:g} s): the first token cannot come after "
                                     f"the last")


def arrival_process(send_s: np.ndarray) -> tuple[float, float]:
    """(rate per second, gamma shape of the gaps) of the sends; ``(inf, 1)`` when all were sent at once."""
    t = np.sort(np.asarray(send_s, dtype=float))
    if t.size < 2 or t[-1] <= t[0]:
        return math.inf, 1.0
    gaps = np.diff(t)
    gaps = gaps / gaps.max()      # CV is scale-free; this keeps the squares finite for any clock
    rate = (t.size - 1) / float(t[-1] - t[0])
    cv2 = float(np.var(gaps)) / float(np.mean(gaps)) ** 2
    shape = MAX_BURSTINESS if cv2 <= 1.0 / MAX_BURSTINESS else 1.0 / cv2
    return rate, shape


def span_s(t: RequestTimes) -> float:
    """First send to last completion (a failed request ends at its send)."""
    ends = np.where(t.ok, t.send_s + np.nan_to_num(t.e2el_s), t.send_s)
    return float(ends.max() - t.send_s.min())


def measured_metrics(t: RequestTimes) -> dict[str, float]:
    """The run's metrics (``METRIC_KEYS``) from its completed requests."""
    ok = t.ok
    ttft, e2el, out = t.ttft_s[ok], t.e2el_s[ok], t.output_tokens[ok]
    multi = out > 1
    tpot = (e2el[multi] - ttft[multi]) / (out[multi] - 1)
    metrics: dict[str, float] = {"completed": float(ok.sum()), "failed": float((~ok).sum())}
    for values, name in ((ttft, "ttft"), (tpot, "tpot"), (e2el, "e2el")):
        metrics.update({k: v for k, v in describe(values, name, METRIC_PERCENTILES).items()
                        if k in METRIC_KEYS and v is not None})
    if t.itl_s is not None and any(g.size for g in t.itl_s):
        metrics["mean_itl_ms"] = 1e3 * float(np.mean(np.concatenate(t.itl_s)))
    elif multi.any():
        metrics["mean_itl_ms"] = 1e3 * float((e2el[multi] - ttft[multi]).sum() / (out[multi] - 1).sum())
    duration = span_s(t)
    if duration > 0:
        metrics["request_throughput"] = float(ok.sum()) / duration
        metrics["output_throughput"] = float(out.sum()) / duration
    return metrics


def lengths(t: RequestTimes) -> tuple[LengthSample, LengthSample]:
    """The completed requests' exact prompt and output lengths, in send order."""
    ok = t.ok
    return (LengthSample(values=tuple(int(v) for v in t.prompt_tokens[ok])),
            LengthSample(values=tuple(int(v) for v in t.output_tokens[ok])))


def run_from_requests(name: str, source: str, t: RequestTimes, *, max_concurrency: int | None = None,
                      closed_loop: bool = False, prompt_pool: PromptPool | None = None, model: str | None = None,
                      experiment: str | None = None) -> MeasuredRun:
    """One run from its requests: an open loop at the sends' rate and burstiness (capped at ``max_concurrency``
    when given), or with ``closed_loop`` ``max_concurrency`` users each sending when its last request ends."""
    if closed_loop and max_concurrency is None:
        raise ValueError("a closed loop needs its concurrency")
    order = np.argsort(t.send_s, kind="stable")     # lengths replay in send order; ITLs only pool
    t = RequestTimes(t.send_s[order], t.ttft_s[order], t.e2el_s[order], t.prompt_tokens[order],
                     t.output_tokens[order], t.ok[order], t.itl_s)
    rate, shape = (None, 1.0) if closed_loop else arrival_process(t.send_s)
    prompt, output = lengths(t)
    with np.errstate(over="ignore"):
        metrics = measured_metrics(t)
    bad = next((k for k, v in metrics.items() if not math.isfinite(v)), None)
    if bad:
        raise TwinInputError(f"{name}: {bad} is not finite: the request times are out of range")
    return MeasuredRun(name=name, source=source, num_requests=int(t.send_s.size), prompt_tokens=prompt,
                       output_tokens=output, metrics=metrics, rate_per_s=rate,
                       max_concurrency=max_concurrency, burstiness=shape, duration_s=span_s(t),
                       prompt_pool=prompt_pool, model=model, experiment=experiment, requests=t)

