"""The sort-based top-k / top-p sampler's time per sequence per step (``twin.cost.sort_sampler``) and which silicon
rows pay it (``twin.fitting.sampler_facts``): the part of a fold's ``per_seq_overhead_s@sync`` prior beside the
sync loop's host time (issue 33, round 10; docs/fidelity.md "Round 10: Qwen3's sync decode and Kimi INT4 held
out"). Prints the byte count per vocabulary entry, the time per sequence for every model and GPU of the silicon
rows at the datasheet bandwidth, and the rows that pay it by (model, GPU, vLLM release, client).

    python benchmarks/sync_sampler_prior.py [--ground-truth ../shared/ground-truth]
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    from twin.cost.sort_sampler import SORT_SAMPLER_BYTES, SORT_SAMPLER_BYTES_PER_ENTRY, sort_sampler_seq_s
    from twin.fitting.sampler_facts import pays_sort_sampler
    from twin.fitting.silicon import silicon_cases
    from twin.hardware.gpus import resolve_gpu
    from twin.hardware.model_catalog import resolve_model

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ground-truth", type=Path, default=None)
    args = ap.parse_args()
    print("bytes per vocabulary entry, beyond the greedy path:")
    for what, b in SORT_SAMPLER_BYTES:
        print(f"  {b:5d}  {what}")
    print(f"  {SORT_SAMPLER_BYTES_PER_ENTRY:5d}  in all")
    cases, _ = silicon_cases(args.ground_truth)
    groups: dict[tuple, list] = collections.defaultdict(list)
    for c in cases:
        groups[(resolve_model(c.target.model).name, c.target.gpu, c.row.vllm_version or "-",
                "published" if c.row.published_client else "gap-analysis")].append(c)
    print("\n| model | GPU | vLLM | client | rows | vocab | us per sequence (if sampled so) | pays it |")
    print("|---|---|---|---|---|---|---|---|")
    for (model, gpu, version, client), cs in sorted(groups.items()):
        vocab = resolve_model(cs[0].target.model).vocab_size
        us = sort_sampler_seq_s(vocab, resolve_gpu(gpu).memory_bandwidth_bytes_per_s) * 1e6
        paid = sum(pays_sort_sampler(c) for c in cs)
        print(f"| {model} | {gpu} | {version} | {client} | {len(cs)} | {vocab:,} | {us:.2f} | {paid} |")


if __name__ == "__main__":
    main()
