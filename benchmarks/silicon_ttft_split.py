"""Where the silicon-held-out source fold's TTFT gap sits, by slice and by term (issue 33, round 14; docs/fidelity.md
"Round 14: the silicon-held-out source fold's TTFT").

No fit. The held-out silicon rows of the default report (every 16th) are simulated at the fold's values (read off a
``fidelity_real.py --folds source --groups silicon --json`` file, ``source_fold_terms.fold_values``), with one group
of silicon-read cost terms at its embedded value at a time, with every such group at once ("all cost terms on":
what is left is the serving terms the fold fits on the inference-perf runs, and the queueing the simulator
builds from them), and with candidate priors (``--prior 'label:name=value,...'``, repeatable). Per variant it
prints the median signed TTFT mean error per slice: GPU, (family, GPU), the load band (light C <= 8 / 16-64 /
>= 128) and the prompt length, and the median TTFT the variant misses by, in ms, at light load by prompt length.

    python benchmarks/silicon_ttft_split.py FOLD.json [--groups token,eager,...] [--save X.json]
    python benchmarks/silicon_ttft_split.py FOLD.json --no-groups --prior 'cpu:eager_layer_host_s@blackwell=7e-5'
    python benchmarks/silicon_ttft_split.py FOLD.json --moe-token-check 0,1e-7,2e-7
        (instead: the fold's only MoE training runs, the inference-perf Mixtral stages, simulated at the fold's values
        with a MoE per-token prompt cost on their bf16 Triton expert path: can they read one?)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_out_path, number_list, positive_float, positive_int  # noqa: E402
from benchmarks.fidelity_real import REFIT_SILICON_EVERY  # noqa: E402
from benchmarks.source_fold_terms import GROUPS, fold_values, restored  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.fitting.fit import check_simulation_options, simulate_cases  # noqa: E402
from twin.fitting.joint import all_cases, default_start, errors, family_of, gpu_of, source_of  # noqa: E402
from twin.cost.default_terms import FLAT_DEFAULTS  # noqa: E402
from twin.fitting.parameters import PARAMETERS_BY_NAME  # noqa: E402
from twin.fitting.scoped import SCOPES, split  # noqa: E402
from twin.fitting.scoped import parse_scoped_set_options  # noqa: E402

# the silicon-read COST groups (source_fold_terms.GROUPS less the serving, request and bandwidth terms the fold refits
# or carries from the inference-perf runs)
COST_GROUPS = ("token", "eager", "hopper_paths", "int4", "fused_b200", "mla", "expert_request", "link")
LIGHT_MAX_CONC = 8
KEY = "mean_ttft_ms"
KNOWN_BASES = frozenset(PARAMETERS_BY_NAME) | frozenset(FLAT_DEFAULTS)    # what a --prior may name (before any @scope)
MIXTRAL_PATH = "hopper+experts_bf16"       # the inference-perf Mixtral runs' expert path (H100, bf16, Triton)


def load_band(concurrency: int) -> str:
    """The load band of a closed-loop row: light (C <= 8), mid (16-64) or heavy (>= 128)."""
    if concurrency <= LIGHT_MAX_CONC:
        return "C<=8"
    return "C16-64" if concurrency <= 64 else "C>=128"


def slice_keys(case) -> list[str]:
    """The slices a silicon case belongs to (besides 'all')."""
    row = case.row
    return [gpu_of(case), f"{family_of(case)} {gpu_of(case)}", load_band(row.concurrency), f"ISL {row.isl}"]


def slice_medians(keys: list[list[str]], errs: list[dict]) -> dict[str, tuple[int, float]]:
    """{slice: (rows with a TTFT error, median signed TTFT error)}; 'all' over every row."""
    groups: dict[str, list[float]] = {}
    for ks, e in zip(keys, errs):
        if KEY not in e:
            continue
        for k in ["all", *ks]:
            groups.setdefault(k, []).append(e[KEY])
    return {k: (len(v), statistics.median(v)) for k, v in sorted(groups.items())}


def light_gap_ms(cases, errs) -> dict[int, float]:
    """{prompt length: median ms the prediction misses the measured TTFT mean by, over the light-load rows}."""
    gaps: dict[int, list[float]] = {}
    for c, e in zip(cases, errs):
        if KEY in e and c.row.concurrency <= LIGHT_MAX_CONC:
            measured = c.run.metrics[KEY]
            gaps.setdefault(c.row.isl, []).append(measured - measured * (1.0 + e[KEY]))
    return {isl: statistics.median(v) for isl, v in sorted(gaps.items())}


def parse_prior(text: str) -> tuple[str, dict[str, float]]:
    """'label:name=value,name=value' -> (label, {name: value}); the pairs read by the project's
    ``parse_scoped_set_options`` (a finite number each, no name twice); a clear error on anything else."""
    label, sep, body = text.partition(":")
    if not sep or not label or not body:
        raise TwinInputError(f"--prior {text!r}: expected 'label:name=value,...'")
    out = parse_scoped_set_options(body.split(","), flag=f"--prior {label}:")
    for name in out:
        base, scope = split(name)
        if base not in KNOWN_BASES or (scope and any(s not in SCOPES for s in scope.split("+"))):
            raise TwinInputError(f"--prior {text!r}: {name!r} is not a fit parameter (name or name@scope)")
    return label, out


def read_fold(path: Path) -> dict[str, float]:
    """``source_fold_terms.fold_values`` of a ``fidelity_real.py --json`` file, with a one-line error for a missing or
    foreign file (``benchmarks.fold_report``'s, saying what the file lacks)."""
    try:
        return fold_values(path)
    except TwinInputError as exc:
        raise TwinInputError(f"not a fidelity_real.py --json report with the silicon-held-out source fold: {exc}") \
            from None


def variants(fold: dict[str, float], embedded: dict[str, float], groups, priors) -> dict[str, dict[str, float]]:
    """The parameter sets to simulate: the embedded defaults (as ``source_fold_terms``), the fold, each group on,
    every cost group on, each candidate prior."""
    out = {"defaults": dict(embedded), "fold": fold}
    for g in groups:
        out[f"on {g}"] = restored(fold, GROUPS[g], embedded)
    out["all cost terms on"] = restored(fold, [n for g in COST_GROUPS for n in GROUPS[g]], embedded)
    for label, values in priors:
        out[f"prior {label}"] = fold | values
    return out


def moe_token_check(fold: dict[str, float], values_s: list[float], ground_truth, sim_s: float, workers: int) -> None:
    """Print the inference-perf Mixtral stages' TTFT mean / p50 and TPOT errors at the fold's values with
    ``layer_token_overhead_s@MIXTRAL_PATH`` at each of ``values_s`` (prompt tokens only, as the carried MoE prior)."""
    from twin.fitting.moe_token_prior import prompt_token_entries
    cases = [c for c in all_cases(ground_truth, silicon_every=REFIT_SILICON_EVERY)
             if source_of(c) != "silicon" and family_of(c) == "mixtral"]
    gen, fmt = MIXTRAL_PATH.split("+experts_")
    for v in values_s:
        runs = simulate_cases(cases, fold | prompt_token_entries(gen, fmt, v), max_sim_s=sim_s, workers=workers)
        errs = [errors(c, r.metrics) for c, r in zip(cases, runs)]
        cells = {k: " ".join(f"{100 * e[k]:+.1f}" if k in e else "-" for e in errs)
                 for k in ("mean_ttft_ms", "median_ttft_ms", "mean_tpot_ms")}
        print(f"== Mixtral inference-perf stages ({len(cases)}), {v * 1e6:.2f} us per token per MoE layer: TTFT mean "
              f"{cells['mean_ttft_ms']} | p50 {cells['median_ttft_ms']} | TPOT {cells['mean_tpot_ms']}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fold_json", type=Path)
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--groups", default="token,eager,hopper_paths,int4,expert_request,mla")
    ap.add_argument("--prior", action="append", default=[], help="label:name=value,...: a candidate prior")
    ap.add_argument("--no-groups", action="store_true", help="only the defaults, the fold, all cost terms on, "
                                                                 "and the priors")
    ap.add_argument("--sim-s", type=positive_float, default=60.0)
    ap.add_argument("--workers", type=positive_int, default=1)
    ap.add_argument("--save", type=Path, default=None, help="per-case errors of every variant (JSON)")
    ap.add_argument("--moe-token-check", default="", help="s,s,...: the Mixtral check instead (module docstring)")
    args = ap.parse_args()
    check_out_path(args.save, "--save")
    check_simulation_options(args.sim_s, args.workers)
    if args.moe_token_check:
        values = number_list(args.moe_token_check, "--moe-token-check", low=0.0)
        moe_token_check(read_fold(args.fold_json), values, args.ground_truth, args.sim_s, args.workers)
        return
    groups = [] if args.no_groups else [g for g in args.groups.split(",") if g]
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        raise TwinInputError(f"--groups: unknown {', '.join(unknown)}; known: {', '.join(GROUPS)}")
    priors = [parse_prior(p) for p in args.prior]
    cases = [c for c in all_cases(args.ground_truth, silicon_every=REFIT_SILICON_EVERY) if source_of(c) == "silicon"]
    keys = [slice_keys(c) for c in cases]
    embedded = {n: v for n, v in default_start(tuple(n for g in GROUPS.values() for n in g)).items() if v is not None}
    results = {}
    for label, params in variants(read_fold(args.fold_json), embedded, groups, priors).items():
        runs = simulate_cases(cases, params, max_sim_s=args.sim_s, workers=args.workers)
        results[label] = [errors(c, r.metrics) for c, r in zip(cases, runs)]
        med = slice_medians(keys, results[label])
        gap = light_gap_ms(cases, results[label])
        print(f"== {label}: " + "; ".join(f"{k} (n {n}) {100 * m:+.1f}" for k, (n, m) in med.items())
              + " | light-load TTFT missed (ms): " + ", ".join(f"ISL {i} {g:.0f}" for i, g in gap.items()), flush=True)
    if args.save:
        args.save.write_text(json.dumps({"cases": [c.run.name for c in cases], "errors": results}, indent=1))


if __name__ == "__main__":
    run_script(main)
