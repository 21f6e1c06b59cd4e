"""Stated priors, applied after a fold's fit, for two terms that only one family's rows show (issue 33, round 9;
docs/fidelity.md "Round 9: Kimi and Qwen3 held out (issue 33)"). Without them a fold holding that family out
costs it at 0: Kimi-K2.5 is the data's only MLA family, Qwen3-32B's rows its only server without async scheduling.

1. **MLA's fixed time per decoder layer** (``layer_overhead_s@mla``, twin.cost.mla_decode; embedded 13.2 us, read
   off every Kimi NVFP4 row). Physically: the kernels an MLA decode layer runs beyond a GQA layer's, each at its
   minimum duration inside the CUDA graph. Counted from vLLM's MLA layer (``MultiHeadLatentAttentionWrapper``,
   ``vllm/model_executor/layers/mla.py``) and its decode path (``MLAAttention.forward_impl``,
   ``vllm/model_executor/layers/attention/mla_attention.py``): the q_a and kv_a RMSNorms, the q_b projection (the
   fused q_a / kv_a down projection, rope, the latent cache write, the decode kernel and o_proj replace a GQA layer's
   qkv GEMM, rope, cache write, attention and o_proj one for one), the per-head batched GEMM with W_UK before the
   decode kernel, the query's concat (with its FP8 quantisation on an FP8 KV cache, one kernel) and the batched GEMM
   with W_UV after it: ``MLA_EXTRA_DECODE_KERNELS`` = 6. The time per kernel is read in the unit that transfers
   from the fold's own fit: the roofline's only fixed time per decoder layer at TP > 1 is its two all-reduces'
   latency (``allreduce_latency_s``, fitted per fold; with the all-reduce itself it holds the minimum durations of
   the layer's other kernels, round 7/8: one collinear constant per layer), over the kernels a GQA decoder layer
   runs at TP > 1 (``GQA_LAYER_KERNELS`` = 12: two RMSNorms, the qkv, o, gate-up and down GEMMs, rope, the cache
   write, attention, SiLU-and-mul, two all-reduces). Prior = 6 x 2 x allreduce_latency_s / 12 (an upper estimate:
   an all-reduce takes longer than a small norm or concat). Kimi's own rows are not used.
   Round 15 (docs/fidelity.md "Round 15: Kimi-K2.5's Marlin stream and MLA layer priors"): where every held-out MLA
   server fuses its all-reduces with RMSNorm (all Kimi-K2.5 rows pass ``fuse_allreduce_rms``), the two norms the
   fusion absorbs come off the count (one kernel per all-reduce, ``twin.fitting.fused_allreduce_prior``'s unit):
   their all-reduces are charged the unfused latency, which prices those norms already, so the net extra is 4
   kernels, 4 x 2 x allreduce_latency_s / 12 (15.8 us in the Kimi fold; Kimi's rows read 13.2 us, not used).
   Beside it, the Marlin W4A16 path's decode stream rate where a fold holds its rows out
   (``twin.fitting.marlin_stream_prior``: the other generation's Marlin path carried at equal bytes per SM).
2. **A sync server's host time per sequence** (``per_seq_overhead_s@sync``, twin.cost.sync_host; embedded 45 us over
   the async value, read off the Qwen3 rows). A fold with no sync server in its training rows held it at the fold's
   async ``per_seq_overhead_s`` (0 exposed). Prior: the per-sequence book-keeping of vLLM 0.12's sync decode step
   (plan, hand-off to the worker, worker tables, sampled tokens, output records), modelled and timed in CPU time
   (``benchmarks/sync_host_prior.py``: 2.9-3.5 us per sequence per step on an AMD EPYC), ``SYNC_SEQ_HOST_PRIOR_S``
   = 3 us over the fold's async value. A LOWER bound (logging, stats, metadata builds and GIL hand-offs not
   modelled): the Qwen3 rows read ~15x more, which the model does not explain (docs).
   Round 13 (docs/fidelity.md "Round 13: the sync server held out"): vLLM 0.12's OWN engine-core code timed in CPU
   time where it runs without a GPU (``benchmarks/sync_engine_host.py``: its ``Scheduler.schedule()`` 5.8-7.4 us,
   the plan's pickle hand-off 0.5-0.7, ``update_from_output()`` 3.1-4.4 per sequence per step, the worker's phases
   still the model's 1.6-2.1: 11.2 / 11.3 / 14.7 us in three runs on the same AMD EPYC), ``SYNC_SEQ_HOST_PRIOR_S``
   = 11 us. Still a lower bound (the worker's real code and the GIL hand-offs not timed); not read off any row.
   Round 10: beside it, the GPU time of vLLM 0.12's sort-based top-k / top-p sampler where the held-out rows'
   client leaves sampling to a generation config that sets them (``twin.fitting.sampler_facts``,
   ``twin.cost.sort_sampler``: round 11, the kernels of PyTorch's sort path by batch, radix passes at CUB's stated
   0.57 of the datasheet bandwidth: 16.6 / 19.0 us per Qwen3-32B sequence on an H100 below / from 128 rows, an
   estimate from below). The Qwen3 rows are sync AND sampled so; the data read the sum.
"""

