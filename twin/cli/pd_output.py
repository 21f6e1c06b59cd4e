"""The per-pool lines of prefill/decode runs (``disaggregation:``): each pool's load and latency, the KV link's; and
the notes any run gets under its tables: KV offload, a cold start, what limits the run, the held-out error bands."""

from __future__ import annotations

from typing import Any

from twin.results import numbers

TTFT_PART_NAMES = {"prefill_ms": "prefill", "link_wait_ms": "link wait", "transfer_ms": "transfer",
                   "decode_first_step_ms": "decode blocks, queue and first step"}


def _f(value: Any, spec: str, unit: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{unit}"


def pd_pool_lines(name: str, dis: dict[str, Any]) -> list[str]:
    pools, kv = dis.get("pools") or {}, dis.get("kv_transfer") or {}
    out = []
    for pool in ("prefill", "decode"):
        m = pools.get(pool)
        if not m:
            continue
        lat = (f"prefill latency p50 {_f(m.get('median_ttft_ms'), '.0f', ' ms')}, p99 {_f(m.get('p99_ttft_ms'), '.0f', ' ms')}"
               if pool == "prefill" else
               f"TPOT p99 {_f(m.get('p99_tpot_ms'), '.1f', ' ms')}, ITL p99 {_f(m.get('p99_itl_ms'), '.1f', ' ms')}")
        busy = m.get("busy_fraction")
        out.append(f"{name} {pool}: {m['engines']} engines ({m['gpus']} GPUs), busy {_f(busy and busy * 100, '.0f', '%')}, "
                   f"queue {_f(m.get('mean_queue_length'), '.1f')}, batch {_f(m.get('mean_running_batch'), '.1f')}, {lat}")
    if kv:
        out.append(f"{name} KV link: {kv['num_transfers']} transfers, {_f(kv.get('mean_bytes') and kv['mean_bytes'] / 1e6, '.1f', ' MB')} "
                   f"each, transfer mean {_f(kv.get('mean_transfer_ms'), '.2f', ' ms')}, link wait mean "
                   f"{_f(kv.get('mean_link_wait_ms'), '.2f', ' ms')}, p99 {_f(kv.get('p99_link_wait_ms'), '.2f', ' ms')}"
                   f", decode allocation wait mean {_f(kv.get('mean_decode_alloc_wait_ms'), '.2f', ' ms')}"
                   + (f", {kv['num_expired_holds']} prefill holds expired" if kv.get("num_expired_holds") else ""))
    parts = dis.get("ttft_parts") or {}
    if parts.get("num_requests"):
        out.append(f"{name} mean TTFT {numbers.duration_ms(parts['mean_ttft_ms'])} = "
                   + " + ".join(f"{label} {numbers.duration_ms(parts[key])}" for key, label in TTFT_PART_NAMES.items()))
    return out


def print_pd_pools(runs: dict[str, dict[str, Any]], console: Any) -> None:
    for name, run in runs.items():
        result = run["replications"][0][0]
        dis = result.config.get("disaggregation")
        if dis:
            for line in pd_pool_lines(name, dis):
                console.print(line, highlight=False, soft_wrap=True)


def print_kv_offload(runs: dict[str, dict[str, Any]], console: Any) -> None:
    """Per run with KV offload tiers: the GPU prefix cache's hit rate and each tier's."""
    from twin.results.offload_text import tier_hit_line

    for name, run in runs.items():
        off = run["replications"][0][0].config.get("kv_offload")
        if off:
            console.print(f"{name} KV hit rate by tier: {tier_hit_line(off)}", highlight=False, soft_wrap=True)


def print_cold_start(runs: dict[str, dict[str, Any]], console: Any) -> None:
    """Per run started cold (``server_start: cold``): the one-off stalls its fresh servers met."""
    from twin.sim.cold_server import cold_start_line

    for name, run in runs.items():
        cold = run["replications"][0][0].config.get("cold_start")
        if cold:
            console.print(f"{name} {cold_start_line(cold)}", highlight=False, soft_wrap=True)


def limits_of(run: dict[str, Any]) -> dict[str, Any]:
    """What limits the run (its first replication): ``twin.analysis.run_limits.limits_doc``, computed once and
    kept in ``run["limits"]`` for the printed lines and ``--json``'s ``twin.limits``."""
    if "limits" not in run:
        from twin.analysis.offered_load import offered_rate, request_arrivals
        from twin.analysis.run_limits import limits_doc

        result, metrics = run["replications"][0]
        offered = offered_rate(run["body"], request_arrivals(run["body"], result))
        run["limits"] = limits_doc(result, run["deployment"], metrics, offered)
    return run["limits"]


def print_limits(runs: dict[str, dict[str, Any]], console: Any, *, short: bool = False) -> None:
    """Per run, what limits it (``short``: one line each, for a compare of many variants)."""
    from twin.analysis.run_limits import limit_lines

    for name, run in runs.items():
        for line in limit_lines(name, limits_of(run), short=short, width=console.width):
            console.print(line, highlight=False, markup=False, soft_wrap=True)


def print_heldout_bands(runs: dict[str, dict[str, Any]], console: Any) -> None:
    """Under the tables: how far off the twin was on held-out servers like each run's (``twin.results.heldout_note``;
    round 19, issue 33)."""
    from twin.results.heldout_note import note_lines

    for line in note_lines(runs):
        console.print(line, highlight=False, markup=False)


def print_whatif_band(runs: dict[str, dict[str, Any]], console: Any) -> dict[str, Any] | None:
    """Under ``twin compare``'s tables: how far off the twin's predicted change was held out, per knob the variants
    change (``twin.results.whatif_view``; round 22, issue 33). Returns the ``whatif`` document (None: one run)."""
    from twin.results.whatif_view import whatif_doc

    if len(runs) < 2:
        return None
    doc = whatif_doc(runs)
    for line in doc["lines"]:
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    return doc


def print_bands(runs: dict[str, dict[str, Any]], console: Any, *, whatif: bool) -> dict[str, Any] | None:
    """The held-out error bands (round 19), then, with ``whatif`` (``twin compare``), the what-if band; returns the
    what-if document (None: not asked for, or one run)."""
    print_heldout_bands(runs, console)
    return print_whatif_band(runs, console) if whatif else None
