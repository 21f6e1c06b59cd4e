"""The held-out prior of a fused all-reduce + RMSNorm: the fold's unfused latency less the one kernel the fusion
removes (issue 33, round 10; docs/fidelity.md "Round 10: gpt-oss held out and Blackwell's fused all-reduce").

Only gpt-oss-120b's rows read a fused latency of their own (``fused_allreduce_latency_s@<gen>+experts_mxfp4``: 11 us
on B200 v0.15.1, 18 us on H100 v0.18.0). A fold holding them out reset it to "the unfused all-reduce this fold
measures" (round 8, ``twin.fitting.inherit_fitted``): 22.6 us in the gpt-oss fold, which prices every one of the 72
all-reduces of a gpt-oss decode step as if the fusion saved nothing.

What the fusion does (vLLM's ``AllReduceFusionPass``, ``vllm/compilation/collective_fusion.py``, later
``passes/fusion/allreduce_rms_fusion.py``): each tensor-parallel all-reduce whose output feeds an RMSNorm (with its
residual add; where a static FP8 / NVFP4 quantisation follows, that too) is replaced by one FlashInfer
``trtllm_allreduce_fusion`` kernel (a one-shot Lamport exchange over NVLink for the small decode messages, launched
with programmatic dependent launch) that writes the normed output. So per all-reduce the decode graph runs one
kernel fewer: the all-reduce and the norm become one (gpt-oss: bf16 activations into both norms, no static quant
after them, so exactly one; its MoE input's MXFP8 quantisation is the MoE path's own kernel, not matched).

The unit it is priced in is the one round 9 stated for MLA's extra kernels (``twin.fitting.held_priors``): the
roofline's only fixed time per decoder layer at TP > 1 is its two all-reduces' latency, which with the all-reduce
itself holds the minimum durations of the layer's other kernels (one collinear constant per layer, rounds 7/8), over
the 12 kernels of a GQA decoder layer at TP > 1; so each fitted all-reduce latency stands for
``GQA_LAYER_KERNELS / ALLREDUCES_PER_LAYER`` = 6 kernels, and the fused one for 5:

    fused prior = unfused latency x (1 - FUSION_REMOVED_KERNELS / 6)      (22.6 us -> 18.8 us in the gpt-oss fold)

Checked against the three fused readings in the data (none of them used to state it): gpt-oss H100 v0.18 18 us
(embedded unfused 24.7 -> 20.6 us by the rule), Llama-3.1-70B B200 v0.10.2 ~20-22 us (round 7: its rows put the
fused latency there; 20.6 by the rule), gpt-oss B200 v0.15.1 11 us (20.6: the rule does NOT reach it; what else that
release's path saves per layer is not known here). An upper estimate of the fused latency in the same sense as the
MLA prior (the norm a kernel removes is shorter than an average kernel of the layer), and no per-size rule: vLLM
fuses only messages below a per-TP size (``FI_ALLREDUCE_FUSION_MAX_SIZE_MB`` / the scripts'
``VLLM_FLASHINFER_ALLREDUCE_FUSION_THRESHOLDS_MB``), which every gpt-oss decode step is under (2,880 x 2 bytes per
token: >= 182 tokens at TP 8 under 1 MB), so the prior applies to the whole step as the fitted value did.

Round 11: where the fold keeps Blackwell TP sets and the path's generation has a link part, the reset entry takes
``twin.fitting.layer_fixed_prior`` instead (the kept sets' fixed time per decoder layer; 7.2 us in the gpt-oss
fold); this rule stays for the other folds and for Hopper's path.
"""

from __future__ import annotations

from twin.fitting.held_priors import FUSION_REMOVED_KERNELS
from twin.fitting.mla_kernel_prior import ALLREDUCES_PER_LAYER, GQA_LAYER_KERNELS
from twin.fitting.provenance import RESET
from twin.fitting.scoped import split

FUSED_TERM = "fused_allreduce_latency_s"
KERNELS_PER_ALLREDUCE = GQA_LAYER_KERNELS / ALLREDUCES_PER_LAYER      # 6: the kernels one fitted latency stands for


def fused_allreduce_prior_s(unfused_latency_s: float) -> float:
    """Seconds per fused all-reduce + RMSNorm, from the unfused latency a fold measures (see the module docstring)."""
    return unfused_latency_s * (1.0 - FUSION_REMOVED_KERNELS / KERNELS_PER_ALLREDUCE)


def is_fused_term(parameter: str) -> bool:
    """Whether a fit key is a (scoped) ``fused_allreduce_latency_s``."""
    return parameter.split("@", 1)[0] == FUSED_TERM


def fused_prior_after_fit(plan, values: dict[str, float], matched: dict[str, float] | None = None) -> dict[str, float]:
    """``values`` (a fold's post-fit replacements of its plan's resets: ``inherit_fitted`` / ``held_priors``) with
    every fused all-reduce the plan (``provenance.FoldPlan``) resets priced at ``matched``'s value where it has one
    (round 11: ``twin.fitting.layer_fixed_prior``), else at ``fused_allreduce_prior_s`` of the unfused latency it
    inherited (the fold's fitted one, else the plan's reset value)."""
    out = dict(values)
    for p in reset_fused_terms(plan):
        out[p] = (matched or {}).get(p, fused_allreduce_prior_s(values.get(p, plan.fixed[p])))
    return out


def reset_fused_terms(plan) -> list[str]:
    """The fused all-reduce entries ``plan`` resets (and gives a value)."""
    return [p for p, (_, action) in plan.actions.items() if action == RESET and is_fused_term(p) and p in plan.fixed]


def fused_prior_labels(plan, matched: dict[str, float] | None = None) -> dict[str, str]:
    """What prices each fused all-reduce ``plan`` resets after the fit (``fused_prior_after_fit``), for the report's
    plan lines (``provenance.FoldPlan.how``; without it they would say "inherit")."""
    one_kernel = (f"the fold's unfused latency less {FUSION_REMOVED_KERNELS} kernel of {KERNELS_PER_ALLREDUCE:g}, "
                  "twin.fitting.fused_allreduce_prior")
    def matched_by(p: str) -> str:     # round 16: Hopper's path too (TP > 1 sets, twin.fitting.layer_fixed_prior)
        generation = split(p)[1].split("+", 1)[0].capitalize()
        return f"the kept {generation} TP sets' fixed time per layer, twin.fitting.layer_fixed_prior"
    return {p: (matched_by(p) if p in (matched or {}) else one_kernel) for p in reset_fused_terms(plan)}
