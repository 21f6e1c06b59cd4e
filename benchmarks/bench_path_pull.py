"""Which silicon rows pull the bench client's per-request time up (issue 33, round 14).

Reads a per-case JSON of ``benchmarks/fidelity_real.py --defaults-only --json`` (the embedded defaults, every
silicon row there with a published client: all measured by vLLM's bench client; no simulation here) and, per group
of rows (GPU, family, format, release, load, prompt length, TP), prints the rows' mean-TTFT gap (measured - twin,
ms; the twin already charges each request the embedded path, 4.8 ms + 3.2 ms jitter mean) and the **shift**: the one
per-request constant (ms) that, added to every row of the group, minimises the summed squared log ratio of mean TTFT
(the fold fits' loss on a run; the other terms held at the embedded defaults). A fold fits the bench path on its
training rows, so the shift over a fold's training rows is what those rows ask of the path with nothing else free.

    python benchmarks/fidelity_real.py --defaults-only --silicon-every 3 --eval-sim-s 60 --json D.json
    python benchmarks/bench_path_pull.py D.json [--max-conc 8]
"""

from __future__ import annotations

import argparse
import collections
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import positive_int  # noqa: E402
from benchmarks.fold_report import defaults_cases  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402

SHIFT_LOW_MS, SHIFT_HIGH_MS, SHIFT_STEP_MS = -8.0, 60.0, 0.1   # the embedded path is 8.0 ms: no row goes below 0


def gap_ms(case: dict) -> float:
    return case["measured"]["mean_ttft_ms"] - case["predicted"]["mean_ttft_ms"]


def log_loss(cases: list[dict], shift_ms: float) -> float:
    """Summed squared log ratio of mean TTFT with ``shift_ms`` added to every prediction."""
    return sum(math.log(max(c["predicted"]["mean_ttft_ms"] + shift_ms, 1e-3) / c["measured"]["mean_ttft_ms"]) ** 2
               for c in cases)


def best_shift_ms(cases: list[dict]) -> float:
    """The per-request constant (ms, on a 0.1 ms grid in [-8, 60]) minimising ``log_loss``; a value at an end of
    the grid means the rows want more than the grid allows."""
    if not cases:
        raise ValueError("best_shift_ms: no rows")
    steps = int(round((SHIFT_HIGH_MS - SHIFT_LOW_MS) / SHIFT_STEP_MS))
    grid = [SHIFT_LOW_MS + i * SHIFT_STEP_MS for i in range(steps + 1)]
    return min(grid, key=lambda s: log_loss(cases, s))


def bench_rows(data: dict) -> list[dict]:
    """The silicon rows a published bench client measured, with both the measured and the twin's mean TTFT."""
    out = []
    for c in data.get("cases", []):
        if c.get("source") != "silicon" or not c.get("client"):
            continue
        m, p = c.get("measured", {}).get("mean_ttft_ms"), c.get("predicted", {}).get("mean_ttft_ms")
        if isinstance(m, (int, float)) and isinstance(p, (int, float)) and m > 0 and p > 0 \
                and "mean_ttft_ms" in c.get("errors", {}):
            out.append(c)
    return out


def load_band(conc: int) -> str:
    return "C<=8" if conc <= 8 else ("C16-64" if conc <= 64 else "C>64")


KEYS = {
    "gpu": lambda c: (c["gpu"],),
    "gpu, family": lambda c: (c["gpu"], c["family"]),
    "gpu, family, format, release": lambda c: (c["gpu"], c["family"], c.get("moe_quant") or c.get("gemm_quant"),
                                               c.get("version")),
    "gpu, load": lambda c: (c["gpu"], load_band(c["conc"])),
    "gpu, prompt tokens (light load)": lambda c: (c["gpu"], c["isl"]),
    "gpu, TP (light load)": lambda c: (c["gpu"], c["tp"]),
}


def table(rows: list[dict], key) -> list[tuple]:
    """(group, n, median gap ms, median signed TTFT error %, shift ms, median measured TTFT ms) per group."""
    groups = collections.defaultdict(list)
    for c in rows:
        groups[key(c)].append(c)
    return [(k, len(g), statistics.median(gap_ms(c) for c in g),
             100 * statistics.median(c["errors"]["mean_ttft_ms"] for c in g), best_shift_ms(g),
             statistics.median(c["measured"]["mean_ttft_ms"] for c in g))
            for k, g in sorted(groups.items(), key=lambda kv: str(kv[0]))]


def fold_shifts(rows: list[dict]) -> list[tuple[str, str, int, float]]:
    """(fold kind, held-out group, training rows, shift ms) for the GPU and family folds' training rows."""
    out = []
    for kind, field in (("GPU", "gpu"), ("family", "family")):
        for g in sorted({c[field] for c in rows}):
            train = [c for c in rows if c[field] != g]
            if train:
                out.append((kind, g, len(train), best_shift_ms(train)))
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("defaults_json")
    ap.add_argument("--max-conc", type=positive_int, default=8, help="light load: CONC <= this (default 8)")
    args = ap.parse_args(argv)
    path = Path(args.defaults_json)
    rows = bench_rows({"cases": defaults_cases(path, need=("source", "measured", "predicted"),
                                               row_need=("gpu", "family", "conc", "isl", "tp"))})
    if not rows:
        raise TwinInputError(f"{path}: no silicon rows with a published client and mean TTFT")
    light = [c for c in rows if c["conc"] <= args.max_conc]
    print(f"{len(rows)} bench-client rows ({len(light)} at CONC <= {args.max_conc}); gap = measured - twin mean TTFT")
    for label, key in KEYS.items():
        sub = light if "light" in label else rows
        print(f"\n{label}: n, median gap ms, median signed TTFT %, shift ms, median measured TTFT ms")
        for k, n, g, e, s, m in table(sub, key):
            print(f"  {', '.join(str(x) for x in k):52s} {n:4d} {g:+8.1f} {e:+7.1f} {s:+6.1f} {m:9.1f}")
    print("\nshift over each fold's training rows (other terms at the embedded defaults):")
    for kind, g, n, s in fold_shifts(rows):
        print(f"  {kind:6s} {g:10s} held out: {n:4d} training rows, shift {s:+.1f} ms")


if __name__ == "__main__":
    run_script(main)
