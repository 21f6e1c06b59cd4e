"""The held-out error bands (``twin.results.heldout_bands``) as a run shows them: a compact note under ``twin run``'s
and ``twin compare``'s tables, a ``heldout_bands`` key in their ``--json`` output, the dashboard's table beside each
run's verdict.

    Error band: the twin's error on held-out Blackwell MoE servers (not these)
                  GPU generation held out  model family held out
      cases       31                       31
      TTFT mean   -5.4% (-36..+9%)         -1.1% (-24..+23%)
      ...
      predicted / measured - 1: median (80% range); report e5697cc, 2026-12-06
      range by order statistics: ~80% of unseen servers inside, less where marked

A generation / kind the report has no held-out case of says so, with no band."""

from __future__ import annotations

import copy
from typing import Any

from twin.results.heldout_bands import KINDS, SHOWN, bands_for, other_cost_model, packaged_bands, server_kinds

GENERATION_NAMES = {"hopper": "Hopper", "blackwell": "Blackwell", "ampere": "Ampere", "ada": "Ada", "cdna3": "CDNA3",
                    "cpu": "CPU", "other": "an uncatalogued GPU generation"}
KIND_WHAT = {"GPU": "GPU generation held out", "family": "model family held out"}
# round 20: the range's name in the note, and (order statistics) a line saying what it holds; each under 80 columns
RANGE_WORDS = {"order": ("80% range", "range by order statistics: ~80% of unseen servers inside, less where marked"),
               "linear": ("p10..p90", None)}


def server_name(generation: str, moe: bool) -> str:
    return f"{GENERATION_NAMES.get(generation, generation)} {'MoE' if moe else 'dense'}"


def group_cases(group: dict) -> int:
    """The held-out cases of a group (its best-covered metric's count)."""
    return max(band["n"] for band in group["metrics"].values())


def range_words(construction: str) -> tuple[str, str | None]:
    """What the parenthesised range is called, by the bands document's ``construction``, and the line that says
    what it holds (None: the name says it)."""
    return RANGE_WORDS[construction]


def metric_text(band: dict | None) -> str:
    """``-9.5% (-38..+17%)``; a range holding under 80 % of unseen servers (a thin cell): ``-9.5% (-38..+17%, ~78%)``;
    with too few cases for an interval, ``-9.5% (n=3)``; no band: ``-``."""
    if band is None:
        return "-"
    median = f"{100 * band['signed_median']:+.1f}%".replace("-0.0%", "0.0%").replace("+0.0%", "0.0%")
    if band.get("p10") is None:
        return f"{median} (n={band['n']})"
    share = band.get("coverage")
    thin = f", ~{round(100 * share)}%" if share is not None and share < 0.8 - 1e-9 else ""
    return f"{median} ({_whole_percent(band['p10'])}..{_whole_percent(band['p90'])}%{thin})"


def _whole_percent(fraction: float) -> str:
    """An interval end in whole percent, signed: ``-33``, ``+8``, ``0`` (never ``-0``)."""
    r = round(100 * fraction)
    return "0" if r == 0 else f"{r:+d}"


def evidence_names(doc: dict, generation: str) -> str:
    """The servers the report holds out: its generations, or (where ``generation`` is one) that generation's
    kinds (``Hopper, Blackwell``; ``Blackwell MoE``)."""
    groups = [g for k in KINDS for g in doc["kinds"].get(k, [])]
    mine = [server_name(g["generation"], g["moe"]) for g in groups if g["generation"] == generation]
    names = mine or [GENERATION_NAMES.get(g["generation"], g["generation"]) for g in groups]
    return ", ".join(dict.fromkeys(names)) or "none"


