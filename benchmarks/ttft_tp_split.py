"""Is the light-load TTFT the twin misses a time per request, or GPU work? Split it by tensor parallelism.

Reads the per-row CSV of ``benchmarks/ttft_light_load.py`` (the silicon rows at CONC <= 16, whole runs, at the
embedded defaults) and fits, per (GPU, family, release, month, format, ISL) group at CONC <= ``--max-conc``,

    gap_ms = a + c / TP        (gap = measured - twin mean TTFT)

A cost of the request path (client, HTTP, tokenisation, hand-off to the engine core) or a host floor does not
depend on TP: it shows in ``a``. GPU work that tensor parallelism splits shows in ``c``; if it is per prompt
token, ``c`` grows with ISL. Groups with one TP size print the median gap only.

    python benchmarks/ttft_light_load.py --max-conc 16 --quiet --csv light16.csv     # ~8 min
    python benchmarks/ttft_tp_split.py light16.csv                                    # seconds
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import positive_int  # noqa: E402
from benchmarks.light_table import read_table  # noqa: E402
from twin.errors import run_script  # noqa: E402


def groups(path: str, max_conc: int) -> dict[tuple, list[dict]]:
    """The table's defaults rows at CONC <= ``max_conc`` (``light_table.read_table``: a bad table is one line)."""
    out: dict[tuple, list[dict]] = collections.defaultdict(list)
    for r in read_table(Path(path), floats=("gap_ms",), counts=("conc", "isl", "tp"),
                        text=("set", "gpu", "family", "version", "month", "precision")):
        if r["set"] == "defaults" and int(r["conc"]) <= max_conc:
            key = (r["gpu"], r["family"], r["version"][:8] or "?", r["month"], r["precision"], int(r["isl"]))
            out[key].append(r)
    return out


def split(rows: list[dict]) -> tuple[float, float] | None:
    """Least-squares (a, c) of gap = a + c / TP, or None with fewer than two TP sizes."""
    tp = np.array([int(r["tp"]) for r in rows], dtype=float)
    if len(set(tp)) < 2:
        return None
    gap = np.array([float(r["gap_ms"]) for r in rows])
    (a, c), *_ = np.linalg.lstsq(np.vstack([np.ones_like(tp), 1.0 / tp]).T, gap, rcond=None)
    return float(a), float(c)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--max-conc", type=positive_int, default=8)
    args = ap.parse_args()
    print(f"{'group (GPU, family, release, month, format, ISL)':<62} {'n':>3} | {'a ms':>7} {'c ms':>7} | "
          "median gap (ms) by TP")
    for key, rows in sorted(groups(args.csv, args.max_conc).items()):
        ac = split(rows)
        by_tp = collections.defaultdict(list)
        for r in rows:
            by_tp[int(r["tp"])].append(float(r["gap_ms"]))
        cols = f"{ac[0]:7.1f} {ac[1]:7.1f}" if ac else f"{'-':>7} {'-':>7}"
        print(f"{str(key):<62} {len(rows):>3} | {cols} | "
              + " ".join(f"TP{t} {np.median(v):+.0f}" for t, v in sorted(by_tp.items())))


if __name__ == "__main__":
    run_script(main)
