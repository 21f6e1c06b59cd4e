"""The MoE request time that does not grow with the prompt, by expert path and GPU (issue 33, round 11; docs/
fidelity.md "Round 11: the bench client and MoE prompt time on B200").

Reads the light-load rows (CONC <= ``--max-conc``) of a per-case JSON (``request_path_readings.py --save`` or
``fidelity_real.py --defaults-only --json``) and prints, per (GPU, family, format, release, TP), the gap = measured -
twin mean TTFT at 1k and at 8k prompts: a time that is there at both lengths alike is neither per prompt token nor
the eager host floor (which an 8k step's GPU time hides). Then the block-FP8 path's reading per GPU generation: the
median gap over its rows at TP >= 4 on vLLM's default FP8 MoE backend (the March 2026 B200 scripts forced another
one: ``VLLM_USE_FLASHINFER_MOE_FP8=0 VLLM_MOE_USE_DEEP_GEMM=0``), per request, and how each generation's value
predicts the other's through the GPUs' dense FP8 tensor rates (``twin.fitting.expert_request_prior``).

    python benchmarks/request_path_readings.py --max-conc 8 --save L.json      # ~1-2 min, the embedded defaults
    python benchmarks/expert_request_reading.py L.json
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
from twin.fitting.expert_request_prior import rate_ratio  # noqa: E402

GPU_OF = {"hopper": "H100-SXM", "blackwell": "B200"}
GENERATION_OF = {"H100": "hopper", "B200": "blackwell"}


def default_backend(row: dict) -> bool:
    """Whether a MiniMax FP8 row ran vLLM's default FP8 MoE backend (not the March 2026 B200 scripts' override)."""
    return not (row["gpu"] == "B200" and row["month"] == "2026-03")


def fp8_readings(rows: list[dict], min_tp: int = 4) -> dict[str, tuple[float, int]]:
    """Generation -> (median gap in ms, rows) of the MiniMax-M2.5 FP8 rows at TP >= ``min_tp`` on the default
    backend, 1k and 8k prompts together."""
    out: dict[str, list[float]] = collections.defaultdict(list)
    for r in rows:
        if r["family"] == "minimax" and r["format"] == "fp8" and r["tp"] >= min_tp and default_backend(r):
            out[GENERATION_OF[r["gpu"]]].append(r["gap"])
    return {g: (float(np.median(v)), len(v)) for g, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases_json")
    ap.add_argument("--max-conc", type=positive_int, default=8)
    args = ap.parse_args()
    rows = rows_from(defaults_cases(Path(args.cases_json), **READ_NEED), args.max_conc)
    by = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in rows:
        if r["family"] in ("minimax", "kimi", "gpt-oss"):
            by[(r["gpu"], r["family"], r["format"], r["release"], r["tp"])][r["isl"]].append(r["gap"])
    print(f"{'GPU, family, format, release, TP':<44} | 1k gap (n)      | 8k gap (n)")
    for key, v in sorted(by.items()):
        cells = [f"{np.median(v[i]):+6.1f} ms ({len(v[i]):>2})" if v.get(i) else f"{'-':>14}" for i in (1024, 8192)]
        print(f"{str(key):<44} | {cells[0]} | {cells[1]}")
    read = fp8_readings(rows)
    print("\nblock-FP8 path (MiniMax-M2.5 FP8, TP >= 4, default backend), per request:")
    for gen, (gap, n) in sorted(read.items()):
        print(f"  {gen:<10} median gap {gap:+6.2f} ms over {n} rows")
    if len(read) == 2:
        (g1, (v1, _)), (g2, (v2, _)) = sorted(read.items())
        for a, va, b, vb in ((g1, v1, g2, v2), (g2, v2, g1, v1)):
            pred = va * rate_ratio(GPU_OF[a], GPU_OF[b])
            print(f"  {b} predicted from {a}: {pred:.2f} ms (read {vb:.2f}; {100 * (pred / vb - 1):+.1f} %)")


if __name__ == "__main__":
    run_script(main)
