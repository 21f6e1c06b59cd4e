"""Single re-simulations (no fit) of the MoE silicon rows, with dense Llama on B200 as the control, at the embedded
defaults and at candidate kernel-path values: signed median error of TTFT mean and TPOT per family, GPU, expert
format and concurrency band (issue 33, round 4).

Each variant is ``label:name=value,name=value`` (values in model units: seconds, fractions), on top of
``twin.fitting.joint.default_start``. ``nofusion`` as a name turns every row's all-reduce + RMSNorm fusion off
(the twin before the launch flags of round 4: every all-reduce at the unfused latency); otherwise each row runs
with the fusion its launch script set (``twin.fitting.silicon_scripts.row_server``) or its release's default. A fused
all-reduce is priced as the unfused one unless ``fused_allreduce_latency_s`` is given (``twin.cost.kernel_path``);
the tables of docs/fidelity.md "Round 4: MoE experts by kernel path" were made when it defaulted to NCCL's LL
latency at each row's TP (7.8 / 10.2 / 15.0 us at TP 2 / 4 / 8): pass e.g. ``fused_allreduce_latency_s=10.2e-6``.

    python benchmarks/moe_kernel_path_check.py --silicon-every 3 \\
        --variant base:nofusion=1 --variant fused:fused_allreduce_latency_s=10.2e-6 \\
        --variant fused+moe40:moe_layer_overhead_s@experts_fp8=40e-6
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import positive_int  # noqa: E402
from twin.fitting.fit import simulate_cases  # noqa: E402
from twin.fitting.joint import JOINT_NAMES, default_start, errors, family_of, gpu_of  # noqa: E402
from twin.fitting.silicon import silicon_cases  # noqa: E402
from twin.fitting.replay import deployment_for  # noqa: E402
from twin.fitting.scoped import routed_expert_format  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402

BANDS = (("C<=8", 0, 8), ("C9-15", 9, 15), ("C16-64", 16, 64), ("C65-127", 65, 127), ("C>=128", 128, 10**9))


def parse_variant(text: str) -> tuple[str, dict[str, float], bool]:
    """(label, parameters, fusion off) of ``label:name=value,...``."""
    label, _, body = text.partition(":")
    params, nofusion = {}, False
    for item in filter(None, body.split(",")):
        name, _, value = item.partition("=")
        if name == "nofusion":
            nofusion = value not in ("0", "false", "")
        else:
            params[name] = float(value)
    return label, params, nofusion


def without_fusion(case):
    run = dataclasses.replace(case.run, server=dict(case.run.server) | {"fuse_allreduce_rms": False})
    return dataclasses.replace(case, run=run)


def group_key(case) -> tuple[str, str, str, str]:
    dep = deployment_for(case.run, case.target)
    fmt = routed_expert_format(dep) or "dense"
    conc = case.run.max_concurrency or 0
    band = next(b for b, lo, hi in BANDS if lo <= conc <= hi)
    tp = case.target.tensor_parallel_size
    return family_of(case), gpu_of(case), f"{fmt} TP{'1' if tp == 1 else '>=2'}", band


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--silicon-every", type=positive_int, default=3)
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("--workers", type=positive_int, default=1)
    ap.add_argument("--families", default="gpt-oss,minimax,kimi,qwen3,llama")
    args = ap.parse_args()
    fams = set(args.families.split(","))
    runnable = silicon_cases()[0]
    known = sorted({family_of(c) for c in runnable})
    if not fams <= set(known):
        raise TwinInputError(f"--families: unknown {sorted(fams - set(known))[0]!r}; allowed: {', '.join(known)}")
    cases = [c for c in runnable[::args.silicon_every] if family_of(c) in fams
             and (family_of(c) != "llama" or gpu_of(c) == "B200")]
    keys = [group_key(c) for c in cases]
    variants = [parse_variant(v) for v in (args.variant or ["defaults:"])]
    base = default_start(JOINT_NAMES)
    errs: dict[str, list[dict[str, float]]] = {}
    for label, params, nofusion in variants:
        run_cases = [without_fusion(c) for c in cases] if nofusion else cases
        preds = simulate_cases(run_cases, base | params, workers=args.workers)
        errs[label] = [errors(c, r.metrics) for c, r in zip(run_cases, preds)]
    groups: dict[tuple, list[int]] = collections.defaultdict(list)
    for i, k in enumerate(keys):
        groups[k].append(i)

    def cell(idx: list[int], label: str) -> str:
        out = []
        for key in ("mean_ttft_ms", "mean_tpot_ms"):
            xs = [errs[label][i][key] for i in idx if key in errs[label][i]]
            out.append(f"{100 * statistics.median(xs):+6.1f}%" if xs else f"{'-':>7}")
        return " / ".join(out)

    labels = [v[0] for v in variants]
    print(f"silicon rows (every {args.silicon_every}th runnable row), signed median error TTFT mean / TPOT\n")
    print("| family | GPU | experts, TP | band | n | " + " | ".join(labels) + " |")
    print("|---|---|---|---|---|" + "---|" * len(labels))
    for k, idx in sorted(groups.items()):
        print(f"| {' | '.join(k)} | {len(idx)} | " + " | ".join(cell(idx, lb) for lb in labels) + " |")
    print()
    for fam in sorted({k[0] for k in keys}):
        idx = [i for i, k in enumerate(keys) if k[0] == fam]
        print(f"| {fam} all | | | | {len(idx)} | " + " | ".join(cell(idx, lb) for lb in labels) + " |")
    print("\nmedian |error| over these rows (TTFT mean, TPOT):")
    for lb in labels:
        parts = []
        for key in ("mean_ttft_ms", "mean_tpot_ms"):
            xs = [abs(e[key]) for e in errs[lb] if key in e]
            parts.append(f"{100 * statistics.median(xs):.1f}%")
        print(f"  {lb}: " + ", ".join(parts))


if __name__ == "__main__":
    run_script(main)
