"""A freshly started server's one-off kernel compiles: the Triton fused-MoE kernels vLLM JIT-compiles at the first
step of each new kernel specialisation (issue 33, round 11: Mixtral's cold-start stalls).

**Where it applies.** vLLM runs an unquantised (BF16 / FP16) MoE layer on Hopper through its Triton ``fused_moe``
kernel (``vllm/model_executor/layers/fused_moe/fused_moe.py``: ``fused_moe_kernel``, launched twice per MoE layer:
the gate/up GEMM with ``MUL_ROUTED_WEIGHT=False, top_k=k`` and the down GEMM with ``MUL_ROUTED_WEIGHT=True,
top_k=1``, two distinct compile-time constants, hence two compiled kernels). Triton compiles a kernel the first time
it is launched with a new *specialisation*: a new value of any ``tl.constexpr`` argument (the block configuration
``BLOCK_SIZE_M/N/K``, ``GROUP_SIZE_M``, ``num_warps``, ``num_stages``) or a new divisibility class of an integer
argument (Triton specialises each int on ``== 1`` and ``% 16 == 0``). The host thread compiles inside the forward
pass, so the GPU idles for the compile; with tensor parallelism every rank compiles the same kernels in parallel, so
the step waits one compile time, not TP of them.

**Which specialisations a step meets.** The block configuration comes from vLLM's tuned table for the layer shape
and GPU (``configs/E=<experts>,N=<intermediate per rank>,device_name=<GPU>.json``), taking the entry whose token
count is nearest the step's M tokens (ties: the smaller, the file's order). The ints are ``num_valid_tokens = k M``
and ``EM = k M + E (BLOCK_SIZE_M - 1)`` (``moe_align_block_size``'s padded length), so with k = 2 and even
BLOCK_SIZE_M the class is set by M mod 8 (0: ``num_valid_tokens`` divisible by 16; 4: ``EM`` divisible by 16;
else neither). The strides and N, K do not vary with the step. vLLM has left these two ints specialised (issue
#11056, Dec 2024, asked for ``do_not_specialize``; its PR #11057 closed unmerged; PRs #56580 and #55268, Sept 2026,
open, say start-up profiling and graph capture reach only a few of the combinations, so the first request that
lands on another compiles it mid-serving).

**Which are compiled before the first request.** vLLM's start-up runs the model at ``max_num_batched_tokens``
(the memory profile run) and at every CUDA-graph capture size (``[1, 2, 4] + 8, 16, ... 248`` then every 16 up to
the largest capture size, ``twin.cost.eager_steps.capture_size_tokens``); a graphed step is padded to a capture
size, so only steps above the largest capture size run the kernel at their own M. Those meet configurations and
classes start-up never ran: up to 13 specialisations for Mixtral-8x7B TP 2 on H100 (2048-token budget, 256-token
graphs), each two kernel compiles, paid once per server process at the first step that meets it.

**Prior** (``TRITON_COMPILE_S_PER_KERNEL``): 0.37 s of host CPU per kernel compile, measured (not fitted) by
compiling vLLM's ``fused_moe_kernel`` BF16 path with Triton 3.5.1 (the Triton of PyTorch 2.9, vLLM 0.12-0.14) for
sm_90 at the configurations of the Mixtral H100 table that a cold server meets (the 256-2048 entries, both
launches): 0.28-0.39 s of CPU each, mean 0.35 s, on the least loaded of three runs (Triton's passes plus
``ptxas``), means 0.42 and 0.47 s on two runs beside other jobs. So one new specialisation stalls a step ~0.74 s;
the Mixtral stage-0 runs show ITL maxima of 0.9-1.06 s, and TensorRT-LLM's notes on its Triton MoE path put one
first-seen specialisation's JIT stall at ~0.2-2 s (NVIDIA/TensorRT-LLM PR #15311).

Only deployments whose table is known here are priced (``FUSED_MOE_CONFIGS``); elsewhere no clock is built
(``twin.fitting.cold_start``: the replay's ``cold_start`` is None). The silicon rows are not cold runs (their
README: 2 x CONC warm-up requests before each measurement).
"""

from __future__ import annotations

from collections.abc import Sequence

