"""A silicon row's weight formats and parallel layout, as the twin's ``deployment:`` fields (issue 34).

FP8 rows run every decoder linear layer in FP8; FP4 rows NVFP4 (``gemm_quant_mode`` for attention, dense and
shared layers, ``moe_quant_mode`` for the routed experts), except gpt-oss, whose published checkpoint is MXFP4
experts with bf16 attention (the folder's README: "gpt-oss is MXFP4"); the Kimi-K2.5 INT4 rows run the
checkpoint's own formats (INT4 group-32 routed experts, 16-bit elsewhere, read from its config.json). The
layout is the server the row's benchmark script launched (``row_layout``), which is not always the row's label:

* InferenceX's search spaces name a run by its GPU count ``tp``, an expert-parallel flag ``ep`` and
  ``dp-attn``. The rows imported from ``2026-04-06.csv`` and the ``db-dump`` files write ``{tp: T, ep: T}`` as
  ``tp_size`` T, ``attention_dp_size`` T, ``moe_ep_size`` T x T (TP4 DP4 EP16: 16 GPUs, on a ``system`` that is
  one 8-GPU node), while ``2026-03-25.csv`` and the gap-analysis copies of the *same* runs (identical TTFT and
  TPOT) write tp T, attention DP 1, moe_ep T. Every row labelled attention DP > 1 has this shape (DP = TP,
  moe_ep = TP x DP), so it is read as T GPUs.
* T GPUs run ``--tensor-parallel-size T`` plus ``--enable-expert-parallel`` when the script passes it for
  ``EP_SIZE`` > 1 (the MiniMax-M2.5 scripts do; ``kimik2.5_fp4_b200.sh`` never did before 2026-05, so those
  rows are TP only), or, for ``dp-attn: true``, ``--tensor-parallel-size 1 --data-parallel-size T
  --enable-expert-parallel`` (``minimaxm2.5_fp4_b200.sh``; ``DP_ATTENTION_RUNS``).

(Sources: SemiAnalysisAI/InferenceX ``.github/configs/nvidia-master.yaml`` and ``benchmarks/single_node/*.sh``
as of each row's measurement date.) Rows labelled attention DP 1 keep their label: TP, PP, and expert
parallelism when ``moe_ep_size`` > 1 and the script passes it.
"""

from __future__ import annotations

from typing import Any


def _family(model: str) -> str:
    key = model.lower()
    if "gpt-oss" in key or "gpt_oss" in key:
        return "gpt-oss"
    return "kimi" if "kimi" in key else "minimax" if "minimax" in key else key


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


# Kimi-K2.5 NVFP4 rows ran nvidia/Kimi-K2.5-NVFP4 (InferenceX nvidia-master.yaml, kimik2.5-fp4-b200-vllm), a
# ModelOpt checkpoint: NVIDIA's ModelOpt NVFP4 checkpoints leave the attention projections in bf16
# (``exclude_modules``: ``model.layers.*.self_attn*`` in nvidia/DeepSeek-R1-0528-NVFP4, nvidia/MiniMax-M2.5-NVFP4,
# nvidia/GLM-4.7-NVFP4; nvidia/Kimi-K2.6-NVFP4 is described the same way), and vLLM builds the MoE router without a
# quant config. The row's label (``gemm_quant_mode`` nvfp4) describes the rest.
KIMI_NVFP4_BF16_GROUPS = (("attention", "bf16"), ("router", "bf16"))
# MiniMax-M2.5 NVFP4 rows ran nvidia/MiniMax-M2.5-NVFP4 (the same ModelOpt ``exclude_modules``, above): bf16
# attention projections; its router is vLLM's FP32 gate (``minimax_m2.py``), whose FLOPs ``twin.cost.router_gemm``
# prices (``router_fp32``), so its group would stay in the activation dtype, as Kimi's. Not embedded (issue 33,
# round 15, docs/fidelity.md "Round 15: the NVFP4 decode on Blackwell": held out it costs the B200 fold's TTFT):
# empty, the rows keep their label; ``benchmarks/nvfp4_decode_rows.py --facts bf16-attention`` sets the checkpoint's.
MINIMAX_NVFP4_GROUPS: tuple = ()
MINIMAX_NVFP4_CHECKPOINT_GROUPS = KIMI_NVFP4_BF16_GROUPS


def weight_formats(row: Any) -> dict[str, str] | None:
    """Layer groups whose format differs from ``weight_dtype``: NVFP4 rows whose MoE format is not the GEMMs', and
    Kimi-K2.5's NVFP4 checkpoint (``KIMI_NVFP4_BF16_GROUPS``; MiniMax-M2.5's: ``MINIMAX_NVFP4_GROUPS``, opt-in)."""
    if weight_dtype(row) == "nvfp4" and _family(row.model_path) == "kimi":
        return dict(KIMI_NVFP4_BF16_GROUPS)
    if weight_dtype(row) == "nvfp4" and _family(row.model_path) == "minimax" and MINIMAX_NVFP4_GROUPS:
        return dict(MINIMAX_NVFP4_GROUPS)
    if weight_dtype(row) == "nvfp4" and row.moe_quant and row.moe_quant.lower() != "nvfp4":
        return {"routed_experts": row.moe_quant.lower()}
    return None


# scripts that ignored InferenceX's ``ep`` (no --enable-expert-parallel): (family, system, precision).
# kimik2.5_fp4_b200.sh: every version from 2026-03-11 to 2026-04-30, which covers every Kimi NVFP4 row with an
# EP label in the file (measured 2026-03-11 and 2026-03-27, and their undated gap-analysis copies)
NO_EP_FLAG = {("kimi", "b200_sxm", "fp4")}
# runs InferenceX launched with dp-attn (TP1 x DP T, EP): (family, system, precision, isl, osl, GPUs,
# lowest concurrency, first measurement date); nvidia-master.yaml from 2026-04-21: minimaxm2.5-fp4-b200-vllm
# 1k/1k { tp: 2, ep: 2, dp-attn: true, conc 256-1024 }
DP_ATTENTION_RUNS = (("minimax", "b200_sxm", "fp4", 1024, 1024, 2, 256, "2026-04-22"),)


def mislabelled_dp(row: Any) -> bool:
    """True for the import's encoding of InferenceX's ``{tp: T, ep: T}``: attention DP = TP = T, moe_ep T x T."""
    return row.attention_dp > 1 and row.attention_dp == row.tp and row.moe_ep == row.tp * row.attention_dp


def row_layout(row: Any) -> dict:
    """The parallel layout the row's server ran, as ``deployment:`` fields (see the module docstring)."""
    fam, precision = _family(row.model_path), (row.precision or "").lower()
    gpus = row.tp
    ep = row.moe_ep > 1 and (fam, row.system, precision) not in NO_EP_FLAG
    if not mislabelled_dp(row):
        return {"tensor_parallel_size": gpus, "pipeline_parallel_size": row.pp,
                "data_parallel_size": row.attention_dp, "enable_expert_parallel": ep}
    for f, system, p, isl, osl, n, conc, since in DP_ATTENTION_RUNS:
        if (fam, row.system, precision, row.isl, row.osl, gpus) == (f, system, p, isl, osl, n) \
                and row.concurrency >= conc and (row.measured or "") >= since:
            return {"tensor_parallel_size": 1, "pipeline_parallel_size": row.pp, "data_parallel_size": gpus,
                    "enable_expert_parallel": True}
    return {"tensor_parallel_size": gpus, "pipeline_parallel_size": row.pp, "data_parallel_size": 1,
            "enable_expert_parallel": ep}
