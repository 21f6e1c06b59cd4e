"""The 30-minute protocol: before buying GPUs, check the serving stack, one change at a time.

Given a deployment and its traffic (a scenario's baseline or variant, or a trace), the twin walks the levers in
the order they usually pay off, predicting each against the *current* configuration:

1. **Baseline**: the metrics as the server runs today, and which limit binds (``twin.analysis.causes``).
2. **Scheduler limits**: does ``max_num_seqs`` (or ``max_num_batched_tokens``, or static batching) hold the
   running batch below the offered load while requests queue? What does lifting it give?
3. **Prefix caching**: the hit rate the traffic's prompts allow (an unbounded-cache oracle,
   ``twin.analysis.prefixes``) against the hit rate achieved; prompts that defeat the cache (a unique first
   segment such as a timestamp header in front of shared content) are flagged, and fixing them is predicted.
4. **Speculative decoding**: gain or loss per task class and concurrency (closed-loop streams of one class, with
   and without drafting), and on the scenario's own traffic. Without a ``speculative_decoding:`` section an
   EAGLE drafter with 3 draft tokens and per-class acceptance rates typical of EAGLE on an 8B model is assumed,
   and the report says so.
5. **The combination** of every recommended change.

Every configuration runs ``replications`` times (seeds ``seed .. seed + n - 1``); a step's deltas are taken per
replication against the baseline run with the same seed (common random numbers) and summarised with
``twin.results.metrics.replicate_summary``: mean and a 95 % Student-t interval. Each step carries the ``vllm serve`` /
``vllm bench serve`` lines that measure it on the real server (``twin.analysis.vllm_commands``).

With ``engine="cpu"`` (a tiny model and a calibrated profile, e.g. ``scenarios/validate_tiny_cpu.yaml``) every
step without speculative decoding is also served for real on the calibration engine
(``calibration.validation_run``), and the report shows measured beside predicted.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from twin.sim.deployment import Deployment, require_single_deployment, resolve_deployment, vllm_default_limits
from twin.sim.run import metrics_of, run_body
from twin.analysis.causes import (
    BINDING_SHARE,
    CONCURRENCY_CAP,
    KV_CAPACITY,
    TOKEN_BUDGET,
    Diagnosis,
    diagnose,
)
from twin.errors import TwinInputError
from twin.results.metrics import replicate_summary
from twin.analysis.prefixes import analyze_prefixes, workload_specs
from twin.results.sim_result import SimResult
from twin.results.report import direction, finite_number, format_value, label
from twin.scenario import BASELINE, REPLACE_MARKER, Scenario, ScenarioBody
from twin.analysis.vllm_commands import bench_commands, serve_command, validate_command

DELTA_KEYS: tuple[str, ...] = (
    "request_throughput", "output_throughput", "request_goodput", "mean_ttft_ms", "p99_ttft_ms",
    "median_tpot_ms", "p99_tpot_ms", "p99_e2el_ms", "prefix_cache_hit_rate",
)
HEADLINE_KEYS: tuple[str, ...] = ("output_throughput", "p99_ttft_ms", "median_tpot_ms", "p99_e2el_ms")
MIN_EFFECT = 0.03          # a relative change smaller than this is "no change", significant or not
MIN_HIT_RATE = 0.05        # traffic whose oracle hit rate is below this shares (almost) nothing
HIT_GAP = 0.10             # achieved below attainable by more than this: flagged
SPEC_GAIN = 1.05           # throughput ratio (spec / no spec) counted as a gain ...
SPEC_LOSS = 0.97           # ... and as a loss

RECOMMEND = "recommend"
ADVISE_AGAINST = "advise_against"
NO_CHANGE = "no_change"
FLAG = "flag"
INFO = "info"
VERDICT_WORDS = {RECOMMEND: "recommend", ADVISE_AGAINST: "advise against", NO_CHANGE: "no change",
                 FLAG: "flagged", INFO: "measured"}

# EAGLE (1 layer) on an 8B target, 3 draft tokens: P(at least i drafts accepted), by task-class keyword.
# Typical of published EAGLE acceptance on Llama-3.1-8B-Instruct; an assumption the report states.
ASSUMED_ACCEPTANCE: tuple[tuple[tuple[str, ...], list[float]], ...] = (
    (("code", "coding", "program", "sql"), [0.80, 0.62, 0.48]),
    (("struct", "json", "extract", "tool", "function", "schema"), [0.85, 0.72, 0.61]),
    (("creative", "story", "writing", "poem", "fiction"), [0.55, 0.25, 0.11]),
    (("summar", "rag", "retriev", "qa"), [0.75, 0.55, 0.40]),
)
ASSUMED_DEFAULT = [0.72, 0.50, 0.34]   # chat-like


def merge_overrides(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Two override mappings merged into one that ``Scenario.body`` merges later: like ``deep_merge``, but a
    mapping marked ``_replace: true`` keeps its marker (it must still replace the scenario's section)."""
    out = copy.deepcopy(dict(base))
    inside_replaced = out.get(REPLACE_MARKER) is True
    for key, value in extra.items():
        if isinstance(value, Mapping) and value.get(REPLACE_MARKER) is True:
            # inside a section that replaces wholesale, a nested marker would reach the validator
            out[key] = _strip_markers(value) if inside_replaced else copy.deepcopy(dict(value))
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_overrides(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _strip_markers(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _strip_markers(v) for k, v in value.items() if k != REPLACE_MARKER}
    return copy.deepcopy(value)


def assumed_spec_config(class_names: list[str]) -> dict[str, Any]:
    """An EAGLE drafter with 3 draft tokens and an acceptance curve per task class (by its name)."""
    acceptance: dict[str, Any] = {}
    for name in class_names:
        low = name.lower()
        curve = next((c for keys, c in ASSUMED_ACCEPTANCE if any(k in low for k in keys)), ASSUMED_DEFAULT)
        acceptance[name] = {"per_position": list(curve)}
    acceptance["default"] = {"per_position": list(ASSUMED_DEFAULT)}
    return {"method": "eagle", "num_speculative_tokens": 3, "acceptance": acceptance}


# --------------------------------------------------------------------------------------------------------
# evaluations: one configuration, its replications
# --------------------------------------------------------------------------------------------------------
@dataclass
class Evaluation:
    label: str
    overrides: dict[str, Any]
    body: ScenarioBody
    deployment: Deployment
    runs: list[tuple[SimResult, dict[str, Any]]]
    measured: dict[str, Any] | None = None   # engine metrics (engine mode)

    @property
    def result(self) -> SimResult:
        return self.runs[0][0]

    @property
    def metrics(self) -> dict[str, Any]:
        return self.runs[0][1]

    @property
    def summary(self) -> dict[str, dict]:
        return replicate_summary([m for _, m in self.runs])

    def mean(self, key: str) -> float | None:
        vals = [m.get(key) for _, m in self.runs]
        vals = [float(v) for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]
        return float(np.mean(vals)) if vals else None


class Runner:
    """Runs configurations (overrides over the scenario's variant) with replications, once each."""

    def __init__(self, scenario: Scenario, variant: str, base_overrides: dict[str, Any], replications: int,
                 progress: Callable[[str], None] | None = None) -> None:
        self.scenario = scenario
        self.variant = variant
        self.base_overrides = base_overrides
        self.replications = replications
        self.progress = progress
        self.evaluations: dict[str, Evaluation] = {}
        self._by_key: dict[str, Evaluation] = {}

    def body(self, overrides: dict[str, Any]) -> ScenarioBody:
        merged = merge_overrides(self.base_overrides, overrides) if overrides else self.base_overrides
        body = self.scenario.body(self.variant, merged)
        return body.model_copy(update={"replications": self.replications})

    def evaluate(self, name: str, overrides: dict[str, Any]) -> Evaluation:
        key = json.dumps(overrides, sort_keys=True, default=str)
        if key in self._by_key:
            ev = self._by_key[key]
            self.evaluations.setdefault(name, ev)
            return ev
        body = self.body(overrides)
        try:
            dep = resolve_deployment(body, self.scenario.base_dir)
        except TwinInputError as exc:
            raise TwinInputError(f"{self.scenario.source} [{name}]: {exc}") from None
        runs = []
        for r in range(self.replications):
            if self.progress:
                self.progress(f"{name} (replication {r + 1}/{self.replications})")
            result = run_body(body, self.scenario.base_dir, replication=r, deployment=dep)
            runs.append((result, metrics_of(result, body)))
        ev = Evaluation(name, overrides, body, dep, runs)
        self._by_key[key] = ev
        self.evaluations[name] = ev
        return ev


def _first_hit_rate(ev: Evaluation) -> float:
    """Prefix-cache hits at each request's first admission / prompt tokens, over the replications. (vLLM's
    counters also count a preempted request's re-admission, which hits its own blocks: not the traffic's
    sharing.)"""
    from twin.results.records import FINISHED

    rates = []
    for result, _ in ev.runs:
        done = [r for r in result.requests if r.status == FINISHED]
        prompt = sum(r.num_prompt_tokens for r in done)
        if prompt:
            rates.append(sum(max(r.num_cached_tokens, 0) for r in done) / prompt)
    return float(np.mean(rates)) if rates else 0.0


def compare(base: Evaluation, cand: Evaluation, keys: tuple[str, ...] = DELTA_KEYS) -> dict[str, dict]:
    """Per replication ``cand - base`` (same seed) and ``cand / base - 1`` (as ``<key>_rel``), summarised
    with confidence intervals."""
    rows = []
    for (_, bm), (_, cm) in zip(base.runs, cand.runs, strict=True):
        row: dict[str, float] = {}
        for k in keys:
            b, c = finite_number(bm.get(k)), finite_number(cm.get(k))
            if b is None or c is None:
                continue
            row[k] = c - b
            if b != 0:
                row[f"{k}_rel"] = c / b - 1.0
        rows.append(row)
    return replicate_summary(rows)


def ratio_summary(num: Evaluation, den: Evaluation, key: str) -> dict[str, Any]:
    vals = []
    for (_, a), (_, b) in zip(num.runs, den.runs, strict=True):
        x, y = finite_number(a.get(key)), finite_number(b.get(key))
        if x is not None and y:
            vals.append({"ratio": x / y})
    return replicate_summary(vals).get("ratio", {"mean": None, "half_width": None, "low": None, "high": None,
                                                 "n": 0})


def effect(deltas: Mapping[str, dict], key: str) -> int:
    """+1: ``key`` clearly improved (beyond ``MIN_EFFECT`` and, with replications, its interval excludes 0);
    -1: clearly worse; 0: neither."""
    d = deltas.get(key)
    rel = deltas.get(f"{key}_rel")
    if not d or d.get("mean") is None:
        return 0
    sign = direction(key) or 1
    r = rel.get("mean") if rel else None
    if key == "prefix_cache_hit_rate":
        size = abs(d["mean"])
        big = size >= MIN_EFFECT
    else:
        big = r is not None and abs(r) >= MIN_EFFECT
    if not big:
        return 0
    # relative changes vary less across seeds than absolute ones (the baseline itself moves with the seed)
    ci = rel if key != "prefix_cache_hit_rate" and rel and rel.get("mean") is not None else d
    if ci.get("half_width") is not None and ci["low"] <= 0 <= ci["high"]:
        return 0
    return sign if d["mean"] > 0 else -sign


def delta_text(key: str, deltas: Mapping[str, dict]) -> str:
    """``TTFT p99 (ms) -5,179 (-96.4% ± 0.3%)``: mean change, relative change and its 95% half-width."""
    d = deltas.get(key)
    if not d or d.get("mean") is None:
        return f"{label(key)}: -"
    rel = deltas.get(f"{key}_rel") or {}
    mean = d["mean"]
    if key == "prefix_cache_hit_rate":
        text = f"{mean * 100:+.1f} pp"
        if d.get("half_width") is not None:
            text += f" ± {d['half_width'] * 100:.1f}"
        return f"{label(key)} {text}"
    text = f"{mean:+.3g}" if abs(mean) < 100 else f"{mean:+,.0f}"
    if rel.get("mean") is not None:
        text += f" ({rel['mean'] * 100:+.1f}%"
        if rel.get("half_width") is not None:
            text += f" ± {rel['half_width'] * 100:.1f}%"
        text += ")"
    return f"{label(key)} {text}"


# --------------------------------------------------------------------------------------------------------
# the protocol's steps
# --------------------------------------------------------------------------------------------------------
@dataclass
class Step:
    key: str
    title: str
    question: str
    verdict: str = NO_CHANGE
    finding: str = ""
    change: dict[str, Any] = field(default_factory=dict)      # the recommended overrides
    change_label: str = ""
    candidate: str | None = None                               # evaluation compared with the baseline
    deltas: dict[str, dict] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    measured: dict[str, Any] | None = None                     # engine mode: measured metrics and deltas

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "title": self.title, "question": self.question, "verdict": self.verdict,
                "finding": self.finding, "change": self.change, "change_label": self.change_label,
                "candidate": self.candidate, "deltas": self.deltas, "details": self.details,
                "commands": self.commands, "notes": self.notes, "measured": self.measured}


