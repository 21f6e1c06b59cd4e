"""The GPU calibration run: an 8B-shaped model on the GPU at hand, checked against physics, then calibrated.

    python -m calibration.gpu_run                       # llama-3.1-8b shape, random bf16 weights, cuda
    python -m calibration.gpu_run --budget 240 --out-dir calibration/profiles
    python -m calibration.gpu_run --device cpu --model tiny-llama --budget 5 --out-dir /tmp/x   # a dry run

What it does:

1. builds the model (random weights of the catalog shape, bf16 on CUDA) and a paged KV pool;
2. **decode check**: the step of one sequence decoding one token must read every weight once, so its time is
   at least ``weight bytes / HBM bandwidth`` of the detected GPU (catalog figure; the KV read of a short
   context adds little). It reports the measured median (synchronised wall time and CUDA-event device time) at
   a few contexts against that bound; the target is within 1.5x;
3. **prefill check** (information): a long prefill chunk's achieved FLOP/s against the catalog peak;
4. **calibration**: the sweeps, the replay and the fit of ``twin calibrate``, within ``--budget`` seconds;
5. writes ``<model>-<gpu>.json`` (the profile), ``<model>-<gpu>.samples.json`` and ``<model>-<gpu>.report.json``
   plus ``.report.md`` (the checks, the fit quality, the environment).

Exit status 0 when the run completed (whatever the ratio; ``--strict`` makes a missed 1.5x target exit 1),
2 for bad options (no CUDA when cuda is asked for, an unknown model).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from calibration.calibrate import Prepared, calibrate, prepare
from calibration.fit import dumps, summarize
from calibration.environment import catalog_device, device_name
from calibration.measure import measure_point, warm_up
from calibration.sweep_plan import Point
from twin.hardware.catalog import GpuSpec, ModelSpec, resolve_gpu
from twin.errors import TwinInputError

TARGET_RATIO = 1.5


def decode_bound_check(prepared: Prepared, gpu: GpuSpec | None, *, contexts: Sequence[int] = (128, 1024, 4096),
                       warmup: int = 5, repeats: int = 30) -> dict[str, Any]:
    """Batch-1 decode step time against the weight-read bound ``weight bytes / memory bandwidth``."""
    runner, spec = prepared.runner, prepared.spec
    weight_bytes = spec.weight_read_bytes(prepared.dtype_name)
    kv_per_token = spec.kv_bytes_per_token(prepared.dtype_name)
    bandwidth = gpu.memory_bandwidth_bytes_per_s if gpu is not None else None
    rows = []
    max_ctx = runner.kv_cache.num_blocks * runner.block_size - runner.block_size
    for c in contexts:
        if c + 1 > min(max_ctx, runner.shape.max_position_embeddings - 1):
            continue
        s = measure_point(runner, Point("decode", [1], [c]), warmup=warmup, repeats=repeats)
        wall = s.median_s
        dev = s.device_median_s
        row: dict[str, Any] = {"context": c, "wall_median_s": wall, "wall_min_s": min(s.times_s),
                               "device_median_s": dev, "repeats": len(s.times_s)}
        if bandwidth:
            bound = weight_bytes / bandwidth
            bound_kv = (weight_bytes + (c + 1) * kv_per_token) / bandwidth
            row.update(weight_bound_s=bound, weight_and_kv_bound_s=bound_kv, ratio_wall=wall / bound,
                       ratio_device=(dev / bound) if dev else None,
                       achieved_bandwidth_bytes_per_s=(weight_bytes + (c + 1) * kv_per_token) / (dev or wall))
        rows.append(row)
    first = rows[0] if rows else {}
    ratio = first.get("ratio_wall")
    bound = (weight_bytes / bandwidth) if bandwidth else None
    # where the time goes: the hardware's weight-streaming floor, and the step without launch overhead
    floor = weight_stream_floor(prepared, repeats=repeats)
    graph_s, graph_error = None, None
    if rows and runner.device.type == "cuda":
        try:
            graph_s = graph_replay_time(prepared, rows[0]["context"], repeats=repeats)
        except Exception as exc:      # a diagnostic: report why, never abort the run
            graph_error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return {
        "weight_read_bytes": weight_bytes, "kv_bytes_per_token": kv_per_token,
        "memory_bandwidth_bytes_per_s": bandwidth, "weight_bound_s": bound,
        "target_ratio": TARGET_RATIO, "rows": rows, "ratio": ratio,
        "within_target": None if ratio is None else bool(ratio <= TARGET_RATIO),
        "weight_stream_floor_s": floor, "ratio_weight_stream_floor": (floor / bound) if bound else None,
        "graph_replay_s": graph_s, "ratio_graph_replay": (graph_s / bound) if (bound and graph_s) else None,
        "graph_replay_error": graph_error,
    }


def _event_timer(device: torch.device):
    """``time(fn, warmup, repeats) -> median seconds``: CUDA events on a GPU, perf_counter on the CPU, the
    device synchronised around every run."""
    from calibration.timing import StepTimer

    def timed(fn, warmup: int, repeats: int) -> float:
        for _ in range(warmup):
            fn()
        out = []
        for _ in range(repeats):
            with StepTimer(device) as t:
                fn()
            out.append(t.device_s if t.device_s is not None else t.elapsed_s)
        return statistics.median(out)
    return timed


def weight_stream_floor(prepared: Prepared, *, warmup: int = 3, repeats: int = 20) -> float:
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

    return _event_timer(dev)(stream, warmup, repeats)


def graph_replay_time(prepared: Prepared, context: int, *, warmup: int = 3, repeats: int = 20) -> float:
    """The same batch-1 decode step captured once as a CUDA graph and replayed: the engine's device work with
    the Python and launch overhead taken away (what a CUDA-graph engine such as vLLM runs for decodes).
    CUDA only; raises if capture fails."""
    runner = prepared.runner
    if runner.device.type != "cuda":
        raise RuntimeError("CUDA graphs need a CUDA device")
    from calibration.measure import point_inputs

    seqs = point_inputs(runner, Point("decode", [1], [context]), 0)
    model = runner.model
    with torch.inference_mode():
        input_ids, positions, attn, _lens = runner._plan(seqs)

        def step() -> torch.Tensor:
            hidden = model.forward_hidden(input_ids, positions, attn)
            return model.compute_logits(hidden[-1:]).argmax(-1)

        side = torch.cuda.Stream(runner.device)
        side.wait_stream(torch.cuda.current_stream(runner.device))
        with torch.cuda.stream(side):
            for _ in range(3):
                step()
        torch.cuda.current_stream(runner.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        return _event_timer(runner.device)(graph.replay, warmup, repeats)


def prefill_flops_check(prepared: Prepared, gpu: GpuSpec | None, *, tokens: int = 4096, warmup: int = 2,
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


def gpu_report(model: str | ModelSpec = "llama-3.1-8b", *, device: str = "cuda", dtype: str = "auto",
               budget_s: float = 240.0, out_dir: str | Path = "calibration/profiles", gpu: str | None = None,
               quick: bool = False, threads: int | None = None, seed: int = 0, max_pool_gib: float | None = None,
               replay: bool = True, plan_overrides: dict[str, Any] | None = None, log=print) -> dict[str, Any]:
    """Run the checks and the calibration; write the profile, the samples and the report. Returns the report."""
    t0 = time.perf_counter()
    prepared = prepare(model, device=device, dtype=dtype, quick=quick, threads=threads, seed=seed,
                       max_pool_gib=max_pool_gib, plan_overrides=plan_overrides)
    dev = prepared.device
    name = device_name(dev)
    cat = gpu or catalog_device(dev, name)
    gpu_spec = None
    if cat:
        try:
            gpu_spec = resolve_gpu(cat)
        except TwinInputError:
            gpu_spec = None
    log(f"model {prepared.spec.name} ({prepared.spec.num_params / 1e9:.2f} B params, {prepared.dtype_name}) on "
        f"{name} (catalog: {gpu_spec.name if gpu_spec else 'unknown: give --gpu'}); KV pool "
        f"{prepared.runner.kv_cache.nbytes / 2**30:.1f} GiB; set-up {time.perf_counter() - t0:.1f} s")
    warm_up(prepared.runner)
    decode = decode_bound_check(prepared, gpu_spec, repeats=10 if quick else 30)
    for row in decode["rows"]:
        ratio = row.get("ratio_wall")
        log(f"decode batch 1, context {row['context']}: {row['wall_median_s'] * 1e3:.3f} ms wall"
            + (f", {row['device_median_s'] * 1e3:.3f} ms device" if row["device_median_s"] else "")
            + (f"; weight-read bound {row['weight_bound_s'] * 1e3:.3f} ms -> {ratio:.2f}x" if ratio else ""))
    if decode["ratio_weight_stream_floor"]:
        log(f"weights streamed alone (GEMV floor): {decode['weight_stream_floor_s'] * 1e3:.3f} ms = "
            f"{decode['ratio_weight_stream_floor']:.2f}x the bound")
    if decode["ratio_graph_replay"]:
        log(f"the decode step as one CUDA graph: {decode['graph_replay_s'] * 1e3:.3f} ms = "
            f"{decode['ratio_graph_replay']:.2f}x the bound")
    elif decode["graph_replay_error"]:
        log(f"CUDA-graph replay not measured ({decode['graph_replay_error']})")
    prefill = prefill_flops_check(prepared, gpu_spec, tokens=4096 if torch.device(dev).type == "cuda" else 256)
    if prefill and prefill["mfu"] is not None:
        log(f"prefill {prefill['tokens']} tokens: {prefill['median_s'] * 1e3:.1f} ms, "
            f"{_si(prefill['achieved_flops_per_s'], 'FLOP/s')} = {prefill['mfu'] * 100:.0f}% of peak")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{prepared.spec.name}-{(gpu_spec.name if gpu_spec else torch.device(dev).type).lower()}"
    result = calibrate(prepared=prepared, budget_s=budget_s, quick=quick, seed=seed, replay=replay,
                       output=out / f"{stem}.json")
    log(f"calibration: {len(result.run.samples)} steps; {summarize(result.fit)}")
    report = {
        "format": "twin-gpu-report", "version": 1,
        "model": prepared.spec.name, "device": name, "catalog_gpu": gpu_spec.name if gpu_spec else None,
        "dtype": prepared.dtype_name,
        "decode_check": decode, "prefill_check": prefill,
        "fit": {"test": result.fit.metrics["test"], "train": result.fit.metrics["train"],
                "by_kind": result.fit.metrics["all_by_kind"],
                "timing_noise_pct": result.fit.metrics["timing_noise_pct"],
                "coefficients": result.fit.coefficients, "knee_tokens": result.fit.knee_tokens},
        "profile": str(result.profile_path), "samples": str(result.samples_path),
        "notes": result.run.notes, "environment": result.run.environment,
        "wall_s": time.perf_counter() - t0,
    }
    (out / f"{stem}.report.json").write_text(dumps(report) + "\n", encoding="utf-8")
    (out / f"{stem}.report.md").write_text(render_markdown(report), encoding="utf-8")
    log(f"wrote {result.profile_path}, {result.samples_path}, {out / (stem + '.report.json')} and .report.md "
        f"({report['wall_s']:.0f} s in all)")
    return report


def _si(value: float, unit: str) -> str:
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def render_markdown(report: dict[str, Any]) -> str:
    d = report["decode_check"]
    lines = [f"# Calibration report: {report['model']} on {report['device']}", "",
             f"- catalog GPU: {report['catalog_gpu'] or 'unknown'}; dtype {report['dtype']}; "
             f"torch {report['environment'].get('torch')}, CUDA {report['environment'].get('cuda')}",
             "", "## Decode, batch 1, against the weight-read bound", ""]
    if d["weight_bound_s"]:
        lines.append(f"Weights read per step: {_si(d['weight_read_bytes'], 'B')}; bandwidth "
                     f"{_si(d['memory_bandwidth_bytes_per_s'], 'B/s')}; bound {d['weight_bound_s'] * 1e3:.3f} ms; "
                     f"target within {d['target_ratio']}x.")
        lines.append("")
    lines += ["| context | wall median ms | device median ms | bound ms | wall / bound |",
              "|---:|---:|---:|---:|---:|"]
    for r in d["rows"]:
        dev = f"{r['device_median_s'] * 1e3:.3f}" if r["device_median_s"] else "-"
        bound = f"{r['weight_bound_s'] * 1e3:.3f}" if r.get("weight_bound_s") else "-"
        ratio = f"{r['ratio_wall']:.2f}x" if r.get("ratio_wall") else "-"
        lines.append(f"| {r['context']} | {r['wall_median_s'] * 1e3:.3f} | {dev} | {bound} | {ratio} |")
    verdict = {True: "within target", False: "OUTSIDE target", None: "no bound (unknown GPU)"}[d["within_target"]]
    lines += ["", f"Verdict (the eager engine's wall time at the first context): {verdict}.", ""]
    if d.get("weight_bound_s"):
        lines += ["Where the time goes (first context):", "",
                  f"- weights streamed alone through the GEMMs (the hardware's floor): "
                  f"{d['weight_stream_floor_s'] * 1e3:.3f} ms = {d['ratio_weight_stream_floor']:.2f}x the bound"]
        if d.get("graph_replay_s"):
            lines.append(f"- the same decode step replayed as one CUDA graph (no Python or launch overhead): "
                         f"{d['graph_replay_s'] * 1e3:.3f} ms = {d['ratio_graph_replay']:.2f}x the bound")
        elif d.get("graph_replay_error"):
            lines.append(f"- CUDA-graph replay not measured: {d['graph_replay_error']}")
        lines.append("")
    p = report.get("prefill_check")
    if p:
        mfu = f", {p['mfu'] * 100:.0f}% of peak" if p.get("mfu") is not None else ""
        lines += ["## Prefill", "", f"{p['tokens']} tokens in {p['median_s'] * 1e3:.1f} ms: "
                  f"{_si(p['achieved_flops_per_s'], 'FLOP/s')}{mfu}.", ""]
    f = report["fit"]
    t = f["test"]
    lines += ["## Fit", "", f"Held-out MAPE {t.get('mape_pct', float('nan')):.1f}%, p90 |error| "
              f"{t.get('p90_abs_error_s', float('nan')) * 1e3:.3g} ms ({t.get('n', 0)} held-out steps).", "",
              "| kind | steps | MAPE % | p90 APE % |", "|---|---:|---:|---:|"]
    for kind, m in f["by_kind"].items():
        lines.append(f"| {kind} | {m['n']} | {m['mape_pct']:.1f} | {m['p90_ape_pct']:.1f} |")
    lines += ["", "Coefficients: " + ", ".join(f"{k} {v:.4g}" for k, v in f["coefficients"].items())
              + f"; knee {f['knee_tokens']:g} tokens.", ""]
    if report["notes"]:
        lines += ["## Notes", ""] + [f"- {n}" for n in report["notes"]] + [""]
    lines += [f"Profile: `{report['profile']}`; samples: `{report['samples']}`.", ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="llama-3.1-8b", help="catalog name or config.json (default llama-3.1-8b)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--dtype", default="auto", choices=["auto", "bf16", "fp16", "fp32"])
    ap.add_argument("--budget", type=float, default=240.0, help="seconds of calibration measurement (default 240)")
    ap.add_argument("--out-dir", default="calibration/profiles")
    ap.add_argument("--gpu", default=None, help="catalog GPU for the bound (default: detected from the device)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--max-pool-gib", type=float, default=None)
    ap.add_argument("--no-replay", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--strict", action="store_true", help="exit 1 when the decode check misses the 1.5x target")
    args = ap.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda: torch.cuda.is_available() is false (a dry run: --device cpu --model "
              "tiny-llama)", file=sys.stderr)
        return 2
    try:
        report = gpu_report(args.model, device=args.device, dtype=args.dtype, budget_s=args.budget,
                            out_dir=args.out_dir, gpu=args.gpu, quick=args.quick, threads=args.threads,
                            seed=args.seed, max_pool_gib=args.max_pool_gib, replay=not args.no_replay)
    except (TwinInputError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.strict and report["decode_check"]["within_target"] is False:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
