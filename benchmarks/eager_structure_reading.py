"""Which structure of the eager step do the light-load eager rows read? (issue 33, round 18; docs/fidelity.md
"Round 18: the eager step's structure"). A reading in sample: no simulation, no fit of the twin.

For every silicon row at CONC <= ``--max-conc`` with 1k prompts whose prompt steps no CUDA graph covers
(``benchmarks/eager_floor_by_generation.py``'s rows), the step the row implies is ``S = max(GPU, floor) +
missed`` (the twin's GPU time of one prompt step, the embedded floor under it, and the TTFT the embedded defaults
miss, from a ``fidelity_real.py --defaults-only --json`` file). Each structure of ``twin.cost.eager_steps`` then
states the step from a per-decoder-layer host time ``a`` and a per-MoE-layer extra ``b``:

- ``max``:          S = max(GPU, a x layers + b x MoE layers)   (the embedded structure)
- ``additive``:     S = GPU + a x layers + b x MoE layers
- ``moe_additive``: S = max(GPU, a x layers) + b x MoE layers

Per structure it fits ``a`` and ``b`` (least squares on log S, all rows of one GPU together) and prints each row's
residual, the median |residual| by model and TP, and the host time per layer each row implies alone (the
structure's one-parameter reading: does one per-layer time hold across TP?).

    python benchmarks/fidelity_real.py --defaults-only --silicon-every 3 --eval-sim-s 60 --workers 1 --json d.json
    python benchmarks/eager_structure_reading.py d.json --gpu B200
"""

from __future__ import annotations

import argparse
import collections
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from eager_floor_by_generation import SHORT_PROMPT_TOKENS, prompt_step_gpu_s, silicon_every  # noqa: E402

from benchmarks.cli_checks import positive_int  # noqa: E402
from benchmarks.fold_report import defaults_cases  # noqa: E402
from twin.cost.eager_steps import EAGER_STRUCTURES  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.fitting.identify import eager_prompt_steps  # noqa: E402
from twin.fitting.joint import FOLDS, all_cases, with_deployments  # noqa: E402
from twin.fitting.replay import cost_model_for  # noqa: E402
from twin.fitting.silicon import SiliconCase  # noqa: E402
from twin.hardware.weight_formats import format_family  # noqa: E402


def structure_step_s(name: str, gpu_s: float, layers: int, moe_layers: int, a: float, b: float) -> float:
    """The eager step (s) that structure ``name`` states from the GPU time and the host terms."""
    if name == "max":
        return max(gpu_s, a * layers + b * moe_layers)
    if name == "additive":
        return gpu_s + a * layers + b * moe_layers
    if name == "moe_additive":
        return max(gpu_s, a * layers) + b * moe_layers
    raise TwinInputError(f"structure {name!r}: allowed: {', '.join(EAGER_STRUCTURES)}")


def alone_per_layer_s(name: str, step_s: float, gpu_s: float, layers: int) -> float | None:
    """The host time per decoder layer one row implies with no MoE extra (``b`` = 0); None where the structure
    cannot read it (``max`` / ``moe_additive`` on a row whose step is not above its GPU time)."""
    if name == "additive":
        return (step_s - gpu_s) / layers
    return step_s / layers if step_s > gpu_s else None


def fit_terms(name: str, rows: list[dict]) -> tuple[float, float]:
    """(a, b) in s minimising the squared log ratios of the structure's step to the rows' implied steps; b = 0
    where no row is MoE."""
    import numpy as np
    from scipy.optimize import least_squares

    moe = any(r["moe_layers"] for r in rows)

    def resid(x):
        a, b = x[0], (x[1] if moe else 0.0)
        return np.array([math.log(max(structure_step_s(name, r["gpu_s"], r["layers"], r["moe_layers"], a, b),
                                      1e-6) / r["step_s"]) for r in rows])

    x0 = [0.8e-3, 1.0e-3] if moe else [0.8e-3]
    fit = least_squares(resid, x0, bounds=([0.0] * len(x0), [10e-3] * len(x0)), x_scale=1e-3)
    return float(fit.x[0]), float(fit.x[1]) if moe else 0.0


