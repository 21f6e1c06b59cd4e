"""Is the held-out throughput gap definitional, or E2E error through Little's law? (issue 33, round 17)

The silicon source publishes mean TTFT and mean TPOT only; its README says "No throughput column: derive it from
concurrency, TTFT and TPOT". Both sides of a silicon case therefore derive the figure the same way
(``twin.fitting.silicon.derived_metrics`` for the measured side, ``twin.fitting.joint.compared`` for the twin's):
``E2E = TTFT + (mean OSL - 1) x TPOT`` and ``throughput = CONC / E2E``, so on every silicon case
``(1 + throughput error) x (1 + E2E error) = 1`` holds by construction, and the client's ``--num-prompts``,
warm-up, ramp-up, drain tail and failures enter neither side. An inference-perf stage's throughput is the client's
own (successes over the stage's span; the twin restates its slice over the run's span, ``twin.fitting.run_span``).

The report reading (instant, from a ``fidelity_real.py --json`` report) per fold kind:

* the identity's largest deviation over the silicon cases (0 up to rounding if nothing else enters);
* what the pooled throughput median is made of: the inference-perf cases (their errors), the silicon cases (the
  E2E error mirrored), the rank the median takes and how many silicon cases lie within the target;
* each silicon E2E error split into its TTFT and TPOT parts, ``e_E2E = w e_TTFT + (1 - w) e_TPOT`` with ``w`` the
  measured TTFT's share of the measured E2E, recovered exactly from the three errors:
  ``w = (e_E2E - e_TPOT) / (e_TTFT - e_TPOT)``; and the pooled median were either part exact;
* the silicon cases nearest the target, which decide whether the pooled median crosses it.

``--simulate`` adds what the definition would change: the silicon rows of the report at the embedded defaults,
simulated whole (10 x CONC requests, all sent at t = 0, CONC in flight), with the throughput ``vllm bench serve``
itself prints (completed over the span from the first send to the last answer: ramp-up and drain tail included)
beside the derived ``CONC / E2E``. The spread of that ratio over rows bounds what any choice of definition could
move, if both sides used the same one.

    python benchmarks/throughput_reading.py REPORT.json [--kinds GPU,family] [--target 0.03] [--near 4]
        [--simulate] [--max-conc 64] [--json out.json]

The report reading is instant; ``--simulate`` ~1.5 minutes for the 46 silicon rows of a default report
(``--max-conc`` bounds it).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_out_path  # noqa: E402
from benchmarks.fold_report import load_report  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402

THR, E2E, TPOT, TTFT = "request_throughput", "mean_e2el_ms", "mean_tpot_ms", "mean_ttft_ms"
SPLIT_MIN_GAP = 1e-9      # e_TTFT and e_TPOT closer than this: the split into parts is not defined
SHARE_SLACK = 1e-6        # a recovered TTFT share may leave [0, 1] by rounding this much


def mirrored(e2e_error: float) -> float:
    """The throughput error Little's law gives from an E2E error at a fixed concurrency: 1 / (1 + e) - 1."""
    if not e2e_error > -1.0:
        raise TwinInputError(f"an E2E error of {e2e_error!r} leaves no positive E2E")
    return 1.0 / (1.0 + e2e_error) - 1.0


def ttft_share(errors: dict[str, float]) -> float | None:
    """The measured TTFT's share ``w`` of the measured derived E2E, from a silicon case's three errors; None where
    ``e_TTFT`` and ``e_TPOT`` coincide (every ``w`` fits) or a part is missing."""
    if not all(k in errors for k in (E2E, TPOT, TTFT)) or abs(errors[TTFT] - errors[TPOT]) < SPLIT_MIN_GAP:
        return None
    return (errors[E2E] - errors[TPOT]) / (errors[TTFT] - errors[TPOT])


def median_rank(n: int) -> int:
    """The 1-based rank among ``n`` sorted values that, within a bound, puts ``statistics.median`` within it: the
    middle value (odd ``n``), the upper of the two middle ones (even ``n``, whose median is their mean)."""
    if n < 1:
        raise TwinInputError("no values to take a median of")
    return n // 2 + 1


