"""GPU prices (USD per GPU-hour) and what a deployment costs.

The bundled table (``twin/data/gpu_prices.yaml``) holds rounded, approximate 2024-2025 on-demand cloud
prices, only so that a plan has a default ranking; real prices depend on the provider and the contract, so
override them (``--price H100-SXM=2.2``, ``--prices my_prices.yaml``, ``prices:`` in a plan file).

A replica of tensor parallelism ``tp`` occupies ``tp`` GPUs; a deployment's hourly cost is
``replicas * tp * price``. Cost per million tokens = hourly cost / (tokens per second * 3600) * 1e6.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any


from twin.hardware.catalog import resolve_gpu
from twin.errors import TwinInputError
from twin.yaml_input import load_packaged_yaml, load_yaml_file

_TABLE = Path(__file__).parent / "data" / "gpu_prices.yaml"


@functools.lru_cache(maxsize=1)
def default_prices() -> dict[str, float]:
    return {str(k): float(v) for k, v in load_packaged_yaml(_TABLE).items()}


def _price_value(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise TwinInputError(f"prices.{name}: {value!r}: must be a number >= 0 (USD per GPU-hour)")
    return float(value)


def load_prices(path: str | Path) -> dict[str, float]:
    """A YAML mapping of GPU name -> USD per GPU-hour."""
    data = load_yaml_file(path, "price file")
    if not isinstance(data, Mapping):
        raise TwinInputError(f"--prices {path}: must be a mapping of GPU name -> USD per GPU-hour")
    return {str(k): _price_value(str(k), v) for k, v in data.items()}


def parse_price_options(items: list[str] | tuple[str, ...]) -> dict[str, float]:
    """``--price H100-SXM=2.5`` options as a mapping."""
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise TwinInputError(f"--price {item!r}: expected GPU=USD_PER_HOUR, e.g. H100-SXM=2.5")
        try:
            number = float(value)
        except ValueError:
            raise TwinInputError(f"--price {item!r}: {value!r} is not a number") from None
        if name.strip() in out:
            raise TwinInputError(f"--price {item!r}: {name.strip()} is priced twice; give each GPU once")
        out[name.strip()] = _price_value(name.strip(), number)
    return out


class PriceTable:
    """Prices by GPU; names are matched through the catalog (aliases and case do not matter)."""

    def __init__(self, overrides: Mapping[str, float] | None = None, *, use_defaults: bool = True) -> None:
        self._prices: dict[str, float] = {}
        self.sources: dict[str, str] = {}
        for source, table in (("default", default_prices() if use_defaults else {}), ("given", overrides or {})):
            for name, value in table.items():
                key = self._key(name)
                self._prices[key] = _price_value(name, value)
                self.sources[key] = source

    @staticmethod
    def _key(name: str) -> str:
        try:
            return resolve_gpu(name).name
        except TwinInputError:
            return str(name)

    def get(self, gpu: str) -> float | None:
        return self._prices.get(self._key(gpu))

    def price(self, gpu: str) -> float:
        p = self.get(gpu)
        if p is None:
            raise TwinInputError(f"prices: no price for GPU {gpu!r}; give one with --price {gpu}=USD_PER_HOUR "
                                 f"(known: {', '.join(sorted(self._prices))})")
        return p

    def source(self, gpu: str) -> str | None:
        return self.sources.get(self._key(gpu))

    def as_dict(self) -> dict[str, float]:
        return dict(self._prices)


def hourly_cost(price_per_gpu_hour: float, tensor_parallel_size: int, replicas: int) -> float:
    return price_per_gpu_hour * tensor_parallel_size * replicas


def usd_per_million_tokens(cost_per_hour: float, tokens_per_s: float | None) -> float | None:
    if not tokens_per_s or tokens_per_s <= 0:
        return None
    return cost_per_hour / (tokens_per_s * 3600.0) * 1e6
