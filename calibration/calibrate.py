"""Calibrate the twin to a model on a device: build the engine, profile it, fit, write the profile.

``calibrate(...)`` is what ``twin calibrate`` and ``python -m calibration.gpu_run`` call. It writes two files:
the profile (``{"format": "twin-profile", "version": 1, ...}``, read by ``cost_model: {kind: profile,
profile: FILE}``) and, beside it, the raw samples it was fitted from (``*.samples.json``), so the fit can be
redone or audited.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from calibration.decode_graphs import BATCH_BUCKETS
from calibration.fit import Fit, fit_samples, make_profile, save_profile
from calibration.engine import ModelRunner
from calibration.environment import DTYPE_NAMES, catalog_device, device_name, torch_dtype
from calibration.measure import build_runner
from calibration.model import ModelShape
from calibration.profiler import ProfileRun, profile_engine
from calibration.sweep_plan import SweepPlan, apply_overrides, default_plan, plan_points, pool_blocks
from calibration.samples import save_samples
from twin.cost.profile_features import DecodePadding
from twin.hardware.catalog import ModelSpec, resolve_model

QUICK_BUDGET_S = 45.0        # measuring; model set-up and the fit come on top (about a minute in all)
DEFAULT_BUDGET_S = 300.0


@dataclass
class CalibrationResult:
    profile: dict[str, Any]
    profile_path: Path
    samples_path: Path
    fit: Fit
    run: ProfileRun
    model: ModelSpec
    wall_s: float
    runner: ModelRunner | None = field(default=None, repr=False)


def decode_padding(environment: Mapping[str, Any]) -> DecodePadding | None:
    """The padding of the engine's decode steps when it ran them as graph buckets (``cuda_graphs`` in the
    samples' environment), else None."""
    if not environment.get("cuda_graphs"):
        return None
    return BATCH_BUCKETS, int(environment.get("block_size", 16))


def resolve_device(device: str | None) -> str:
    dev = (device or "auto").lower()
    if dev == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if dev.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError("device: cuda was asked for but torch.cuda.is_available() is false")
    if dev not in ("cpu",) and not dev.startswith("cuda"):
        raise ValueError(f"device: {device!r}; allowed: auto, cpu, cuda")
    return dev


def model_section(spec: ModelSpec) -> dict[str, Any]:
    return {"name": spec.name, "hf_id": spec.hf_id, "hidden_size": spec.hidden_size,
            "num_hidden_layers": spec.num_hidden_layers, "num_attention_heads": spec.num_attention_heads,
            "num_key_value_heads": spec.num_key_value_heads, "head_dim": spec.head_dim,
            "intermediate_size": spec.intermediate_size, "vocab_size": spec.vocab_size,
            "max_position_embeddings": spec.max_position_embeddings,
            "tie_word_embeddings": spec.tie_word_embeddings, "num_params": spec.num_params}


def shape_of(spec: ModelSpec) -> ModelShape:
    return ModelShape.from_any(spec)


