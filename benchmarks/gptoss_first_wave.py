"""gpt-oss-120b's loaded B200 TTFT: the first wave against the rest (issue 33, round 13; docs/fidelity.md "Round 13:
gpt-oss's prompt time held out"). A silicon row's client starts CONC requests at once (CONC x ISL prompt tokens in
the first steps, eager above the CUDA-graph size) and then one whenever one ends, and the row reports only the mean
TTFT over all 10 x CONC requests. Simulated at the embedded defaults, the twin's TTFT is split into the first wave
(dispatch index < CONC) and the rest; the rest's measured mean is then what the row's mean implies if the twin's
first wave were right: ``(mean x n - first-wave mean x n_first) / n_rest``.

    python benchmarks/gptoss_first_wave.py [--rows 1024x8192x16x2,1024x1024x64x4]   # ISL x OSL x CONC x TP, v0.15.1
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.fitting.fit import simulate_cases  # noqa: E402
from twin.fitting.silicon import gptoss_b200_v0151, silicon_cases  # noqa: E402

ROWS = "1024x8192x16x2,1024x8192x64x4,1024x1024x64x4,1024x1024x8x1,1024x1024x4x4"


def implied_rest_ms(measured_mean_ms: float, n: int, first_mean_ms: float, n_first: int) -> float:
    """The mean TTFT of the requests after the first wave that a run's measured mean implies, given the first
    wave's."""
    return (measured_mean_ms * n - first_mean_ms * n_first) / (n - n_first)


def parse_rows(text: str) -> list[tuple[int, ...]]:
    """``--rows`` (comma-separated ISLxOSLxCONCxTP) -> [(isl, osl, conc, tp)]; anything else is one line."""
    out = []
    for item in text.split(","):
        try:
            key = tuple(int(x) for x in item.strip().split("x"))
        except ValueError:
            key = ()
        if len(key) != 4 or min(key) < 1:
            raise TwinInputError(f"--rows {item!r}: expected ISLxOSLxCONCxTP, whole numbers >= 1 (e.g. 1024x1024x4x1)")
        out.append(key)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--rows", default=ROWS)
    args = ap.parse_args()
    want = parse_rows(args.rows)
    picked = {}
    for c in silicon_cases(args.ground_truth)[0]:
        key = (c.row.isl, c.row.osl, c.row.concurrency, c.row.tp)
        if gptoss_b200_v0151(c.row) and key in want:
            picked.setdefault(key, c)
    cases = [picked[k] for k in want if k in picked]
    print("| ISL / OSL, CONC, TP | measured mean ms | twin mean | twin first wave (n) | twin rest mean / median (n) "
          "| implied measured rest |\n|---|---|---|---|---|---|")
    for c, r in zip(cases, simulate_cases(cases, {}, max_sim_s=60.0)):
        t, first = r.ttft_s * 1e3, r.request_index < c.row.concurrency
        rest = t[~first]
        implied = implied_rest_ms(c.row.ttft_ms, len(t), t[first].mean(), int(first.sum()))
        print(f"| {c.row.isl} / {c.row.osl}, {c.row.concurrency}, {c.row.tp} | {c.row.ttft_ms:.1f} | {t.mean():.1f} | "
              f"{t[first].mean():.1f} ({first.sum()}) | {rest.mean():.1f} / {np.median(rest):.1f} ({len(rest)}) | "
              f"{implied:.1f} |", flush=True)


if __name__ == "__main__":
    run_script(main)
