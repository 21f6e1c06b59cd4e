"""Glue between the Streamlit what-if dashboard (``app.py``) and the twin: where scenarios come from, which
settings the page offers, how widget values become a scenario mapping, one cached-friendly run, a load
sweep, and the downloads.

Nothing here imports Streamlit: ``app.py`` wraps `run_scenario` and `run_sweep_point` in ``st.cache_data``
(their arguments are the plain scenario mapping, which holds the seed, so the cache is keyed on scenario +
seed) and draws the page. Everything raises `TwinInputError` for bad input, with the field and the value.

The settings form is a flat mapping of *setting keys* (``"max_num_seqs"``, ``"rate_per_s"``,
``"classes.0.output_tokens"``, ...) to values. `form_defaults` reads it off a scenario mapping (with vLLM's
defaults resolved, so the page shows real numbers); `apply_form` writes back only the settings whose value
differs from those defaults, so the what-if is the starting configuration plus the changes the user made.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import math
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from twin.sim.run import metrics_of, run_body
from twin.sim.deployment import require_single_deployment, resolve_deployment
from twin.hardware.catalog import list_gpus, list_models
from twin.analysis.causes import Diagnosis, diagnose, diagnosis_to_dict
from twin.errors import TwinInputError
from twin.yaml_input import parse_yaml
from twin.results.sim_result import SimResult
from twin.results.report import COMPARISON_KEYS, compare_metrics, direction, format_delta, format_value, label
from twin.scenario import BASELINE, Scenario, ScenarioBody, list_scenarios, load_scenario

BASELINE_LABEL = "baseline"
WHATIF_LABEL = "what-if"
DEFAULT_SCENARIO = "chat_shared_prompt"
TRACE_WINDOW_S = 300.0           # the dashboard replays this much of an uploaded or bundled trace by default
UPLOAD_DIR_NAME = "twin-dashboard-uploads"
SWEEP_MULTIPLIERS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
SWEEP_REQUESTS = 300             # requests per sweep point (a short run; the curve's shape, not its tail)

DEPLOYMENT_KEYS = ("gpu", "model", "tensor_parallel_size", "replicas")
SERVER_KEYS = ("scheduler", "max_num_seqs", "max_num_batched_tokens", "enable_chunked_prefill",
               "enable_prefix_caching", "block_size", "gpu_memory_utilization")
ARRIVAL_KEYS = ("arrival_mode", "rate_per_s", "concurrency")
WORKLOAD_KEYS = ("duration_s", "num_requests", "prefix_header")
TRACE_KEYS = ("time_scale",)
CLASS_FIELDS = ("suffix_tokens", "output_tokens", "shared_prefix_tokens")
SPEC_PREFIX = "spec."
SPEC_METHODS = ("eagle", "eagle3", "mtp", "draft_model", "ngram")
SPEC_HEAD_METHODS = ("eagle", "eagle3", "mtp")
DEFAULT_DRAFT_MODEL = "llama-3.2-1b"
DEFAULT_ACCEPTANCE = 0.7

SETTING_LABELS: dict[str, str] = {
    "gpu": "GPU", "model": "model", "tensor_parallel_size": "tensor parallel", "replicas": "replicas",
    "scheduler": "scheduler", "max_num_seqs": "max_num_seqs", "max_num_batched_tokens": "max_num_batched_tokens",
    "enable_chunked_prefill": "chunked prefill", "enable_prefix_caching": "prefix caching",
    "block_size": "block_size", "gpu_memory_utilization": "gpu_memory_utilization",
    "arrival_mode": "arrivals", "rate_per_s": "rate (req/s)", "concurrency": "concurrency",
    "duration_s": "duration (s)", "num_requests": "requests", "prefix_header": "prefix header",
    "time_scale": "trace speed-up", "spec.enabled": "speculative decoding", "spec.method": "spec method",
    "spec.num_speculative_tokens": "num_speculative_tokens", "spec.draft_model": "draft model",
    "spec.acceptance_rate": "acceptance rate",
}


# --------------------------------------------------------------------------------------------------------
# where scenarios come from
# --------------------------------------------------------------------------------------------------------
def bundled_scenarios() -> dict[str, Path]:
    """Bundled scenario files by name (file stem), the dashboard's default first."""
    found = {p.stem: p for p in list_scenarios()}
    if DEFAULT_SCENARIO in found:
        found = {DEFAULT_SCENARIO: found.pop(DEFAULT_SCENARIO), **found}
    return found


