"""The bundled catalogs are read with libyaml's loader (start-up time): it must give exactly the values the
pure-Python ``yaml.safe_load`` gives, types included."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import twin.hardware.gpus
from twin.yaml_input import load_packaged_yaml

DATA = Path(twin.hardware.gpus.__file__).parent / "data"


def _typed(value: object) -> object:
    """``value`` with every scalar paired with its type (1 == 1.0 == True would hide a changed type)."""
    if isinstance(value, dict):
        return {_typed(k): _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)


@pytest.mark.parametrize("name", ["gpus.yaml", "models.yaml", "gpu_prices.yaml"])
def test_packaged_loader_matches_safe_load(name: str) -> None:
    path = DATA / name
    expected = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert expected  # a real catalog, not an empty file
    assert _typed(load_packaged_yaml(path)) == _typed(expected)


def test_packaged_loader_is_libyaml_when_built_with_it() -> None:
    import twin.yaml_input as yi
    assert yi._PACKAGED_LOADER is (yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader)
