"""A silicon row's weight formats and parallel layout, as the twin's ``deployment:`` fields (issue 34).

FP8 rows run every decoder linear layer in FP8; FP4 rows NVFP4 (``gemm_quant_mode`` for attention, dense and
shared layers, ``moe_quant_mode`` for the routed experts), except gpt-oss, whose published checkpoint is MXFP4
experts with bf16 attention (the folder's README: "gpt-oss is MXFP4"); the Kimi-K2.5 INT4 rows run the
checkpoint's own formats (INT4 group-32 routed experts, 16-bit elsewhere, read from its config.json). The
layout is the row's: TP, PP, attention DP (``--data-parallel-size``) and expert parallelism when
``moe_ep_size`` > 1 (``--enable-expert-parallel``: the experts over tp x dp GPUs).
"""

from __future__ import annotations

from typing import Any


def _family(model: str) -> str:
    key = model.lower()
    return "gpt-oss" if ("gpt-oss" in key or "gpt_oss" in key) else "kimi" if "kimi" in key else key


def weight_dtype(row: Any) -> str | None:
    """The twin's weight format for the row's checkpoint ("auto": the checkpoint's own formats per layer
    group, from its config.json), or None when it has none."""
    p = (row.precision or "").lower()
    fam = _family(row.model_path)
    if p == "" and row.gemm_quant is None:
        return "bf16"
    if p == "fp8":
        return "fp8"
    if p == "fp4" and fam == "gpt-oss":
        return "auto"                    # MXFP4 experts, bf16 attention (the published checkpoint)
    if p == "fp4" and (row.gemm_quant or "nvfp4").lower() == "nvfp4":
        return "nvfp4"
    if p == "int4" and fam == "kimi":
        return "auto"                    # INT4 group-32 routed experts, 16-bit elsewhere
    return None


def weight_formats(row: Any) -> dict[str, str] | None:
    """Layer groups whose format differs from ``weight_dtype``: NVFP4 rows whose MoE format is not the GEMMs'."""
    if weight_dtype(row) == "nvfp4" and row.moe_quant and row.moe_quant.lower() != "nvfp4":
        return {"routed_experts": row.moe_quant.lower()}
    return None


def row_layout(row: Any) -> dict:
    """The row's parallel layout as ``deployment:`` fields."""
    return {"tensor_parallel_size": row.tp, "pipeline_parallel_size": row.pp,
            "data_parallel_size": row.attention_dp, "enable_expert_parallel": row.moe_ep > 1}