def load_bundled(name: str) -> Scenario:
    paths = bundled_scenarios()
    if name not in paths:
        raise TwinInputError(f"scenario {name!r}: not bundled (bundled: {', '.join(paths) or 'none'})")
    return load_scenario(paths[name])


def scenario_from_yaml(text: str | bytes, source: str = "uploaded scenario") -> Scenario:
    """A scenario from YAML text (an upload); malformed YAML is a one-line error with line and column."""

    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise TwinInputError(f"{source}: not UTF-8 text; upload a YAML scenario file") from None
    data = parse_yaml(text, source)
    if data is None:
        raise TwinInputError(f"{source}: the file is empty; a scenario needs at least a workload section")
    return Scenario(data, source=source)


def upload_dir() -> Path:
    d = Path(tempfile.gettempdir()) / UPLOAD_DIR_NAME
    d.mkdir(parents=True, exist_ok=True)
    return d


def save_upload(data: bytes, filename: str) -> Path:
    """Store uploaded bytes under a content-addressed name (same bytes, same path: cache keys stay stable),
    keeping the file's suffix so format detection still works."""
    suffix = "".join(Path(filename).suffixes[-2:]) or ".dat"
    digest = hashlib.sha256(data).hexdigest()[:16]
    path = upload_dir() / f"{digest}{suffix}"
    if not path.exists():
        path.write_bytes(data)
    return path


def trace_scenario(path: str | Path, name: str | None = None) -> Scenario:
    """A scenario replaying a trace file on the default deployment; a trace without timestamps (length-only)
    gets Poisson arrivals at 4 req/s, which the rate setting changes."""
    from twin.workload.traces import read_trace

    path = Path(path)
    trace = read_trace(path)
    workload: dict[str, Any] = {"trace": {"path": str(path)}}
    if not trace.has_timestamps:
        workload["arrivals"] = {"process": "poisson", "rate_per_s": 4.0}
    data = {"name": name or path.stem, "description": f"Replay of {name or path.name} ({len(trace):,} requests).",
            "workload": workload}
    return Scenario(data, source=name or str(path))


def profile_supported() -> bool:
    """Calibrated profiles need `twin.cost.profile` (importing it registers the 'profile' cost-model kind)."""
    try:
        found = importlib.util.find_spec("twin.cost.profile") is not None
    except (ImportError, ValueError):
        return False
    if found:
        importlib.import_module("twin.cost.profile")
    return found


def speculative_supported() -> bool:
    return "speculative_decoding" in ScenarioBody.model_fields


# --------------------------------------------------------------------------------------------------------
# lengths: a distribution's centre, and the same distribution moved to another centre
# --------------------------------------------------------------------------------------------------------
def length_center(dist: Any) -> int | None:
    """The typical value of a length distribution as written in a scenario (``None``: not editable)."""
    if isinstance(dist, bool):
        return None
    if isinstance(dist, int):
        return dist
    if not isinstance(dist, dict) or len(dist) != 1:
        return None
    (kind, spec), = dist.items()
    if kind == "fixed" and isinstance(spec, int):
        return spec
    if kind == "uniform" and isinstance(spec, (list, tuple)) and len(spec) == 2:
        return int(round((spec[0] + spec[1]) / 2))
    if kind == "lognormal" and isinstance(spec, dict) and "median" in spec:
        return int(round(spec["median"]))
    if kind == "normal" and isinstance(spec, dict) and "mean" in spec:
        return int(round(spec["mean"]))
    return None


