"""The q / k norm all-reduce of a MiniMax-M2-type attention layer: an exchange, not a layer's kernel chain (issue 33,
round 15; docs/fidelity.md "Round 15: the NVFP4 decode on Blackwell").

MiniMax-M2 normalises q and k over all heads (``use_qk_norm``, ``qk_norm_type: per_layer``;
``ModelSpec.qk_norm_allreduce``). At TP > 1 vLLM's ``MiniMaxM2Attention.forward`` calls
``MiniMaxText01RMSNormTP.forward_qk``: each rank sums the squares of its q and k slices, one
``tensor_model_parallel_all_reduce`` adds the two per-token variances across the ranks (a few bytes per token), and
each rank scales its own slices (vllm-project/vllm ``vllm/model_executor/models/minimax_m2.py``). One all-reduce
per decoder layer, with no RMSNorm of the residual stream after it, so not the all-reduce + RMSNorm fusion's
pattern.

The roofline charges it the fitted all-reduce latency (``allreduce_latency_s``, 24.7 us
embedded). That latency is the time per all-reduce point of a whole layer: round 10's TP split of the B200 rows
(``twin.cost.unsharded_decode``) found that a TP 1 step still pays most of it (the layer's norms, quantisation,
rotary / cache-write and small-GEMM minimum durations; 60-80 us per layer on Blackwell), and only ~6-7 us per
all-reduce is the exchange. The layer's kernel chain is carried by its two regular all-reduce points; the q / k
variance exchange adds only the exchange. Its price: the generation's link part of an all-reduce
(``unsharded_allreduce_link_s@blackwell``, 6 us: the increment per all-reduce of the B200 gpt-oss and MiniMax
NVFP4 TP sets, which round 10 read with this all-reduce counted among the 186 per step), as the fold has it
(``twin.fitting.link_prior``: 5.5 us in the MiniMax family fold, read off gpt-oss); where a fold holds that out
(no link part), NCCL's latency model of one small single-node NVLink all-reduce (LL protocol: 6.6 us + 2 (n - 1)
hops x 0.6 us: 7.8 / 10.2 / 15.0 us at 2 / 4 / 8 GPUs; ``twin.cost.kernel_path.nccl_ll_allreduce_latency_s``), a
stated prior read off no row. Never more than the fitted latency.

Embedded on Blackwell's NVFP4 expert path (``QK_EXCHANGE_PATHS``; issue 33 round 15, after the round's merge):
held out the B200 fold's TPOT 8.5 -> 6.7 % and E2E 8.3 -> 5.6 % (TTFT unchanged), MiniMax's TTFT 13.8 -> 11.9 % and TPOT
5.5 -> 4.3 %; the gpt-oss and Kimi family folds, which refit their shared Blackwell terms on these rows, lose (gpt-oss
TPOT 6.7 -> 9.1 %, Kimi TTFT 7.8 -> 10.3 %; docs/fidelity.md "Round 15 outcome"). The block-FP8 paths keep the fitted
latency: at the exchange alone their TPOT goes 5-9 points more negative, because that path's layer chain is longer
(round 6's FP8 - NVFP4 pairs) and nothing else prices it, so the whole latency stands in for it there. Round 16's
counted chain (``twin.cost.block_fp8_chain``: the exchange plus the path's per-token-group quant kernels, opt-in via
its ``CHAIN_PATHS``) was refuted held out: the counted kernels are a third of what the FP8 path needs.
"""

from __future__ import annotations

from collections.abc import Mapping

from twin.cost import block_fp8_chain
from twin.cost.default_terms import NO_FLOOR_LINK_S
from twin.cost.generations import gpu_generation
from twin.cost.kernel_path import nccl_ll_allreduce_latency_s
from twin.cost.param_checks import check_nonneg
from twin.cost.unsharded_decode import LINK_KEY, ModelledLinkS

QK_EXCHANGE_PATHS: frozenset = frozenset({("blackwell", "nvfp4")})   # (GPU generation, routed-expert format)


def qk_norm_allreduce_latency_s(gpu, tensor_parallel_size: int, allreduce_latency_s: float,
                                link_s: float | None = None, routed_format: str | None = None,
                                chain_paths: Mapping[tuple[str, str], int] | None = None) -> float:
    """Seconds per q / k norm all-reduce on ``tensor_parallel_size`` GPUs: on a (generation, ``routed_format``) in
    ``QK_EXCHANGE_PATHS`` the exchange alone, ``link_s`` (the generation's link part of an all-reduce,
    ``unsharded_allreduce_link_s``) where it is a reading (None or ``default_terms.NO_FLOOR_LINK_S``: none; a
    ``unsharded_decode.ModelledLinkS``, the held-out exchange prior: NCCL's model, not a reading), else NCCL's LL
    figure at ``tensor_parallel_size``, either capped at ``allreduce_latency_s``; on a path in ``chain_paths``
    (path -> its extra kernels; None: ``block_fp8_chain.CHAIN_PATHS``, empty) that exchange plus the path's counted
    chain (``block_fp8_chain.chained_point_s``); elsewhere ``allreduce_latency_s``; 0 at TP 1 (see the module
    docstring)."""
    if tensor_parallel_size <= 1:
        return 0.0
    path = (gpu_generation(gpu), routed_format)
    chain_paths = block_fp8_chain.CHAIN_PATHS if chain_paths is None else chain_paths
    chained = path in chain_paths                        # opt-in: the exchange plus the path's counted chain
    if path not in QK_EXCHANGE_PATHS and not chained:
        return allreduce_latency_s
    # a link part flagged as NCCL's model (the held-out exchange prior) is read at this exchange's GPUs (round 16)
    reading = link_s is not None and link_s < NO_FLOOR_LINK_S and not isinstance(link_s, ModelledLinkS)
    exchange_s = check_nonneg(LINK_KEY, link_s) if reading else nccl_ll_allreduce_latency_s(tensor_parallel_size)
    if chained:
        return block_fp8_chain.chained_point_s(min(exchange_s, allreduce_latency_s), allreduce_latency_s,
                                               chain_paths[path])
    return min(exchange_s, allreduce_latency_s)


def qk_norm_step_s(model, gpu, tensor_parallel_size: int, allreduce_latency_s: float,
                   link_s: float | None = None, routed_format: str | None = None,
                   chain_paths: Mapping[tuple[str, str], int] | None = None) -> float:
    """Seconds per step of the q / k norm all-reduces: one per decoder layer where ``model.qk_norm_allreduce``,
    each at ``qk_norm_allreduce_latency_s``; 0 otherwise."""
    if not model.qk_norm_allreduce:
        return 0.0
    return model.num_hidden_layers * qk_norm_allreduce_latency_s(gpu, tensor_parallel_size, allreduce_latency_s,
                                                                 link_s, routed_format, chain_paths)
