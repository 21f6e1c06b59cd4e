"""Fuzz cases for scenario files (structure-aware mutations, then maybe re-encoded) and ``--set`` overrides,
with the oracle judged on the final document."""

from __future__ import annotations

import copy

import yaml
from hypothesis import strategies as st

from fuzz_values import VALUES, Case, Spec, encoded, refusal, yaml_scalar
from twin.hardware.catalog import list_gpus, list_models
from twin.workload.limits import MAX_REQUESTS


BASE_SCENARIO = {
    "name": "fuzz",
    "deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b", "tensor_parallel_size": 1, "replicas": 1},
    "server": {"max_num_seqs": 8},
    "workload": {
        "arrivals": {"process": "poisson", "rate_per_s": 20},
        "num_requests": 12,
        "classes": [{"name": "chat", "share": 1.0,
                     "prompt": {"shared_prefix_tokens": 64, "suffix_tokens": {"uniform": [8, 32]}},
                     "output_tokens": {"uniform": [2, 8]}}],
    },
    "slo": {"ttft_ms": {"p99": 1000}, "tpot_ms": 50},
    "variants": {"big": {"server": {"max_num_seqs": 16}}},
}

GPUS = tuple(g.name for g in list_gpus())
MODELS = tuple(m.name for m in list_models())
SCENARIO_FIELDS: dict[tuple, Spec] = {
    ("deployment", "replicas"): Spec("int", 1, 4096),
    ("deployment", "tensor_parallel_size"): Spec("int", 1, 64),
    ("deployment", "gpu"): Spec("choice", choices=GPUS),
    ("deployment", "model"): Spec("choice", choices=MODELS),
    ("server", "max_num_seqs"): Spec("int", 1, nullable=True),
    ("server", "max_num_batched_tokens"): Spec("int", 1, nullable=True),
    ("server", "max_model_len"): Spec("int", 2, nullable=True),
    # null: vLLM's default block size for the release and attention backend
    ("server", "block_size"): Spec("choice", choices=(1, 8, 16, 32, 64, 128, 256), nullable=True),
    ("server", "gpu_memory_utilization"): Spec("float", 0, 1, lo_open=True),
    ("server", "num_gpu_blocks_override"): Spec("int", 2, 2**31 - 1, nullable=True),
    ("workload", "num_requests"): Spec("int", 1, MAX_REQUESTS),
    ("workload", "arrivals", "rate_per_s"): Spec("float", 0, lo_open=True, finite=False),
    ("workload", "arrivals", "max_concurrency"): Spec("int", 1, MAX_REQUESTS, nullable=True),
    ("workload", "duration_s"): Spec("float", 0, lo_open=True, nullable=True),
    ("workload", "header_tokens"): Spec("int", 1),
    ("workload", "classes", 0, "share"): Spec("float", 1, 1),
    ("workload", "classes", 0, "prompt", "shared_prefix_tokens"): Spec("int", 0),
    ("workload", "classes", 0, "prompt", "num_prefix_groups"): Spec("int", 1),
    ("workload", "classes", 0, "output_tokens"): Spec("int", 1, mapping_ok=True),
    ("slo", "ttft_ms", "p99"): Spec("float", 0, lo_open=True),          # inf: refused at load (round 21)
    ("slo", "tpot_ms"): Spec("float", 0, lo_open=True, nullable=True),
    ("seed",): Spec("int", 0),
    ("replications",): Spec("int", 1, 1000),
    ("warmup_s",): Spec("float", 0),
    ("max_sim_time_s",): Spec("float", 0, lo_open=True, nullable=True),
}
# sections that are pydantic models: text or a list in their place is an error
MODEL_SECTIONS = [("deployment",), ("server",), ("workload",), ("workload", "arrivals"), ("slo",),
                  ("workload", "classes", 0), ("workload", "classes", 0, "prompt")]
FIELD_PATHS = sorted(SCENARIO_FIELDS, key=str)
# values whose runs are long but legal: the fuzz corpus keeps every case short
SLOW_BUT_VALID = {("replications",): lambda v: isinstance(v, int) and v > 64,
                  ("workload", "num_requests"): lambda v: isinstance(v, int) and v > 2000}


def _set(doc, path, value) -> None:
    node = doc
    for key in path[:-1]:
        if isinstance(node, dict):
            node = node.setdefault(key, {})
        else:
            node = node[key]
    node[path[-1]] = value


