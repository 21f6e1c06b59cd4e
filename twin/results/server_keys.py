"""The server a twin run simulated, as top-level keys of its `vllm bench serve` JSON (``twin run --json``), so
``twin calibrate --from-results`` reads the run back with no other option: ``gpu``, ``tensor_parallel_size``,
the vLLM settings calibration reads from a result file (``SERVER_KNOBS``) and the layout it replays
(``LAYOUT_KEYS``), under the names ``vllm bench serve --metadata KEY=VALUE`` records a real server's settings
under (vLLM's own option names where vLLM has one), read by ``twin.fitting.readers.vllm_bench``.

A layout key is written only where the run differs from what calibration assumes without it: ``quantization``
(a weight format other than the checkpoint's own, in the twin's format names), ``weight_formats`` (per layer group
overrides; the twin's own key, vLLM has none), ``kv_cache_dtype`` (vLLM's value: ``fp8``, ``float16``,
``float32``; bf16 is not written), ``pipeline_parallel_size`` / ``data_parallel_size`` above 1,
``enable_expert_parallel`` when on, and ``all2all_backend`` when not vLLM's default.

A run calibration cannot fit from one result file writes the key that says so (``REFUSED_KEYS``) and calibration
refuses it in one line: ``replicas`` (several servers behind a router), ``replica_groups`` (several groups; nothing
else is written, their servers differ), ``disaggregation`` (``"<P>P<D>D"``: prefill and decode servers apart;
nothing else is written) and ``speculative_config`` (vLLM's ``--speculative-config``: method and draft tokens).

Every other server knob a scenario sets away from its default (``KNOB_KEYS``: CUDA graphs, a KV-block override, KV
offloading, the entry point, the scheduler's behaviours; the run's config carries them as ``server_knobs``,
``twin.sim.replicas.run_single``) is written under vLLM's option name where vLLM has one (``scheduling_policy``
for ``server.policy``), else the twin's field name, and ``server_start: "cold"`` for a freshly started server, so
calibration replays the server the run simulated (``twin.fitting.readers.knob_fields``) or refuses it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# the vLLM settings a result file may state (exp-config.yaml, --metadata) and calibration reads
# (twin.fitting.readers: inference-perf, vllm bench serve)
SERVER_KNOBS = ("max_num_seqs", "max_num_batched_tokens", "max_model_len", "enable_prefix_caching",
                "enable_chunked_prefill", "block_size", "gpu_memory_utilization", "vllm_version",
                "async_scheduling")
# the layout calibration replays (twin.fitting.replay.Target), written where a run differs from the default
LAYOUT_KEYS = ("quantization", "weight_formats", "kv_cache_dtype", "pipeline_parallel_size", "data_parallel_size",
               "enable_expert_parallel", "all2all_backend")
# layouts calibration cannot fit from one result file: written so that it refuses in one line
REFUSED_KEYS = ("replicas", "replica_groups", "disaggregation", "speculative_config")
# the twin's deployment.kv_dtype -> vLLM's --kv-cache-dtype (bf16, the default, is not written)
KV_CACHE_DTYPE_NAMES = {"fp8": "fp8", "fp16": "float16", "fp32": "float32"}
DEFAULT_ALL2ALL = "allgather_reducescatter"
# every other knob of a scenario's server section: the file's key -> the twin's field (``server.FIELD``), written
# where the run sets it away from its default (vLLM's option name where vLLM has one, else the twin's)
KNOB_KEYS = {name: name for name in (
    "num_gpu_blocks_override", "max_cudagraph_capture_size", "cudagraph_mode", "fuse_allreduce_rms",
    "float32_matmul_precision", "entrypoint", "kv_offloading_size", "kv_offloading_backend",
    "kv_offloading_bandwidth_gb_s", "kv_offloading_lower", "long_prefill_token_threshold", "scheduler",
    "admission_watermark", "static_batch_size", "static_batch_timeout_s", "static_reserve_max_length",
    "static_pad_finished", "async_free_after_next_schedule", "async_hold_finished_slots", "reserve_null_block",
    "free_unhashed_blocks_to_head", "scheduler_reserve_full_isl", "prefix_cache_stats_at_admission",
    "pad_spec_decode_first_step")} | {"scheduling_policy": "policy"}
KNOB_FIELDS = {field: key for key, field in KNOB_KEYS.items()}


def server_knobs(server: Any) -> dict[str, Any]:
    """The knobs of ``KNOB_KEYS`` a scenario's ``server`` section (``twin.scenario.ServerConfig``) sets away from
    their defaults, by field name (``{}``: none)."""
    return {k: v for k, v in server.model_dump(exclude_defaults=True).items() if k in KNOB_FIELDS}


def _layout(dep: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if dep.get("weight_dtype", "auto") != "auto":
        out["quantization"] = dep["weight_dtype"]
    if dep.get("weight_formats"):
        out["weight_formats"] = dict(dep["weight_formats"])
    if dep.get("kv_dtype", "bf16") in KV_CACHE_DTYPE_NAMES:
        out["kv_cache_dtype"] = KV_CACHE_DTYPE_NAMES[dep["kv_dtype"]]
    for key in ("pipeline_parallel_size", "data_parallel_size"):
        if dep.get(key, 1) != 1:
            out[key] = dep[key]
    if dep.get("enable_expert_parallel"):
        out["enable_expert_parallel"] = True
    if dep.get("all2all_backend", DEFAULT_ALL2ALL) != DEFAULT_ALL2ALL:
        out["all2all_backend"] = dep["all2all_backend"]
    if dep.get("replicas", 1) != 1:
        out["replicas"] = dep["replicas"]
    return out


def _pools(pd: Mapping[str, Any]) -> str | None:
    """``"<P>P<D>D"``: a disaggregated run's prefill and decode replicas (None without both counts)."""
    counts = [(pd.get(pool) or {}).get("replicas") if isinstance(pd.get(pool), Mapping) else None
              for pool in ("prefill", "decode")]
    return f"{counts[0]}P{counts[1]}D" if all(isinstance(n, int) for n in counts) else None


