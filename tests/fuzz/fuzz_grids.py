"""Fuzz cases for sweep grids (``twin sweep --grid``) and plan files (``twin plan``)."""

from __future__ import annotations

import copy
import json

import yaml
from hypothesis import strategies as st

from fuzz_scenarios import BASE_SCENARIO, SCENARIO_FIELDS, SET_PATHS
from fuzz_values import VALUES, Case, Spec, refusal


SWEEP_PATHS = [p for p in SET_PATHS if p[0] in ("server", "deployment", "slo")]


@st.composite
def sweep_cases(draw) -> Case:
    from twin.plan.grid import MAX_GRID_POINTS

    args = ["sweep", "{d}/s.yaml", "--backend", "serial", "-q"]
    case = Case("sweep", args, {"s.yaml": yaml.safe_dump(BASE_SCENARIO).encode()})
    points = 1
    keys = draw(st.lists(st.sampled_from(SWEEP_PATHS + [("rate",), ("rate_scale",)]), min_size=1, max_size=3,
                         unique=True))
    if len([k for k in keys if k[0] in ("rate", "rate_scale")]) > 1:
        case.refuse("both rate and rate_scale")
    for path in keys:
        key = ".".join(map(str, path))
        if draw(st.integers(0, 5)) == 0:  # a long axis: the grid's size is what matters
            count = draw(st.sampled_from([3, MAX_GRID_POINTS + 1]))
            values = list(range(1, count + 1))
        else:
            values = draw(st.lists(st.sampled_from(VALUES), min_size=1, max_size=3))
            if len(values) > 1 and draw(st.booleans()):
                values[0] = 4
        points *= len(values)
        spec = SCENARIO_FIELDS.get(path, Spec("float", 0, lo_open=True))
        for v in values:
            why = refusal(v, spec)
            case.refuse(why and f"--grid {key}: {v!r} is {why}")
        listed = json.dumps(values, allow_nan=True).replace("NaN", ".nan").replace("Infinity", ".inf")
        args += ["--grid", f"{key}={listed}"]
    if points > MAX_GRID_POINTS:
        case.refuse(f"{points} grid points, over the limit of {MAX_GRID_POINTS}")
    elif points > 12 and case.must_fail is None:
        args[-1] = args[-1].split("=")[0] + "=[2]"  # keep valid cases short
    return case


PLAN_BASE = {"scenario": "s.yaml", "target_rate_per_s": 40, "search": {"server.max_num_seqs": [8]},
             "replications": 1, "max_replicas": 4, "slo": {"ttft_ms": {"p99": 2000}}, "rel_tol": 0.2}
PLAN_FIELDS = {
    ("target_rate_per_s",): Spec("float", 0, lo_open=True, nullable=True),  # null: the scenario's own rate
    ("replications",): Spec("int", 1, 1000),
    ("max_replicas",): Spec("int", 1, 4096),
    ("rel_tol",): Spec("float", 0, 1, lo_open=True),
    ("confidence",): Spec("float", 0, 1, lo_open=True),
    ("frontier_extra_replicas",): Spec("int", 0, 16),
    ("goodput",): Spec("float", 0, 1, lo_open=True, nullable=True),
    ("router",): Spec("choice", choices=("round_robin", "least_outstanding", "least_kv_usage", "prefix_affinity",
                                         "kv_cache_aware")),
}


@st.composite
def plan_cases(draw) -> Case:
    doc = copy.deepcopy(PLAN_BASE)
    reason = None
    for _ in range(draw(st.integers(1, 2))):
        op = draw(st.sampled_from(["field", "field", "field", "unknown", "search"]))
        if op == "field":
            path = draw(st.sampled_from(sorted(PLAN_FIELDS)))
            value = draw(st.sampled_from(VALUES))
            if path in (("replications",), ("max_replicas",), ("frontier_extra_replicas",)) and \
                    isinstance(value, int) and not isinstance(value, bool) and 16 < value <= 4096:
                value = 2  # valid but slow: keep the corpus short
            doc[path[0]] = value
        elif op == "unknown":
            doc["bogus_key"] = 1
        else:
            doc["search"] = draw(st.sampled_from([5, "abc", [], {"server.max_num_seqs": []},
                                                  {"server.max_num_seqs": [0]}, {"server.max_num_seqs": [-3, 8]}]))
    for path, spec in PLAN_FIELDS.items():
        if path[0] in doc:
            why = refusal(doc[path[0]], spec)
            reason = reason or (why and f"{path[0]}: {doc[path[0]]!r} is {why}")
    if "bogus_key" in doc:
        reason = reason or "unknown key bogus_key"
    if doc["search"] != PLAN_BASE["search"]:
        reason = reason or f"search: {doc['search']!r}"
    case = Case("plan", ["plan", "{d}/plan.yaml", "--backend", "serial", "-q"],
                {"plan.yaml": yaml.safe_dump(doc).encode(), "s.yaml": yaml.safe_dump(BASE_SCENARIO).encode()})
    case.refuse(reason)
    return case
