"""``twin diagnose``: the likely causes behind measured latencies, as a ``DiagnoseReport``.

From the measurements' profile (``measured_profile``) and, given a scenario, the twin fitted to them
(``cap_fit``), it names: **a concurrency cap** (``max_num_seqs``: requests queue while the decoding count sits at
a ceiling below the number in flight, or the fitted cap binds); **queueing against saturated service** (queueing
without such a ceiling; the fitted twin's verdict, ``twin.analysis.causes``, says whether the steps are compute- or
memory-bound, or the token budget binds); **KV-capacity preemption** (mid-stream stalls in the inter-token
latencies, confirmed when the fitted twin preempts too, or a ceiling the twin puts down to KV capacity); **a
prefix-cache hit rate below what the traffic allows** (the measured hit rate, from the file or ``--hit-rate``,
against the scenario traffic's oracle, ``twin.analysis.prefixes``, or, without one, the fit with caching on and
off, or whether unqueued TTFTs look like a full prefill or a cached one). Each cause carries its evidence and fix.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from twin.results import numbers
from twin.results.numbers import counted
from twin.analysis.cap_fit import Fit, fit_max_num_seqs, scenario_shared_prefix
from twin.analysis.measured import Measured
from twin.analysis.measured_profile import QUEUED_SHARE, STALL_FACTOR, Profile, profile

CONCURRENCY_CAP = "concurrency_cap"
SATURATED = "saturated_service"
KV_PREEMPTION = "kv_preemption"
PREFIX_CACHE = "prefix_cache_miss"
NONE = "none"


@dataclass
class Cause:
    kind: str
    title: str
    likelihood: str          # likely | possible
    evidence: list[str]
    fix: str

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class DiagnoseReport:
    source: str
    num_requests: int
    profile: Profile
    fit: Fit | None
    causes: list[Cause]
    cap: int | None
    offered_concurrency: int
    queued_streams: int | None
    measured: Measured = field(repr=False)
    notes: list[str] = field(default_factory=list)
    prefix: dict[str, Any] | None = None
    scenario: str | None = None

    @property
    def summary(self) -> str:
        if not self.causes or self.causes[0].kind == NONE:
            return self.causes[0].title if self.causes else "No cause found."
        return self.causes[0].title

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "scenario": self.scenario, "num_requests": self.num_requests,
                "cap": self.cap, "offered_concurrency": self.offered_concurrency,
                "queued_streams": self.queued_streams, "summary": self.summary,
                "causes": [c.as_dict() for c in self.causes], "profile": self.profile.as_dict(),
                "fit": self.fit.as_dict() if self.fit else None, "prefix": self.prefix, "notes": self.notes}


def _verb(n: int, verb: str) -> str:
    """A present-tense verb agreeing with a count: ``1 request stalls``, ``3 requests stall``."""
    return f"{verb}s" if n == 1 else verb


def _ms(s: float | None) -> str:
    return "-" if s is None else numbers.duration_s(s)


def _waves_text(prof: Profile) -> str:
    parts = [f"{k} x ({counted(v, 'request')})" for k, v in prof.waves.items() if k >= 1]
    return ", ".join(parts)


class _Shape:
    def __init__(self, new: int, before: int) -> None:
        self.num_new_tokens, self.num_computed_before, self.num_spec_tokens = [new], [before], [0]


def _prefix_check(m: Measured, body: Any, base_dir: Path | None, prof: Profile, fit: Fit | None,
                  hit_rate: float | None) -> tuple[Cause | None, dict[str, Any] | None]:
    """Is the prefix-cache hit rate below what the scenario's traffic allows?"""
    from twin.sim.deployment import resolve_deployment
    from twin.analysis.prefixes import analyze_prefixes, workload_specs

    dep = fit.best.deployment if fit else resolve_deployment(body, base_dir)
    bs = dep.scheduler_config.block_size
    pa = analyze_prefixes(workload_specs(body.workload, body.seed, base_dir), bs)
    info: dict[str, Any] = pa.as_dict()
    attain = pa.attainable_hit_rate
    measured = hit_rate if hit_rate is not None else m.hit_rate
    info["measured_hit_rate"] = measured
    if attain < 0.05 and not pa.defeated:
        return None, info
    evidence: list[str] = []
    likely = "possible"
    if measured is not None:
        if measured < attain - 0.10:
            evidence.append(f"measured hit rate {measured:.0%} against the {attain:.0%} the scenario's traffic "
                            f"allows (unbounded-cache oracle)")
            likely = "likely"
    elif fit is not None and fit.prefix_alternative is not None:
        on = fit.best if fit.best.prefix_caching else fit.prefix_alternative
        off = fit.prefix_alternative if fit.best.prefix_caching else fit.best
        info.update(fit_score_caching_on=on.score, fit_score_caching_off=off.score)
        if not fit.best.prefix_caching:
            evidence.append(f"the measured TTFTs fit a server whose prefix cache does not hit (distance "
                            f"{off.score:.1%} of the mean latency) better than one that hits "
                            f"{on.sim_hit_rate or 0:.0%} of prompt tokens ({on.score:.1%}); no hit rate was "
                            f"measured: pass --hit-rate (vLLM's prefix_cache_hits / prefix_cache_queries) to be sure")
            likely = "likely" if (fit.prefix_margin or 0) >= 0.3 else "possible"
    else:
        # neither a hit rate nor a prefix replay: do unqueued TTFTs look like a full prefill or a cached one?
        factor = fit.best.speed_factor if fit else 1.0
        cost = dep.cost_model_factory()
        p = int(np.median(m.input_lens))
        h = min(p - 1, int(attain * p) // bs * bs)
        full = factor * cost.step_time_s(_Shape(p, 0))
        cached = factor * cost.step_time_s(_Shape(p - h, h))
        fast = m.ttft_s[m.ttft_s <= 2 * prof.ttft_floor_s + 0.05 * prof.service_s]
        seen = float(np.median(fast)) if fast.size else prof.ttft_floor_s
        info.update(full_prefill_s=full, cached_prefill_s=cached, unqueued_ttft_s=seen)
        if full >= 1.5 * cached and abs(seen - full) < abs(seen - cached):
            evidence.append(f"unqueued TTFTs (median {_ms(seen)}) look like a full prefill of the median "
                            f"{p}-token prompt ({_ms(full)}) rather than one served {h} tokens from the cache "
                            f"({_ms(cached)}); no hit rate was measured: pass --hit-rate to be sure")
    if pa.defeated:
        evidence.append(f"{pa.unique_head_share:.0%} of the scenario's prompts start with {pa.head_kind} in front "
                        f"of shared content: as sent they allow {attain:.0%}, with it moved behind the shared part "
                        f"{pa.attainable_without_head_rate:.0%}")
    if not evidence:
        return None, info
    fix = ("--enable-prefix-caching; keep per-request content (timestamps, ids) out of the prompt's first block; "
           "with several replicas, route by prefix")
    allowed = pa.attainable_without_head_rate if pa.defeated else attain
    return Cause(PREFIX_CACHE, f"Prefix-cache hit rate below what the traffic allows ({allowed:.0%} attainable)",
                 likely, evidence, fix), info


def diagnose_measured(m: Measured, body: Any = None, base_dir: Path | None = None, *,
                      candidates: Sequence[int] | None = None, fit_speed: bool = True,
                      hit_rate: float | None = None, scenario: str | None = None,
                      shared_prefix_tokens: int | None = None) -> DiagnoseReport:
    """The causes behind ``m`` (with the twin fitted on ``body``'s deployment when one is given)."""
    from twin.analysis.causes import KV_CAPACITY, LIMIT_NAMES
    from twin.analysis.causes import diagnose as twin_verdict

    prof = profile(m)
    notes = list(m.notes)
    fit = None
    if body is not None:
        if shared_prefix_tokens is None:
            shared_prefix_tokens, note = scenario_shared_prefix(body)
            if note:
                notes.append(note)
        fit = fit_max_num_seqs(m, prof, body, base_dir, candidates, fit_speed, shared_prefix_tokens or 0)
    offered = m.max_concurrency or prof.max_in_flight
    unit = "streams" if m.max_concurrency else "in-flight requests"
    causes: list[Cause] = []
    cap = None
    queued = None
    verdict = twin_verdict(fit.best.result, fit.best.deployment) if fit is not None else None
    fit_capped = fit is not None and fit.best.binds
    kv_ceiling = (prof.cap_evidence and fit is not None and not fit_capped and verdict is not None
                  and verdict.limit == KV_CAPACITY)
    if (prof.cap_evidence and not kv_ceiling) or fit_capped:
        cap = fit.best.max_num_seqs if fit_capped else prof.max_decoding
        if prof.cap_evidence and fit_capped and fit.best.max_num_seqs != prof.max_decoding:
            notes.append(f"the measured ceiling ({prof.max_decoding} decoding at once) and the fitted max_num_seqs "
                         f"({fit.best.max_num_seqs}) differ; replicas, or a KV limit, can blur the ceiling")
        replicas = body.deployment.replicas if body is not None else 1
        queued = max(0, offered - cap * replicas)
        ev: list[str] = []
        if prof.staircase:
            levels = [k for k in prof.waves if k >= 1]
            counts = [str(prof.waves[k]) for k in levels]
            ev.append(f"TTFT staircase: waits cluster at {', '.join(f'{k}x' for k in levels)} the "
                      f"{numbers.duration_s(prof.service_s)} service time ({', '.join(counts)} requests; {prof.on_step_share:.0%} "
                      f"of all requests sit on a step)")
        if prof.burst_size > prof.burst_fast > 0:
            ev.append(f"of the {prof.burst_size} requests sent at the start, {prof.burst_fast} got a first token "
                      f"at once; the others waited for them to finish")
        if prof.cap_evidence:
            ev.append(f"at most {prof.max_decoding} requests decode at once while up to {prof.max_in_flight} are "
                      f"in flight; whenever requests queue ({prof.queued_share:.0%} of the time) "
                      f"{prof.max_decoding} decode for {prof.pinned_share:.0%} of it")
        per = f" on each of {replicas} replicas" if replicas > 1 else ""
        ev.append(f"{offered} {unit} against a cap of {cap}{per}: {queued} queue")
        if fit is not None:
            ev.append(_fit_words(fit))
            if not fit_capped:
                ev.append("the fitted twin reproduces the measurements as well without a cap: read the ceiling "
                          "with care")
        likely = "likely" if (fit is None or (fit_capped and fit.confidence != "low")) else "possible"
        causes.append(Cause(CONCURRENCY_CAP, f"Concurrency cap of {cap} sequences (max_num_seqs = {cap}): "
                            f"{queued} of {offered} {unit} queue behind it", likely, ev,
                            f"raise max_num_seqs (vllm serve ... --max-num-seqs N with N >= {offered}; vLLM's "
                            f"default is 1024 on H100-class GPUs, 256 on others) and check KV capacity, or run "
                            f"twin protocol on the scenario"))
    elif kv_ceiling:
        ev = [f"at most {prof.max_decoding} requests decode at once while up to {prof.max_in_flight} are in "
              f"flight, and requests queue {prof.queued_share:.0%} of the time",
              f"the fitted twin: {verdict.verdict}", _fit_words(fit)]
        causes.append(Cause(KV_PREEMPTION, f"KV-cache capacity holds concurrency near {prof.max_decoding}", "likely",
                            ev, "more KV memory: --gpu-memory-utilization, --kv-cache-dtype fp8, tensor "
                                "parallelism, or prefix caching where prompts share prefixes"))
    if not causes and prof.queued_share >= QUEUED_SHARE:
        ev = [f"requests queue {prof.queued_share:.0%} of the time (about {prof.mean_queued:.1f} on average) "
              f"with no fixed ceiling on the requests decoding (up to {prof.max_decoding})"]
        kind_words = "the GPU"
        if verdict is not None:
            ev.append(f"the fitted twin: {verdict.verdict}")
            kind_words = LIMIT_NAMES.get(verdict.limit, verdict.limit)
        if fit is not None:
            ev.append(_fit_words(fit))
        causes.append(Cause(SATURATED, f"Queueing against saturated service ({kind_words})", "likely", ev,
                            "more or faster GPUs, a smaller model or quantization; scheduler knobs help only "
                            "where the fitted twin names one"))
    # KV preemption: mid-stream stalls, confirmed by the fitted twin
    twin_pre = fit.best.num_preemptions if fit is not None else 0
    if not any(c.kind == KV_PREEMPTION for c in causes) and ((prof.stall_requests and twin_pre)
                                                            or twin_pre >= max(1, 0.01 * len(m))):
        ev = []
        if prof.stall_requests:
            ev.append(f"{counted(prof.stall_requests, 'request')} {_verb(prof.stall_requests, 'stall')} mid-stream "
                      f"(an inter-token gap above "
                      f"{STALL_FACTOR:g}x the median ITL of {_ms(prof.median_itl_s)}; the longest "
                      f"{_ms(prof.max_stall_s)}): a preempted request waits and recomputes its context")
        if twin_pre:
            ev.append(f"the fitted twin, with this deployment's KV pool, preempts {counted(twin_pre, 'time')}")
        likely = "likely" if prof.stall_requests and twin_pre else "possible"
        causes.append(Cause(KV_PREEMPTION, "KV-cache capacity: preemptions", likely, ev,
                            "more KV memory: --gpu-memory-utilization, --kv-cache-dtype fp8, tensor parallelism, "
                            "or a lower max_num_seqs so admitted requests keep their blocks"))
    elif prof.stall_requests:
        notes.append(f"{counted(prof.stall_requests, 'request')} {_verb(prof.stall_requests, 'show')} a mid-stream "
                     f"gap above {STALL_FACTOR:g}x the median "
                     f"ITL (longest {_ms(prof.max_stall_s)}): long prefills sharing a step, or a preemption"
                     f"{'' if fit is None else '; the fitted twin does not preempt'}")
    prefix = None
    if body is not None:
        cause, prefix = _prefix_check(m, body, base_dir, prof, fit, hit_rate)
        if cause is not None:
            causes.append(cause)
    elif hit_rate is not None or m.hit_rate is not None:
        given = hit_rate if hit_rate is not None else m.hit_rate
        where = "--hit-rate" if hit_rate is not None else "the results file"
        notes.append(f"the measured prefix-cache hit rate ({given:.1%}, from {where}) is not judged: --scenario "
                     f"SCENARIO describes the traffic, which says what hit rate its prompts allow")
    if not causes:
        ev = [f"no request queued beyond its prefill for long: queued {prof.queued_share:.0%} of the time, "
              f"up to {prof.max_in_flight} in flight and {prof.max_decoding} decoding"]
        if verdict is not None:
            ev.append(f"the fitted twin: {verdict.verdict}")
        if fit is not None:
            ev.append(_fit_words(fit))
        causes.append(Cause(NONE, "No cap and no queueing: the server keeps up with this load; latency is the "
                            "step time", "likely", ev, "faster steps: a faster GPU, quantization, or speculative "
                            "decoding at low concurrency"))
    if fit is not None and abs(math.log(fit.best.speed_factor)) > math.log(1.25):
        notes.append(f"the server's steps take {fit.best.speed_factor:.2f}x the cost model's time (fitted from the "
                     f"median TPOT); for closer predictions fit the twin to these results: twin calibrate "
                     f"--from-results {m.source} --scenario {scenario or 'SCENARIO'}")
    return DiagnoseReport(m.source, len(m), prof, fit, causes, cap, offered, queued, m, notes, prefix, scenario)


def _fit_words(fit: Fit) -> str:
    best = fit.best
    name = best.label if best.binds or best.uncapped else f"{best.label} (it never binds: no cap)"
    text = (f"fit: max_num_seqs = {name} reproduces the measured TTFT distribution best (distance "
            f"{best.score:.1%} of the mean latency")
    if fit.runner_up is not None:
        text += (f"; next best {fit.runner_up.label} at {fit.runner_up.score:.1%}, margin {fit.margin:.0%}, "
                 f"log-likelihood ratio {fit.log_likelihood_ratio:.1f}")
    text += f"; confidence {fit.confidence}"
    if abs(best.speed_factor - 1.0) > 0.02:
        text += f"; steps scaled x{best.speed_factor:.2f} to the measured TPOT"
    if best.tpot_term > 0:
        text += (f"; no step scale tried reproduces the measured median TPOT: {_ms(best.sim_median_tpot_s)} "
                 f"simulated, counted in the distance")
    return text + ")"


__all__ = ["CONCURRENCY_CAP", "KV_PREEMPTION", "NONE", "PREFIX_CACHE", "SATURATED", "Cause", "DiagnoseReport",
           "diagnose_measured"]