def with_center(dist: Any, value: int) -> Any:
    """``dist`` moved so its typical value is ``value``: a fixed length becomes ``value``, a lognormal's
    median or a normal's mean is set, a uniform range is scaled."""
    value = int(value)
    if isinstance(dist, int) and not isinstance(dist, bool):
        return value
    (kind, spec), = dist.items()
    if kind == "fixed":
        return {"fixed": value}
    if kind == "uniform":
        center = (spec[0] + spec[1]) / 2
        if center <= 0:
            return {"uniform": [value, value]}
        f = value / center
        return {"uniform": [int(round(spec[0] * f)), int(round(spec[1] * f))]}
    if kind == "lognormal":
        return {"lognormal": {**spec, "median": value}}
    if kind == "normal":
        return {"normal": {**spec, "mean": value}}
    raise TwinInputError(f"a {kind} length distribution cannot be moved to {value}")


# --------------------------------------------------------------------------------------------------------
# the settings form
# --------------------------------------------------------------------------------------------------------
def validate(data: dict[str, Any], source: str = "scenario") -> ScenarioBody:
    """One configuration mapping (no variants) validated, or a one-line TwinInputError."""
    profile_supported()  # registers the 'profile' cost-model kind when its module is there
    data = {k: v for k, v in data.items() if k != "variants"}
    body = Scenario(data, source=source).body()
    require_single_deployment(body, "the dashboard")
    return body


def _arrivals_mode(arr: dict[str, Any] | None) -> str | None:
    if not isinstance(arr, dict):
        return None
    if arr.get("process") == "closed_loop":
        return "concurrency"
    rate = arr.get("rate_per_s")
    if arr.get("process") in ("poisson", "gamma", "constant") and rate is not None and math.isfinite(float(rate)):
        return "rate"
    return None


def form_defaults(raw: dict[str, Any], base_dir: str | Path | None = None) -> dict[str, Any]:
    """The settings the page offers for the configuration ``raw``, with vLLM's defaults resolved
    (``max_num_seqs: null`` shows as the number vLLM would pick). Only editable settings appear: no rate for a
    timestamped trace, no lengths for a trace or an empirical distribution."""
    body = validate(raw)
    dep = resolve_deployment(body, Path(base_dir) if base_dir else None)
    sc = dep.scheduler_config
    out: dict[str, Any] = {
        "gpu": dep.gpu.name, "model": dep.model.name,
        "tensor_parallel_size": body.deployment.tensor_parallel_size, "replicas": body.deployment.replicas,
        "scheduler": sc.scheduler, "max_num_seqs": sc.max_num_seqs,
        "max_num_batched_tokens": sc.max_num_batched_tokens, "enable_chunked_prefill": sc.enable_chunked_prefill,
        "enable_prefix_caching": sc.enable_prefix_caching, "block_size": sc.block_size,
        "gpu_memory_utilization": body.server.gpu_memory_utilization,
    }
    wl = raw.get("workload") or {}
    arr = wl.get("arrivals")
    mode = _arrivals_mode(arr)
    if mode is not None:
        out["arrival_mode"] = mode
        if mode == "rate":
            out["rate_per_s"] = float(arr["rate_per_s"])
        else:
            out["concurrency"] = int(arr["concurrency"])
    if body.workload.trace is None:
        out["duration_s"] = body.workload.duration_s
        out["num_requests"] = body.workload.num_requests
        out["prefix_header"] = body.workload.prefix_header
        for i, cls in enumerate(wl.get("classes") or []):
            prompt = cls.get("prompt") or {}
            for key, dist in (("suffix_tokens", prompt.get("suffix_tokens")),
                              ("output_tokens", cls.get("output_tokens"))):
                center = length_center(dist)
                if center is not None:
                    out[f"classes.{i}.{key}"] = center
            out[f"classes.{i}.shared_prefix_tokens"] = int(prompt.get("shared_prefix_tokens", 0))
    else:
        out["time_scale"] = body.workload.trace.time_scale
        out["prefix_header"] = body.workload.prefix_header
    if speculative_supported():
        out.update(_spec_defaults(raw.get("speculative_decoding")))
    return out


