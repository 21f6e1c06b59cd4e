"""Single re-simulations (no fit) of the B200 silicon rows at a few values of ``allreduce_latency_s@blackwell``,
everything else at the embedded defaults: signed median error of TTFT mean and TPOT per family and layout.

Question (docs/fidelity.md, 'Round 3: MoE expert shape'): gpt-oss-120b on B200 at TP >= 2 decodes ~0.9 ms per
step *slower* in the twin than measured, and the twin charges 2 x 36 all-reduces per step at the Hopper-fitted
24.7 us. Does a B200 NVLink small-message all-reduce latency taken from NCCL's own cost model move it the right
way without hurting the other families?

NCCL's latency model (NVIDIA/nccl, src/graph/tuning.cc, ``baseLat`` and ``hwLat``): a single-node ring all-reduce
with the LL protocol costs baseLat 6.6 us + 2 (n - 1) steps x 0.6 us per NVLink hop, i.e. 7.8 us at 2 GPUs,
10.2 us at 4 and 15.0 us at 8 (the tree with LL: 6.8 + 2 (n - 1) x 0.6, within 0.2 us). The twin has one value
for all TP sizes, so the three are tried separately.

    python benchmarks/allreduce_latency_check.py [--silicon-every 3] [--values-us 24.7,15.0,10.2,7.8] [--workers 2]
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import number_list, positive_int  # noqa: E402
from twin.fitting.fit import simulate_cases  # noqa: E402
from twin.fitting.joint import JOINT_NAMES, default_start, errors, family_of, gpu_of  # noqa: E402
from twin.fitting.silicon import silicon_cases  # noqa: E402
from twin.errors import run_script  # noqa: E402

NAME = "allreduce_latency_s@blackwell"


def scan(cases: list, values_us: list[float], *, workers: int = 1) -> dict[float, list[dict[str, float]]]:
    """Per value (us): each case's signed errors (``errors``) simulated at the embedded defaults with only
    ``allreduce_latency_s@blackwell`` set to it."""
    base = default_start(JOINT_NAMES + (NAME,))
    out: dict[float, list[dict[str, float]]] = {}
    for v in values_us:
        preds = simulate_cases(cases, base | {NAME: v * 1e-6}, workers=workers)
        out[v] = [errors(c, r.metrics) for c, r in zip(cases, preds)]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--silicon-every", type=positive_int, default=3)
    ap.add_argument("--silicon-max-requests", type=positive_int, default=None)
    ap.add_argument("--values-us", default="24.7,15.0,10.2,7.8")
    ap.add_argument("--workers", type=positive_int, default=1)
    args = ap.parse_args()
    values = number_list(args.values_us, "--values-us", low=0.0)
    cases = [c for c in silicon_cases(max_requests=args.silicon_max_requests)[0][::args.silicon_every]
             if gpu_of(c) == "B200"]
    errs = scan(cases, values, workers=args.workers)
    groups: dict[tuple[str, int], list[int]] = collections.defaultdict(list)
    for i, c in enumerate(cases):
        groups[(family_of(c), c.target.tensor_parallel_size)].append(i)
    head = " | ".join(f"{v:>5.1f} us TTFT / TPOT" for v in values)
    print(f"B200 silicon rows (every {args.silicon_every}th runnable row): signed median error per family and TP\n")
    print(f"{'family':<10} {'TP':>3} {'n':>4} | {head}")

    def cell(idx: list[int], v: float) -> str:
        out = []
        for key in ("mean_ttft_ms", "mean_tpot_ms"):
            xs = [errs[v][i][key] for i in idx if key in errs[v][i]]
            out.append(f"{100 * statistics.median(xs):+6.1f}%" if xs else f"{'-':>7}")
        return " / ".join(out) + "    "

    for (fam, tp), idx in sorted(groups.items()):
        print(f"{fam:<10} {tp:>3} {len(idx):>4} | " + " | ".join(cell(idx, v) for v in values))
    for label, keep in (("TP >= 2, all", lambda f, t: t >= 2), ("TP >= 2, not gpt-oss", lambda f, t: t >= 2
                                                                  and f != "gpt-oss")):
        idx = [i for (f, t), ii in groups.items() if keep(f, t) for i in ii]
        print(f"{label:<19} {len(idx):>4} | " + " | ".join(cell(idx, v) for v in values))
    print("\nmedian |error| (all B200 rows):")
    for v in values:
        parts = []
        for key in ("mean_ttft_ms", "mean_tpot_ms", "mean_e2el_ms", "request_throughput"):
            xs = [abs(e[key]) for e in errs[v] if key in e]
            parts.append(f"{key} {100 * statistics.median(xs):.1f}%")
        print(f"  {v:5.1f} us: " + ", ".join(parts))


if __name__ == "__main__":
    run_script(main)
