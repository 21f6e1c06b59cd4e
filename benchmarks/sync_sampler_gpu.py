"""A device check, for a session lent a GPU (issue 33, round 11; docs/fidelity.md "Round 11: Qwen3's sampler and
the sync step"): the GPU time per step of the top-k / top-p path vLLM 0.12 runs on CUDA (PyTorch sort; the kernel
sequence ``twin.cost.sort_sampler`` counts, written here from that description), beyond a greedy argmax, at the
batch sizes of the Qwen3-32B rows, against the twin's estimate.

As on a sync server, the host queues the sampler's kernels while the GPU is busy (here a ``torch.cuda._sleep``
stands in for the forward pass's CUDA graph), so the time between the two CUDA events is GPU time only, not the
host's launch time. Prints per batch the sampled and greedy times, their difference per step and per sequence,
the twin's estimate, and the least-squares split of the difference into S per step + a per sequence.

    python benchmarks/sync_sampler_gpu.py [--vocab 151936] [--batches 1,8,16,32,64,127,128,144] [--iters 20]
    python benchmarks/sync_sampler_gpu.py --device cpu --vocab 4096 --iters 2      # a smoke test without a GPU
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import finite_float, number_list, positive_int  # noqa: E402
from twin.errors import run_script  # noqa: E402


def sampled_step(torch, logits, temp, k, p):
    """Temperature, sort, top-k and top-p masks, scatter back, softmax, exponential-race draw."""
    x = logits.div_(temp.unsqueeze(1))
    srt, idx = x.sort(dim=-1, descending=False)
    kth = srt.gather(1, (srt.size(1) - k.to(torch.long)).unsqueeze(1))
    srt.masked_fill_(srt < kth, float("-inf"))
    csum = torch.cumsum(srt.softmax(dim=-1), dim=-1)
    drop = csum <= (1 - p).unsqueeze(1)
    drop[:, -1] = False
    srt.masked_fill_(drop, float("-inf"))
    probs = srt.scatter(-1, idx, srt).softmax(dim=-1, dtype=torch.float32)
    noise = torch.empty_like(probs).exponential_()
    return probs.div_(noise).argmax(dim=-1)


def time_s(torch, fn, device: str, iters: int) -> float:
    """Median seconds of ``fn()`` on the device, the host queueing ahead of the GPU."""
    times = []
    for _ in range(iters):
        if device == "cuda":
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(50_000_000)          # ~25 ms of GPU time: the host queues what follows meanwhile
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    import torch

    from twin.cost.sort_sampler import sort_sampler_seq_s
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--vocab", type=positive_int, default=151_936)
    ap.add_argument("--batches", default="1,8,16,32,64,127,128,144")
    ap.add_argument("--iters", type=positive_int, default=20)
    ap.add_argument("--bandwidth", type=finite_float, default=3.35e12, help="the GPU's datasheet bytes/s (H100 SXM)")
    args = ap.parse_args()
    batches = number_list(args.batches, "--batches", whole=True, low=1)
    dev = args.device
    if dev == "cuda":
        print(torch.cuda.get_device_name(), torch.__version__)
    rows = []
    print("| batch | sampled ms | greedy ms | extra us per step | extra us per sequence | twin's estimate us |")
    print("|---|---|---|---|---|---|")
    for b in batches:
        gen = torch.Generator(device=dev).manual_seed(0)
        base = torch.randn(b, args.vocab, device=dev, generator=gen) * 4
        temp = torch.full((b,), 0.6, device=dev)
        k = torch.full((b,), 20, device=dev, dtype=torch.int32)
        p = torch.full((b,), 0.95, device=dev)
        work = base.clone()

        def sampled():
            work.copy_(base)
            return sampled_step(torch, work, temp, k, p)

        def greedy():
            work.copy_(base)
            return work.argmax(dim=-1)

        for fn in (sampled, greedy):               # warm-up: caching allocator, CUB temp storage
            fn()
        ts, tg = time_s(torch, sampled, dev, args.iters), time_s(torch, greedy, dev, args.iters)
        extra = ts - tg
        rows.append((b, extra))
        est = sort_sampler_seq_s(args.vocab, args.bandwidth, b) * 1e6
        print(f"| {b} | {ts * 1e3:.3f} | {tg * 1e3:.3f} | {extra * 1e6:.1f} | {extra * 1e6 / b:.2f} | {est:.2f} |")
    if len(rows) >= 2:
        xs, ys = [r[0] for r in rows], [r[1] * 1e6 for r in rows]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        a = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        print(f"least squares over the batches: {my - a * mx:.1f} us per step + {a:.2f} us per sequence")


if __name__ == "__main__":
    run_script(main)
