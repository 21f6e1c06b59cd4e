"""One real benchmark run as the fit needs it: the load the client offered, the request lengths, the prompts'
prefix sharing, the server's settings where known, and the metrics the client measured.

Every reader (``twin.fitting.readers``) produces these; ``twin.fitting.replay`` turns one back into traffic."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from twin.workload.clients import check_client

if TYPE_CHECKING:
    from twin.fitting.readers.request_times import RequestTimes

# the measured metrics a run may carry, in `vllm bench serve`'s names and units (ms, requests/s, tokens/s)
METRIC_KEYS: tuple[str, ...] = (
    "mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms", "p99_ttft_ms",
    "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms",
    "mean_itl_ms",
    "mean_e2el_ms", "median_e2el_ms", "p99_e2el_ms",
    "request_throughput", "output_throughput",
    "completed", "failed",
)


QUEUEING_TTFT_STEPS = 50

# A server's first requests pay one-off costs the twin does not simulate (it serves warm): kernels compiled or
# autotuned at their first shape (vLLM's Triton fused-MoE kernels are JIT-compiled per block configuration, which
# it picks by token count), allocator growth, first-use host paths. On the inference-perf runs here they are the
# first stage's tail only: the same server's second stage, at a higher rate, has none (TTFT p99 / max, ms:
# Mixtral-8x7B codegen 482 / 1994 then 68 / 106; Llama-2-70b codegen 106 / 686 then 68 / 110; CodeLlama-34b
# codegen 69 / 290 then 55 / 72), while the medians move by the load alone. Such a tail moves a mean by several
# ms (Mixtral stage 0: mean 63.0 against median 53.0 ms) and a median hardly (1 % of the requests), so a cold run's mean TTFT is
# not a target of the fit (``twin.fitting.fit``): a per-request term fitted to it would carry the one-off stall
# to every request of every run. The evaluation still compares it; the replay prices the part it can name (the
# fused-MoE compiles a cold server meets, ``twin.fitting.cold_start``) into a cold run's means.
COLD_START_UNFITTED: tuple[str, ...] = ("mean_ttft_ms",)


def is_fit_target(run: MeasuredRun, metric: str) -> bool:
    """Whether a fit may take ``run``'s measured ``metric`` as a target: measured, positive, and not a cold
    run's one-off tail (``COLD_START_UNFITTED``); the evaluation compares every metric regardless."""
    value = run.metrics.get(metric)
    return bool(value and value > 0) and not (run.cold_start and metric in COLD_START_UNFITTED)


