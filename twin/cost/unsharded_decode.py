"""The fixed time per decoder layer that a step without tensor parallelism still pays (issue 33, round 10;
docs/fidelity.md "Round 10: Llama on B200 and the vLLM 0.10.2 decode gap").

At TP > 1 the roofline charges each decoder layer two all-reduces at the fitted latency (``allreduce_latency_s``,
24.7 us embedded; a path's fused all-reduce + RMSNorm where it has its own value, e.g. gpt-oss's MXFP4 path on
Blackwell, 11 us), and at TP 1 nothing. The B200 rows say that split is wrong on Blackwell. Per (model, format,
release, ISL / OSL, CONC <= 8), the measured TPOT over TP 1 / 2 / 4 / 8 is a fixed time K plus a part TP divides
(w / TP) plus, at TP > 1 only, an all-reduce part A; by least squares (``benchmarks/tp1_decode.py``):

* Llama-3.1-70B FP8 / NVFP4 (vLLM 0.10.2, 2025-10-29): A = -0.42 / +0.36 ms per step over 160 all-reduces,
  K = 5.5-6.4 / 5.0-6.0 ms at every TP: TP 1 pays the fixed time TP > 1 pays, and the all-reduces add nothing
  the rows resolve;
* MiniMax-M2.5 NVFP4 (vLLM 0.19.0, 2026-04-22): A = 1.31 ms over 186 all-reduces (7.0 us each), K = 3.7-4.4 ms;
* gpt-oss-120b MXFP4 (vLLM 0.15.1, 2026-02-25): A = 0.40 ms over 72 (5.5 us each), K = 2.4-2.8 ms;
* K per decoder layer: 60-80 us in all four sets.

So on Blackwell, three families and three releases, what the fitted all-reduce latency carries at TP > 1 is
mostly fixed time of the layer's kernel chain (norms, activation quantisation, rotary / cache write, the decode
attention kernel, the small-M GEMMs' minimum durations: which kernels, TPOT rows cannot say) that a TP 1 step runs
too; the communication itself is the small remainder. The twin's TP 1 step had lost it: Llama B200 TP 1 missed
~5 ms per step (round 7, TPOT -17..-40 %), MiniMax NVFP4 TP 1 ~2.9 ms (-37..-41 %), gpt-oss TP 1 ~0.25 ms.

The term: the roofline's ``unsharded_allreduce_link_s`` (the link part of one all-reduce, seconds; None: the
embedded ``GENERATION_TERMS[gen]["unsharded_allreduce_link_s"]``, else ``default_terms.NO_FLOOR_LINK_S``, no
floor; issue 33 round 11: a fold holding out its B200 rows resets it to that, ``twin.fitting.link_prior``), a
deployment with no collective at all (TP 1, no expert or data-parallel exchange) pays per decoder layer and step
``2 x max(L - link, 0)``, L the all-reduce latency its path would run at TP > 1
(the fused path value where there is one, else the unfused latency; the q / k norm's extra all-reduce of
MiniMax-type models is all communication and is not charged). ``explain()``: ``unsharded_layer_floor_s``
(seconds per step), out of ``overhead_s``. Blackwell's link part: 6 us, the increment per all-reduce read off the
gpt-oss and MiniMax B200 TP pairs (5.5 and 7.0 us), the Llama rows not used (they test it). Hopper has none: its
only TP 1 rows (Llama-2-7B, the inference-perf runs, unfused, 32 layers) fit without it (TPOT within 3 %), so no
reading says a Hopper TP 1 step misses the time; a generation without an entry pays nothing (the old behaviour).
"""

from __future__ import annotations

from twin.cost.kernel_path import explain_layer_overhead, nccl_ll_allreduce_latency_s
from twin.cost.param_checks import check_nonneg

LINK_KEY = "unsharded_allreduce_link_s"      # GENERATION_TERMS entry: the link part of one all-reduce (s)


