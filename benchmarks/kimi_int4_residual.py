"""Kimi-K2.5 INT4 (Marlin W4A16 MoE, B200, TP 8) decode: which form the held-out TPOT error has (issue 33, round 16;
docs/fidelity.md "Round 16: Kimi-K2.5 INT4's Marlin decode held out").

A reading, nothing fitted into the twin: every distinct Kimi INT4 run (15: ISL/OSL 1k/1k, 1k/8k, 8k/1k at C = 4..64;
the ground truth's copies of one run carry the same figures and count once) simulated at one parameter set (a
fold's parameters from a ``fidelity_real.py --json`` report, or the embedded defaults), with optional overrides,
then the per-step TPOT residual (twin - measured, ms) of the chosen shapes regressed on the routed-expert bytes one
decode step streams per GPU (uniform top-8 of 384: ``twin.hardware.moe``):

    residual_ms = a + b x expert_GB

``a`` (ms per step; / 60 MoE layers: us per MoE layer) is a time that does not grow with the experts a step touches
(hypothesis (a): the Marlin path's fixed time per MoE layer); ``b`` (ms per GB) is a stream or dequantisation cost
per expert byte the twin lacks (hypotheses (b) and (c): a per-byte compute cost or more experts touched than the
uniform count would both show as ``b`` != 0). Both with their standard errors (ordinary least squares). The 1k/8k
rows are nearly pure decode (one 1k prompt per 8k tokens out), so they are the clean reading; the 1k/1k and 8k/1k
rows add the prompt work of mixed steps.

    python benchmarks/kimi_int4_residual.py --report R.json --kind family --group kimi      # ~1 min (nice 10)
    python benchmarks/kimi_int4_residual.py                                                  # embedded defaults
    python benchmarks/kimi_int4_residual.py --set moe_expert_efficiency@experts_int4=0.5 --shapes 1024x8192
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmarks.cli_checks import positive_float  # noqa: E402
from benchmarks.fold_report import fold_params as load_fold_params  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.fitting.fit import check_simulation_options  # noqa: E402
from twin.fitting.scoped import parse_scoped_set_options  # noqa: E402

INT4_BYTES_PER_WEIGHT = 0.5 + 2 / 32          # INT4, one bf16 scale per 32 weights (twin.hardware.quant)


def expert_gb_per_step(num_experts: int, top_k: int, routed_params: float, tokens: int, tp: int) -> float:
    """Routed-expert GB one decode step of ``tokens`` sequences streams on one GPU (TP without EP: every rank
    holds every expert's 1/TP slice), uniform routing."""
    from twin.hardware.moe import touched_fraction
    return touched_fraction(num_experts, top_k, tokens) * routed_params * INT4_BYTES_PER_WEIGHT / tp / 1e9


def ols_line(points: list[tuple[float, float]]) -> tuple[float, float, float, float]:
    """(a, b, se_a, se_b) of y = a + b x by ordinary least squares; the standard errors from the residual variance
    (n - 2 degrees of freedom; 0 with exactly two points; ``scipy.stats.linregress``). Needs two distinct x."""
    from scipy.stats import linregress
    if len(points) < 2:
        raise TwinInputError("a line needs at least two points")
    if len({x for x, _ in points}) < 2:
        raise TwinInputError("a line needs two distinct x values")
    fit = linregress([x for x, _ in points], [y for _, y in points])
    return float(fit.intercept), float(fit.slope), float(fit.intercept_stderr), float(fit.stderr)


def check_overrides(overrides: dict[str, float], deployment) -> None:
    """Every override must be a roofline keyword (``name`` or ``name@scope``) whose scope covers ``deployment`` (the
    Kimi INT4 server): a name the cost model would reject or a scope it would drop is a one-line error."""
    import inspect
    from twin.cost.roofline import RooflineCostModel
    from twin.fitting.scoped import in_scope, split
    known = set(inspect.signature(RooflineCostModel.__init__).parameters) - {"self"}
    for key in overrides:
        base, scope = split(key)
        if base not in known:
            raise TwinInputError(f"--set {key}: {base!r} is not a cost model parameter")
        if scope is not None and not in_scope(scope, deployment):
            raise TwinInputError(f"--set {key}: the scope {scope!r} does not cover the Kimi INT4 server")


def distinct_int4_cases(cases):
    """One case per (ISL, OSL, CONC) of the Kimi INT4 rows, in that order (the files' copies of a run count once)."""
    seen, out = set(), []
    for c in cases:
        key = (c.row.isl, c.row.osl, c.row.concurrency)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return sorted(out, key=lambda c: (c.row.isl, c.row.osl, c.row.concurrency))


def parse_shape(text: str) -> tuple[int, int]:
    try:
        isl, osl = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise TwinInputError(f"--shapes {text!r}: expected ISLxOSL, e.g. 1024x8192") from None
    if min(isl, osl) < 1:
        raise TwinInputError(f"--shapes {text!r}: ISL and OSL must be >= 1")
    return isl, osl


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", type=Path, default=None, help="a fidelity_real.py --json report (else the defaults)")
    ap.add_argument("--kind", choices=("source", "GPU", "family"), default="family")
    ap.add_argument("--group", default="kimi")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--shapes", default="1024x8192", help="comma-separated ISLxOSL the line is fitted on")
    ap.add_argument("--sim-s", type=positive_float, default=60.0)
    args = ap.parse_args()
    if args.report is None and (args.kind, args.group) != ("family", "kimi"):
        raise TwinInputError("--kind / --group need --report")
    shapes = {parse_shape(s) for s in args.shapes.split(",") if s.strip()}
    if not shapes:
        raise TwinInputError(f"--shapes {args.shapes!r}: no ISLxOSL given")
    check_simulation_options(args.sim_s, 1)
    overrides = parse_scoped_set_options(args.overrides)

    from twin.fitting.fit import simulate_cases
    from twin.fitting.joint import all_cases, default_start, errors, family_of
    from twin.hardware.model_catalog import resolve_model
    from twin.fitting.replay import deployment_for
    params = default_start() if args.report is None else load_fold_params(args.report, args.kind, args.group)
    label = "embedded defaults" if args.report is None else f"{args.kind} {args.group} fold of {args.report.name}"
    cases = distinct_int4_cases([c for c in all_cases() if family_of(c) == "kimi"
                                 and (c.row.precision or "").lower() == "int4"])
    if not cases:
        raise TwinInputError("no Kimi INT4 row in the ground truth")
    check_overrides(overrides, deployment_for(cases[0].run, cases[0].target))
    params = {**params, **overrides}
    model = resolve_model("kimi-k2.5")
    res = simulate_cases(cases, params, seed=0, max_sim_s=args.sim_s, workers=1)
    print(f"{len(cases)} distinct Kimi INT4 runs at the {label}" + (f", with {overrides}" if overrides else ""))
    print(f"  {'ISL/OSL':>11} {'C':>3} {'GB/step':>7} | {'TPOT meas':>9} {'twin':>6} {'resid ms':>8} {'err':>6} | TTFT err")
    points = []
    for c, r in zip(cases, res):
        e, m = errors(c, r.metrics), c.run.metrics
        gb = expert_gb_per_step(model.num_experts, model.num_experts_per_tok, model.routed_expert_params,
                                c.row.concurrency, c.row.tp)
        d = r.metrics["mean_tpot_ms"] - m["mean_tpot_ms"]
        if (c.row.isl, c.row.osl) in shapes:
            points.append((gb, d))
        print(f"  {c.row.isl:5d}/{c.row.osl:<5d} {c.row.concurrency:3d} {gb:7.2f} | {m['mean_tpot_ms']:9.2f} "
              f"{r.metrics['mean_tpot_ms']:6.2f} {d:+8.2f} {100 * e['mean_tpot_ms']:+5.1f}% | "
              f"{100 * e.get('mean_ttft_ms', float('nan')):+5.1f}%")
    a, b, sa, sb = ols_line(points)
    layers = model.moe_layers
    print(f"residual = a + b x GB on {sorted(shapes)} ({len(points)} runs): a {a:+.2f} +/- {sa:.2f} ms per step "
          f"({1e3 * a / layers:+.1f} +/- {1e3 * sa / layers:.1f} us per MoE layer x {layers}), "
          f"b {1e3 * b:+.1f} +/- {1e3 * sb:.1f} us per GB")


if __name__ == "__main__":
    run_script(main)
