"""KV-pool sizing as vLLM derives it at start-up.

vLLM profiles one dummy forward pass of `max_num_batched_tokens` tokens (and a sampler pass over `max_num_seqs`
requests), then gives the KV cache what is left of `gpu_memory x gpu_memory_utilization` after the weights, the
activation peak and non-torch memory:

    available = memory x gpu_memory_utilization - weights per GPU - activation reserve - runtime reserve
    num_gpu_blocks = floor(available / (block_size x KV bytes per token per GPU))

The count includes block 0, the null block vLLM reserves, so requests can use num_gpu_blocks - 1 blocks.

The twin cannot profile, so it estimates the two reserves (both are parameters, override them when you know
better, e.g. from a vLLM start-up log):

* activation reserve: the torch peak of the profile run, which is the larger of its two phases (the forward's
  intermediates are freed before the sampler runs):
  - the forward: max_num_batched_tokens x activation bytes x (2 x hidden + 3 x intermediate / tp) (the MLP's
    live tensors at its peak: the residual and the normed input, gate_up's output and the activated product;
    in a MoE layer `intermediate` is top_k x the expert width plus the shared experts', the fused-MoE cache);
  - the dummy sampler: its logits for min(max_num_seqs, max_num_batched_tokens) requests x vocab, beside the
    forward's output hidden states (max_num_batched_tokens x hidden x activation bytes). vLLM V1's
    ``_dummy_sampler_run`` sets top_p 0.9 and top_k = vocab - 1. Embedded (round 13): the PyTorch top-k/top-p
    sort for every release, activation bytes + ``SAMPLER_BYTES_PER_LOGIT`` (22: fp32 logits, sorted values,
    int64 indices, softmax, two masks). What each release actually runs is pinned in
    ``twin.hardware.pool_release`` (FlashInfer's sampler up to 0.11.0 and from 0.21, the sort in 0.11.1 - 0.16
    at 36 bytes per logit with the sort's transients, the Triton kernels in 0.17 - 0.20, 12 bytes without a
    sort); ``sampler_release`` applies it. It is not the default: held out it did not improve the figures
    (docs/fidelity.md, "Round 14: the KV pool by vLLM release").
* runtime reserve: 1 GiB on a GPU (non-torch allocations: cuBLAS workspaces, NCCL and custom all-reduce
  buffers), 256 MiB on the CPU device. The CUDA-graph pool is not in it: vLLM captures the graphs after it
  has sized the KV cache, outside the budget, up to v0.19 (vLLM PR #30515 added an estimate of their memory
  to the profile behind ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``, "0" in 0.19.0's ``envs.py``; "1" from
  0.20.0's, although vLLM's log line says "default since v0.21.0"), which the twin does not model (no
  measured row ran 0.20 or later; docs/fidelity.md, "Round 14: the KV pool by vLLM release").
  For Llama-3.1-8B on an H100 at 0.9 this gives ~450k KV tokens, close to the ~3.4x concurrency at 128k
  context that vLLM reports for that deployment.

Weights per GPU are the checkpoint's as stored (`ModelSpec.weight_bytes`): a quantized model (fp8, int8, AWQ/GPTQ
int4, bitsandbytes nf4) frees the difference for KV, and an fp8 KV cache halves the bytes per token, exactly as
vLLM's `determine_available_memory` / `get_kv_cache_config` derive the block count from them.

Speculative decoding with a drafter that has weights (a draft model, EAGLE or MTP heads) loads them beside the
target's and gives the drafter's attention layers their own KV in the *same* blocks (one block table, the
drafter's layers are extra layers of every block), so ``draft_weight_bytes`` comes off the budget and
``draft_kv_bytes_per_token`` is added to every token's KV:

    num_gpu_blocks = floor((budget - weights - draft weights - reserves) / (block_size x (KV + draft KV)))

Parallel layouts (``layout``, `twin.hardware.parallel`): the pool is sized per GPU of one DP rank (each DP rank
is its own engine with its own pool). Weights per GPU: the tensor-parallel share of attention, dense layers,
shared experts and embeddings, plus 1 / (tp x dp) of the routed experts, all over pp stages (a stage holds
ceil(layers / pp) layers' weights and KV).

Sliding-window layers (gpt-oss) follow vLLM's hybrid allocator: the layers are split into KV-cache groups of
equal size (full-attention groups and sliding-window groups), one block of the shared pool holds block_size
tokens of one group's layers, so num_blocks = available / (block_size x group layers x KV per token per layer);
a request holds ceil(tokens / block_size) blocks in each full group but at most ceil((window - 1) /
block_size) + 1 in each sliding group (the blocks that slide out of the window are freed). The twin keeps one
block table per request, for the full-attention tokens: its pool is vLLM's blocks, less the sliding groups'
share for max_num_seqs running requests (``sliding_window_reserved_blocks``), divided by the full groups.
"""

