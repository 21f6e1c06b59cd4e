"""Physics checks of the engine on the device at hand, before it is calibrated.

* **Decode against the weight-read bound.** A batch-1 decode step reads every weight once, so it takes at
  least ``weight bytes / memory bandwidth`` (the catalog's figure for the detected GPU; a short context's KV
  read adds little). The engine's step (CUDA graph when the runner has them) is timed at a few contexts; the
  ratio at the first context is the headline (target :data:`TARGET_RATIO`). For reference: the same step with
  the graphs off (eager: Python and launch overhead included) and the weights alone streamed through the
  GEMMs (the hardware's practical floor).
* **Prefill FLOP/s** (information): a long whole-prompt prefill's achieved FLOP/s against the catalog peak.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

import torch

from calibration.measure import measure_point
from calibration.sweep_plan import Point
from calibration.timing import StepTimer

TARGET_RATIO = 1.3


def decode_bound_check(prepared: Any, gpu: Any, *, contexts: Sequence[int] = (128, 1024, 4096), warmup: int = 5,
                       repeats: int = 30) -> dict[str, Any]:
    """Batch-1 decode step time against the weight-read bound ``weight bytes / memory bandwidth``."""
    runner, spec = prepared.runner, prepared.spec
    weight_bytes = spec.weight_read_bytes(prepared.dtype_name)
    kv_per_token = spec.kv_bytes_per_token(prepared.dtype_name)
    bandwidth = gpu.memory_bandwidth_bytes_per_s if gpu is not None else None
    bound = (weight_bytes / bandwidth) if bandwidth else None
    graphs = runner.decode_graphs is not None and runner.use_graphs
    rows = []
    max_ctx = runner.kv_cache.num_blocks * runner.block_size - runner.block_size
    for c in contexts:
        if c + 1 > min(max_ctx, runner.shape.max_position_embeddings - 1):
            continue
        s = measure_point(runner, Point("decode", [1], [c]), warmup=warmup, repeats=repeats)
        wall, dev = s.median_s, s.device_median_s
        row: dict[str, Any] = {"context": c, "wall_median_s": wall, "wall_min_s": min(s.times_s),
                               "device_median_s": dev, "repeats": len(s.times_s), "cuda_graphs": graphs}
        if bound:
            row.update(weight_bound_s=bound, weight_and_kv_bound_s=(weight_bytes + (c + 1) * kv_per_token)
                       / bandwidth, ratio_wall=wall / bound, ratio_device=(dev / bound) if dev else None,
                       achieved_bandwidth_bytes_per_s=(weight_bytes + (c + 1) * kv_per_token) / (dev or wall))
        rows.append(row)
    eager_s = None
    if rows and graphs:
        runner.use_graphs = False
        try:
            eager_s = measure_point(runner, Point("decode", [1], [rows[0]["context"]]), warmup=warmup,
                                    repeats=repeats).median_s
        finally:
            runner.use_graphs = True
    ratio = rows[0].get("ratio_wall") if rows else None
    floor = weight_stream_floor(prepared, repeats=repeats)
    return {
        "weight_read_bytes": weight_bytes, "kv_bytes_per_token": kv_per_token,
        "memory_bandwidth_bytes_per_s": bandwidth, "weight_bound_s": bound, "cuda_graphs": graphs,
        "target_ratio": TARGET_RATIO, "rows": rows, "ratio": ratio,
        "within_target": None if ratio is None else bool(ratio <= TARGET_RATIO),
        "eager_wall_median_s": eager_s, "ratio_eager": (eager_s / bound) if (bound and eager_s) else None,
        "weight_stream_floor_s": floor, "ratio_weight_stream_floor": (floor / bound) if bound else None,
    }


def first_use_check(prepared: Any, *, base_tokens: int = 1001, repeats: int = 3) -> dict[str, Any]:
    """What a step shape costs the first time it runs: prefill steps of lengths not run before (a prompt from
    position 0, and a chunk after a 512-token context), the first run against the median of the repeats, with
    PyTorch's cuDNN attention allowed and forbidden (on a GPU; the engine's setting is restored after). A
    serving engine meets new lengths nearly every step, and calibration's medians over repeats hide such
    costs."""
    from calibration.paged_attention import set_cudnn_attention

    runner = prepared.runner
    cuda = runner.device.type == "cuda"
    cap = min(runner.kv_cache.num_blocks * runner.block_size - runner.block_size,
              runner.shape.max_position_embeddings - 1)
    rows = []
    n = base_tokens
    for cudnn in ((True, False) if cuda else (False,)):
        previous = set_cudnn_attention(cudnn) if cuda else None
        try:
            for context in (0, 512):
                while n + context > cap and n > 16:
                    n //= 2
                s = measure_point(runner, Point("prefill", [n], [context]), warmup=0, repeats=1 + repeats)
                rows.append({"cudnn_attention": cudnn, "tokens": n, "context": context, "first_s": s.times_s[0],
                             "repeat_median_s": statistics.median(s.times_s[1:]),
                             "first_extra_s": s.times_s[0] - statistics.median(s.times_s[1:])})
                n += 2       # the next shape is new too
        finally:
            if cuda:
                set_cudnn_attention(previous)
    return {"rows": rows}


def kernels_per_step(prepared: Any, context: int = 128) -> int | None:
    """GPU kernels one eager batch-1 decode step launches (torch.profiler; None on the CPU or if profiling
    fails): what a CUDA graph replays, each kernel a few microseconds at batch 1 however little it does."""
    runner = prepared.runner
    if runner.device.type != "cuda":
        return None
    from torch.profiler import ProfilerActivity, profile

    graphs, runner.use_graphs = runner.use_graphs, False
    try:
        measure_point(runner, Point("decode", [1], [context]), warmup=1, repeats=1)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            measure_point(runner, Point("decode", [1], [context]), warmup=0, repeats=1)
        return sum(1 for e in prof.events() if str(getattr(e, "device_type", "")).endswith("CUDA"))
    except Exception:          # the profiler is a diagnostic: its failure must not end the run
        return None
    finally:
        runner.use_graphs = graphs


def _timed_median(device: torch.device, fn, warmup: int, repeats: int) -> float:
    """Median time of ``fn``: CUDA events on a GPU, perf_counter on the CPU, synchronised around each run."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeats):
        with StepTimer(device) as t:
            fn()
        out.append(t.device_s if t.device_s is not None else t.elapsed_s)
    return statistics.median(out)


