"""The GPU calibration run: an 8B-shaped model on the GPU at hand, checked against physics, calibrated, and the
twin validated against it on held-out workloads, all within one wall-clock limit.

    python -m calibration.gpu_run                       # llama-3.1-8b shape, random bf16 weights, CUDA graphs
    python -m calibration.gpu_run --device cpu --tiny --out-dir /tmp/x     # the dry run (tiny model, ~15 s)

Phases, each timed and each given what is left of ``--time-limit`` (default 420 s: under 8 minutes with the
start-up):

1. **set-up**: the model (random weights of the catalog shape, bf16 on CUDA), a paged KV pool, decode steps
   as CUDA graphs (:mod:`calibration.decode_graphs`; ``--no-cuda-graphs`` for the eager engine);
2. **checks** (:mod:`calibration.gpu_checks`): batch-1 decode against the HBM weight-read bound (target
   <= 1.3x), a long prefill's FLOP/s;
3. **calibration**: the sweeps, the replay and the fit of ``twin calibrate`` for ``--budget`` seconds (less if
   the limit requires), writing the profile ``<gpu>-<model>.json`` (``h200-sxm-8b.json``) and its samples;
4. **held-out validation** (:mod:`calibration.heldout`): a workload the fit never saw, at 3 loads, served by
   the engine and predicted by the twin with the new profile, for ``--validation-budget`` seconds;
5. the report ``<gpu>-<model>.report.json`` and ``.report.md`` (:mod:`calibration.gpu_report`).

The limit is a clear stop: a phase that would start with too little time left is skipped and named in the
report's ``stopped`` list (the report is written whatever happens), and a watchdog ends a hung run with a
traceback 60 s past the limit. Exit status: 0 complete; 3 stopped by the limit (report written); 1 with
``--strict`` when the decode check misses its target; 2 bad options (no CUDA when cuda is asked for, an
unknown model).
"""

from __future__ import annotations

import argparse
import faulthandler
import re
import sys
import time
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from calibration.calibrate import calibrate, prepare
from calibration.environment import catalog_device, device_name
from calibration.fit import dumps, summarize
from calibration.gpu_checks import (TARGET_RATIO, decode_bound_check, first_use_check, kernels_per_step,
                                    prefill_flops_check)
from calibration.gpu_report import render_markdown, si
from calibration.heldout import LOADS, validate_loads
from calibration.measure import warm_up
from twin.errors import TwinInputError
from twin.hardware.catalog import ModelSpec, resolve_gpu

DEFAULT_TIME_LIMIT_S = 420.0
FIT_RESERVE_FRACTION = 0.05        # of the limit, kept for the fit and the writing after the calibration
# the dry run's plan: every kind of step, a handful of each, on the tiny model
TINY_PLAN: dict[str, Any] = {
    "prefill_chunks": [8, 32, 96], "prefill_contexts": [0, 48], "decode_batches": [1, 3, 8],
    "decode_contexts": [1, 40, 160], "mixed": [[4, 40, 24, 0]], "num_random": 6, "random_max_batch": 8,
    "random_max_context": 160, "random_max_chunk": 48, "warmup": 1, "repeats": 2, "interleave": 4,
    "replay_requests": 6, "replay_prompt": [8, 48], "replay_output": [2, 8], "replay_shared_prefix": 16,
    "replay_max_num_seqs": 4, "replay_max_batched_tokens": 48, "replay_repeats": 1, "min_points": 18,
}


class Clock:
    """The run's wall-clock limit and its phases' durations."""

    def __init__(self, limit_s: float) -> None:
        self.t0, self.limit_s = time.perf_counter(), float(limit_s)
        self.phases: dict[str, float] = {}
        self.stopped: list[str] = []

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def left(self) -> float:
        return self.limit_s - self.elapsed()

    @contextmanager
    def phase(self, name: str):
        t = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] = round(time.perf_counter() - t, 3)

    def allows(self, name: str, need_s: float) -> bool:
        """Whether ``name`` may start (``need_s`` seconds left); if not it is recorded as stopped."""
        if self.left() >= need_s:
            return True
        self.stopped.append(f"{name} skipped: {self.left():.1f} s left of the {self.limit_s:.0f} s limit, "
                            f"{need_s:.1f} s needed")
        return False