# vLLM's tuned fused-MoE block configurations: (gpu, experts, intermediate size per rank) -> ((tokens, config), ...),
# config = (BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, GROUP_SIZE_M, num_warps, num_stages). Source: vLLM
# vllm/model_executor/layers/fused_moe/configs/E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json (Mixtral-8x7B,
# intermediate 14336 at TP 2; unchanged from v0.4 through the 0.1x releases).
_MIXTRAL_TP2_H100 = (
    (1, (16, 64, 128, 64, 4, 4)), (2, (16, 128, 128, 32, 8, 4)), (4, (16, 32, 256, 16, 4, 4)),
    (8, (16, 128, 128, 32, 8, 4)), (16, (16, 128, 128, 1, 4, 4)), (24, (16, 128, 128, 1, 4, 4)),
    (32, (16, 128, 128, 1, 4, 4)), (48, (32, 128, 128, 1, 4, 4)), (64, (32, 128, 128, 1, 4, 4)),
    (96, (32, 128, 128, 64, 4, 4)), (128, (64, 128, 128, 1, 4, 4)), (256, (64, 128, 128, 64, 4, 4)),
    (512, (64, 256, 64, 32, 4, 4)), (1024, (128, 256, 64, 16, 8, 4)), (1536, (128, 256, 64, 64, 8, 4)),
    (2048, (128, 256, 64, 32, 8, 4)), (3072, (128, 256, 64, 64, 8, 4)), (4096, (128, 256, 64, 16, 8, 4)),
)
FUSED_MOE_CONFIGS: dict[tuple[str, int, int], tuple[tuple[int, tuple[int, ...]], ...]] = {
    ("H100-SXM", 8, 7168): _MIXTRAL_TP2_H100,
}
TRITON_COMPILE_S_PER_KERNEL = 0.37     # measured CPU time of one fused_moe_kernel compile for sm_90 (module doc)
KERNELS_PER_SPECIALISATION = 2         # the gate/up and the down launch differ in constexprs
UNQUANTISED = ("bf16", "fp16")


def capture_sizes(largest: int) -> list[int]:
    """vLLM's default CUDA-graph capture sizes up to ``largest`` tokens (``VllmConfig._set_cudagraph_sizes``,
    0.11-0.19: ``[1, 2, 4]``, every 8 below 256, then every 16 up to the largest)."""
    sizes = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, largest + 1, 16))
    return [s for s in sizes if s <= largest]


def config_for(tokens: int, table: Sequence[tuple[int, tuple[int, ...]]]) -> tuple[int, ...]:
    """The table's configuration for a step of ``tokens``: the entry nearest in tokens, the first on a tie
    (vLLM ``try_get_optimal_moe_config``: ``min(keys, key=lambda x: abs(x - M))``)."""
    best = min(table, key=lambda kv: abs(kv[0] - tokens))
    return best[1]


def int_class(tokens: int, top_k: int, num_experts: int, block_m: int) -> tuple[bool, bool]:
    """Triton's specialisation of the kernel's two step-dependent ints: (``num_valid_tokens`` % 16 == 0,
    ``EM`` % 16 == 0) with num_valid_tokens = top_k x tokens, EM = that + experts x (block_m - 1); neither is
    ever 1 for the steps above the graphs."""
    valid = top_k * tokens
    em = valid + num_experts * (block_m - 1)
    return valid % 16 == 0, em % 16 == 0


