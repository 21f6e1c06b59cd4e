"""gpt-oss-120b's held-out TTFT by term (issue 33, round 13; docs/fidelity.md "Round 13: gpt-oss's prompt time held
out"). No fit: the held-out gpt-oss cases of a fold of a ``fidelity_real.py --json`` report are simulated at the
fold's values, and with one group of terms switched to its embedded default at a time (``on G``: what restoring
that group alone gains; a LEAK where the group's embedded value was read off the held-out rows: it measures what
the term is worth, it predicts nothing), plus ``embedded`` (every value embedded: the in-sample figure).

    python benchmarks/gptoss_ttft_terms.py REPORT.json --kind family --group gpt-oss [--groups bench,hopper_eff]
    python benchmarks/gptoss_ttft_terms.py REPORT.json --kind GPU --group H100-SXM --set NAME=VALUE,...

Prints the signed TTFT mean / TPOT error of every held-out gpt-oss case per variant, and the median per GPU.

Round 16 (docs/fidelity.md "Round 16: gpt-oss held out by family"): a path's entry the fold does not carry falls
back to its generation's fitted value before the unscoped one (as ``scoped.params_for`` resolves it), so the
``fold`` variant reproduces the report's B200 rows again; ``--tpot`` prints the signed TPOT per case, ``--set`` may
be repeated (one variant each), ``--family`` / ``--gpu`` pick another family's held-out cases (e.g. MiniMax's H100
rows of the H100 fold) for a candidate that acts on them too; ``step`` / ``per_seq`` / ``allreduce`` split the
serving group.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fidelity_real import REFIT_SILICON_EVERY  # noqa: E402
from benchmarks.source_fold_terms import signed_median_cell  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.fitting.fit import simulate_cases  # noqa: E402
from twin.fitting.joint import all_cases, default_start, errors, family_of, gpu_of  # noqa: E402
from twin.fitting.scoped import parse_scoped_set_options  # noqa: E402

MX = "hopper+experts_mxfp4"
GROUPS: dict[str, tuple[str, ...]] = {
    "hopper_eff": (f"moe_expert_compute_efficiency@{MX}",),
    "hopper_token": (f"layer_token_overhead_s@{MX}", f"layer_token_decode_share@{MX}"),
    "hopper_ar": (f"fused_allreduce_latency_s@{MX}",),
    "b200_ar": ("fused_allreduce_latency_s@blackwell+experts_mxfp4",),
    "bench": ("request_path_s@client_vllm_bench",),
    "request": ("request_path_s", "request_path_jitter_s"),
    "serving": ("step_overhead_s", "per_seq_overhead_s", "allreduce_latency_s"),
    "step": ("step_overhead_s",),      # round 16: the serving group one term at a time
    "per_seq": ("per_seq_overhead_s",),
    "allreduce": ("allreduce_latency_s",),
    "bandwidth": ("memory_efficiency", "memory_efficiency@blackwell"),
    "b200_token": ("layer_token_overhead_s@blackwell",),
    "b200_eager": ("eager_layer_host_s@blackwell", "eager_moe_layer_host_s@blackwell"),
    # the entries a fold carries to the Blackwell MXFP4 path where it keeps no B200 row (twin.fitting.moe_token_prior)
    "b200_path": ("layer_token_overhead_s@blackwell+experts_mxfp4", "layer_token_decode_share@blackwell+experts_mxfp4",
                  "eager_moe_layer_host_s@blackwell+experts_mxfp4"),
    "link": ("unsharded_allreduce_link_s@blackwell",),
}
ALL = tuple(n for names in GROUPS.values() for n in names)


def fold_of(report: Path, kind: str, group: str) -> dict:
    """The fold of ``kind`` (source / GPU / family) holding out ``group`` in a ``fidelity_real.py --json`` report, its
    ``params`` and ``errors`` checked (round 23: read raw, a list or NaN there was a traceback or read as given)."""
    from benchmarks.fold_report import load_report
    rep = load_report(report)
    fold = rep.fold(kind, group)
    rep.params(fold), rep.errors(fold)          # one line on a bad value; the fold is returned as written
    return fold


def fold_values(fold: dict) -> dict[str, float]:
    """The fold's parameters, each name of ``GROUPS`` it does not carry at the value ``scoped.params_for`` resolves
    it to: a path's (``base@gen+path``) its generation's fitted value where the fold has one, else the unscoped
    fitted value (``joint.simulated_value``'s rule), else left to the embedded default. (Round 16: a path once fell
    back to the unscoped value past a fitted generation entry, e.g. the B200 MXFP4 path's per-token time to the
    fold's unscoped 0 beside a fitted Blackwell 0.16 us, so the B200 rows did not reproduce the report.)"""
    out = dict(fold["params"])
    for name in ALL:
        base, _, scope = name.partition("@")
        generation = f"{base}@{scope.partition('+')[0]}" if "+" in scope else None
        for fallback in (generation, base):
            if name not in out and fallback in out:
                out[name] = out[fallback]
    return out


def embedded_values() -> dict[str, float]:
    """The embedded value of every name of ``GROUPS``; a scoped name with no entry of its own takes the one the cost
    model resolves it to: its generation's entry (``base@gen`` for ``base@gen+path``), else the unscoped default."""
    emb = {n: v for n, v in default_start(ALL).items() if v is not None and n in ALL}
    for name in ALL:
        base, _, scope = name.partition("@")
        for fallback in (f"{base}@{scope.partition('+')[0]}", base):
            if name not in emb and fallback != name:
                value = default_start((fallback,)).get(fallback)     # not the path values held beside it
                if value is not None:
                    emb[name] = value
    return emb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path)
    ap.add_argument("--kind", default="family")
    ap.add_argument("--group", default="gpt-oss")
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--family", default="gpt-oss", help="the held-out cases of this family (round 16: any family)")
    ap.add_argument("--gpu", default="", help="only the held-out cases on this GPU (e.g. H100-SXM; round 16)")
    ap.add_argument("--groups", default=",".join(GROUPS))
    ap.add_argument("--tpot", action="store_true", help="print the signed TPOT per case too (round 16)")
    ap.add_argument("--set", action="append", default=[],
                    help="name=value,...: one more variant, the fold's values with these (repeatable, round 16)")
    args = ap.parse_args()
    fold = fold_of(args.report, args.kind, args.group)
    cases = [c for c in all_cases(args.ground_truth, silicon_every=REFIT_SILICON_EVERY)
             if c.run.name in fold["errors"] and family_of(c) == args.family and gpu_of(c).startswith(args.gpu)]
    if not cases:
        raise TwinInputError(f"--family {args.family} --gpu {args.gpu or 'any'}: no held-out case of that fold")
    values, emb = fold_values(fold), embedded_values()
    variants = {"fold": values, "embedded": values | emb}
    for i, assignments in enumerate(args.set):
        variants[f"fold + set {i + 1}"] = values | parse_scoped_set_options(assignments.split(","))
    for g in (x for x in args.groups.split(",") if x):
        if g not in GROUPS:
            raise TwinInputError(f"--groups: {g!r} is not a group; allowed {', '.join(GROUPS)}")
        variants[f"on {g}"] = values | {n: emb[n] for n in GROUPS[g] if n in emb}
    print("cases: " + ", ".join(f"{gpu_of(c)} {c.run.name}" for c in cases))
    for label, params in variants.items():
        runs = simulate_cases(cases, params, max_sim_s=60.0)     # fidelity_real's window
        errs = [errors(c, r.metrics) for c, r in zip(cases, runs)]
        per_gpu = {g: [e for c, e in zip(cases, errs) if gpu_of(c) == g] for g in sorted({gpu_of(c) for c in cases})}
        rows = {m: " ".join(f"{100 * e.get(m, float('nan')):+.1f}" for e in errs)
                for m in ("mean_ttft_ms", "mean_tpot_ms")}
        cells = "; ".join(f"{g} TTFT {signed_median_cell(v, 'mean_ttft_ms')} "
                          f"TPOT {signed_median_cell(v, 'mean_tpot_ms')}" for g, v in per_gpu.items())
        print(f"== {label}: {cells} | TTFT per case {rows['mean_ttft_ms']}"
              + (f" | TPOT per case {rows['mean_tpot_ms']}" if args.tpot else ""), flush=True)


if __name__ == "__main__":
    run_script(main)
