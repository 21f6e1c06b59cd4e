"""The block-FP8 path's longer layer chain, counted, so that the q / k norm all-reduce can be an exchange on that path
too (issue 33, round 16; docs/fidelity.md "Round 16: MiniMax-M2.5's block-FP8 layer chain and the C 8 1k/8k rows").

Round 15 (``twin.cost.qk_norm_allreduce``) priced MiniMax-M2's q / k variance all-reduce as the exchange alone on
Blackwell's NVFP4 expert path, and kept the whole fitted all-reduce latency (``allreduce_latency_s``, 24.7 us
embedded) on the block-FP8 path: at the exchange alone that path's TPOT went 5-9 points more negative, its layer
chain being longer than the NVFP4 checkpoint's and priced by nothing else. This module states that chain as a
count of GPU kernels and prices each at the time a kernel of the dense layer's chain takes, read off the same
all-reduce split:

* **per kernel**: a regular all-reduce point (after attention, after the MLP) carries ``L - exchange`` of the
  layer's kernel chain (round 10: on Blackwell most of the fitted latency is the chain a TP 1 step pays too), and
  the dense FP8 GQA layer of that reading runs 14 kernels besides its two all-reduces (``launch_prior``'s 16-op
  layer less the two collectives), so 7 per point: ``(L - exchange) / 7`` seconds per kernel (2.7 us at the
  embedded 24.7 us and Blackwell's 6 us link part);
* **extra kernels** of a block-FP8 MiniMax layer beyond the NVFP4 checkpoint's (graphed decode, TP > 1, counted
  from vLLM's ``minimax_m2.py`` and the two MoE paths): the per-token-group FP8 activation quantisation before
  ``qkv_proj`` and ``o_proj`` (``per_token_group_quant_fp8``; the NVFP4 checkpoint's attention is bf16, no quant)
  = 2, and in the Triton block-FP8 MoE (``fused_experts``) the second per-token-group quantisation before w2, which
  FlashInfer's CUTLASS FP4 MoE folds into its activation kernel = 1; the rest of the two MoE paths (alignment /
  permutation, two grouped GEMMs, activation, combine) is one kernel each on both: **3 kernels**.

So the q / k point of a chained path costs ``exchange + 3 x (L - exchange) / 7`` (13.4 us at the embedded values,
against 24.7 kept), never more than ``L``; with 7 extra kernels it is ``L`` exactly (round 15's pricing). Where the
fold holds the link part out (no ``exchange`` known) the exchange is NCCL's LL figure, as on the NVFP4 path.

Opt-in (``CHAIN_PATHS`` empty; ``twin.cost.qk_norm_allreduce`` takes another table as its ``chain_paths``
argument, and benchmarks/minimax_fp8_chain.py fills this one for its run), refuted held out: with 3 kernels the
MiniMax family fold's TPOT goes 4.3 -> 6.0 % (-5.2 % signed) and the B200 GPU fold's 6.7 -> 9.6 % (-8.3 %), TTFT
unchanged (11.9 / 14.0 %); only the MiniMax FP8 B200 cases move, 3-8 points more negative. The FP8 path's extra time
per layer is 3-4 times its counted quant kernels (benchmarks/minimax_fp8_chain.py; docs/fidelity.md, round 16).
"""

from __future__ import annotations

from twin.cost.param_checks import check_nonneg
from twin.errors import TwinInputError

CHAIN_KERNELS_PER_POINT = 7          # the dense FP8 GQA layer's 14 non-collective kernels over its 2 all-reduce points
BLOCK_FP8_EXTRA_KERNELS = 3          # per-token-group quant before qkv_proj, o_proj and the MoE's w2 (see above)
# (GPU generation, routed-expert format) -> the extra kernels of that path's layer: the paths whose q / k point is
# priced as a chain; opt-in (empty), e.g. {("blackwell", "fp8"): BLOCK_FP8_EXTRA_KERNELS}
CHAIN_PATHS: dict[tuple[str, str], int] = {}


def chained_point_s(exchange_s: float, allreduce_latency_s: float, extra_kernels: int) -> float:
    """Seconds of a q / k norm all-reduce point on a path whose layer runs ``extra_kernels`` more kernels than the
    NVFP4 checkpoint's: the exchange plus those kernels at ``(L - exchange) / CHAIN_KERNELS_PER_POINT`` each, at
    most ``allreduce_latency_s`` (L)."""
    check_nonneg("exchange_s", exchange_s)
    check_nonneg("allreduce_latency_s", allreduce_latency_s)
    if extra_kernels < 0:
        raise TwinInputError(f"extra_kernels = {extra_kernels!r}: must be an integer >= 0")
    per_kernel_s = max(allreduce_latency_s - exchange_s, 0.0) / CHAIN_KERNELS_PER_POINT
    return min(exchange_s + extra_kernels * per_kernel_s, allreduce_latency_s)