def weight_stream_floor(prepared: Any, *, warmup: int = 3, repeats: int = 20) -> float:
    """The time to stream every weight once through cuBLAS/oneDNN at batch 1: each projection of each layer
    and the LM head applied to one token, nothing else (no norms, no attention, no launches between). The
    hardware's practical floor for a batch-1 decode step."""
    model = prepared.runner.model
    s = model.shape
    dev, dt = prepared.runner.device, prepared.runner.dtype
    x_h = torch.randn(1, s.hidden_size, device=dev, dtype=dt)
    x_q = torch.randn(1, s.q_size, device=dev, dtype=dt)
    x_i = torch.randn(1, s.intermediate_size, device=dev, dtype=dt)
    F = torch.nn.functional

    @torch.inference_mode()
    def stream() -> None:
        for layer in model.layers:
            F.linear(x_h, layer.qkv_proj)
            F.linear(x_q, layer.o_proj)
            F.linear(x_h, layer.gate_up_proj)
            F.linear(x_i, layer.down_proj)
        F.linear(x_h, model.lm_head)

    return _timed_median(dev, stream, warmup, repeats)


def prefill_flops_check(prepared: Any, gpu: Any, *, tokens: int = 4096, warmup: int = 2,
                        repeats: int = 5) -> dict[str, Any] | None:
    """A whole-prompt prefill's achieved FLOP/s (linear layers, LM head row, causal attention) vs the peak."""
    runner, spec = prepared.runner, prepared.spec
    cap = runner.kv_cache.num_blocks * runner.block_size - runner.block_size
    n = min(tokens, cap, runner.shape.max_position_embeddings - 1)
    if n < 16:
        return None
    s = measure_point(runner, Point("prefill", [n], [0]), warmup=warmup, repeats=repeats)
    t = s.device_median_s or s.median_s
    flops = (2.0 * spec.linear_params * n + 2.0 * spec.lm_head_matmul_params
             + spec.attention_flops_per_position() * n * (n + 1) / 2)
    peak = gpu.flops(prepared.dtype_name) if gpu is not None else None
    return {"tokens": n, "median_s": s.median_s, "device_median_s": s.device_median_s, "flops": flops,
            "achieved_flops_per_s": flops / t, "peak_flops_per_s": peak,
            "mfu": (flops / t / peak) if peak else None}
