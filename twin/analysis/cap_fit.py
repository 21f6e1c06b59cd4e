"""Fitting ``max_num_seqs`` to measurements by simulation: which cap reproduces the measured TTFTs?

The measured requests are replayed as the client sent them (``_replay``: closed-loop at the benchmark's
``max_concurrency`` at an unbounded rate; at a finite rate, at their measured send times held to ``max_concurrency``
in flight; without one, at their measured send times) through the scenario's deployment at each candidate
``max_num_seqs`` (powers of two up to the offered concurrency, plus the ceiling measured), with prefix caching on
and off when the replayed prompts share a prefix. The step times are scaled until the simulated median TPOT matches
the measured one within 1 % (the server may be faster or slower than the cost model;
``cap_fit_score.fit_speed_factor``); the candidate whose TTFT distribution lies closest to the measured one (mean
absolute quantile difference, relative to the mean measured latency), plus any TPOT it still misses in the same unit
(``cap_fit_score``), wins. Confidence: the score margin to the runner-up with another conclusion, and a Laplace
pseudo-likelihood ratio ``n * ln(d_second / d_best)``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from twin.analysis.cap_fit_score import Simulation, decode_share, fit_speed_factor, tpot_term
from twin.analysis.measured import Measured
from twin.analysis.measured_profile import Profile
from twin.errors import TwinInputError
from twin.workload.spec import RequestSpec

CAP_BINDS = 0.10          # a fitted cap "binds" when it held (with a queue) this share of the simulated busy time
QUANTILES = (np.arange(100) + 0.5) / 100


class ScaledCostModel:
    """A cost model whose step times are ``factor`` times another's (the server's speed relative to it).

    The request path (``request_path_s`` and its random part: HTTP, tokenisation, the hand-off to the engine) is
    the base model's, unscaled: it is not a GPU step, and the median TPOT the factor is fitted to does not see it.
    The engine's decode fast path (``twin.sim.cohort_steps``) keeps its hooks where the base has them, scaled the
    same way, so a replay runs the steps a plain run would."""

    def __init__(self, base: Any, factor: float) -> None:
        self.base = base
        self.factor = f = float(factor)
        self.name = f"{getattr(base, 'name', 'cost')} x{factor:.3g}"
        self.request_path_s = getattr(base, "request_path_s", 0.0)
        self.request_path_jitter_s = getattr(base, "request_path_jitter_s", 0.0)
        from_sums = getattr(base, "step_time_from_sums", None)
        decodes = getattr(base, "decode_step_times_s", None)
        if from_sums is not None:
            self.step_time_from_sums = lambda *sums: f * from_sums(*sums)
        if decodes is not None:
            self.decode_step_times_s = lambda n_seqs, context, num_steps: [
                f * t for t in decodes(n_seqs, context, num_steps)]

    def step_time_s(self, step: Any) -> float:
        return self.factor * self.base.step_time_s(step)

    def explain(self, step: Any) -> dict[str, float]:
        explain = getattr(self.base, "explain", None)
        if explain is None:
            return {"total_s": self.step_time_s(step)}
        return {k: self.factor * v for k, v in explain(step).items()}


class _ClosedReplay:
    """The measured requests, handed out in order to ``concurrency`` closed-loop streams."""

    def __init__(self, specs: list[RequestSpec], concurrency: int) -> None:
        self.specs = specs
        self.concurrency = concurrency
        self.max_users = len(specs)     # streams past the requests never send one (not started)
        self._next = 0

    def next_request(self, user_index: int, now_s: float) -> RequestSpec | None:
        if self._next >= len(self.specs):
            return None
        s = self.specs[self._next]
        self._next += 1
        return dataclasses.replace(s, arrival_s=float(now_s))


def measured_specs(m: Measured, shared_prefix_tokens: int = 0) -> list[RequestSpec]:
    """The measured requests as specs, in arrival order. A result file carries no prompt content, so each
    prompt is unique, except for a first ``shared_prefix_tokens`` tokens common to all of them (a system
    prompt, or ``vllm bench serve --random-prefix-len``) where a prompt is longer than that."""
    order = np.argsort(m.arrival_s, kind="stable")
    out = []
    for j, i in enumerate(order):
        p = int(m.input_lens[i])
        if 0 < shared_prefix_tokens < p:
            segs = ((("shared-prefix",), shared_prefix_tokens), (("measured", j), p - shared_prefix_tokens))
        else:
            segs = ((("measured", j), p),)
        out.append(RequestSpec(j, float(m.arrival_s[i]), p, int(m.output_lens[i]), segs))
    return out


def scenario_shared_prefix(body: Any) -> tuple[int, str | None]:
    """The shared prefix the scenario's traffic gives every prompt (one class, one prefix group, no unique
    header in front), and a note when the scenario shares prefixes in a way a result file cannot replay."""
    wl = body.workload
    if not wl.classes:
        return 0, None
    shared = [c for c in wl.classes if c.prompt.shared_prefix_tokens or c.prompt.few_shot]
    if not shared:
        return 0, None
    if len(wl.classes) == 1 and wl.prefix_header != "timestamp" and wl.classes[0].prompt.num_prefix_groups == 1 \
            and wl.classes[0].prompt.few_shot is None and wl.prefix_header == "none":
        return wl.classes[0].prompt.shared_prefix_tokens, None
    return 0, ("the scenario's prompts share prefixes in a way the result file cannot say (several classes or "
               "prefix groups); the fit replays unique prompts: give --shared-prefix-tokens N if all measured "
               "prompts began with the same N tokens")


def ttft_distance(measured_s: np.ndarray, simulated_s: np.ndarray, scale_s: float) -> float:
    """Mean absolute difference of the two TTFT distributions' percentiles, relative to ``scale_s``."""
    if simulated_s.size == 0:
        return math.inf
    a = np.quantile(measured_s, QUANTILES)
    b = np.quantile(simulated_s, QUANTILES)
    return float(np.abs(a - b).mean()) / scale_s if scale_s > 0 else math.inf


