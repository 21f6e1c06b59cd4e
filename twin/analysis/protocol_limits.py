"""Protocol steps 1 and 2: the baseline (which limit binds today) and the scheduler limits.

The baseline runs the configuration as it is and names the binding limit (``twin.analysis.causes``). The
scheduler-limits step asks whether ``max_num_seqs`` (or ``max_num_batched_tokens``, or static batching) holds the
running batch below the offered load while requests queue: a cap that binds for ``BINDING_SHARE`` of the busy
time (or closed-loop streams above it on a saturated server) is lifted to vLLM's default for the GPU (or doubled
when already there), a token budget that binds likewise, and ``max_num_batched_tokens`` is kept >= ``max_num_seqs``
as vLLM requires. The lifted configuration is recommended when throughput or TTFT / E2E latency clearly improve.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from twin.analysis.causes import (BINDING_SHARE, CONCURRENCY_CAP, KV_CAPACITY, TOKEN_BUDGET, Diagnosis, counted,
                                  diagnose, waiting_words)
from twin.analysis.protocol_evaluation import Evaluation
from twin.analysis.protocol_verdicts import DELTA_KEYS, INFO, NO_CHANGE, RECOMMEND, compare, effect
from twin.analysis.protocol_walk import ProtocolWalk, Step, offered_load
from twin.results.report import label
from twin.sim.deployment import vllm_default_limits


def baseline_step(walk: ProtocolWalk) -> tuple[Evaluation, Diagnosis]:
    base = walk.runner.evaluate("baseline", {})
    diag = diagnose(base.result, base.deployment, base.metrics)
    step = Step("baseline", "Baseline", "How does the server run today, and which limit binds?", INFO,
                diag.verdict, candidate="baseline")
    step.details = {"limit": diag.limit, "limit_name": diag.limit_name, "saturated": diag.saturated,
                    "shares": diag.shares, "summary": {k: base.summary.get(k) for k in DELTA_KEYS}}
    step.notes += diag.notes
    walk.add_commands(step, base, "baseline")
    walk.steps.append(step)
    return base, diag


def scheduler_limits_step(walk: ProtocolWalk, base: Evaluation, diag: Diagnosis) -> Step:
    sc = base.deployment.scheduler_config
    body = base.body
    step = Step("scheduler_limits", "Scheduler limits",
                "Does max_num_seqs or max_num_batched_tokens cap concurrency below the offered load?")
    def_tokens, def_seqs = vllm_default_limits(base.deployment.gpu, body.server.vllm_version,
                                               body.server.entrypoint)
    load_words, closed_c = offered_load(body)
    stats = diag.stats
    cap_share = diag.shares.get(CONCURRENCY_CAP, 0.0)
    budget_share = diag.shares.get(TOKEN_BUDGET, 0.0)
    per_replica = (closed_c / body.deployment.replicas) if closed_c else None
    server: dict[str, Any] = {}
    words: list[str] = []
    if sc.scheduler == "static":
        server["scheduler"] = "continuous"
        words.append("static batching -> continuous batching")
    cap_binds = cap_share >= BINDING_SHARE or (per_replica is not None and per_replica > sc.max_num_seqs
                                               and diag.saturated)
    if sc.scheduler != "static" and cap_binds:
        new = def_seqs if sc.max_num_seqs < def_seqs else 2 * sc.max_num_seqs
        server["max_num_seqs"] = new
        words.append(f"max_num_seqs {sc.max_num_seqs} -> {new}")
    if budget_share >= BINDING_SHARE and diag.saturated:
        new_t = def_tokens if sc.max_num_batched_tokens < def_tokens else 2 * sc.max_num_batched_tokens
        server["max_num_batched_tokens"] = new_t
        words.append(f"max_num_batched_tokens {sc.max_num_batched_tokens} -> {new_t}")
    seqs = server.get("max_num_seqs", sc.max_num_seqs)
    tokens = server.get("max_num_batched_tokens", sc.max_num_batched_tokens)
    if server and tokens < seqs:  # vLLM requires max_num_batched_tokens >= max_num_seqs
        server["max_num_batched_tokens"] = seqs
        words.append(f"max_num_batched_tokens {sc.max_num_batched_tokens} -> {seqs} (vLLM needs it >= "
                     f"max_num_seqs)")
    running = stats.get("mean_running", 0.0)
    queue = stats.get("mean_waiting_when_queued", 0.0)
    step.details = {"max_num_seqs": sc.max_num_seqs, "max_num_batched_tokens": sc.max_num_batched_tokens,
                    "vllm_defaults": {"max_num_seqs": def_seqs, "max_num_batched_tokens": def_tokens},
                    "concurrency_cap_share": cap_share, "token_budget_share": budget_share,
                    "mean_running": running, "mean_waiting_when_queued": queue, "offered_load": load_words,
                    "offered_concurrency": closed_c}
    if diag.limit == KV_CAPACITY:
        step.notes.append(f"KV-cache capacity binds at the baseline ({diag.shares.get(KV_CAPACITY, 0.0):.0%} of "
                          f"the busy time, {counted(stats.get('num_preempted', 0), 'preemption')}): no scheduler limit "
                          f"lifts that; KV memory does (gpu_memory_utilization, kv_cache_dtype fp8, tensor "
                          f"parallelism, another replica), or prefix caching where prompts share prefixes")
    if not server:
        peak = int(np.max(base.result.steps.column("num_running"))) if len(base.result.steps) else 0
        step.verdict = NO_CHANGE
        step.finding = (f"No scheduler limit binds: the running batch peaks at {peak} (max_num_seqs = "
                        f"{sc.max_num_seqs}) and steps fill max_num_batched_tokens = {sc.max_num_batched_tokens}"
                        f" only {budget_share:.0%} of the busy time under {load_words}. Leave them.")
        step.details["peak_running"] = peak
        walk.steps.append(step)
        return step
    cand = walk.runner.evaluate("lift scheduler limits", {"server": server})
    deltas = compare(base, cand)
    step.change = {"server": server}
    step.change_label = ", ".join(words)
    step.candidate = cand.label
    step.deltas = deltas
    peak_after = int(np.max(cand.result.steps.column("num_running"))) if len(cand.result.steps) else 0
    step.details["peak_running_after"] = peak_after
    why = []
    if sc.scheduler == "static":
        why.append("static batching admits nobody until the whole batch has finished")
    if "max_num_seqs" in server:
        queued_streams = f"; {closed_c - sc.max_num_seqs * body.deployment.replicas} of the {closed_c} " \
                         f"streams queue" if closed_c and closed_c > sc.max_num_seqs * body.deployment.replicas \
            else ""
        why.append(f"the running batch sits at max_num_seqs = {sc.max_num_seqs} for {cap_share:.0%} of the "
                   f"busy time while requests wait ({waiting_words(queue)}; offered: {load_words}{queued_streams})")
    if "max_num_batched_tokens" in server and budget_share >= BINDING_SHARE:
        why.append(f"steps are filled to max_num_batched_tokens = {sc.max_num_batched_tokens} for "
                   f"{budget_share:.0%} of the busy time while requests queue")
    gains = [effect(deltas, k) for k in ("output_throughput", "p99_ttft_ms", "mean_ttft_ms", "p99_e2el_ms")]
    worse = [k for k in ("p99_tpot_ms", "median_tpot_ms") if effect(deltas, k) < 0]
    pre = cand.mean("num_preemptions") or 0.0
    if any(g > 0 for g in gains):
        step.verdict = RECOMMEND
        step.finding = (f"{'; '.join(why).capitalize()}. Lifting ({step.change_label}) predicts: "
                        f"{walk.headline_deltas(deltas)}. The running batch then peaks at {peak_after}.")
        if worse:
            step.notes.append(f"{', '.join(label(k) for k in worse)} rise{'s' if len(worse) == 1 else ''}: "
                              f"a bigger batch makes each step longer (check the TPOT SLO)")
    else:
        step.verdict = NO_CHANGE
        step.finding = (f"{'; '.join(why).capitalize()}, but lifting ({step.change_label}) changes nothing "
                        f"measurable ({walk.headline_deltas(deltas)}): the GPU, not the limit, sets the pace.")
    if pre and not base.mean("num_preemptions"):
        step.notes.append(f"with the limit lifted, KV capacity binds next: {counted(round(pre), 'preemption')} per run")
    walk.add_commands(step, cand, "scheduler-limits")
    walk.steps.append(step)
    return step


__all__ = ["baseline_step", "scheduler_limits_step"]
