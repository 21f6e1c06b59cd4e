"""Error bands for a run from the held-out evidence: how far off the twin has been on servers it was not fitted
on, by GPU generation (Hopper, Blackwell) and model kind (MoE or dense).

The bands are a packaged data file (``twin/results/data/heldout_bands.json``) that
``benchmarks/heldout_bands_export.py`` writes from a ``benchmarks/fidelity_real.py --json`` held-out report: per
fold kind (``GPU``: the cases of a GPU generation predicted with none of its rows in the fit; ``family``: the cases
of a model family predicted with none of its rows in the fit), per (generation, MoE?) group, per metric, the number
of held-out cases, the median |error|, the median signed error and an 80 % range stored as ``p10`` / ``p90`` (errors are
predicted / measured - 1: negative means the twin's number was below the real server's). The range's
``construction`` (round 20, ``benchmarks/band_coverage.py``): ``order``, the k-th lowest..k-th highest of the n
errors (``order_rank``), which an unseen case exchangeable with them falls inside with probability ``coverage``
(``order_coverage``: >= 0.8 from 9 cases); or ``linear``, numpy's linear p10..p90 (round 19's file, ~72 % held out).
A group with fewer than ``min_cases_for_interval`` cases keeps its medians but no range. Nothing here is a model
change: the bands are read off a report and shown beside a run's numbers; a generation or kind with no held-out case
has no band (the note says so, never a band made up).

``load_bands(path)`` validates the file (one line naming the file and the field); ``server_kinds(deployment)``
gives a resolved deployment's (generation, MoE?) pairs and ``bands_for`` their bands. ``twin.results.heldout_note``
words them for ``twin run`` (printed by ``twin.cli.pd_output.print_heldout_bands``), its ``--json`` and the
dashboard."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from twin.errors import TwinInputError
from twin.results.numbers import finite_number

DATA_FILE = Path(__file__).parent / "data" / "heldout_bands.json"
SCHEMA = "twin.heldout_bands/2"          # /2 (round 20): the range's construction and coverage
MAX_BANDS_BYTES = 1 << 20                # the file is ~10 kB
KINDS = ("GPU", "family")                # fold kinds a band may come from, in the order shown
METRICS = ("mean_ttft_ms", "median_ttft_ms", "mean_tpot_ms", "mean_e2el_ms", "request_throughput")
SHOWN = (("mean_ttft_ms", "TTFT mean"), ("mean_tpot_ms", "TPOT"), ("mean_e2el_ms", "E2E mean"),
         ("request_throughput", "throughput"))
GENERATIONS = ("hopper", "blackwell", "ampere", "ada", "cdna3", "cpu", "other")
STAMP_KEYS = ("commit", "date", "command")
CONSTRUCTIONS = ("order", "linear")
LEVEL = 0.8                              # the share of unseen servers a range is meant to hold
# round 23 (33zG): a band's signed ends and medians are signed relative errors (predicted / measured - 1, above -1
# for a positive prediction) no larger than this (a prediction a billion times the measurement is no twin's); a
# count is at most MAX_COUNT (an integer beyond a float's range was an OverflowError)
MAX_RELATIVE_ERROR = 1e9
MAX_COUNT = 10**9


def order_rank(n: int) -> int:
    """k of the order-statistic range of n cases (the k-th lowest..k-th highest): floor((n + 1) (1 - LEVEL) / 2),
    at least 1 (min..max)."""
    return max(1, int((n + 1) * (1.0 - LEVEL) / 2.0 + 1e-9))


def order_coverage(n: int) -> float:
    """The probability that an unseen case exchangeable with n cases falls inside their order-statistic range:
    (n + 1 - 2k) / (n + 1)."""
    return (n + 1 - 2 * order_rank(n)) / (n + 1)


def _error(source: str, what: str) -> TwinInputError:
    return TwinInputError(f"{source}: {what} (rewrite it with benchmarks/heldout_bands_export.py)")


def finite(value: object) -> bool:
    """A JSON number (not a bool) that is finite; an integer beyond a float's range (10**400) is not."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and finite_number(value) is not None


