"""What limits a run: the verdict `twin run` and `twin compare` print under the tables and write under
``twin.limits`` in ``--json``.

The diagnosis itself is `twin.analysis.causes.diagnose`, the one the dashboard shows and `twin protocol` starts
from (per pool or replica group where a run has several deployments: `twin.analysis.pool_causes`). This module
adds what a reader needs beside the verdict: the run's own figures as its tables print them (the running batch
against the cap, the queue, TTFT, KV usage) and the knob to change, and writes the result as one JSON document
(``limits_doc``) that the printed lines (``limit_lines``) are rendered from.

With ``max_num_seqs`` binding, the evidence says whether the KV pool has room for the waiting requests: the
p99 KV usage scaled by (running + waiting) / running, against `twin.analysis.causes.KV_HIGH`.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from twin.analysis.causes import (COMPUTE, CONCURRENCY_CAP, IDLE, KV_CAPACITY, KV_HIGH, MEMORY_BANDWIDTH, OVERHEAD,
                                  STATIC_BATCH, TOKEN_BUDGET, Diagnosis, diagnose, diagnosis_to_dict)
from twin.analysis.offered_load import load_doc
from twin.analysis.pool_causes import cluster_diagnosis, pd_diagnosis
from twin.deploy.pd_pools import PdDeployment
from twin.results import numbers
from twin.results.report import format_value
from twin.sim.cluster import ClusterDeployment

KNOBS: dict[str, str] = {
    CONCURRENCY_CAP: "server.max_num_seqs",
    STATIC_BATCH: "server.scheduler: continuous",
    KV_CAPACITY: ("server.gpu_memory_utilization, deployment.kv_dtype: fp8, deployment.tensor_parallel_size or "
                  "deployment.replicas"),
    TOKEN_BUDGET: "server.max_num_batched_tokens",
}
BOUND_WORDS = {COMPUTE: "compute-bound", MEMORY_BANDWIDTH: "memory-bandwidth-bound", OVERHEAD: "overhead-bound"}
GPU_KNOB = "deployment.replicas or deployment.gpu (more or faster GPUs), or a smaller model"
AGGREGATED = ("Which limit binds needs one record per engine step; this run kept per-second sums (records: "
              "{steps: aggregate}).")
WIDTH = 80           # printed lines are wrapped to this many characters (a terminal's width where known)


def run_diagnosis(result: Any, deployment: Any,
                  metrics: Mapping[str, Any] | None = None) -> tuple[Diagnosis | None, dict[str, Diagnosis]]:
    """The run's diagnosis and, for prefill/decode pools or a mixed cluster, each part's; ``None`` when the
    run kept aggregated step records."""
    if getattr(result.steps, "aggregated", False):
        return None, {}
    if isinstance(deployment, PdDeployment):
        return pd_diagnosis(result, deployment)
    if isinstance(deployment, ClusterDeployment) and len(deployment.deployments) > 1:
        return cluster_diagnosis(result, deployment)
    if isinstance(deployment, ClusterDeployment):      # one replica group (a plan's candidate): one deployment
        return diagnose(result, deployment.deployments[0], metrics), {}
    return diagnose(result, deployment, metrics), {}


def _v(key: str, value: Any) -> str:
    return format_value(key, value)


def _share(value: Any) -> str:
    """A share of the busy time in whole percent, as the verdict writes it (``94%``)."""
    return "-" if value is None else numbers.percent(value, 0)


def _limit_share(d: Diagnosis) -> Any:
    """The share of the busy time the binding limit held (static batching is the concurrency cap's share)."""
    return d.shares.get(CONCURRENCY_CAP if d.limit == STATIC_BATCH else d.limit)


def _kv_room(metrics: Mapping[str, Any]) -> str:
    """With the concurrency cap binding: would the waiting requests fit in the KV pool?"""
    running, queue = metrics.get("mean_running_batch"), metrics.get("mean_queue_length")
    kv, replicas = metrics.get("p99_kv_usage"), metrics.get("num_replicas") or 1
    if running is None or queue is None or kv is None or running <= 0:
        return ""
    scaled = kv * (running * replicas + queue) / (running * replicas)
    head = (f"; KV usage p99 {_v('p99_kv_usage', kv)}, about {numbers.number(scaled * 100, 2)}% with the "
            f"waiting requests running too")
    if scaled < KV_HIGH:
        return f"{head}: the KV pool has room for them (raising the cap costs no KV capacity)"
    return f"{head}: the KV pool cannot hold them all at once (a higher cap helps until KV capacity binds)"


def _compute_note(d: Diagnosis) -> str:
    """With the cap binding on compute-bound steps: a bigger batch lengthens every step."""
    split = d.step_split
    if split is None or split.bound != COMPUTE:
        return ""
    return (f"; steps are already compute-bound ({_share(split.compute)} matrix math): a bigger batch also "
            f"lengthens each step (TPOT)")


def evidence(d: Diagnosis, metrics: Mapping[str, Any]) -> str:
    """The run's own figures behind the verdict, as its tables print them."""
    if d.limit == IDLE:
        return " ".join(d.notes) or "no request reached the engine."
    m = metrics
    cap, budget = d.stats.get("cap"), d.stats.get("budget")
    running = f"mean running batch {_v('mean_running_batch', m.get('mean_running_batch'))}"
    queue = (f"mean queue length {_v('mean_queue_length', m.get('mean_queue_length'))} over the run"
             if m.get("mean_queue_length") is not None else
             f"requests waiting for {_share(d.stats.get('queued'))} of the busy time")
    ttft = f"TTFT mean {_v('mean_ttft_ms', m.get('mean_ttft_ms'))}"
    preempted = numbers.counted(m.get("num_preemptions"), "preemption")
    if d.limit == CONCURRENCY_CAP:
        return f"{running} at max_num_seqs = {cap}, {queue}, {ttft}{_kv_room(m)}{_compute_note(d)}."
    if d.limit == STATIC_BATCH:
        return f"{running} of static_batch_size = {cap}, {queue}, {ttft}."
    if d.limit == KV_CAPACITY:
        return (f"KV usage p99 {_v('p99_kv_usage', m.get('p99_kv_usage'))}, {preempted}, {running} "
                f"(max_num_seqs = {cap}), {queue}, {ttft}.")
    if d.limit == TOKEN_BUDGET:
        return (f"steps filled to max_num_batched_tokens = {budget} for {_share(d.shares.get(TOKEN_BUDGET))} of "
                f"the busy time, {queue}, {ttft}.")
    return (f"busy fraction {_v('busy_fraction', m.get('busy_fraction'))}, {running} (max_num_seqs = {cap}), "
            f"{queue}, {ttft}, KV usage p99 {_v('p99_kv_usage', m.get('p99_kv_usage'))}.")


def knob(d: Diagnosis) -> str | None:
    """The setting to change for the limit that binds (``None``: nothing binds, the load sets the pace)."""
    if d.limit in KNOBS:
        return KNOBS[d.limit]
    return GPU_KNOB if d.saturated and d.limit != IDLE else None


def headline(d: Diagnosis | None, part: str = "") -> str:
    """The verdict in a few words: ``concurrency cap (max_num_seqs) binds (94% of the busy time)``; ``part``
    (``the prefill pool``) names where, for a run of several deployments."""
    if d is None:
        return "not judged (aggregated step records)"
    if d.limit == IDLE:
        return "nothing ran (no engine step)"
    where = f" in {part}" if part else ""
    if d.limit in (CONCURRENCY_CAP, STATIC_BATCH, KV_CAPACITY, TOKEN_BUDGET):
        return f"{d.limit_name} binds{where} ({_share(_limit_share(d))} of the busy time)"
    bound = f" ({BOUND_WORDS[d.limit]} steps)" if d.limit in BOUND_WORDS else ""
    if d.saturated:
        return f"the GPU{where}: requests queue while no scheduler limit holds{bound}"
    return f"no limit binds at this load{where}{bound}"


def limits_doc(result: Any, deployment: Any, metrics: Mapping[str, Any],
               offered_rate_per_s: float | None = None) -> dict[str, Any]:
    """``twin.limits`` of the run's JSON (docs/result-formats.md): the diagnosis (``twin.analysis.causes``'s
    dict), ``binding``, ``headline``, ``evidence``, ``knob``, ``load`` (offered against served,
    ``twin.analysis.offered_load``) and, per pool or replica group, ``parts``."""
    d, per = run_diagnosis(result, deployment, metrics)
    return limits_from(d, per, metrics, deployment, offered_rate_per_s)


def limits_from(d: Diagnosis | None, per: Mapping[str, Diagnosis], metrics: Mapping[str, Any],
                deployment: Any = None, offered_rate_per_s: float | None = None) -> dict[str, Any]:
    """``limits_doc`` from a diagnosis already made (``run_diagnosis``'s pair; the dashboard keeps its runs')."""
    if d is None:
        return {"limit": None, "limit_name": None, "binding": None, "saturated": None,
                "headline": headline(None), "verdict": AGGREGATED,
                "evidence": evidence(Diagnosis("", False, "", stats=_caps(deployment)), metrics),
                "knob": None, "notes": [], "shares": {}, "step_split": None, "parts": {},
                "load": load_doc(offered_rate_per_s, metrics, None)}
    doc = diagnosis_to_dict(d)
    unit, part = _unit(d), _part(d)
    said = evidence(d, _part_metrics(d, metrics) if unit else metrics)
    doc.update(binding=d.binding, headline=headline(d, part), evidence=f"in {part}, {said}" if unit else said,
               knob=part_knob(d, per), parts={name: diagnosis_to_dict(p) for name, p in per.items()})
    doc["load"] = load_doc(offered_rate_per_s, metrics, d)
    doc = {k: doc[k] for k in ("limit", "limit_name", "binding", "saturated", "headline", "verdict", "evidence",
                               "knob", "notes", "shares", "step_split", "parts", "load")}
    return doc


def _unit(d: Diagnosis) -> str | None:
    """``pool`` or ``group`` where the diagnosis is one part's of several deployments, else ``None``."""
    return "pool" if "pool" in d.stats else "group" if "group" in d.stats else None


def _part(d: Diagnosis) -> str:
    """Where the limit binds in a run of several deployments (``the prefill pool``, ``the a100 group``)."""
    unit = _unit(d)
    return f"the {d.stats[unit]} {unit}" if unit else ""


def part_knob(d: Diagnosis, per: Mapping[str, Diagnosis]) -> str | None:
    """``knob``, for a pool or replica group with where that part's own setting lives."""
    unit, turn = _unit(d), knob(d)
    if unit and turn:
        where = (f"disaggregation.{d.stats[unit]}" if unit == "pool" else
                 f"deployment.groups[{list(per).index(d.stats[unit])}]")
        turn += f" ({_part(d)}'s own: under {where})"
    return turn


def _caps(deployment: Any) -> dict[str, Any]:
    sc = getattr(deployment, "scheduler_config", None)
    return {"cap": getattr(sc, "max_num_seqs", "-"), "budget": getattr(sc, "max_num_batched_tokens", "-")}


def _part_metrics(d: Diagnosis, metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The limiting pool's or group's own figures (its steps'), TTFT the run's."""
    s = d.stats
    return {"mean_running_batch": s.get("mean_running"), "p99_kv_usage": s.get("p99_kv_usage"),
            "num_preemptions": s.get("num_preempted"), "busy_fraction": s.get("busy_fraction"),
            "mean_queue_length": None, "mean_batched_tokens": None, "mean_ttft_ms": metrics.get("mean_ttft_ms")}


# the short form `twin sweep` and `twin plan` print as a column and write as ``limit`` / ``limit_knob``
SHORT_NAMES = {CONCURRENCY_CAP: "max_num_seqs", STATIC_BATCH: "static batching", KV_CAPACITY: "KV pool",
               TOKEN_BUDGET: "max_num_batched_tokens"}


def short_limit(d: Diagnosis | None) -> str:
    """The binding limit in a word or two, for a table cell: ``max_num_seqs``, ``KV pool``,
    ``max_num_batched_tokens``, ``static batching``, ``GPU (compute-bound)`` (requests queue while no scheduler
    limit holds), ``none`` (the server keeps up), with the pool or replica group it binds in (``KV pool in the
    decode pool``); ``not judged`` (aggregated step records), ``nothing ran``."""
    if d is None:
        return "not judged"
    if d.limit == IDLE:
        return "nothing ran"
    where = f" in {_part(d)}" if _unit(d) else ""
    if d.limit in SHORT_NAMES:
        return SHORT_NAMES[d.limit] + where
    if d.saturated:
        return "GPU" + (f" ({BOUND_WORDS[d.limit]})" if d.limit in BOUND_WORDS else "") + where
    return "none"


def short_doc(result: Any, deployment: Any, metrics: Mapping[str, Any]) -> dict[str, str | None]:
    """One run's ``limit`` (``short_limit``) and ``limit_knob`` (``part_knob``; ``None`` where nothing binds),
    as a sweep's or plan's row keeps them."""
    d, per = run_diagnosis(result, deployment, metrics)
    return {"limit": short_limit(d), "limit_knob": part_knob(d, per) if d is not None else None}


def agreed(values: Sequence[str | None]) -> str | None:
    """Replications' limits as one cell: the value where they agree, else each value with its count, the most
    frequent first (``max_num_seqs (2 of 3), none (1 of 3)``); ``None`` when no replication ran."""
    shown = [v for v in values if v is not None]
    if not shown:
        return None
    counts = Counter(shown)
    if len(counts) == 1:
        return shown[0]
    return ", ".join(f"{v} ({n} of {len(shown)})" for v, n in counts.most_common())


def limit_lines(name: str, doc: Mapping[str, Any], *, short: bool = False, width: int = WIDTH) -> list[str]:
    """The printed form of ``limits_doc``: ``What limits <name>: <headline>``, then (unless ``short``) the
    verdict, the evidence and the knob, indented and wrapped to ``width`` characters. ``short`` (a compare of
    many variants) keeps the first line only, and that line says an overload first (``compact_headline``)."""
    if short:
        lead = f"What limits {name}: "
        return _wrap(lead + compact_headline(doc, max(width, 40) - len(lead)), width, "")
    out = _wrap(f"What limits {name}: {doc['headline']}", width, "")
    load = doc.get("load") or {}
    if load.get("overloaded"):
        out += _wrap(f"Binding limit: {load['sentence']}", width)
    for paragraph in str(doc["verdict"]).split("\n\n"):
        out += _wrap(paragraph, width)
    out += _wrap(f"Evidence: {doc['evidence']}", width)
    if doc.get("knob"):
        out += _wrap(f"Knob: {doc['knob']}", width)
    return out


def compact_headline(doc: Mapping[str, Any], width: int | None = None) -> str:
    """The verdict in one line: the headline, or for an overloaded run the load sentence (the ``Binding limit``
    line's words) with the binding limit's share of the busy time the headline gives (``offered load (12 req/s)
    above what this server sustains (8.1 req/s); under it, concurrency cap (max_num_seqs), 94% of the busy
    time``), so a one-line-per-variant compare loses neither. ``width`` (characters): the share is left out only
    where the sentence fits it and the sentence with the share does not (it never makes one line two)."""
    load = doc.get("load") or {}
    if not load.get("overloaded"):
        return str(doc["headline"])
    sentence = str(load["sentence"])
    limit = doc.get("limit")
    share = (doc.get("shares") or {}).get(CONCURRENCY_CAP if limit == STATIC_BATCH else limit)
    if not doc.get("binding") or share is None:
        return sentence
    longer = f"{sentence}, {_share(share)} of the busy time"
    return sentence if width is not None and len(sentence) <= width < len(longer) else longer


def _wrap(text: str, width: int, indent: str = "  ") -> list[str]:
    return textwrap.wrap(text, max(width, 40), initial_indent=indent, subsequent_indent=indent + "  ",
                         break_on_hyphens=False, break_long_words=False)


__all__ = ["AGGREGATED", "BOUND_WORDS", "GPU_KNOB", "KNOBS", "SHORT_NAMES", "agreed", "compact_headline", "evidence",
           "headline", "knob", "limit_lines", "limits_doc", "limits_from", "part_knob", "run_diagnosis", "short_doc",
           "short_limit"]
