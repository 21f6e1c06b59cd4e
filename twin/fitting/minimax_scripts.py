"""MiniMax-M2.5's nightly NVFP4 B200 rows (issue 33, round 13): the server flags of the InferenceX script that ran
them (public repository SemiAnalysisAI/InferenceX, ``benchmarks/single_node/minimaxm2.5_fp4_b200.sh``), beside
the April flags the twin gives every MiniMax B200 row measured from April (``twin.fitting.silicon_scripts.row_server``:
0.90, FP8 KV, ``max_num_batched_tokens`` = 2 x ISL, prefix caching off, ``--max-cudagraph-capture-size 2048``,
the merged scripts 79bd988e9 / 13962fcfa for NVFP4 and bddbf4031 / 41ed82dc1 for FP8).

The rows on the nightly image ``vllm/vllm-openai:nightly-5b8c30d62b754b575e043ce2fc0dcbf8a64f6306`` (measured
2026-04-03) ran the script of that pull request's commit 08bcde8f1 (2026-04-02, "Use vLLM nightly image ...", PR
#996, merged as 79bd988e9): ``--gpu-memory-utilization 0.95 --block-size=32 --kv-cache-dtype fp8
--no-enable-prefix-caching``, and neither ``--max-cudagraph-capture-size`` nor ``--max-num-batched-tokens``: those
two came with a9c199207 (2026-04-07, "add max-cudagraph-capture-size and max-num-batched-tokens"), when the image
had already moved to v0.19.0. So these rows ran vLLM's defaults there: a 1k prompt step (819-1,024 tokens) is
above the largest captured graph (512 tokens) and runs eagerly (``twin.cost.eager_steps``), which the v0.19.0 rows
of the same checkpoint, GPU and TP (graphed at 2048) do not.

Round 13 left these flags out of ``twin.fitting.silicon_scripts.row_server``: their eager 1k prompt steps then read
Blackwell's one eager MoE floor (``eager_moe_layer_host_s@blackwell``), which MiniMax's layers pay at about their
launch count and Kimi-K2.5's at 1.4-3.6 times theirs, and the Kimi-held-out fold, which fits that floor on MiniMax's
rows, lost (TTFT 10.3 % -> 19.6 %). Round 14 prices MiniMax's NVFP4 layer at its own count on a key Kimi's MLA
layers do not share (``twin.cost.eager_path_floors``, ``@blackwell+gqa+experts_nvfp4``; evidence: the B200 Llama
rows' per-layer value), so the nightly rows no longer read the generation's floor and ``row_server`` gives them
their script (``row_script_server``; docs/fidelity.md "Round 14: the MoE eager floor per family").

The v0.19.0 NVFP4 rows ran the merged script (79bd988e9), which no longer passes ``--block-size=32``: vLLM's default
KV block for a GQA model, 16 tokens (``twin.core.vllm_versions.default_block_size``), not the 32 the twin gives
the other MiniMax B200 rows.
"""

from __future__ import annotations

from twin.fitting.silicon_rows import SiliconRow

MINIMAX = "MiniMaxAI/MiniMax-M2.5"
NIGHTLY_IMAGE_PREFIX = "nightly-5b8c30d6"     # the pull request's image (its tag's commit, abbreviated)


def nightly_pr_row(row: SiliconRow) -> bool:
    """A MiniMax-M2.5 NVFP4 B200 row measured on the pull request's nightly image (script 08bcde8f1)."""
    return (row.model_path == MINIMAX and row.system == "b200_sxm"
            and (row.vllm_version or "").startswith(NIGHTLY_IMAGE_PREFIX))


def pr_script_server(server: dict, row: SiliconRow) -> dict:
    """A nightly pull-request row's ``server`` (as ``twin.fitting.silicon_scripts.row_server`` gives it) with
    08bcde8f1's flags instead of the April ones: 0.95, vLLM's default batched tokens and CUDA-graph sizes. Other
    rows: as given."""
    if not nightly_pr_row(row):
        return server
    out = {k: v for k, v in server.items() if k not in ("max_num_batched_tokens", "max_cudagraph_capture_size")}
    return out | {"gpu_memory_utilization": 0.95}


def merged_nvfp4_row(row: SiliconRow) -> bool:
    """A MiniMax-M2.5 NVFP4 B200 row on v0.19.0 (the merged script 79bd988e9: no ``--block-size``)."""
    return (row.model_path == MINIMAX and row.system == "b200_sxm" and row.vllm_version == "0.19.0"
            and (row.precision or "").lower() == "fp4")


def row_script_server(server: dict, row: SiliconRow) -> dict:
    """``server`` (``row_server``'s, CUDA-graph flags included) with the MiniMax NVFP4 B200 rows' own script facts:
    the nightly rows' 08bcde8f1 flags (``pr_script_server``), the v0.19.0 rows' default block size (the key
    dropped); other rows as given."""
    if merged_nvfp4_row(row):
        return {k: v for k, v in server.items() if k != "block_size"}
    return pr_script_server(server, row)
