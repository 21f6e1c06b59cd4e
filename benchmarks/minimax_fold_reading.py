"""MiniMax-M2.5's TTFT held out (issue 33, round 15; docs/fidelity.md "Round 15: MiniMax-M2.5's prompt step held
out"): which held-out MiniMax cases miss, by expert format, GPU, layout and load, beside their TPOT; and how the
light-load 1k-prompt gap of the B200 block-FP8 rows depends on the layout (TP, EP, DP), the shape a stated prior of
the FP8 path's missing time would have to reproduce.

    # every held-out MiniMax case of a fidelity_real report (any fold kind): signed TTFT and TPOT, the row's
    # release, format, layout, ISL / OSL and CONC, and the medians per (GPU, format, layout) group; with a second
    # report, each case's move (before -> after)
    python benchmarks/minimax_fold_reading.py split A.json [B.json]
    # the B200 v0.19.0 FP8 1k/1k rows at CONC <= 16 (every layout): measured - twin mean TTFT (ms) per layout and
    # CONC with the FP8 path's per-request time (expert_path_request_s@blackwell+experts_fp8) at 0 (what a fold
    # holding MiniMax out has), at its embedded TP-flat value, and as GPU work split over the layout's GPUs (the
    # embedded value was read at TP 4: value x 4 / GPUs)                          ~1 min
    python benchmarks/minimax_fold_reading.py layouts

Errors: predicted / measured - 1 (negative: the twin is too fast). A case "tracks its decode" where its TTFT and TPOT
errors share a sign and |TPOT| >= 5 %: such a TTFT is mostly queueing behind decode steps the twin prices off
(the NVFP4 decode on B200 is helper 33d's), not the prompt step.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fold_report import FoldReport, read_json  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402

TTFT, TPOT = "mean_ttft_ms", "mean_tpot_ms"
DECODE_TRACK_TPOT = 0.05            # |TPOT error| from which a same-signed TTFT error is read as decode queueing
FP8_REQUEST_KEY = "expert_path_request_s@blackwell+experts_fp8"
READ_AT_GPUS = 4                    # the embedded 11.35 ms is the median of the TP 4 rows at CONC <= 8 (round 11)


def held_out_errors(report: dict, family: str = "minimax",
                    source: object = "the report") -> dict[str, tuple[str, str, dict[str, float]]]:
    """{case name: (fold kind, held-out group, errors)} for every held-out case of ``report`` (a fidelity_real
    ``--json`` file; ``source`` names it) whose name names ``family``; a report without folds is a one-line error."""
    rep = FoldReport(report, source)
    out: dict[str, tuple[str, str, dict[str, float]]] = {}
    for kind in rep.kinds():
        for fold in rep.folds(kind):
            for name, errs in rep.errors(fold).items():
                if family in name.lower().replace("_", "").replace("-", ""):
                    out[f"{kind}:{name}"] = (kind, fold["held_out"], errs)
    return out


def tracks_decode(ttft: float | None, tpot: float | None, threshold: float = DECODE_TRACK_TPOT) -> bool:
    """True where the TTFT and TPOT errors share a sign and |TPOT| >= ``threshold``."""
    if ttft is None or tpot is None:
        return False
    return abs(tpot) >= threshold and (ttft > 0) == (tpot > 0)


def layout_gpus(tp: int, attention_dp: int) -> int:
    """GPUs of one server: TP x attention DP (expert parallelism spans the same GPUs)."""
    if tp < 1 or attention_dp < 1:
        raise TwinInputError(f"a layout needs TP >= 1 and DP >= 1, got TP {tp}, DP {attention_dp}")
    return tp * attention_dp


def split_request_s(value_s: float, gpus: int, read_at_gpus: int = READ_AT_GPUS) -> float:
    """A per-request time read on a ``read_at_gpus``-GPU layout, as GPU work split over ``gpus`` GPUs (s)."""
    if value_s < 0 or gpus < 1 or read_at_gpus < 1:
        raise TwinInputError(f"need a time >= 0 and GPU counts >= 1, got {value_s} s, {gpus}, {read_at_gpus}")
    return value_s * read_at_gpus / gpus


def group_medians(records: list[dict], key) -> dict[tuple, dict[str, float]]:
    """Median signed TTFT / TPOT per ``key(record)`` and the count (records: dicts with TTFT and TPOT errors)."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault(key(r), []).append(r)
    out = {}
    for k, rs in groups.items():
        t = [r[TTFT] for r in rs if r.get(TTFT) is not None]
        d = [r[TPOT] for r in rs if r.get(TPOT) is not None]
        out[k] = {"n": len(rs), TTFT: statistics.median(t) if t else float("nan"),
                  TPOT: statistics.median(d) if d else float("nan")}
    return out


def _rows_by_name() -> dict:
    from twin.fitting.silicon import silicon_cases
    return {c.run.name.split(" [")[0]: c.row for c in silicon_cases(max_requests=None)[0]}


def _layout(row) -> str:
    return f"TP{row.tp}" + (f" EP{row.moe_ep}" if row.moe_ep > 1 else "") + (
        f" DP{row.attention_dp}" if row.attention_dp > 1 else "")


