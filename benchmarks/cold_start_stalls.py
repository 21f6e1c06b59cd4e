"""The inference-perf runs' cold-start stalls (issue 33, round 11, ``twin.fitting.cold_start``): per run, the
measured TTFT mean / median / max and ITL max beside the twin's mean TTFT and E2E at the embedded defaults, warm
(the replay before round 11) and with the cold server's one-off fused-MoE compiles; the specialisations the twin
met and what they add. Also a sweep of the compile time per kernel (a sensitivity check, not a fit).

    python benchmarks/cold_start_stalls.py [--ground-truth DIR] [--eval-sim-s 60] [--families mixtral]
    python benchmarks/cold_start_stalls.py --sweep 0.2,0.37,0.6 --families mixtral
    # the held-out folds of a fidelity_real.py --json report (made without the term), re-simulated without / with it
    python benchmarks/cold_start_stalls.py --report REPORT.json [--folds family,source,GPU]

``--report``: a fold's fit keeps cold runs' mean TTFT out of its targets, so for the folds that hold the cold
runs out their fit is the same with and without the term; each held-out cold case the term covers is simulated
again at the fold's reported parameters, without it (which must reproduce the report) and with it.

Signed errors: predicted / measured - 1."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from unittest.mock import patch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import bounded, check_out_path, number_list, positive_float  # noqa: E402
from benchmarks.fold_report import load_report  # noqa: E402
from twin.cost import cold_compile  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.fitting import cold_start  # noqa: E402
from twin.fitting.fit import check_simulation_options  # noqa: E402
from twin.fitting.ground_truth import h100_cases  # noqa: E402
from twin.fitting.joint import default_start  # noqa: E402
from twin.fitting import replay as replay_mod  # noqa: E402
from twin.fitting.replay import replay  # noqa: E402
from twin.fitting.switches import switched  # noqa: E402


def _root(args) -> Path:
    """The ground-truth folder: ``--ground-truth``, else the shared one beside the checkout."""
    return args.ground_truth or Path(__file__).resolve().parents[2] / "shared" / "ground-truth"


def _compiles(rule):
    """``replay`` with ``rule`` in place of its cold-compile selection (``twin.fitting.replay.compiles_for``)."""
    return patch.object(replay_mod, "compiles_for", rule)


def _extremes(root: Path, run_name: str) -> tuple[float, float]:
    exp, stage = run_name.rsplit("/stage", 1)
    f = root / "h100-vllm-inference-perf" / exp / f"results_stage_{stage}_lifecycle_metrics.json"
    if not f.is_file():
        return float("nan"), float("nan")
    lat = json.loads(f.read_text())["successes"]["latency"]
    return 1e3 * lat["time_to_first_token"]["max"], 1e3 * lat["inter_token_latency"]["max"]


DEFAULT_FOLDS = "family,source,GPU"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--eval-sim-s", type=positive_float, default=60.0)
    ap.add_argument("--families", default="", help="comma list of substrings of the run names (default: all)")
    ap.add_argument("--sweep", default="", help="comma list of compile seconds per kernel to try (cold runs only)")
    ap.add_argument("--report", type=Path, default=None)
    ap.add_argument("--folds", default=None, help=f"with --report: the fold kinds (default {DEFAULT_FOLDS})")
    ap.add_argument("--patched", type=Path, default=None,
                    help="with --report: write the report with the re-simulated cases' errors replaced")
    ap.add_argument("--probe-stall", default="",
                    help="a reading, no term: the dense TP > 1 cold runs with ONE hypothetical stall at the first "
                         "step above THRESHOLD tokens, 'THRESHOLD:SECONDS' comma list (SECONDS 'itl': the run's "
                         "measured ITL max)")
    args = ap.parse_args(argv)
    given = [flag for flag, value in (("--folds", args.folds), ("--patched", args.patched)) if value is not None]
    if given and args.report is None:
        raise TwinInputError(f"{given[0]} applies with --report only")
    if args.sweep and (args.report is not None or args.probe_stall):
        raise TwinInputError("--sweep applies without --report and --probe-stall only")
    args.folds = DEFAULT_FOLDS if args.folds is None else args.folds
    check_out_path(args.patched, "--patched")
    args.sweep_s = number_list(args.sweep, "--sweep", low=0.0, allow_empty=True)
    check_probes(args.probe_stall)
    check_simulation_options(args.eval_sim_s, 1, "--eval-sim-s")
    if args.report is not None:
        return _folds(args)    # with --probe-stall: the dense cold cases with the first probe instead of the term
    if args.probe_stall:
        return _probe(args)
    cases, _ = h100_cases(args.ground_truth)
    root = _root(args)
    wanted = [f for f in args.families.split(",") if f]
    cases = [c for c in cases if not wanted or any(f in c.run.name for f in wanted)]
    params = default_start(())
    print("| run | cold | TTFT mean / median / max, ITL max (measured, ms) | twin mean TTFT warm -> cold (signed) "
          "| E2E mean warm -> cold (signed) | compiles met / possible |")
    print("|---|---|---|---|---|---|")
    for c in cases:
        m = c.run.metrics
        with switched(cold_start=False):
            warm = replay(c.run, c.target, params, max_sim_s=args.eval_sim_s).metrics
        r = replay(c.run, c.target, params, max_sim_s=args.eval_sim_s)
        t_max, itl_max = _extremes(root, c.run.name)
        cs = r.cold_start
        met = f"{cs.stalls} / {cs.specialisations} (+{cs.added_ms['mean_ttft_ms']:.1f} ms)" if cs else "-"
        e = lambda k, p: f"{p[k]:.1f} ({p[k] / m[k] - 1:+.1%})"   # noqa: E731
        print(f"| {c.run.name} | {'yes' if c.run.cold_start else 'no'} | {m['mean_ttft_ms']:.1f} / "
              f"{m['median_ttft_ms']:.1f} / {t_max:.0f}, {itl_max:.0f} | {e('mean_ttft_ms', warm)} -> "
              f"{e('mean_ttft_ms', r.metrics)} | {e('mean_e2el_ms', warm)} -> {e('mean_e2el_ms', r.metrics)} | {met} |")
        for s in args.sweep_s if c.run.cold_start else []:
            with patch.object(cold_compile, "TRITON_COMPILE_S_PER_KERNEL", s):
                p = replay(c.run, c.target, params, max_sim_s=args.eval_sim_s).metrics
            print(f"|   compile {s:.2f} s/kernel | | | {e('mean_ttft_ms', p)} | {e('mean_e2el_ms', p)} | |")


class _OneStall:
    """A hypothetical one-off stall of ``stall_s`` at the first step of more than ``threshold`` tokens (the
    ``ColdCompiles`` interface, one specialisation): a probe of what one such stall can add, not a term."""

    def __init__(self, threshold: int, max_tokens: int, stall_s: float) -> None:
        self.key_of = [-1] * (threshold + 1) + [0] * max(0, max_tokens - threshold)
        self.num_cold, self.largest_graph_tokens, self.stall_s = 1, threshold, stall_s

    def fresh(self) -> list[bool]:
        return [False]

    def explain(self) -> dict[str, float]:
        return {}


def _probe_for(probe: str, root: Path, run_name: str):
    """``compiles_for`` with one hypothetical stall ('THRESHOLD:SECONDS', SECONDS 'itl': the run's ITL max)."""
    thr, sec = probe.split(":")
    stall_s = _extremes(root, run_name)[1] / 1e3 if sec == "itl" else float(sec)
    return (lambda run, dep: _OneStall(int(thr), dep.scheduler_config.max_num_batched_tokens, stall_s)
            if run.cold_start else None), int(thr), stall_s


def check_probes(text: str) -> None:
    """``--probe-stall``: each item THRESHOLD:SECONDS, a whole number of tokens >= 1 and a finite number of seconds
    >= 0 or ``itl``; anything else is one line."""
    for probe in (p for p in text.split(",") if p):
        thr, sep, sec = probe.partition(":")
        try:
            bounded(True, 1)(thr)
            if sec != "itl":
                bounded(False, 0.0)(sec)
        except argparse.ArgumentTypeError:
            sep = ""
        if not sep:
            raise TwinInputError(f"--probe-stall {probe!r}: expected THRESHOLD:SECONDS (tokens >= 1; seconds >= 0 or "
                                 "'itl')")


def _dense_cold(cases, families: str):
    wanted = [f for f in families.split(",") if f] or ["70b", "codellama"]
    return [c for c in cases if c.run.cold_start and any(f in c.run.name for f in wanted)]


def _probe(args) -> None:
    cases, _ = h100_cases(args.ground_truth)
    root = _root(args)
    cases = _dense_cold(cases, args.families)
    params = default_start(())
    print("| run | TTFT mean measured | twin warm (signed) | probe | twin with one stall (signed) | points | "
          "E2E mean | TPOT mean |")
    print("|---|---|---|---|---|---|---|---|")
    for c in cases:
        m = c.run.metrics
        with _compiles(lambda run, dep: None):
            warm = replay(c.run, c.target, params, max_sim_s=args.eval_sim_s).metrics
        for probe in [p for p in args.probe_stall.split(",") if p]:
            rule, thr, stall_s = _probe_for(probe, root, c.run.name)
            with _compiles(rule):
                r = replay(c.run, c.target, params, max_sim_s=args.eval_sim_s)
            p = r.metrics
            e = lambda k, x: x[k] / m[k] - 1   # noqa: E731
            print(f"| {c.run.name} | {m['mean_ttft_ms']:.1f} | {warm['mean_ttft_ms']:.1f} "
                  f"({e('mean_ttft_ms', warm):+.1%}) | > {thr} tokens: {stall_s:.3f} s, met "
                  f"{r.cold_start.stalls if r.cold_start else 0} | {p['mean_ttft_ms']:.1f} "
                  f"({e('mean_ttft_ms', p):+.1%}) | {100 * (e('mean_ttft_ms', p) - e('mean_ttft_ms', warm)):+.2f} "
                  f"| {100 * (e('mean_e2el_ms', p) - e('mean_e2el_ms', warm)):+.2f} "
                  f"| {100 * (e('mean_tpot_ms', p) - e('mean_tpot_ms', warm)):+.2f} |")


def _folds(args) -> None:
    from twin.fitting.joint import errors, with_deployments
    rep = load_report(args.report)
    report = rep.data
    cases, _ = h100_cases(args.ground_truth)
    root = _root(args)
    probe = args.probe_stall.split(",")[0] if args.probe_stall else ""
    probed = {c.run.name for c in _dense_cold(cases, args.families)} if probe else set()
    by_name = {c.run.name: (c, d) for c, d in with_deployments(cases)}
    report_rule = replay_mod.compiles_for
    keys = ("mean_ttft_ms", "mean_tpot_ms", "mean_e2el_ms")
    print("| fold | run | TTFT mean before -> after | TPOT | E2E mean | compiles met |")
    print("|---|---|---|---|---|---|")
    kinds = [k for k in args.folds.split(",") if k]
    if not any(name in by_name for kind in kinds for fold in rep.folds(kind) for name in rep.errors(fold)):
        raise TwinInputError(f"{args.report}: no held-out case of its {', '.join(kinds)} folds is an inference-perf "
                             "run of the ground truth")
    for kind in kinds:
        for fold in rep.folds(kind):
            params = rep.params(fold)
            for name, before in rep.errors(fold).items():
                if name not in by_name or (probe and name not in probed) or (
                        not probe and cold_start.compiles_for(by_name[name][0].run, by_name[name][1]) is None):
                    continue
                c, d = by_name[name]
                if any(k not in before for k in keys):
                    raise TwinInputError(f"{args.report}: the fold holding {fold['held_out']!r} out: errors of "
                                         f"{name!r} lack one of {', '.join(keys)}")
                out = []
                for on in (False, True):
                    # with a probe: without it the report's replay (no term for a dense run), with it the probe
                    with switched(cold_start=on), \
                            _compiles(_probe_for(probe, root, name)[0] if probe and on else report_rule):
                        r = replay(c.run, c.target, params, max_sim_s=args.eval_sim_s, deployment=d)
                    out.append((errors(c, r.metrics), r.cold_start))
                (off, _), (on, cs) = out
                if probe and abs(off["mean_ttft_ms"] - before["mean_ttft_ms"]) > 5e-4:
                    print(f"| {kind}: {fold['held_out']} | {name} | not reproduced at --eval-sim-s (kept) | | | |")
                    continue
                fold["errors"][name] = on
                cells = " | ".join(f"{100 * before[k]:+.1f} / {100 * off[k]:+.1f} -> {100 * on[k]:+.1f} %" for k in keys)
                print(f"| {kind}: {fold['held_out']} | {name} | {cells} | {cs.stalls} / {cs.specialisations} |")
    if args.patched is not None:
        report.pop("markdown", None)
        args.patched.write_text(json.dumps(report))


if __name__ == "__main__":
    run_script(main)