class ColdCompiles:
    """The specialisations one deployment's fused-MoE kernels can meet, precomputed per step size.

    ``key_of[m]``: the specialisation id a step of m tokens compiles if it is the first to meet it, -1 where
    start-up already compiled it (graphed sizes, the profile run); ``stall_s``: the step time one new
    specialisation adds. ``fresh()`` gives the per-server record of which ones a run has met."""

    def __init__(self, table: Sequence[tuple[int, tuple[int, ...]]], top_k: int, num_experts: int,
                 max_num_batched_tokens: int, largest_graph_tokens: int,
                 compile_s_per_kernel: float | None = None) -> None:
        def spec(m: int):
            cfg = config_for(m, table)
            return cfg, int_class(m, top_k, num_experts, cfg[0])

        graphed = capture_sizes(largest_graph_tokens)
        largest_graph_tokens = graphed[-1] if graphed else 0     # vLLM's largest size is the last one captured
        warm = {spec(s) for s in graphed} | {spec(max_num_batched_tokens)}
        ids: dict = {}
        key_of = [-1] * (max_num_batched_tokens + 1)
        for m in range(largest_graph_tokens + 1, max_num_batched_tokens + 1):
            s = spec(m)
            if s not in warm:
                key_of[m] = ids.setdefault(s, len(ids))
        self.key_of = key_of
        self.num_cold = len(ids)
        self.largest_graph_tokens = largest_graph_tokens
        per_kernel = TRITON_COMPILE_S_PER_KERNEL if compile_s_per_kernel is None else compile_s_per_kernel
        self.stall_s = KERNELS_PER_SPECIALISATION * per_kernel

    def fresh(self) -> list[bool]:
        """A new server's record: no cold specialisation met yet."""
        return [False] * self.num_cold

    def explain(self) -> dict[str, float]:
        return {"cold_compile_specialisations": float(self.num_cold),
                "cold_compile_stall_s_per_specialisation": self.stall_s,
                "cold_compile_largest_graph_tokens": float(self.largest_graph_tokens)}


def cold_compiles_for(model, gpu_name: str, tensor_parallel_size: int, expert_format: str,
                      max_num_batched_tokens: int, largest_graph_tokens: int) -> ColdCompiles | None:
    """The deployment's cold compiles, or None where the term does not apply: not a MoE model, experts not on
    the unquantised Triton path, or no tuned table known here for (GPU, experts, intermediate per rank)."""
    if not model.num_experts or expert_format not in UNQUANTISED or tensor_parallel_size < 1:
        return None
    per_rank, rest = divmod(model.moe_intermediate_size, tensor_parallel_size)
    table = FUSED_MOE_CONFIGS.get((gpu_name, model.num_experts, per_rank)) if not rest else None
    if table is None:
        return None
    return ColdCompiles(table, model.num_experts_per_tok, model.num_experts, max_num_batched_tokens,
                        largest_graph_tokens)


class ColdStartClock:
    """A cost model on a freshly started server: each step also pays the compiles of the specialisations it is
    the first to meet (everything else is the wrapped model's). Only steps above the graphs can meet one, so the
    per-step work is one comparison for the rest."""

    def __init__(self, inner, compiles: ColdCompiles) -> None:
        self.inner = inner
        self.compiles = compiles
        self.seen = compiles.fresh()
        self.num_stalls = 0
        self.request_path_s = getattr(inner, "request_path_s", 0.0)
        self.request_path_jitter_s = getattr(inner, "request_path_jitter_s", 0.0)
        # the engine's decode fast path (twin.sim.cohort_steps) calls these where the wrapped model has them: the
        # same stall added to the same step, so the run keeps its fast path and its steps
        from_sums = getattr(inner, "step_time_from_sums", None)
        decodes = getattr(inner, "decode_step_times_s", None)
        if from_sums is not None:
            self.step_time_from_sums = lambda n_seqs, tokens, *rest: from_sums(n_seqs, tokens, *rest) + \
                self.stall_for(tokens)
        if decodes is not None:
            self.decode_step_times_s = self._decodes_with_stall(decodes)

    def _decodes_with_stall(self, decodes):
        def decode_step_times_s(n_seqs: int, context: int, num_steps: int) -> list[float]:
            out = decodes(n_seqs, context, num_steps)
            if num_steps and n_seqs > self.compiles.largest_graph_tokens:
                out = list(out)
                out[0] = out[0] + self.stall_for(n_seqs)     # only the first of equal steps can meet one
            return out
        return decode_step_times_s

    def stall_for(self, tokens: int) -> float:
        """The one-off compile time a step of ``tokens`` pays (recording what it met)."""
        c = self.compiles
        if tokens <= c.largest_graph_tokens or tokens >= len(c.key_of):
            return 0.0
        k = c.key_of[tokens]
        if k < 0 or self.seen[k]:
            return 0.0
        self.seen[k] = True
        self.num_stalls += 1
        return c.stall_s

    def step_time_s(self, step) -> float:
        return self.inner.step_time_s(step) + self.stall_for(sum(step.num_new_tokens))

    def explain(self, step) -> dict[str, float]:
        return self.inner.explain(step) | self.compiles.explain()
