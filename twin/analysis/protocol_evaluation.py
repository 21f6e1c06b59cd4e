"""The protocol's evaluations: one configuration (overrides over a scenario's variant), run with replications.

A ``Runner`` merges a configuration's overrides over the protocol's base overrides (``merge_overrides``, which
keeps ``_replace`` markers where a whole section must still replace the scenario's), resolves its deployment once
and runs it ``replications`` times (seeds ``seed .. seed + n - 1``), caching by overrides so two steps asking for
the same configuration share its runs. An ``Evaluation`` holds those runs and their metrics; ``first_hit_rate``
counts prefix-cache hits at each request's first admission. Everything above (the verdict helpers, the steps,
the report) reads evaluations and never runs the twin itself.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from twin.errors import TwinInputError
from twin.results.replications import replicate_summary
from twin.results.sim_result import SimResult
from twin.scenario import Scenario, ScenarioBody
from twin.yaml_input import REPLACE_MARKER
from twin.sim.deployment import Deployment, resolve_deployment
from twin.sim.run import metrics_of, run_body


def merge_overrides(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Two override mappings merged into one that ``Scenario.body`` merges later: like ``deep_merge``, but a
    mapping marked ``_replace: true`` keeps its marker (it must still replace the scenario's section)."""
    out = copy.deepcopy(dict(base))
    inside_replaced = out.get(REPLACE_MARKER) is True
    for key, value in extra.items():
        if isinstance(value, Mapping) and value.get(REPLACE_MARKER) is True:
            # inside a section that replaces wholesale, a nested marker would reach the validator
            out[key] = _strip_markers(value) if inside_replaced else copy.deepcopy(dict(value))
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_overrides(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _strip_markers(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _strip_markers(v) for k, v in value.items() if k != REPLACE_MARKER}
    return copy.deepcopy(value)


@dataclass
class Evaluation:
    label: str
    overrides: dict[str, Any]
    body: ScenarioBody
    deployment: Deployment
    runs: list[tuple[SimResult, dict[str, Any]]]
    measured: dict[str, Any] | None = None   # engine metrics (engine mode)

    @property
    def result(self) -> SimResult:
        return self.runs[0][0]

    @property
    def metrics(self) -> dict[str, Any]:
        return self.runs[0][1]

    @property
    def summary(self) -> dict[str, dict]:
        return replicate_summary([m for _, m in self.runs])

    def mean(self, key: str) -> float | None:
        vals = [m.get(key) for _, m in self.runs]
        vals = [float(v) for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]
        return float(np.mean(vals)) if vals else None


class Runner:
    """Runs configurations (overrides over the scenario's variant) with replications, once each."""

    def __init__(self, scenario: Scenario, variant: str, base_overrides: dict[str, Any], replications: int,
                 progress: Callable[[str], None] | None = None) -> None:
        self.scenario = scenario
        self.variant = variant
        self.base_overrides = base_overrides
        self.replications = replications
        self.progress = progress
        self.evaluations: dict[str, Evaluation] = {}
        self._by_key: dict[str, Evaluation] = {}

    def body(self, overrides: dict[str, Any]) -> ScenarioBody:
        merged = merge_overrides(self.base_overrides, overrides) if overrides else self.base_overrides
        body = self.scenario.body(self.variant, merged)
        return body.model_copy(update={"replications": self.replications})

    def evaluate(self, name: str, overrides: dict[str, Any]) -> Evaluation:
        key = json.dumps(overrides, sort_keys=True, default=str)
        if key in self._by_key:
            ev = self._by_key[key]
            self.evaluations.setdefault(name, ev)
            return ev
        body = self.body(overrides)
        try:
            dep = resolve_deployment(body, self.scenario.base_dir)
        except TwinInputError as exc:
            raise TwinInputError(f"{self.scenario.source} [{name}]: {exc}") from None
        runs = []
        for r in range(self.replications):
            if self.progress:
                self.progress(f"{name} (replication {r + 1}/{self.replications})")
            result = run_body(body, self.scenario.base_dir, replication=r, deployment=dep)
            runs.append((result, metrics_of(result, body)))
        ev = Evaluation(name, overrides, body, dep, runs)
        self._by_key[key] = ev
        self.evaluations[name] = ev
        return ev


def first_hit_rate(ev: Evaluation) -> float:
    """Prefix-cache hits at each request's first admission / prompt tokens, over the replications. (vLLM's
    counters also count a preempted request's re-admission, which hits its own blocks: not the traffic's
    sharing.)"""
    from twin.results.records import FINISHED

    rates = []
    for result, _ in ev.runs:
        done = [r for r in result.requests if r.status == FINISHED]
        prompt = sum(r.num_prompt_tokens for r in done)
        if prompt:
            rates.append(sum(max(r.num_cached_tokens, 0) for r in done) / prompt)
    return float(np.mean(rates)) if rates else 0.0


__all__ = ["Evaluation", "Runner", "first_hit_rate", "merge_overrides"]
