"""What a fold predicts an expert kernel path with when no training row runs it (issue 33, round 7;
docs/fidelity.md "Round 7: Kimi-K2.5 and unseen expert kernel paths").

For each expert kernel path with embedded values (``int4``: Kimi-K2.5's Marlin W4A16 on B200;
``hopper+experts_fp8``: MiniMax-M2.5 on H100; ``hopper+experts_mxfp4``: gpt-oss-120b's Marlin MXFP4 on H100), the
path's distinct silicon rows are simulated three ways, everything else at the embedded defaults:

* ``embedded``: the path's own values (in-sample: they were read off these rows);
* ``flat``: the path held out as round 6's folds did (``twin.fitting.provenance.fold_plan`` with the path's rows
  as the held-out group), its efficiencies and fixed time at the flat priors (1, 1, 0);
* ``pooled``: the same, the efficiencies and fixed time at ``provenance.pooled_path_prior`` (the other paths'
  embedded values pooled: the rule the folds now use).

Errors: predicted / measured - 1 (negative: the twin is too fast); median |error| (median signed) per path.

    python benchmarks/expert_path_priors.py          # ~5 min on a shared CPU
    python benchmarks/expert_path_priors.py --paths hopper+experts_mxfp4 --variants flat,pooled
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from twin.cost.default_terms import FLAT_DEFAULTS  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.fitting.fit import simulate_cases  # noqa: E402
from twin.fitting.joint import default_start, errors, with_deployments  # noqa: E402
from twin.fitting.provenance import POOLED, embedded_entries, fold_plan  # noqa: E402
from twin.fitting.scoped import in_scope, split  # noqa: E402
from twin.fitting.silicon import silicon_cases  # noqa: E402

KEYS = (("mean_ttft_ms", "TTFT mean"), ("mean_tpot_ms", "TPOT"), ("mean_e2el_ms", "E2E mean"))


def distinct(pairs: list[tuple]) -> list[tuple]:
    """One (case, deployment) per distinct run (the file's copies of one run carry the same figures)."""
    out, seen = [], set()
    for c, d in pairs:
        r = c.row
        if not r.published_client:
            continue
        key = (r.model_path, r.system, r.precision, r.isl, r.osl, r.concurrency, r.tp, round(r.ttft_ms, 3),
               round(r.tpot_ms, 4))
        if key not in seen:
            seen.add(key)
            out.append((c, d))
    return out


def summary(cases: list, results: list) -> str:
    errs = [errors(c, r.metrics) for c, r in zip(cases, results)]
    cells = []
    for k, label in KEYS:
        xs = [e[k] for e in errs if k in e]
        cells.append(f"{label} {100 * statistics.median(abs(x) for x in xs):5.1f}% "
                     f"({100 * statistics.median(xs):+6.1f}%)" if xs else f"{label} -")
    return " | ".join(cells)


VARIANTS = ("embedded", "flat", "pooled")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paths", default="", help="comma-separated path scopes (default: every pooled path)")
    ap.add_argument("--variants", default="embedded,flat,pooled")
    args = ap.parse_args()
    t0 = time.perf_counter()
    cases, _ = silicon_cases()
    evidence = with_deployments(cases)
    dep_of = {id(c): d for c, d in evidence}
    entries = embedded_entries()
    paths = sorted({e.scope for e in entries if e.prior == POOLED})
    if args.paths:
        unknown = [q for q in args.paths.split(",") if q not in paths]
        if unknown:
            raise TwinInputError(f"--paths: {unknown[0]!r} is not a pooled path scope; allowed: {', '.join(paths)}")
        paths = args.paths.split(",")
    variants = args.variants.split(",")
    if any(v not in VARIANTS for v in variants):
        raise TwinInputError(f"--variants {args.variants!r}: each one of {', '.join(VARIANTS)}")
    base = default_start()
    for path in paths:
        rows = distinct([(c, d) for c, d in evidence if in_scope(path, d)])
        plan = fold_plan("held", lambda c, p=path: "held" if in_scope(p, dep_of[id(c)]) else "train", evidence, ())
        pooled = dict(plan.fixed)
        flat = {k: (FLAT_DEFAULTS[split(k)[0]] if k in plan.actions and plan.actions[k][0].prior == POOLED else v)
                for k, v in pooled.items()}
        print(f"== {path}: {len(rows)} distinct rows; held: "
              + ", ".join(f"{k} {plan.actions[k][0].value:.4g} -> flat {flat[k]:.4g} / pooled {v:.4g}"
                          for k, v in pooled.items()))
        run_cases = [c for c, _ in rows]
        for label, params in (("embedded", base), ("flat", base | flat), ("pooled", base | pooled)):
            if label not in variants:
                continue
            res = simulate_cases(run_cases, params, max_sim_s=None, workers=1)
            print(f"  {label:<9} {summary(run_cases, res)}")
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    run_script(main)
