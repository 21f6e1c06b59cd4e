"""The GPU time per sequence per step of vLLM's sort-based top-k / top-p sampler: ``sort_sampler_seq_s`` (seconds
per sampled sequence per step; reported in us). Issue 33, rounds 10-11 (docs/fidelity.md "Round 10: Qwen3's sync
decode and Kimi INT4 held out", "Round 11: Qwen3's sampler and the sync step").

**When a server pays it (facts; ``twin.fitting.sampler_facts``).** A request without sampling parameters is sampled
with the model's ``generation_config.json`` (vLLM's ``--generation-config auto``); Qwen3-32B's sets top-k 20, top-p
0.95. InferenceX's ``vllm bench serve`` sends temperature 0 (greedy: argmax only). With top-k and top-p set, vLLM
0.12 on CUDA runs the PyTorch path (FlashInfer's sort-free sampler opt-in: vllm-project/vllm#26859, #29415; the
Triton kernel is from 2026: #32558 / #33538): ``apply_top_k_top_p`` sorts every row of the fp32 logits.

**Its kernels (round 11), by the number of rows B the sampler sees.** ``torch.sort`` on a (B, V) fp32 tensor with
V > 4,096 runs PyTorch's stable sort (``aten/src/ATen/native/cuda/SortStable.cu``, ``launch_stable_sort_kernel``),
which picks one of three paths by B: B = 1, one CUB radix sort of (key, int64 index) pairs; 2 <= B < 128, a full
sort of all B x V keys with (row, index) int2 values followed by a keys-only sort of the int64 (row, index) words
on their ceil(log2 B) row bits and a post-process gather (``segmented_sort_pairs_by_full_sort``); B >= 128, CUB's
segmented radix sort (``DeviceSegmentedRadixSort``: one thread block per row; its SM90 policy sorts 6, then 5
bits per pass: 6 passes for 32-bit keys, each an upsweep read of the keys and a downsweep read and write of keys
and int64 values). CUB's SM90 device-wide sort of 32-bit keys is Onesweep (8-bit digits: a histogram read of the
keys, then 4 passes each reading and writing keys and values). Around the sort vLLM 0.12's path runs (all
sequences sampled, so no greedy argmax): temperature (in-place divide), top-k (gather the k-th value, compare,
masked fill), top-p (softmax of the sorted row: cunn_SoftMaxForward reads a row of more than shared memory three
times and writes once; cumulative sum; compare; masked fill), the out-of-place scatter back to vocabulary order
(a copy, then the scatter), the softmax to probabilities and the exponential-race draw (noise written, divide,
argmax). ``sampler_bytes`` counts each kernel's bytes per vocabulary entry in two classes: streaming kernels and
radix-sort passes.

**Achieved rates (the estimate; round 10 put every byte at the datasheet rate, a lower bound).** Streaming kernels
are put at the datasheet bandwidth (still a lower bound for them). Radix-sort passes run well below it: CUB's own
tuning notes (``cub/device/dispatch/dispatch_radix_sort.cuh``, Policy500: "1.92B 32b pairs/s (TitanX)", 5 passes
of 20 bytes per pair on a 336.5 GB/s Titan X) put a pairs sort at ``RADIX_SORT_BANDWIDTH_FRACTION`` = 0.57 of the
datasheet; the same notes' keys-only and segmented figures give 0.62 and 0.66, and Onesweep's paper (Adinets &
Merrill 2022: 29.4 G 32-bit keys/s on an A100, 36 bytes per key) 0.52-0.68. Qwen3-32B (151,936 entries) on an H100
SXM (3.35 TB/s) at B = 64: 16.6 us per sequence per step (the round-10 bound: 11.25 us). Large-N figures: at these
sizes (1-20 M keys) a pass's fixed costs come on top, so this is still an estimate from below.

**Per step.** ``sampler_kernels_per_step`` counts the launches (about 35): on a sync server they are queued while
the forward pass's CUDA graph runs (milliseconds), so their host time is hidden; each costs the GPU a minimum
duration per step, whatever B. The Qwen3 rows do not identify a per-step part (``benchmarks/sync_sampler_shape.py``),
so the term is per sequence. It is not divided by TP and does not grow with the context.
"""

from __future__ import annotations

from twin.cost.param_checks import check_nonneg
from twin.errors import TwinInputError

STREAM, RADIX = "stream", "radix"
SEGMENTED_SORT_MIN_ROWS = 128         # SortStable.cu: nsegments < 128 -> the full sort, else CUB's segmented sort
RADIX_SORT_BANDWIDTH_FRACTION = 0.57  # CUB's tuning note: 1.92 G 32-bit pairs/s x 100 B / 336.5 GB/s (Titan X)

