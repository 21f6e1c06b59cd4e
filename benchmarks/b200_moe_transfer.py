"""Blackwell's MoE prompt-side terms where the B200 rows are held out (issue 33, round 17; docs/fidelity.md "Round 17:
MoE TTFT with B200 held out: what carries from Hopper"). No fit: the B200-held-out GPU fold's held-out cases (the
default report's: every 16th silicon row) are simulated at the values that fold carried (``BASE``, a
``fidelity_real.py --json`` report) and at those values with one group of Blackwell-scoped terms replaced. Exact
for the held-out predictions: the fold's training rows hold no B200 row, so no Blackwell-scoped value changes its
fit.

Two kinds of variant:

* ``leak:*`` (diagnostics, never candidates): the in-sample value of one group of Blackwell terms let through (read
  off the B200 rows): which held-out reset owns how much of the fold's MoE TTFT gap.
* ``rule:*`` (candidates, read no B200 row): a kept Hopper expert-path value carried to Blackwell by a stated
  datasheet rule: a fraction of the generation's own peak unscaled; a per-token time that is tensor work scaled by
  the two datasheets' tensor rates at the path's precision (``rate_ratio``); a fixed time per layer (launch
  latency) unscaled.

    python benchmarks/b200_moe_transfer.py BASE.json [--only LABEL,...] [--set name=value,...] [--cases]
    python benchmarks/b200_moe_transfer.py --in-sample [--family minimax] --only base,rule:

``--in-sample``: the check of a rule where both generations are measured (never a fit): the embedded defaults on the
B200 rows of the defaults run (every 3rd silicon row), with the rule's value in place of the embedded one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fidelity_real import DEFAULT_SILICON_EVERY, REFIT_SILICON_EVERY  # noqa: E402
from benchmarks.fold_compare import error_cell  # noqa: E402
from benchmarks.fold_report import fold_params  # noqa: E402
from benchmarks.unseen_generation import GROUPS as FOLD_GROUPS  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.hardware.catalog import resolve_gpu  # noqa: E402
from twin.fitting.scoped import parse_scoped_set_options  # noqa: E402

GROUP = "B200"
KEYS = (("mean_ttft_ms", "TTFT"), ("mean_tpot_ms", "TPOT"), ("mean_e2el_ms", "E2E"))
EXPERT_FORMATS = ("fp8", "nvfp4", "mxfp4", "int4")
PATH = "blackwell+experts_"
# the embedded (in-sample) Blackwell values the B200 fold resets or replaces (twin.cost.default_terms,
# generation_experts, mla_decode; provenance.embedded_entries)
IN_SAMPLE = {"layer_token_overhead_s": 0.2e-6, "eager_layer_host_s": 0.84e-3, "eager_moe_layer_host_s": 1.15e-3,
             "eager_moe_gqa_nvfp4_s": 0.315e-3, "fused_allreduce_mxfp4_s": 11.0e-6, "mla_layer_s": 13.2e-6,
             "bench_path_s": 17.4e-3}
# the kept Hopper expert-path values (embedded; the B200 fold keeps them: their evidence is H100 rows)
HOPPER_FP8_COMPUTE_EFFICIENCY = 0.18
HOPPER_FP8_MOE_LAYER_S = 16e-6
HOPPER_MXFP4_TOKEN_S = 0.15e-6


def rate_ratio(dtype: str, source: str = "H100-SXM", target: str = "B200") -> float:
    """How much shorter the same tensor work is on ``target`` than on ``source``: the datasheet dense tensor rates
    at ``dtype`` (target / source)."""
    return resolve_gpu(target).flops(dtype) / resolve_gpu(source).flops(dtype)


def bandwidth_ratio(source: str = "H100-SXM", target: str = "B200") -> float:
    return resolve_gpu(target).memory_bandwidth_bytes_per_s / resolve_gpu(source).memory_bandwidth_bytes_per_s


def _paths(name: str, value: float, formats=EXPERT_FORMATS) -> dict[str, float]:
    return {f"{name}@{PATH}{f}": value for f in formats}


def variants(base: dict[str, float]) -> dict[str, dict[str, float]]:
    """Label -> the fold's values with one group replaced."""
    s = IN_SAMPLE
    eager = {"eager_layer_host_s@blackwell": s["eager_layer_host_s"], "eager_moe_layer_host_s@blackwell":
             s["eager_moe_layer_host_s"], **_paths("eager_moe_layer_host_s", s["eager_moe_layer_host_s"]),
             "eager_moe_layer_host_s@blackwell+gqa+experts_nvfp4": s["eager_moe_gqa_nvfp4_s"]}
    token = _paths("layer_token_overhead_s", s["layer_token_overhead_s"]) | _paths("layer_token_decode_share", 1.0)
    out = {
        "base": {},
        "leak: eager floors (0.84 / 1.15 ms)": eager,
        "leak: eager MoE floor of the expert paths only": {k: v for k, v in eager.items() if "+" in k},
        "leak: per-token 0.2 us, decode share 1": token,
        "leak: per-token 0.2 us, prompt only": _paths("layer_token_overhead_s", s["layer_token_overhead_s"]),
        "leak: MXFP4 fused all-reduce, MLA layer": {f"fused_allreduce_latency_s@{PATH}mxfp4":
                                                    s["fused_allreduce_mxfp4_s"], "layer_overhead_s@mla":
                                                    s["mla_layer_s"]},
        "leak: bench client path 17.4 ms (33w's term)": {"request_path_s@client_vllm_bench": s["bench_path_s"]},
        "leak: all of the above": eager | token | {"request_path_s@client_vllm_bench": s["bench_path_s"]},
        "rule: per-token / bf16 tensor ratio": _paths("layer_token_overhead_s",
                                                      HOPPER_MXFP4_TOKEN_S / rate_ratio("bf16")),
        "rule: per-token / HBM ratio": _paths("layer_token_overhead_s", HOPPER_MXFP4_TOKEN_S / bandwidth_ratio()),
        "rule: Hopper FP8 expert efficiency 0.18 (a fraction: unscaled)": {
            f"moe_expert_compute_efficiency@{PATH}fp8": HOPPER_FP8_COMPUTE_EFFICIENCY},
        "rule: Hopper FP8 MoE layer time 16 us (launch: unscaled)": {
            f"moe_layer_overhead_s@{PATH}fp8": HOPPER_FP8_MOE_LAYER_S},
    }
    return {k: base | v for k, v in out.items()}


