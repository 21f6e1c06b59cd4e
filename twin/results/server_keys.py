"""The server a twin run simulated, as top-level keys of its `vllm bench serve` JSON (``twin run --json``), so
``twin calibrate --from-results`` reads the run back with no other option: ``gpu``, ``tensor_parallel_size``
and the vLLM settings calibration reads from a result file (``SERVER_KNOBS``: the names ``vllm bench serve
--metadata KEY=VALUE`` records a real server's settings under, read by ``twin.fitting.readers.vllm_bench``).

Written only for a run calibration can describe from these keys alone: one server of one engine (no replicas,
replica groups, data or pipeline parallelism, expert parallelism or speculative decoding) with the model's own
weight format and a bf16 KV cache. Any other run writes none of them, and calibration asks for ``--scenario``
as it does for a real result that does not say its server."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# the vLLM settings a result file may state (exp-config.yaml, --metadata) and calibration reads
# (twin.fitting.readers: inference-perf, vllm bench serve)
SERVER_KNOBS = ("max_num_seqs", "max_num_batched_tokens", "max_model_len", "enable_prefix_caching",
                "enable_chunked_prefill", "block_size", "gpu_memory_utilization", "vllm_version",
                "async_scheduling")

# deployment fields calibration reads only from the command line or --scenario: the defaults it assumes
_ASSUMED_LAYOUT = {"replicas": 1, "groups": None, "pipeline_parallel_size": 1, "data_parallel_size": 1,
                   "enable_expert_parallel": False, "weight_dtype": "auto", "weight_formats": None, "kv_dtype": "bf16"}


def server_keys(config: Mapping[str, Any]) -> dict[str, Any]:
    """``gpu``, ``tensor_parallel_size`` and ``SERVER_KNOBS`` of a run's config summary
    (``twin.sim.replicas.run_single``); empty for a run calibration could not describe from them."""
    dep, server = config.get("deployment"), config.get("server")
    if not isinstance(dep, Mapping) or not isinstance(server, Mapping) or config.get("speculative_decoding"):
        return {}
    if any(dep.get(k, v) != v for k, v in _ASSUMED_LAYOUT.items()) or not dep.get("gpu"):
        return {}
    out: dict[str, Any] = {"gpu": dep["gpu"], "tensor_parallel_size": dep.get("tensor_parallel_size", 1)}
    for knob in SERVER_KNOBS:
        value = server.get(knob, config.get(knob))
        if value is not None:
            out[knob] = value
    return out


__all__ = ["SERVER_KNOBS", "server_keys"]
