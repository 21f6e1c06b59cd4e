"""A price given for a GPU that no run of this sweep / plan can use is a misspelling, not a preference.

The price table matches names through the catalogue (aliases and case do not matter) and keeps a name it does
not know, because a custom GPU (a spec file, ``deployment.gpu: my_gpu.yaml``) is priced by its spec's name.
So the table alone cannot tell ``H100-SMX`` from a custom GPU; the sweep / plan can: it knows every GPU its
scenario, grid / search space and candidates name. A given price whose name is neither a catalogued GPU (any
of which a ``--set`` or a grid may pick, so a price for one is never wrong) nor one of those GPUs is refused
with one line naming where it came from, the name, the closest catalogued name and the catalogued GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from twin.errors import TwinInputError, did_you_mean


def _is_gpu_key(key: Any) -> bool:
    return str(key).rsplit(".", 1)[-1] == "gpu"


def gpu_names_in(*sources: Any) -> set[str]:
    """Every GPU name in scenario mappings, override mappings (``deployment.gpu: ...``), grids / search spaces
    (``[(key, values)]``) and lists of them: the string values of keys whose last dotted part is ``gpu``."""
    out: set[str] = set()

    def walk(obj: Any) -> None:
        if isinstance(obj, Mapping):
            for k, v in obj.items():
                add(k, v)
        elif isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[0], str) and isinstance(obj[1], list):
            add(obj[0], obj[1])
        elif isinstance(obj, (list, tuple)):
            for item in obj:
                walk(item)

    def add(key: Any, value: Any) -> None:
        if _is_gpu_key(key):
            for v in (value if isinstance(value, list) else [value]):
                if isinstance(v, str):
                    out.add(v)
        else:
            walk(value)

    for source in sources:
        walk(source)
    return out


def _resolved(name: str, base_dir: str | None = None) -> str:
    """The catalogue's (or a spec file's, found as the deployment finds it: relative to the scenario's folder
    ``base_dir``) name for ``name``; else ``name``."""
    from pathlib import Path

    from twin.hardware.catalog import resolve_gpu
    from twin.sim.deployment import relative_to

    try:
        return resolve_gpu(relative_to(name, None if base_dir is None else Path(base_dir))).name
    except TwinInputError:
        return str(name)


def check_price_names(origins: Mapping[str, str], used_gpus: Iterable[str], what: str,
                      base_dir: str | None = None) -> None:
    """Refuse a priced name (``origins``: name -> where it was given, e.g. ``--prices my.yaml``) that is neither
    a catalogued GPU nor one of ``used_gpus`` (the GPUs ``what``, "this sweep" / "this plan", names; spec file
    paths relative to ``base_dir``)."""
    from twin.hardware.catalog import list_gpus

    gpus = list_gpus()
    known = {g.name for g in gpus} | {_resolved(name, base_dir) for name in used_gpus}
    for name, origin in origins.items():
        if _resolved(name) in known:
            continue
        hint = did_you_mean(name, sorted(known), {a: g.name for g in gpus for a in g.aliases})
        raise TwinInputError(f"{origin}: GPU {name!r} is neither catalogued nor used by {what}, so its price "
                             f"would never apply{hint}; catalogued: {', '.join(g.name for g in gpus)}")
