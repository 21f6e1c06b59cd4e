"""Which measured rows each embedded default was read off, where that is not simply every ground-truth row in
its scope (``twin.fitting.provenance`` states the rule; ``provenance_entries`` the embedded values it applies to).

``DECLARED_EVIDENCE`` overrides the in-scope rule for a fit key: (what the evidence is, a predicate on
(case, deployment) naming its rows). ``HOST_READINGS`` are host-term values read on a generation whose embedded
value is another: only another generation's evidence in ``provenance.host_prior``, never simulated themselves."""

from __future__ import annotations

from collections.abc import Callable

from twin.fitting import launch_prior
from twin.fitting.link_prior import EVIDENCE as LINK_EVIDENCE
from twin.fitting.routing_prior import TERM as ROUTING_TERM, WHAT as ROUTING_WHAT

INFERENCE_PERF = "the inference-perf H100 runs (twin.cost.roofline's serving fit)"


def _inference_perf(case, _deployment) -> bool:
    from twin.fitting.silicon import SiliconCase
    return not isinstance(case, SiliconCase)


def silicon_rows_of(system: str, *families: str) -> Callable:
    """The silicon rows of ``families`` on ``system`` (``b200_sxm``, ``h100_sxm``): an entry read off those only."""
    def rows(case, _deployment) -> bool:
        from twin.fitting.silicon import model_family
        row = getattr(case, "row", None)
        return row is not None and row.system == system and model_family(row.model_path) in families
    return rows


def _family(case) -> str:
    """The case's model family as the family folds name it (``twin.fitting.joint.family_of``)."""
    from twin.fitting.silicon import model_family
    return model_family(case.run.model or case.target.model)


# parameter key -> (what the evidence is, which rows): overrides the in-scope rule
DECLARED_EVIDENCE: dict[str, tuple[str, Callable]] = {**launch_prior.EVIDENCE,     # round 14: the GQA path counts
    **{n: (INFERENCE_PERF, _inference_perf) for n in (
        "memory_efficiency", "step_overhead_s", "per_seq_overhead_s", "request_path_s", "request_path_jitter_s",
        "allreduce_latency_s")},
    # the eager host floors (twin.cost.eager_steps, docs/fidelity.md "Round 5: the per-request TTFT intercept"):
    # per decoder layer off the B200 Llama-3.1-70B rows; per MoE layer off the March B200 Kimi-K2.5 / MiniMax-M2.5
    # rows GIVEN the per-layer value (least squares of the MoE rows' floor less 0.84 ms x layers), so the Llama
    # rows are its evidence too (round 6: declared; round 5 had Kimi / MiniMax only, a leak in the Llama fold)
    "eager_layer_host_s@blackwell": ("the B200 Llama rows", silicon_rows_of("b200_sxm", "llama")),
    "eager_moe_layer_host_s@blackwell": ("the B200 Kimi-K2.5 and MiniMax-M2.5 rows, given the B200 Llama rows' "
                                         "per-layer value", silicon_rows_of("b200_sxm", "kimi", "minimax", "llama")),
    # the Hopper Marlin MXFP4 path (twin.cost.marlin_mxfp4): picked on the gpt-oss-120b H100 rows, folds by TP / ISL /
    # load (docs/fidelity.md "Round 6: gpt-oss-120b and Llama prompt steps")
    **{f"{n}@hopper+experts_mxfp4": ("the H100 gpt-oss-120b rows", silicon_rows_of("h100_sxm", "gpt-oss"))
       for n in ("moe_expert_compute_efficiency", "layer_token_overhead_s", "fused_allreduce_latency_s")},
    # the sync servers' per-sequence time (twin.cost.sync_host): its 45 us read off the Qwen3-32B H100 rows (vLLM
    # 0.12) GIVEN the async servers' 18.7 us (the inference-perf runs), which the embedded 63.7 us includes
    "per_seq_overhead_s@sync": ("the Qwen3-32B H100 rows (its 45 us), given the inference-perf H100 runs' "
                                "per_seq_overhead_s (its 18.7 us)",
                                lambda case, d: _family(case) == "qwen3" or _inference_perf(case, d)),
    # FP8 KV decode attention on Hopper (twin.cost.kv_attention): picked on the Llama-3.1-70B H100 rows, folds by TP /
    # ISL-OSL / load (docs/fidelity.md "Round 7: Llama decode and gpt-oss held out")
    "kv_memory_efficiency@hopper+kv_fp8": ("the H100 Llama-3.1-70B rows", silicon_rows_of("h100_sxm", "llama")),
    # MiniMax-M2.5 FP8's B200 pair (twin.cost.generation_experts, round 8): fitted on the B200 MiniMax FP8 rows
    **{f"{n}@blackwell+experts_fp8": ("the B200 MiniMax-M2.5 FP8 rows", silicon_rows_of("b200_sxm", "minimax"))
       for n in ("moe_prompt_stream_efficiency", "layer_token_decode_share")},
    # ... and its eager floor per MoE layer (round 8b, tried, not embedded: docs/fidelity.md "Round 8: the Blackwell
    # MoE eager floor by expert path"): read off its light-load 1k rows GIVEN the B200 Llama rows' per-layer value
    "eager_moe_layer_host_s@blackwell+experts_fp8": ("the B200 MiniMax-M2.5 FP8 rows, given the B200 Llama rows' per-"
                                                     "layer value", silicon_rows_of("b200_sxm", "minimax", "llama")),
    # the Blackwell link part of an all-reduce (round 10, twin.fitting.link_prior): B200 gpt-oss / MiniMax NVFP4 rows
    **LINK_EVIDENCE, ROUTING_TERM: (ROUTING_WHAT, silicon_rows_of("b200_sxm", "gpt-oss")),    # round 12, routing_prior
    # the knee fitted to 0 +/- 300 tokens on those runs: not identified; 0 is the pure roofline's value
    "gemm_half_tokens": ("none (fitted to 0 +/- 300 tokens: not identified; the pure roofline)", lambda *_: False),
}


# a host term's value READ on a generation whose embedded value is another (Hopper's eager floor stays 0 in
# GENERATION_TERMS: round 7 found the calibrate workflow's synthetic H100 runs made without it), by fit key: (value,
# what it was read off, which rows). Only another generation's evidence in ``host_prior``; never simulated itself.
HOST_READINGS: dict[str, tuple[float, str, Callable]] = {
    # the median of the 8 light-load (C <= 8) 1k rows of H100 Llama-3.1-70B FP8 (TP2 / TP8) and MiniMax-M2.5 FP8
    # (TP4) whose prompt steps exceed the captured graphs: (twin GPU step + the TTFT the embedded defaults miss) /
    # decoder layers, 0.60-1.06 ms (benchmarks/eager_floor_by_generation.py on main 510fba8's defaults, no
    # simulation; an upper bound where the missed time is something else). Given the embedded request path, so
    # the inference-perf runs are its evidence too
    "eager_layer_host_s@hopper": (0.92e-3, "the H100 Llama-3.1-70B / MiniMax-M2.5 rows' light-load 1k prompt steps, "
                                  "given the inference-perf runs' request path",
                                  lambda c, d: silicon_rows_of("h100_sxm", "llama", "minimax")(c, d)
                                  or _inference_perf(c, d)),
}