from __future__ import annotations

from typing import Any

import math
from dataclasses import asdict, dataclass

from twin.hardware.catalog import (DTYPE_BYTES, GpuSpec, ModelSpec, normalize_dtype, normalize_weight_dtype,
                                  resolve_gpu, resolve_model)
from twin.errors import TwinInputError
from twin.hardware.pool_memory import cuda_total_bytes, moe_workspace_bytes
from twin.hardware.pool_release import SamplerPath, profile_sampler_path, sampler_bytes_per_logit
from twin.hardware.parallel import ParallelLayout
from twin.hardware.weight_formats import WeightFormats, resolve_formats

GIB = 2**30
DEFAULT_RUNTIME_RESERVE_BYTES = {"gpu": 1 * GIB, "cpu": 256 * 2**20}
SAMPLER_BYTES_PER_LOGIT = 4 + 4 + 8 + 4 + 1 + 1   # embedded: fp32 logits, sorted, int64 indices, softmax, two masks


@dataclass(frozen=True)
class KvPoolBreakdown:
    """How the KV pool was sized (bytes are per GPU)."""

    model: str
    gpu: str
    tensor_parallel_size: int
    block_size: int
    gpu_memory_utilization: float
    weight_dtype: str
    kv_dtype: str
    memory_bytes: int
    budget_bytes: int                 # memory x gpu_memory_utilization
    weight_bytes: int
    activation_reserve_bytes: int
    runtime_reserve_bytes: int
    available_kv_bytes: int           # budget - weights - reserves (what the computed count came from)
    kv_bytes_per_token: int
    kv_bytes_per_block: int
    num_gpu_blocks: int               # including the null block
    overridden: bool = False          # num_gpu_blocks_override was given
    draft_weight_bytes: int = 0       # speculative-decoding drafter's weights per GPU (0: none)
    draft_kv_bytes_per_token: int = 0  # drafter's KV per token per GPU, held in the same blocks
    layout: dict | None = None        # the parallel layout (None: tensor parallelism only)
    vllm_num_blocks: int | None = None  # hybrid (sliding-window) models: vLLM's own block count
    sliding_window_reserved_blocks: int = 0   # of those, the sliding groups' share set aside
    sampler_path: str = ""            # sampler_release's top-k / top-p path (twin.hardware.pool_release); "" if none

    @property
    def usable_blocks(self) -> int:
        """Blocks requests can hold: all but the null block."""
        return self.num_gpu_blocks - 1

    @property
    def capacity_tokens(self) -> int:
        return self.usable_blocks * self.block_size

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d.update(usable_blocks=self.usable_blocks, capacity_tokens=self.capacity_tokens)
        return d

    def summary(self) -> str:
        g = lambda b: f"{b / GIB:.2f} GiB"  # noqa: E731
        draft = f"draft weights {g(self.draft_weight_bytes)} - " if self.draft_weight_bytes else ""
        src = "num_gpu_blocks_override" if self.overridden else (
            f"{g(self.memory_bytes)} x {self.gpu_memory_utilization} - weights {g(self.weight_bytes)} - {draft}"
            f"activations {g(self.activation_reserve_bytes)} - runtime {g(self.runtime_reserve_bytes)} = "
            f"{g(self.available_kv_bytes)}")
        lay = self.layout or {}
        where = f"tp={self.tensor_parallel_size}" + "".join(
            f", {k}={lay[v]}" for k, v in (("pp", "pipeline_parallel_size"), ("dp", "data_parallel_size"),
                                           ("ep", "expert_parallel_size")) if lay.get(v, 1) > 1)
        per = " per DP rank" if lay.get("data_parallel_size", 1) > 1 else ""
        if self.vllm_num_blocks is not None and not self.overridden:
            src += (f" (vLLM's hybrid allocator: {self.vllm_num_blocks} blocks shared by the full and sliding-"
                    f"window layer groups, {self.sliding_window_reserved_blocks} of them set aside for the "
                    f"windows of max_num_seqs requests)")
        return (f"KV pool for {self.model} on {self.gpu} ({where}){per}: {src}; "
                f"{self.num_gpu_blocks} blocks of {self.block_size} tokens ({self.capacity_tokens} tokens usable)")


