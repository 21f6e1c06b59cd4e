"""Which term's absence makes the silicon-held-out source fold's gap (issue 33, round 10; docs/fidelity.md "Round 10:
the silicon-held-out source fold"). No fit: the held-out silicon rows of the default report (every 16th) are
simulated at the embedded defaults, at the fold's values (read off a ``fidelity_real.py --folds source --json``
file), and with one group of terms switched at a time, in either direction:

* ``off``: the embedded defaults with one group at the fold's value (what losing that group alone costs);
* ``on``: the fold's values with one group at the embedded default (what restoring that group alone gains).

Prints, per (family, GPU) slice and pooled, the median signed TTFT mean and TPOT error of each variant.

    python benchmarks/source_fold_terms.py FOLD.json [--direction off,on] [--groups eager,token] [--sim-s 60]
    python benchmarks/source_fold_terms.py FOLD.json --direction none --set eager_layer_host_s@blackwell=7.5e-5
        (the fold's values with the given ones on top: a candidate prior tried on the held-out rows, no fit; exact
        for a term the fold's training rows never cost, e.g. a Blackwell term in the silicon-held-out fold)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_out_path, positive_float, positive_int  # noqa: E402
from benchmarks.fidelity_real import REFIT_SILICON_EVERY  # noqa: E402
from benchmarks.fold_report import fold_params  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.fitting.fit import simulate_cases  # noqa: E402
from twin.fitting.joint import all_cases, default_start, errors, family_of, gpu_of, source_of  # noqa: E402
from twin.fitting.provenance import embedded_entries  # noqa: E402
from twin.fitting.scoped import split  # noqa: E402
from twin.fitting.scoped import parse_scoped_set_options  # noqa: E402

# the silicon-read terms by what they are (the fold resets or refits each; docs/fidelity.md "Round 9 outcome")
GROUPS: dict[str, tuple[str, ...]] = {
    "eager": ("eager_layer_host_s@blackwell", "eager_moe_layer_host_s@blackwell"),
    "token": ("layer_token_overhead_s@blackwell",),
    "hopper_paths": ("moe_expert_compute_efficiency@hopper+experts_fp8", "moe_layer_overhead_s@hopper+experts_fp8",
                     "moe_expert_compute_efficiency@hopper+experts_mxfp4", "layer_token_overhead_s@hopper+experts_mxfp4",
                     "fused_allreduce_latency_s@hopper+experts_mxfp4"),
    "int4": ("moe_layer_overhead_s@experts_int4", "moe_expert_efficiency@experts_int4",
             "moe_expert_compute_efficiency@experts_int4"),
    "fused_b200": ("fused_allreduce_latency_s@blackwell+experts_mxfp4",),
    "mla": ("layer_overhead_s@mla",),
    "sync": ("per_seq_overhead_s@sync",),
    "bandwidth": ("memory_efficiency", "memory_efficiency@blackwell", "kv_memory_efficiency@hopper+kv_fp8"),
    "serving": ("step_overhead_s", "per_seq_overhead_s", "allreduce_latency_s"),
    "request": ("request_path_s", "request_path_s@client_vllm_bench"),
    # round 11's resets (round 12 adds them here)
    "expert_request": ("expert_path_request_s@hopper+experts_fp8", "expert_path_request_s@blackwell+experts_fp8"),
    "link": ("unsharded_allreduce_link_s@blackwell",),
}
ALL = tuple(n for names in GROUPS.values() for n in names)


def fold_values(report: Path, kind: str = "source", group: str = "silicon") -> dict[str, float]:
    """The values the fold's simulations used for every name in ``GROUPS``: its parameters, a scoped name it
    does not carry at the unscoped one it falls back to (``joint.simulated_value``'s rule)."""
    params = fold_params(report, kind, group)
    out = dict(params)      # every value the fold carries (round 11's resets: expert request time, the link part)
    for name in ALL:
        base = name.split("@")[0]
        if name not in params and base not in params:
            raise TwinInputError(f"{report}: the {kind} fold holding {group!r} out carries neither {name} nor {base}")
        out[name] = params[name] if name in params else params[base]
    return out


def restored(fold: dict[str, float], names, embedded: dict[str, float]) -> dict[str, float]:
    """``fold`` with ``names`` at their ``embedded`` values, and every more specific key the fold carries under one of
    them (``name@<scope>+...``: an expert path's MoE floor, ``eager_moe_layer_host_s@blackwell+experts_fp8``) at the
    value the embedded defaults price it with: its own embedded entry, else the restored name's (a path without an
    entry of its own takes its generation's). Round 14: without this the fold's path keys (reset to 0) kept the MoE
    floors off in the "on eager" variant."""
    own = {e.parameter for e in embedded_entries()}
    out = dict(fold)
    for n in names:
        if n not in embedded:
            continue
        out[n] = embedded[n]
        base, scope = split(n)
        for k in fold:
            b, s = split(k)
            if scope and s and b == base and s.startswith(scope + "+"):
                out[k] = default_start((k,))[k] if k in own else embedded[n]
    return out


def slices(cases, errs) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {"all": list(errs)}
    for c, e in zip(cases, errs):
        out.setdefault(f"{family_of(c)} {gpu_of(c)}", []).append(e)
    return out


def signed_median_cell(errs: list[dict], key: str) -> str:
    """The median signed error of ``key`` over ``errs`` as a table cell (percent), '-' where no case has it."""
    xs = [e[key] for e in errs if key in e]
    return f"{100 * statistics.median(xs):+6.1f}" if xs else "     -"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fold_json", type=Path)
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--direction", default="off,on")
    ap.add_argument("--groups", default=",".join(GROUPS))
    ap.add_argument("--sim-s", type=positive_float, default=60.0)
    ap.add_argument("--workers", type=positive_int, default=1)
    ap.add_argument("--set", default="", help="name=value,...: one more variant, the fold's values with these")
    ap.add_argument("--save", type=Path, default=None, help="per-case errors of every variant (JSON)")
    args = ap.parse_args()
    check_out_path(args.save, "--save")
    directions, groups = args.direction.split(","), args.groups.split(",")
    if any(d not in ("off", "on") for d in directions):
        raise TwinInputError(f"--direction {args.direction!r}: each one of off, on")
    if any(g not in GROUPS for g in groups):
        raise TwinInputError(f"--groups {args.groups!r}: each one of {', '.join(GROUPS)}")
    overrides = parse_scoped_set_options(args.set.split(",")) if args.set else {}
    cases = [c for c in all_cases(args.ground_truth, silicon_every=REFIT_SILICON_EVERY) if source_of(c) == "silicon"]
    embedded = {n: v for n, v in default_start(ALL).items() if v is not None}
    fold = fold_values(args.fold_json)
    variants = {"defaults": embedded, "fold": fold}
    if args.set:
        variants["fold + set"] = fold | overrides
    for d in directions:
        for g in groups:
            names = GROUPS[g]
            if d == "off":
                variants[f"off {g}"] = embedded | {n: fold[n] for n in names}
            else:
                variants[f"on {g}"] = restored(fold, names, embedded)
    results = {}
    for label, params in variants.items():
        runs = simulate_cases(cases, params, max_sim_s=args.sim_s, workers=args.workers)
        results[label] = [errors(c, r.metrics) for c, r in zip(cases, runs)]
        sl = slices(cases, results[label])
        print(f"== {label}: " + "; ".join(f"{k} (n {len(v)}) TTFT {signed_median_cell(v, 'mean_ttft_ms')} TPOT "
                                         f"{signed_median_cell(v, 'mean_tpot_ms')}" for k, v in sorted(sl.items())), flush=True)
    if args.save:
        args.save.write_text(json.dumps({"cases": [c.run.name for c in cases], "variants": variants,
                                         "errors": results}, indent=1))


if __name__ == "__main__":
    run_script(main)