# (what, bytes per vocabulary entry, class, kernels per step): vLLM 0.12's path beyond the greedy one, sort aside
COMMON_KERNELS: tuple[tuple[str, int, str, int], ...] = (
    ("temperature: in-place divide (read, write fp32)", 8, STREAM, 1),
    ("top-k: k-th value gathered (per row), compare (fp32 -> bool)", 5, STREAM, 4),
    ("top-k: masked fill (mask, read, write)", 9, STREAM, 1),
    ("top-p: softmax of the sorted row (three reads, one write)", 16, STREAM, 1),
    ("top-p: cumulative sum", 8, STREAM, 1),
    ("top-p: compare, keep the last entry", 5, STREAM, 3),
    ("top-p: masked fill", 9, STREAM, 1),
    ("scatter back: out-of-place copy", 8, STREAM, 1),
    ("scatter back: int64 index, fp32 value read, fp32 written", 16, STREAM, 1),
    ("softmax to probabilities (three reads, one write)", 16, STREAM, 1),
    ("exponential noise written", 4, STREAM, 1),
    ("probabilities / noise", 12, STREAM, 1),
    ("argmax of the draw, less the greedy path's argmax", 0, STREAM, 0),
)
# the sort by path (SortStable.cu), same layout
SORT_KERNELS: dict[str, tuple[tuple[str, int, str, int], ...]] = {
    "one row": (
        ("index fill (int64)", 8, STREAM, 1),
        ("Onesweep key histogram", 4, RADIX, 2),
        ("Onesweep: 4 passes x read/write (fp32 key + int64 index)", 96, RADIX, 8),
    ),
    "full sort": (
        ("(row, index) fill (int2)", 8, STREAM, 1),
        ("Onesweep key histogram", 4, RADIX, 2),
        ("Onesweep: 4 passes x read/write (fp32 key + int2 value)", 96, RADIX, 8),
        ("keys-only sort on the row bits: histogram (int64)", 8, RADIX, 2),
        ("keys-only sort on the row bits: 1 pass x read/write (int64)", 16, RADIX, 2),
        ("post-process: read int2, gather the value, write value and int64 index", 24, STREAM, 1),
    ),
    "segmented": (
        ("index fill (int64)", 8, STREAM, 1),
        ("6 passes x (upsweep key read + downsweep read/write of fp32 key and int64 index)", 168, RADIX, 6),
    ),
}


def sort_path(rows: int) -> str:
    """Which of PyTorch's stable-sort paths a (rows, V > 4096) sort takes."""
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
        raise TwinInputError(f"rows = {rows!r}: must be an integer >= 1 (sequences sampled per step)")
    return "one row" if rows == 1 else ("full sort" if rows < SEGMENTED_SORT_MIN_ROWS else "segmented")


def sampler_kernels(rows: int) -> tuple[tuple[str, int, str, int], ...]:
    """Every kernel of the path at ``rows`` sampled sequences: (what, bytes per entry, class, launches)."""
    return SORT_KERNELS[sort_path(rows)] + COMMON_KERNELS


def sampler_bytes(rows: int) -> dict[str, int]:
    """Bytes per vocabulary entry by class (``stream``, ``radix``) at ``rows`` sampled sequences."""
    out = {STREAM: 0, RADIX: 0}
    for _, b, cls, _ in sampler_kernels(rows):
        out[cls] += b
    return out


def sampler_kernels_per_step(rows: int) -> int:
    """GPU kernels (CUB's memsets counted) the path launches per step beyond the greedy path's."""
    return sum(n for *_, n in sampler_kernels(rows))


def _check_bw(memory_bytes_per_s: float) -> None:
    if isinstance(memory_bytes_per_s, bool) or not isinstance(memory_bytes_per_s, (int, float)) \
            or not 0 < memory_bytes_per_s < float("inf"):
        raise TwinInputError(f"memory_bytes_per_s = {memory_bytes_per_s!r}: must be a finite number > 0 (bytes/s)")


def sort_sampler_seq_s(vocab_size: int, memory_bytes_per_s: float, rows: int = 64) -> float:
    """Seconds per sampled sequence per step at ``rows`` sampled sequences: streaming bytes at
    ``memory_bytes_per_s``, radix-sort bytes at ``RADIX_SORT_BANDWIDTH_FRACTION`` of it; a one-line error for a
    negative vocabulary, a bandwidth <= 0 or rows < 1."""
    check_nonneg("vocab_size", vocab_size)
    _check_bw(memory_bytes_per_s)
    b = sampler_bytes(rows)
    return (b[STREAM] + b[RADIX] / RADIX_SORT_BANDWIDTH_FRACTION) * vocab_size / memory_bytes_per_s


def sort_sampler_bound_s(vocab_size: int, memory_bytes_per_s: float, rows: int = 64) -> float:
    """The same bytes all at ``memory_bytes_per_s`` (round 10's lower bound)."""
    check_nonneg("vocab_size", vocab_size)
    _check_bw(memory_bytes_per_s)
    return sum(sampler_bytes(rows).values()) * vocab_size / memory_bytes_per_s


def explain_sort_sampler(vocab_size: int, memory_bytes_per_s: float, rows: int = 64) -> str:
    """One line for a report: bytes per entry by class, the estimate and the bound per sequence per step."""
    b = sampler_bytes(rows)
    s, lo = sort_sampler_seq_s(vocab_size, memory_bytes_per_s, rows), sort_sampler_bound_s(vocab_size,
                                                                                          memory_bytes_per_s, rows)
    return (f"sort_sampler_seq_s ({sort_path(rows)}, {rows} rows) = ({b[STREAM]} B + {b[RADIX]} B / "
            f"{RADIX_SORT_BANDWIDTH_FRACTION}) x {vocab_size:,} entries / {memory_bytes_per_s / 1e12:.2f} TB/s = "
            f"{s * 1e6:.2f} us per sequence per step (all at the datasheet: {lo * 1e6:.2f} us); "
            f"{sampler_kernels_per_step(rows)} kernels per step")
