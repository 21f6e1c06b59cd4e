"""The options ``twin plan`` and ``twin sweep`` share (executor, scenario, SLO, prices) and what they read from
them: the raw scenario mapping with its overrides, the SLO mapping and the price table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from twin.cli.option_types import FiniteFloatRange

_BACKEND = click.Choice(["process", "ray", "serial"])


def executor_options(f):
    f = click.option("--ray-address", help="Run on this Ray cluster (e.g. ray://head:10001 or auto); implies "
                                           "--backend ray.")(f)
    f = click.option("--backend", type=_BACKEND, default="process", show_default=True,
                     help="process: a local process pool; ray: a local Ray (or --ray-address); serial: here.")(f)
    f = click.option("--workers", "-j", type=click.IntRange(1, 4096),
                     help="Worker processes (default: the CPUs available).")(f)
    return f


def common_options(f):
    f = click.option("--quiet", "-q", is_flag=True, help="No progress bar.")(f)
    f = click.option("--prices", "prices_file", type=click.Path(dir_okay=False),
                     help="YAML mapping GPU -> USD per GPU-hour (overrides the bundled approximate table).")(f)
    f = click.option("--price", "price_items", multiple=True, metavar="GPU=USD",
                     help="USD per GPU-hour for one GPU type (repeatable).")(f)
    f = click.option("--goodput", type=FiniteFloatRange(0, 1, min_open=True),
                     help="Fraction of requests that must meet every per-request SLO threshold.")(f)
    f = click.option("--slo", "slo_items", multiple=True, metavar="KEY=VALUE",
                     help="SLO in ms, e.g. ttft_ms.p99=1000, ttft_ms.p99.9=2000, tpot_ms.mean=40 (a bound on "
                          "mean, median or p<0..100>) or e2el_ms=20000 (a per-request threshold, for goodput). "
                          "Replaces the scenario's slo: section.")(f)
    f = click.option("--replications", type=click.IntRange(1, 1000), help="Replications (seeds) per point.")(f)
    f = click.option("--seed", type=int, help="Override the scenario's seed.")(f)
    f = click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                     help="Override a scenario field, e.g. --set workload.trace.window_s=300 (repeatable).")(f)
    f = click.option("--variant", "-v", default="baseline", show_default=True, help="Scenario variant.")(f)
    return f


def prices_from_options(price_items, prices_file, extra: dict[str, Any] | None = None, *, what: str,
                        gpus: set[str], base_dir: str | None):
    """The price table: the bundled one, then the plan file's ``prices:`` (``extra``), ``--prices`` and
    ``--price``; a given name that neither the catalogue nor ``gpus`` (every GPU ``what`` names) knows is refused
    (``twin.plan.price_names``)."""
    from twin.hardware.pricing import PriceTable, load_prices, parse_price_options
    from twin.plan.price_names import check_price_names

    given: dict[str, float] = {}
    origins: dict[str, str] = {}
    if extra:
        from twin.hardware.pricing import _price_value

        given.update({str(k): _price_value(str(k), v) for k, v in extra.items()})
        origins.update({str(k): "plan file prices:" for k in extra})
    if prices_file:
        from_file = load_prices(prices_file)
        given.update(from_file)
        origins.update({k: f"--prices {prices_file}" for k in from_file})
    from_options = parse_price_options(price_items)
    given.update(from_options)
    origins.update({k: "--price" for k in from_options})
    check_price_names(origins, gpus, what, base_dir)
    return PriceTable(given)


def slo_from_options(slo_items) -> dict[str, Any] | None:
    from twin.slo_section import slo_option_items

    return slo_option_items(slo_items) if slo_items else None


def scenario_data(scenario_ref: str | dict, variant: str, sets, seed, base_dir: Path | None,
                   extra_overrides: dict | None = None) -> tuple[dict[str, Any], str | None]:
    from twin.scenario import Scenario, deep_merge, load_scenario, parse_set_options

    if isinstance(scenario_ref, dict):
        scenario = Scenario(scenario_ref, source="plan scenario", base_dir=base_dir)
    else:
        path = Path(scenario_ref)
        if base_dir is not None and not path.is_absolute() and (base_dir / path).exists():
            path = base_dir / path
        scenario = load_scenario(path)
    data = scenario.raw(variant)
    if extra_overrides:
        data = deep_merge(data, extra_overrides)
    overrides = parse_set_options(sets)
    if seed is not None:
        overrides["seed"] = seed
    data = deep_merge(data, overrides)
    scenario.body(variant, deep_merge(extra_overrides or {}, overrides))  # validate with a clear message
    bd = scenario.base_dir
    return data, None if bd is None else str(bd)
