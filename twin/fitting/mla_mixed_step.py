"""The host ops an MLA decoder layer adds in an eager step that holds decodes beside its prompt (issue 33, round 18;
docs/fidelity.md "Round 18: Kimi-K2.5 NVFP4's eager floor with B200 held out").

``twin.fitting.launch_prior`` counts Kimi-K2.5's MLA layer as a prompt-only step (MLA prefill 12 ops: round 9). In
the rows it prices, an eager step is almost never prompt-only: in a closed loop of C >= 4 users a new 1k prompt is
scheduled beside the other users' decodes, and vLLM's MLA layer runs those two kinds of token through two different
attention branches, each issued op by op from Python inside the attention custom op (which no piecewise graph
covers). A GQA layer runs both kinds through one attention call, so the dense per-layer reading (16 ops) holds no
such ops. Counted from vLLM v0.17.0's released code (``model_executor/layers/attention/mla_attention.py``,
``MLAAttention.forward_impl``, ``MLACommonImpl.forward_mha`` / ``_v_up_proj``; the Blackwell decode backend
``v1/attention/backends/mla/flashinfer_mla.py``, which ``platforms/cuda.py`` picks first on Blackwell):

* the prefill (MHA) branch: one op round 9 did not count, the ``output.copy_`` of the prefill output into the
  layer's output buffer;
* the decode (MQA) branch, absent from a prompt-only step: the ``torch.bmm`` of the decode queries by ``W_UK_T``,
  the ``torch.cat`` of the nope / rope query parts (with an FP8 KV cache the fused concat-and-quant op instead),
  FlashInfer's TRT-LLM-gen MLA decode (``trtllm_batch_decode_with_kv_cache_mla``), and ``_v_up_proj``'s
  ``torch.bmm`` by ``W_UV``, the ``reshape`` of its transposed result (a copy: the tensor is not contiguous) and the
  ``out.copy_``: 6.

So 7 host-dispatched ops per MLA layer beyond the prompt-only count (not instrumented: +/- 1-2, the same footing as
round 9's counts). The MoE half was recounted at the same release: Kimi-K2.5's NVFP4 experts run FlashInfer's TRT-LLM-gen
fused MoE (``oracle/nvfp4.py`` tries ``FLASHINFER_TRTLLM`` first and its monolithic kernel accepts DeepSeek-V3
routing; InferenceX's ``kimik2.5_fp4_b200.sh`` sets no MoE backend variable), not the CUTLASS one round 9 named:
fused_add_rms_norm, the FP32 router GEMM, the FP4 activation quant, the routing bias's cast to bf16, the fused MoE
call, the NVFP4 shared expert's quant / gate_up / silu_and_mul / quant / down (run in line: its side stream is off
above ``VLLM_SHARED_EXPERTS_STREAM_TOKEN_THRESHOLD`` = 256 tokens), the routed scale and shared add, the
all-reduce: 12, round 9's number. Both Kimi paths (Marlin INT4, FlashInfer NVFP4) run the same MLA layer, so the
7 apply to both or to neither: ``mla_path_ops`` gives either count.
"""

from __future__ import annotations

from twin.errors import TwinInputError

# host-dispatched ops an MLA decoder layer adds in an eager step that schedules decodes beside its prompt
MLA_MIXED_STEP_OPS = 7
# the expert paths that only Kimi-K2.5's MLA layer runs in the data: (generation, routed experts' format family)
MLA_PATHS: tuple[tuple[str, str], ...] = (("blackwell", "nvfp4"), ("blackwell", "int4"))


def mla_path_ops(prompt_only_ops: int) -> int:
    """An MLA path's host-dispatched ops per decoder layer in a mixed eager step, given its prompt-only count."""
    if prompt_only_ops < 0:
        raise TwinInputError(f"prompt_only_ops must be >= 0, got {prompt_only_ops}")
    return prompt_only_ops + MLA_MIXED_STEP_OPS


def with_mixed_step(path_layer_ops: dict, paths=MLA_PATHS) -> dict:
    """``launch_prior.PATH_LAYER_OPS``-shaped table with each MLA path in ``paths`` at its mixed-step count; every
    other entry unchanged (a new dict)."""
    unknown = [p for p in paths if p not in path_layer_ops]
    if unknown:
        raise TwinInputError(f"no counted path {unknown[0]!r}; counted: {sorted(path_layer_ops)}")
    return {key: ((mla_path_ops(ops), f"{what} + MLA mixed step") if key in paths else (ops, what))
            for key, (ops, what) in path_layer_ops.items()}