def _spec_defaults(section: Any) -> dict[str, Any]:
    """Speculative-decoding settings: on/off, method, k, the draft model (method draft_model) and one
    acceptance rate for every class (``None``: keep the scenario's own per-class acceptance)."""
    if not isinstance(section, dict):
        return {"spec.enabled": False, "spec.method": "eagle", "spec.num_speculative_tokens": 4,
                "spec.draft_model": DEFAULT_DRAFT_MODEL, "spec.acceptance_rate": DEFAULT_ACCEPTANCE}
    acc = section.get("acceptance")
    rate = None
    if isinstance(acc, (int, float)) and not isinstance(acc, bool):
        rate = float(acc)
    elif isinstance(acc, dict) and len(acc) == 1:
        (only,) = acc.values()
        if isinstance(only, (int, float)) and not isinstance(only, bool):
            rate = float(only)
        elif isinstance(only, dict) and set(only) == {"rate"}:
            rate = float(only["rate"])
    return {"spec.enabled": True, "spec.method": section.get("method", "eagle"),
            "spec.num_speculative_tokens": int(section.get("num_speculative_tokens", 4)),
            "spec.draft_model": section.get("draft_model") or DEFAULT_DRAFT_MODEL, "spec.acceptance_rate": rate}


def _apply_spec(data: dict[str, Any], values: dict[str, Any], defaults: dict[str, Any]) -> None:
    def get(key: str) -> Any:
        return values.get(key, defaults.get(key))

    if not get("spec.enabled"):
        data["speculative_decoding"] = None
        return
    old = data.get("speculative_decoding")
    section = dict(old) if isinstance(old, dict) else {}
    method = get("spec.method")
    section["method"] = method
    section["num_speculative_tokens"] = int(get("spec.num_speculative_tokens"))
    if method == "draft_model":
        section["draft_model"] = get("spec.draft_model") or DEFAULT_DRAFT_MODEL
    else:
        section.pop("draft_model", None)
    if method not in SPEC_HEAD_METHODS:
        section.pop("draft_layers", None)
    if method != "eagle3":
        section.pop("draft_vocab_size", None)
    rate = get("spec.acceptance_rate")
    if rate is not None:
        section["acceptance"] = {"default": {"rate": float(rate)}}
    elif "acceptance" not in section:
        section["acceptance"] = {"default": {"rate": DEFAULT_ACCEPTANCE}}
    if method != "ngram":  # proposal_rate is an n-gram notion; a model-based drafter proposes at every step
        for entry in section["acceptance"].values() if isinstance(section["acceptance"], dict) else ():
            if isinstance(entry, dict):
                entry.pop("proposal_rate", None)
    data["speculative_decoding"] = section


def class_names(raw: dict[str, Any]) -> list[str]:
    return [str(c.get("name", f"class {i}")) for i, c in enumerate((raw.get("workload") or {}).get("classes") or [])]


