"""The what-if settings form: a flat mapping of *setting keys* (``"max_num_seqs"``, ``"rate_per_s"``,
``"classes.0.output_tokens"``, ...) to values.

`form_defaults` reads it off a scenario mapping (with vLLM's defaults resolved, so the page shows real numbers);
`apply_form` writes back only the settings whose value differs from those defaults, so the what-if is the
starting configuration plus the changes the user made, and `describe_changes` lists exactly those.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any, get_args

from twin.results import numbers
from twin.dashboard.pd_form import pd_settings
from twin.dashboard.sources import profile_supported, speculative_supported
from twin.errors import TwinInputError
from twin.hardware.catalog import list_gpus, list_models
from twin.scenario import DeploymentConfig, Scenario, ScenarioBody
from twin.sim.deployment import require_single_deployment, resolve_deployment

BASELINE_LABEL = "baseline"
WHATIF_LABEL = "what-if"
TRACE_WINDOW_S = 300.0           # the dashboard replays this much of an uploaded or bundled trace by default

DEPLOYMENT_KEYS = ("gpu", "model", "tensor_parallel_size", "replicas", "kv_dtype")
# the KV cache format: "auto" leaves deployment.kv_dtype out (the twin's bf16; a checkpoint that declares its KV
# format, e.g. Kimi-K2.5 NVFP4, must be given one), else one of the formats the scenario schema accepts
KV_DTYPE_AUTO = "auto"
KV_DTYPES = (KV_DTYPE_AUTO, *get_args(DeploymentConfig.model_fields["kv_dtype"].annotation))
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
    "kv_dtype": "KV cache",
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
    if body.disaggregation is None:        # prefill/decode pools run (twin.deploy); replica groups do not
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
    timestamped trace, no lengths for a trace or an empirical distribution, for prefill/decode pools only the
    model and the server knobs both pools share (`twin.dashboard.pd_form`)."""
    body = validate(raw)
    if body.disaggregation is not None:   # P/D: the pools are the scenario's; see twin.dashboard.pd_form
        out = pd_settings(body, Path(base_dir) if base_dir else None)[0]
    else:
        dep = resolve_deployment(body, Path(base_dir) if base_dir else None)
        sc = dep.scheduler_config
        out = {
            "gpu": dep.gpu.name, "model": dep.model.name,
            "tensor_parallel_size": body.deployment.tensor_parallel_size, "replicas": body.deployment.replicas,
            "scheduler": sc.scheduler, "max_num_seqs": sc.max_num_seqs,
            "max_num_batched_tokens": sc.max_num_batched_tokens, "enable_chunked_prefill": sc.enable_chunked_prefill,
            "enable_prefix_caching": sc.enable_prefix_caching, "block_size": sc.block_size,
            "gpu_memory_utilization": body.server.gpu_memory_utilization,
        }
    out["kv_dtype"] = body.deployment.kv_dtype if "kv_dtype" in body.deployment.model_fields_set else KV_DTYPE_AUTO
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
    if speculative_supported() and body.disaggregation is None:   # not modelled with disaggregation
        out.update(_spec_defaults(raw.get("speculative_decoding")))
    return out


def pool_lines(raw: dict[str, Any], base_dir: str | Path | None = None) -> list[str] | None:
    """The pools of configuration ``raw`` in lines for the sidebar (``None``: not a P/D configuration)."""
    if not raw.get("disaggregation"):
        return None
    return pd_settings(validate(raw), Path(base_dir) if base_dir else None)[1]


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
    synthetic = section.get("rejection_sample_method") == "synthetic"
    if rate is not None:
        section["acceptance"] = {"default": {"rate": float(rate)}}
        for knob in ("rejection_sample_method", "synthetic_acceptance_rates", "synthetic_acceptance_length"):
            section.pop(knob, None)          # the form's rate replaces vLLM's synthetic acceptance
    elif "acceptance" not in section and not synthetic:
        section["acceptance"] = {"default": {"rate": DEFAULT_ACCEPTANCE}}
    if method != "ngram":  # proposal_rate is an n-gram notion; a model-based drafter proposes at every step
        acceptance = section.get("acceptance")
        for entry in acceptance.values() if isinstance(acceptance, dict) else ():
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
        if key == "kv_dtype" and value == KV_DTYPE_AUTO:
            (data.get("deployment") or {}).pop("kv_dtype", None)
        elif key in DEPLOYMENT_KEYS:
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
            return numbers.given(v)
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
    wl = data.get("workload") or {}
    trace = wl.get("trace")
    if isinstance(trace, dict) and trace_window_s and wl.get("arrivals") is None:  # a window is trace time
        trace["window_s"] = float(trace_window_s)
    if profile_path:
        data["cost_model"] = {"kind": "profile", "profile": str(profile_path)}
    return data


def trace_window_default(raw: dict[str, Any]) -> float | None:
    """What the replay-window setting starts at: the scenario's own window, else `TRACE_WINDOW_S`."""
    wl = raw.get("workload") or {}
    trace = wl.get("trace")
    if not isinstance(trace, dict) or wl.get("arrivals") is not None:  # no trace, or its lengths only
        return None
    return float(trace.get("window_s") or TRACE_WINDOW_S)


def gpu_options(current: str) -> list[str]:
    names = [g.name for g in list_gpus()]
    return names if current in names else [current, *names]


def model_options(current: str) -> list[str]:
    names = [m.name for m in list_models()]
    return names if current in names else [current, *names]