@dataclass
class Candidate:
    max_num_seqs: int
    label: str
    uncapped: bool
    speed_factor: float
    score: float
    sim_ttft_s: np.ndarray = field(repr=False)
    sim_median_tpot_s: float | None = None
    num_preemptions: int = 0
    cap_share: float = 0.0        # share of the simulated busy time the cap held with a queue
    prefix_caching: bool = True
    sim_hit_rate: float | None = None
    result: Any = field(default=None, repr=False)
    deployment: Any = field(default=None, repr=False)
    ttft_distance: float | None = None   # the score's parts (``cap_fit_score``): TTFT distance + TPOT miss
    tpot_term: float = 0.0

    @property
    def binds(self) -> bool:
        """The cap holds in its own simulation (else it is as good as no cap)."""
        return not self.uncapped and self.cap_share >= CAP_BINDS

    def as_dict(self) -> dict[str, Any]:
        return {"max_num_seqs": self.max_num_seqs, "label": self.label, "uncapped": self.uncapped,
                "binds": self.binds, "cap_share": self.cap_share, "prefix_caching": self.prefix_caching,
                "sim_hit_rate": self.sim_hit_rate, "speed_factor": self.speed_factor, "score": self.score,
                "sim_median_tpot_ms": None if self.sim_median_tpot_s is None else self.sim_median_tpot_s * 1e3,
                "num_preemptions": self.num_preemptions, "ttft_distance": self.ttft_distance,
                "tpot_term": self.tpot_term}