@dataclass
class ProtocolReport:
    scenario: str
    source: str
    variant: str
    replications: int
    seed: int
    headline: str
    offered_load: str
    steps: list[Step]
    assumptions: list[str]
    evaluations: dict[str, Evaluation]
    engine: str | None = None
    command_notes: list[str] = field(default_factory=list)

    def step(self, key: str) -> Step:
        for s in self.steps:
            if s.key == key:
                return s
        raise KeyError(key)

    @property
    def recommendations(self) -> list[Step]:
        return [s for s in self.steps if s.verdict == RECOMMEND and s.key != "combination"]

    def as_dict(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "source": self.source, "variant": self.variant,
                "replications": self.replications, "seed": self.seed, "headline": self.headline,
                "offered_load": self.offered_load, "assumptions": self.assumptions, "engine": self.engine,
                "command_notes": self.command_notes,
                "steps": [s.as_dict() for s in self.steps],
                "evaluations": {name: {"overrides": ev.overrides, "metrics": _plain_metrics(ev.metrics),
                                       "replications": ev.summary, "measured": ev.measured}
                                for name, ev in self.evaluations.items()}}


def _plain_metrics(m: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in m.items() if isinstance(v, (int, float, str, bool)) or v is None}


def headline(body: ScenarioBody, dep: Deployment) -> str:
    sc = dep.scheduler_config
    spec = body.speculative_decoding
    return (f"{body.deployment.model} on {body.deployment.replicas}x{body.deployment.tensor_parallel_size} "
            f"{dep.gpu.name}: {sc.scheduler} scheduler, max_num_seqs={sc.max_num_seqs}, "
            f"max_num_batched_tokens={sc.max_num_batched_tokens}, prefix caching "
            f"{'on' if sc.enable_prefix_caching else 'off'}, speculative decoding "
            f"{f'{spec.method} k={spec.num_speculative_tokens}' if spec else 'off'}")


