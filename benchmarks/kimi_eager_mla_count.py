"""Kimi-K2.5's MLA layer counted as the mixed eager step it runs (issue 33, round 18; docs/fidelity.md "Round 18:
Kimi-K2.5 NVFP4's eager floor with B200 held out"): a trial of the held-out count prior, not embedded.

A fold that holds out the B200 rows prices each Blackwell expert path's eager MoE floor at its launch count times
the fold's per-op host time (``twin.fitting.launch_prior.path_floor_priors``; the B200 fold: Hopper's 0.92 ms / 16).
``--paths`` adds the MLA layer's mixed-step ops (``twin.fitting.mla_mixed_step``, 7, counted from vLLM v0.17.0) to
the named MLA paths' counts: NVFP4 24 -> 31 (0.46 -> 0.86 ms per MoE layer in the B200 fold), Marlin INT4 26 -> 33
(0.575 -> 0.98 ms). Only folds that reset the generation's MoE floor read these counts (the B200 GPU fold; the
silicon source fold resets every Blackwell eager floor to 0), so every other fold is unchanged.

``--pairs`` prints a reading (no fit, reads B200 rows): the Kimi NVFP4 rows measured twice with one layout,
prompt and load, once in March (1k prompt steps eager: ``--max-num-seqs CONC`` caps the captured graphs at 2 x CONC
tokens) and once on 2026-04-20 (``--max-cudagraph-capture-size 2048``: graphed), and the TTFT difference per MoE
layer.

    python benchmarks/kimi_eager_mla_count.py --pairs --ground-truth ../shared/ground-truth
    python benchmarks/kimi_eager_mla_count.py --paths nvfp4,int4 -- --ground-truth ../shared/ground-truth \\
        --workers 1 --folds GPU --groups B200 --json X.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
from contextlib import nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmarks.fidelity_passthrough import run_fidelity_real, split_at_dashes  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402

PATHS = {"nvfp4": ("blackwell", "nvfp4"), "int4": ("blackwell", "int4")}
KIMI_LAYERS, KIMI_MOE_LAYERS = 61, 60     # Kimi-K2.5: the first decoder layer is dense (first_k_dense_replace 1)
EMBEDDED_PER_LAYER_MS = 0.84             # Blackwell's eager_layer_host_s (twin.cost.default_terms)


def parse_paths(text: str) -> tuple[tuple[str, str], ...]:
    """``nvfp4,int4`` -> the (generation, format) keys; one line naming a wrong or repeated name."""
    names = [n.strip() for n in text.split(",")]
    bad = [n for n in names if n not in PATHS]
    if bad or not names:
        raise TwinInputError(f"--paths: {bad[0] if bad else text!r} is not one of {', '.join(PATHS)}")
    if len(set(names)) != len(names):
        raise TwinInputError(f"--paths: {text!r} names a path twice")
    return tuple(PATHS[n] for n in names)


def counted(paths):
    """The mixed-step counts of ``paths`` in the held-out count table (in place, carried to every simulation worker:
    every fold run inside the block sees them), restored when the block ends (also on error)."""
    from twin.fitting import launch_prior
    from twin.fitting.carried_patches import Patch, carried
    from twin.fitting.mla_mixed_step import with_mixed_step
    return carried(Patch(launch_prior.__name__, "PATH_LAYER_OPS", with_mixed_step(launch_prior.PATH_LAYER_OPS, paths),
                         "dict"))


# the April script's --max-cudagraph-capture-size: a longer prompt's step is eager in both series (no pair)
APRIL_CAPTURE_TOKENS = 2048


def pair_key(row) -> tuple:
    return row.tp, row.isl, row.osl, row.concurrency


def paired_differences(rows) -> list[tuple[tuple, float, float]]:
    """(layout key, March mean TTFT ms, April mean TTFT ms) for every Kimi NVFP4 B200 layout measured in both
    series whose April prompt step is graphed (ISL <= ``APRIL_CAPTURE_TOKENS``; duplicates averaged)."""
    from twin.fitting.silicon import kimi_april_fp4, model_family
    march: dict[tuple, list[float]] = {}
    april: dict[tuple, list[float]] = {}
    for row in rows:
        if model_family(row.model_path) != "kimi" or (row.precision or "").lower() != "fp4" or not row.ttft_ms > 0:
            continue
        if kimi_april_fp4(row):
            april.setdefault(pair_key(row), []).append(row.ttft_ms)
        elif row.month.startswith("2026-03"):
            march.setdefault(pair_key(row), []).append(row.ttft_ms)
    both = sorted(k for k in march.keys() & april.keys() if k[1] <= APRIL_CAPTURE_TOKENS)
    return [(k, statistics.mean(march[k]), statistics.mean(april[k])) for k in both]


def graphed_step_ms(ground_truth: Path, tp: int, isl: int, osl: int, conc: int) -> float:
    """The twin's time (embedded defaults) of the April series' graphed mixed step for the layout: one prompt of
    0.9 x ISL (the client's mean length) beside CONC - 1 decodes (ms)."""
    from types import SimpleNamespace

    from twin.fitting.replay import cost_model_for, deployment_for
    from twin.fitting.silicon import kimi_april_fp4, silicon_cases
    from twin.fitting.silicon_rows import CSV_NAME, read_silicon, silicon_dir
    rows = [r for r in read_silicon(silicon_dir(ground_truth) / CSV_NAME)
            if kimi_april_fp4(r) and pair_key(r) == (tp, isl, osl, conc)]
    case = silicon_cases(ground_truth, rows=rows[:1])[0][0]
    cost = cost_model_for(deployment_for(case.run, case.target), case.target, {})
    step = SimpleNamespace(num_new_tokens=[int(0.9 * isl)] + [1] * (conc - 1),
                           num_computed_before=[0] + [isl] * (conc - 1), num_spec_tokens=[0] * conc)
    return 1e3 * cost.explain(step)["total_s"]


def print_pairs(ground_truth: Path) -> None:
    from twin.fitting.silicon_rows import CSV_NAME, read_silicon, silicon_dir
    pairs = paired_differences(read_silicon(silicon_dir(ground_truth) / CSV_NAME))
    if not pairs:
        raise TwinInputError(f"{ground_truth}: no Kimi NVFP4 layout measured in both March and April")
    print("the eager step a pair implies = the TTFT difference + the twin's graphed step (its floor hides the GPU)")
    print("TP  ISL/OSL   CONC  March ms  April ms  diff ms  graphed ms  eager step ms  per MoE layer beyond 0.84 ms")
    for (tp, isl, osl, conc), m, a in pairs:
        g = graphed_step_ms(ground_truth, tp, isl, osl, conc)
        beyond = (m - a + g - EMBEDDED_PER_LAYER_MS * KIMI_LAYERS) / KIMI_MOE_LAYERS
        print(f"{tp:2d}  {isl}/{osl:<5d} {conc:4d}  {m:8.1f}  {a:8.1f}  {m - a:7.1f}  {g:10.1f}  {m - a + g:13.1f}"
              f"  {beyond:6.2f}")


def main() -> None:
    own, rest = split_at_dashes(sys.argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--paths", default="", help="comma-separated MLA paths counted as mixed steps: nvfp4, int4")
    ap.add_argument("--pairs", action="store_true", help="print the March / April pairs' TTFT differences and stop")
    ap.add_argument("--ground-truth", type=Path, help="with --pairs: the ground-truth folder")
    args = ap.parse_args(own)
    if args.pairs:
        if args.paths or rest or args.ground_truth is None:
            raise TwinInputError("--pairs takes --ground-truth only (no --paths, nothing after --)")
        print_pairs(args.ground_truth)
        return
    if args.ground_truth is not None:
        raise TwinInputError("--ground-truth before -- is for --pairs; pass fidelity_real's after --")
    if not rest:
        raise TwinInputError("give fidelity_real.py's arguments after -- (e.g. --folds GPU --groups B200)")
    with counted(parse_paths(args.paths)) if args.paths else nullcontext():
        run_fidelity_real(rest)


if __name__ == "__main__":
    run_script(main)
