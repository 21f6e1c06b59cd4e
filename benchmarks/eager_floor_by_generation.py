"""Is the eager prompt-step floor a property of the GPU generation? The host time per decoder layer that each
light-load silicon row implies, on H100 and on B200 (issue 33, round 7; docs/fidelity.md "Round 7: terms by GPU
generation").

For each silicon row at CONC <= ``--max-conc`` whose prompt steps exceed its server's captured CUDA graphs
(``identify.eager_prompt_steps``), with 1k prompts (an 8k prompt step is GPU-bound on both GPUs): the twin's GPU
time of one prompt step of the row's mean prompt (the embedded defaults, no floor), the floor the embedded
defaults put under it, and the TTFT the twin misses at the embedded defaults (measured - predicted, from a
``fidelity_real.py --defaults-only --json`` file). At light load a request's TTFT holds one prompt step, so the
step the row implies is ``max(GPU, floor) + missed`` and the host time per decoder layer is that over the layers
(an upper bound where the missing time is something else). No simulation: the errors come from the JSON.

    python benchmarks/fidelity_real.py --defaults-only --silicon-every 3 --eval-sim-s 60 --workers 1 --json d.json
    python benchmarks/eager_floor_by_generation.py d.json
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import positive_int  # noqa: E402
from benchmarks.fold_report import defaults_cases, read_json  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.fitting.identify import eager_prompt_steps  # noqa: E402
from twin.fitting.joint import FOLDS, all_cases, with_deployments  # noqa: E402
from twin.fitting.replay import cost_model_for  # noqa: E402
from twin.fitting.silicon import SiliconCase  # noqa: E402
from twin.hardware.weight_formats import format_family  # noqa: E402

SHORT_PROMPT_TOKENS = 2048       # 1k rows (ISL 1024: prompts 820-1024 tokens)


def implied_host_s(gpu_s: float, floor_s: float, missed_s: float) -> float:
    """The prompt step a light-load row implies: the twin's step (the longer of GPU time and floor) plus what its
    TTFT misses (s)."""
    return max(gpu_s, floor_s) + missed_s


def implied_moe_layer_s(step_s: float, per_layer_s: float, model) -> float:
    """The implied step's time beyond ``per_layer_s`` x decoder layers, per MoE layer (s): what the row says the
    MoE layers' extra kernels cost (``eager_moe_layer_host_s``), given the per-layer value."""
    return (step_s - per_layer_s * model.num_hidden_layers) / model.moe_layers


def prompt_step_gpu_s(cost, prompt_tokens: int) -> float:
    """The twin's GPU time of one step holding a single uncached prompt of ``prompt_tokens`` (s): the step less the
    eager floor under it."""
    parts = cost.explain(SimpleNamespace(num_new_tokens=[prompt_tokens], num_computed_before=[0], num_spec_tokens=[0]))
    return parts["total_s"] - parts.get("eager_host_floor_s", 0.0)


def silicon_every(path: Path) -> int:
    """The ``--silicon-every`` the ``--defaults-only`` report in ``path`` was made with (its ``args``; 3 where it
    does not say), a whole number >= 1; else one line naming the file."""
    args = read_json(path).get("args")
    if not isinstance(args, dict):
        raise TwinInputError(f"{path}: no args object (make it with fidelity_real.py --defaults-only --json)")
    every = args.get("silicon_every", 3)
    if not isinstance(every, int) or isinstance(every, bool) or every < 1:
        raise TwinInputError(f"{path}: args.silicon_every is {every!r}, not a whole number >= 1")
    return every