def offered_load(body: ScenarioBody) -> tuple[str, int | None]:
    """Words for the traffic's load, and its concurrency when it is closed-loop."""
    wl = body.workload
    arr = wl.arrivals
    if arr is None:
        return f"the trace {wl.trace.path} at its own arrival times", None
    if arr.process == "closed_loop":
        return f"{arr.concurrency} closed-loop streams", arr.concurrency
    if arr.process == "piecewise":
        return "a piecewise arrival rate", None
    return f"{arr.rate_per_s:g} req/s ({arr.process} arrivals)", None


class _Protocol:
    def __init__(self, scenario: Scenario, scenario_arg: str, variant: str, runner: Runner,
                 spec_concurrency: list[int] | None) -> None:
        self.scenario = scenario
        self.scenario_arg = scenario_arg
        self.variant = variant
        self.runner = runner
        self.spec_concurrency = spec_concurrency
        self.assumptions: list[str] = []
        self.command_notes: list[str] = []
        self.steps: list[Step] = []

    # ---- helpers ----------------------------------------------------------------------------------------
    def _num_prompts(self, ev: Evaluation) -> int:
        return int(round(ev.mean("completed") or ev.metrics.get("num_requests") or 1))

    def _commands(self, step: Step, ev: Evaluation, name: str) -> None:
        from twin.results.records import FINISHED

        done = [r for r in ev.result.requests if r.status == FINISHED]
        lengths = rate = None
        if done:
            lengths = (int(round(np.mean([r.num_prompt_tokens for r in done]))),
                       int(round(np.mean([r.num_output_tokens for r in done]))))
            span = max(r.arrival_s for r in done) - min(r.arrival_s for r in done)
            rate = len(done) / span if span > 0 else None
        cmds, notes = bench_commands(ev.body, ev.deployment, num_prompts=self._num_prompts(ev), result_name=name,
                                     base_dir=self.scenario.base_dir, mean_lengths=lengths, mean_rate=rate)
        step.commands = [serve_command(ev.body, ev.deployment), *cmds]
        overrides = merge_overrides(self.runner.base_overrides, ev.overrides) if ev.overrides else \
            self.runner.base_overrides
        step.commands.append(validate_command(self.scenario_arg, self.variant, overrides,
                                              f"results/{name}.json" if len(cmds) == 1 else
                                              f"results/{name}-<class>.json"))
        self.command_notes += [n for n in notes if n not in self.command_notes]

    def _headline_deltas(self, deltas: Mapping[str, dict], keys: tuple[str, ...] = HEADLINE_KEYS) -> str:
        return "; ".join(delta_text(k, deltas) for k in keys if deltas.get(k))

    # ---- 1. baseline ---------------------------------------------------------------------------------------
    def baseline(self) -> tuple[Evaluation, Diagnosis]:
        base = self.runner.evaluate("baseline", {})
        diag = diagnose(base.result, base.deployment, base.metrics)
        step = Step("baseline", "Baseline", "How does the server run today, and which limit binds?", INFO,
                    diag.verdict, candidate="baseline")
        step.details = {"limit": diag.limit, "limit_name": diag.limit_name, "saturated": diag.saturated,
                        "shares": diag.shares, "summary": {k: base.summary.get(k) for k in DELTA_KEYS}}
        step.notes += diag.notes
        self._commands(step, base, "baseline")
        self.steps.append(step)
        return base, diag

    # ---- 2. scheduler limits ----------------------------------------------------------------------------------
    def scheduler_limits(self, base: Evaluation, diag: Diagnosis) -> Step:
        sc = base.deployment.scheduler_config
        body = base.body
        step = Step("scheduler_limits", "Scheduler limits",
                    "Does max_num_seqs or max_num_batched_tokens cap concurrency below the offered load?")
        def_tokens, def_seqs = vllm_default_limits(base.deployment.gpu)
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
                              f"the busy time, {stats.get('num_preempted', 0)} preemption(s)): no scheduler limit "
                              f"lifts that; KV memory does (gpu_memory_utilization, kv_cache_dtype fp8, tensor "
                              f"parallelism, another replica), or prefix caching where prompts share prefixes")
        if not server:
            peak = int(np.max(base.result.steps.column("num_running"))) if len(base.result.steps) else 0
            step.verdict = NO_CHANGE
            step.finding = (f"No scheduler limit binds: the running batch peaks at {peak} (max_num_seqs = "
                            f"{sc.max_num_seqs}) and steps fill max_num_batched_tokens = {sc.max_num_batched_tokens}"
                            f" only {budget_share:.0%} of the busy time under {load_words}. Leave them.")
            step.details["peak_running"] = peak
            self.steps.append(step)
            return step
        cand = self.runner.evaluate("lift scheduler limits", {"server": server})
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
                       f"busy time while about {queue:.0f} request(s) wait (offered: {load_words}{queued_streams})")
        if "max_num_batched_tokens" in server and budget_share >= BINDING_SHARE:
            why.append(f"steps are filled to max_num_batched_tokens = {sc.max_num_batched_tokens} for "
                       f"{budget_share:.0%} of the busy time while requests queue")
        gains = [effect(deltas, k) for k in ("output_throughput", "p99_ttft_ms", "mean_ttft_ms", "p99_e2el_ms")]
        worse = [k for k in ("p99_tpot_ms", "median_tpot_ms") if effect(deltas, k) < 0]
        pre = cand.mean("num_preemptions") or 0.0
        if any(g > 0 for g in gains):
            step.verdict = RECOMMEND
            step.finding = (f"{'; '.join(why).capitalize()}. Lifting ({step.change_label}) predicts: "
                            f"{self._headline_deltas(deltas)}. The running batch then peaks at {peak_after}.")
            if worse:
                step.notes.append(f"{', '.join(label(k) for k in worse)} rise{'s' if len(worse) == 1 else ''}: "
                                  f"a bigger batch makes each step longer (check the TPOT SLO)")
        else:
            step.verdict = NO_CHANGE
            step.finding = (f"{'; '.join(why).capitalize()}, but lifting ({step.change_label}) changes nothing "
                            f"measurable ({self._headline_deltas(deltas)}): the GPU, not the limit, sets the pace.")
        if pre and not base.mean("num_preemptions"):
            step.notes.append(f"with the limit lifted, KV capacity binds next: {pre:.0f} preemption(s) per run")
        self._commands(step, cand, "scheduler-limits")
        self.steps.append(step)
        return step

    # ---- 3. prefix caching ------------------------------------------------------------------------------------
    def prefix_caching(self, base: Evaluation) -> Step:
        body = base.body
        sc = base.deployment.scheduler_config
        step = Step("prefix_caching", "Prefix caching",
                    "What hit rate do the traffic's prefixes allow, what does the server achieve, and does "
                    "anything in the prompts defeat the cache?")
        specs = workload_specs(body.workload, body.seed, self.scenario.base_dir)
        pa = analyze_prefixes(specs, sc.block_size)
        achieved = _first_hit_rate(base) if sc.enable_prefix_caching else 0.0
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
            self.steps.append(step)
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
        cand = self.runner.evaluate("prefix caching", change)
        deltas = compare(base, cand)
        step.candidate, step.deltas = cand.label, deltas
        step.change, step.change_label = change, "; ".join(words)
        hit_after = _first_hit_rate(cand)
        step.details["hit_rate_after"] = hit_after
        if server_change and fix:
            only = self.runner.evaluate("prefix caching (prompts unchanged)", {"server": server_change})
            step.details["hit_rate_caching_only"] = _first_hit_rate(only)
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
                            f"rate and {self._headline_deltas(deltas, ('mean_ttft_ms', 'p99_ttft_ms', 'output_throughput', 'median_tpot_ms'))}.")
        else:
            step.verdict = NO_CHANGE
            step.finding = (f"{allow}; {state}. With the change ({step.change_label}; {hit_after:.0%} hits) the "
                            f"twin predicts "
                            f"no clear gain: {self._headline_deltas(deltas)}.")
        if fix:
            step.notes.append("the prompt fix is an application change (the client's prompt template), not a "
                              "server flag")
        self._commands(step, cand, "prefix-caching")
        self.steps.append(step)
        return step

    # ---- 4. speculative decoding --------------------------------------------------------------------------------
    def speculative_decoding(self, base: Evaluation) -> Step:
        body = base.body
        raw = self.scenario.raw(self.variant, self.runner.base_overrides)
        wl = body.workload
        step = Step("speculative_decoding", "Speculative decoding",
                    "Per task class and concurrency: does drafting gain or lose?")
        current = raw.get("speculative_decoding")
        classes = [c.name for c in wl.classes] if wl.classes else [wl.trace.task_class]
        if current is None:
            spec = assumed_spec_config(classes)
            acc = ", ".join(f"{n} {spec['acceptance'][n]['per_position']}" for n in classes)
            self.assumptions.append(
                f"Speculative decoding: the scenario has none, so an EAGLE drafter with 3 draft tokens is assumed, "
                f"with per-position acceptance (P(at least i drafts accepted)) by task class: {acc}. Measure the "
                f"real acceptance (vLLM's spec_decode metrics) before trusting the gain.")
            step.details["assumed"] = True
        else:
            spec = current
            step.details["assumed"] = False
        step.details["config"] = spec
        _, closed_c = offered_load(body)
        if closed_c:
            operating = closed_c
        else:
            operating = max(1, int(math.ceil(base.mean("mean_running_batch") or 1.0)))
        levels = sorted({1, operating, *(self.spec_concurrency or [])})
        step.details["operating_concurrency"] = operating
        raw_classes = (raw.get("workload") or {}).get("classes") or []
        grid = []
        for name in classes:
            for c in levels:
                wl_over: dict[str, Any] = {
                    "arrivals": {"_replace": True, "process": "closed_loop", "concurrency": c},
                    "num_requests": max(2 * c, 16), "duration_s": None}
                if raw_classes:
                    cls = copy.deepcopy(next(x for x in raw_classes if x.get("name") == name))
                    cls["share"] = 1.0
                    wl_over["classes"] = [cls]
                on = self.runner.evaluate(f"spec {name} c{c}", {"workload": wl_over, "speculative_decoding": spec})
                off = self.runner.evaluate(f"no spec {name} c{c}", {"workload": wl_over,
                                                                   "speculative_decoding": None})
                tp = ratio_summary(on, off, "output_throughput")
                tpot = ratio_summary(on, off, "median_tpot_ms")
                r = tp.get("mean") or 0.0
                hw = tp.get("half_width")
                if r >= SPEC_GAIN and (hw is None or tp["low"] > 1.0):
                    verdict = "gain"
                elif r <= SPEC_LOSS and (hw is None or tp["high"] < 1.0):
                    verdict = "loss"
                else:
                    verdict = "neutral"
                grid.append({"task_class": name, "concurrency": c, "throughput_ratio": tp, "tpot_ratio": tpot,
                             "acceptance_length": on.mean("spec_decode_acceptance_length"),
                             "verdict": verdict, "operating": c == operating})
        step.details["grid"] = grid
        cap = base.deployment.scheduler_config.max_num_seqs * body.deployment.replicas
        if operating > cap:
            step.notes.append(f"at the current max_num_seqs the running batch holds at most {cap} of the {operating} "
                              f"streams, so the grid's {operating}-stream cells run at a batch of {cap}; the "
                              f"combination step shows speculation with the scheduler limits lifted")
        at_op = [g for g in grid if g["operating"]]
        losers = [g["task_class"] for g in at_op if g["verdict"] == "loss"]
        gainers = [g["task_class"] for g in at_op if g["verdict"] == "gain"]
        toggled = {"speculative_decoding": None if current is not None else spec}
        cand = self.runner.evaluate("speculative decoding off" if current is not None else "speculative decoding",
                                    toggled)
        deltas = compare(base, cand)
        step.candidate, step.deltas = cand.label, deltas
        overall_tp = effect(deltas, "output_throughput")
        overall_lat = effect(deltas, "median_tpot_ms")
        cells = "; ".join(f"{g['task_class']} at {g['concurrency']} stream(s): "
                          f"{(g['throughput_ratio'].get('mean') or 0):.2f}x output throughput"
                          for g in grid)
        if current is None:
            better = overall_tp > 0 or overall_lat > 0
            worse = overall_tp < 0 or overall_lat < 0
            if losers or (worse and not better):
                step.verdict = ADVISE_AGAINST
                who = f" for {', '.join(losers)}" if losers else ""
                step.finding = (f"Speculative decoding loses at the operating concurrency ({operating}){who}: "
                                f"verification and drafting fill a batch that is no longer memory-bound. {cells}. "
                                f"On the scenario's traffic: {self._headline_deltas(deltas)}. Leave it off"
                                f"{' (or serve ' + ', '.join(gainers) + ' on a separate pool with it)' if gainers else ''}.")
            elif better:
                step.verdict = RECOMMEND
                step.change = toggled
                step.change_label = f"speculative decoding ({spec['method']}, k={spec['num_speculative_tokens']})"
                step.finding = (f"Speculative decoding gains: {cells}. On the scenario's traffic: "
                                f"{self._headline_deltas(deltas)}.")
            else:
                step.verdict = NO_CHANGE
                step.finding = f"Speculative decoding changes little: {cells}. On the scenario's traffic: " \
                               f"{self._headline_deltas(deltas)}."
        else:
            # it is on now; the candidate turns it off: improvements mean speculation was costing
            off_better = overall_tp > 0 or overall_lat > 0
            off_worse = overall_tp < 0 or overall_lat < 0
            if losers or (off_better and not off_worse):
                step.verdict = ADVISE_AGAINST
                step.change = toggled
                step.change_label = "turn speculative decoding off"
                who = f" for {', '.join(losers)}" if losers else ""
                step.finding = (f"Speculative decoding (on now) loses at the operating concurrency ({operating})"
                                f"{who}: the batch is large enough that verifying drafts costs more compute than "
                                f"the accepted tokens save. {cells}. Turning it off predicts: "
                                f"{self._headline_deltas(deltas)}.")
            elif off_worse:
                step.verdict = NO_CHANGE
                step.finding = (f"Speculative decoding (on now) pays: {cells}. Turning it off would give "
                                f"{self._headline_deltas(deltas)}. Keep it.")
            else:
                step.verdict = NO_CHANGE
                step.finding = f"Speculative decoding (on now) changes little: {cells}."
        self._commands(step, cand, "speculative-decoding")
        self.steps.append(step)
        return step

    # ---- 5. the combination ------------------------------------------------------------------------------------
    def combination(self, base: Evaluation) -> Step:
        step = Step("combination", "The combination", "All recommended changes together?")
        changes = [s for s in self.steps if s.change and s.verdict in (RECOMMEND, ADVISE_AGAINST)]
        if not changes:
            step.verdict = NO_CHANGE
            base_step = self.steps[0]
            if base_step.details.get("saturated"):
                step.finding = ("Nothing to change in the serving stack: requests queue on the GPU itself; more or "
                                "faster GPUs (twin plan) are the lever here.")
            else:
                step.finding = ("Nothing to change: the server keeps up with this load and none of the levers gains "
                                "clearly.")
            self.steps.append(step)
            return step
        merged: dict[str, Any] = {}
        for s in changes:
            merged = merge_overrides(merged, s.change)
        sc = base.deployment.scheduler_config
        server = merged.get("server") or {}
        if "max_num_seqs" in server and "max_num_batched_tokens" not in server and \
                sc.max_num_batched_tokens < server["max_num_seqs"]:
            server["max_num_batched_tokens"] = server["max_num_seqs"]
        cand = self.runner.evaluate("combination", merged)
        deltas = compare(base, cand)
        step.change, step.candidate, step.deltas = merged, cand.label, deltas
        step.change_label = "; ".join(s.change_label for s in changes)
        good = any(effect(deltas, k) > 0 for k in HEADLINE_KEYS + ("mean_ttft_ms",))
        step.verdict = RECOMMEND if good else NO_CHANGE
        alone = ""
        if len(changes) > 1:
            alone = " Each change alone: " + "; ".join(
                f"{s.change_label}: {delta_text('output_throughput', s.deltas)}" for s in changes) + "."
        step.finding = (f"Together ({step.change_label}): {self._headline_deltas(deltas)}.{alone}")
        self._commands(step, cand, "combination")
        self.steps.append(step)
        return step