@dataclass(frozen=True)
class LengthSample:
    """Token counts of a run's requests: the exact per-request values (in send order) when the file has them,
    else quantiles ``(q in [0, 1], tokens)`` from its summary, drawn from by inverse-CDF interpolation."""

    values: tuple[int, ...] | None = None
    quantiles: tuple[tuple[float, float], ...] | None = None

    def __post_init__(self) -> None:
        if (self.values is None) == (self.quantiles is None):
            raise ValueError("LengthSample: give exactly one of values or quantiles")

    @classmethod
    def constant(cls, tokens: int) -> "LengthSample":
        return cls(quantiles=((0.0, float(tokens)), (1.0, float(tokens))))

    @property
    def mean(self) -> float:
        if self.values is not None:
            return float(np.mean(self.values)) if self.values else 0.0
        qs, vs = zip(*self.quantiles)
        grid = np.linspace(0.0, 1.0, 1001)
        return float(np.mean(np.interp(grid, qs, vs)))

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` lengths (>= 1): the recorded values cycled in order, or inverse-CDF draws."""
        if self.values is not None:
            base = np.asarray(self.values, dtype=np.int64)
            out = np.resize(base, n)
        else:
            qs, vs = zip(*self.quantiles)
            out = np.rint(np.interp(rng.random(n), qs, vs)).astype(np.int64)
        return np.maximum(out, 1)


@dataclass(frozen=True)
class PromptPool:
    """A finite prompt set the client builds once and cycles through (inference-perf ``shared_prefix``,
    ``vllm bench``'s prefix datasets): ``num_groups`` system prompts of ``system_prompt_tokens`` each, shared by
    ``prompts_per_group`` prompts; request i sends prompt i mod (groups x prompts per group)."""

    num_groups: int
    prompts_per_group: int
    system_prompt_tokens: int

    @property
    def size(self) -> int:
        return self.num_groups * self.prompts_per_group


@dataclass(frozen=True)
class MeasuredRun:
    """One run (one stage of a multi-stage benchmark) of a real server.

    Load: ``rate_per_s`` (``inf``: all at once) with an optional ``max_concurrency`` cap, or ``rate_per_s=None``
    with ``max_concurrency`` users in a closed loop; ``burstiness`` is the gamma shape of the gaps (1: Poisson).
    ``num_requests`` were sent over ``duration_s``. ``timeout_s`` is the client's per-request timeout, if any.
    ``metrics`` holds what the client measured (keys from ``METRIC_KEYS``; missing ones are unknown).
    ``model``, ``gpu``, ``tensor_parallel_size`` and ``server`` (vLLM knob names) are what the file says, or None;
    ``layout`` the deployment layout it states (``twin.fitting.readers.layout_fields``: the replayed ones under
    ``twin.fitting.replay.Target``'s field names, the ones calibration refuses under the file's).
    ``client``: the client that measured it (``twin.workload.clients``; its request path may be fitted apart).
    ``cold_start``: the run is the first traffic its server served, with no warm-up requests before it (see
    ``COLD_START_UNFITTED``). ``scaled_sends``: the client scaled its exponential gaps to sum to the stage's
    span, ``num_requests / rate_per_s`` (inference-perf's ``constant`` load; ``twin.fitting.replay``).
    """

    name: str
    source: str
    num_requests: int
    prompt_tokens: LengthSample
    output_tokens: LengthSample
    metrics: dict[str, float]
    rate_per_s: float | None = None
    max_concurrency: int | None = None
    burstiness: float = 1.0
    duration_s: float | None = None
    prompt_pool: PromptPool | None = None
    timeout_s: float | None = None
    model: str | None = None
    gpu: str | None = None
    tensor_parallel_size: int | None = None
    server: dict[str, Any] = field(default_factory=dict)
    layout: dict[str, Any] = field(default_factory=dict)
    experiment: str | None = None      # runs of one experiment share it (leave-one-experiment-out folds)
    client: str | None = None          # the measuring client (twin.workload.clients), None: not known
    release: str | None = None         # the server's vLLM release as measured (fit scopes only: twin.fitting.scoped)
    cold_start: bool = False           # the first traffic of a freshly started server, no warm-up before it
    # the client drew ``num_requests`` exponential gaps scaled to sum to num_requests / rate_per_s (inference-perf's
    # ``constant`` load, its ConstantLoadTimer); False: unscaled gaps at the rate (``vllm bench serve``'s draw)
    scaled_sends: bool = False
    # every request the file lists (send order), when the reader had them all: ``twin diagnose`` replays these;
    # the fit reads only the lengths and metrics above (not compared, not shown)
    requests: RequestTimes | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.rate_per_s is None and self.max_concurrency is None:
            raise ValueError(f"{self.name}: a run needs a request rate or a concurrency")
        if self.num_requests < 1:
            raise ValueError(f"{self.name}: no requests")
        check_client(self.client, f"{self.name}: client")
        if self.scaled_sends and (self.rate_per_s is None or math.isinf(self.rate_per_s) or self.burstiness != 1.0):
            raise ValueError(f"{self.name}: scaled sends need a finite rate and Poisson gaps (burstiness 1)")
        if self.release is not None and not isinstance(self.release, str):
            raise ValueError(f"{self.name}: release must be a vLLM release string or None, got {self.release!r}")
        unknown = set(self.metrics) - set(METRIC_KEYS)
        if unknown:
            raise ValueError(f"{self.name}: unknown metric {sorted(unknown)[0]!r}")

    @property
    def closed_loop(self) -> bool:
        return self.rate_per_s is None or (math.isinf(self.rate_per_s) and self.max_concurrency is not None)

    @property
    def queueing(self) -> bool:
        """The server could not keep up: requests waited many decode steps for their first token (mean TTFT over
        ``QUEUEING_TTFT_STEPS`` mean TPOTs). Such a run's latencies grow with its length, so it is simulated in
        full, and the fit leaves it to the evaluation. A closed loop cannot queue that way (each user waits for
        its answer before sending again): its TTFT is the wait for a batch slot, bounded, and it stays in the fit."""
        if self.closed_loop:
            return False
        ttft, tpot = self.metrics.get("mean_ttft_ms"), self.metrics.get("mean_tpot_ms")
        return bool(ttft and tpot and ttft > QUEUEING_TTFT_STEPS * tpot)

    @property
    def group(self) -> str:
        return self.experiment or self.name
