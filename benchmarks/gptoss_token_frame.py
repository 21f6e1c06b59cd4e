"""The held-out Hopper MXFP4 path's carried per-token cost in the fold's frame, and its decode share (issue 33, round
18; docs/fidelity.md "Round 18: gpt-oss's TTFT held out by family, term by term"). A reading: no fold uses it.

For one fold of a ``fidelity_real.py --json`` report, its held-out gpt-oss cases on Hopper's MXFP4 path (their GPU:
``--gpu``) are simulated at the fold's values and at three variants of ``twin.fitting.path_token_prior``'s carried
per-token cost: in the fold's Blackwell frame (``benchmarks/token_frame_prior.py``) at the prior's decode share (0),
in that frame at share 1 (every token pays it), and the share alone at 1. No training row of a fold that holds this
path out runs it, so the fold's fit is unchanged and these are the fold's held-out predictions. Prints the signed
errors per case (TTFT mean, TPOT, E2E mean, throughput), their medians, and the pooled medians of every fold of that
kind (all their held-out cases, the report's errors with these cases replaced).

    python benchmarks/gptoss_token_frame.py REPORT.json --kind family --group gpt-oss
    python benchmarks/gptoss_token_frame.py REPORT.json --kind GPU --group H100-SXM
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fidelity_real import REFIT_SILICON_EVERY  # noqa: E402
from benchmarks.fold_report import load_report  # noqa: E402
from benchmarks.gptoss_ttft_terms import fold_values  # noqa: E402
from twin.cost.generations import gpu_generation  # noqa: E402
from benchmarks.error_medians import median_cell  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.fitting.moe_token_prior import SHARE, TERM  # noqa: E402
from benchmarks.token_frame_prior import framed_prior, held_rows_of  # noqa: E402

PATH = "hopper+experts_mxfp4"
METRICS = (("mean_ttft_ms", "TTFT"), ("mean_tpot_ms", "TPOT"), ("mean_e2el_ms", "E2E"),
           ("request_throughput", "thr"))


cell = median_cell          # ``|error| median % (signed median %)`` of signed relative errors; ``-`` for none


def pooled(errors: dict[str, dict[str, float]], replaced: dict[str, dict[str, float]], metric: str) -> list[float]:
    """The signed errors of ``metric`` over every case of a fold (``errors``), those in ``replaced`` taken there."""
    out = []
    for name, errs in errors.items():
        value = replaced.get(name, errs).get(metric)
        if value is not None:
            out.append(value)
    return out


def variants(values: dict[str, float], framed: dict[str, float]) -> dict[str, dict[str, float]]:
    """The fold's values and the three variants (``framed``: ``framed_prior`` at share 1)."""
    share_key = f"{SHARE}@{PATH}"
    if f"{TERM}@{PATH}" not in framed:
        raise TwinInputError("token frame: this fold does not carry a per-token prior to Hopper's MXFP4 path "
                             "(its evidence is kept, or no reading is): nothing to vary")
    at_prior_share = {k: v for k, v in framed.items() if k != share_key}
    return {"fold": values, "framed, share kept": values | at_prior_share, "framed, share 1": values | framed,
            "share 1 alone": values | {share_key: 1.0}}


def main() -> None:
    from twin.fitting.fit import simulate_cases
    from twin.fitting.joint import FOLDS, all_cases, errors, family_of, gpu_of, with_deployments
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path)
    ap.add_argument("--kind", default="family", choices=sorted(FOLDS))
    ap.add_argument("--group", default="gpt-oss")
    ap.add_argument("--gpu", default="H100-SXM", help="the held-out cases on this GPU (Hopper's MXFP4 path)")
    ap.add_argument("--ground-truth", type=Path, default=None)
    args = ap.parse_args()
    if gpu_generation(args.gpu) != "hopper":
        raise TwinInputError(f"--gpu {args.gpu}: not a Hopper GPU (only Hopper's MXFP4 path takes this prior)")
    report = load_report(args.report)
    fold = report.fold(args.kind, args.group)
    every = {name: e for f in report.folds(args.kind) for name, e in report.errors(f).items()}
    report.params(fold)                                     # finite numbers, at least one (fold_values reads them)
    everything = all_cases(args.ground_truth)
    held = held_rows_of(with_deployments(everything), args.group, FOLDS[args.kind])
    cases = [c for c in all_cases(args.ground_truth, silicon_every=REFIT_SILICON_EVERY)
             if c.run.name in report.errors(fold) and family_of(c) == "gpt-oss" and gpu_of(c) == args.gpu]
    if not cases:
        raise TwinInputError(f"--gpu {args.gpu}: no held-out gpt-oss case of the {args.kind} fold {args.group}")
    values = fold_values(fold)
    framed = framed_prior({f"{TERM}@{PATH}": values.get(f"{TERM}@{PATH}", 0.0)}, values, held, decode_share=1.0)
    print(f"{args.kind} {args.group}: {TERM}@{PATH} {values.get(f'{TERM}@{PATH}', 0) * 1e6:.4f} us (fold) -> "
          f"{framed.get(f'{TERM}@{PATH}', 0) * 1e6:.4f} us (framed); cases: " + ", ".join(c.run.name for c in cases))
    for label, params in variants(values, framed).items():
        runs = simulate_cases(cases, params, max_sim_s=60.0)     # fidelity_real's window
        errs = {c.run.name: errors(c, r.metrics) for c, r in zip(cases, runs)}
        subset = "; ".join(f"{t} {cell([e[m] for e in errs.values() if m in e])}" for m, t in METRICS)
        whole = "; ".join(f"{t} {cell(pooled(every, errs, m))}" for m, t in METRICS)
        per_case = " | ".join(f"{t} " + " ".join(f"{100 * e.get(m, float('nan')):+.1f}" for e in errs.values())
                              for m, t in METRICS)
        print(f"== {label}: these {len(cases)}: {subset} || all {len(every)} {args.kind} folds' cases: {whole}\n   per case: "
              f"{per_case}", flush=True)


if __name__ == "__main__":
    run_script(main)
