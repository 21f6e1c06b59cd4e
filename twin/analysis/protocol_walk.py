"""One protocol step's record (``Step``), and the walk that the steps share (``ProtocolWalk``).

A ``Step`` holds the question a lever asks, the verdict and finding, the recommended overrides, the candidate
evaluation compared with the baseline and its deltas, details for the report, and the ``vllm serve`` / ``vllm
bench serve`` / ``twin validate`` lines that measure it on the real server (``twin.analysis.vllm_commands``). The
``ProtocolWalk`` carries what the steps share: the scenario, its runner, the steps so far (the combination reads
them), the assumptions and the notes on the commands. ``headline`` and ``offered_load`` put the deployment and its
traffic into words.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from twin.analysis.protocol_evaluation import Evaluation, Runner, merge_overrides
from twin.analysis.protocol_verdicts import HEADLINE_KEYS, NO_CHANGE, delta_text
from twin.analysis.vllm_commands import bench_commands, serve_command, validate_command
from twin.scenario import Scenario, ScenarioBody
from twin.sim.deployment import Deployment


@dataclass
class Step:
    key: str
    title: str
    question: str
    verdict: str = NO_CHANGE
    finding: str = ""
    change: dict[str, Any] = field(default_factory=dict)      # the recommended overrides
    change_label: str = ""
    candidate: str | None = None                               # evaluation compared with the baseline
    deltas: dict[str, dict] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    measured: dict[str, Any] | None = None                     # engine mode: measured metrics and deltas

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "title": self.title, "question": self.question, "verdict": self.verdict,
                "finding": self.finding, "change": self.change, "change_label": self.change_label,
                "candidate": self.candidate, "deltas": self.deltas, "details": self.details,
                "commands": self.commands, "notes": self.notes, "measured": self.measured}


def headline(body: ScenarioBody, dep: Deployment) -> str:
    sc = dep.scheduler_config
    spec = body.speculative_decoding
    return (f"{body.deployment.model} on {body.deployment.replicas}x{body.deployment.tensor_parallel_size} "
            f"{dep.gpu.name}: {sc.scheduler} scheduler, max_num_seqs={sc.max_num_seqs}, "
            f"max_num_batched_tokens={sc.max_num_batched_tokens}, prefix caching "
            f"{'on' if sc.enable_prefix_caching else 'off'}, speculative decoding "
            f"{f'{spec.method} k={spec.num_speculative_tokens}' if spec else 'off'}")


def offered_load(body: ScenarioBody) -> tuple[str, int | None]:
    """Words for the traffic's load, and its concurrency when it is closed-loop."""
    wl = body.workload
    arr = wl.arrivals
    if arr is None:
        return f"the trace {wl.trace.path} at its own arrival times", None
    if arr.process == "closed_loop":
        return f"{arr.concurrency} closed-loop streams", arr.concurrency
    if arr.process == "piecewise":
        return "a piecewise arrival rate", None
    return f"{arr.rate_per_s:g} req/s ({arr.process} arrivals)", None


class ProtocolWalk:
    """The protocol under way: its runner, the steps taken so far, the assumptions made and the notes on the
    commands; each step function appends its ``Step`` here."""

    def __init__(self, scenario: Scenario, scenario_arg: str, variant: str, runner: Runner,
                 spec_concurrency: list[int] | None) -> None:
        self.scenario = scenario
        self.scenario_arg = scenario_arg
        self.variant = variant
        self.runner = runner
        self.spec_concurrency = spec_concurrency
        self.assumptions: list[str] = []
        self.command_notes: list[str] = []
        self.steps: list[Step] = []

    def num_prompts(self, ev: Evaluation) -> int:
        return int(round(ev.mean("completed") or ev.metrics.get("num_requests") or 1))

    def add_commands(self, step: Step, ev: Evaluation, name: str) -> None:
        """The ``vllm serve``, ``vllm bench serve`` and ``twin validate`` lines that measure ``ev``, onto ``step``."""
        from twin.results.records import FINISHED

        done = [r for r in ev.result.requests if r.status == FINISHED]
        lengths = rate = None
        if done:
            lengths = (int(round(np.mean([r.num_prompt_tokens for r in done]))),
                       int(round(np.mean([r.num_output_tokens for r in done]))))
            span = max(r.arrival_s for r in done) - min(r.arrival_s for r in done)
            rate = len(done) / span if span > 0 else None
        cmds, notes = bench_commands(ev.body, ev.deployment, num_prompts=self.num_prompts(ev), result_name=name,
                                     base_dir=self.scenario.base_dir, mean_lengths=lengths, mean_rate=rate)
        step.commands = [serve_command(ev.body, ev.deployment), *cmds]
        overrides = merge_overrides(self.runner.base_overrides, ev.overrides) if ev.overrides else \
            self.runner.base_overrides
        step.commands.append(validate_command(self.scenario_arg, self.variant, overrides,
                                              f"results/{name}.json" if len(cmds) == 1 else
                                              f"results/{name}-<class>.json"))
        self.command_notes += [n for n in notes if n not in self.command_notes]

    def headline_deltas(self, deltas: Mapping[str, dict], keys: tuple[str, ...] = HEADLINE_KEYS) -> str:
        """The changes of ``keys`` in words, for a finding."""
        return "; ".join(delta_text(k, deltas) for k in keys if deltas.get(k))


__all__ = ["ProtocolWalk", "Step", "headline", "offered_load"]