def light_rows(defaults_json: Path, ground_truth: Path | None, gpu: str, max_conc: int) -> list[dict]:
    """The light-load 1k eager rows of ``gpu``: their group, GPU step, implied step and layer counts."""
    by_name = {c["name"]: c for c in defaults_cases(defaults_json, need=("measured", "predicted"))}
    cases = [c for c in all_cases(ground_truth, silicon_every=silicon_every(defaults_json), sources=("silicon",))
             if isinstance(c, SiliconCase) and c.run.name in by_name and FOLDS["GPU"](c) == gpu]
    out = []
    for c, d in with_deployments(cases):
        rec = by_name[c.run.name]
        m, p = rec["measured"].get("mean_ttft_ms"), rec["predicted"].get("mean_ttft_ms")
        n = int(c.run.prompt_tokens.mean)
        if (m is None or p is None or c.run.max_concurrency > max_conc or n >= SHORT_PROMPT_TOKENS
                or not eager_prompt_steps(c, d)):
            continue
        cost = cost_model_for(d, c.target, {})
        gpu_s = prompt_step_gpu_s(cost, n)
        step = max(gpu_s, getattr(cost, "eager_host_s_per_step", 0.0)) + (m - p) / 1e3
        fmt = (format_family(d.weight_formats.routed_experts) if d.model.is_moe
               else f"dense {(c.row.precision or '?').lower()}")
        out.append({"group": f"{FOLDS['family'](c)} {fmt}", "tp": c.target.tensor_parallel_size,
                    "conc": c.run.max_concurrency, "gpu_s": gpu_s, "step_s": step,
                    "layers": d.model.num_hidden_layers, "moe_layers": d.model.moe_layers if d.model.is_moe else 0})
    return out


def report(name: str, rows: list[dict]) -> None:
    a, b = fit_terms(name, rows)
    print(f"\n== {name}: a = {1e3 * a:.3f} ms per decoder layer, b = {1e3 * b:.3f} ms per MoE layer (fitted on "
          f"{len(rows)} rows)")
    cells: dict[tuple, list[float]] = collections.defaultdict(list)
    alone: dict[tuple, list[float]] = collections.defaultdict(list)
    for r in rows:
        pred = structure_step_s(name, r["gpu_s"], r["layers"], r["moe_layers"], a, b)
        cells[(r["group"], r["tp"])].append(pred / r["step_s"] - 1)
        one = alone_per_layer_s(name, r["step_s"], r["gpu_s"], r["layers"])
        if one is not None:
            alone[(r["group"],)].append(one)
    print(f"  {'group':22} {'TP':>2} {'n':>2}  step error with the fitted a, b (median, range)")
    for key in sorted(cells):
        v = cells[key]
        print(f"  {key[0]:22} {key[1]:2d} {len(v):2d}  {100 * statistics.median(v):+6.1f} %  "
              f"({100 * min(v):+.1f}..{100 * max(v):+.1f})")
    every = [abs(x) for v in cells.values() for x in v]
    print(f"  all rows: median |step error| {100 * statistics.median(every):.1f} %, max {100 * max(every):.1f} %")
    print("  one row alone, no MoE extra: host per decoder layer (ms, median and range by group)")
    for key in sorted(alone):
        v = alone[key]
        print(f"    {key[0]:22} n={len(v):2d} {1e3 * statistics.median(v):.2f} ({1e3 * min(v):.2f}-"
              f"{1e3 * max(v):.2f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("defaults_json", type=Path)
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--gpu", default="B200", choices=("B200", "H100-SXM"))
    ap.add_argument("--max-conc", type=positive_int, default=8)
    args = ap.parse_args()
    rows = light_rows(args.defaults_json, args.ground_truth, args.gpu, args.max_conc)
    if not rows:
        raise TwinInputError(f"{args.defaults_json}: no light-load 1k eager {args.gpu} row")
    print(f"{'group':22} {'TP':>2} {'C':>3} | {'GPU step':>8} {'implied step':>12}")
    for r in sorted(rows, key=lambda r: (r["group"], r["tp"], r["conc"])):
        print(f"{r['group']:22} {r['tp']:2d} {r['conc']:3d} | {1e3 * r['gpu_s']:6.1f}ms {1e3 * r['step_s']:10.1f}ms")
    for name in EAGER_STRUCTURES:
        report(name, rows)


if __name__ == "__main__":
    run_script(main)