def median_or_none(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def kind_reading(cases: list[tuple[str, str, dict[str, float]]], silicon_ids: set[str], target: float,
                 near: int) -> dict:
    """The reading of one fold kind. ``cases``: (held-out group, case name, signed errors) over all its folds;
    ``silicon_ids``: the names that are silicon cases (the rest are inference-perf stages)."""
    with_thr = [(g, n, e) for g, n, e in cases if THR in e]
    if not with_thr:
        raise TwinInputError("no held-out case with a throughput error")
    silicon = [(g, n, e) for g, n, e in with_thr if n in silicon_ids]
    other = [(g, n, e) for g, n, e in with_thr if n not in silicon_ids]
    identity = max((abs((1.0 + e[THR]) * (1.0 + e[E2E]) - 1.0) for _, _, e in silicon if E2E in e), default=None)
    pooled = statistics.median(abs(e[THR]) for _, _, e in with_thr)
    tpot_only, ttft_only, shares = [], [], []
    for _, name, e in with_thr:
        w = ttft_share(e) if name in silicon_ids else None
        if w is None:
            tpot_only.append(abs(e[THR]))
            ttft_only.append(abs(e[THR]))
            continue
        if not -SHARE_SLACK <= w <= 1.0 + SHARE_SLACK:
            raise TwinInputError(f"case {name!r}: its errors give the measured TTFT a share {w:.3g} of E2E, outside "
                                 "[0, 1] (not a silicon case's derived errors)")
        shares.append(w)
        tpot_only.append(abs(mirrored((1.0 - w) * e[TPOT])))
        ttft_only.append(abs(mirrored(w * e[TTFT])))
    rank = median_rank(len(with_thr))
    other_within = sum(abs(e[THR]) <= target for _, _, e in other)
    ranked = sorted(silicon, key=lambda c: abs(c[2][THR]))
    within = sum(abs(e[THR]) <= target for _, _, e in silicon)
    needed = max(0, rank - other_within)
    lo, hi = max(0, needed - 1 - near), min(len(ranked), needed + near)      # ranks needed +/- near
    groups: dict[str, list[dict[str, float]]] = {}
    for g, _, e in silicon:
        groups.setdefault(g, []).append(e)
    by_group = {g: {"n": len(es), "within_target": sum(abs(e[THR]) <= target for e in es),
                    "abs": statistics.median(abs(e[THR]) for e in es),
                    "signed": statistics.median(e[THR] for e in es),
                    "tpot_signed": median_or_none([e[TPOT] for e in es if TPOT in e])} for g, es in groups.items()}
    return {
        "cases": len(with_thr), "silicon": len(silicon), "other": len(other), "by_group": by_group,
        "identity_max_deviation": identity, "pooled_abs": pooled, "median_rank": rank,
        "other_within_target": other_within, "other_outside": sorted((n, e[THR]) for _, n, e in other
                                                                    if abs(e[THR]) > target),
        "silicon_within_target": within, "silicon_needed": needed,
        "silicon_abs_median": statistics.median(abs(e[THR]) for _, _, e in silicon) if silicon else None,
        "pooled_if_ttft_exact": statistics.median(tpot_only), "pooled_if_tpot_exact": statistics.median(ttft_only),
        "ttft_share": (min(shares), statistics.median(shares), max(shares)) if shares else None,
        "near_target": [{"rank": lo + i + 1, "group": g, "case": n, "throughput": e[THR], "e2e": e.get(E2E),
                         "ttft": e.get(TTFT), "tpot": e.get(TPOT), "ttft_share": ttft_share(e)}
                        for i, (g, n, e) in enumerate(ranked[lo:hi])],
    }


def replicate_band(cases: list[tuple[str, str, dict[str, float]]], silicon_ids: set[str], target: float, *,
                   ttft_sd: float, tpot_sd: float, draws: int = 20_000, seed: int = 0) -> dict[str, float]:
    """The pooled |throughput| median if the silicon rows were measured again: each row's measured TTFT and TPOT
    scaled by independent normal factors ``1 + n`` (standard deviations ``ttft_sd``, ``tpot_sd``), its derived E2E
    by ``w (1 + n_TTFT) + (1 - w)(1 + n_TPOT)``; the inference-perf cases (their own throughput) kept. Returns the
    median, 5th and 95th percentiles of the pooled median over ``draws`` seeded draws, and the share within
    ``target``."""
    import numpy as np
    if draws < 1 or ttft_sd < 0 or tpot_sd < 0:
        raise TwinInputError("draws >= 1 and non-negative standard deviations")
    fixed, e2e, share = [], [], []
    for _, name, e in cases:
        if THR not in e:
            continue
        w = ttft_share(e) if name in silicon_ids else None
        if w is None:
            fixed.append(abs(e[THR]))
        else:
            e2e.append(e[E2E])
            share.append(w)
    rng = np.random.default_rng(seed)
    e2e_a, w_a = np.asarray(e2e), np.asarray(share)
    n_ttft = rng.normal(0.0, ttft_sd, (draws, len(e2e)))
    n_tpot = rng.normal(0.0, tpot_sd, (draws, len(e2e)))
    again = (1.0 + e2e_a) / (w_a * (1.0 + n_ttft) + (1.0 - w_a) * (1.0 + n_tpot)) - 1.0
    pooled = np.median(np.concatenate([np.abs(1.0 / (1.0 + again) - 1.0),
                                       np.broadcast_to(np.asarray(fixed), (draws, len(fixed)))], axis=1), axis=1)
    return {"median": float(np.median(pooled)), "p05": float(np.quantile(pooled, 0.05)),
            "p95": float(np.quantile(pooled, 0.95)), "within_target": float(np.mean(pooled <= target))}


def sd_from_replicates(median_abs_difference: float) -> float:
    """One measurement's standard deviation from the median |difference| of two replicates (normal errors: the
    difference has sd ``sqrt(2) s``, its median absolute value ``0.6745 sqrt(2) s``)."""
    return median_abs_difference / (statistics.NormalDist().inv_cdf(0.75) * math.sqrt(2.0))


def report_cases(report, kind: str) -> list[tuple[str, str, dict[str, float]]]:
    return [(f["held_out"], name, errs) for f in report.folds(kind) for name, errs in report.errors(f).items()]


def bare_name(name: str) -> str:
    """A silicon case's row id: its name without a capped run's `` [n/N]`` suffix."""
    return name.split(" [", 1)[0]


def tail_ratio(metrics: dict[str, float], concurrency: int, mean_osl: float) -> dict[str, float]:
    """One simulated closed-loop run: the throughput the client prints (completed over the span from the first
    send to the last answer) and ``CONC / E2E`` derived as the silicon source's, and their ratio."""
    ttft, tpot, printed = metrics.get(TTFT), metrics.get(TPOT), metrics.get(THR)
    if not (ttft and tpot and printed) or concurrency < 1 or mean_osl < 1:
        raise TwinInputError("a simulated run without TTFT, TPOT or throughput, or a bad concurrency / OSL")
    derived = concurrency / ((ttft + (mean_osl - 1.0) * tpot) / 1e3)
    return {"printed_rps": printed, "derived_rps": derived, "ratio": printed / derived,
            "e2e_ratio": (ttft + (mean_osl - 1.0) * tpot) / metrics[E2E] if metrics.get(E2E) else math.nan}


def simulate_tails(names: set[str], max_conc: int, ground_truth: Path | None) -> list[dict]:
    """The report's silicon rows (concurrency <= ``max_conc``) at the embedded defaults, simulated whole."""
    from twin.fitting.fit import simulate_cases
    from twin.fitting.joint import default_start
    from twin.fitting.silicon import read_silicon, silicon_cases, silicon_dir
    rows = [r for r in read_silicon(silicon_dir(ground_truth))
            if r.id in names and r.published_client and r.concurrency <= max_conc]
    cases, _ = silicon_cases(ground_truth, max_requests=None, rows=rows)
    out = []
    for c, rep in zip(cases, simulate_cases(cases, default_start(()), max_sim_s=None)):
        rec = tail_ratio(rep.metrics, c.row.concurrency, c.run.output_tokens.mean)
        out.append({"id": c.row.id, "concurrency": c.row.concurrency, "requests": c.run.num_requests,
                    "completed": rep.metrics.get("completed"), "failed": rep.metrics.get("failed"), **rec})
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f} %"


