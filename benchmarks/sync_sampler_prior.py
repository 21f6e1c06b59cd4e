"""The sort-based top-k / top-p sampler's time per sequence per step (``twin.cost.sort_sampler``) and which silicon
rows pay it (``twin.fitting.sampler_facts``): the part of a fold's ``per_seq_overhead_s@sync`` prior beside the
sync loop's host time (issue 33, round 10; docs/fidelity.md "Round 10: Qwen3's sync decode and Kimi INT4 held
out"; round 11: "Round 11: Qwen3's sampler and the sync step"). Prints the kernels by PyTorch's stable-sort path
(one row, full sort below 128 rows, CUB segmented from 128) with their bytes per vocabulary entry by class
(streaming, radix passes) and launches per step; the time per sequence for every model and GPU of the silicon
rows (radix passes at CUB's stated fraction of the datasheet, the rest at the datasheet; in brackets all at the
datasheet, round 10's bound); and the rows that pay it by (model, GPU, vLLM release, client).

    python benchmarks/sync_sampler_prior.py [--ground-truth ../shared/ground-truth]
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from twin.errors import run_script  # noqa: E402


def main() -> None:
    from twin.cost.sort_sampler import (RADIX_SORT_BANDWIDTH_FRACTION, SORT_KERNELS, sampler_bytes, sampler_kernels,
                                        sort_sampler_bound_s, sort_sampler_seq_s)
    from twin.fitting.sampler_facts import pays_sort_sampler
    from twin.fitting.silicon import silicon_cases
    from twin.hardware.gpus import resolve_gpu
    from twin.hardware.model_catalog import resolve_model

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ground-truth", type=Path, default=None)
    args = ap.parse_args()
    print("kernels beyond the greedy path: bytes per vocabulary entry, class, launches per step")
    for path, rows in zip(SORT_KERNELS, (1, 64, 128)):
        print(f"\n{path} (e.g. {rows} rows):")
        for what, b, cls, n in sampler_kernels(rows):
            print(f"  {b:4d}  {cls:<6} {n:2d}  {what}")
        by = sampler_bytes(rows)
        print(f"  in all: {by['stream']} B streaming + {by['radix']} B radix passes (at "
              f"{RADIX_SORT_BANDWIDTH_FRACTION} of the datasheet), {sum(n for *_, n in sampler_kernels(rows))} kernels")
    cases, _ = silicon_cases(args.ground_truth)
    groups: dict[tuple, list] = collections.defaultdict(list)
    for c in cases:
        groups[(resolve_model(c.target.model).name, c.target.gpu, c.row.vllm_version or "-",
                "published" if c.row.published_client else "gap-analysis")].append(c)
    print("\n| model | GPU | vLLM | client | rows | vocab | us per sequence at batch 64 / 128 (bound at 64) "
          "| pays it |")
    print("|---|---|---|---|---|---|---|---|")
    for (model, gpu, version, client), cs in sorted(groups.items()):
        vocab = resolve_model(cs[0].target.model).vocab_size
        bw = resolve_gpu(gpu).memory_bandwidth_bytes_per_s
        us = [sort_sampler_seq_s(vocab, bw, r) * 1e6 for r in (64, 128)]
        paid = sum(pays_sort_sampler(c) for c in cs)
        print(f"| {model} | {gpu} | {version} | {client} | {len(cs)} | {vocab:,} | {us[0]:.2f} / {us[1]:.2f} "
              f"({sort_sampler_bound_s(vocab, bw, 64) * 1e6:.2f}) | {paid} |")


if __name__ == "__main__":
    run_script(main)
