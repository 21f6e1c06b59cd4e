"""How well the twin predicts a change held out, per knob: the packaged file ``twin/results/data/whatif_bands.json``
(issue 33, round 22; docs/fidelity.md "Round 22: what-if fidelity: predicted changes held out").

``benchmarks/whatif_export.py`` writes it from ``benchmarks/whatif_fidelity.py --json``: per fold kind (``GPU``,
``family``: the folds the user's error bands come from, ``twin.results.heldout_bands``), per knob (``KNOBS``:
concurrency, an inference-perf stage's rate, the TP / EP layout, the weight or KV format, the GPU, ISL x OSL, the vLLM
release), per metric (``METRICS``): the number of held-out pairs one knob apart, the median |error of the predicted
ratio| and its signed median (ratio error = (1 + e_larger) / (1 + e_smaller) - 1, errors e = predicted / measured - 1,
oriented from the smaller knob value to the larger), the median absolute error of the same pairs' cases, and the share
of pairs whose predicted change has the measured direction (``direction_right``, of ``direction_judged`` pairs whose
measured change is beyond the repeat floor; null where none is). A knob with fewer than ``min_pairs`` pairs is left
out (too few to show). ``twin compare`` and the dashboard show it (``twin.results.whatif_view``); ``load_whatif``
validates the file (one line naming the file and the field).

Schema 2 (round 22, 33zA) adds ``loose``: ``null``, or the same cells for LOOSE pairs (``ignore``: the attributes a
pair may also differ in besides its knob, ``LOOSE_ATTRIBUTES``: the vLLM release, the script's other server
settings; ``benchmarks/whatif_fidelity.py --ignore``), kept apart from the strict ``kinds`` and shown only for a knob
with no strict cell, marked as loose. A schema-1 file (no ``loose``) still reads."""

from __future__ import annotations

from pathlib import Path

from twin.errors import TwinInputError
from twin.results.heldout_bands import KINDS, STAMP_KEYS   # the folds (and stamp) of the user's error bands
from twin.results.heldout_bands import MAX_COUNT, MAX_RELATIVE_ERROR, cut, finite, shown   # round 23: shared checks

DATA_FILE = Path(__file__).parent / "data" / "whatif_bands.json"
SCHEMA = "twin.whatif_bands/2"
SCHEMAS = ("twin.whatif_bands/1", SCHEMA)        # 1: no ``loose`` section
LOOSE_ATTRIBUTES = ("release", "server")         # what a loose pair may also differ in (whatif_pairs.LOOSE)
KNOBS = ("concurrency", "rate", "layout", "weights", "kv", "gpu", "lengths", "release")
METRICS = ("mean_ttft_ms", "mean_tpot_ms", "mean_e2el_ms", "request_throughput")
CELL_KEYS = ("n", "ratio_abs_median", "ratio_signed_median", "abs_error_median", "direction_judged",
             "direction_right")


def _error(source: str, what: str) -> TwinInputError:
    return TwinInputError(f"{source}: {what} (rewrite it with benchmarks/whatif_export.py)")


def _object(value: object, source: str, where: str) -> dict:
    if not isinstance(value, dict):
        raise _error(source, f"{where} is {type(value).__name__}, not an object")
    return value