def print_reading(kind: str, r: dict, target: float) -> None:
    print(f"== {kind}: {r['cases']} cases with a throughput error ({r['silicon']} silicon, {r['other']} "
          "inference-perf)")
    dev = r["identity_max_deviation"]
    print(f"  (1 + thr)(1 + E2E) - 1 on the silicon cases: max |deviation| {dev:.1e}" if dev is not None else
          "  no silicon case")
    print(f"  pooled |thr| median {100 * r['pooled_abs']:.2f} % (rank {r['median_rank']} of {r['cases']}); "
          f"inference-perf within {100 * target:.0f} %: {r['other_within_target']} of {r['other']}"
          + "".join(f"; outside: {n} {_pct(v)}" for n, v in r["other_outside"]))
    print(f"  silicon within {100 * target:.0f} %: {r['silicon_within_target']} of {r['silicon']} (the pooled "
          f"median is within it from {r['silicon_needed']}); silicon |thr| median "
          f"{100 * (r['silicon_abs_median'] or 0):.2f} %")
    s = r["ttft_share"]
    if s:
        print(f"  measured TTFT's share of E2E: min {s[0]:.3f}, median {s[1]:.3f}, max {s[2]:.3f}")
    print(f"  pooled |thr| median were the silicon TTFT exact: {100 * r['pooled_if_ttft_exact']:.2f} %; were the "
          f"TPOT exact: {100 * r['pooled_if_tpot_exact']:.2f} %")
    for g, b in r["by_group"].items():
        print(f"  held out {g:<14} silicon {b['n']:3d}, within {b['within_target']:3d}; |thr| {100 * b['abs']:.1f} % "
              f"({_pct(b['signed'])}), TPOT signed {_pct(b['tpot_signed'])}")
    print("  silicon cases nearest the target (rank by |thr|):")
    for c in r["near_target"]:
        w = c["ttft_share"]
        print(f"    {c['rank']:3d} {c['group']:<14} {c['case']:<72} thr {_pct(c['throughput']):>8}  E2E "
              f"{_pct(c['e2e']):>8} = TTFT {_pct(c['ttft']):>8} x {w if w is not None else math.nan:.3f} + TPOT "
              f"{_pct(c['tpot']):>8}")