@dataclass
class Fit:
    candidates: list[Candidate]
    best: Candidate
    runner_up: Candidate | None   # the best candidate with another cap conclusion
    margin: float                 # 1 - d_best / d_runner_up
    log_likelihood_ratio: float   # n ln(d_runner_up / d_best), distances floored
    confidence: str               # high | medium | low
    closed_loop: bool
    concurrency: int | None
    prefix_alternative: Candidate | None = None   # the best candidate with the other prefix-caching setting
    prefix_margin: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"candidates": [c.as_dict() for c in self.candidates], "best": self.best.as_dict(),
                "runner_up": self.runner_up.as_dict() if self.runner_up else None, "margin": self.margin,
                "log_likelihood_ratio": self.log_likelihood_ratio, "confidence": self.confidence,
                "closed_loop": self.closed_loop, "concurrency": self.concurrency,
                "prefix_alternative": self.prefix_alternative.as_dict() if self.prefix_alternative else None,
                "prefix_margin": self.prefix_margin}


def _replay(specs: list[RequestSpec], m: Measured) -> Any:
    """The measured requests as the client sent them: a closed loop of ``max_concurrency`` streams at an unbounded
    (or unrecorded) request rate; at a finite rate with ``max_concurrency``, each request due at its measured send
    time and sent when one of the ``max_concurrency`` slots is free (``vllm bench serve --request-rate R
    --max-concurrency C``, ``twin.workload.capped_open_loop``); else at the measured send times."""
    from twin.workload.capped_open_loop import CappedOpenLoop

    if not m.max_concurrency:
        return specs
    if _closed_loop(m):
        return _ClosedReplay(specs, m.max_concurrency)
    return CappedOpenLoop(specs, m.max_concurrency)


def _closed_loop(m: Measured) -> bool:
    return bool(m.max_concurrency) and (m.request_rate is None or math.isinf(m.request_rate))


def _simulate(specs: list[RequestSpec], body: Any, dep: Any, m: Measured, factor: float, base_dir: Any):
    from twin.sim.deployment import make_router
    from twin.core.schedulers import make_scheduler
    from twin.sim.simulate import simulate
    from twin.spec_decode import speculator_factory

    traffic = _replay(specs, m)
    make_spec = None
    if body.speculative_decoding is not None and dep.drafter is not None:
        make_spec = speculator_factory(body.speculative_decoding, dep.drafter, body.seed)
    return simulate(traffic, lambda i: make_scheduler(dep.scheduler_config, dep.num_gpu_blocks),
                    lambda i: ScaledCostModel(dep.cost_model_factory(), factor),
                    num_replicas=body.deployment.replicas, router=make_router(body.deployment.router),
                    make_speculator=make_spec, max_time_s=body.max_sim_time_s, seed=body.seed)


def _sim_arrays(result: Any) -> tuple[np.ndarray, float | None]:
    from twin.results.records import FINISHED

    fin = [r for r in result.requests if r.status == FINISHED]
    ttft = np.array([r.ttft_s for r in fin], float)
    tpot = [r.tpot_s for r in fin if r.tpot_s is not None]
    return ttft, float(np.median(tpot)) if tpot else None


def candidate_caps(offered: int, measured_ceiling: int | None, extra: Sequence[int] = ()) -> list[int]:
    caps = {1}
    c = 1
    while c < offered:
        c *= 2
        caps.add(c)
    if measured_ceiling:
        caps.add(int(measured_ceiling))
    caps.update(int(x) for x in extra if x >= 1)
    return sorted(caps)


def _confidence(margin: float, score: float) -> str:
    if margin >= 0.5 and score <= 0.15:
        return "high"
    if margin >= 0.2 and score <= 0.3:
        return "medium"
    return "low"