def server_lines(generation: str, moe: bool, doc: dict | None = None, runs: str = "") -> list[str]:
    """The note for one (generation, MoE?) server: a title, then a small table (a column per fold kind with a
    group, a row per metric: median (p10..p90)); with no group, one line saying there is no held-out evidence.
    ``runs`` names the runs on this server where a comparison's runs differ."""
    doc = packaged_bands() if doc is None else doc
    bands = bands_for(generation, moe, doc)
    who = [f"{runs}:"] if runs else []
    if not bands:
        return who + [f"No error band: no held-out evidence for {server_name(generation, moe)} servers (the report "
                      f"holds out {evidence_names(doc, generation)} only)"]
    rep = doc["report"]
    lines = who + [f"Error band: the twin's error on held-out {server_name(generation, moe)} servers (not these)"]
    rows = [("", [KIND_WHAT[k] for k in bands]), ("cases", [str(group_cases(g)) for g in bands.values()])]
    rows += [(title, [metric_text(g["metrics"].get(key)) for g in bands.values()]) for key, title in SHOWN]
    widths = [max(len(r[1][i]) for r in rows) for i in range(len(bands))]
    lines += ["  " + f"{label:<10}" + "".join(f"  {cell:<{w}}" for cell, w in zip(cells, widths)).rstrip()
              for label, cells in rows]
    name, holds = range_words(doc["construction"])
    lines.append(f"  predicted / measured - 1: median ({name}); report {rep['commit']}, {rep['date']}")
    return lines + ([f"  {holds}"] if holds else [])


def cost_model_line(cost_model: str) -> str:
    return f"No error band: the held-out evidence is of the twin's roofline cost model; this run uses {cost_model}"


def note_lines(runs: dict[str, dict[str, Any]], doc: dict | None = None) -> list[str]:
    """The note for ``twin run`` / ``twin compare``'s runs ({name: {"body": ..., "deployment": resolved, ...}}):
    each distinct server's lines (naming the runs on it where the runs are on different servers); a run on another
    cost model than the roofline gets one line saying it has no band."""
    doc = packaged_bands() if doc is None else doc
    servers: dict[tuple, list[str]] = {}
    for name, run in runs.items():
        other = other_cost_model(run["body"], run["deployment"])
        for key in [(None, other)] if other else server_kinds(run["deployment"]):
            servers.setdefault(key, []).append(name)
    named = len(servers) > 1 and len(runs) > 1
    lines = []
    for (generation, moe), names in servers.items():
        who = ", ".join(dict.fromkeys(names)) if named else ""
        if generation is None:
            lines += ([f"{who}:"] if who else []) + [cost_model_line(moe)]
        else:
            lines += server_lines(generation, moe, doc, who)
    return lines


def bands_doc(deployment: Any, body: Any, doc: dict | None = None) -> dict[str, Any]:
    """The ``heldout_bands`` key of a run's JSON: the report it came from, per server of the deployment its groups
    by fold kind (``{}`` with no held-out evidence) and the note's lines; ``note``: every line of the run's note
    (no server where the run's cost model is not the roofline)."""
    doc = packaged_bands() if doc is None else doc
    out = {"report": dict(doc["report"]), "errors": "predicted / measured - 1",
           "interval_percentiles": list(doc["interval_percentiles"]), "construction": doc["construction"],
           "servers": [], "note": []}
    other = other_cost_model(body, deployment)
    if other:
        out["note"] = [cost_model_line(other)]
        return out
    for generation, moe in server_kinds(deployment):
        bands = copy.deepcopy(bands_for(generation, moe, doc))       # the cached document stays untouched
        lines = server_lines(generation, moe, doc)
        out["servers"].append({"generation": generation, "moe": moe, "bands": bands, "note": lines})
        out["note"] += lines
    return out


def bands_markdown(bands: dict[str, Any]) -> str:
    """The dashboard's form of a run's ``bands_doc``: per server a caption and a markdown table (or the line saying
    there is no held-out evidence)."""
    rep = bands["report"]
    name, holds = range_words(bands["construction"])
    holds = f"; {holds}" if holds else ""
    out = [] if bands["servers"] else bands["note"][:1]
    for server in bands["servers"]:
        groups = server["bands"]
        if not groups:
            out.append(server["note"][0])
            continue
        kinds = " | ".join(KIND_WHAT[k] for k in groups)
        rows = ["| cases | " + " | ".join(str(group_cases(g)) for g in groups.values()) + " |"]
        rows += [f"| {title} | " + " | ".join(metric_text(g["metrics"].get(key)) for g in groups.values()) + " |"
                 for key, title in SHOWN]
        out.append(f"**Error band**: the twin's error on held-out {server_name(server['generation'], server['moe'])} "
                   f"servers (not this one), predicted / measured - 1, median ({name}); report {rep['commit']}, "
                   f"{rep['date']}{holds}\n\n| | {kinds} |\n|---|" + "---|" * len(groups) + "\n"
                   + "\n".join(rows))
    return "\n\n".join(out)
