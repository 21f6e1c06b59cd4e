"""Protocol step 3: prefix caching, the hit rate the traffic allows against the one the server achieves.

The attainable hit rate comes from an unbounded-cache oracle over the traffic's prompts (chained block hashes,
``twin.analysis.prefixes``); the achieved one counts hits at each request's first admission. Traffic below
``MIN_HIT_RATE`` shares (almost) nothing; caching that is on but achieves more than ``HIT_GAP`` below the oracle is
flagged (evictions: KV memory recovers it). Prompts that defeat the cache (a unique first segment such as a
timestamp header in front of shared content) are flagged, and moving the header behind the shared part is
predicted together with turning caching on; the change is recommended when TTFT or throughput clearly improve and
nothing clearly worsens.
"""

from __future__ import annotations

from typing import Any

from twin.analysis.prefixes import analyze_prefixes, workload_specs
from twin.analysis.protocol_evaluation import Evaluation, first_hit_rate
from twin.analysis.protocol_verdicts import FLAG, NO_CHANGE, RECOMMEND, compare, effect
from twin.analysis.protocol_walk import ProtocolWalk, Step

MIN_HIT_RATE = 0.05        # traffic whose oracle hit rate is below this shares (almost) nothing
HIT_GAP = 0.10             # achieved below attainable by more than this: flagged


def prefix_caching_step(walk: ProtocolWalk, base: Evaluation) -> Step:
    body = base.body
    sc = base.deployment.scheduler_config
    step = Step("prefix_caching", "Prefix caching",
                "What hit rate do the traffic's prefixes allow, what does the server achieve, and does "
                "anything in the prompts defeat the cache?")
    specs = workload_specs(body.workload, body.seed, walk.scenario.base_dir)
    pa = analyze_prefixes(specs, sc.block_size)
    achieved = first_hit_rate(base) if sc.enable_prefix_caching else 0.0
    step.details = {**pa.as_dict(), "achieved_hit_rate": achieved, "enabled": sc.enable_prefix_caching}
    attain = pa.attainable_hit_rate
    server_change: dict[str, Any] = {}
    if not sc.enable_prefix_caching and (attain >= MIN_HIT_RATE or pa.defeated):
        server_change = {"enable_prefix_caching": True}
    fix: dict[str, Any] = {}
    if pa.defeated and body.workload.prefix_header == "timestamp":
        fix = {"prefix_header": "none"}
    if pa.defeated:
        step.notes.append(
            f"{pa.unique_head_share:.0%} of requests start with {pa.head_kind} in front of shared content: "
            f"chained block hashes make everything behind a differing first block a miss. Moved after the "
            f"shared part, the traffic would allow {pa.attainable_without_head_rate:.0%} instead of "
            f"{attain:.0%}.")
    if not server_change and not fix:
        if attain < MIN_HIT_RATE:
            step.verdict = NO_CHANGE
            step.finding = (f"The prompts share almost nothing: an unbounded cache would hit {attain:.1%} of "
                            f"prompt tokens. Prefix caching neither helps nor costs here "
                            f"({'on' if sc.enable_prefix_caching else 'off'} now).")
        elif sc.enable_prefix_caching and achieved < attain - HIT_GAP:
            step.verdict = FLAG
            step.finding = (f"Prefix caching is on and achieves {achieved:.0%} of prompt tokens, below the "
                            f"{attain:.0%} the traffic allows: cached blocks are evicted before reuse (KV "
                            f"usage p99 {base.mean('p99_kv_usage') or 0:.0%}). More KV memory "
                            f"(gpu_memory_utilization, fp8 KV cache, another replica with prefix-affinity "
                            f"routing) recovers it.")
        else:
            step.verdict = NO_CHANGE
            step.finding = (f"Prefix caching is on and achieves {achieved:.0%} of prompt tokens, "
                            f"{'all' if achieved >= attain - 0.01 else 'close to'} the {attain:.0%} the "
                            f"traffic allows. Nothing to gain.")
        walk.steps.append(step)
        return step
    change: dict[str, Any] = {}
    if server_change:
        change["server"] = server_change
    if fix:
        change["workload"] = fix
    words = []
    if server_change:
        words.append("enable_prefix_caching: true")
    if fix:
        words.append("move the per-request timestamp header behind the shared prompt (workload.prefix_header:"
                     " none)")
    cand = walk.runner.evaluate("prefix caching", change)
    deltas = compare(base, cand)
    step.candidate, step.deltas = cand.label, deltas
    step.change, step.change_label = change, "; ".join(words)
    hit_after = first_hit_rate(cand)
    step.details["hit_rate_after"] = hit_after
    if server_change and fix:
        only = walk.runner.evaluate("prefix caching (prompts unchanged)", {"server": server_change})
        step.details["hit_rate_caching_only"] = first_hit_rate(only)
    good = any(effect(deltas, k) > 0 for k in ("mean_ttft_ms", "p99_ttft_ms", "output_throughput",
                                              "request_throughput"))
    bad = any(effect(deltas, k) < 0 for k in ("mean_ttft_ms", "p99_ttft_ms", "output_throughput"))
    state = ("caching is off, so the server achieves 0%" if not sc.enable_prefix_caching else
             f"the server achieves {achieved:.0%}")
    allow = (f"The traffic's prompts allow a {attain:.0%} prefix-cache hit rate (unbounded-cache oracle over "
             f"{pa.num_requests} requests)" if not pa.defeated else
             f"As sent, the prompts allow only {attain:.0%} (a unique first block defeats the cache); fixed, "
             f"{pa.attainable_without_head_rate:.0%}")
    if good and not bad:
        step.verdict = RECOMMEND
        step.finding = (f"{allow}; {state}. With the change ({step.change_label}) the twin predicts a "
                        f"{hit_after:.0%} hit "
                        f"rate and {walk.headline_deltas(deltas, ('mean_ttft_ms', 'p99_ttft_ms', 'output_throughput', 'median_tpot_ms'))}.")
    else:
        step.verdict = NO_CHANGE
        step.finding = (f"{allow}; {state}. With the change ({step.change_label}; {hit_after:.0%} hits) the "
                        f"twin predicts "
                        f"no clear gain: {walk.headline_deltas(deltas)}.")
    if fix:
        step.notes.append("the prompt fix is an application change (the client's prompt template), not a "
                          "server flag")
    walk.add_commands(step, cand, "prefix-caching")
    walk.steps.append(step)
    return step


__all__ = ["HIT_GAP", "MIN_HIT_RATE", "prefix_caching_step"]
