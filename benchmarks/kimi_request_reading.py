"""Kimi-K2.5's per-request time: what it is a function of (issue 33, round 12; docs/fidelity.md "Round 12: Kimi-K2.5's
per-request time and the bench client").

Reads the light-load rows (CONC <= ``--max-conc``) of a per-case JSON (``request_path_readings.py --save`` or
``fidelity_real.py --defaults-only --json``) and prints, per Kimi-K2.5 (checkpoint format, vLLM release, month
measured, TP, ISL, graphed / eager prompt step), the gap = measured - twin mean TTFT; then the gaps of the other
families' NVFP4 / MXFP4 paths on Blackwell for comparison, and the reading of ``twin.cost.mla_request`` (the median
over the Kimi NVFP4 rows). With ``--loaded D.json`` (a ``fidelity_real.py --defaults-only --json`` file) it also
prints what charging that time to every prompt STEP instead would add to the loaded NVFP4 rows' TPOT: a closed loop
of C sequences with O output tokens each admits about C / O prompts per decode step, so the decode of every sequence
would slow by about gap x min(1, C / O) per token, which the rows' TPOT error at the defaults can be set against.

    python benchmarks/request_path_readings.py --max-conc 8 --save L.json      # ~2-3 min, the embedded defaults
    python benchmarks/kimi_request_reading.py L.json [--loaded D.json]
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmarks.cli_checks import positive_int  # noqa: E402
from benchmarks.fold_report import defaults_cases  # noqa: E402
from request_path_readings import READ_NEED, rows_from  # noqa: E402
from twin.errors import run_script  # noqa: E402

OUTPUT_FRACTION = 0.9     # the bench client's lengths are uniform on [0.8 L, L]


def groups(rows: list[dict], family: str) -> dict[tuple, list[dict]]:
    """``family``'s rows by (format, release, month, TP, ISL, G / E)."""
    out: dict[tuple, list[dict]] = collections.defaultdict(list)
    for r in rows:
        if r["family"] == family:
            out[(r["format"], r["release"], r["month"], r["tp"], r["isl"], "G" if r["graphed"] else "E")].append(r)
    return dict(out)


def reading_ms(rows: list[dict], fmt: str = "nvfp4") -> tuple[float, int]:
    """(median gap in ms, rows) over the Kimi-K2.5 rows of checkpoint format ``fmt``."""
    v = [r["gap"] for r in rows if r["family"] == "kimi" and r["format"] == fmt]
    return (float(np.median(v)), len(v)) if v else (float("nan"), 0)


def per_step_tpot_ms(gap_ms: float, conc: int, osl: int) -> float:
    """The decode time per output token that ``gap_ms`` charged to every prompt step would add in a closed loop
    of ``conc`` sequences with ``osl`` nominal output tokens (about conc / O prompts per decode step, at most one
    prompt step per step)."""
    return gap_ms * min(1.0, conc / (OUTPUT_FRACTION * osl))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases_json")
    ap.add_argument("--max-conc", type=positive_int, default=8)
    ap.add_argument("--loaded", default=None, help="a fidelity_real.py --defaults-only --json file (loaded rows)")
    args = ap.parse_args()
    rows = rows_from(defaults_cases(Path(args.cases_json), **READ_NEED), args.max_conc)
    loaded = None if args.loaded is None else defaults_cases(Path(args.loaded), need=("measured", "predicted"),
                                                             row_need=("tp", "isl", "osl", "conc"),
                                                             metrics=("mean_tpot_ms",))
    print("Kimi-K2.5, gap = measured - twin mean TTFT (ms) at CONC <= %d: (format, release, month, TP, ISL, G/E)"
          % args.max_conc)
    for key, v in sorted(groups(rows, "kimi").items()):
        cells = " ".join(f"c{r['conc']} {r['gap']:+5.1f}" for r in sorted(v, key=lambda r: r["conc"]))
        print(f"  {str(key):<52} n {len(v):>2}  median {np.median([r['gap'] for r in v]):+6.1f} | {cells}")
    print("\nthe other families' 4-bit expert paths on B200, median gap by (format, release, TP, ISL, G/E):")
    for fam in ("minimax", "gpt-oss"):
        for (fmt, rel, _m, tp, isl, ge), v in sorted(groups(rows, fam).items()):
            if fmt == "nvfp4" and tp >= 4 and v[0]["gpu"] == "B200":
                print(f"  {fam:<8} {fmt:<6} {rel:<8} TP{tp} {isl:>5} {ge}  n {len(v):>2}  median "
                      f"{np.median([r['gap'] for r in v]):+6.1f}")
    for fmt in ("nvfp4", "int4_wo"):
        gap, n = reading_ms(rows, fmt)
        print(f"\nKimi-K2.5 {fmt}: median gap {gap:+.1f} ms per request over {n} rows")
    by_tp = collections.defaultdict(list)
    for r in rows:
        if r["family"] == "kimi" and r["format"] == "nvfp4":
            by_tp[(r["tp"], r["isl"])].append(r["gap"])
    print("  NVFP4 by (TP, ISL): " + ", ".join(f"TP{t} {i}: {np.median(v):+.1f} ({len(v)})"
                                             for (t, i), v in sorted(by_tp.items())))
    if loaded is not None:
        gap, _ = reading_ms(rows)
        print(f"\nloaded Kimi NVFP4 rows (CONC >= 16): TPOT error at the defaults, and what {gap:.1f} ms per prompt "
              "step would add")
        for c in sorted((c for c in loaded if c.get("source") != "inference-perf" and c.get("family") == "kimi"
                         and c.get("gemm_quant") == "nvfp4" and c["conc"] >= 16), key=lambda c: (c["tp"], c["isl"], c["osl"], c["conc"])):
            m, p = c["measured"]["mean_tpot_ms"], c["predicted"]["mean_tpot_ms"]
            add = per_step_tpot_ms(gap, c["conc"], c["osl"])
            print(f"  TP{c['tp']} {c['isl']}/{c['osl']} C{c['conc']:<4} TPOT {m:6.2f} ms, "
                  f"twin {100 * (p / m - 1):+5.1f} % -> {100 * ((p + add) / m - 1):+5.1f} % per step")


if __name__ == "__main__":
    run_script(main)
