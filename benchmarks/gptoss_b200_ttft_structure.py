"""gpt-oss-120b's B200 TTFT by TP and prompt length, read off the measured rows themselves (issue 33, round 17).

Two readings, no fit of the twin and no simulation:

* **the TP split of light-load TTFT** (CONC 4, one release): per prompt length, the least squares of
  ``TTFT = a + b / TP`` over the row's TP sizes. ``b`` is the part of a prompt's time that TP divides (the
  prompt step's GEMMs and weight stream), ``a`` the part it does not (the per-token-per-layer time, the client
  path, the wait for the step in flight). Two prompt lengths give each part's intercept and per-token slope:
  ``b = b0 + s_b x tokens``. The twin's own prompt step (``explain()`` of one mean-length prompt beside CONC - 1
  decodes at the row's server) is split the same way beside it (``--twin``);
* **orderings the measured loaded rows break** (``--loaded``): on one node a larger TP at the same CONC should not
  take longer to the first token, nor a larger CONC at the same TP less; a pair that does by more than ``--noise``
  (default 0.15: three times the README's 4.6 % repeat median) is listed, and every loaded row it touches.

* ``--simulate``: the distinct rows simulated at the defaults and with ``VARIANTS`` (in-sample readings).

    python benchmarks/gptoss_b200_ttft_structure.py [--twin] [--loaded] [--noise 0.15] [--simulate]

docs/fidelity.md "Round 17: gpt-oss's loaded B200 1k rows (issue 33)".
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.error_medians import median_cell  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402

RELEASE = "0.15.1"
FLOOR = "eager_moe_layer_host_s@blackwell+experts_mxfp4"
TOKEN = "layer_token_overhead_s@blackwell+experts_mxfp4"
STREAM = "moe_prompt_stream_efficiency@blackwell+experts_mxfp4"
# in-sample candidates (each reads the gpt-oss B200 rows: a reading, not a prediction): the MXFP4 path's eager MoE
# floor at the op-count rule's 0 and round 12's per-token reading (0.16 us), then a TP-divided time per prompt step
# as the prompt steps' expert stream at a fraction of the decode rate (twin.cost.prompt_experts)
VARIANTS: dict[str, dict[str, float]] = {
    "embedded": {},
    "floor 0 + token 0.16": {FLOOR: 0.0, TOKEN: 0.16e-6},
    "... + prompt stream 0.5": {FLOOR: 0.0, TOKEN: 0.16e-6, STREAM: 0.5},
    "... + prompt stream 0.4": {FLOOR: 0.0, TOKEN: 0.16e-6, STREAM: 0.4},
    "prompt stream 0.5 alone": {STREAM: 0.5},
}
BANDS = {"all": lambda r: True, "1k C<=16": lambda r: r.isl == 1024 and r.concurrency <= 16,
         "1k C>=32": lambda r: r.isl == 1024 and r.concurrency >= 32, "8k": lambda r: r.isl > 1024,
         **{f"TP{t}": (lambda t: lambda r: r.tp == t)(t) for t in (1, 2, 4, 8)}}


def tp_split(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least squares of ``y = a + b / tp`` over ``(tp, y)`` points with at least two TP sizes: ``(a, b)``."""
    tps = {tp for tp, _ in points}
    if len(tps) < 2 or any(tp < 1 for tp in tps):
        raise TwinInputError(f"tp_split: need >= 2 distinct TP sizes >= 1, got {sorted(tps)}")
    xs = [1.0 / tp for tp, _ in points]
    ys = [y for _, y in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def per_token(v_short: float, v_long: float, tokens_short: float, tokens_long: float) -> tuple[float, float]:
    """``(intercept, slope per token)`` of the line through two (tokens, value) points."""
    if tokens_long <= tokens_short:
        raise TwinInputError(f"per_token: tokens {tokens_long} must exceed {tokens_short}")
    slope = (v_long - v_short) / (tokens_long - tokens_short)
    return v_short - slope * tokens_short, slope


def violations(rows: list[tuple[str, int, int, float]], noise: float) -> list[tuple[tuple, tuple, str]]:
    """Pairs of ``(shape, conc, tp, ttft)`` rows of one shape that break the orderings beyond ``noise``: a larger
    TP at the same CONC slower, or a larger CONC at the same TP faster, each by more than ``1 + noise``."""
    if not (math.isfinite(noise) and noise >= 0):
        raise TwinInputError(f"noise = {noise}: must be a finite number >= 0")
    out = []
    for lo in rows:
        for hi in rows:
            if lo[0] != hi[0]:
                continue
            if lo[1] == hi[1] and hi[2] > lo[2] and hi[3] > lo[3] * (1 + noise):
                out.append((lo, hi, "larger TP slower"))
            if lo[2] == hi[2] and hi[1] > lo[1] and hi[3] * (1 + noise) < lo[3]:
                out.append((lo, hi, "larger CONC faster"))
    return out


def b200_rows() -> list:
    """The gpt-oss B200 silicon cases, one per measurement (the CSV's copies of one run dropped)."""
    from twin.fitting.silicon import model_family, silicon_cases
    seen, out = set(), []
    for c in silicon_cases()[0]:
        r = c.row
        key = (r.isl, r.osl, r.concurrency, r.tp, round(r.ttft_ms, 6), round(r.tpot_ms, 6))
        if model_family(r.model_path) == "gpt-oss" and r.system == "b200_sxm" and key not in seen:
            seen.add(key)
            out.append(c)
    return out


def twin_prompt_step_s(case) -> float:
    """The twin's step (s) of one mean-length prompt beside CONC - 1 mid-output decodes, at the row's server."""
    from types import SimpleNamespace
    from twin.fitting.replay import cost_model_for, deployment_for
    from twin.fitting.silicon import lengths
    r = case.row
    prompt, output = lengths(r)
    cost = cost_model_for(deployment_for(case.run, case.target), case.target, {})
    n, ctx = r.concurrency, int(prompt.mean + output.mean / 2)
    return cost.explain(SimpleNamespace(num_new_tokens=[int(prompt.mean)] + [1] * (n - 1),
                                        num_computed_before=[0] + [ctx] * (n - 1),
                                        num_spec_tokens=[0] * n))["total_s"]


def split_table(cases: list, conc: int, twin: bool) -> None:
    from twin.fitting.silicon import lengths
    by_shape: dict[tuple[int, int], list] = {}
    for c in cases:
        if c.row.concurrency == conc and c.row.vllm_version == RELEASE:
            by_shape.setdefault((c.row.isl, c.row.osl), []).append(c)
    print(f"TTFT = a + b / TP at CONC {conc} (v{RELEASE}; ms)")
    print("| ISL/OSL | mean prompt tokens | measured by TP | a | b | twin prompt step by TP | twin a | twin b |")
    print("|---|---|---|---|---|---|---|---|")
    fits = {}
    for (isl, osl), cs in sorted(by_shape.items()):
        cs = sorted(cs, key=lambda c: c.row.tp)
        a, b = tp_split([(c.row.tp, c.row.ttft_ms) for c in cs])
        cells = [f"{isl}/{osl}", f"{lengths(cs[0].row)[0].mean:.0f}",
                 " / ".join(f"TP{c.row.tp} {c.row.ttft_ms:.1f}" for c in cs), f"{a:.1f}", f"{b:.1f}"]
        ta = tb = None
        if twin:
            steps = [(c.row.tp, 1e3 * twin_prompt_step_s(c)) for c in cs]
            ta, tb = tp_split(steps)
            cells += [" / ".join(f"{s:.1f}" for _, s in steps), f"{ta:.1f}", f"{tb:.1f}"]
        else:
            cells += ["-", "-", "-"]
        fits.setdefault(isl, []).append((lengths(cs[0].row)[0].mean, a, b, ta, tb))
        print("| " + " | ".join(cells) + " |")
    if 1024 in fits and 8192 in fits:
        (t1, a1, b1, ta1, tb1), (t8, a8, b8, ta8, tb8) = fits[1024][0], fits[8192][0]
        for name, v1, v8 in (("measured a", a1, a8), ("measured b", b1, b8), ("twin a", ta1, ta8), ("twin b", tb1, tb8)):
            if v1 is not None:
                i, s = per_token(v1, v8, t1, t8)
                print(f"{name}: {i:.1f} ms + {1e3 * s:.2f} us per prompt token (ISL 1k rows' first shape vs 8k)")


def loaded_table(cases: list, noise: float) -> None:
    rows = [(f"{c.row.isl}/{c.row.osl}", c.row.concurrency, c.row.tp, c.row.ttft_ms) for c in cases
            if c.row.isl == 1024]
    bad = violations(rows, noise)
    print(f"\nordering breaks among the 1k-prompt rows beyond {noise:.0%} ({len(bad)} pairs):")
    for lo, hi, what in bad:
        print(f"  {lo[0]}: C{lo[1]} TP{lo[2]} {lo[3]:.1f} ms vs C{hi[1]} TP{hi[2]} {hi[3]:.1f} ms ({what}, "
              f"{hi[3] / lo[3] - 1:+.0%})")
    touched = sorted({(r[0], r[1], r[2]) for p in bad for r in p[:2]})
    print("rows in a break: " + ", ".join(f"{s} C{c} TP{t}" for s, c, t in touched))




def simulate_table(cases: list) -> None:
    from twin.fitting.fit import simulate_cases
    print(f"\nin-sample, {len(cases)} distinct gpt-oss B200 measurements: TTFT / TPOT |error| median % (signed)")
    print("| variant | " + " | ".join(BANDS) + " |")
    print("|---" * (len(BANDS) + 1) + "|")
    for name, params in VARIANTS.items():
        replayed = simulate_cases(cases, params, max_sim_s=60.0)
        errs = [(c.row, p.metrics["mean_ttft_ms"] / c.row.ttft_ms - 1, p.metrics["mean_tpot_ms"] / c.row.tpot_ms - 1)
                for c, p in zip(cases, replayed)]
        cells = [f"{median_cell([t for r, t, _ in errs if keep(r)])} / {median_cell([p for r, _, p in errs if keep(r)])}"
                 for keep in BANDS.values()]
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--twin", action="store_true", help="also split the twin's prompt step (explain(), no simulation)")
    ap.add_argument("--loaded", action="store_true", help="also list the loaded rows' ordering breaks")
    ap.add_argument("--simulate", action="store_true", help="also simulate the in-sample VARIANTS (~12 min)")
    ap.add_argument("--noise", type=float, default=None, help="with --loaded: relative margin of an ordering break "
                    "(>= 0; default 0.15)")
    ap.add_argument("--conc", type=int, default=4, choices=(4, 8), help="the light-load CONC of the TP split")
    args = ap.parse_args()
    if args.noise is not None and not args.loaded:
        raise TwinInputError("--noise applies to --loaded only")
    noise = 0.15 if args.noise is None else args.noise
    if not (math.isfinite(noise) and noise >= 0):
        raise TwinInputError(f"--noise {noise}: must be a finite number >= 0")
    cases = b200_rows()
    split_table(cases, args.conc, args.twin)
    if args.loaded:
        loaded_table(cases, noise)
    if args.simulate:
        simulate_table(cases)


if __name__ == "__main__":
    run_script(main)
