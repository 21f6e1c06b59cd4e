"""The 30-minute protocol: before buying GPUs, check the serving stack, one change at a time.

Given a deployment and its traffic (a scenario's baseline or variant, or a trace), the twin walks the levers in
the order they usually pay off, predicting each against the *current* configuration:

1. **Baseline**: the metrics as the server runs today, and which limit binds (``twin.analysis.causes``).
2. **Scheduler limits**: does ``max_num_seqs`` (or ``max_num_batched_tokens``, or static batching) hold the
   running batch below the offered load while requests queue? What does lifting it give?
3. **Prefix caching**: the hit rate the traffic's prompts allow (an unbounded-cache oracle,
   ``twin.analysis.prefixes``) against the hit rate achieved; prompts that defeat the cache (a unique first
   segment such as a timestamp header in front of shared content) are flagged, and fixing them is predicted.
4. **Speculative decoding**: gain or loss per task class and concurrency (closed-loop streams of one class, with
   and without drafting), and on the scenario's own traffic. Without a ``speculative_decoding:`` section an
   EAGLE drafter with 3 draft tokens and per-class acceptance rates typical of EAGLE on an 8B model is assumed,
   and the report says so.
5. **The combination** of every recommended change.

Every configuration runs ``replications`` times (seeds ``seed .. seed + n - 1``); a step's deltas are taken per
replication against the baseline run with the same seed (common random numbers) and summarised with
``twin.results.replications.replicate_summary``: mean and a 95 % Student-t interval. Each step carries the
``vllm serve`` / ``vllm bench serve`` lines that measure it on the real server (``twin.analysis.vllm_commands``).

With ``engine="cpu"`` (a tiny model and a calibrated profile, e.g. ``scenarios/validate_tiny_cpu.yaml``) every
step without speculative decoding is also served for real on the calibration engine
(``calibration.validation_run``), and the report shows measured beside predicted.

Where the pieces live: configurations and their replications in ``protocol_evaluation``, the verdict vocabulary and
the delta statistics in ``protocol_verdicts``, the ``Step`` record and the shared walk in ``protocol_walk``, the
steps in ``protocol_limits`` (1, 2), ``protocol_prefix_caching`` (3) and ``protocol_speculation`` (4), engine mode
in ``protocol_engine``; this module holds the combination (5), the ``ProtocolReport`` and the entry point.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from twin.analysis.protocol_engine import measure_on_engine
from twin.analysis.protocol_evaluation import Evaluation, Runner, merge_overrides
from twin.analysis.protocol_limits import baseline_step, scheduler_limits_step
from twin.analysis.protocol_prefix_caching import prefix_caching_step
from twin.analysis.protocol_speculation import speculative_decoding_step
from twin.analysis.protocol_verdicts import (
    ADVISE_AGAINST,
    HEADLINE_KEYS,
    NO_CHANGE,
    RECOMMEND,
    compare,
    delta_text,
    effect,
)
from twin.analysis.protocol_walk import ProtocolWalk, Step, headline, offered_load
from twin.errors import TwinInputError
from twin.results.report import format_value
from twin.scenario import BASELINE, Scenario
from twin.sim.deployment import require_single_deployment


@dataclass
class ProtocolReport:
    scenario: str
    source: str
    variant: str
    replications: int
    seed: int
    headline: str
    offered_load: str
    steps: list[Step]
    assumptions: list[str]
    evaluations: dict[str, Evaluation]
    engine: str | None = None
    command_notes: list[str] = field(default_factory=list)

    def step(self, key: str) -> Step:
        for s in self.steps:
            if s.key == key:
                return s
        raise KeyError(key)

    @property
    def recommendations(self) -> list[Step]:
        return [s for s in self.steps if s.verdict == RECOMMEND and s.key != "combination"]

    def as_dict(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "source": self.source, "variant": self.variant,
                "replications": self.replications, "seed": self.seed, "headline": self.headline,
                "offered_load": self.offered_load, "assumptions": self.assumptions, "engine": self.engine,
                "command_notes": self.command_notes,
                "steps": [s.as_dict() for s in self.steps],
                "evaluations": {name: {"overrides": ev.overrides, "metrics": _plain_metrics(ev.metrics),
                                       "replications": ev.summary, "measured": ev.measured}
                                for name, ev in self.evaluations.items()}}


def _plain_metrics(m: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in m.items() if isinstance(v, (int, float, str, bool)) or v is None}


def combination_step(walk: ProtocolWalk, base: Evaluation) -> Step:
    step = Step("combination", "The combination", "All recommended changes together?")
    changes = [s for s in walk.steps if s.change and s.verdict in (RECOMMEND, ADVISE_AGAINST)]
    if not changes:
        step.verdict = NO_CHANGE
        base_step = walk.steps[0]
        if base_step.details.get("saturated"):
            step.finding = ("Nothing to change in the serving stack: requests queue on the GPU itself; more or "
                            "faster GPUs (twin plan) are the lever here.")
        else:
            step.finding = ("Nothing to change: the server keeps up with this load and none of the levers gains "
                            "clearly.")
        walk.steps.append(step)
        return step
    merged: dict[str, Any] = {}
    for s in changes:
        merged = merge_overrides(merged, s.change)
    sc = base.deployment.scheduler_config
    server = merged.get("server") or {}
    if "max_num_seqs" in server and "max_num_batched_tokens" not in server and \
            sc.max_num_batched_tokens < server["max_num_seqs"]:
        server["max_num_batched_tokens"] = server["max_num_seqs"]
    cand = walk.runner.evaluate("combination", merged)
    deltas = compare(base, cand)
    step.change, step.candidate, step.deltas = merged, cand.label, deltas
    step.change_label = "; ".join(s.change_label for s in changes)
    good = any(effect(deltas, k) > 0 for k in HEADLINE_KEYS + ("mean_ttft_ms",))
    step.verdict = RECOMMEND if good else NO_CHANGE
    alone = ""
    if len(changes) > 1:
        alone = " Each change alone: " + "; ".join(
            f"{s.change_label}: {delta_text('output_throughput', s.deltas)}" for s in changes) + "."
    step.finding = (f"Together ({step.change_label}): {walk.headline_deltas(deltas)}.{alone}")
    walk.add_commands(step, cand, "combination")
    walk.steps.append(step)
    return step


def run_protocol(scenario: Scenario, *, scenario_arg: str | None = None, variant: str = BASELINE,
                 overrides: dict[str, Any] | None = None, replications: int = 3, seed: int | None = None,
                 spec_concurrency: list[int] | None = None, engine: str | None = None,
                 engine_duration_s: float | None = None,
                 progress: Callable[[str], None] | None = None) -> ProtocolReport:
    """Run the protocol on ``scenario``'s ``variant`` (with ``overrides``); see the module docstring."""
    if replications < 1:
        raise TwinInputError(f"--replications: must be >= 1 (got {replications})")
    base_overrides = copy.deepcopy(overrides or {})
    if seed is not None:
        base_overrides["seed"] = seed
    if engine_duration_s is not None:
        base_overrides = merge_overrides(base_overrides, {"workload": {"duration_s": engine_duration_s}})
    require_single_deployment(scenario.body(variant, base_overrides), "twin protocol (it varies one server's "
                              "settings)", scenario.source)
    if engine:
        body = scenario.body(variant, base_overrides)
        if body.cost_model.kind != "profile":
            raise TwinInputError("--engine: the scenario's cost_model must be a calibrated profile (kind: profile), "
                                 "e.g. scenarios/validate_tiny_cpu.yaml")
    runner = Runner(scenario, variant, base_overrides, replications, progress)
    proto = ProtocolWalk(scenario, scenario_arg or scenario.source, variant, runner, spec_concurrency)
    base, diag = baseline_step(proto)
    scheduler_limits_step(proto, base, diag)
    prefix_caching_step(proto, base)
    speculative_decoding_step(proto, base)
    combination_step(proto, base)
    if engine:
        measure_on_engine(proto.steps, runner, engine, progress)
    load, _ = offered_load(base.body)
    return ProtocolReport(scenario.name, scenario.source, variant, replications, base.body.seed,
                          headline(base.body, base.deployment), load, proto.steps, proto.assumptions,
                          runner.evaluations, engine, proto.command_notes)


def format_metric(key: str, value: Any) -> str:
    return format_value(key, value)


__all__ = ["ProtocolReport", "combination_step", "run_protocol"]