def server_keys(config: Mapping[str, Any]) -> dict[str, Any]:
    """``gpu``, ``tensor_parallel_size``, ``SERVER_KNOBS`` and the layout keys of a run's config summary
    (``twin.sim.replicas.run_single``); a disaggregated or multi-group run gets only the key that says so."""
    dep, server = config.get("deployment"), config.get("server")
    if not isinstance(dep, Mapping):
        return {}
    if isinstance(config.get("disaggregation"), Mapping):
        pools = _pools(config["disaggregation"])
        return {"disaggregation": pools} if pools else {}
    if isinstance(dep.get("groups"), list) and len(dep["groups"]) > 1:
        return {"replica_groups": len(dep["groups"])}
    if not isinstance(server, Mapping) or not dep.get("gpu"):
        return {}
    out: dict[str, Any] = {"gpu": dep["gpu"], "tensor_parallel_size": dep.get("tensor_parallel_size", 1)}
    for knob in SERVER_KNOBS:
        value = server.get(knob, config.get(knob))
        if value is not None:
            out[knob] = value
    out.update(_layout(dep))
    knobs = config.get("server_knobs")
    if isinstance(knobs, Mapping):
        out.update({KNOB_FIELDS[k]: v for k, v in knobs.items() if k in KNOB_FIELDS})
    if isinstance(config.get("cold_start"), Mapping):
        out["server_start"] = "cold"
    spec = config.get("speculative_decoding")
    if isinstance(spec, Mapping):
        out["speculative_config"] = {k: spec[k] for k in ("method", "num_speculative_tokens") if k in spec}
    return out


__all__ = ["DEFAULT_ALL2ALL", "KNOB_FIELDS", "KNOB_KEYS", "KV_CACHE_DTYPE_NAMES", "LAYOUT_KEYS", "REFUSED_KEYS",
           "SERVER_KNOBS", "server_keys", "server_knobs"]