class ModelledLinkS(float):
    """A link part that is NCCL's latency model, not a reading off rows: its value is the model at the smallest
    exchange (2 NVLink GPUs), which a TP 1 step's floor subtracts; an exchange over n GPUs reads the same model at n
    (``twin.cost.qk_norm_allreduce``). The type is the flag: a float still, it rides unchanged through a fold's
    fixed terms, its printed plan and the roofline's keywords, and a reading that happens to equal it stays a
    reading."""
    __slots__ = ()


# issue 33 round 16: the link part's stated prior where a fold holds out the rows it was read off and keeps none of
# them (twin.fitting.link_prior): NCCL's LL latency model of one small all-reduce, at its smallest exchange (2
# NVLink GPUs: 7.8 us), flagged as the model (ModelledLinkS)
EXCHANGE_PRIOR_LINK_S = ModelledLinkS(nccl_ll_allreduce_latency_s(2))
ALLREDUCE_POINTS_PER_LAYER = 2               # after attention's o_proj and after the MLP's down projection


def unsharded_floor_s(cost_model, tensor_parallel_size: int, collective_s: float, link_s: float | None) -> float:
    """Seconds per step a deployment without any collective (``tensor_parallel_size`` 1 and ``collective_s``, its
    expert / data-parallel exchange time per step, 0) pays for the per-layer kernel time its TP > 1 all-reduces
    carry: 2 x decoder layers x max(L - link, 0), ``link_s`` the link part (the roofline's ``unsharded_allreduce_
    link_s``: its generation's, else ``default_terms.NO_FLOOR_LINK_S``, longer than any L: 0; None: 0 too)."""
    if tensor_parallel_size != 1 or collective_s or link_s is None:
        return 0.0
    latency_s = cost_model.fused_allreduce_latency_s      # the path's fused value, else the unfused latency
    return ALLREDUCE_POINTS_PER_LAYER * cost_model.model.num_hidden_layers * max(latency_s - link_s, 0.0)


def step_fixed_parts(cost_model, tensor_parallel_size: int, collective_s: float,
                     terms: dict[str, float | None]) -> tuple[float, float, float]:
    """(the MoE layers' fixed time, the unsharded floor, the whole fixed time) of one step, seconds: the step
    overhead, the fixed time per decoder layer (``layer_overhead_s``), per MoE layer (``moe_layer_overhead_s``)
    and the unsharded floor (``unsharded_floor_s``; ``collective_s``: the step's expert / data-parallel exchange;
    ``terms[LINK_KEY]``: the link part, as ``cost_model.unsharded_allreduce_link_s``; a one-line error if negative;
    ``terms``: the roofline's resolved terms, ``twin.cost.default_terms.embedded``)."""
    model = cost_model.model
    t_moe = cost_model.moe_layer_overhead_s * model.moe_layers if model.is_moe else 0.0
    link_s = terms.get(LINK_KEY)
    link_s = cost_model.unsharded_allreduce_link_s = None if link_s is None else check_nonneg(LINK_KEY, link_s)
    floor_s = unsharded_floor_s(cost_model, tensor_parallel_size, collective_s, link_s)
    return t_moe, floor_s, (cost_model.step_overhead_s + cost_model.layer_overhead_s * model.num_hidden_layers
                            + t_moe + floor_s)


def explain_layer_floors(parts: dict[str, float], cost_model) -> None:
    """``twin.cost.kernel_path.explain_layer_overhead``, then the unsharded floor (``cost_model.unsharded_floor_s``,
    seconds per step) moved out of ``parts["overhead_s"]`` into ``parts["unsharded_layer_floor_s"]``, only where it
    is charged; the parts still add up."""
    explain_layer_overhead(parts, cost_model)
    step_s = cost_model.unsharded_floor_s
    if step_s:
        parts["unsharded_layer_floor_s"] = step_s
        parts["overhead_s"] -= step_s