# --------------------------------------------------------------------------------------------------------
# engine mode
# --------------------------------------------------------------------------------------------------------
ENGINE_KEYS = ("request_throughput", "output_throughput", "mean_ttft_ms", "p99_ttft_ms", "median_tpot_ms",
               "p99_tpot_ms", "p99_e2el_ms", "prefix_cache_hit_rate")


def _measure_on_engine(report_steps: list[Step], runner: Runner, device: str,
                       progress: Callable[[str], None] | None) -> None:
    """Serve the baseline and each step's candidate for real; attach measured metrics and deltas."""
    try:
        from calibration.validation_run import validate_body
    except ImportError as exc:  # torch missing
        raise TwinInputError(f"--engine needs torch ({exc.name} is not installed): "
                             f"pip install -e '.[calibration]'") from None
    measured: dict[str, dict[str, Any]] = {}

    def measure(ev: Evaluation) -> dict[str, Any]:
        if ev.label not in measured:
            if progress:
                progress(f"serving {ev.label} for real on the {device} engine")
            run = validate_body(ev.body, runner.scenario.base_dir, device=device)
            measured[ev.label] = {"measured": {k: run.measured_metrics.get(k) for k in ENGINE_KEYS},
                                  "predicted_same_seed": {k: run.predicted_metrics.get(k) for k in ENGINE_KEYS}}
            ev.measured = measured[ev.label]
        return measured[ev.label]

    base = runner.evaluations["baseline"]
    if base.body.cost_model.kind != "profile":
        raise TwinInputError("--engine: the scenario's cost_model must be a calibrated profile (kind: profile), "
                             "e.g. scenarios/validate_tiny_cpu.yaml")
    b = measure(base)
    for step in report_steps:
        if step.key == "baseline":
            step.measured = {"baseline": b["measured"]}
            continue
        if not step.candidate:
            continue
        ev = runner.evaluations[step.candidate]
        if ev.body.speculative_decoding is not None or base.body.speculative_decoding is not None:
            step.notes.append("not measured on the engine: the calibration engine runs no drafter")
            continue
        c = measure(ev)
        deltas = {}
        for k in ENGINE_KEYS:
            x, y = finite_number(c["measured"].get(k)), finite_number(b["measured"].get(k))
            if x is not None and y is not None:
                deltas[k] = {"delta": x - y, "rel": (x / y - 1.0) if y else None}
        step.measured = {"baseline": b["measured"], "candidate": c["measured"], "deltas": deltas}