def known_names(values: dict[str, float], flag: str = "--set") -> dict[str, float]:
    """``values`` where every name is a fit parameter or a roofline keyword, with an optional ``@scope`` that can
    cover a deployment (``twin.fitting.scoped.check_scoped_name``); else a one-line error (an unknown name would
    fail the cost model, an unknown scope cover nothing)."""
    import inspect

    from twin.cost.roofline import RooflineCostModel
    from twin.fitting.parameters import PARAMETERS_BY_NAME
    from twin.fitting.path_layers import TERM
    from twin.fitting.scoped import check_scoped_name, split
    keywords = set(inspect.signature(RooflineCostModel.__init__).parameters) - {"self", "model", "gpu"}
    for name in values:
        base, _ = split(name)
        if name not in PARAMETERS_BY_NAME and base not in keywords | {TERM}:
            raise TwinInputError(f"{flag} {name}: neither a fit parameter nor a roofline keyword")
        check_scoped_name(name, flag)
    return values


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", type=Path, nargs="?", help="a fidelity_real.py --json report (its B200 GPU fold)")
    ap.add_argument("--in-sample", action="store_true", help="the embedded defaults on the B200 rows instead")
    ap.add_argument("--family", default=None, choices=dict(FOLD_GROUPS)["family"], help="only this family's cases")
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--only", default="", help="comma-separated label prefixes to run (default: all)")
    ap.add_argument("--set", default="", help="name=value,...: on every variant")
    ap.add_argument("--sim-s", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--cases", action="store_true", help="print each MoE case's TTFT error per variant")
    args = ap.parse_args()
    from twin.fitting.fit import check_simulation_options, simulate_cases
    check_simulation_options(args.sim_s, args.workers)
    from twin.fitting.joint import all_cases, errors, family_of, gpu_of
    from twin.hardware.model_catalog import resolve_model
    extra = known_names(parse_scoped_set_options([kv for kv in args.set.split(",") if kv]))
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    if args.only and not only:
        raise TwinInputError(f"--only {args.only!r}: name at least one label prefix")
    if (args.base is None) != args.in_sample:
        raise TwinInputError("give either a report (BASE.json) or --in-sample, not both")
    table = variants({} if args.in_sample else fold_params(args.base, "GPU", GROUP))
    labels = [k for k in table if not only or any(k.startswith(o) for o in only)]
    if not labels:
        raise TwinInputError(f"--only: no variant starts with {only}; variants: {', '.join(table)}")
    every = DEFAULT_SILICON_EVERY if args.in_sample else REFIT_SILICON_EVERY
    cases = [c for c in all_cases(args.ground_truth, silicon_every=every) if gpu_of(c) == GROUP
             and (not args.family or family_of(c) == args.family)]
    if not cases:
        raise TwinInputError(f"no {GROUP} case" + (f" of the family {args.family!r} (--family)" if args.family else ""))
    moe = [resolve_model(c.target.model).is_moe for c in cases]
    for label in labels:
        runs = simulate_cases(cases, table[label] | extra, max_sim_s=args.sim_s, workers=args.workers)
        errs = [errors(c, r.metrics) for c, r in zip(cases, runs)]
        fams: dict[str, list[dict]] = {}
        for c, e in zip(cases, errs):
            fams.setdefault(family_of(c), []).append(e)
        moe_errs = [e for e, m in zip(errs, moe) if m]
        print(f"== {label} (n {len(cases)}): " + ", ".join(f"{k} {error_cell(errs, key)}" for key, k in KEYS)
              + f" | MoE {len(moe_errs)} TTFT {error_cell(moe_errs, 'mean_ttft_ms')} TPOT "
              f"{error_cell(moe_errs, 'mean_tpot_ms')} | " + "; ".join(
                  f"{f} {len(v)} TTFT {error_cell(v, 'mean_ttft_ms')} TPOT {error_cell(v, 'mean_tpot_ms')}"
                  for f, v in sorted(fams.items())), flush=True)
        if args.cases:
            for c, e, m in zip(cases, errs, moe):
                if m and "mean_ttft_ms" in e:
                    print(f"    {c.run.name}: TTFT {100 * e['mean_ttft_ms']:+.1f} TPOT "
                          f"{100 * e.get('mean_tpot_ms', float('nan')):+.1f}")


if __name__ == "__main__":
    run_script(main)