def form_changes(defaults: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """The settings whose value differs from the default (floats compared with a tolerance)."""
    out = {}
    for key, value in values.items():
        if key not in defaults and value is None:
            continue
        old = defaults.get(key)
        if isinstance(value, float) and isinstance(old, (int, float)) and not isinstance(old, bool):
            if math.isclose(value, float(old), rel_tol=1e-9, abs_tol=1e-12):
                continue
        elif value == old:
            continue
        out[key] = value
    return out


def apply_form(raw: dict[str, Any], values: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """``raw`` with every setting in ``values`` that differs from ``defaults`` written in."""
    changes = form_changes(defaults, values)
    data = copy.deepcopy(raw)
    if not changes:
        return data
    for key, value in changes.items():
        if key in DEPLOYMENT_KEYS:
            data.setdefault("deployment", {})[key] = value
        elif key in SERVER_KEYS:
            data.setdefault("server", {})[key] = value
        elif key in WORKLOAD_KEYS:
            data.setdefault("workload", {})[key] = value
        elif key in TRACE_KEYS:
            data.setdefault("workload", {}).setdefault("trace", {})[key] = value
        elif key.startswith("classes."):
            _, index, name = key.split(".", 2)
            cls = data["workload"]["classes"][int(index)]
            prompt = cls.setdefault("prompt", {})
            if name == "shared_prefix_tokens":
                prompt["shared_prefix_tokens"] = int(value)
            elif name == "suffix_tokens":
                prompt["suffix_tokens"] = with_center(prompt["suffix_tokens"], value)
            else:
                cls["output_tokens"] = with_center(cls["output_tokens"], value)
        elif key not in ARRIVAL_KEYS and not key.startswith(SPEC_PREFIX):
            raise TwinInputError(f"setting {key!r}: unknown to the dashboard")
    if any(k.startswith(SPEC_PREFIX) for k in changes):
        _apply_spec(data, values, defaults)
    if any(k in changes for k in ARRIVAL_KEYS):
        wl = data.setdefault("workload", {})
        old = wl.get("arrivals") if isinstance(wl.get("arrivals"), dict) else {}
        mode = values.get("arrival_mode", defaults.get("arrival_mode"))
        if mode == "rate":
            rate = float(values.get("rate_per_s", defaults.get("rate_per_s", 4.0)))
            keep = {k: v for k, v in old.items() if k not in ("rate_per_s",)} if _arrivals_mode(old) == "rate" else {}
            wl["arrivals"] = {"process": "poisson", **keep, "rate_per_s": rate}
        elif mode == "concurrency":
            n = int(values.get("concurrency", defaults.get("concurrency", 16)))
            keep = {k: v for k, v in old.items() if k == "think_time_s"} if old.get("process") == "closed_loop" else {}
            wl["arrivals"] = {"process": "closed_loop", **keep, "concurrency": n}
    return data


def describe_changes(defaults: dict[str, Any], values: dict[str, Any], classes: list[str] | None = None) -> list[str]:
    """``["max_num_seqs: 4 -> 16", "prefix caching: on -> off"]`` for the changed settings."""
    def show(v: Any) -> str:
        if isinstance(v, bool):
            return "on" if v else "off"
        if v is None:
            return "unset"
        if isinstance(v, float):
            return f"{v:g}"
        return str(v)

    out = []
    for key, value in form_changes(defaults, values).items():
        if key.startswith("classes."):
            _, index, name = key.split(".", 2)
            cname = classes[int(index)] if classes and int(index) < len(classes) else f"class {index}"
            what = f"{cname} {name.replace('_', ' ')}"
        else:
            what = SETTING_LABELS.get(key, key.replace("_", " "))
        out.append(f"{what}: {show(defaults.get(key))} → {show(value)}")
    return out


def with_experiment(raw: dict[str, Any], *, seed: int | None = None, trace_window_s: float | None = None,
                    profile_path: str | None = None) -> dict[str, Any]:
    """Settings that apply to baseline and what-if alike: the seed, how much of a trace to replay
    (``0``/``None``: all of it), a calibrated profile as the cost model."""
    data = copy.deepcopy(raw)
    if seed is not None:
        data["seed"] = int(seed)
    trace = (data.get("workload") or {}).get("trace")
    if isinstance(trace, dict) and trace_window_s:
        trace["window_s"] = float(trace_window_s)
    if profile_path:
        data["cost_model"] = {"kind": "profile", "profile": str(profile_path)}
    return data


def trace_window_default(raw: dict[str, Any]) -> float | None:
    """What the replay-window setting starts at: the scenario's own window, else `TRACE_WINDOW_S`."""
    trace = (raw.get("workload") or {}).get("trace")
    if not isinstance(trace, dict):
        return None
    return float(trace.get("window_s") or TRACE_WINDOW_S)


def gpu_options(current: str) -> list[str]:
    names = [g.name for g in list_gpus()]
    return names if current in names else [current, *names]


def model_options(current: str) -> list[str]:
    names = [m.name for m in list_models()]
    return names if current in names else [current, *names]


# --------------------------------------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------------------------------------
@dataclass
class RunOutput:
    """One run, everything the page shows; picklable (so ``st.cache_data`` can keep it)."""

    result: SimResult
    metrics: dict[str, Any]
    diagnosis: Diagnosis
    slo: dict[str, Any] | None
    info: dict[str, Any] = field(default_factory=dict)


def run_scenario(data: dict[str, Any], base_dir: str | None = None) -> RunOutput:
    """Validate, resolve and simulate one configuration mapping (its ``seed`` included)."""
    t0 = time.perf_counter()
    body = validate(data)
    bd = Path(base_dir) if base_dir else None
    dep = resolve_deployment(body, bd)
    result = run_body(body, bd, deployment=dep)
    metrics = metrics_of(result, body)
    diagnosis = diagnose(result, dep, metrics)
    sc = dep.scheduler_config
    info = {
        "name": body.name, "gpu": dep.gpu.name, "model": dep.model.name,
        "tensor_parallel_size": body.deployment.tensor_parallel_size, "replicas": body.deployment.replicas,
        "scheduler": sc.scheduler, "max_num_seqs": sc.max_num_seqs,
        "max_num_batched_tokens": sc.max_num_batched_tokens, "enable_prefix_caching": sc.enable_prefix_caching,
        "enable_chunked_prefill": sc.enable_chunked_prefill, "kv_capacity_tokens": dep.kv_pool.capacity_tokens,
        "num_requests": len(result.requests), "num_steps": len(result.steps),
        "simulated_s": result.sim_end_s, "wall_s": time.perf_counter() - t0,
    }
    return RunOutput(result, metrics, diagnosis, body.slo.as_dict() or None, info)


def headline(info: dict[str, Any]) -> str:
    return (f"{info['model']} on {info['replicas']}×{info['tensor_parallel_size']} {info['gpu']} · "
            f"{info['scheduler']}, max_num_seqs {info['max_num_seqs']}, max_num_batched_tokens "
            f"{info['max_num_batched_tokens']}, prefix caching {'on' if info['enable_prefix_caching'] else 'off'}"
            f" · KV pool {info['kv_capacity_tokens']:,} tokens")


# --------------------------------------------------------------------------------------------------------
# load sweep
# --------------------------------------------------------------------------------------------------------
def load_of(raw: dict[str, Any]) -> tuple[str, float] | None:
    """What a sweep varies: ``("rate", req/s)``, ``("concurrency", users)`` or ``("time_scale", x)``."""
    wl = raw.get("workload") or {}
    arr = wl.get("arrivals")
    mode = _arrivals_mode(arr)
    if mode == "rate":
        return "rate", float(arr["rate_per_s"])
    if mode == "concurrency":
        return "concurrency", float(arr["concurrency"])
    trace = wl.get("trace")
    if isinstance(trace, dict) and arr is None:
        return "time_scale", float(trace.get("time_scale", 1.0))
    return None


def load_label(kind: str, value: float) -> str:
    if kind == "rate":
        return f"{value:g} req/s"
    if kind == "concurrency":
        return f"{int(value)} users"
    return f"{value:g}× trace speed"


def with_load(raw: dict[str, Any], kind: str, value: float, max_requests: int = SWEEP_REQUESTS) -> dict[str, Any]:
    """``raw`` at another load, cut to about ``max_requests`` requests."""
    data = copy.deepcopy(raw)
    wl = data["workload"]
    if kind == "time_scale":
        wl["trace"]["time_scale"] = float(value)
        cap = wl["trace"].get("max_requests")
        wl["trace"]["max_requests"] = min(int(cap), max_requests) if cap else max_requests
        return data
    if kind == "rate":
        wl["arrivals"]["rate_per_s"] = float(value)
    else:
        wl["arrivals"]["concurrency"] = max(1, int(round(value)))
    if wl.get("trace") is not None:
        cap = wl["trace"].get("max_requests")
        wl["trace"]["max_requests"] = min(int(cap), max_requests) if cap else max_requests
    else:
        wl["num_requests"] = min(int(wl["num_requests"]), max_requests) if wl.get("num_requests") else max_requests
        wl["duration_s"] = None
    data["warmup_s"] = 0.0
    return data


def sweep_plan(base_raw: dict[str, Any], whatif_raw: dict[str, Any],
               multipliers: tuple[float, ...] = SWEEP_MULTIPLIERS) -> dict[str, list[tuple[str, float]]]:
    """Loads to run per configuration. Both sweep the same loads (multiples of the baseline's) when they vary
    the same thing; the what-if's own load is added so its operating point is on its curve."""
    plan: dict[str, list[tuple[str, float]]] = {}
    base = load_of(base_raw)
    what = load_of(whatif_raw)
    if base is not None:
        plan[BASELINE_LABEL] = _loads(base, multipliers)
    if what is not None:
        if base is not None and base[0] == what[0]:
            loads = _loads(base, multipliers)
            if all(not math.isclose(v, what[1]) for _, v in loads):
                loads = sorted(loads + [what], key=lambda kv: kv[1])
            plan[WHATIF_LABEL] = loads
        else:
            plan[WHATIF_LABEL] = _loads(what, multipliers)
    return plan


def _loads(load: tuple[str, float], multipliers: tuple[float, ...]) -> list[tuple[str, float]]:
    kind, value = load
    out: list[tuple[str, float]] = []
    for m in multipliers:
        v = value * m
        if kind == "concurrency":
            v = float(max(1, int(round(v))))
        if all(not math.isclose(v, w) for _, w in out):
            out.append((kind, v))
    return out


SWEEP_KEYS = ("request_throughput", "output_throughput", "median_ttft_ms", "p99_ttft_ms", "median_tpot_ms",
              "p99_tpot_ms", "median_e2el_ms", "p99_e2el_ms", "completed", "failed")


def run_sweep_point(data: dict[str, Any], kind: str, value: float, base_dir: str | None = None) -> dict[str, Any]:
    """One point of a load sweep: the metrics a throughput-latency curve needs, and the load's label."""
    body = validate(with_load(data, kind, value))
    bd = Path(base_dir) if base_dir else None
    result = run_body(body, bd)
    m = result.metrics()
    point = {k: m.get(k) for k in SWEEP_KEYS}
    point.update(load=load_label(kind, value), load_kind=kind, load_value=value)
    return point


# --------------------------------------------------------------------------------------------------------
# comparison and downloads
# --------------------------------------------------------------------------------------------------------
HEADLINE_KEYS = ("request_throughput", "output_throughput", "p99_ttft_ms", "p99_tpot_ms", "p99_e2el_ms",
                 "request_goodput", "prefix_cache_hit_rate", "num_preemptions", "spec_decode_acceptance_length")
CARD_ABSOLUTE_DELTA = {"prefix_cache_hit_rate", "num_preemptions", "spec_decode_acceptance_length"}
HEADLINE_LABELS = {
    "request_throughput": "Throughput (req/s)", "output_throughput": "Output (tok/s)",
    "p99_ttft_ms": "TTFT p99 (ms)", "p99_tpot_ms": "TPOT p99 (ms)", "p99_e2el_ms": "E2E p99 (ms)",
    "request_goodput": "Goodput (req/s)", "prefix_cache_hit_rate": "Prefix hit rate",
    "num_preemptions": "Preemptions", "spec_decode_acceptance_length": "Tokens per verify",
}


def headline_cards(base: dict[str, Any], whatif: dict[str, Any]) -> list[dict[str, Any]]:
    """Metric cards: ``label``, ``baseline`` and ``whatif`` text, ``delta`` text (None when equal or
    undefined) and ``delta_color`` for ``st.metric`` ("normal": up is good, "inverse": down is good)."""
    cards = []
    for key in HEADLINE_KEYS:
        b, w = base.get(key), whatif.get(key)
        if b is None and w is None:
            continue
        delta = None
        if (isinstance(b, (int, float)) and isinstance(w, (int, float))
                and not math.isclose(w, b, rel_tol=1e-9, abs_tol=1e-12)):
            pct = (w - b) / abs(b) * 100 if b else None
            # a card has room for one number: percent for rates and latencies, points for shares, counts as is
            if pct is None or key in CARD_ABSOLUTE_DELTA:
                delta = format_delta(key, w - b, None)
            else:
                delta = f"{pct:+,.1f}%"
        sign = direction(key)
        cards.append({"key": key, "label": HEADLINE_LABELS.get(key, label(key)),
                      "baseline": format_value(key, b), "whatif": format_value(key, w), "delta": delta,
                      "delta_color": "normal" if sign >= 0 else "inverse"})
    return cards


def comparison_rows(base: dict[str, Any], whatif: dict[str, Any]) -> list[dict[str, str]]:
    """The full comparison as table rows: metric, baseline, what-if, change, better/worse."""
    rows = []
    for row in compare_metrics({BASELINE_LABEL: base, WHATIF_LABEL: whatif}, BASELINE_LABEL, list(COMPARISON_KEYS)):
        key = row["key"]
        d = row["deltas"][WHATIF_LABEL]
        change = "" if d["delta"] is None else format_delta(key, d["delta"], d["pct"])
        rows.append({"metric": row["label"], BASELINE_LABEL: format_value(key, row["values"][BASELINE_LABEL]),
                     WHATIF_LABEL: format_value(key, row["values"][WHATIF_LABEL]), "change": change,
                     "verdict": d["verdict"] or ""})
    return rows


def result_json(run: RunOutput) -> bytes:
    """The run as `vllm bench serve` result JSON (plus the twin's keys and the diagnosis under ``twin``)."""
    from twin.results.export import dumps, to_bench_serve_json

    data = to_bench_serve_json(run.result, run.slo)
    data["twin"]["diagnosis"] = diagnosis_to_dict(run.diagnosis)
    return (dumps(data) + "\n").encode("utf-8")


def requests_csv(run: RunOutput) -> bytes:
    return run.result.requests_frame().to_csv(index=False, lineterminator="\n").encode("utf-8")


def start_points(scenario: Scenario) -> list[str]:
    """Where a what-if can start: the baseline or one of the scenario's variants (not a mixed-cluster variant,
    ``deployment.groups``: the page edits one deployment)."""
    return [n for n in scenario.names() if n == BASELINE or scenario.body(n).deployment.groups is None]


def default_start(scenario: Scenario) -> str:
    """The first variant when there is one (so the page opens on a comparison), else the baseline."""
    names = start_points(scenario)
    return names[1] if len(names) > 1 else BASELINE


__all__ = [
    "BASELINE", "BASELINE_LABEL", "RunOutput", "WHATIF_LABEL", "apply_form", "bundled_scenarios",
    "comparison_rows", "default_start", "describe_changes", "form_changes", "form_defaults", "headline",
    "headline_cards", "load_bundled", "load_of", "requests_csv", "result_json", "run_scenario", "run_sweep_point",
    "save_upload", "scenario_from_yaml", "sweep_plan", "trace_scenario", "with_experiment", "with_load",
]
