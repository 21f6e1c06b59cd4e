"""The planning question: ``PlanSpec`` (the scenario, the criteria, the target rate, prices, the search space
and the planner's settings) and ``default_space``, the search space when none is given."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from twin.errors import TwinInputError
from twin.hardware.gpus import resolve_gpu
from twin.hardware.pricing import PriceTable
from twin.plan.evaluate import Criteria, check_axis_values, check_metric, validate_body
from twin.scenario import MAX_REPLICAS, ROUTERS

DEFAULT_GPUS = ("H100-SXM", "H200-SXM", "A100-SXM-80GB")
DEFAULT_MAX_NUM_SEQS = (64, 128, 256)


@dataclass
class PlanSpec:
    """What to plan. ``data`` is the complete raw scenario mapping (variant and overrides merged in);
    ``space`` the grid of dotted keys -> values, or ``candidates`` an explicit list of override mappings
    (dotted keys), or both (the grid is expanded over each candidate)."""

    data: dict[str, Any]
    criteria: Criteria
    target_rate: float | None = None
    base_dir: str | None = None
    prices: PriceTable = field(default_factory=PriceTable)
    space: list[tuple[str, list[Any]]] = field(default_factory=list)
    candidates: list[dict[str, Any]] | None = None
    router: str = "least_outstanding"
    replications: int = 2
    rel_tol: float = 0.05
    confidence: float = 0.95
    max_replicas: int = 256
    frontier_extra: int = 1
    prune: bool = True
    verify_all: bool = False
    latency_metric: str = "p99_ttft_ms"

    def __post_init__(self) -> None:
        if self.target_rate is not None and (isinstance(self.target_rate, bool)
                                             or not isinstance(self.target_rate, (int, float))
                                             or not self.target_rate > 0 or not math.isfinite(self.target_rate)):
            raise TwinInputError(f"target_rate_per_s: {self.target_rate!r}: must be a number > 0 (requests/s)")
        for name, example in (("rel_tol", 0.05), ("confidence", 0.95)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1:
                raise TwinInputError(f"{name}: {v!r}: must be a number in (0, 1), e.g. {example}")
        for name, lo, hi in (("replications", 1, 1000), ("max_replicas", 1, MAX_REPLICAS),
                             ("frontier_extra", 0, 16)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                shown = "frontier_extra_replicas" if name == "frontier_extra" else name
                raise TwinInputError(f"{shown}: {v!r}: must be an integer in [{lo}, {hi}]")
        check_metric(self.latency_metric, "latency_metric")
        if self.router not in ROUTERS:
            raise TwinInputError(f"router: {self.router!r}: allowed: {', '.join(ROUTERS)}")
        for name in ("prune", "verify_all"):
            if not isinstance(getattr(self, name), bool):
                raise TwinInputError(f"{name}: {getattr(self, name)!r}: must be true or false")
        if not self.criteria.slo and self.criteria.goodput is None:
            raise TwinInputError("slo: planning needs SLOs (in the scenario's slo: section or given to the plan)")
        deployment = self.data.get("deployment")
        if isinstance(deployment, Mapping) and deployment.get("groups") is not None:
            raise TwinInputError("deployment.groups: twin plan sizes replicas of one GPU type per candidate, not "
                                 "replica groups; leave groups out (its candidates pick the GPU)")
        check_axis_values(self.data, self.space, "search", base_dir=self.base_dir)
        for i, cand in enumerate(self.candidates or []):
            check_axis_values(self.data, [(str(k), [v]) for k, v in cand.items()], f"candidates[{i}]",
                              base_dir=self.base_dir)


def default_space(data: Mapping[str, Any]) -> list[tuple[str, list[Any]]]:
    """GPU types (the scenario's and H100/H200/A100), the scenario's TP, max_num_seqs 64/128/256, prefix
    caching on and off when the workload can share prefixes, speculative decoding on and off when the
    scenario has it."""
    body = validate_body(data)
    own = body.deployment.gpu      # as the user spelt it (h100): the defaults by catalog name, once each
    gpus = [own, *(g for g in DEFAULT_GPUS if g not in (own, _catalog_name(own)))]
    space: list[tuple[str, list[Any]]] = [
        ("deployment.gpu", gpus),
        ("deployment.tensor_parallel_size", [body.deployment.tensor_parallel_size]),
        ("server.max_num_seqs", list(DEFAULT_MAX_NUM_SEQS)),
    ]
    if _shares_prefixes(body):
        space.append(("server.enable_prefix_caching", [True, False]))
    spec = data.get("speculative_decoding")
    if spec:
        space.append(("speculative_decoding", [spec, None]))
    return space


def _shares_prefixes(body) -> bool:
    wl = body.workload
    if wl.trace is not None:
        return wl.trace.format == "mooncake" or str(wl.trace.path).endswith(".jsonl")
    return any(c.prompt.shared_prefix_tokens > 0 or c.prompt.few_shot is not None or c.multi_turn is not None
               for c in wl.classes)


def _catalog_name(gpu: str) -> str:
    """The catalog's name of a GPU the scenario names by an alias (``h100`` -> ``H100-SXM``); a spec file's or an
    unknown name as given."""
    if Path(gpu).suffix.lower() in (".yaml", ".yml", ".json"):
        return gpu
    try:
        return resolve_gpu(gpu).name
    except TwinInputError:
        return gpu