def cut(text: str) -> str:
    """``text`` for a message, cut to a readable length (a 400-digit integer, a 100 kB name)."""
    return text if len(text) <= 80 else f"{text[:40]}... ({len(text):,} characters)"


def shown(value: object) -> str:
    """``repr(value)``, ``cut``."""
    return cut(repr(value))


def _number(value: object, source: str, where: str, low: float | None = None, signed: bool = False) -> float:
    """A finite number (>= ``low`` where given; a signed relative error in (-1, MAX_RELATIVE_ERROR] where
    ``signed``)."""
    if not finite(value):
        raise _error(source, f"{where} is {shown(value)}, not a finite number")
    if low is not None and value < low:
        raise _error(source, f"{where} is {shown(value)}, not a number >= {low:g}")
    if signed and not -1.0 < value <= MAX_RELATIVE_ERROR:
        raise _error(source, f"{where} is {shown(value)}, not a signed relative error in (-1, {MAX_RELATIVE_ERROR:g}]")
    if value > MAX_RELATIVE_ERROR:
        raise _error(source, f"{where} is {shown(value)}, above {MAX_RELATIVE_ERROR:g}")
    return float(value)


def _count(value: object, source: str, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_COUNT:
        raise _error(source, f"{where} is {shown(value)}, not a whole number >= 1, at most {MAX_COUNT:,}")
    return value


def _object(value: object, source: str, where: str) -> dict:
    if not isinstance(value, dict):
        raise _error(source, f"{where} is {type(value).__name__}, not an object")
    return value


def _check_metric(band: object, source: str, where: str, min_cases: int, construction: str) -> None:
    band = _object(band, source, where)
    unknown = sorted(set(band) - {"n", "abs_median", "signed_median", "p10", "p90", "coverage"})
    if unknown:
        raise _error(source, f"{where}.{cut(unknown[0])}: unknown key")
    n = _count(band.get("n"), source, f"{where}.n")
    _number(band.get("abs_median"), source, f"{where}.abs_median", low=0.0)
    signed = _number(band.get("signed_median"), source, f"{where}.signed_median", signed=True)
    if abs(signed) > band["abs_median"] + 1e-12:
        raise _error(source, f"{where}: |signed_median| {abs(signed):g} above abs_median {band['abs_median']:g}")
    ends = band.get("p10"), band.get("p90")
    if n < min_cases:
        if ends != (None, None) or "coverage" in band:
            raise _error(source, f"{where}: p10/p90/coverage given for {n} cases (fewer than min_cases_for_interval "
                                 f"{min_cases}); p10/p90 must be null, no coverage")
        return
    coverage = order_coverage(n) if construction == "order" else None
    if band.get("coverage") != coverage:
        raise _error(source, f"{where}.coverage is {shown(band.get('coverage'))}, not {coverage!r} ({construction} "
                             f"range of {n} cases)")
    lo = _number(ends[0], source, f"{where}.p10", signed=True)
    hi = _number(ends[1], source, f"{where}.p90", signed=True)
    if not lo <= signed <= hi:
        raise _error(source, f"{where}: signed_median {signed:g} outside p10..p90 {lo:g}..{hi:g}")


def check_bands(doc: object, source: str = "held-out bands") -> dict:
    """``doc`` if it is a valid bands document (``SCHEMA``), else one ``TwinInputError`` line naming ``source``
    and the field."""
    doc = _object(doc, source, "the file")
    if doc.get("schema") != SCHEMA:
        raise _error(source, f"schema is {shown(doc.get('schema'))}, not {SCHEMA!r}")
    report = _object(doc.get("report"), source, "report")
    for key in STAMP_KEYS:
        if not isinstance(report.get(key), str) or not report[key].strip():
            raise _error(source, f"report.{key} is {shown(report.get(key))}, not text")
    if doc.get("interval_percentiles") != [10, 90]:
        raise _error(source, f"interval_percentiles is {shown(doc.get('interval_percentiles'))}, not [10, 90]")
    construction = doc.get("construction")
    if construction not in CONSTRUCTIONS:
        raise _error(source, f"construction is {shown(construction)}, not one of {', '.join(CONSTRUCTIONS)}")
    min_cases = _count(doc.get("min_cases_for_interval"), source, "min_cases_for_interval")
    kinds = _object(doc.get("kinds"), source, "kinds")
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise _error(source, f"kinds.{cut(unknown[0])}: not a fold kind ({', '.join(KINDS)})")
    for kind, groups in kinds.items():
        if not isinstance(groups, list):
            raise _error(source, f"kinds.{kind} is {type(groups).__name__}, not a list of groups")
        seen = set()
        for i, group in enumerate(groups):
            where = f"kinds.{kind}[{i}]"
            group = _object(group, source, where)
            if group.get("generation") not in GENERATIONS:
                raise _error(source, f"{where}.generation is {shown(group.get('generation'))}, not one of "
                                     + ", ".join(GENERATIONS))
            if not isinstance(group.get("moe"), bool):
                raise _error(source, f"{where}.moe is {shown(group.get('moe'))}, not true or false")
            key = (group["generation"], group["moe"])
            if key in seen:
                raise _error(source, f"{where}: a second {key[0]} {'MoE' if key[1] else 'dense'} group")
            seen.add(key)
            held = group.get("held_out")
            if not isinstance(held, list) or not held or not all(isinstance(h, str) and h for h in held):
                raise _error(source, f"{where}.held_out is {shown(held)}, not a list of names")
            metrics = _object(group.get("metrics"), source, f"{where}.metrics")
            if not metrics:
                raise _error(source, f"{where}.metrics is empty")
            for metric, band in metrics.items():
                if metric not in METRICS:
                    raise _error(source, f"{where}.metrics.{cut(metric)}: not a metric ({', '.join(METRICS)})")
                _check_metric(band, source, f"{where}.metrics.{metric}", min_cases, construction)
    return doc


def load_bands(path: str | Path = DATA_FILE) -> dict:
    """The validated bands document in ``path`` (default: the packaged file)."""
    from twin.json_input import parse_json
    from twin.yaml_input import must_be_file, read_text

    p = Path(path)
    must_be_file(p, shown=lambda name: shown(str(name)), kind="a held-out bands file",
                 missing="no such file (the held-out bands; the package data is missing)")
    return check_bands(parse_json(read_text(p, "held-out bands", MAX_BANDS_BYTES), str(p)), str(p))


@functools.lru_cache(maxsize=1)
def packaged_bands() -> dict:
    """The packaged bands, read and validated once per process."""
    return load_bands(DATA_FILE)


def server_kinds(deployment: Any) -> list[tuple[str, bool]]:
    """The distinct (GPU generation, MoE?) pairs of a resolved deployment: a ``Deployment``, a cluster's
    (``deployments`` a list) or a P/D one's (``deployments`` a dict of pools)."""
    from twin.cost.generations import gpu_generation

    parts = getattr(deployment, "deployments", None)
    if isinstance(parts, dict):
        parts = list(parts.values())
    return list(dict.fromkeys((gpu_generation(d.gpu), bool(d.model.is_moe)) for d in (parts or [deployment])))


def other_cost_model(body: Any, deployment: Any) -> str | None:
    """What a run's cost model is where it is not the roofline the held-out report judged (``a calibrated profile
    (x.json)``, ``a constant step time``): the body's, or a cluster group's / P/D pool's; None for the roofline."""
    parts = getattr(deployment, "bodies", None)
    bodies = [body, *(parts.values() if isinstance(parts, dict) else parts or [])]
    for b in bodies:
        cm = b.cost_model
        if cm.kind == "profile":
            return f"a calibrated profile ({Path(str(cm.profile)).name})"
        if cm.kind != "roofline":
            return "a constant step time" if cm.kind == "constant" else f"the {cm.kind} cost model"
    return None


def bands_for(generation: str, moe: bool, doc: dict | None = None) -> dict[str, dict]:
    """{fold kind: group} of the bands document (default: the packaged one) for ``generation`` and ``moe``;
    a kind with no such group is absent ({} where there is no held-out evidence at all)."""
    doc = packaged_bands() if doc is None else doc
    out = {}
    for kind in KINDS:
        for group in doc["kinds"].get(kind, []):
            if group["generation"] == generation and group["moe"] == moe:
                out[kind] = group
    return out