def fit_max_num_seqs(m: Measured, prof: Profile, body: Any, base_dir: Path | None = None,
                     candidates: Sequence[int] | None = None, fit_speed: bool = True,
                     shared_prefix_tokens: int = 0) -> Fit:
    """Simulate the measured requests at each candidate ``max_num_seqs`` (and, when the replayed prompts share
    a prefix, with prefix caching on and off); the best TTFT match wins."""
    from twin.sim.deployment import resolve_deployment
    from twin.analysis.causes import CONCURRENCY_CAP as CAP_KEY
    from twin.analysis.causes import limit_shares

    closed = m.max_concurrency
    offered = closed or prof.max_in_flight
    caps = list(candidates) if candidates else candidate_caps(offered, prof.max_decoding if prof.cap_evidence
                                                             else None)
    specs = measured_specs(m, shared_prefix_tokens)
    scale = float(m.e2el_s.mean())
    measured_tpot = prof.median_tpot_s
    share_decoding = decode_share(m.ttft_s, m.e2el_s)
    caching_options = [body.server.enable_prefix_caching]
    if shared_prefix_tokens > 0:
        caching_options = [True, False]
    results: list[Candidate] = []
    for caching in caching_options:
        seen_uncapped = False
        for cap in sorted(set(caps)):
            uncapped = cap >= offered
            if uncapped and seen_uncapped:
                continue  # every cap at or above the offered concurrency behaves the same
            seen_uncapped = seen_uncapped or uncapped
            updates: dict[str, Any] = {"max_num_seqs": cap, "enable_prefix_caching": caching}
            if body.server.max_num_batched_tokens is not None and body.server.max_num_batched_tokens < cap:
                updates["max_num_batched_tokens"] = cap
            cbody = body.model_copy(update={"server": body.server.model_copy(update=updates)})
            try:
                dep = resolve_deployment(cbody, base_dir)
            except TwinInputError as exc:
                raise TwinInputError(f"fitting max_num_seqs = {cap}: {exc}") from None
            def simulate_at(factor: float, cbody: Any = cbody, dep: Any = dep) -> Simulation:
                result = _simulate(specs, cbody, dep, m, factor, base_dir)
                return (result, *_sim_arrays(result))

            factor, (result, ttft, tpot) = fit_speed_factor(simulate_at, measured_tpot, fit_speed)
            label = f">= {offered} (no cap below the load)" if uncapped else str(cap)
            if len(caching_options) > 1:
                label += f", prefix caching {'on' if caching else 'off'}"
            share = float(limit_shares(result, dep.scheduler_config).get(CAP_KEY, 0.0))
            hits = None
            if caching and result.prefix_cache_query_tokens:
                hits = result.prefix_cache_hit_tokens / result.prefix_cache_query_tokens
            distance = ttft_distance(m.ttft_s, ttft, scale)
            miss = tpot_term(measured_tpot, tpot, share_decoding) if fit_speed else 0.0
            results.append(Candidate(cap, label, uncapped, factor, distance + miss, ttft, tpot,
                                     int(result.num_preemptions or 0), share, caching, hits, result, dep,
                                     ttft_distance=distance, tpot_term=miss))
    ranked = sorted(results, key=lambda c: (c.score, c.max_num_seqs, not c.prefix_caching))
    best = ranked[0]
    same = [c for c in ranked[1:] if c.prefix_caching == best.prefix_caching]
    # the runner-up leads to another conclusion: another binding cap, or (when the best cap binds) no cap
    if best.binds:
        others = [c for c in same if c.max_num_seqs != best.max_num_seqs]
    else:
        others = [c for c in same if c.binds]
    runner = others[0] if others else None
    floor = 0.005
    if runner is None:
        margin, llr = 1.0, math.inf
    else:
        margin = max(0.0, 1.0 - best.score / runner.score) if runner.score > 0 else 0.0
        llr = len(m) * math.log(max(runner.score, floor) / max(best.score, floor))
    alt = next((c for c in ranked if c.prefix_caching != best.prefix_caching), None)
    alt_margin = (max(0.0, 1.0 - best.score / alt.score) if alt is not None and alt.score > 0 else None)
    return Fit(results, best, runner, margin, llr, _confidence(margin, best.score), _closed_loop(m), closed,
               alt, alt_margin)


__all__ = ["CAP_BINDS", "QUANTILES", "Candidate", "Fit", "ScaledCostModel", "candidate_caps", "fit_max_num_seqs",
           "measured_specs", "scenario_shared_prefix", "ttft_distance"]
