"""Micro-benchmark of the serving core: schedule() + update_from_output() cycles over a steady set of running
decodes. Prints microseconds per running request per step (median of several repeats).

    python benchmarks/scheduler_speed.py                 # 16, 64, 256 running decodes
    python benchmarks/scheduler_speed.py --profile 256   # cProfile one measurement, top functions
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import positive_int  # noqa: E402
from twin.core.request import Request  # noqa: E402
from twin.core.scheduler_config import SchedulerConfig  # noqa: E402
from twin.core.schedulers import make_scheduler  # noqa: E402

PROMPT = 32
TARGET = 1 << 30  # never finishes during timing


def build(num_running: int, total_steps: int, scheduler: str = "continuous", caching: bool = True,
          block_size: int = 16):
    max_len = PROMPT + total_steps + 64
    cfg = SchedulerConfig(scheduler=scheduler, max_num_seqs=max(num_running, 1),
                          max_num_batched_tokens=max(num_running * PROMPT, max_len, 2048),
                          max_model_len=max_len, block_size=block_size, enable_prefix_caching=caching,
                          static_batch_size=num_running)
    num_blocks = num_running * (-(-max_len // block_size) + 1) + 2
    s = make_scheduler(cfg, num_blocks)
    for i in range(num_running):
        s.add_request(Request(i, 0.0, PROMPT, TARGET, max_tokens=TARGET,
                              prompt_segments=[("shared-system", 16), (("user", i), PROMPT - 16)]))
    out = s.schedule()  # every prompt in one step
    assert len(out.requests) == num_running, "the prefills did not fit one step"
    s.update_from_output(out)
    return s


def time_cycles(s, cycles: int) -> float:
    schedule, update = s.schedule, s.update_from_output
    t0 = time.perf_counter()
    for _ in range(cycles):
        update(schedule())
    return time.perf_counter() - t0


def measure(num_running: int, request_steps: int, repeats: int, **kw) -> tuple[float, float]:
    cycles = max(20, request_steps // num_running)
    s = build(num_running, cycles * (repeats + 1), **kw)
    time_cycles(s, cycles)  # warm-up
    per = []
    for _ in range(repeats):
        dt = time_cycles(s, cycles)
        per.append(dt / cycles / num_running * 1e6)
        assert len(s.running) == num_running
    return statistics.median(per), min(per)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sizes", nargs="*", type=positive_int, default=[16, 64, 256])
    ap.add_argument("--request-steps", type=positive_int, default=100_000, help="running-request steps per repeat")
    ap.add_argument("--repeats", type=positive_int, default=5)
    ap.add_argument("--scheduler", default="continuous", choices=["continuous", "prefill_first", "static"])
    ap.add_argument("--no-caching", action="store_true")
    ap.add_argument("--block-size", type=positive_int, default=16)
    ap.add_argument("--profile", action="store_true", help="cProfile the first size and print the top 25")
    args = ap.parse_args(argv)
    kw = dict(scheduler=args.scheduler, caching=not args.no_caching, block_size=args.block_size)
    if args.profile:
        n = args.sizes[0]
        cycles = max(20, args.request_steps // n)
        s = build(n, cycles * 2, **kw)
        time_cycles(s, cycles)
        prof = cProfile.Profile()
        prof.enable()
        time_cycles(s, cycles)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        return
    print(f"scheduler={args.scheduler} caching={not args.no_caching} block_size={args.block_size} "
          f"python={sys.version.split()[0]}")
    print(f"{'running':>8} {'us/request/step (median)':>26} {'(best)':>8} {'us/step':>9}")
    for n in args.sizes:
        med, best = measure(n, args.request_steps, args.repeats, **kw)
        print(f"{n:>8} {med:>26.2f} {best:>8.2f} {med * n:>9.1f}")


if __name__ == "__main__":
    main()