def print_medians(title: str, groups: dict[tuple, list[float]], width: int = 24) -> None:
    """Each group's median and range, in ms, under ``title``."""
    print(title)
    for key in sorted(groups):
        v = groups[key]
        print(f"  {' '.join(key):{width}} n={len(v):2d}  {1e3 * statistics.median(v):.2f}  "
              f"(range {1e3 * min(v):.2f}-{1e3 * max(v):.2f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("defaults_json", type=Path)
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--max-conc", type=positive_int, default=8)
    ap.add_argument("--launches", action="store_true",
                    help="beside each group's implied host time per decoder layer, what its host-dispatched ops per "
                         "layer predict at the per-op time of each generation's per-layer reading (round 9, "
                         "twin.fitting.launch_prior); implies --by-path")
    ap.add_argument("--by-path", action="store_true",
                    help="group MoE rows by expert format too, and print each row's implied time per MoE layer "
                         "beyond the embedded per-layer value (round 8b: does the MoE floor follow the path?)")
    args = ap.parse_args()
    args.by_path = args.by_path or args.launches
    by_name = {c["name"]: c for c in defaults_cases(args.defaults_json, need=("measured", "predicted"))}
    every = silicon_every(args.defaults_json)
    cases = [c for c in all_cases(args.ground_truth, silicon_every=every, sources=("silicon",))
             if isinstance(c, SiliconCase) and c.run.name in by_name]
    groups: dict[tuple, list[float]] = collections.defaultdict(list)
    moe_groups: dict[tuple, list[float]] = collections.defaultdict(list)
    print(f"{'GPU':9} {'family':8} {'TP':>2} {'C':>3} | {'GPU step':>8} {'floor':>6} {'missed':>7} | host/layer")
    for c, d in with_deployments(cases):
        rec = by_name[c.run.name]
        m, p = rec["measured"].get("mean_ttft_ms"), rec["predicted"].get("mean_ttft_ms")
        n = int(c.run.prompt_tokens.mean)
        if (m is None or p is None or c.run.max_concurrency > args.max_conc or n >= SHORT_PROMPT_TOKENS
                or not eager_prompt_steps(c, d)):
            continue
        cost = cost_model_for(d, c.target, {})
        floor_s = getattr(cost, "eager_host_s_per_step", 0.0)
        gpu_s = prompt_step_gpu_s(cost, n)
        host = implied_host_s(gpu_s, floor_s, (m - p) / 1e3)
        per_layer = host / d.model.num_hidden_layers
        key = (FOLDS["GPU"](c), FOLDS["family"](c))
        line = (f"{key[0]:9} {key[1]:8} {c.target.tensor_parallel_size:2d} {c.run.max_concurrency:3d} | "
                f"{1e3 * gpu_s:6.1f}ms {1e3 * floor_s:4.1f}ms {m - p:+6.1f}ms | {1e3 * per_layer:.2f} ms")
        if args.by_path and d.model.is_moe:
            key = (*key, format_family(d.weight_formats.routed_experts))
            moe_s = implied_moe_layer_s(host, getattr(cost, "eager_layer_host_s", 0.0), d.model)
            line += (f" | {key[2]:6} {c.row.measured or '-':10} v{c.row.vllm_version or '?':7} "
                     f"{1e3 * moe_s:.2f} ms/MoE layer")
            moe_groups[key].append(moe_s)
        groups[key].append(per_layer)
        print(line)
    print_medians("\nmedian implied host time per decoder layer (ms), light-load 1k rows with eager prompt steps:",
                  groups)
    if moe_groups:
        print_medians("\nmedian implied host time per MoE layer beyond the embedded per-layer value (ms), by expert "
                      "path:", moe_groups)
    if args.launches:
        print_launch_check(groups)


# the per-layer host readings in ms (round 8: H100 median of 8 light-load 1k rows, provenance.HOST_READINGS; B200:
# the embedded GENERATION_TERMS value off the B200 Llama rows), each a dense FP8 layer of launch_prior.DENSE_LAYER_OPS
PER_LAYER_READINGS_MS = (("H100 0.92 ms", 0.92), ("B200 0.84 ms", 0.84))


def predicted_layer_ms(per_layer_ms: float, gpu: str, family: str, fmt: str | None) -> tuple[int, float]:
    """(host-dispatched ops per decoder layer, their host time in ms at the per-op time of ``per_layer_ms``) for a
    row group: a MoE path's count (``launch_prior.PATH_LAYER_OPS``), else the dense layer's; Kimi's 61 decoder
    layers hold 60 MoE ones, so its whole-model mean is ~1/61 below the count's."""
    from twin.fitting.launch_prior import DENSE_LAYER_OPS, GENERIC_MOE_LAYER_OPS, PATH_LAYER_OPS, per_op_s
    gen = "hopper" if gpu.startswith("H100") else "blackwell"
    ops = DENSE_LAYER_OPS if fmt is None else PATH_LAYER_OPS.get((gen, fmt), (GENERIC_MOE_LAYER_OPS, ""))[0]
    return ops, ops * per_op_s(per_layer_ms)


def print_launch_check(groups: dict[tuple, list[float]]) -> None:
    """Each group's implied host time per decoder layer against its op count x the per-op time of each reading."""
    print("\nhost time per decoder layer, implied (median, ms) vs ops per layer x per-op time (launch_prior):")
    print(f"  {'group':24} {'n':>3} {'implied':>8} {'ops':>4} {'us/op':>6} "
          + " ".join(f"{h:>14}" for h, _ in PER_LAYER_READINGS_MS))
    for key in sorted(groups):
        v = groups[key]
        preds = [predicted_layer_ms(ms, key[0], key[1], key[2] if len(key) > 2 else None)
                 for _, ms in PER_LAYER_READINGS_MS]
        print(f"  {' '.join(key):24} {len(v):3d} {1e3 * statistics.median(v):8.2f} {preds[0][0]:4d} "
              f"{1e6 * statistics.median(v) / preds[0][0]:6.1f} "
              + " ".join(f"{p:8.2f} ({100 * (p / (1e3 * statistics.median(v)) - 1):+4.0f}%)" for _, p in preds))


if __name__ == "__main__":
    run_script(main)
