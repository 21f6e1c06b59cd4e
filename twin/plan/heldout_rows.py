"""The held-out error bands (``twin.results.heldout_bands``, worded by ``twin.results.heldout_note``) for the
configurations of ``twin sweep`` and ``twin plan``: how far off the twin has been on servers of each
configuration's kind (GPU generation, MoE or dense) that it was not fitted on.

A configuration's servers are keys: ``(generation, moe)`` per distinct server, or ``(None, what)`` where its
cost model is not the roofline the held-out report judged (``what`` names it). ``band_servers`` finds them
(resolving the deployment only, no simulation), ``band_columns`` gives a table row its two columns
(``heldout_server``: the server's name; ``heldout_bands``: the bands as compact JSON), ``band_note`` the note
printed under a table (one block per distinct server, naming the configurations where they differ) and
``band_document`` the ``heldout_bands`` key of a plan's JSON. Nothing here changes a prediction."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from twin.errors import TwinInputError
from twin.results.heldout_bands import SHOWN, bands_for, other_cost_model, packaged_bands, server_kinds
from twin.results.heldout_note import KIND_WHAT, cost_model_line, metric_text, server_lines, server_name

# what a table row keeps of a metric's band: coverage (round 21) is the share of unseen servers its p10..p90
# range holds by order statistics (``heldout_bands.order_coverage``; ~0.8, less below 9 cases), null where the
# bands' range is numpy's linear p10..p90 or there are too few cases for a range
BAND_STATS = ("n", "signed_median", "p10", "p90", "coverage")


def band_servers(bodies: list[Any], base_dir: str | Path | None, deployments: list[Any] | None = None) -> list:
    """The server keys of a configuration run as ``bodies`` (one per replica group; a prefill/decode body
    gives its pools'); ``deployments``: the bodies' resolved deployments where the caller has them. A body whose
    deployment does not resolve adds nothing (its runs fail and say why)."""
    from twin.deploy.run import resolve_for_run

    keys: list = []
    base = None if base_dir is None else Path(base_dir)
    for i, body in enumerate(bodies):
        try:
            dep = deployments[i] if deployments is not None else resolve_for_run(body, base)
        except TwinInputError:
            continue
        other = other_cost_model(body, dep)
        keys += [(None, other)] if other else server_kinds(dep)
    return list(dict.fromkeys(keys))


def server_label(keys: list) -> str:
    """``Hopper dense``; ``Hopper dense, Blackwell dense`` for a mixed cluster; ``none (a constant step
    time)`` where the cost model is not the roofline; ``""`` with no server."""
    return ", ".join(server_name(g, moe) if g is not None else f"none ({moe})" for g, moe in keys)


def _compact(generation: str, moe: bool, doc: dict) -> dict[str, Any]:
    return {kind: {metric: {s: band.get(s) for s in BAND_STATS} for metric, band in group["metrics"].items()}
            for kind, group in bands_for(generation, moe, doc).items()}


def _server_entry(key: tuple, doc: dict) -> dict[str, Any]:
    generation, moe = key
    if generation is None:
        return {"cost_model": moe}
    return {"server": server_name(generation, moe), "generation": generation, "moe": moe,
            "bands": _compact(generation, moe, doc)}


def band_columns(keys: list, doc: dict | None = None) -> dict[str, str]:
    """A table row's columns: ``heldout_server`` and ``heldout_bands`` (JSON: the report, then per server its
    name, generation, MoE? and per fold kind per metric n, signed median, p10..p90 and the range's coverage
    (``BAND_STATS``; ``{}`` with no held-out evidence), or the cost model that has no band)."""
    doc = packaged_bands() if doc is None else doc
    rep = doc["report"]
    return {"heldout_server": server_label(keys),
            "heldout_bands": json.dumps({"report": f"{rep['commit']}, {rep['date']}",
                                         "servers": [_server_entry(k, doc) for k in keys]})}


def column_keys(value: Any) -> list:
    """The server keys back from a row's ``heldout_bands`` (``band_columns``); none from a row without one."""
    if not isinstance(value, str) or not value:
        return []
    return [(None, s["cost_model"]) if "cost_model" in s else (s["generation"], s["moe"])
            for s in json.loads(value)["servers"]]


def _by_server(keys_by_name: dict[str, list]) -> dict[tuple, list[str]]:
    servers: dict[tuple, list[str]] = {}
    for name, keys in keys_by_name.items():
        for key in keys:
            servers.setdefault(key, []).append(name)
    return servers


def band_note(keys_by_name: dict[str, list], doc: dict | None = None) -> list[str]:
    """The note under a table for configurations {name: server keys}: per distinct server its lines
    (``heldout_note.server_lines``), naming the configurations on it where they are on several servers."""
    doc = packaged_bands() if doc is None else doc
    servers = _by_server(keys_by_name)
    named = len(servers) > 1
    lines: list[str] = []
    for (generation, moe), names in servers.items():
        who = ", ".join(names) if named else ""
        if generation is None:
            lines += ([f"{who}:"] if who else []) + [cost_model_line(moe)]
        else:
            lines += server_lines(generation, moe, doc, who)
    return lines


def margin_line(keys: list, doc: dict | None = None) -> str | None:
    """One line for a recommended configuration on one server: the twin's median (80 % range) error on held-out
    servers of its kind, by the first fold kind with evidence (``GPU generation held out`` first), for TTFT
    mean, TPOT and throughput: "leave that margin". None for a mixed cluster, another cost model or no
    evidence (the note under it says which)."""
    doc = packaged_bands() if doc is None else doc
    if len(keys) != 1 or keys[0][0] is None:
        return None
    generation, moe = keys[0]
    bands = bands_for(generation, moe, doc)
    if not bands:
        return None
    kind, group = next(iter(bands.items()))
    parts = [f"{title} {metric_text(group['metrics'].get(key))}" for key, title in SHOWN]
    return (f"on held-out {server_name(generation, moe)} servers ({KIND_WHAT[kind]}) the twin's error was "
            + ", ".join(parts) + ": leave that margin on its numbers")


def band_document(keys_by_name: dict[str, list], doc: dict | None = None,
                  recommended: str | None = None) -> dict[str, Any]:
    """A plan's ``heldout_bands``: the report, per distinct server its bands by fold kind and the names of
    the configurations on it, the note's lines, and for the ``recommended`` configuration (the cheapest) its
    ``margin_line`` (None where there is none to give)."""
    doc = packaged_bands() if doc is None else doc
    out = {"report": dict(doc["report"]), "errors": "predicted / measured - 1",
           "interval_percentiles": list(doc["interval_percentiles"]), "servers": [],
           "note": band_note(keys_by_name, doc)}
    if recommended is not None:
        out["recommended"] = {"configuration": recommended, "margin": margin_line(keys_by_name[recommended], doc)}
    for key, names in _by_server(keys_by_name).items():
        out["servers"].append({**_server_entry(key, doc), "configurations": names})
    return out

