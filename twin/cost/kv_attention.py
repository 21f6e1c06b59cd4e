"""Paged decode attention over an FP8 KV cache on Hopper: the KV cache's achieved read rate,
``kv_memory_efficiency`` (a fraction of the datasheet HBM bandwidth, like ``memory_efficiency``), by (GPU
generation, KV cache format).

What the roofline assumes without it: a decode step's attention reads every scheduled sequence's whole context KV
once at the weights' streaming rate (``memory_efficiency``, 0.978 on Hopper, fitted on bf16 KV caches). Where the
KV cache is FP8 that is half the bf16 bytes at the same rate.

What vLLM runs there (vLLM source, ``vllm/attention/utils/fa_utils.py`` and the FlashAttention backend, 0.10-0.19):
an FP8 KV cache is served by FlashAttention 3 only on SM90 (``flash_attn_supports_fp8``: FA version 3 and device
capability 9.x), which quantises each layer's query to FP8 and runs FA3's FP8 kernel over the paged cache with the
K / V descales. At decode (one query token per sequence, GQA heads packed) that kernel does not stream the FP8
bytes at the bf16 path's rate; the rows below say by how much, they do not say which part of the kernel costs it.

Evidence (issue 33, round 7; docs/fidelity.md "Round 7: Llama decode and gpt-oss held out"): the Llama-3.1-70B
FP8 H100 rows (vLLM 0.10.2, FP8 KV, async scheduling, 45 rows at TP 2 / 4 / 8) miss decode time that halves with
each doubling of TP at 8k contexts (TP 2 / 4 / 8, C = 32: +12.3 / +7.6 / +3.8 ms per step): work on the KV bytes
each GPU reads, 1.5-2.0 times the twin's FP8 KV read time by TP and shape. Picked on a grid with each TP, each
ISL / OSL pair and each load band held out (``benchmarks/llama_decode.py``). Prior: None, i.e. the
weights' rate (``memory_efficiency``); the fit's key is ``kv_memory_efficiency@hopper+kv_fp8``
(``twin.fitting.scoped``), stated prior 0.978 (``twin.fitting.parameters``), evidence the H100 Llama rows
(``twin.fitting.provenance``). Blackwell's FP8 KV (FlashInfer / TRT-LLM-gen decode kernels) keeps the weights'
rate: its Llama rows at TP 2-8 show no such slope. A bf16 KV cache keeps it everywhere.
"""

from __future__ import annotations

from twin.cost.default_terms import KV_FORMAT_TERMS
from twin.cost.generations import gpu_generation
from twin.hardware.catalog import GpuSpec


def kv_format(kv_dtype: str) -> str:
    """The KV cache format's family (``fp8``, ``fp8_e4m3``, ``fp8_e5m2`` -> ``fp8``; else the name itself)."""
    return "fp8" if str(kv_dtype).lower().startswith("fp8") else str(kv_dtype).lower()


def kv_read_efficiency(gpu: GpuSpec, kv_dtype: str, given: float | None) -> float | None:
    """``kv_memory_efficiency`` for this GPU and KV cache format: ``given`` where set, else the embedded value
    of (generation, KV format) (``twin.cost.default_terms.KV_FORMAT_TERMS``), else None (the weights' rate)."""
    if given is not None:
        return given
    return KV_FORMAT_TERMS.get((gpu_generation(gpu), kv_format(kv_dtype)), {}).get("kv_memory_efficiency")


def explain_kv_path(parts: dict[str, float], model) -> None:
    """Split the KV read time the (generation, KV format)'s embedded rate adds beyond the weights' rate
    (``kv_read_path_extra_s``, seconds per step) out of ``parts["kv_read_s"]``, only where that rate is the one in
    use (``model``: a roofline; a given ``kv_memory_efficiency`` stays in ``kv_read_s``)."""
    eff, mem, exposed = model.kv_memory_efficiency, model.memory_efficiency, parts.get("kv_read_s", 0.0)
    # the whole read is exposed + compute; at the weights' rate it is less
    if exposed > 0.0 and eff < mem and eff == kv_read_efficiency(model.gpu, model.kv_dtype, None):
        at_weights_rate = max(0.0, (exposed + parts["attention_compute_s"]) * eff / mem - parts["attention_compute_s"])
        parts["kv_read_path_extra_s"] = exposed - at_weights_rate
        parts["kv_read_s"] = at_weights_rate
