"""Which limit binds: a plain-words verdict from a run's step records and its deployment.

Every engine step is weighted by its duration. Over the busy time of all replicas it measures how long each
serving limit held *while requests waited*:

* **concurrency cap**: the running batch is pinned at ``max_num_seqs`` and the waiting queue is not empty
  (with static batching: any queue while a batch runs, as nobody joins a batch before all of it finishes);
* **KV capacity**: KV usage is high (>= ``KV_HIGH``) with a queue and the batch below its cap, or a step
  preempted requests to free blocks;
* **token budget**: the step is filled to ``max_num_batched_tokens`` (prefill chunks queue behind it).

The limit that held for the largest share of busy time (at least ``BINDING_SHARE``) binds. When none does but
requests still queue, the GPU itself is the limit, and the roofline split of typical steps (the cost model's
``explain()``) says whether its step time is compute-, memory-bandwidth- or overhead-bound. With no queue the
server keeps up with the load and the verdict says so, naming what sets the step time.

Pure functions: a `SimResult` plus anything with the `twin.sim.deployment.Deployment` attributes (``scheduler_config``,
``kv_pool``, ``cost_model_factory``); no Streamlit, no plotting.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from twin.results.numbers import counted
from twin.results.records import FINISHED
from twin.results.sim_result import SimResult

KV_HIGH = 0.9                # KV usage counted as "full"
BUDGET_FILL = 0.95           # a step with >= this share of max_num_batched_tokens is "at the budget"
BINDING_SHARE = 0.25         # a limit binds when it held for at least this share of the busy time
QUEUED_SHARE = 0.25          # requests "queue" when the waiting queue is non-empty this share of busy time

CONCURRENCY_CAP = "concurrency_cap"
KV_CAPACITY = "kv_capacity"
TOKEN_BUDGET = "token_budget"
COMPUTE = "compute"
MEMORY_BANDWIDTH = "memory_bandwidth"
OVERHEAD = "overhead"
STEP_TIME = "step_time"      # a cost model without a compute/memory split (e.g. 'constant')
IDLE = "idle"                # nothing ran
STATIC_BATCH = "static_batch"  # the concurrency cap of a static batcher: nobody joins a running batch
SCHEDULER_LIMITS = (CONCURRENCY_CAP, KV_CAPACITY, TOKEN_BUDGET)

LIMIT_NAMES: dict[str, str] = {
    CONCURRENCY_CAP: "concurrency cap (max_num_seqs)",
    STATIC_BATCH: "static batching",
    KV_CAPACITY: "KV-cache capacity",
    TOKEN_BUDGET: "token budget (max_num_batched_tokens)",
    COMPUTE: "GPU compute",
    MEMORY_BANDWIDTH: "GPU memory bandwidth",
    OVERHEAD: "per-step overhead",
    STEP_TIME: "step time",
    IDLE: "nothing (no steps ran)",
}


@dataclass(frozen=True)
class StepSplit:
    """Shares (0..1, summing to 1) of a typical step's time, time-weighted over the kinds of step, and the
    bound they imply. Compute is matrix math; memory the exposed weight and KV traffic beyond it."""

    compute: float
    memory: float
    communication: float
    overhead: float
    bound: str  # COMPUTE, MEMORY_BANDWIDTH or OVERHEAD

    def share(self, part: str) -> float:
        return float(getattr(self, part))


@dataclass(frozen=True)
class Diagnosis:
    limit: str                       # one of LIMIT_NAMES
    saturated: bool                  # requests queued for a meaningful share of the busy time
    verdict: str                     # one plain sentence (or two)
    notes: list[str] = field(default_factory=list)
    shares: dict[str, float] = field(default_factory=dict)   # limit -> share of busy time it held
    stats: dict[str, Any] = field(default_factory=dict)
    step_split: StepSplit | None = None

    @property
    def binding(self) -> bool:
        """A limit binds (requests wait on it), rather than the server keeping up with its load."""
        return self.saturated or self.limit in (CONCURRENCY_CAP, STATIC_BATCH, KV_CAPACITY, TOKEN_BUDGET)

    @property
    def limit_name(self) -> str:
        return LIMIT_NAMES.get(self.limit, self.limit)


@dataclass(frozen=True)
class _Shape:
    """A `twin.cost.base.StepShape` built from averages."""

    num_new_tokens: list[int]
    num_computed_before: list[int]
    num_spec_tokens: list[int]


# --------------------------------------------------------------------------------------------------------
# measurements
# --------------------------------------------------------------------------------------------------------
def concurrency_cap(scheduler_config: Any) -> int:
    """The most sequences one replica runs at once."""
    if getattr(scheduler_config, "scheduler", "continuous") == "static":
        return int(scheduler_config.static_batch_size)
    return int(scheduler_config.max_num_seqs)


def limit_shares(result: SimResult, scheduler_config: Any) -> dict[str, Any]:
    """Shares of busy time (0..1) each scheduler limit held while requests waited, plus the queue facts."""
    steps = result.steps
    dur = steps.column("duration_s")
    busy = float(dur.sum())
    out: dict[str, Any] = {"busy_s": busy, "num_steps": int(dur.size)}
    if busy <= 0:
        out.update(dict.fromkeys(SCHEDULER_LIMITS, 0.0), queued=0.0, mean_waiting_when_queued=0.0,
                   mean_running=0.0, p99_kv_usage=0.0, num_preempted=0)
        return out
    waiting = steps.column("num_waiting")
    running = steps.column("num_running")
    kv = steps.column("kv_usage")
    tokens = steps.column("num_new_tokens")
    preempted = steps.column("num_preempted")
    cap = concurrency_cap(scheduler_config)
    budget = int(scheduler_config.max_num_batched_tokens)

    queued = waiting > 0
    if getattr(scheduler_config, "scheduler", "continuous") == "static":
        # a static batch admits nobody until all of it has finished: anyone waiting while it runs waits on the
        # batch, however many of its requests are still generating
        at_cap = np.ones(waiting.shape, dtype=bool)
    else:
        at_cap = running >= cap
    kv_full = ((kv >= KV_HIGH) & queued & ~at_cap) | (preempted > 0)
    at_budget = tokens >= BUDGET_FILL * budget

    def share(mask: np.ndarray) -> float:
        return float(dur[mask].sum()) / busy

    out[CONCURRENCY_CAP] = share(at_cap & queued)
    out[KV_CAPACITY] = share(kv_full)
    out[TOKEN_BUDGET] = share(at_budget)
    out["queued"] = share(queued)
    out["mean_waiting_when_queued"] = (float((waiting * dur)[queued].sum() / dur[queued].sum())
                                       if queued.any() else 0.0)
    out["mean_running"] = float((running * dur).sum() / busy)
    out["p99_kv_usage"] = float(np.percentile(kv, 99))
    out["num_preempted"] = int(preempted.sum())
    out["cap"] = cap
    out["budget"] = budget
    return out


def typical_steps(result: SimResult) -> list[tuple[float, _Shape]]:
    """(share of busy time, average step) for decode-only steps and steps that carry prefill.

    Decodes attend over the output-token-weighted mean context of the finished requests (prompt + half the
    output); prefill chunks start after the mean prefix-cache hit."""
    steps = result.steps
    dur = steps.column("duration_s")
    busy = float(dur.sum())
    if busy <= 0:
        return []
    fin = [r for r in result.requests if r.status == FINISHED]
    if fin:
        p = np.array([r.num_prompt_tokens for r in fin], float)
        o = np.array([r.num_output_tokens for r in fin], float)
        decode_ctx = float((o * (p + o / 2)).sum() / o.sum()) if o.sum() > 0 else float(p.mean())
        cached = float(np.mean([max(r.num_cached_tokens, 0) for r in fin]))
    else:
        decode_ctx, cached = 0.0, 0.0
    prefill_seqs = steps.column("num_prefill_seqs")
    decode_seqs = steps.column("num_decode_seqs")
    prefill_tokens = steps.column("num_prefill_tokens")
    spec_tokens = steps.column("num_spec_tokens")
    out = []
    for mask in (prefill_seqs == 0, prefill_seqs > 0):
        if not mask.any():
            continue
        w = float(dur[mask].sum()) / busy
        n_dec = int(round(float(decode_seqs[mask].mean())))
        n_pre = int(round(float(prefill_seqs[mask].mean())))
        # speculative decoding: a decode verifies its drafts too (1 + k tokens, k of them drafts)
        k = int(round(float(spec_tokens[mask].sum()) / max(1.0, float(decode_seqs[mask].sum()))))
        shape_new, shape_before = [1 + k] * n_dec, [int(decode_ctx)] * n_dec
        shape_spec = [k] * n_dec
        if n_pre:
            per = max(1, int(round(float(prefill_tokens[mask].sum()) / float(prefill_seqs[mask].sum()))))
            shape_new += [per] * n_pre
            shape_before += [int(cached)] * n_pre
            shape_spec += [0] * n_pre
        if not shape_new:
            continue
        out.append((w, _Shape(shape_new, shape_before, shape_spec)))
    return out


def _group(parts: Mapping[str, float]) -> dict[str, float] | None:
    """explain() components grouped as compute / memory / communication / overhead (roofline names:
    ``*compute*``, ``*read*``/``*write*``, ``allreduce*``, ``overhead*``); ``None`` when the parts do not
    separate compute from memory traffic (e.g. a fitted profile folds the weight read into its per-step term)."""
    groups = {"compute": 0.0, "memory": 0.0, "communication": 0.0, "overhead": 0.0}
    seen: set[str] = set()
    for key, value in parts.items():
        if key == "total_s":
            continue
        k = key.lower()
        if "compute" in k:
            group = "compute"
        elif "read" in k or "write" in k or "memory" in k:
            group = "memory"
        elif "allreduce" in k or "comm" in k:
            group = "communication"
        elif "overhead" in k:
            group = "overhead"
        else:
            return None
        groups[group] += value
        seen.add(group)
    return groups if {"compute", "memory"} <= seen else None


def roofline_of(deployment: Any) -> Any:
    """The roofline cost model of ``deployment`` (its model, GPU, tensor parallelism and dtypes)."""
    from twin.cost.roofline import RooflineCostModel

    pool = deployment.kv_pool
    formats = getattr(deployment, "weight_formats", None)      # per layer group (a label is not a format)
    return RooflineCostModel(deployment.model, deployment.gpu, tensor_parallel_size=pool.tensor_parallel_size,
                             weight_dtype=formats or pool.weight_dtype, kv_dtype=pool.kv_dtype,
                             layout=getattr(deployment, "layout", None))


def step_split(result: SimResult, cost_model: Any) -> StepSplit | None:
    """The roofline split of the run's typical steps; ``None`` when the cost model has no such split."""
    explain = getattr(cost_model, "explain", None)
    if explain is None:
        return None
    totals = {"compute": 0.0, "memory": 0.0, "communication": 0.0, "overhead": 0.0}
    total = 0.0
    for weight, shape in typical_steps(result):
        parts = explain(shape)
        grouped = _group(parts)
        if grouped is None:
            return None
        t = float(parts.get("total_s", sum(grouped.values())))
        if t <= 0:
            continue
        # time-weighted: a kind of step that fills w of the busy time contributes w of each component share
        for k, v in grouped.items():
            totals[k] += weight * v / t
        total += weight
    if total <= 0:
        return None
    shares = {k: v / total for k, v in totals.items()}
    bound = max((COMPUTE, shares["compute"]), (MEMORY_BANDWIDTH, shares["memory"]),
                (OVERHEAD, shares["overhead"] + shares["communication"]), key=lambda kv: kv[1])[0]
    return StepSplit(compute=shares["compute"], memory=shares["memory"], communication=shares["communication"],
                     overhead=shares["overhead"], bound=bound)