def model_tag(name: str) -> str:
    """``llama-3.1-8b`` -> ``8b``; names without a size stay whole."""
    m = re.search(r"(?<![0-9.])(\d+(?:\.\d+)?b)$", name.lower())
    return m.group(1) if m else name.lower()


def gpu_report(model: str | ModelSpec = "llama-3.1-8b", *, device: str = "cuda", dtype: str = "auto",
               budget_s: float = 200.0, validation_s: float = 90.0, time_limit_s: float = DEFAULT_TIME_LIMIT_S,
               out_dir: str | Path = "calibration/profiles", gpu: str | None = None, quick: bool = False,
               threads: int | None = None, seed: int = 0, max_pool_gib: float | None = None, replay: bool = True,
               cuda_graphs: bool = True, plan_overrides: dict[str, Any] | None = None,
               loads: Sequence[float] = LOADS, decode_contexts: Sequence[int] = (128, 1024, 4096),
               prefill_tokens: int = 4096, log=print) -> dict[str, Any]:
    """Run the phases within ``time_limit_s``; write the profile, the samples and the report. Returns the
    report."""
    clock = Clock(time_limit_s)
    notes: list[str] = []
    with clock.phase("set-up"):
        prepared = prepare(model, device=device, dtype=dtype, quick=quick, threads=threads, seed=seed,
                           max_pool_gib=max_pool_gib, plan_overrides=plan_overrides, cuda_graphs=cuda_graphs)
        runner = prepared.runner
        name = device_name(prepared.device)
        cat = gpu or catalog_device(prepared.device, name)
        try:
            gpu_spec = resolve_gpu(cat) if cat else None
        except TwinInputError:
            gpu_spec = None
        log(f"model {prepared.spec.name} ({prepared.spec.num_params / 1e9:.2f} B params, {prepared.dtype_name}) "
            f"on {name} (catalog: {gpu_spec.name if gpu_spec else 'unknown: give --gpu'}); KV pool "
            f"{runner.kv_cache.nbytes / 2**30:.2f} GiB; CUDA graphs {'on' if cuda_graphs else 'off'}")
        warm_up(runner)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    gpu_slug = (gpu_spec.name if gpu_spec else torch.device(prepared.device).type).lower()
    stem = f"{gpu_slug}-{model_tag(prepared.spec.name)}"
    report: dict[str, Any] = {
        "format": "twin-gpu-report", "version": 2, "model": prepared.spec.name, "device": name,
        "catalog_gpu": gpu_spec.name if gpu_spec else None, "dtype": prepared.dtype_name,
        "cuda_graphs": bool(cuda_graphs), "time_limit_s": clock.limit_s, "decode_check": None,
        "prefill_check": None, "first_use_check": None, "fit": None, "validation": None, "profile": None,
        "samples": None, "environment": None}

    quick_checks = quick or torch.device(prepared.device).type != "cuda"
    if clock.allows("decode check", 0.1 * clock.limit_s):
        with clock.phase("decode check"):
            d = report["decode_check"] = decode_bound_check(prepared, gpu_spec, contexts=decode_contexts,
                                                            repeats=10 if quick_checks else 30)
        for row in d["rows"]:
            ratio = row.get("ratio_wall")
            log(f"decode batch 1, context {row['context']}: {row['wall_median_s'] * 1e3:.3f} ms wall"
                + (f", {row['device_median_s'] * 1e3:.3f} ms device" if row["device_median_s"] else "")
                + (f"; weight-read bound {row['weight_bound_s'] * 1e3:.3f} ms -> {ratio:.2f}x" if ratio else ""))
        if d["ratio_eager"]:
            log(f"the same step eager (graphs off): {d['eager_wall_median_s'] * 1e3:.3f} ms = "
                f"{d['ratio_eager']:.2f}x the bound")
        if d["ratio_weight_stream_floor"]:
            log(f"weights streamed alone (GEMV floor): {d['weight_stream_floor_s'] * 1e3:.3f} ms = "
                f"{d['ratio_weight_stream_floor']:.2f}x the bound")
        d["eager_kernels_per_step"] = kernels_per_step(prepared, d["rows"][0]["context"] if d["rows"] else 128)
        if d["eager_kernels_per_step"]:
            log(f"kernels per batch-1 decode step (eager, profiled): {d['eager_kernels_per_step']}")
    if clock.allows("prefill check", 0.1 * clock.limit_s):
        with clock.phase("prefill check"):
            p = report["prefill_check"] = prefill_flops_check(prepared, gpu_spec, tokens=prefill_tokens)
        if p and p["mfu"] is not None:
            log(f"prefill {p['tokens']} tokens: {p['median_s'] * 1e3:.1f} ms, "
                f"{si(p['achieved_flops_per_s'], 'FLOP/s')} = {p['mfu'] * 100:.0f}% of peak")

    if clock.allows("first-use check", 0.1 * clock.limit_s):
        with clock.phase("first-use check"):
            report["first_use_check"] = first_use_check(prepared)
        for row in report["first_use_check"]["rows"]:
            log(f"new prefill shape ({row['tokens']} tokens after {row['context']}, cuDNN attention "
                f"{'on' if row['cudnn_attention'] else 'off'}): first run {row['first_s'] * 1e3:.1f} ms, "
                f"repeats {row['repeat_median_s'] * 1e3:.1f} ms")

    reserve = FIT_RESERVE_FRACTION * clock.limit_s
    budget = min(budget_s, clock.left() - validation_s - reserve)
    result = None
    if budget < budget_s:
        notes.append(f"calibration budget cut from {budget_s:g} s to {max(budget, 0):.1f} s by the time limit")
    if clock.allows("calibration", max(budget, 0) + reserve if budget > 0.2 else float("inf")):
        with clock.phase("calibration"):
            result = calibrate(prepared=prepared, budget_s=budget, quick=quick, seed=seed, replay=replay,
                               output=out / f"{stem}.json")
        log(f"calibration: {len(result.run.samples)} steps in {result.wall_s:.0f} s; {summarize(result.fit)}")
        notes += result.run.notes
        report.update(profile=str(result.profile_path), samples=str(result.samples_path),
                      environment=result.run.environment,
                      fit={"test": result.fit.metrics["test"], "train": result.fit.metrics["train"],
                           "by_kind": result.fit.metrics["all_by_kind"],
                           "timing_noise_pct": result.fit.metrics["timing_noise_pct"],
                           "coefficients": result.fit.coefficients, "knee_tokens": result.fit.knee_tokens})
    if result is not None:
        vbudget = min(validation_s, clock.left() - 0.02 * clock.limit_s)
        if clock.allows("held-out validation", max(vbudget, 0) if vbudget > 0.2 else float("inf")):
            with clock.phase("held-out validation"):
                report["validation"] = validate_loads(runner, prepared.plan, result.profile_path,
                                                      budget_s=vbudget, loads=tuple(loads), log=log,
                                                      keep_steps=True)
            steps = {f"{row['load']:g}": row.pop("steps") for row in report["validation"]["loads"]}
            (out / f"{stem}.heldout-steps.json").write_text(dumps({"format": "twin-heldout-steps",
                                                                     "loads": steps}) + "\n", encoding="utf-8")
    graphs = runner.decode_graphs
    if graphs is not None:
        report["cuda_graphs_captured"] = graphs.num_captured
        if graphs.error:
            notes.append(f"CUDA graphs switched off after a failed capture: {graphs.error}")
    report["headline"] = headline(report)
    report.update(notes=notes, phases_s=clock.phases, stopped=clock.stopped, complete=not clock.stopped,
                  wall_s=clock.elapsed())
    (out / f"{stem}.report.json").write_text(dumps(report) + "\n", encoding="utf-8")
    (out / f"{stem}.report.md").write_text(render_markdown(report), encoding="utf-8")
    log(f"wrote {out / stem}.{{json,samples.json,report.json,report.md,heldout-steps.json}} "
        f"({report['wall_s']:.0f} s in all"
        + ("" if report["complete"] else "; STOPPED: " + "; ".join(clock.stopped)) + ")")
    return report