def parse_replicates(text: str) -> tuple[float, float]:
    """``--replicates TTFT,TPOT``: two fractions in [0, 1)."""
    parts = text.split(",")
    try:
        vals = tuple(float(p) for p in parts)
    except ValueError:
        vals = ()
    if len(vals) != 2 or not all(math.isfinite(v) and 0 <= v < 1 for v in vals):
        raise TwinInputError(f"--replicates {text!r}: give TTFT,TPOT as two fractions in [0, 1), e.g. 0.046,0.009")
    return vals


def parse_kinds(text: str | None, kinds: tuple[str, ...]) -> list[str] | None:
    """``--kinds A,B``: fold kinds among ``kinds``, each once; None (every kind the report has) where not given."""
    if text is None:
        return None
    names = [k.strip() for k in text.split(",") if k.strip()]
    if not names:
        raise TwinInputError(f"--kinds {text!r}: name at least one of {', '.join(kinds)}")
    for k in names:
        if k not in kinds:
            raise TwinInputError(f"--kinds {k!r}: allowed: {', '.join(kinds)}")
        if names.count(k) > 1:
            raise TwinInputError(f"--kinds {k!r}: given twice")
    return names


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", type=Path, help="a fidelity_real.py --json held-out report")
    ap.add_argument("--kinds", default=None, help="fold kinds to read (comma-separated, of source, GPU, family; "
                    "default: all the report has)")
    ap.add_argument("--target", type=float, default=0.03, help="the throughput target (a fraction)")
    ap.add_argument("--near", type=int, default=4, help="silicon cases listed either side of the deciding rank")
    ap.add_argument("--replicates", default="0.046,0.009", help="TTFT,TPOT: the median |difference| of two "
                    "measurements of one configuration (the silicon README: 4.6 %% and 0.9 %%); 0,0: no band")
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--simulate", action="store_true", help="the printed-vs-derived throughput at the defaults")
    ap.add_argument("--max-conc", type=int, default=None, help="--simulate: rows at this concurrency or less "
                    "(default 64)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    if not 0 < args.target < 1:
        raise TwinInputError(f"--target {args.target}: must be in (0, 1)")
    if args.near < 0:
        raise TwinInputError(f"--near {args.near}: must be >= 0")
    if args.max_conc is not None and not args.simulate:
        raise TwinInputError("--max-conc applies to --simulate only")
    max_conc = 64 if args.max_conc is None else args.max_conc
    if max_conc < 1:
        raise TwinInputError(f"--max-conc {max_conc}: must be >= 1")
    reps = parse_replicates(args.replicates)
    check_out_path(args.json)
    from twin.fitting.joint import FOLDS
    from twin.fitting.silicon import read_silicon, silicon_dir
    chosen = parse_kinds(args.kinds, tuple(FOLDS))
    rep = load_report(args.report)
    ids = {r.id for r in read_silicon(silicon_dir(args.ground_truth))}
    kinds = chosen or rep.kinds()
    out: dict = {"kinds": {}}
    names: set[str] = set()
    for kind in kinds:
        cases = report_cases(rep, kind)
        silicon = {n for _, n, _ in cases if bare_name(n) in ids}
        names |= {bare_name(n) for n in silicon}
        try:
            out["kinds"][kind] = kind_reading(cases, silicon, args.target, args.near)
        except TwinInputError as exc:
            raise TwinInputError(f"{args.report}: {kind} folds: {exc}") from None
        print_reading(kind, out["kinds"][kind], args.target)
        if any(reps):
            band = replicate_band(cases, silicon, args.target, ttft_sd=sd_from_replicates(reps[0]),
                                  tpot_sd=sd_from_replicates(reps[1]))
            out["kinds"][kind]["replicate_band"] = band
            print(f"  measured again (replicate scatter TTFT {100 * reps[0]:.1f} %, TPOT {100 * reps[1]:.1f} %): pooled "
                  f"|thr| median {100 * band['median']:.2f} % (5-95 %: {100 * band['p05']:.2f}-"
                  f"{100 * band['p95']:.2f} %), within {100 * args.target:.0f} % in {100 * band['within_target']:.0f} %"
                  " of draws")
    if args.simulate:
        tails = simulate_tails(names, max_conc, args.ground_truth)
        out["tails"] = tails
        print("== printed (completed / span) vs derived (CONC / E2E) throughput at the embedded defaults; failed "
              f"requests: {sum(t['failed'] or 0 for t in tails)}")
        for t in tails:
            print(f"  {t['id']:<72} C {t['concurrency']:4d} n {t['requests']:5d}  printed {t['printed_rps']:8.3f}"
                  f"  derived {t['derived_rps']:8.3f}  ratio {t['ratio']:.4f}  derived / simulated E2E "
                  f"{t['e2e_ratio']:.4f}")
        if tails:
            ratios = [t["ratio"] for t in tails]
            print(f"  ratio over {len(ratios)} rows: min {min(ratios):.4f}, median {statistics.median(ratios):.4f}, "
                  f"max {max(ratios):.4f}")
    if args.json:
        try:
            args.json.write_text(json.dumps(out, indent=1))
        except OSError as exc:
            raise TwinInputError(f"--json {args.json}: cannot write ({exc.strerror or exc})") from None


if __name__ == "__main__":
    run_script(main)
