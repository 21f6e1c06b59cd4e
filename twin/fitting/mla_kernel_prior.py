"""The time per small kernel that prices MLA's extra decode kernels where a fold holds Kimi-K2.5 out (issue 33,
round 18; docs/fidelity.md "Round 18: the family fold's throughput (issue 33)").

Round 9's prior (``twin.fitting.held_priors.mla_layer_prior_s``) prices each kernel an MLA decode layer runs beyond
a GQA layer's at ``2 x allreduce_latency_s / 12``: the fold's fitted fixed time per GQA decoder layer (its two
all-reduces' latency, which with the all-reduces themselves holds the minimum durations of the layer's other
kernels) spread evenly over the 12 kernels of a GQA layer at TP > 1. Its docstring calls that an upper estimate,
because two of the 12 are the all-reduces, each longer than a norm, a small GEMM or a concat. MLA's extra kernels
are all of the short kind (two RMSNorms, the q_b GEMM, the W_UK / W_UV batched GEMMs, the query's concat), so the
unit that transfers is the layer's fixed time less its all-reduces' own time, over the layer's other 10 kernels:

    per kernel = 2 x (allreduce_latency_s - a) / (12 - 2) = (allreduce_latency_s - a) / 5

with ``a`` one small all-reduce's own time: NCCL's LL latency model of the smallest exchange (2 NVLink GPUs, 6.6 +
2 x 0.6 = 7.8 us; ``twin.cost.unsharded_decode.EXCHANGE_PRIOR_LINK_S``, the stated prior the held-out link part and
the q / k norm exchange already use). The exchange at the fitted rows' TP 2 / 4 is 7.8 / 10.2 us by the same model,
so 7.8 is the lower end of the all-reduce's own time (the per-kernel unit its upper end). Read off no Kimi row.

In the Kimi family fold (fitted latency 25.07 us) the 4 net extra kernels (round 15: 6 less the two norms the
fused all-reduce absorbs) take 4 x 3.45 = 13.8 us per layer, against 16.7 us by the even spread.
"""

from __future__ import annotations

from twin.cost.unsharded_decode import EXCHANGE_PRIOR_LINK_S

GQA_LAYER_KERNELS = 12             # a GQA decoder layer at TP > 1, its two all-reduces included
ALLREDUCES_PER_LAYER = 2
ALLREDUCE_OWN_S = float(EXCHANGE_PRIOR_LINK_S)   # one small all-reduce's own time: NCCL LL, 2 NVLink GPUs, 7.8 us
# round 18's net-of-the-all-reduces unit is opt-in (better in the Kimi family fold, worse in the B200 GPU and silicon
# source folds; docs): every fold calls these with ``net_of_allreduces=False``, round 9's even spread


def short_kernel_s(allreduce_latency_s: float, net_of_allreduces: bool = False) -> float:
    """Seconds of one short (non-collective) kernel of a decoder layer at its minimum duration, from the fold's
    fitted all-reduce latency: with ``net_of_allreduces``, the layer's fixed time less its all-reduces' own time over
    its other kernels; else (every fold) round 9's even spread over all 12 kernels."""
    if not net_of_allreduces:
        return ALLREDUCES_PER_LAYER * allreduce_latency_s / GQA_LAYER_KERNELS
    short = GQA_LAYER_KERNELS - ALLREDUCES_PER_LAYER
    return ALLREDUCES_PER_LAYER * max(allreduce_latency_s - ALLREDUCE_OWN_S, 0.0) / short


def extra_kernels_s(kernels: int, allreduce_latency_s: float, net_of_allreduces: bool = False) -> float:
    """Seconds per decoder layer of ``kernels`` short kernels: round 9's expression, bit for bit, unless
    ``net_of_allreduces``; then ``kernels`` x ``short_kernel_s(..., True)``."""
    if not net_of_allreduces:
        return kernels * ALLREDUCES_PER_LAYER * allreduce_latency_s / GQA_LAYER_KERNELS
    return kernels * short_kernel_s(allreduce_latency_s, True)
