"""One simulation with one of the fast path's large wins switched off, for instruction counts under cachegrind
(docs/fast-path.md has the figures):

    PYTHONHASHSEED=0 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 \\
        valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \\
        python benchmarks/fast_path_instr.py CONFIG [WORKLOAD]

WORKLOAD: ``mooncake`` (default: the Mooncake arXiv file, 1,000 requests at its own timestamps, Llama-3.1-8B on
one H100; long prompts, the engine saturated) or ``azure600`` (the first 600 s of the Azure conversation trace,
2,867 requests, same deployment; short requests, the engine mostly decoding between arrivals).

CONFIG: ``setup`` (the trace read and the deployment resolved, no simulation: subtract it from the others),
``all`` (every win on: the defaults), ``no-cohort`` (``fast_path=False``: every step through ``schedule()`` and
``update_from_output()``), ``two-event-arrivals`` (``one_event_arrivals=False``), ``hashed-private-blocks``
(``private_blocks=False``), ``full-records`` (``token_times: full, steps: full`` against ``summary`` /
``aggregate`` with everything else on). Prints the run's completed requests, output tokens and steps, so two
configurations can be checked to give the same run. Skips with a message when the trace is absent.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # this tree's twin, not the installed one

from twin.core.schedulers import make_scheduler
from twin.scenario import Scenario
from twin.sim.deployment import make_router, resolve_deployment
from twin.sim.simulate import simulate
from twin.workload.generate import build_workload
from twin.workload.paths import traces_dir

WORKLOADS = {
    "mooncake": ("mooncake_arxiv_trace_first1000.jsonl", {"format": "mooncake"}, {}),
    "azure600": ("azure_llm_2023_conv.csv", {"format": "azure", "window_s": 600}, {"max_model_len": 16384}),
}
CONFIGS = {
    "all": {"token_times": "summary", "steps_mode": "aggregate"},
    "no-cohort": {"token_times": "summary", "steps_mode": "aggregate", "fast_path": False},
    "two-event-arrivals": {"token_times": "summary", "steps_mode": "aggregate", "one_event_arrivals": False},
    "hashed-private-blocks": {"token_times": "summary", "steps_mode": "aggregate", "private_blocks": False},
    "full-records": {"token_times": "full", "steps_mode": "full"},
}


def main(argv: list[str]) -> int:
    config = argv[0] if argv else "all"
    workload = argv[1] if len(argv) > 1 else "mooncake"
    if (config != "setup" and config not in CONFIGS) or workload not in WORKLOADS:
        print(f"fast_path_instr: {config!r} {workload!r} unknown; config: one of setup, {', '.join(CONFIGS)}; "
              f"workload: one of {', '.join(WORKLOADS)}")
        return 2
    trace, trace_fields, server = WORKLOADS[workload]
    if not (traces_dir() / trace).is_file():
        print(f"fast_path_instr: skipped: trace {traces_dir() / trace} not found (set TWIN_TRACES_DIR)")
        return 0
    body = Scenario({"name": workload, "deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b"},
                     "server": server, "workload": {"trace": {"path": "{traces}/" + trace, **trace_fields}},
                     "seed": 0}).body("baseline")
    dep = resolve_deployment(body, None)
    traffic = build_workload(body.workload, body.seed)
    if config == "setup":
        print(f"setup: {len(traffic)} requests")
        return 0
    result = simulate(traffic, lambda i: make_scheduler(dep.scheduler_config, dep.num_gpu_blocks),
                      lambda i: dep.cost_model_factory(), router=make_router(body.deployment.router),
                      **CONFIGS[config])
    m = result.metrics()
    print(f"{config}: {m['completed']} completed, {m['total_output_tokens']} output tokens, {len(result.steps)} steps, "
          f"mean TTFT {m['mean_ttft_ms']!r} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
