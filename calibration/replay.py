"""The replay: a small seeded workload with shared prefixes, served on the real engine through the serving
core's V1 scheduler (:mod:`calibration.serve_steps`), so the fit also sees the step shapes serving makes."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from calibration.engine import ModelRunner
from calibration.sweep_plan import SweepPlan


def replay_specs(plan: SweepPlan, *, mean_interarrival_s: float = 0.0, seed: int | None = None,
                 max_model_len: int | None = None) -> list[Any]:
    """A small seeded workload: about half the requests open with one of two shared system prompts
    (``replay_shared_prefix`` tokens), prompts and outputs log-uniform in the plan's ranges, Poisson arrivals
    (all at 0 when ``mean_interarrival_s`` is 0)."""
    from twin.workload.spec import RequestSpec

    rng = np.random.default_rng(plan.seed + 1 if seed is None else seed)
    lo, hi = plan.replay_prompt
    olo, ohi = plan.replay_output
    t = 0.0
    specs = []
    for i in range(plan.replay_requests):
        if mean_interarrival_s > 0 and i:
            t += float(rng.exponential(mean_interarrival_s))
        suffix = int(round(math.exp(rng.uniform(math.log(lo), math.log(hi + 1)))))
        out = int(rng.integers(olo, ohi + 1))
        segs: list[tuple[Any, int]] = []
        if plan.replay_shared_prefix and rng.random() < 0.5:
            segs.append((("replay-system", int(rng.integers(0, 2))), plan.replay_shared_prefix))
        segs.append((("replay-prompt", i), suffix))
        n_prompt = sum(n for _, n in segs)
        if max_model_len is not None and n_prompt + out >= max_model_len:
            continue
        specs.append(RequestSpec(i, t, n_prompt, out, tuple(segs), task_class="replay"))
    return specs


def run_replay(runner: ModelRunner, plan: SweepPlan, *, deadline: float | None = None,
               mean_decode_step_s: float = 0.0, progress: Callable[[int], None] | None = None):
    """Serve the replay workload on ``runner`` through the V1 scheduler; returns the ``ServeResult``."""
    from calibration.serve_steps import serve
    from twin.core.scheduler_config import SchedulerConfig

    max_len = min(plan.max_seq_len, runner.shape.max_position_embeddings)
    mean_out = sum(plan.replay_output) / 2
    # arrivals so that about half of max_num_seqs are in flight at the measured decode speed
    gap = mean_out * mean_decode_step_s / max(1.0, plan.replay_max_num_seqs / 2)
    specs = replay_specs(plan, mean_interarrival_s=gap, max_model_len=max_len)
    tokens = max(plan.replay_max_batched_tokens, plan.replay_max_num_seqs)
    config = SchedulerConfig(max_num_seqs=plan.replay_max_num_seqs, max_num_batched_tokens=tokens,
                             max_model_len=max_len, block_size=runner.block_size,
                             enable_prefix_caching=True, enable_chunked_prefill=True)
    return serve(runner, specs, config, repeats=plan.replay_repeats, deadline_s=deadline,
                 on_step=(lambda k, _res: progress(k)) if progress else None)
