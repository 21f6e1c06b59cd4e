"""Where the embedded defaults' bias sits: signed median errors by slice of the silicon rows.

Reads the per-case records that ``python benchmarks/fidelity_real.py --defaults-only --json out.json`` writes
(``cases``: GPU, family, weight format, layout, ISL/OSL, concurrency, vLLM release, measured and predicted
metrics) and prints, per slice, the count and the median signed error (predicted / measured - 1; negative = the
twin is too fast) of mean TTFT and mean TPOT, plus the median TTFT gap in ms (measured - predicted), which tells
a fixed per-request offset from a proportional one.

    python benchmarks/bias_slices.py out.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fold_report import defaults_cases  # noqa: E402
from twin.errors import run_script  # noqa: E402

# the row attributes the slices compute with (each silicon record carries them)
ROW_KEYS = ("gpu", "family", "tp", "ep", "dp", "isl", "osl", "conc")


def _conc_band(c: int) -> str:
    return "C<=8" if c <= 8 else "C16-64" if c <= 64 else "C128-512" if c <= 512 else "C>512"


def _layout(rec: dict) -> str:
    return f"TP{rec['tp']}" + (f" EP{rec['ep']}" if rec["ep"] > 1 else "") + (f" DP{rec['dp']}" if rec["dp"] > 1
                                                                               else "")


SLICES: dict[str, Callable[[dict], str]] = {
    "GPU": lambda r: r["gpu"],
    "family": lambda r: r["family"],
    "weights (gemm/moe)": lambda r: f"{r.get('gemm_quant')}/{r.get('moe_quant')}",
    "layout": _layout,
    "TP": lambda r: f"TP{r['tp']}",
    "ISL/OSL": lambda r: f"{r['isl']}/{r['osl']}",
    "concurrency": lambda r: _conc_band(r["conc"]),
    "vLLM": lambda r: str(r.get("version")),
    "GPU x family": lambda r: f"{r['gpu']} {r['family']}",
    "GPU x ISL, C<=8": lambda r: f"{r['gpu']} ISL {r['isl']}" if r["conc"] <= 8 else "",
}


def _med(xs: list[float]) -> str:
    return f"{statistics.median(xs):+7.1%}" if xs else "      -"


def table(cases: list[dict], name: str, key: Callable[[dict], str]) -> list[str]:
    groups: dict[str, list[dict]] = {}
    for r in cases:
        g = key(r)
        if g:
            groups.setdefault(g, []).append(r)
    lines = [f"\n== by {name}", f"{'slice':<28} {'n':>4} | {'TTFT':>7} {'TPOT':>7} | TTFT gap ms (meas - twin)"]
    for g in sorted(groups, key=lambda g: (-len(groups[g]), g)):
        rs = groups[g]
        ttft = [r["errors"]["mean_ttft_ms"] for r in rs if "mean_ttft_ms" in r["errors"]]
        tpot = [r["errors"]["mean_tpot_ms"] for r in rs if "mean_tpot_ms" in r["errors"]]
        gap = [r["measured"]["mean_ttft_ms"] - r["predicted"]["mean_ttft_ms"] for r in rs
               if r["measured"].get("mean_ttft_ms") and r["predicted"].get("mean_ttft_ms") is not None]
        gap_s = f"{statistics.median(gap):8.0f}" if gap else "       -"
        lines.append(f"{g[:28]:<28} {len(rs):4d} | {_med(ttft)} {_med(tpot)} | {gap_s}")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", type=Path)
    args = ap.parse_args()
    records = defaults_cases(args.json, need=("source", "errors", "measured", "predicted"), row_need=ROW_KEYS)
    cases = [r for r in records if r["source"] == "silicon"]
    print(f"{len(cases)} silicon rows")
    for name, key in SLICES.items():
        print("\n".join(table(cases, name, key)))


if __name__ == "__main__":
    run_script(main)
