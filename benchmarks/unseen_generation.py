"""A GPU generation no training row comes from (issue 33, round 8; docs/fidelity.md "Round 8: a generation no
training row comes from"). Two checks, no fit:

    python benchmarks/unseen_generation.py plans [--ground-truth DIR]
        every GPU / source / family fold's plan on every ground-truth row (the values its resets take, and the
        priors its refits are pulled towards), and which of them a rule change moved: run on two commits and diff
    python benchmarks/unseen_generation.py ip-floor [--ground-truth DIR] [--host-ms 0.92]
        the 21 inference-perf H100 runs at the embedded defaults and with ``--host-ms`` per decoder layer on every
        eager step (``eager_layer_host_s``): does the silicon rows' host time hold on those servers?
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmarks.cli_checks import finite_float, refuse_given  # noqa: E402
from twin.errors import run_script  # noqa: E402

GROUPS = (("GPU", ("H100-SXM", "B200")), ("source", ("silicon", "inference-perf")),
          ("family", ("llama", "minimax", "kimi", "gpt-oss", "qwen3", "mixtral")))


def plans(ground_truth: Path) -> None:
    from fidelity_real import FOLD_TERMS

    from twin.fitting import provenance as pv
    from twin.fitting.identify import held_at_prior
    from twin.fitting.joint import FOLDS, all_cases, with_deployments
    from twin.fitting.layer_fixed_prior import kept_link_prior, kept_readings
    from twin.fitting.moe_layer_transfer import fold_moe_layer_transfer
    from twin.fitting.moe_token_prior import fold_moe_token_prior
    from twin.fitting.path_token_prior import path_token_prior
    from twin.fitting.expert_request_prior import expert_request_prior
    cases = all_cases(ground_truth)
    evidence = with_deployments(cases)
    for kind, groups in GROUPS:
        for group in groups:
            train = [c for c in cases if FOLDS[kind](c) != group]
            held = held_at_prior(train, FOLD_TERMS)
            plan = pv.fold_plan(group, FOLDS[kind], evidence, tuple(n for n in FOLD_TERMS if n not in held))
            kept = [e for e in evidence if FOLDS[kind](e[0]) != group]
            plan.fixed.update(kept_link_prior(plan, kept))      # round 11, as joint.run_fold
            print(f"{kind} {group}: reset " + ", ".join(f"{k}={v:.6g}" for k, v in sorted(plan.fixed.items()))
                  + "; refit towards " + ", ".join(f"{k}={v:.6g}" for k, v in sorted(plan.prior.items()))
                  + "".join(f"; MoE per-token prior {k}={v:.6g}" for k, v in sorted(     # round 9, moe_token_prior
                      fold_moe_token_prior(FOLD_TERMS, held, plan).items()))
                  + "".join(f"; Hopper MoE path per-token prior {k}={v:.6g}" for k, v in    # round 10
                            path_token_prior(plan, group, FOLDS[kind], evidence).items())
                  + "".join(f"; fused all-reduce from the kept TP sets {k}: {r[0] * 1e6:.4g} us per layer over "
                            f"{r[1]} sets, {r[2]} layers, link {r[3] * 1e6:.3g} us" for k, r in     # round 11
                            kept_readings(plan, kept, [e for e in evidence if FOLDS[kind](e[0]) == group]).items())
                  + "".join(f"; expert path request time prior {k}={v:.6g}" for k, v in    # round 11
                            expert_request_prior(plan).items())
                  + "".join(f"; MoE layer time carried {k}={v:.6g}" for k, v in    # round 17
                            fold_moe_layer_transfer(FOLD_TERMS, held, plan).items()))


def ip_floor(ground_truth: Path, host_ms: float) -> None:
    from twin.fitting.fit import simulate_cases
    from twin.fitting.joint import all_cases, default_start, errors
    cases = all_cases(ground_truth, sources=("inference-perf",))
    base = default_start(())
    floor = base | {"eager_layer_host_s": host_ms * 1e-3}
    for label, params in (("defaults", base), (f"+{host_ms} ms/layer", floor)):
        errs = [errors(c, r.metrics) for c, r in zip(cases, simulate_cases(cases, params, max_sim_s=60.0))]
        for key in ("mean_ttft_ms", "median_ttft_ms", "mean_tpot_ms"):
            xs = [e[key] for e in errs if key in e]
            print(f"{label:>16} {key:15s} median |error| {100 * statistics.median(map(abs, xs)):5.1f}% "
                  f"signed {100 * statistics.median(xs):+6.1f}%")
        for c, e in zip(cases, errs):
            print(f"{label:>16}   {c.run.name:60s} TTFT {100 * e.get('mean_ttft_ms', float('nan')):+7.1f}%")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("plans", "ip-floor"))
    ap.add_argument("--ground-truth", type=Path,
                    default=Path(__file__).resolve().parents[2] / "shared" / "ground-truth")
    ap.add_argument("--host-ms", type=finite_float, default=None, help="ip-floor: default 0.92")
    a = ap.parse_args(argv)
    if a.what == "plans":
        refuse_given(a, ("--host-ms",), "to ip-floor")
    a.host_ms = 0.92 if a.host_ms is None else a.host_ms
    plans(a.ground_truth) if a.what == "plans" else ip_floor(a.ground_truth, a.host_ms)
    return 0


if __name__ == "__main__":
    run_script(main)
