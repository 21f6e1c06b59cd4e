"""Qwen3-32B held out by family, term by term (issue 33, round 13; docs/fidelity.md "Round 13: the sync server held
out"). No fit: the fold's held-out Qwen3 rows (the default report's, every ``REFIT_SILICON_EVERY``-th silicon row)
are simulated at the embedded defaults, at the fold's values (read off a ``fidelity_real.py --folds family --json``
file), and at the fold's values with one thing changed:

* ``per_seq_overhead_s@sync`` split into its prior's parts (``twin.fitting.held_priors``: the fold's async
  per-sequence time + the stated sync-loop time + the sort sampler's estimate), each part set to what the embedded
  value implies for it (the async part at the embedded 18.7 us; the whole at the embedded 63.7 us);
* each other value the fold refits (bandwidth, per-step time, all-reduce latency) at its embedded default;
* with ``--sync-loop-us X``: the sync-loop part at X us instead of the report's (a candidate
  prior tried on the held-out rows, no fit: exact, the prior acts after the fold's fit).

``--fold KIND:GROUP`` picks another fold that holds the Qwen3 rows out with no sync server in training (the H100
GPU fold, the silicon source fold); only its Qwen3 cases are simulated, and the fold's TPOT is printed with their
errors replaced in the report's per-case errors.

    python benchmarks/qwen3_sync_terms.py REPORT.json [--fold family:qwen3] [--sync-loop-us 11] [--sim-s 60]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import nonneg_float, positive_float  # noqa: E402
from benchmarks.fidelity_real import REFIT_SILICON_EVERY  # noqa: E402
from benchmarks.fold_report import load_report  # noqa: E402
from benchmarks.source_fold_terms import ALL  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.fitting.fit import simulate_cases  # noqa: E402
from twin.fitting.held_priors import SYNC_KEY, SYNC_SEQ_HOST_PRIOR_S  # noqa: E402
from twin.fitting.joint import all_cases, default_start, errors, family_of  # noqa: E402
from twin.fitting.sampler_facts import sort_sampler_prior_s  # noqa: E402

OTHERS = ("memory_efficiency", "step_overhead_s", "allreduce_latency_s", "layer_token_overhead_s")


def loop_part_s(fold: dict[str, float], sampler_s: float) -> float:
    """The sync-loop part of the fold's ``per_seq_overhead_s@sync``: what it holds beyond the fold's async value and
    the sampler (the prior's rule), whichever ``SYNC_SEQ_HOST_PRIOR_S`` the report ran with."""
    return fold[SYNC_KEY] - fold["per_seq_overhead_s"] - sampler_s


def variants(fold: dict[str, float], embedded: dict[str, float], sampler_s: float,
             sync_loop_s: float | None = None) -> dict[str, dict[str, float]]:
    """Label -> parameter set (see the module's doc)."""
    asyn, loop_s = fold["per_seq_overhead_s"], loop_part_s(fold, sampler_s)
    out = {"defaults": embedded, "fold": fold,
           "defaults, sync at the fold's": embedded | {SYNC_KEY: fold[SYNC_KEY]},
           "fold, sync at the embedded 63.7 us": fold | {SYNC_KEY: embedded[SYNC_KEY]},
           "fold, async part at the embedded 18.7 us": fold | {SYNC_KEY: fold[SYNC_KEY] - asyn
                                                                + embedded["per_seq_overhead_s"]},
           "fold, no sort sampler": fold | {SYNC_KEY: fold[SYNC_KEY] - sampler_s},
           "fold, no sync loop": fold | {SYNC_KEY: fold[SYNC_KEY] - loop_s}}
    for n in OTHERS:
        out[f"fold, {n} embedded"] = fold | {n: embedded[n]}
    if sync_loop_s is not None:
        out[f"fold, sync loop at {sync_loop_s * 1e6:g} us"] = fold | {SYNC_KEY: fold[SYNC_KEY] - loop_s + sync_loop_s}
    return out


def _pooled(errs: list[float]) -> str:
    return f"{statistics.median(map(abs, errs)):.1%} ({statistics.median(errs):+.1%})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fold_json", type=Path)
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--fold", default="family:qwen3")
    ap.add_argument("--sync-loop-us", type=nonneg_float, default=None)
    ap.add_argument("--sim-s", type=positive_float, default=60.0)
    args = ap.parse_args()
    kind, _, group = args.fold.partition(":")
    report = load_report(args.fold_json)
    entry = report.fold(kind, group)
    fold, held_errors = report.params(entry), report.errors(entry)      # what its simulations used, what they gave
    for name in (SYNC_KEY, "per_seq_overhead_s"):
        if name not in fold:
            raise TwinInputError(f"--fold {args.fold}: the fold carries no {name}")
    cases = [c for c in all_cases(args.ground_truth, silicon_every=REFIT_SILICON_EVERY)
             if family_of(c) == "qwen3" and c.run.name in held_errors]
    embedded = {n: v for n, v in default_start(ALL + OTHERS).items() if v is not None}
    others = [e["mean_tpot_ms"] for name, e in held_errors.items()
              if "mean_tpot_ms" in e and name not in {c.run.name for c in cases}]
    sampler_s = sort_sampler_prior_s(cases)
    loop_s = loop_part_s(fold, sampler_s)
    print(f"{len(cases)} Qwen3 rows; fold: {SYNC_KEY} {fold[SYNC_KEY] * 1e6:.2f} us = async "
          f"{fold['per_seq_overhead_s'] * 1e6:.2f} + sync loop {loop_s * 1e6:.2f} + sort sampler "
          f"{sampler_s * 1e6:.2f} us (embedded {embedded[SYNC_KEY] * 1e6:.2f} us; the prior's loop now "
          f"{SYNC_SEQ_HOST_PRIOR_S * 1e6:g} us)")
    print("| variant | " + " | ".join(c.run.name[-28:] for c in cases) + " | Qwen3 TPOT | fold TPOT |")
    sync_loop_s = None if args.sync_loop_us is None else args.sync_loop_us * 1e-6
    for label, params in variants(fold, embedded, sampler_s, sync_loop_s).items():
        runs = simulate_cases(cases, params, max_sim_s=args.sim_s)
        e = [errors(c, r.metrics)["mean_tpot_ms"] for c, r in zip(cases, runs)]
        print(f"| {label} | " + " | ".join(f"{x:+.1%}" for x in e) + f" | {_pooled(e)} | {_pooled(e + others)} |",
              flush=True)


if __name__ == "__main__":
    run_script(main)