def split(paths: list[str]) -> None:
    reports = [held_out_errors(read_json(Path(p)), source=p) for p in paths]
    rows = _rows_by_name()
    records = []
    for key, (kind, group, errs) in sorted(reports[0].items(), key=lambda kv: kv[1][2].get(TTFT) or 0.0):
        row = rows.get(key.split(":", 1)[1])
        if row is None:
            continue
        rec = {"kind": kind, "group": group, "gpu": row.system.split("_")[0].upper(), "release": row.vllm_version[:7],
               "format": (row.precision or "").lower(), "layout": _layout(row), "isl": row.isl, "osl": row.osl,
               "conc": row.concurrency, TTFT: errs.get(TTFT), TPOT: errs.get(TPOT)}
        after = [r.get(key, (None, None, {}))[2] for r in reports[1:]]
        move = "".join(f" -> {100 * a[TTFT]:+6.1f}" for a in after if a.get(TTFT) is not None)
        tag = "decode" if tracks_decode(rec[TTFT], rec[TPOT]) else ""
        print(f"{kind:>6} {group:<8} {rec['gpu']:<5} {rec['release']:<8} {rec['format']:<4} {rec['layout']:<12} "
              f"{rec['isl']:>5}/{rec['osl']:<5} C{rec['conc']:<4} TTFT {100 * rec[TTFT]:+6.1f}{move}  "
              f"TPOT {100 * rec[TPOT]:+6.1f}  {tag}")
        records.append(rec)
    print("\nmedian signed TTFT / TPOT per (fold kind, GPU, format, TP band):")
    meds = group_medians(records, lambda r: (r["kind"], r["gpu"], r["format"], "TP<=2" if r["layout"].startswith(
        ("TP1", "TP2")) else "TP>=4"))
    for k in sorted(meds):
        m = meds[k]
        print(f"  {' '.join(map(str, k)):<28} n {m['n']:>2}  TTFT {100 * m[TTFT]:+6.1f}  TPOT {100 * m[TPOT]:+6.1f}")


def layouts() -> None:
    from twin.fitting.fit import simulate_cases
    from twin.fitting.joint import default_start
    from twin.fitting.silicon import model_family, silicon_cases

    cases = [c for c in silicon_cases()[0] if model_family(c.row.model_path) == "minimax"
             and c.row.system == "b200_sxm" and c.row.vllm_version == "0.19.0" and c.row.isl == 1024
             and c.row.osl == 1024 and c.row.concurrency <= 16 and (c.row.precision or "").lower() == "fp8"]
    start = default_start()
    embedded = start.get(FP8_REQUEST_KEY)
    if embedded is None:
        from twin.cost.generation_experts import GENERATION_EXPERT_TERMS
        embedded = GENERATION_EXPERT_TERMS[("blackwell", "fp8")]["expert_path_request_s"]
    by_gpus: dict[int, list[int]] = {}
    for i, c in enumerate(cases):
        by_gpus.setdefault(layout_gpus(c.row.tp, c.row.attention_dp), []).append(i)
    variants = {"zero": lambda g: 0.0, "flat": lambda g: embedded, "split": lambda g: split_request_s(embedded, g)}
    pred: dict[str, list[float]] = {v: [0.0] * len(cases) for v in variants}
    for v, value in variants.items():
        for g, idx in by_gpus.items():
            out = simulate_cases([cases[i] for i in idx], start | {FP8_REQUEST_KEY: value(g)}, max_sim_s=60.0)
            for i, r in zip(idx, out):
                pred[v][i] = r.metrics[TTFT]
    meas = [c.run.metrics[TTFT] for c in cases]
    cells: dict[tuple, list[int]] = {}
    for i, c in enumerate(cases):
        cells.setdefault((layout_gpus(c.row.tp, c.row.attention_dp), _layout(c.row), c.row.concurrency), []).append(i)
    print(f"B200 v0.19.0 FP8 1k/1k, CONC <= 16; measured - twin mean TTFT (ms); the FP8 path's per-request time at 0 / "
          f"{1e3 * embedded:.2f} ms (embedded, TP-flat) / x {READ_AT_GPUS} / GPUs")
    print(f"{'GPUs layout        C':<24} {'n':>2} | {'meas':>6} | {'zero':>6} {'flat':>6} {'split':>6}")
    for k in sorted(cells):
        idx = cells[k]
        m = statistics.median(meas[i] for i in idx)
        gaps = [m - statistics.median(pred[v][i] for i in idx) for v in variants]
        print(f"{k[0]:<4} {k[1]:<13} C{k[2]:<4} {len(idx):>2} | {m:6.1f} | " + " ".join(f"{g:+6.1f}" for g in gaps))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("split")
    sp.add_argument("reports", nargs="+", help="fidelity_real --json reports: the first is listed, others as moves")
    sub.add_parser("layouts")
    args = ap.parse_args()
    split(args.reports) if args.cmd == "split" else layouts()


if __name__ == "__main__":
    run_script(main)
