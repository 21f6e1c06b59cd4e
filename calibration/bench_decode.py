"""A quick benchmark of the engine: median decode-step time at a few batch sizes (``python -m
calibration.bench_decode``; the tiny model on the CPU by default)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from calibration.engine import ModelRunner, SeqInput
from calibration.model import ModelShape
from calibration.timing import measure, synchronize
from calibration.token_ids import segment_token_ids


def benchmark_decode(batch_sizes: Sequence[int] = (1, 16), context_len: int = 256, *, shape: Any = None,
                     device: str = "cpu", dtype: torch.dtype | None = None, block_size: int = 16,
                     warmup: int = 3, repeats: int = 20, seed: int = 0) -> list[dict[str, float]]:
    """Median decode-step time at each batch size: every sequence has ``context_len`` tokens in the cache
    (filled by one real prefill step) and computes one new token. The same step is re-run (it rewrites the
    same slots), synchronised, warm-up discarded."""
    shape = ModelShape.from_any(shape) if shape is not None else ModelShape.tiny()
    bmax = max(batch_sizes)
    per_seq = -(-(context_len + 1) // block_size)
    runner = ModelRunner(shape, device, dtype, num_blocks=1 + bmax * per_seq, block_size=block_size, seed=seed)
    tables = [list(range(1 + i * per_seq, 1 + (i + 1) * per_seq)) for i in range(bmax)]
    prompts = [segment_token_ids(("bench", i), 0, context_len + 1, shape.vocab_size).tolist() for i in range(bmax)]
    runner.execute_batch([SeqInput(p[:context_len], 0, t, 0) for p, t in zip(prompts, tables)])
    results = []
    for b in batch_sizes:
        step = [SeqInput(p[context_len:], context_len, t, 1) for p, t in zip(prompts[:b], tables[:b])]
        stats = measure(lambda: runner.execute_batch(step), warmup=warmup, repeats=repeats, device=device)
        results.append({"batch_size": b, "context_len": context_len, **stats.as_dict(),
                        "tokens_per_s": b / stats.median_s})
    return results


def main(argv: Sequence[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(description="Decode-step time of the calibration engine (tiny model by default).")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default=None)
    ap.add_argument("--batch-sizes", default="1,16")
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--hf-config", default=None, help="a config.json for the shape (default: the tiny model)")
    args = ap.parse_args(argv)
    dtype = getattr(torch, args.dtype) if args.dtype else None
    shape = ModelShape.from_hf_config(args.hf_config) if args.hf_config else None
    rows = benchmark_decode([int(b) for b in args.batch_sizes.split(",")], args.context, shape=shape,
                            device=args.device, dtype=dtype, repeats=args.repeats)
    synchronize(args.device)
    print(f"device={args.device} threads={torch.get_num_threads()} context={args.context}")
    for r in rows:
        print(f"batch {r['batch_size']:4d}: decode step median {r['median_s'] * 1e3:8.3f} ms "
              f"(min {r['min_s'] * 1e3:.3f}, max {r['max_s'] * 1e3:.3f}), {r['tokens_per_s']:9.1f} tok/s")


if __name__ == "__main__":
    main()