def headline(report: dict[str, Any]) -> dict[str, Any]:
    """The figures the issue asks for, in one place."""
    d, f, v = report["decode_check"] or {}, report["fit"], report["validation"]
    steps = [r["step_time"] for r in (v or {}).get("loads", []) if r["step_time"]]
    n = sum(s["steps"] for s in steps)
    return {"decode_ratio": d.get("ratio"), "decode_target_ratio": d.get("target_ratio", TARGET_RATIO),
            "decode_within_target": d.get("within_target"),
            "fit_test_mape": f["test"].get("mape_pct", float("nan")) / 100 if f else None,
            "heldout_step_mape": sum(s["mape"] * s["steps"] for s in steps) / n if n else None,
            "loads": [{"load": r["load"], **r["errors"]} for r in (v or {}).get("loads", [])]}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="catalog name or config.json (default llama-3.1-8b)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--dtype", default="auto", choices=["auto", "bf16", "fp16", "fp32"])
    ap.add_argument("--tiny", action="store_true",
                    help="the dry run: tiny model, tiny plan, seconds-long budgets, 1 thread")
    ap.add_argument("--budget", type=float, default=None, help="seconds of calibration measurement (200; tiny 2)")
    ap.add_argument("--validation-budget", type=float, default=None,
                    help="seconds for the held-out loads (90; tiny 4)")
    ap.add_argument("--time-limit", type=float, default=None,
                    help=f"wall-clock limit of the whole run ({DEFAULT_TIME_LIMIT_S:g} s; tiny 45)")
    ap.add_argument("--no-cuda-graphs", action="store_true", help="run decode steps eagerly")
    ap.add_argument("--out-dir", default="calibration/profiles")
    ap.add_argument("--gpu", default=None, help="catalog GPU for the bound (default: detected from the device)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--max-pool-gib", type=float, default=None)
    ap.add_argument("--no-replay", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--strict", action="store_true", help="exit 1 when the decode check misses its target")
    args = ap.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda: torch.cuda.is_available() is false (the dry run: --device cpu --tiny)",
              file=sys.stderr)
        return 2
    tiny = args.tiny
    limit = args.time_limit or (45.0 if tiny else DEFAULT_TIME_LIMIT_S)
    for flag, value in (("--budget", args.budget), ("--validation-budget", args.validation_budget),
                        ("--time-limit", limit)):
        if value is not None and not value > 0:
            print(f"error: {flag} must be > 0 seconds, got {value:g}", file=sys.stderr)
            return 2
    try:      # the watchdog: a hung run ends with a traceback a minute past the limit
        faulthandler.dump_traceback_later(limit + 60.0, exit=True, file=sys.__stderr__)
    except (AttributeError, OSError, ValueError):
        pass      # no real stderr to write to (an embedding host): run without the watchdog
    try:
        report = gpu_report(
            args.model or ("tiny-llama" if tiny else "llama-3.1-8b"), device=args.device, dtype=args.dtype,
            budget_s=args.budget or (2.0 if tiny else 200.0),
            validation_s=args.validation_budget or (4.0 if tiny else 90.0), time_limit_s=limit,
            out_dir=args.out_dir, gpu=args.gpu, quick=args.quick or tiny,
            threads=args.threads or (1 if tiny else None), seed=args.seed, max_pool_gib=args.max_pool_gib,
            replay=not args.no_replay, cuda_graphs=not args.no_cuda_graphs,
            plan_overrides=dict(TINY_PLAN) if tiny else None,
            decode_contexts=(16, 64, 160) if tiny else (128, 1024, 4096), prefill_tokens=256 if tiny else 4096)
    except (TwinInputError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        faulthandler.cancel_dump_traceback_later()
    if not report["complete"]:
        return 3
    if args.strict and report["decode_check"]["within_target"] is False:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