def kv_pool_tokens(spec: ModelSpec, device: str, dtype: torch.dtype, *, max_pool_gib: float | None) -> int | None:
    """How many KV tokens the profiling pool may hold: ``max_pool_gib``, or on a GPU 45 % of the memory left
    after the weights (the rest is for activations and attention's gathered KV), at most 512 Ki tokens."""
    elem = torch.empty((), dtype=dtype).element_size()
    per_token = 2 * spec.num_hidden_layers * spec.num_key_value_heads * spec.head_dim * elem
    if max_pool_gib is not None:
        return max(1, int(max_pool_gib * 2**30 // per_token))
    if torch.device(device).type == "cuda":
        free, _total = torch.cuda.mem_get_info(torch.device(device))
        weights = spec.num_params * elem
        return max(1, min(1 << 19, int(0.45 * max(0, free - weights) // per_token)))
    return None


@dataclass
class Prepared:
    """A model on a device, with the plan that sized its KV pool: what ``calibrate`` runs on."""

    spec: ModelSpec
    device: str
    dtype_name: str
    plan: SweepPlan
    runner: ModelRunner


def prepare(model: str | ModelSpec = "tiny-llama", *, device: str | None = "auto", dtype: str | None = "auto",
            quick: bool = False, threads: int | None = None, seed: int = 0, max_pool_gib: float | None = None,
            plan: SweepPlan | None = None, plan_overrides: dict[str, Any] | None = None,
            cuda_graphs: bool = False) -> Prepared:
    """Resolve the model and device, choose the plan and build the engine (random weights, a paged KV pool
    as large as the plan's largest step needs; ``cuda_graphs``: decode steps as CUDA graphs,
    :mod:`calibration.decode_graphs`)."""
    if threads is not None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        torch.set_num_threads(threads)
    dev = resolve_device(device)
    tdtype = torch_dtype(dtype, dev)
    spec = model if isinstance(model, ModelSpec) else resolve_model(model)
    shape = shape_of(spec)
    if plan is None:
        plan = default_plan(torch.device(dev).type, quick=quick,
                            max_seq_len=min(shape.max_position_embeddings, 1 << 14),
                            max_pool_tokens=kv_pool_tokens(spec, dev, tdtype, max_pool_gib=max_pool_gib),
                            seed=seed)
    if plan_overrides:
        plan = apply_overrides(plan, plan_overrides)
    points = plan_points(plan)
    runner = build_runner(shape, dev, tdtype, num_blocks=pool_blocks(plan, points), block_size=plan.block_size,
                          seed=seed, cuda_graphs=cuda_graphs)
    return Prepared(spec, dev, DTYPE_NAMES[tdtype], plan, runner)


def calibrate(model: str | ModelSpec = "tiny-llama", *, device: str | None = "auto", dtype: str | None = "auto",
              budget_s: float | None = None, quick: bool = False, output: str | Path | None = None,
              samples_output: str | Path | None = None, threads: int | None = None, seed: int = 0,
              replay: bool = True, max_pool_gib: float | None = None, plan: SweepPlan | None = None,
              plan_overrides: dict[str, Any] | None = None, progress: Callable[[float, str], None] | None = None,
              prepared: Prepared | None = None, keep_runner: bool = False) -> CalibrationResult:
    """Profile ``model`` (a catalog name or a Hugging Face config.json; random weights) on ``device`` for
    ``budget_s`` seconds of measurement, fit the cost model, write the profile and its samples.
    ``prepared`` reuses an engine built by :func:`prepare` (then model, device, dtype, threads and plan are
    its own)."""
    t0 = time.perf_counter()
    if budget_s is None:
        budget_s = QUICK_BUDGET_S if quick else DEFAULT_BUDGET_S
    if budget_s <= 0:
        raise ValueError(f"budget must be > 0 seconds, got {budget_s}")
    if prepared is None:
        prepared = prepare(model, device=device, dtype=dtype, quick=quick, threads=threads, seed=seed,
                           max_pool_gib=max_pool_gib, plan=plan, plan_overrides=plan_overrides)
    spec, dev, runner, plan = prepared.spec, prepared.device, prepared.runner, prepared.plan
    dev_type = torch.device(dev).type
    run = profile_engine(runner, plan, budget_s, replay=replay, progress=progress)
    fit = fit_samples(run.samples, target="wall", seed=seed, decode_padding=decode_padding(run.environment))

    out = Path(output) if output is not None else Path(f"{spec.name}-{dev_type}.json")
    samples_path = Path(samples_output) if samples_output is not None else out.with_name(out.stem + ".samples.json")
    save_samples(samples_path, run.samples, {**run.environment, "canary": run.canary}, run.plan,
                 replay=run.replay)
    name = device_name(dev)
    try:
        samples_ref = str(samples_path.resolve().relative_to(out.resolve().parent))
    except ValueError:
        samples_ref = str(samples_path)
    replay_summary = {k: v for k, v in (run.replay or {}).items() if k != "step_records"} or None
    wall = time.perf_counter() - t0
    profile = make_profile(
        fit, model=model_section(spec),
        device={"type": dev_type, "name": name, "catalog_gpu": catalog_device(dev, name)},
        dtype=prepared.dtype_name, environment=run.environment, plan=run.plan, samples_file=samples_ref,
        extra={"calibration": {"budget_s": budget_s, "quick": quick, "seed": seed, "wall_s": round(wall, 3),
                               "profile_s": round(run.wall_s, 3), "points_planned": run.points_planned,
                               "points_measured": run.points_measured, "num_samples": len(run.samples),
                               "extra_passes": run.extra_passes,
                               "notes": run.notes, "speed_drift_pct": run.drift_pct, "canary": run.canary,
                               "replay": replay_summary}})
    save_profile(out, profile)
    return CalibrationResult(profile, out, samples_path, fit, run, spec, time.perf_counter() - t0,
                             runner if keep_runner else None)


def refit(samples_path: str | Path, profile_path: str | Path, *, seed: int = 0, target: str = "wall",
          model: str | ModelSpec | None = None) -> dict[str, Any]:
    """Refit a profile from a samples file (e.g. with another split seed or target) and write it."""
    from calibration.samples import load_samples

    samples, doc = load_samples(samples_path)
    env = doc.get("environment", {})
    shape = env.get("model_shape", {})
    spec = resolve_model(model) if model is not None else None
    fit = fit_samples(samples, target=target, seed=seed, decode_padding=decode_padding(env))
    model_doc = model_section(spec) if spec else {"name": "unknown", **{k: shape.get(k) for k in (
        "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
        "intermediate_size", "vocab_size")}}
    profile = make_profile(fit, model=model_doc,
                           device={"type": env.get("device_type"), "name": env.get("device_name"),
                                   "catalog_gpu": env.get("catalog_device")},
                           dtype=env.get("dtype", "?"), environment=env, plan=doc.get("plan"),
                           samples_file=str(samples_path))
    save_profile(profile_path, profile)
    return profile


__all__ = ["CalibrationResult", "calibrate", "refit", "resolve_device", "QUICK_BUDGET_S", "DEFAULT_BUDGET_S"]