from __future__ import annotations

from twin.fitting.marlin_stream_prior import marlin_stream_prior
from twin.fitting.marlin_unkept_prior import marlin_unkept_prior
from twin.fitting.mla_kernel_prior import ALLREDUCES_PER_LAYER, extra_kernels_s
from twin.fitting.provenance import RESET, FoldPlan, embedded_start
from twin.fitting.sampler_facts import sort_sampler_prior_s
from twin.hardware.model_catalog import resolve_model

MLA_KEY, SYNC_KEY = "layer_overhead_s@mla", "per_seq_overhead_s@sync"
MLA_EXTRA_DECODE_KERNELS = 6       # q_a / kv_a RMSNorms, q_b GEMM, W_UK and W_UV batched GEMMs, the query's concat
SYNC_SEQ_HOST_PRIOR_S = 11.0e-6    # s per sequence per step: benchmarks/sync_engine_host.py (CPU time, AMD EPYC)
FUSION_REMOVED_KERNELS = 1         # all-reduce + (add) RMSNorm -> one kernel (twin.fitting.fused_allreduce_prior)


def mla_layer_prior_s(allreduce_latency_s: float, fused: bool = False, net_of_allreduces: bool = False) -> float:
    """Seconds per MLA decoder layer per step: the MLA layer's extra kernels at the per-kernel time a GQA layer's
    fitted fixed time per layer (its all-reduces' latency) gives. ``fused`` (round 15): the held-out MLA servers fuse
    each all-reduce with its RMSNorm, which removes one kernel per all-reduce (``FUSION_REMOVED_KERNELS``) that the
    unfused latency they are charged (no fused value is read for their path) still prices: the layer's net extra is
    6 - 2 = 4 kernels. ``net_of_allreduces``: round 18's opt-in per-kernel unit (``twin.fitting.mla_kernel_prior``);
    no fold sets it."""
    kernels = MLA_EXTRA_DECODE_KERNELS - (ALLREDUCES_PER_LAYER * FUSION_REMOVED_KERNELS if fused else 0)
    return extra_kernels_s(kernels, allreduce_latency_s, net_of_allreduces)


def mla_servers_fuse(held_out) -> bool:
    """Whether every held-out case of an MLA model runs a server that fuses its all-reduces with RMSNorm (a server
    fact: its flags and release, ``twin.cost.kernel_path``); False without such a case. ``held_out``: (case, its
    deployment) pairs, as the fold built them (``twin.fitting.joint.with_deployments``)."""
    deps = [d for c, d in held_out if getattr(resolve_model(c.target.model), "is_mla", False)]
    return bool(deps) and all(getattr(d, "allreduce_fusion", False) for d in deps)


def _allreduce_s(params: dict[str, float]) -> float:
    return params.get("allreduce_latency_s", embedded_start(("allreduce_latency_s",))["allreduce_latency_s"])


def held_priors_after_fit(plan: FoldPlan, params: dict[str, float],
                          names=(), held_out=()) -> tuple[dict[str, float], dict[str, float]]:
    """(plan resets replaced, values added to the fold's parameters): the MLA layer time where the plan reset it
    (to its flat prior 0), the sync host time where the fold holds ``per_seq_overhead_s@sync`` at the async value
    (fitted in ``names`` but not in ``params``: no sync server among the training rows) or reset it, plus the sort
    sampler's time of the ``held_out`` cases that pay it (round 10). ``held_out``: (case, its deployment) pairs of
    the fold's held-out cases (``twin.fitting.joint.with_deployments``)."""
    def reset(key: str) -> bool:
        return plan.actions.get(key, (None, None))[1] == RESET and key in plan.fixed

    sync_prior = SYNC_SEQ_HOST_PRIOR_S + sort_sampler_prior_s([c for c, _ in held_out])
    resets: dict[str, float] = marlin_stream_prior(plan, params)      # round 15: the Marlin stream per SM
    resets |= marlin_unkept_prior(plan, params, resets)                # round 18: no Marlin path kept
    if reset(MLA_KEY):
        resets[MLA_KEY] = mla_layer_prior_s(_allreduce_s(params), mla_servers_fuse(held_out))
    if reset(SYNC_KEY):
        resets[SYNC_KEY] = plan.fixed[SYNC_KEY] + sync_prior
    added: dict[str, float] = {}
    if SYNC_KEY in names and SYNC_KEY not in params and SYNC_KEY not in resets and "per_seq_overhead_s" in params:
        added[SYNC_KEY] = params["per_seq_overhead_s"] + sync_prior
    return resets, added
