"""What a run's numbers mean, in the lines the page puts beside each verdict: the load offered against the
load served (a server that cannot keep up is overloaded before any memory limit is to blame), SLO attainment
and goodput, cost per million tokens from the bundled price table, and numbers short enough for a card."""

from __future__ import annotations

from typing import Any

from twin.analysis.offered_load import overload_sentence, overloaded
from twin.dashboard.runs import RunOutput
from twin.errors import TwinInputError
from twin.hardware.pricing import PriceTable, hourly_cost, usd_per_million_tokens
from twin.results import numbers
from twin.results.report import _INTEGERS, format_value
from twin.results.slo_words import statistic_words, threshold_words
from twin.slo_statistics import slo_statistic


def offered_vs_served(run: RunOutput) -> dict[str, Any]:
    """``offered`` (req/s asked of the server, a replayed trace's arrival rate included; None for a closed loop:
    `twin.analysis.offered_load.offered_rate`, as `twin run` counts it), ``served`` (req/s completed) and
    ``overloaded`` (served below `OVERLOAD_RATIO` of offered while the verdict sees a saturated server)."""
    served = run.metrics.get("request_throughput")
    offered = run.info.get("offered_rate_per_s")
    return {"offered": offered, "served": served, "overloaded": overloaded(offered, served, run.diagnosis.saturated)}


def limit_line(run: RunOutput) -> str:
    """The binding limit, offered load first: ``Binding limit: offered load (12 req/s) above what the server
    sustains (8.1 req/s)`` before the diagnosis's own limit (KV memory fills *because* the queue grows); the
    sentence is `twin run`'s (`twin.analysis.offered_load.overload_sentence`)."""
    load = offered_vs_served(run)
    d = run.diagnosis
    pool = d.stats.get("pool")            # a P/D run: the diagnosis of the pool that limits it
    where = f" ({pool} pool)" if pool else ""
    if load["overloaded"]:
        return f"**Binding limit: {overload_sentence(load['offered'], load['served'], d)}**"
    if d.binding:
        return f"**Binding limit: {d.limit_name}{where}**"
    return f"**No limit binds** · the step time is set by {d.limit_name}{where}"


def evidence_line(run: RunOutput) -> str:
    """The verdict's evidence and knob as `twin run` prints them (`twin.analysis.run_limits`): ``Evidence: mean
    running batch 4.00 at max_num_seqs = 4, ... · Knob: server.max_num_seqs``."""
    doc = run.limits
    return f"Evidence: {doc['evidence']}" + (f" · Knob: {doc['knob']}" if doc["knob"] else "")


def slo_line(run: RunOutput) -> str:
    """The SLO beside the verdict: ``SLO TTFT ≤ 500 ms, TPOT ≤ 50 ms: 59% of requests meet it · goodput
    4.7 req/s`` for per-request thresholds, ``p99 TTFT ≤ 500 ms: met (68.8 ms)`` for percentile objectives."""
    slo = run.slo or {}
    m = run.metrics
    parts = []
    bounds = threshold_words(slo)
    if bounds:
        done, good = m.get("completed") or 0, m.get("num_good_requests")
        share = f"{good / done:.0%} of requests meet it" if done and good is not None else "no request completed"
        goodput = m.get("request_goodput")
        gp = f" · goodput {numbers.with_unit(goodput, 'req/s')}" if isinstance(goodput, (int, float)) else ""
        parts.append(f"SLO {bounds}: **{share}**{gp}")
    for key, stats in slo.items():
        if not isinstance(stats, dict):
            continue
        for stat, bound in stats.items():
            metric = f"{slo_statistic(stat)}_{key}"        # the run's key: {p99.0: 500} bounds p99_ttft_ms
            value = m.get(metric)
            met = (m.get("slo_met") or {}).get(metric)
            verdict = "not measured" if met is None else ("met" if met else "**missed**")
            shown = f" ({numbers.duration_ms(value)})" if isinstance(value, (int, float)) else ""
            parts.append(f"SLO {statistic_words(key, stat, bound)}: {verdict}{shown}")
    if not parts:
        return "No SLO in the scenario: every completed request counts as good (goodput = throughput)."
    return " · ".join(parts)


def cost(run: RunOutput, prices: PriceTable | None = None) -> dict[str, Any] | None:
    """USD per GPU-hour, per deployment-hour and per million output / total tokens (``None``: no price)."""
    table = prices or PriceTable()
    gpu = run.info["gpu"]
    if "pools" in run.info:            # prefill/decode: both pools' GPUs, each at its own price
        prices_of = [table.get(p["gpu"]) for p in run.info["pools"]]
        if any(p is None for p in prices_of):
            return None
        hourly = sum(price * p["gpus"] for price, p in zip(prices_of, run.info["pools"]))
        price = hourly / run.info["num_gpus"]
        source = "; ".join(x for x in dict.fromkeys(table.source(p["gpu"]) for p in run.info["pools"]) if x) or None
    else:
        price = table.get(gpu)
        if price is None:
            return None
        hourly = hourly_cost(price, run.info["tensor_parallel_size"], run.info["replicas"])
        source = table.source(gpu)
    return {"gpu": gpu, "usd_per_gpu_hour": price, "usd_per_hour": hourly, "source": source,
            "usd_per_m_output": usd_per_million_tokens(hourly, run.metrics.get("output_throughput")),
            "usd_per_m_total": usd_per_million_tokens(hourly, run.metrics.get("total_token_throughput"))}


def cost_line(run: RunOutput) -> str:
    try:
        c = cost(run)
    except TwinInputError:
        c = None
    if c is None or c["usd_per_m_output"] is None:
        return f"Cost: no price for {run.info['gpu']} in the bundled table."
    n = run.info.get("num_gpus") or run.info["tensor_parallel_size"] * run.info["replicas"]
    return (f"Cost: **${numbers.number(c['usd_per_m_output'])} per million output tokens** "
            f"(${numbers.number(c['usd_per_m_total'])} per million tokens in and out) at "
            f"${numbers.number(c['usd_per_gpu_hour'])}/GPU-hour{' (mean)' if ' / ' in c['gpu'] else ''} × "
            f"{numbers.counted(n, 'GPU')} (bundled price table, approximate)")


def model_line(run: RunOutput) -> str:
    return f"Cost model: {run.info.get('cost_model', 'roofline')}"


def fit(key: str, value: Any) -> str:
    """A value short enough for a metric card (``twin.results.numbers``): counts shortened from 10,000
    (``240k``), latencies in their unit (``4.00 min``), anything else to 3 significant figures."""
    if key in _INTEGERS and not isinstance(value, bool):
        return numbers.count(value, short=True)
    return format_value(key, value)


def exact(key: str, value: Any) -> str:
    """The exact value behind a card, for its tooltip: ``239,832.417 ms``, ``23.184%``, ``1,916.4 tok/s``."""
    v = numbers.finite_number(value)
    if v is None:
        return "no value" if value is None else str(value)
    if key.endswith("_ms"):
        return f"{v:,.3f} ms"
    if key in ("prefix_cache_hit_rate", "mean_kv_usage", "busy_fraction"):
        return f"{v * 100:,.3f}%"
    if key in _INTEGERS:
        return f"{v:,.0f}"
    unit = {"request_throughput": " req/s", "request_goodput": " req/s", "output_throughput": " tok/s"}.get(key, "")
    return f"{v:,.4f}".rstrip("0").rstrip(".") + unit