def estimate_activation_bytes(model: ModelSpec, tensor_parallel_size: int, max_num_batched_tokens: int,
                              max_num_seqs: int, weight_dtype: "str | WeightFormats" = "bf16",
                              sampler_path: SamplerPath | None = None,
                              moe_workspace: ParallelLayout | None = None) -> int:
    """The profile run's activation peak, per GPU (see the module docstring); ``sampler_path`` is the dummy
    sampler's top-k / top-p path (``twin.hardware.pool_release``; None: the embedded sort at
    ``SAMPLER_BYTES_PER_LOGIT``); ``moe_workspace``: the layout whose MoE layer's workspaces at
    ``max_num_batched_tokens`` bound the forward phase too (``twin.hardware.pool_memory.moe_workspace_bytes``;
    None: not counted, the embedded rule)."""
    ab = DTYPE_BYTES[resolve_formats(weight_dtype).activation]
    per_token = ab * (2 * model.hidden_size + 3 * -(-model.mlp_activation_width // tensor_parallel_size))
    forward = max_num_batched_tokens * per_token
    if moe_workspace is not None and model.is_moe:
        forward = max(forward, moe_workspace_bytes(model, moe_workspace, max_num_batched_tokens, ab))
    sampled = min(max_num_seqs, max_num_batched_tokens)          # the dummy run's requests, one logit row each
    per_logit = SAMPLER_BYTES_PER_LOGIT if sampler_path is None else sampler_bytes_per_logit(sampler_path)
    sampler = sampled * model.vocab_size * (ab + per_logit)
    return max(forward, max_num_batched_tokens * model.hidden_size * ab + sampler)


def _positive_int(name: str, v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise TwinInputError(f"{name} = {v!r}: must be a positive integer")
    return v


def _gib(b: float) -> str:
    return f"{b / GIB:.1f} GiB"


def kv_pool_breakdown(
    model: ModelSpec | str,
    gpu: GpuSpec | str,
    tp: int = 1,
    block_size: int = 16,
    gpu_memory_utilization: float = 0.9,
    weight_dtype: "str | WeightFormats" = "bf16",
    kv_dtype: str = "bf16",
    max_num_batched_tokens: int = 8192,
    num_gpu_blocks_override: int | None = None,
    *,
    layout: ParallelLayout | None = None,
    max_num_seqs: int = 256,
    activation_reserve_bytes: int | None = None,
    runtime_reserve_bytes: int | None = None,
    max_model_len: int | None = None,
    draft_weight_bytes: int = 0,
    draft_kv_bytes_per_token: int = 0,
    sampler_release: str | None = None,
    cuda_total: bool = False,
    moe_workspace: bool = False,
) -> KvPoolBreakdown:
    """Size the KV pool and say how. Raises TwinInputError when the weights (or weights and reserves) do not fit,
    and, when `max_model_len` is given, when one request of that length could not fit in the pool (as vLLM
    refuses to start then). ``draft_weight_bytes`` / ``draft_kv_bytes_per_token``: a speculative-decoding
    drafter's weights and per-token KV on each GPU (see the module docstring). ``sampler_release``: a vLLM
    release whose dummy sampler's path (``twin.hardware.pool_release``) sizes the sampler reserve; None: the
    embedded rule (the sort at ``SAMPLER_BYTES_PER_LOGIT``, every release). ``cuda_total``: size the budget from
    the device total CUDA reports (``twin.hardware.pool_memory``, what vLLM reads) instead of the catalogue's
    nvidia-smi total; ``moe_workspace``: bound the profile's forward phase by the fused-MoE workspaces at
    ``max_num_batched_tokens`` (``twin.hardware.pool_memory``); off by default."""
    model, gpu = resolve_model(model), resolve_gpu(gpu)
    layout = layout or ParallelLayout(tensor_parallel_size=tp)
    if layout.tp != tp:
        raise TwinInputError(f"layout.tensor_parallel_size = {layout.tp}: differs from tp = {tp}")
    layout.check(model)
    _positive_int("block_size", block_size)
    _positive_int("max_num_batched_tokens", max_num_batched_tokens)
    _positive_int("max_num_seqs", max_num_seqs)
    u = gpu_memory_utilization
    if isinstance(u, bool) or not isinstance(u, (int, float)) or not (0.0 < u <= 1.0):
        raise TwinInputError(f"gpu_memory_utilization = {u!r}: must be a number in (0, 1]")
    formats = resolve_formats(weight_dtype if isinstance(weight_dtype, WeightFormats)
                              else normalize_weight_dtype(weight_dtype))
    weight_dtype = formats.label
    kv_dtype = normalize_dtype(kv_dtype, "kv_dtype")

    for name, flag in (("cuda_total", cuda_total), ("moe_workspace", moe_workspace)):
        if not isinstance(flag, bool):
            raise TwinInputError(f"{name} = {flag!r}: must be True or False")
    memory = cuda_total_bytes(gpu) if cuda_total else int(gpu.memory_bytes)
    budget = math.floor(memory * u)
    weights = -(-model.weight_bytes(formats, tp, moe_shards=layout.moe_shards) // layout.pp)
    release_path = None       # the release's dummy-sampler path, validated whether or not it sizes the reserve
    if sampler_release is not None:
        try:
            release_path = profile_sampler_path(sampler_release, min(max_num_seqs, max_num_batched_tokens))
        except ValueError as exc:
            raise TwinInputError(f"sampler_release = {sampler_release!r}: {exc}") from None
    sampler_path = ""
    if activation_reserve_bytes is None:
        sampler_path = release_path or ""
        activation_reserve_bytes = estimate_activation_bytes(model, tp, max_num_batched_tokens, max_num_seqs,
                                                             formats, release_path,
                                                             layout if moe_workspace else None)
    elif isinstance(activation_reserve_bytes, bool) or not isinstance(activation_reserve_bytes, int) \
            or activation_reserve_bytes < 0:
        raise TwinInputError(f"activation_reserve_bytes = {activation_reserve_bytes!r}: must be an integer >= 0")
    if runtime_reserve_bytes is None:
        runtime_reserve_bytes = DEFAULT_RUNTIME_RESERVE_BYTES[gpu.kind]
    elif isinstance(runtime_reserve_bytes, bool) or not isinstance(runtime_reserve_bytes, int) \
            or runtime_reserve_bytes < 0:
        raise TwinInputError(f"runtime_reserve_bytes = {runtime_reserve_bytes!r}: must be an integer >= 0")
    for name, v in (("draft_weight_bytes", draft_weight_bytes),
                    ("draft_kv_bytes_per_token", draft_kv_bytes_per_token)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise TwinInputError(f"{name} = {v!r}: must be an integer >= 0")
    available = budget - weights - draft_weight_bytes - activation_reserve_bytes - runtime_reserve_bytes
    per_layer = model.kv_bytes_per_token_per_layer(kv_dtype, tp)
    groups = hybrid_kv_groups(model, layout.pp)
    if groups is None:
        kv_token = -(-model.num_hidden_layers // layout.pp) * per_layer
        kv_block = block_size * (kv_token + draft_kv_bytes_per_token)
        vllm_blocks, reserved, full_groups = None, 0, 1
    else:
        group_layers, full_groups, sliding_groups = groups
        kv_token = full_groups * group_layers * per_layer      # the twin's block: every full group's layers
        kv_block = block_size * (kv_token + draft_kv_bytes_per_token)
        vllm_block = block_size * (group_layers * per_layer + draft_kv_bytes_per_token)
        vllm_blocks = available // vllm_block if available > 0 else 0
        window_blocks = -(-(model.sliding_window - 1) // block_size) + 1
        reserved = min(vllm_blocks, sliding_groups * max_num_seqs * window_blocks)

    where = f"model {model.name} needs {_gib(weights)} of {weight_dtype} weights per GPU at tensor_parallel_size={tp}"
    if num_gpu_blocks_override is not None:
        n = _positive_int("num_gpu_blocks_override", num_gpu_blocks_override)
        if n < 2:
            raise TwinInputError(f"num_gpu_blocks_override = {n}: must be at least 2 (block 0 is the null block)")
        if weights > memory:
            raise TwinInputError(f"{where}; the GPU {gpu.name} has {_gib(memory)} in all")
        overridden = True
    else:
        if weights + draft_weight_bytes > budget:
            extra = f" plus {_gib(draft_weight_bytes)} of draft weights" if draft_weight_bytes else ""
            raise TwinInputError(
                f"{where}{extra}; the GPU {gpu.name} has {_gib(memory)} x gpu_memory_utilization {u} = "
                f"{_gib(budget)}: raise tensor_parallel_size, use fp8 weights or a larger GPU")
        n = available // kv_block if available > 0 else 0
        if vllm_blocks is not None:
            n = (vllm_blocks - reserved) // full_groups
        if n < 2:
            extra = f"{_gib(draft_weight_bytes)} draft weights - " if draft_weight_bytes else ""
            raise TwinInputError(
                f"gpu_memory_utilization = {u}: no room for the KV cache: {_gib(budget)} budget - {_gib(weights)} "
                f"weights - {extra}{_gib(activation_reserve_bytes)} activations - "
                f"{_gib(runtime_reserve_bytes)} runtime reserve leaves {_gib(max(available, 0))} for blocks of {kv_block} bytes on {gpu.name}")
        overridden = False

    out = KvPoolBreakdown(
        model=model.name, gpu=gpu.name, tensor_parallel_size=tp, block_size=block_size,
        gpu_memory_utilization=float(u), weight_dtype=weight_dtype, kv_dtype=kv_dtype, memory_bytes=memory,
        budget_bytes=budget, weight_bytes=weights, activation_reserve_bytes=activation_reserve_bytes,
        runtime_reserve_bytes=runtime_reserve_bytes, available_kv_bytes=available, kv_bytes_per_token=kv_token,
        kv_bytes_per_block=kv_block, num_gpu_blocks=n, overridden=overridden,
        draft_weight_bytes=draft_weight_bytes, draft_kv_bytes_per_token=draft_kv_bytes_per_token,
        layout=None if layout.is_trivial else layout.as_dict(), vllm_num_blocks=vllm_blocks,
        sliding_window_reserved_blocks=reserved, sampler_path=sampler_path,
    )
    if max_model_len is not None:
        _positive_int("max_model_len", max_model_len)
        if max_model_len > out.capacity_tokens:
            raise TwinInputError(
                f"max_model_len = {max_model_len}: larger than the KV pool's {out.capacity_tokens} tokens "
                f"({out.usable_blocks} usable blocks of {block_size}); lower max_model_len or give the KV cache "
                f"more memory")
    return out


def hybrid_kv_groups(model: ModelSpec, pp: int = 1) -> tuple[int, int, int] | None:
    """vLLM's KV-cache groups of a model with full and sliding-window layers, per pipeline stage: (layers per
    group, full groups, sliding groups); None when every layer has the same attention. Groups are as large as
    the smaller kind's layer count (vLLM's uniform-page-size grouping); a kind whose count is not a multiple
    takes one more group."""
    full, sliding = model.full_attention_layers, model.sliding_window_layers
    if not full or not sliding:
        return None
    full, sliding = -(-full // pp), -(-sliding // pp)
    size = min(full, sliding)
    return size, -(-full // size), -(-sliding // size)


def num_gpu_blocks(*args: Any, **kwargs: Any) -> int:
    """vLLM's num_gpu_blocks (null block included); arguments as for `kv_pool_breakdown`."""
    return kv_pool_breakdown(*args, **kwargs).num_gpu_blocks