# --------------------------------------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------------------------------------
def run_protocol(scenario: Scenario, *, scenario_arg: str | None = None, variant: str = BASELINE,
                 overrides: dict[str, Any] | None = None, replications: int = 3, seed: int | None = None,
                 spec_concurrency: list[int] | None = None, engine: str | None = None,
                 engine_duration_s: float | None = None,
                 progress: Callable[[str], None] | None = None) -> ProtocolReport:
    """Run the protocol on ``scenario``'s ``variant`` (with ``overrides``); see the module docstring."""
    if replications < 1:
        raise TwinInputError(f"--replications: must be >= 1 (got {replications})")
    base_overrides = copy.deepcopy(overrides or {})
    if seed is not None:
        base_overrides["seed"] = seed
    if engine_duration_s is not None:
        base_overrides = merge_overrides(base_overrides, {"workload": {"duration_s": engine_duration_s}})
    require_single_deployment(scenario.body(variant, base_overrides), "twin protocol (it varies one server's "
                              "settings)", scenario.source)
    if engine:
        body = scenario.body(variant, base_overrides)
        if body.cost_model.kind != "profile":
            raise TwinInputError("--engine: the scenario's cost_model must be a calibrated profile (kind: profile), "
                                 "e.g. scenarios/validate_tiny_cpu.yaml")
    runner = Runner(scenario, variant, base_overrides, replications, progress)
    proto = _Protocol(scenario, scenario_arg or scenario.source, variant, runner, spec_concurrency)
    base, diag = proto.baseline()
    proto.scheduler_limits(base, diag)
    proto.prefix_caching(base)
    proto.speculative_decoding(base)
    proto.combination(base)
    if engine:
        _measure_on_engine(proto.steps, runner, engine, progress)
    load, _ = offered_load(base.body)
    return ProtocolReport(scenario.name, scenario.source, variant, replications, base.body.seed,
                          headline(base.body, base.deployment), load, proto.steps, proto.assumptions,
                          runner.evaluations, engine, proto.command_notes)


def format_metric(key: str, value: Any) -> str:
    return format_value(key, value)


__all__ = ["DELTA_KEYS", "Evaluation", "ProtocolReport", "Runner", "Step", "assumed_spec_config", "compare",
           "delta_text", "effect", "run_protocol"]
