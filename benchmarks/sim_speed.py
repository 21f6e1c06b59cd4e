"""How fast the twin simulates: the Azure LLM conversation trace (Nov 2023, one hour, 19,366 requests) replayed on
Llama-3.1-8B on one H100 through the scenario machinery (``scenarios/azure_conversation_replay.yaml``).

Prints, for the simulation alone (the trace is read and the deployment resolved before the clock starts): the
median wall time over the repeats (and the median CPU time: on a shared machine the difference is time spent
waiting for a core), simulated seconds per wall second, engine steps, steps per wall second, and
peak memory (the process's peak resident set, ``ru_maxrss``; with ``--tracemalloc`` also the Python heap peak
of one extra, slower run). Target (issue 16): the hour in <= 1 s and <= 1 GB.

    python benchmarks/sim_speed.py [--repeats 3] [--variant baseline] [--tracemalloc] [--profile]
    python benchmarks/sim_speed.py --all    # every figure of issue 16 in one run (~6 minutes here)
    python benchmarks/sim_speed.py --records-check 100000 [--token-times full]
    python benchmarks/sim_speed.py --per-request [--slow-requests 2000] [--fast-requests 10000]
    python benchmarks/sim_speed.py --mooncake [--repeats 3]

``--per-request`` compares the cost per request of the step-by-step path (``fast_path=False``: the scheduler
walks every running request at every step) with the fast path (the decode cohort, ``twin/sim/cohort_steps.py``)
on Llama-2-70B TP2 on A100, Poisson 2 req/s, 512 + 128 tokens, full records, both in this process, one after
the other (issue target: >= 50x). It then prints the floor: three pieces of work each request costs the twin
on either path, each timed alone on the same requests (its request and record objects, one event on the SimPy
clock, its admission and release by the scheduler as the fast path admits: prefix lookup, block allocation,
freeing), and compares their sum with the per-request budget the 50x target leaves.

``--records-check N`` instead runs N requests of Llama-2-70B TP2 on A100 (Poisson 2 req/s, 512 prompt + 128
output tokens) with ``records: {token_times: summary, steps: aggregate}`` (or ``--token-times full``,
``--steps full``) in a child process and
prints its wall time and peak resident memory (no trace needed).

``--mooncake`` replays the public 1,000-request Mooncake arXiv trace (``mooncake_arxiv_trace_first1000.jsonl``
in the traces folder, its own timestamps, prefix hash ids at 512-token blocks) on Llama-3.1-8B on one H100 and
prints the simulation's CPU microseconds per request, per output token and per engine step (median of the
repeats), beside the figure a compiled simulator reports for the same file (1.3 s wall, issue 36).

``--all`` prints, one after the other: the Azure hour, ``--mooncake``, ``--per-request``,
``--records-check 1000000`` and the start-up of ``twin run`` on a one-request scenario
(``benchmarks/startup.py``).

Skips with a message when the traces folder (``TWIN_TRACES_DIR`` or ``../shared/traces``) is absent.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import resource
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import simpy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # this tree's twin, not the installed one

from benchmarks.cli_checks import positive_int  # noqa: E402
from twin.core.request import RequestStatus
from twin.core.scheduler_output import SchedulerOutput
from twin.results.token_summary import record_factory
from twin.sim.deployment import make_router, resolve_deployment
from twin.sim.gc_pacing import paced_gc
from twin.sim.run import metrics_of
from twin.scenario import Scenario, load_scenario
from twin.core.schedulers import make_scheduler
from twin.sim.simulate import simulate
from twin.workload.generate import build_workload
from twin.workload.paths import traces_dir
from twin.workload.sharing import SegmentSharing

SCENARIO = "azure_conversation_replay"
MILLION = 1_000_000
TRACE = "azure_llm_2023_conv.csv"
MOONCAKE_TRACE = "mooncake_arxiv_trace_first1000.jsonl"


def prepare(variant: str):
    sc = load_scenario(SCENARIO)
    body = sc.body(variant)
    dep = resolve_deployment(body, sc.base_dir)
    t0 = time.perf_counter()
    traffic = build_workload(body.workload, body.seed, base_dir=sc.base_dir)
    build_s = time.perf_counter() - t0
    return body, dep, traffic, build_s


def simulate_once(body, dep, traffic):
    return simulate(traffic, lambda i: make_scheduler(dep.scheduler_config, dep.num_gpu_blocks),
                    lambda i: dep.cost_model_factory(), num_replicas=body.deployment.replicas,
                    router=make_router(body.deployment.router), max_time_s=body.max_sim_time_s)


def peak_rss_mib() -> float:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1 << 20) if sys.platform == "darwin" else rss / 1024  # bytes on macOS, KiB on Linux


def llama70b_body(num_requests: int, token_times: str, steps: str):
    return Scenario({
        "name": "llama-2-70b-tp2-a100",
        "deployment": {"gpu": "A100-SXM-80GB", "model": "llama-2-70b", "tensor_parallel_size": 2},
        "workload": {"arrivals": {"process": "poisson", "rate_per_s": 2}, "num_requests": num_requests,
                     "classes": [{"name": "chat", "share": 1.0, "prompt": {"suffix_tokens": 512},
                                  "output_tokens": 128}]},
        "records": {"token_times": token_times, "steps": steps}, "seed": 0}).body("baseline")


def records_child(num_requests: int, token_times: str, steps: str) -> int:
    """One run in this (child) process; prints its figures as one JSON line."""
    body = llama70b_body(num_requests, token_times, steps)
    dep = resolve_deployment(body, None)
    traffic = build_workload(body.workload, body.seed)
    t0, c0 = time.perf_counter(), time.process_time()
    result = simulate(traffic, lambda i: make_scheduler(dep.scheduler_config, dep.num_gpu_blocks),
                      lambda i: dep.cost_model_factory(), num_replicas=body.deployment.replicas,
                      router=make_router(body.deployment.router), token_times=token_times,
                      steps_mode=steps)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    m = result.metrics()
    print(json.dumps({"requests": num_requests, "token_times": token_times, "steps": steps, "wall_s": wall,
                      "cpu_s": cpu, "completed": m["completed"], "p99_itl_ms": m["p99_itl_ms"],
                      "peak_rss_mib": peak_rss_mib()}))
    return 0


def per_request(slow_requests: int, fast_requests: int) -> int:
    costs = {}
    for label, n, fast in (("step by step", slow_requests, False), ("fast path", fast_requests, True)):
        body = llama70b_body(n, "full", "full")
        dep = resolve_deployment(body, None)
        traffic = build_workload(body.workload, body.seed)
        t0, c0 = time.perf_counter(), time.process_time()
        result = simulate(traffic, lambda i: make_scheduler(dep.scheduler_config, dep.num_gpu_blocks),
                          lambda i: dep.cost_model_factory(), router=make_router(body.deployment.router),
                          fast_path=fast)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        costs[label] = cpu / n
        print(f"{label:<13} {n:>7,} requests: {wall:6.2f} s wall, {cpu:6.2f} s cpu, {cpu / n * 1e6:7.1f} us cpu per "
              f"request, {len(result.steps):,} steps")
    ratio = costs["step by step"] / costs["fast path"]
    print(f"per-request cost, step by step / fast path: {ratio:.1f}x (target >= 50x: "
          f"{'meets' if ratio >= 50 else 'MISSES'})")
    floor = per_request_floor(fast_requests)
    budget_us = costs["step by step"] / 50 * 1e6
    print(f"floor          {sum(floor.values()):.1f} us cpu per request (" +
          ", ".join(f"{name} {us:.1f}" for name, us in floor.items()) +
          f") against the {budget_us:.1f} us the 50x target leaves for all of a request's work")
    return 0


def per_request_floor(num_requests: int) -> dict[str, float]:
    """CPU microseconds per request of three pieces of work each of the workload's requests costs, each
    timed alone: making its request and summary record, one timeout on a SimPy clock, and its admission and
    release by the scheduler, as the fast path admits (queued, admitted by ``schedule_waiting`` into an empty
    step: prefix lookup and block allocation, then finished: blocks freed)."""
    body = llama70b_body(num_requests, "summary", "aggregate")
    dep = resolve_deployment(body, None)
    specs = list(build_workload(body.workload, body.seed))
    sharing = SegmentSharing(specs)
    new_record = record_factory("summary")

    def make_request(spec):
        return spec.make_request(private_from_token=sharing.private_from_token(spec))

    def clock(env):
        for _ in specs:
            yield env.timeout(0.5)

    cpu_s = {}
    with paced_gc():
        c0 = time.process_time()
        records = [new_record(make_request(spec)) for spec in specs]   # kept, as a run keeps them
        cpu_s["request and record"] = time.process_time() - c0
        env = simpy.Environment()
        env.process(clock(env))
        c0 = time.process_time()
        env.run()
        cpu_s["one clock event"] = time.process_time() - c0
        requests = [make_request(spec) for spec in specs]
        sched = make_scheduler(dep.scheduler_config, dep.num_gpu_blocks)
        budget = dep.scheduler_config.max_num_batched_tokens
        scheduled_tokens = 0
        c0 = time.process_time()
        for req in requests:
            sched.add_request(req)
            scheduled_tokens += budget - sched.schedule_waiting(SchedulerOutput(0), budget, [], [], False)
            sched.finish_requests([req], RequestStatus.FINISHED_STOPPED)
        cpu_s["admission and release"] = time.process_time() - c0
    if scheduled_tokens != sum(r.num_prompt_tokens for r in records):
        raise RuntimeError("floor: the scheduler did not admit every prompt whole")
    return {name: s / num_requests * 1e6 for name, s in cpu_s.items()}


def mooncake_body():
    return Scenario({
        "name": "mooncake-arxiv-first1000",
        "deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b"},
        "workload": {"trace": {"path": "{traces}/" + MOONCAKE_TRACE, "format": "mooncake"}},
        "seed": 0}).body("baseline")


def mooncake(repeats: int) -> int:
    """CPU microseconds per request, per output token and per engine step on the Mooncake arXiv file."""
    path = traces_dir() / MOONCAKE_TRACE
    if not path.is_file():
        print(f"mooncake       skipped: trace {path} not found (set TWIN_TRACES_DIR to the traces folder)")
        return 0
    body = mooncake_body()
    dep = resolve_deployment(body, None)
    traffic = build_workload(body.workload, body.seed)
    cpus, walls, result = [], [], None
    for _ in range(repeats):
        result = None
        t0, c0 = time.perf_counter(), time.process_time()
        result = simulate_once(body, dep, traffic)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    cpu, wall = statistics.median(cpus), statistics.median(walls)
    m = result.metrics()
    num_requests, num_tokens, num_steps = len(traffic), m["total_output_tokens"], len(result.steps)
    print(f"mooncake       {num_requests:,} requests of {path.name} on {body.deployment.model} on {dep.gpu.name}: "
          f"{m['completed']:,} completed, {num_tokens:,} output tokens, {num_steps:,} engine steps")
    print(f"mooncake cpu   {cpu:.3f} s (median of {len(cpus)}; wall {wall:.3f} s): "
          f"{cpu / num_requests * 1e6:,.1f} us per request, {cpu / num_tokens * 1e6:.2f} us per output token, "
          f"{cpu / num_steps * 1e6:.1f} us per engine step (simulation only; the trace read is not counted)")
    return 0


def records_check(num_requests: int, token_times: str, steps: str) -> int:
    out = subprocess.run([sys.executable, __file__, "--records-child", str(num_requests), "--token-times",
                          token_times, "--steps", steps], capture_output=True, text=True, check=False)
    if out.returncode:
        print(out.stderr, file=sys.stderr)
        return out.returncode
    r = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"records check  {r['requests']:,} requests of Llama-2-70B TP2 on A100, token_times: {r['token_times']}, "
          f"steps: {r['steps']}: {r['wall_s']:.1f} s wall ({r['cpu_s']:.1f} s cpu, all threads), "
          f"peak {r['peak_rss_mib']:,.0f} MiB resident (whole child process), {r['completed']:,} completed, "
          f"ITL p99 {r['p99_itl_ms']:.2f} ms")
    if num_requests == MILLION:
        verdict = "meets" if r["wall_s"] <= 60 and r["peak_rss_mib"] <= 1024 else "MISSES"
        print(f"target         <= 60 s and <= 1 GiB for a million requests (issue 16): {verdict}")
    return 0


def azure_hour(variant: str, repeats: int, with_tracemalloc: bool, with_profile: bool) -> int:
    path = traces_dir() / TRACE
    if not path.is_file():
        print(f"sim_speed: skipped: trace {path} not found (set TWIN_TRACES_DIR to the traces folder)")
        return 0

    body, dep, traffic, build_s = prepare(variant)
    rss_before = peak_rss_mib()
    walls, cpus, result = [], [], None
    for _ in range(repeats):
        result = None  # let the previous run's records go before the next one
        t0, c0 = time.perf_counter(), time.process_time()
        result = simulate_once(body, dep, traffic)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    wall = statistics.median(walls)
    cpu = statistics.median(cpus)
    sim_s = result.sim_end_s - result.sim_start_s
    m = metrics_of(result, body)

    print(f"scenario       {SCENARIO} [{variant}]: {body.deployment.model} on {dep.gpu.name}, "
          f"{len(traffic):,} requests from {path.name}")
    print(f"workload build {build_s:.2f} s (trace read and requests built; not in the figures below)")
    print(f"simulation     {wall:.2f} s wall (median of {len(walls)}: "
          f"{', '.join(f'{w:.2f}' for w in walls)})")
    print(f"cpu time       {cpu:.2f} s (median; on a shared machine wall time above it is time spent waiting "
          f"for a core)")
    print(f"simulated      {sim_s:,.0f} s -> {sim_s / wall:,.0f} simulated s per wall s")
    print(f"steps          {len(result.steps):,} ({len(result.steps) / wall:,.0f} per wall s)")
    print(f"completed      {m['completed']:,} requests, {m['failed']} rejected, "
          f"TTFT p99 {m['p99_ttft_ms']:.1f} ms, TPOT p99 {m['p99_tpot_ms']:.2f} ms")
    print(f"peak memory    {peak_rss_mib():,.0f} MiB resident for the whole process "
          f"({rss_before:,.0f} MiB before the runs)")
    verdict = "meets" if wall <= 1 and peak_rss_mib() <= 1024 else "MISSES"
    print(f"target         <= 1 s and <= 1 GiB for the hour (issue 16): {verdict}")

    if with_tracemalloc:
        result = None
        tracemalloc.start()
        simulate_once(body, dep, traffic)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"python heap    {peak / (1 << 20):,.0f} MiB peak during one simulation (tracemalloc)")
    if with_profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.runcall(simulate_once, body, dep, traffic)
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--all", action="store_true", help="every figure of issue 16 in one run (see above)")
    ap.add_argument("--records-check", type=positive_int, metavar="N",
                    help="peak memory of an N-request run (see above)")
    ap.add_argument("--records-child", type=positive_int, help=argparse.SUPPRESS)
    ap.add_argument("--mooncake", action="store_true", help="us per request / output token / step, Mooncake arXiv")
    ap.add_argument("--per-request", action="store_true", help="step-by-step vs fast path cost per request")
    ap.add_argument("--slow-requests", type=positive_int, default=2000)
    ap.add_argument("--fast-requests", type=positive_int, default=10000)
    ap.add_argument("--token-times", choices=("full", "summary"), default="summary")
    ap.add_argument("--steps", choices=("full", "aggregate"), default="aggregate")
    ap.add_argument("--repeats", type=positive_int, default=3)
    ap.add_argument("--variant", default="baseline")
    ap.add_argument("--tracemalloc", action="store_true", help="one extra run under tracemalloc (slower)")
    ap.add_argument("--profile", action="store_true", help="one extra run under cProfile; print the top functions")
    args = ap.parse_args()
    if args.records_child:
        return records_child(args.records_child, args.token_times, args.steps)
    if args.records_check:
        return records_check(args.records_check, args.token_times, args.steps)
    if args.per_request:
        return per_request(args.slow_requests, args.fast_requests)
    if args.mooncake:
        return mooncake(args.repeats)
    if args.all:
        import startup

        status = azure_hour(args.variant, args.repeats, False, False)
        print()
        status = status or mooncake(args.repeats)
        print()
        status = status or per_request(args.slow_requests, args.fast_requests)
        print()
        status = status or records_check(MILLION, args.token_times, args.steps)
        print()
        startup.main([])
        return status
    return azure_hour(args.variant, args.repeats, args.tracemalloc, args.profile)


if __name__ == "__main__":
    sys.exit(main())