# --------------------------------------------------------------------------------------------------------
# the verdict
# --------------------------------------------------------------------------------------------------------
def _pct(x: float) -> str:
    return f"{x * 100:.0f}%"


def _split_words(split: StepSplit | None) -> str:
    if split is None:
        return "the cost model's step time"
    if split.bound == COMPUTE:
        return f"compute-bound ({_pct(split.share('compute'))} of a typical step is matrix math)"
    if split.bound == MEMORY_BANDWIDTH:
        return (f"memory-bandwidth-bound ({_pct(split.share('memory'))} of a typical step reads weights "
                f"and KV cache)")
    return (f"overhead-bound ({_pct(split.share('overhead') + split.share('communication'))} of a typical step "
            f"is fixed per-step work and communication)")


def diagnose(result: SimResult, deployment: Any, metrics: Mapping[str, Any] | None = None) -> Diagnosis:
    """Name the limit that binds in ``result`` (run on ``deployment``) in plain words."""
    sched = deployment.scheduler_config
    shares = limit_shares(result, sched)
    split = step_split(result, deployment.cost_model_factory())
    split_source = "cost model"
    if split is None:
        # the run's cost model (constant, fitted profile) has no compute/memory split: ask the roofline
        # model of the same deployment which side a typical step leans to
        try:
            split = step_split(result, roofline_of(deployment))
            split_source = "roofline"
        except (AttributeError, TypeError, ValueError):
            split = None
    m = dict(metrics) if metrics is not None else {}
    busy_fraction = m.get("busy_fraction")
    stats = {k: v for k, v in shares.items()}
    stats["busy_fraction"] = busy_fraction
    stats["step_split_source"] = split_source if split is not None else None
    notes: list[str] = []
    rejected = sum(1 for r in result.requests if r.status == "rejected")
    if rejected:
        notes.append(f"{counted(rejected, 'request')} {_were(rejected)} rejected: longer than max_model_len "
                     f"({sched.max_model_len}) or than the whole KV pool.")
    incomplete = sum(1 for r in result.requests if r.status == "incomplete")
    if incomplete:
        notes.append(f"{counted(incomplete, 'request')} {_were(incomplete)} still in flight when the run stopped.")
    if shares["num_preempted"]:
        notes.append(f"{counted(shares['num_preempted'], 'preemption')}: requests lost their KV blocks and recompute.")

    if shares["busy_s"] <= 0:
        return Diagnosis(IDLE, False, "Nothing ran: no engine step was taken.", notes,
                         {k: 0.0 for k in SCHEDULER_LIMITS}, stats, split)

    limit_shares_only = {k: shares[k] for k in SCHEDULER_LIMITS}
    best = max(SCHEDULER_LIMITS, key=lambda k: limit_shares_only[k])
    saturated = shares["queued"] >= QUEUED_SHARE
    queue = shares["mean_waiting_when_queued"]
    cap, budget = shares["cap"], shares["budget"]
    cap_name = "static_batch_size" if sched.scheduler == "static" else "max_num_seqs"

    if limit_shares_only[best] >= BINDING_SHARE and (best != TOKEN_BUDGET or saturated):
        limit = STATIC_BATCH if best == CONCURRENCY_CAP and sched.scheduler == "static" else best
        held = _pct(limit_shares_only[best])
        if best == CONCURRENCY_CAP and sched.scheduler == "static":
            verdict = (f"Static batching binds: for {held} of the busy time requests wait for the running batch "
                       f"(up to static_batch_size = {cap}, {shares['mean_running']:.0f} still running on average) "
                       f"to finish its longest request ({waiting_words(queue)}). Continuous batching (scheduler: "
                       f"continuous) admits them step by step.")
        elif best == CONCURRENCY_CAP:
            verdict = (f"Concurrency cap binds: the running batch sits at {cap_name} = {cap} for {held} of the "
                       f"busy time while requests wait ({waiting_words(queue)}). Raising {cap_name} lets queued "
                       f"requests start sooner (as long as KV capacity allows).")
        elif best == KV_CAPACITY:
            pre = shares["num_preempted"]
            also = f" and {counted(pre, 'preemption')}" if pre else ""
            verdict = (f"KV-cache capacity binds: KV usage reaches {_pct(shares['p99_kv_usage'])} (p99) with "
                       f"requests waiting for blocks{also} ({held} of the "
                       f"busy time). More KV memory (gpu_memory_utilization, fp8 KV, tensor parallelism, more "
                       f"replicas) or prefix caching helps.")
        else:
            verdict = (f"Token budget binds: {held} of the busy time runs steps filled to "
                       f"max_num_batched_tokens = {budget} while requests queue. Raising it admits prefills "
                       f"faster (shorter TTFT) at some cost to TPOT.")
    elif saturated:
        limit = split.bound if split is not None else STEP_TIME
        verdict = (f"The GPU itself is the limit: requests queue for {_pct(shares['queued'])} of the busy time "
                   f"while no scheduler limit holds, and its steps are {_split_words(split)}. More or faster "
                   f"GPUs help; scheduler knobs will not.")
    else:
        limit = split.bound if split is not None else STEP_TIME
        verdict = (f"No serving limit binds at this load: the server keeps up (requests wait in the queue only "
                   f"{_pct(shares['queued'])} of the busy time; {shares['mean_running']:.0f} running on average). "
                   f"Latency follows the step time, which is {_split_words(split)}.")
    return Diagnosis(limit, saturated, verdict, notes, limit_shares_only, stats, split)


def _were(n: int) -> str:
    return "was" if n == 1 else "were"


def waiting_words(queue: float) -> str:
    """How many wait while any do, named so it does not read as the run's time-averaged ``mean queue length``
    (which counts the time nobody waits too): ``about 11 requests on average whenever any wait``."""
    return f"about {counted(round(queue), 'request')} on average whenever any wait"


def diagnosis_to_dict(d: Diagnosis) -> dict[str, Any]:
    """JSON-able form (for exports and tests)."""
    split = None
    if d.step_split is not None:
        s = d.step_split
        split = {"compute": s.share("compute"), "memory": s.share("memory"),
                 "communication": s.share("communication"), "overhead": s.share("overhead"), "bound": s.bound}
    return {"limit": d.limit, "limit_name": d.limit_name, "saturated": d.saturated, "verdict": d.verdict,
            "notes": list(d.notes), "shares": dict(d.shares), "step_split": split}
