"""The deployment layout a calibration replays its runs on: what the command line (``--set deployment.FIELD=``),
the result file (``twin.fitting.readers.layout_fields``) and ``--scenario`` say, highest first, and the layouts
calibration cannot fit from one result file, refused in one line naming the layout and what to give instead.

A field on the command line that contradicts the file's is a one-line error naming both (as ``--gpu`` / ``--tp``:
``twin.cli.calibrate_server``), not a silent override; a field the file leaves out takes the command line's or
the scenario's value, else ``twin.fitting.replay.Target``'s default."""

from __future__ import annotations

from typing import Any

from twin.errors import TwinInputError
from twin.fitting.measured_run import MeasuredRun
from twin.fitting.readers.layout_fields import KV_CACHE_DTYPES
from twin.hardware.quant import WEIGHT_DTYPES, normalize_weight_dtype
from twin.hardware.parallel import ALL2ALL_BACKENDS

TARGET_FIELDS = ("weight_dtype", "kv_dtype", "weight_formats", "pipeline_parallel_size", "data_parallel_size",
                 "enable_expert_parallel", "all2all_backend")
# the file's key for each field (vLLM's option name where vLLM has one)
FILE_KEYS = {"weight_dtype": "quantization", "kv_dtype": "kv_cache_dtype", "weight_formats": "weight_formats",
             "pipeline_parallel_size": "pipeline_parallel_size", "data_parallel_size": "data_parallel_size",
             "enable_expert_parallel": "enable_expert_parallel", "all2all_backend": "all2all_backend"}


def refuse_unfittable(run: MeasuredRun, given: Any = ()) -> None:
    """A one-line error for a run whose layout calibration cannot replay (``server_keys.REFUSED_KEYS``, an
    expert-parallel exchange the twin does not model, a weight or KV-cache format the twin does not model, requests
    scheduled by priority; a weight format or exchange the command line gives, ``"weight_dtype" in given``,
    stands for the file's)."""
    lay = run.layout
    unmodelled = lay.get("unmodelled", {})
    if "quantization" in unmodelled and "weight_dtype" not in given:
        raise TwinInputError(f"{run.name}: quantization = {_shown(unmodelled['quantization'])}: not a weight format "
                             f"the twin models ({', '.join(WEIGHT_DTYPES)}, int4-g<group>[-sym]; vLLM's awq, gptq, "
                             f"modelopt_fp4, ...): give the checkpoint's with --set deployment.weight_dtype=FORMAT")
    if "kv_cache_dtype" in unmodelled:
        raise TwinInputError(f"{run.name}: kv_cache_dtype = {_shown(unmodelled['kv_cache_dtype'])}: not a "
                             f"KV-cache format the twin models (vLLM's {', '.join(KV_CACHE_DTYPES)}): give runs with "
                             f"one of them")
    n = lay.get("replicas", 1)
    if n > 1:
        raise TwinInputError(f"{run.name}: the run was served by {n} replicas behind a router (replicas = {n}); "
                             f"calibrate fits one server: give a run of one server (benchmarked directly; twin run: "
                             f"--set deployment.replicas=1)")
    n = lay.get("replica_groups", 1)
    if n > 1:
        raise TwinInputError(f"{run.name}: the run was served by {n} replica groups behind a router (replica_groups "
                             f"= {n}); calibrate fits one server: give a run of one group's server (benchmarked "
                             f"directly; twin run: a deployment without groups)")
    if "disaggregation" in lay:
        raise TwinInputError(f"{run.name}: the run was served disaggregated (disaggregation = {lay['disaggregation']}"
                             f": prefill and decode servers apart); calibrate fits one server that does both: give "
                             f"a run of one colocated server (twin run: without disaggregation)")
    if "speculative_config" in lay:
        raise TwinInputError(f"{run.name}: the run drafted tokens (speculative_config: {lay['speculative_config']}); "
                             f"calibrate replays the target model alone: give runs with speculative decoding off, "
                             f"and the server's acceptance with --acceptance")
    if "all2all_backend" in unmodelled and "all2all_backend" not in given:
        raise TwinInputError(f"{run.name}: all2all_backend = {_shown(unmodelled['all2all_backend'])}: not an "
                             f"expert-parallel exchange the twin models ({', '.join(ALL2ALL_BACKENDS)}): give the one "
                             f"whose bytes it moves with --set deployment.all2all_backend=NAME (DeepEP's and pplx's "
                             f"all-to-all: deepep)")
    if run.server.get("policy", "fcfs") != "fcfs":
        raise TwinInputError(f"{run.name}: scheduling_policy = {_shown(run.server['policy'])}: a result file does "
                             f"not record its requests' priorities and calibrate replays them all at one; give runs "
                             f"served first come, first served (scheduling_policy fcfs)")


def _same(field: str, value: Any) -> Any:
    """``value`` in the form the file's is read in (a name the command line spells another way compares equal)."""
    try:
        if field == "weight_dtype":
            return normalize_weight_dtype(value)
        if field == "weight_formats" and isinstance(value, dict):
            return {k: normalize_weight_dtype(v) for k, v in value.items()}
    except TwinInputError:
        return value
    if field == "kv_dtype" and isinstance(value, str):
        return KV_CACHE_DTYPES.get(value.strip().lower(), value)
    return value


def _shown(value: Any, limit: int = 60) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def layout_target(run: MeasuredRun, dep: dict[str, Any], cli: Any) -> dict[str, Any]:
    """The Target's layout fields for ``run``: the command line's (``dep[field]`` where ``cli("deployment.FIELD")``)
    over the file's ``run.layout`` over the scenario's (``dep[field]`` otherwise)."""
    out: dict[str, Any] = {}
    for field in TARGET_FIELDS:
        key = f"deployment.{field}"
        said = run.layout.get(field)
        if field in dep and cli(key):
            if said is not None and _same(field, dep[field]) != said:
                flag = f"--set deployment.{field}="
                raise TwinInputError(f"{flag}{_shown(dep[field])}: the result file says {FILE_KEYS[field]} "
                                     f"{_shown(said)} (run {run.name}); leave --set deployment.{field} out or give "
                                     f"the file's value")
            out[field] = dep[field]
        elif said is not None:
            out[field] = said
        elif field in dep:
            out[field] = dep[field]
    return out


__all__ = ["FILE_KEYS", "TARGET_FIELDS", "layout_target", "refuse_unfittable"]
