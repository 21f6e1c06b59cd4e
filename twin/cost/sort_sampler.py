"""The GPU time per sequence per step of vLLM's sort-based top-k / top-p sampler: ``sort_sampler_seq_s`` (seconds
per sampled sequence per step; reported in us). Issue 33, round 10 (docs/fidelity.md "Round 10: Qwen3's sync
decode and Kimi INT4 held out").

**When a server pays it (facts).**
* A request that gives no ``temperature`` / ``top_k`` / ``top_p`` is sampled with the model's own
  ``generation_config.json`` (vLLM's ``--generation-config`` is ``auto`` by default; the server logs that the
  model's recommended sampling parameters override its own defaults). Qwen3-32B's sets temperature 0.6, top-k 20,
  top-p 0.95 (its model card: "the default setting in generation_config.json").
* ``vllm bench serve`` (InferenceX's client) sends ``temperature`` 0.0 when none is given ("Default to greedy
  decoding"): vLLM's sampler then returns the argmax and runs none of what follows. aiconfigurator's eval runner
  (``src/aiconfigurator/eval/benchmarks/genai_perf_runner.py``: streaming chat, fixed lengths, ``max_tokens``,
  ``min_tokens``, ``ignore_eos`` as extra inputs, ``10 x CONC`` requests after ``2 x CONC`` warm-ups) sends no
  sampling parameters, so the model's generation config applies.
* With top-k and top-p set, vLLM V1's sampler on CUDA runs FlashInfer's sort-free kernel only where
  ``VLLM_USE_FLASHINFER_SAMPLER=1`` is set: it was made opt-in in October 2025 (vllm-project/vllm#26859, "Disable
  FlashInfer sampler by default"; #29415, 2025-11-25: "disabled by default and opt-in"), and the Triton top-k /
  top-p kernel that later replaced the PyTorch path came in 2026 (#32558 / #33538). So vLLM 0.12.0 runs the
  PyTorch path: ``apply_top_k_top_p`` sorts every row of the fp32 logits over the whole vocabulary.

**What it costs.** Per vocabulary entry of each sequence, beyond the greedy path's fp32 copy and argmax, the bytes
the PyTorch path moves through HBM (each kernel reads and writes whole rows; counted from the kernel sequence, not
measured): temperature scaling (read, write fp32: 8); the sort, which PyTorch's CUDA stable sort
(``aten/src/ATen/native/cuda/SortStable.cu``, ``launch_stable_sort_kernel``) runs for 2 to 127 rows as a full sort
of the whole batch followed by a sort by row (``segmented_sort_pairs_by_full_sort``): an (index, row) fill (int2:
8), an LSD radix sort of the fp32 keys with int2 values (four 8-bit passes reading and writing both, 4 x 2 x 12 =
96, and the key histogram 4), one radix pass on the row bits (int64 read and written: 16, histogram 8) and a
post-process that gathers the values and writes values and int64 indices (24): 156 in all (1 row: a plain
4-pass sort, 108; 128 rows and more: CUB's segmented sort, about as much); the top-k mask and fill (10), top-p's
softmax over the sorted row (12), cumulative sum (8), mask and fill (10), the scatter back to vocabulary order
(index, value, value: 16), the softmax to probabilities (12) and the exponential-race draw (noise written 4,
divide 12; its argmax replaces the greedy one): ``SORT_SAMPLER_BYTES_PER_ENTRY`` = 248 bytes. At the GPU's
datasheet bandwidth that is a LOWER bound: a radix pass and a gather are not streaming copies.
Qwen3-32B (151,936 entries) on an H100 SXM (3.35 TB/s): 37.7 MB per sequence, 11.25 us per sequence per step.
It is not divided by TP (every rank, or rank 0 alone, samples the whole batch over the whole vocabulary) and does
not grow with the context: the shape of the per-sequence cost the Qwen3 rows show (round 6).
"""

from __future__ import annotations

from twin.cost.param_checks import check_nonneg
from twin.errors import TwinInputError

# (what, bytes per vocabulary entry): the PyTorch top-k / top-p path of vLLM 0.12 beyond the greedy one
SORT_SAMPLER_BYTES: tuple[tuple[str, int], ...] = (
    ("temperature: read, write fp32", 8),
    ("sort: index-and-row fill (int2)", 8),
    ("sort: 4 radix passes x read/write (fp32 key + int2 value)", 96),
    ("sort: key histogram", 4),
    ("sort: 1 radix pass by row x read/write (int64 key)", 16),
    ("sort: its histogram", 8),
    ("sort: post-process (read int2, gather value, write value and int64 index)", 24),
    ("top-k: compare (fp32 -> bool), masked fill", 10),
    ("top-p: softmax over the sorted row", 12),
    ("top-p: cumulative sum", 8),
    ("top-p: compare, masked fill", 10),
    ("scatter to vocabulary order (int64 index, fp32 value)", 16),
    ("softmax to probabilities", 12),
    ("exponential noise written", 4),
    ("probabilities / noise", 12),
    ("argmax of the draw", 4),
    ("less the greedy path's argmax", -4),
)
SORT_SAMPLER_BYTES_PER_ENTRY = sum(b for _, b in SORT_SAMPLER_BYTES)


def sort_sampler_seq_s(vocab_size: int, memory_bytes_per_s: float) -> float:
    """Seconds per sampled sequence per step of the sort-based top-k / top-p path at ``memory_bytes_per_s`` (a
    lower bound at the datasheet bandwidth); a one-line error for a negative vocabulary or a bandwidth <= 0."""
    check_nonneg("vocab_size", vocab_size)
    if isinstance(memory_bytes_per_s, bool) or not isinstance(memory_bytes_per_s, (int, float)) \
            or not 0 < memory_bytes_per_s < float("inf"):
        raise TwinInputError(f"memory_bytes_per_s = {memory_bytes_per_s!r}: must be a finite number > 0 (bytes/s)")
    return SORT_SAMPLER_BYTES_PER_ENTRY * vocab_size / memory_bytes_per_s


def explain_sort_sampler(vocab_size: int, memory_bytes_per_s: float) -> str:
    """One line for a report: bytes per entry, per sequence, and the time per sequence per step."""
    s = sort_sampler_seq_s(vocab_size, memory_bytes_per_s)
    return (f"sort_sampler_seq_s = {SORT_SAMPLER_BYTES_PER_ENTRY} B x {vocab_size:,} entries / "
            f"{memory_bytes_per_s / 1e12:.2f} TB/s = {s * 1e6:.2f} us per sequence per step")
