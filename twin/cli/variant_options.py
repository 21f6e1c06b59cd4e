"""Which runs ``twin run`` and ``twin compare`` make, from their variant options: each option either applies or
is a one-line error (``--variant`` beside ``--all-variants``, a ``--variants`` list that names nothing)."""

from __future__ import annotations

from typing import Any

from twin.errors import TwinInputError


def run_names(scenario: str, variants: tuple[str, ...], all_variants: bool) -> list[str]:
    """``twin run``'s variants: those named with ``--variant``, or every one with ``--all-variants``."""
    if not all_variants:
        return list(variants)
    if variants:
        raise TwinInputError(f"--variant {variants[0]}: --all-variants already runs every variant; give one or "
                             f"the other")
    from twin.scenario import load_scenario

    return load_scenario(scenario).names()


def compare_names(sc: Any, variant_list: str | None) -> list[str]:
    """``twin compare``'s runs: the baseline and the variants ``--variants`` names (default: all of them)."""
    if variant_list is None:
        return sc.names()
    wanted = [v.strip() for v in variant_list.split(",") if v.strip()]
    if not wanted:
        raise TwinInputError(f"--variants {variant_list!r}: names no variant; give e.g. --variants a,b")
    return ["baseline"] + [v for v in wanted if v != "baseline"]