def _mappings(doc, path=()):
    """Every mapping in ``doc`` with its path (lists are walked too)."""
    if isinstance(doc, dict):
        yield path, doc
        for k, v in doc.items():
            yield from _mappings(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _mappings(v, path + (i,))


@st.composite
def field_values(draw, paths=FIELD_PATHS):
    path = draw(st.sampled_from(paths))
    value = draw(st.sampled_from(VALUES))
    slow = SLOW_BUT_VALID.get(path)
    if slow is not None and slow(value) and refusal(value, SCENARIO_FIELDS[path]) is None:
        value = 2
    return path, value


def _get(doc, path):
    node = doc
    for key in path:
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and isinstance(key, int) and key < len(node):
            node = node[key]
        else:
            raise KeyError(key)
    return node


def scenario_refusal(doc) -> str | None:
    """Why the design must refuse scenario ``doc`` (its baseline), judged on the final document."""
    for path, spec in SCENARIO_FIELDS.items():
        try:
            value = _get(doc, path)
        except KeyError:
            continue
        why = refusal(value, spec)
        if why:
            return f"{'.'.join(map(str, path))}: {value!r} is {why}"
    for path, m in _mappings(doc):
        if "bogus_key" in m and "params" not in path:
            return f"unknown key bogus_key in {'.'.join(map(str, path)) or 'the top level'}"
    for path in MODEL_SECTIONS:
        try:
            value = _get(doc, path)
        except KeyError:
            continue
        if isinstance(value, (str, list, int)):
            return f"{'.'.join(map(str, path))} replaced by {value!r}"
    return None


@st.composite
def mutated_scenario(draw) -> tuple[dict, str | None]:
    doc = copy.deepcopy(BASE_SCENARIO)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["field", "field", "field", "delete", "unknown", "section"]))
        if op == "field":
            path, value = draw(field_values())
        elif op == "section":
            path, value = draw(st.sampled_from(MODEL_SECTIONS)), draw(st.sampled_from(["abc", [1, 2], 7]))
        elif op == "delete":
            maps = [(p, m) for p, m in _mappings(doc) if m]
            p, m = draw(st.sampled_from(maps))
            del m[draw(st.sampled_from(sorted(m, key=str)))]
            continue
        else:
            maps = [(p, m) for p, m in _mappings(doc) if "params" not in p and p[:1] != ("variants",)]
            p, m = draw(st.sampled_from(maps))
            m["bogus_key"] = 1
            continue
        try:
            _set(doc, path, value)
        except (KeyError, IndexError, TypeError, AttributeError):
            pass  # an earlier mutation replaced its parent
    return doc, scenario_refusal(doc)


@st.composite
def scenario_cases(draw) -> Case:
    doc, reason = draw(mutated_scenario())
    data, enc_reason, intact = draw(encoded(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)))
    command = draw(st.sampled_from([["run", "{d}/s.yaml", "-q"], ["compare", "{d}/s.yaml", "-q"],
                                    ["run", "{d}/s.yaml", "--all-variants", "-q"]]))
    case = Case("scenario", command, {"s.yaml": data})
    case.refuse(enc_reason)
    case.refuse(reason if intact else None)
    return case


# --seed and --replications are fuzzed as options (they override --set seed=...)
SET_PATHS = [p for p in FIELD_PATHS if 0 not in p and p not in (("seed",), ("replications",))]
JUNK_SETS = [("noequals", "no '='"), ("=5", "an empty key"), ("bogus.key=1", "an unknown section"),
             ("server.bogus=1", "an unknown server knob"), ("server=5", "a section replaced by a number"),
             ("workload.classes.5.share=1", "a list index past its end"), ("server.max_num_seqs=[1", None),
             ("server..max_num_seqs=4", None), ("workload.arrivals.process=pareto", "an unknown process"),
             ("slo.ttft_ms.p142=10", "an unknown statistic")]


@st.composite
def set_cases(draw) -> Case:
    args = ["run", "{d}/s.yaml", "-q"]
    case = Case("set", args, {"s.yaml": yaml.safe_dump(BASE_SCENARIO).encode()})
    fields: dict[tuple, object] = {}
    options: dict[str, str | None] = {}  # click keeps the last --seed / --replications
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["field", "field", "junk", "seed", "replications"]))
        if kind == "field":
            path, value = draw(field_values(SET_PATHS))
            args += ["--set", f"{'.'.join(map(str, path))}={yaml_scalar(value)}"]
            fields[path] = value  # the last --set of a key wins
        elif kind == "junk":
            item, why = draw(st.sampled_from(JUNK_SETS))
            args += ["--set", item]
            case.refuse(why and f"--set {item}: {why}")
        elif kind == "seed":
            v = draw(st.sampled_from(["-1", "0", "abc", "1.5", str(2**70)]))
            args += ["--seed", v]
            options["seed"] = {"-1": "a negative seed", "abc": "text for --seed", "1.5": "a fraction for --seed"}.get(v)
        else:
            v = draw(st.sampled_from(["0", "1", "2", "1001", "abc"]))
            args += ["--replications", v]
            options["replications"] = None if v in ("1", "2") else f"--replications {v} outside 1..1000"
    for why in options.values():
        case.refuse(why)
    for path, value in fields.items():
        why = refusal(value, SCENARIO_FIELDS[path])
        case.refuse(why and f"--set {'.'.join(map(str, path))}: {value!r} is {why}")
    return case
