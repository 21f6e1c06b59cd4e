"""The MLA layer prior net of the all-reduces' own time, held out (issue 33, round 18; docs/fidelity.md "Round 18:
the family fold's throughput (issue 33)").

Every fold that resets ``layer_overhead_s@mla`` (the Kimi family fold, the B200 GPU fold, the silicon source fold)
prices it after its fit (``twin.fitting.held_priors.held_priors_after_fit``), and the term acts on MLA models only
(Kimi-K2.5, the data's one MLA family). So a fold's other cases and its fitted parameters do not move with the
prior, and the fold's Kimi cases simulated at the report's parameters with the MLA value replaced are exactly what
the fold would report (the first setting reproduces the report's Kimi errors; the script says if it does not).

For each fold: the Kimi cases at the report's MLA value (round 9's even spread, ``before``) and at the prior net of
the all-reduces' own time from the same fold's fitted ``allreduce_latency_s`` (``twin.fitting.mla_kernel_prior``,
``after``); per case signed errors; the fold's medians; and the pooled medians of the fold's kind (every fold of
that kind in the report, the Kimi cases replaced), the issue's figures.

    python benchmarks/fidelity_real.py --workers 2 --json R.json        # or any report with these folds
    python benchmarks/kimi_family_mla.py R.json                        # ~2 min (8 Kimi cases x 3 folds x 2)
    python benchmarks/kimi_family_mla.py R.json --blackwell-memory-efficiency 0.95 --folds GPU,source
    python benchmarks/kimi_family_mla.py --in-sample             # Kimi NVFP4 at the embedded defaults, ~1 min

``--in-sample``: no report; the Kimi NVFP4 rows of the embedded-defaults run (silicon every 3) at the embedded
defaults with the MLA time at round 8's reading (13.2 us) and at the even spread's size (16.2 us): what today's
defaults make Kimi's own rows read (the MLA time and the Blackwell stream are collinear there).

``--blackwell-memory-efficiency X``: a conditional reading for the folds that keep no Blackwell row (the B200 GPU
fold, the silicon source fold), where ``memory_efficiency@blackwell`` is a held value, not fitted: X in place of
it in both settings, every held-out case of the fold simulated (the value moves all of them), to see how the MLA
prior behaves beside a Blackwell stream prior of that size (a family fold fits it, so it is refused there).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from twin.errors import TwinInputError, run_script  # noqa: E402
from benchmarks.error_medians import metric_medians  # noqa: E402
from benchmarks.cli_checks import positive_int  # noqa: E402
from benchmarks.fold_report import load_report  # noqa: E402

METRICS = ("mean_ttft_ms", "median_ttft_ms", "mean_tpot_ms", "mean_e2el_ms", "request_throughput")
FOLDS = (("family", "kimi"), ("GPU", "B200"), ("source", "silicon"))
FOLDS_DEFAULT = ",".join(k for k, _ in FOLDS)
MLA_KEY = "layer_overhead_s@mla"
MATCH_TOL = 1e-6          # |simulated - report| signed error below which the report is reproduced


def medians(errs: list[dict[str, float]]) -> dict[str, tuple[float, float, int] | None]:
    """Per metric: (median |error|, median signed error, n) over the cases that have it, else None."""
    return metric_medians(errs, METRICS)


def cell(s: tuple[float, float, int] | None) -> str:
    return f"{100 * s[0]:5.2f}% ({100 * s[1]:+5.2f}%)" if s else f"{'-':>17}"


def pooled(report, kind: str, replaced: dict[str, dict[str, float]]) -> dict:
    """The medians over every ``kind`` fold's cases in ``report``, with ``replaced`` cases' errors swapped in."""
    errs = []
    for fold in report.folds(kind):
        for name, e in report.errors(fold).items():
            errs.append(replaced.get(name, e))
    return medians(errs)


def prior_values(params: dict[str, float]) -> tuple[float, float]:
    """(round 9's even spread, round 18's net of the all-reduces) for the fold's fitted all-reduce latency, the
    held-out Kimi servers fusing their all-reduces (round 15's count)."""
    from twin.fitting.held_priors import mla_layer_prior_s
    latency = params["allreduce_latency_s"]
    return (mla_layer_prior_s(latency, fused=True, net_of_allreduces=False),
            mla_layer_prior_s(latency, fused=True, net_of_allreduces=True))


def run(report_path: Path, workers: int, folds=FOLDS, blackwell_mem: float | None = None) -> None:
    from twin.fitting.fit import simulate_cases
    from twin.fitting.joint import all_cases, errors, family_of
    report = load_report(report_path)
    every = report.silicon_every(16)
    every_case = all_cases(silicon_every=every)
    kimi = [c for c in every_case if family_of(c) == "kimi"]
    print(f"{len(kimi)} Kimi cases (silicon every {every}), {report_path.name}")
    for kind, group in folds:
        fold = report.fold(kind, group)
        params = report.params(fold)
        cases = kimi
        if blackwell_mem is not None:
            params["memory_efficiency@blackwell"] = blackwell_mem
            cases = [c for c in every_case if c.run.name in report.errors(fold)]
            if not cases:
                raise TwinInputError(f"{report_path}: the {kind} fold holding {group} out names none of the cases "
                                     f"at silicon every {every}: nothing to simulate")
            print(f"\n(memory_efficiency@blackwell {blackwell_mem} in both settings; {len(cases)} cases)")
        if MLA_KEY not in params:
            print(f"\n== {kind} {group}: the fold does not reset {MLA_KEY}; nothing moves")
            continue
        even, net = prior_values(params)
        reported = report.errors(fold)
        print(f"\n== {kind} fold holding {group} out: allreduce_latency_s {1e6 * params['allreduce_latency_s']:.2f} us;"
              f" MLA {1e6 * params[MLA_KEY]:.2f} us in the report (even spread {1e6 * even:.2f}), "
              f"{1e6 * net:.2f} us net of the all-reduces")
        before: dict[str, dict[str, float]] = {}
        moved: dict[str, dict[str, float]] = {}
        for label, value in (("before", params[MLA_KEY]), ("after", net)):
            res = simulate_cases(cases, {**params, MLA_KEY: value}, seed=0, max_sim_s=60.0, workers=workers)
            errs = {c.run.name: errors(c, r.metrics) for c, r in zip(cases, res)}
            if label == "after":
                moved = errs
            else:
                before = errs
                if blackwell_mem is None:       # at the report's own parameters: the report's errors
                    off = [n for n, e in errs.items() if n in reported and any(
                        abs(e[m] - reported[n][m]) > MATCH_TOL for m in e if m in reported[n])]
                    print(f"  report reproduced: {'yes' if not off else 'NO, ' + ', '.join(off)}")
            for n, e in errs.items():
                if blackwell_mem is not None and "kimi" not in n:
                    continue
                print(f"  {label:6} {n[-58:]:58} " + " ".join(
                    f"{m[5:-3] if m.startswith('mean') else m[:7]} {100 * e[m]:+6.1f}" for m in METRICS if m in e))
            s = medians(list(errs.values()))
            which = "Kimi" if blackwell_mem is None else "all"
            print(f"  {label:6} {which} cases: " + " | ".join(f"{m}: {cell(s[m])}" for m in METRICS if s[m]))
        own = {n: moved.get(n, e) for n, e in reported.items()}
        base = {n: before.get(n, e) for n, e in reported.items()}
        for label, table in (("fold", medians(list(base.values()))), ("fold after", medians(list(own.values()))),
                             (f"{kind} pooled", pooled(report, kind, before)),
                             (f"{kind} pooled after", pooled(report, kind, moved))):
            print(f"  {label:22} " + " | ".join(f"{m}: {cell(table[m])}" for m in METRICS if table[m]))


IN_SAMPLE_MLA_S = (13.2e-6, 16.2e-6)
IN_SAMPLE_EVERY = 3       # the embedded-defaults run's silicon rows (fidelity_real.py --defaults-only --silicon-every)


def in_sample(workers: int) -> None:
    from twin.fitting.fit import simulate_cases
    from twin.fitting.joint import all_cases, default_start, errors, family_of
    cases = [c for c in all_cases(silicon_every=IN_SAMPLE_EVERY)
             if family_of(c) == "kimi" and (c.row.precision or "").lower() == "fp4"]
    base = default_start()
    for mla in IN_SAMPLE_MLA_S:
        res = simulate_cases(cases, {**base, MLA_KEY: mla}, seed=0, max_sim_s=60.0, workers=workers)
        xs = [errors(c, r.metrics)["mean_tpot_ms"] for c, r in zip(cases, res)]
        print(f"MLA {1e6 * mla:.1f} us: {len(xs)} Kimi NVFP4 rows at the embedded defaults, TPOT median "
              f"{100 * statistics.median(xs):+.2f}% (|{100 * statistics.median(abs(x) for x in xs):.2f}%|)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path, nargs="?", default=None,
                    help="a fidelity_real.py --json report with the family, GPU, source folds")
    ap.add_argument("--in-sample", action="store_true", help="Kimi NVFP4 at the embedded defaults (no report)")
    ap.add_argument("--workers", type=positive_int, default=1)
    ap.add_argument("--folds", default=FOLDS_DEFAULT, help="comma-separated fold kinds of " +
                    ", ".join(f"{k} ({g})" for k, g in FOLDS))
    ap.add_argument("--blackwell-memory-efficiency", type=float, default=None, metavar="X")
    args = ap.parse_args()
    if args.in_sample:
        if args.report is not None or args.blackwell_memory_efficiency is not None or args.folds != FOLDS_DEFAULT:
            ap.error("--in-sample takes no report, --folds or --blackwell-memory-efficiency")
        in_sample(args.workers)
        return
    if args.report is None:
        ap.error("a report is required (or --in-sample)")
    kinds = [k.strip() for k in args.folds.split(",") if k.strip()]
    known = dict(FOLDS)
    if not kinds or any(k not in known for k in kinds) or len(set(kinds)) != len(kinds):
        ap.error(f"--folds: a comma-separated list of distinct kinds from {', '.join(known)}")
    x = args.blackwell_memory_efficiency
    if x is not None:
        if not (0.3 <= x <= 1.0):
            ap.error("--blackwell-memory-efficiency must lie in [0.3, 1] (a fraction of the datasheet bandwidth)")
        if "family" in kinds:
            ap.error("--blackwell-memory-efficiency: the family folds fit it; use --folds GPU,source")
    run(args.report, args.workers, tuple((k, known[k]) for k in kinds), x)


if __name__ == "__main__":
    run_script(main)
