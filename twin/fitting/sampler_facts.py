"""Which measured rows paid vLLM's sort-based top-k / top-p sampler (``twin.cost.sort_sampler``), from facts about
their client, their model's generation config and their vLLM release; and the per-sequence time it gives a fold
that holds those rows out (issue 33, round 10; docs/fidelity.md "Round 10: Qwen3's sync decode and Kimi INT4 held
out").

A row pays it where all three hold:
1. its client sends no sampling parameters: a silicon row without a published client (``aic-auto-gap-analysis``;
   aiconfigurator's eval runner sends ``max_tokens``, ``min_tokens`` and ``ignore_eos`` only). InferenceX's
   ``vllm bench serve`` sends temperature 0 (greedy); the inference-perf client's sampling is not asserted here;
2. its model's ``generation_config.json`` sets top-k or top-p (``GENERATION_CONFIG_TOP_K_TOP_P``: Qwen3-32B,
   temperature 0.6, top-k 20, top-p 0.95, per its model card; other models not asserted);
3. its vLLM release samples with the PyTorch sort by default (``SORT_SAMPLER_RELEASES``: 0.12, between
   vllm-project/vllm#26859 / #29415, FlashInfer's sampler opt-in, and the 2026 Triton kernel, #32558 / #33538).

In this data that is exactly the Qwen3-32B H100 rows, also the only server without async scheduling: the two
costs are one per-sequence constant in every Qwen3 row (``per_seq_overhead_s@sync``), so a fold that holds them
out (no sync server in training) gets this time beside the sync loop's host time (``twin.fitting.held_priors``).
Round 11: the time is the kernel-by-kernel estimate at each held-out row's batch (``twin.cost.sort_sampler``:
16.6 us per Qwen3 sequence on an H100 below 128 rows, 19.0 us from 128), no longer the datasheet bound (11.25 us).
"""

from __future__ import annotations

from typing import Iterable

from twin.cost.sort_sampler import sort_sampler_seq_s
from twin.hardware.gpus import resolve_gpu
from twin.hardware.model_catalog import resolve_model

# model (catalog name) -> (temperature, top_k, top_p) of its generation_config.json, where it sets top-k / top-p
GENERATION_CONFIG_TOP_K_TOP_P: dict[str, tuple[float, int, float]] = {"qwen3-32b": (0.6, 20, 0.95)}
SORT_SAMPLER_RELEASES = ("0.12",)       # vLLM releases (major.minor) whose CUDA default is the PyTorch sort


def pays_sort_sampler(case) -> bool:
    """Whether a fit case's server sampled every sequence with the sort-based top-k / top-p path (the three
    facts above; False where any is not asserted)."""
    row = getattr(case, "row", None)
    if row is None or row.published_client:
        return False
    release = ".".join((row.vllm_version or "").split(".")[:2])
    return release in SORT_SAMPLER_RELEASES and resolve_model(case.target.model).name in GENERATION_CONFIG_TOP_K_TOP_P


def sort_sampler_prior_s(cases: Iterable) -> float:
    """Seconds per sequence per step: the mean over ``cases`` that pay it of the sort sampler's time at their
    model's vocabulary, their GPU's datasheet bandwidth and their batch (the sort's path; round 11: radix passes at
    CUB's stated fraction of the datasheet, ``twin.cost.sort_sampler``), 0 where none does."""
    times = [sort_sampler_seq_s(resolve_model(c.target.model).vocab_size,
                                resolve_gpu(c.target.gpu).memory_bandwidth_bytes_per_s,
                                max(1, c.row.batch_size or c.row.concurrency))
             for c in cases if pays_sort_sampler(c)]
    return sum(times) / len(times) if times else 0.0