def _whole(value: object, source: str, where: str, low: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= MAX_COUNT:
        raise _error(source, f"{where} is {shown(value)}, not a whole number >= {low}, at most {MAX_COUNT:,}")
    return value


def _number(value: object, source: str, where: str, low: float | None = None, high: float | None = None) -> float:
    """A finite number in ``low``..``high`` (each where given), at most ``MAX_RELATIVE_ERROR`` (round 23: an
    integer beyond a float's range was an ``OverflowError``)."""
    high = MAX_RELATIVE_ERROR if high is None else high
    if not finite(value):
        raise _error(source, f"{where} is {shown(value)}, not a finite number")
    if (low is not None and value < low) or (high is not None and value > high):
        raise _error(source, f"{where} is {shown(value)}, outside {'-inf' if low is None else f'{low:g}'}..{high:g}")
    return float(value)


def _check_cell(cell: object, source: str, where: str, min_pairs: int) -> None:
    cell = _object(cell, source, where)
    if set(cell) != set(CELL_KEYS):
        odd = sorted(set(cell) ^ set(CELL_KEYS))[0]
        raise _error(source, f"{where}.{cut(odd)}: {'unknown' if odd in cell else 'missing'} key")
    n = _whole(cell["n"], source, f"{where}.n", min_pairs)
    size = _number(cell["ratio_abs_median"], source, f"{where}.ratio_abs_median", low=0.0)
    signed = _number(cell["ratio_signed_median"], source, f"{where}.ratio_signed_median", low=-1.0)
    if abs(signed) > size + 1e-12:
        raise _error(source, f"{where}: |ratio_signed_median| {abs(signed):g} above ratio_abs_median {size:g}")
    _number(cell["abs_error_median"], source, f"{where}.abs_error_median", low=0.0)
    judged = _whole(cell["direction_judged"], source, f"{where}.direction_judged", 0)
    if judged > n:
        raise _error(source, f"{where}: direction_judged {judged} above n {n}")
    if judged == 0:
        if cell["direction_right"] is not None:
            raise _error(source, f"{where}.direction_right must be null where no pair is judged")
    else:
        _number(cell["direction_right"], source, f"{where}.direction_right", low=0.0, high=1.0)


def _check_kinds(kinds: object, source: str, where: str, min_pairs: int) -> None:
    for kind, knobs in _object(kinds, source, where).items():
        if kind not in KINDS:
            raise _error(source, f"{where}.{cut(kind)}: not a fold kind ({', '.join(KINDS)})")
        for knob, metrics in _object(knobs, source, f"{where}.{kind}").items():
            if knob not in KNOBS:
                raise _error(source, f"{where}.{kind}.{cut(knob)}: not a knob ({', '.join(KNOBS)})")
            for metric, cell in _object(metrics, source, f"{where}.{kind}.{knob}").items():
                if metric not in METRICS:
                    raise _error(source, f"{where}.{kind}.{knob}.{cut(metric)}: not a metric ({', '.join(METRICS)})")
                _check_cell(cell, source, f"{where}.{kind}.{knob}.{metric}", min_pairs)


def _check_loose(doc: dict, source: str, min_pairs: int) -> None:
    if doc["schema"] != SCHEMA:
        if "loose" in doc:
            raise _error(source, f"loose: not a key of schema {doc['schema']!r} (schema {SCHEMA!r} has it)")
        return
    if "loose" not in doc:
        raise _error(source, "loose: missing key (null, or the loose pairs' cells)")
    if doc["loose"] is None:
        return
    loose = _object(doc["loose"], source, "loose")
    if set(loose) != {"ignore", "kinds"}:
        odd = sorted(set(loose) ^ {"ignore", "kinds"})[0]
        raise _error(source, f"loose.{cut(odd)}: {'unknown' if odd in loose else 'missing'} key")
    ignore = loose["ignore"]
    if (not isinstance(ignore, list) or not ignore or len(set(map(repr, ignore))) != len(ignore)
            or any(a not in LOOSE_ATTRIBUTES for a in ignore)):
        raise _error(source, f"loose.ignore is {shown(ignore)}, not a list of distinct {', '.join(LOOSE_ATTRIBUTES)}")
    _check_kinds(loose["kinds"], source, "loose.kinds", min_pairs)


def check_whatif(doc: object, source: str = "what-if bands") -> dict:
    """``doc`` if it is a valid what-if document (``SCHEMAS``), else one ``TwinInputError`` line naming ``source``
    and the field."""
    doc = _object(doc, source, "the file")
    if doc.get("schema") not in SCHEMAS:
        raise _error(source, f"schema is {shown(doc.get('schema'))}, not {' or '.join(map(repr, SCHEMAS))}")
    report = _object(doc.get("report"), source, "report")
    for key in STAMP_KEYS:
        if not isinstance(report.get(key), str) or not report[key].strip():
            raise _error(source, f"report.{key} is {shown(report.get(key))}, not text")
    min_pairs = _whole(doc.get("min_pairs"), source, "min_pairs", 1)
    _check_kinds(doc.get("kinds"), source, "kinds", min_pairs)
    _check_loose(doc, source, min_pairs)
    return doc


def load_whatif(path: Path = DATA_FILE) -> dict:
    """The validated what-if document in ``path`` (the packaged one by default)."""
    from twin.json_input import parse_json
    from twin.yaml_input import must_be_file, read_text
    path = Path(path)
    must_be_file(path, shown=lambda name: shown(str(name)), kind="a what-if bands file")
    return check_whatif(parse_json(read_text(path, "what-if bands", 1 << 20), str(path)), str(path))
