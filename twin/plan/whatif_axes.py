"""The what-if band (``twin.results.whatif_view``; issue 33, rounds 22-23) where users sweep and plan: a ``twin
sweep`` along a knob IS a predicted change along it, and ``twin plan`` compares candidates that differ in knobs.

Each axis (a grid or search key) is mapped to the held-out table's knobs as ``twin compare`` maps a variant:
the axis's values, each set alone over the scenario (``check_axis_values`` has already found each one valid),
are validated and diffed (``changed_knobs``); ``rate`` / ``rate_scale`` change the arrival rate; a ``groups``
axis changes the replica groups (no table knob). A plan's axes are the keys its feasible candidates set, and
its deployments' replica counts (no table knob either). Nothing here changes a prediction.

``sweep_whatif`` / ``plan_whatif`` give the block (``whatif_view.axes_doc``); ``with_whatif_column`` adds a
sweep table's ``whatif`` column: per row, the knobs its point changes from the sweep's first point (the first
value of every axis, the lowest rate) and their held-out cells, as compact JSON (``""`` on the first point)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from twin.plan.evaluate import validate_body
from twin.plan.grid import GROUPS_KEY, RATE_KEYS
from twin.plan.overrides import apply_overrides, label
from twin.results.heldout_bands import other_cost_model
from twin.results.whatif_view import axes_doc, changed_knobs

SWEEP_CHANGE = "along the sweep"
PLAN_CHANGE = "across the plan"
LOAD_KNOBS = {"concurrency": "concurrency", "rate": "rate", "time_scale": "rate"}   # the dashboard's load kinds
REPLICAS_KEY = "deployment.replicas"
_BASE = object()                 # a candidate that leaves a key at the scenario's value
CELL_KEYS = ("n", "ratio_abs_median", "ratio_signed_median")


def axis_changes(data: Mapping[str, Any], axes: Sequence[tuple[str, Sequence[Any]]]
                 ) -> tuple[dict[str, list[str]], str | None]:
    """({axis key: the knobs its values change}, which value uses a cost model other than the roofline or None)
    for axes over the raw scenario ``data``; a value ``_BASE`` is the scenario's own."""
    changes: dict[str, list[str]] = {}
    other = other_cost_model(validate_body(data), None)
    no_band = f"the scenario uses {other}" if other else None
    for key, values in axes:
        if key in RATE_KEYS:
            changes[key] = ["rate"]
            continue
        if key == GROUPS_KEY:
            changes[key] = ["replica groups"]
            continue
        bodies = [validate_body(data if v is _BASE else apply_overrides(data, {key: v}), f"{key}={label(v)}")
                  for v in values]
        changes[key] = list(dict.fromkeys(k for b in bodies[1:] for k in changed_knobs(bodies[0], b)))
        for v, body in zip(values, bodies):
            other = other_cost_model(body, None)
            if other and no_band is None:
                no_band = f"{key}={label(v)} uses {other}"
    return changes, no_band


def sweep_whatif(spec: Any, doc: dict | None = None) -> dict[str, Any]:
    """The what-if block of a ``twin.plan.sweep.SweepSpec`` along its grid's axes."""
    changes, no_band = axis_changes(spec.data, spec.grid)
    return axes_doc(changes, SWEEP_CHANGE, no_band, doc)


def plan_whatif(data: Mapping[str, Any], overrides: Sequence[Mapping[str, Any]], replica_counts: Sequence[int],
                doc: dict | None = None) -> dict[str, Any]:
    """The what-if block of a plan: the keys its feasible candidates (``overrides``, dotted keys) set to more than
    one value, then the replica count where its deployments have several (``replica_counts``)."""
    keys = list(dict.fromkeys(k for o in overrides for k in o))
    axes = []
    for key in keys:
        values: dict[str, Any] = {}
        for o in overrides:
            v = o.get(key, _BASE)
            values.setdefault("" if v is _BASE else json.dumps(v, sort_keys=True, default=repr), v)
        if len(values) > 1:
            axes.append((key, list(values.values())))
    changes, no_band = axis_changes(data, axes)
    if len(set(replica_counts)) > 1:
        changes[REPLICAS_KEY] = ["replicas"]
    return axes_doc(changes, PLAN_CHANGE, no_band, doc)


def load_whatif(kinds: Sequence[str], bodies: Sequence[Any], doc: dict | None = None) -> dict[str, Any]:
    """The what-if block of the dashboard's load sweep: ``kinds`` the loads it varies (``twin.dashboard.runs.
    load_of``: concurrency, a rate, a trace's speed), ``bodies`` the validated configurations it sweeps."""
    other = next(((i, o) for i, o in enumerate(other_cost_model(b, None) for b in bodies) if o), None)
    no_band = f"configuration {other[0] + 1} uses {other[1]}" if other else None
    changes = {"the load": list(dict.fromkeys(LOAD_KNOBS[k] for k in kinds))}
    return axes_doc(changes, SWEEP_CHANGE, no_band, doc)


def _same(a: Any, b: Any) -> bool:
    def null(v: Any) -> bool:
        return v is None or (isinstance(v, float) and math.isnan(v))
    return (null(a) and null(b)) or (not null(a) and not null(b) and a == b)


def _plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def _json_safe(v: Any) -> Any:
    """A grid value for strict JSON: ``.inf`` (a valid ``rate_per_s``) as the string ``inf``."""
    return str(v) if isinstance(v, float) and not math.isfinite(v) else v


def _knob_cells(entry: dict) -> dict | None:
    if entry["evidence"] is None:
        return None
    return {"pairing": entry["pairing"],
            "bands": {kind: {m: {s: c[s] for s in CELL_KEYS} for m, c in cells.items()}
                      for kind, cells in entry["evidence"].items()}}


def with_whatif_column(frame: Any, spec: Any, view: dict[str, Any]) -> Any:
    """A sweep table (``--out`` rows or ``--summary-out``) with its ``whatif`` column, last: per row the knobs
    its point changes from the sweep's first point and each knob's cells (``n``, median |error| and signed median
    of the predicted change, by fold kind; ``null``: no held-out evidence), or ``no_band``; ``""`` on a row
    that changes nothing from the first point."""
    if frame.empty:
        return frame
    first = {k: label(v[0]) if isinstance(v[0], (dict, list)) else v[0] for k, v in spec.knob_axes}
    rate = spec.rate_axis
    column = "offered_rate_per_s" if rate and rate[0] == "rate" else "rate_scale"
    rep = view["report"]
    head = {"report": f"{rep['commit']}, {rep['date']}",
            "from": {k: _json_safe(v) for k, v in {**first, **({rate[0]: rate[1][0]} if rate else {})}.items()}}
    by_axis = {axis: [e for e in view["knobs"] if axis in e["variants"]] for axis, _ in spec.grid}

    def cell(row: Any) -> str:
        moved = [k for k in first if not _same(_plain(row.get(k)), first[k])]
        at = _plain(row.get(column)) if rate else None
        if rate and at is not None and not (isinstance(at, float) and math.isnan(at)) \
                and not math.isclose(float(at), rate[1][0]):
            moved.append(rate[0])
        entries = list({e["knob"]: e for axis in moved for e in by_axis.get(axis, [])}.values())
        if not entries:
            return ""
        if view["no_band"]:
            return json.dumps({**head, "no_band": view["no_band"]}, allow_nan=False)
        return json.dumps({**head, "knobs": {e["knob"]: _knob_cells(e) for e in entries}}, allow_nan=False)

    frame = frame.copy()
    frame["whatif"] = [cell(row) for _, row in frame.iterrows()]
    return frame
