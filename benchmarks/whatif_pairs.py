"""What-if pairs of a held-out report: two cases held out in the same fold that differ in exactly one knob, and how
well the fold's predictions give the CHANGE between them (issue 33, round 22; ``benchmarks/whatif_fidelity.py``).

A case is described by its attributes (``ATTRIBUTES``), each an (order key, label) pair: equal keys mean the same
setting, and the key orders a knob's values (``KNOBS``) from the smaller to the larger. Two cases are a what-if pair
of knob K when they differ in K and in no other attribute (the model, the client and the server script's own
settings are held equal, never a knob here).

For a pair oriented from the smaller value (s) to the larger (l) and a metric with signed errors e = predicted /
measured - 1 on both:

* the ratio error: (1 + e_l) / (1 + e_s) - 1, the predicted change's error (predicted ratio / measured ratio - 1);
* the measured change: measured_l / measured_s - 1, and the predicted change (1 + measured change) x (1 + ratio
  error) - 1;
* the direction is judged only where the measured change is beyond the repeat floor (``FLOORS``: two measurements
  of one configuration differ by a median 3.0 % in TTFT and 0.4 % in TPOT, E2E and throughput, docs/fidelity.md
  "Round 19: how sure the held-out figures are"): right where the predicted change has the measured sign;
* bias cancels where the pair's absolute error (the mean of |e_s| and |e_l|) misses the issue's target for the
  metric (``twin.fitting.targets.ABS_TARGETS``) but the ratio error meets it; compounds the other way round.

Pure functions on plain dicts: no ground truth read, no simulation (the exact tests build reports by hand)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

from twin.errors import TwinInputError
from twin.fitting.targets import ABS_TARGETS
# a knob the user turns between two runs (``twin compare``'s question), in table order (the packaged file's too)
from twin.results.whatif_bands import KNOBS
# every attribute of a case; those not in KNOBS are held equal in a pair
ATTRIBUTES = KNOBS + ("model", "client", "server")
METRICS = (("mean_ttft_ms", "TTFT mean"), ("mean_tpot_ms", "TPOT"), ("mean_e2el_ms", "E2E mean"),
           ("request_throughput", "throughput"))
# attributes a looser pairing may let differ besides the knob (the release, the script's other server settings)
LOOSE = ("release", "server")
# the measurement's repeat floor per metric: median |a - b| / mean(a, b) of two measurements of one configuration
FLOORS = {"mean_ttft_ms": 0.03, "mean_tpot_ms": 0.004, "mean_e2el_ms": 0.004, "request_throughput": 0.004}

Attribute = tuple[tuple, str]          # (order key, label)


def check_knobs(name: str, knobs: Mapping[str, Attribute]) -> None:
    """``knobs`` has every attribute, each an (order key tuple, label string); else one line naming the case."""
    missing = [a for a in ATTRIBUTES if a not in knobs]
    if missing:
        raise TwinInputError(f"case {name!r}: no {missing[0]} attribute")
    for a in ATTRIBUTES:
        v = knobs[a]
        if not (isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], tuple) and isinstance(v[1], str)):
            raise TwinInputError(f"case {name!r}: attribute {a} is {v!r}, not (order key tuple, label)")


def differing(a: Mapping[str, Attribute], b: Mapping[str, Attribute], ignore: Sequence[str] = ()) -> list[str]:
    """The attributes (less ``ignore``) whose order keys differ between two cases."""
    return [k for k in ATTRIBUTES if k not in ignore and a[k][0] != b[k][0]]


def check_ignore(ignore: Sequence[str]) -> None:
    """``ignore`` names attributes a pair may also differ in (``LOOSE``); else one line."""
    bad = [a for a in ignore if a not in LOOSE]
    if bad:
        raise TwinInputError(f"ignore {bad[0]!r}: not an attribute a pair may differ in besides its knob "
                             f"({', '.join(LOOSE)})")


def find_pairs(names: Sequence[str], knobs_of: Mapping[str, Mapping[str, Attribute]],
               ignore: Sequence[str] = ()) -> list[tuple[str, str, str]]:
    """Every (knob, smaller case, larger case) among ``names`` that differ in exactly one attribute, a knob (not
    counting the attributes in ``ignore``, ``LOOSE``); in the order of ``names`` (the first case of each pair, then
    the second)."""
    check_ignore(ignore)
    for n in names:
        if n not in knobs_of:
            raise TwinInputError(f"case {n!r} has no attributes (is it in the ground truth?)")
        check_knobs(n, knobs_of[n])
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            diff = differing(knobs_of[a], knobs_of[b], ignore)
            if len(diff) != 1 or diff[0] not in KNOBS:
                continue
            knob = diff[0]
            small, large = (a, b) if knobs_of[a][knob][0] < knobs_of[b][knob][0] else (b, a)
            out.append((knob, small, large))
    return out


def _positive(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def pair_metric(e_small: float, e_large: float, m_small: float, m_large: float, metric: str,
                floor_scale: float = 1.0) -> dict:
    """One pair's reading of one metric (see the module's doc): ratio error, measured and predicted changes,
    direction (True / False, None where the measured change is within ``floor_scale`` x the repeat floor), the pair's
    absolute error and whether bias cancels or compounds."""
    for e in (e_small, e_large):
        if not (isinstance(e, (int, float)) and math.isfinite(e) and e > -1.0):
            raise TwinInputError(f"{metric}: error {e!r} is not a finite number above -100 %")
    if not (_positive(m_small) and _positive(m_large)):
        raise TwinInputError(f"{metric}: measured values {m_small!r}, {m_large!r} are not both positive numbers")
    ratio = (1.0 + e_large) / (1.0 + e_small) - 1.0
    measured = m_large / m_small - 1.0
    predicted = (1.0 + measured) * (1.0 + ratio) - 1.0
    floor = FLOORS[metric] * floor_scale
    direction = None if abs(measured) <= floor else (predicted > 0) == (measured > 0) and predicted != 0.0
    absolute = (abs(e_small) + abs(e_large)) / 2.0
    target = ABS_TARGETS[metric]
    return {"ratio_error": ratio, "measured_change": measured, "predicted_change": predicted, "direction": direction,
            "abs_error": absolute, "cancels": absolute > target and abs(ratio) <= target,
            "compounds": absolute <= target and abs(ratio) > target}


def fold_pairs(kind: str, held_out: str, errors: Mapping[str, Mapping[str, float]],
               knobs_of: Mapping[str, Mapping[str, Attribute]], measured: Mapping[str, Mapping[str, float]],
               floor_scale: float = 1.0, ignore: Sequence[str] = ()) -> list[dict]:
    """The what-if pairs of one fold (its held-out ``errors``, case -> {metric: signed error}), each with its
    metrics' readings (a metric either case lacks is left out; a pair with none is dropped); ``ignore``: as
    ``find_pairs``."""
    out = []
    for knob, small, large in find_pairs(list(errors), knobs_of, ignore):
        metrics = {}
        for key, _ in METRICS:
            if key in errors[small] and key in errors[large]:
                ms, ml = (measured.get(small) or {}).get(key), (measured.get(large) or {}).get(key)
                metrics[key] = pair_metric(errors[small][key], errors[large][key], ms, ml, key, floor_scale)
        if metrics:
            out.append({"kind": kind, "held_out": held_out, "knob": knob, "small": small, "large": large,
                        "from": knobs_of[small][knob][1], "to": knobs_of[large][knob][1], "metrics": metrics})
    return out


def summarize(pairs: Sequence[dict]) -> dict:
    """Per metric over ``pairs`` (one fold kind x knob): n, the median |ratio error| and its signed median, the
    median absolute error of the pairs' cases, pairs judged on direction and the share right, bias cancels /
    compounds counts. A metric no pair has is absent."""
    out = {}
    for key, _ in METRICS:
        rows = [p["metrics"][key] for p in pairs if key in p["metrics"]]
        if not rows:
            continue
        judged = [r["direction"] for r in rows if r["direction"] is not None]
        out[key] = {"n": len(rows), "ratio_abs_median": statistics.median(abs(r["ratio_error"]) for r in rows),
                    "ratio_signed_median": statistics.median(r["ratio_error"] for r in rows),
                    "abs_error_median": statistics.median(r["abs_error"] for r in rows),
                    "direction_judged": len(judged),
                    "direction_right": (sum(judged) / len(judged)) if judged else None,
                    "cancels": sum(r["cancels"] for r in rows), "compounds": sum(r["compounds"] for r in rows)}
    return out


def table(pairs: Sequence[dict]) -> dict[str, dict[str, dict]]:
    """{fold kind: {knob: summary}} over every pair (kinds in first-seen order, knobs in ``KNOBS`` order)."""
    out: dict[str, dict[str, dict]] = {}
    for kind in dict.fromkeys(p["kind"] for p in pairs):
        mine = [p for p in pairs if p["kind"] == kind]
        out[kind] = {k: summarize([p for p in mine if p["knob"] == k]) for k in KNOBS
                     if any(p["knob"] == k for p in mine)}
    return out
