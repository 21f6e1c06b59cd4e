"""A plan's candidates: the search space expanded into replica configurations (``Candidate``), each resolved
to its hardware, settings and price, or marked infeasible with the reason."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

from twin.errors import TwinInputError
from twin.hardware.pricing import hourly_cost
from twin.plan.evaluate import validate_body
from twin.plan.heldout_rows import band_servers
from twin.plan.overrides import apply_overrides, label
from twin.plan.plan_spec import PlanSpec, default_space


@dataclass
class Candidate:
    index: int
    overrides: dict[str, Any]
    data: dict[str, Any]                 # one replica
    hardware: tuple[str, int] | None = None
    price_per_replica_hour: float | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    servers: list = field(default_factory=list)      # the held-out error bands' keys (twin.plan.heldout_rows)

    def describe(self) -> str:
        return ", ".join(f"{k}={label(v)}" for k, v in self.overrides.items()) or "(scenario as given)"


def expand_candidates(spec: PlanSpec) -> list[Candidate]:
    from twin.sim.deployment import resolve_deployment

    bases = spec.candidates or [{}]
    space = spec.space if (spec.space or spec.candidates) else default_space(spec.data)
    combos = list(itertools.product(*(values for _, values in space))) if space else [()]
    out: list[Candidate] = []
    seen: set[str] = set()
    base_dir = None if spec.base_dir is None else __import__("pathlib").Path(spec.base_dir)
    for base in bases:
        for combo in combos:
            overrides = dict(base)
            overrides.update({k: v for (k, _), v in zip(space, combo)})
            key = json.dumps(overrides, sort_keys=True, default=repr)
            if key in seen:
                continue
            seen.add(key)
            data = apply_overrides(spec.data, {**overrides, "deployment.replicas": 1})
            cand = Candidate(len(out), overrides, data)
            out.append(cand)
            try:
                body = validate_body(data, f"candidate {cand.describe()}")
                dep = resolve_deployment(body, base_dir)
                tp = body.deployment.tensor_parallel_size
                price = spec.prices.price(dep.gpu.name)
            except TwinInputError as exc:
                cand.error = str(exc)
                continue
            cand.servers = band_servers([body], base_dir, [dep])
            sc = dep.scheduler_config
            sd = body.speculative_decoding
            cand.hardware = (dep.gpu.name, tp)
            cand.price_per_replica_hour = hourly_cost(price, tp, 1)
            cand.settings = {
                "gpu": dep.gpu.name, "tensor_parallel_size": tp, "max_num_seqs": sc.max_num_seqs,
                "max_num_batched_tokens": sc.max_num_batched_tokens,
                "enable_prefix_caching": sc.enable_prefix_caching,
                "speculative_decoding": None if sd is None else
                f"{sd.method} k={sd.num_speculative_tokens}",
                "kv_capacity_tokens": dep.kv_pool.capacity_tokens, "price_per_gpu_hour": price,
            }
    return out
