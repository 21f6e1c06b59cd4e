"""The what-if band as ``twin compare`` shows it (issue 33, round 22): under the tables, for each knob the variants
change from the reference, how far off the twin's predicted CHANGE was held out (``twin.results.whatif_bands``,
docs/fidelity.md "Round 22: what-if fidelity: predicted changes held out"), and the ``whatif`` key of compare's
``--json``.

    What-if band: the twin's error on a predicted change, held out (each variant vs baseline)
      change            pairs  TTFT mean   TPOT        E2E mean    throughput  right way
      TP / EP layout: tp2
        GPU held out    223    8.1 (+5.9)  2.9 (+0.7)  3.1 (+1.2)  3.0 (-1.2)  84, 87%
        family held out 223    9.9 (+6.8)  2.8 (+0.0)  2.9 (+0.1)  2.9 (-0.1)  78, 89%
      max_num_seqs: vllm-default: no held-out evidence for a change of max_num_seqs
      ...

A knob is a setting of the variant's scenario body that differs from the reference's (``changed_knobs``); the
settings the table holds map to its knobs (``KNOB_OF``), any other server or workload setting is named as it is and
gets the no-evidence line, never a made-up band. Settings that do not change what the server does (the name, the
seed, the SLO, the records kept) are no knob. A knob with no strict cell (pairs one knob apart, same release and
script) shows the table's LOOSE cells where it has them (the release and the script's other server settings may
differ too), its heading marked (``loose_mark``); the two are never mixed in one knob's rows.

``axes_doc`` builds the same block for configurations that differ along axes rather than from one reference
(round 23: under ``twin sweep`` and ``twin plan``, and the dashboard's load sweep; ``twin.plan.whatif_axes``)."""

from __future__ import annotations

import re
import textwrap
from typing import Any

from twin.results.heldout_bands import other_cost_model
from twin.results.whatif_bands import KINDS, METRICS, load_whatif

KNOB_NAMES = {"concurrency": "concurrency", "rate": "arrival rate", "layout": "TP / EP layout",
              "weights": "weight format", "kv": "KV format", "gpu": "GPU", "lengths": "ISL x OSL",
              "release": "vLLM release"}
TITLES = {"mean_ttft_ms": "TTFT mean", "mean_tpot_ms": "TPOT", "mean_e2el_ms": "E2E mean",
          "request_throughput": "throughput"}
NOT_KNOBS = ("name", "description", "seed", "replications", "records", "slo", "warmup_s", "max_sim_time_s")
RUN_PATHS = (("workload", "num_requests"), ("workload", "duration_s"))   # how long the benchmark runs: no knob
WIDTH = 80                     # the printed block's lines wrap here (as `twin compare`'s other notes)
LOOSE_WHAT = {"release": "vLLM release", "server": "server settings"}
NAMES_SHOWN = 3                # variants named per knob; more: "+N more"
ACROSS_AXES = "a move along several axes"   # axes_doc's several_knobs entry
_DOC: dict | None = None


def packaged_whatif() -> dict:
    """The packaged what-if table, read and validated once per process."""
    global _DOC
    if _DOC is None:
        _DOC = load_whatif()
    return _DOC


def knob_of(path: tuple) -> str:
    """The table's knob a setting's path maps to (``KNOB_NAMES``), else the setting's own name (a server or
    deployment setting's key, ``speculative_decoding``, ``workload.classes``)."""
    head, rest = path[0], [p for p in path[1:] if not isinstance(p, int)]
    leaf = rest[-1] if rest else head
    if head == "deployment" and rest:
        if rest[0] == "gpu":
            return "gpu"
        if rest[0] in ("tensor_parallel_size", "data_parallel_size", "enable_expert_parallel"):
            return "layout"
        if rest[0] in ("weight_dtype", "weight_formats"):
            return "weights"
        return "kv" if rest[0] == "kv_dtype" else rest[0]
    if head == "server" and rest:
        return "release" if rest[0] == "vllm_version" else rest[0]
    if head == "workload" and rest:
        if rest[0] == "arrivals" and leaf in ("concurrency", "max_concurrency"):
            return "concurrency"
        if rest[0] == "arrivals" and leaf == "rate_per_s":
            return "rate"
        if rest[0] == "classes" and len(rest) > 1 and rest[1] in ("prompt", "output_tokens") and (
                rest[1] == "output_tokens" or (len(rest) > 2 and rest[2] == "suffix_tokens")):
            return "lengths"
        return f"workload.{rest[0]}"
    return head


def _flat(value: Any, path: tuple = ()) -> dict[tuple, Any]:
    if isinstance(value, dict):
        out: dict[tuple, Any] = {}
        for key, item in value.items():
            out.update(_flat(item, (*path, key)))
        return out or {path: {}}
    if isinstance(value, list):
        out = {}
        for i, item in enumerate(value):
            out.update(_flat(item, (*path, i)))
        return out or {path: []}
    return {path: value}


def changed_knobs(reference: Any, variant: Any) -> list[str]:
    """The knobs (``knob_of``) in which scenario body ``variant`` differs from ``reference``, in the body's order."""
    a = _flat(reference.model_dump(mode="json"))
    b = _flat(variant.model_dump(mode="json"))
    paths = [p for p in dict.fromkeys([*a, *b]) if p and p[0] not in NOT_KNOBS and p[:2] not in RUN_PATHS
             and a.get(p, None) != b.get(p, None)]
    return list(dict.fromkeys(knob_of(p) for p in paths))


def knob_name(knob: str) -> str:
    return KNOB_NAMES.get(knob, knob)


def _named(names: list[str]) -> str:
    shown = ", ".join(names[:NAMES_SHOWN])
    return shown + (f" +{len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else "")


def whatif_doc(runs: dict[str, dict[str, Any]], doc: dict | None = None) -> dict[str, Any]:
    """The ``whatif`` key of ``twin compare --json`` for its runs ({name: {"body": ..., "deployment": ...}}, the
    reference first): per knob a variant changes, the variants and the held-out cells by fold kind (``evidence``,
    ``null`` where the table holds no such knob), the variants that change several knobs, and the printed lines."""
    doc = packaged_whatif() if doc is None else doc
    names = list(runs)
    reference = runs[names[0]]
    out: dict[str, Any] = {"reference": names[0], "report": dict(doc["report"]), "errors": doc["errors"],
                           "min_pairs": doc["min_pairs"], "knobs": [], "several_knobs": {}, "no_band": None,
                           "lines": []}
    for name in names:         # the evidence is of the roofline cost model
        other = other_cost_model(runs[name]["body"], runs[name]["deployment"])
        if other:
            out["no_band"] = f"{name} uses {other}"
            break
    changes = {name: changed_knobs(reference["body"], runs[name]["body"]) for name in names[1:]}
    return _fill(out, doc, changes)


def _fill(out: dict[str, Any], doc: dict, changes: dict[str, list[str]]) -> dict[str, Any]:
    """``out`` with its ``knobs`` (per knob: the names that change it and the table's cells), ``several_knobs``,
    ``loose_ignore`` and ``lines`` from ``changes`` ({what changes: [knobs]})."""
    knobs: dict[str, list[str]] = {}
    for name, changed in changes.items():
        for knob in changed:
            knobs.setdefault(knob, []).append(name)
        if len(changed) > 1:
            out["several_knobs"][name] = changed
    for knob, variants in knobs.items():
        pairing, evidence = _evidence(doc, knob)
        out["knobs"].append({"knob": knob, "name": knob_name(knob), "variants": variants,
                             "evidence": evidence, "pairing": pairing})
    loose = doc.get("loose")
    out["loose_ignore"] = list(loose["ignore"]) if loose else None
    out["lines"] = whatif_lines(out) if knobs else []
    return out


def axes_doc(changes: dict[str, list[str]], change: str, no_band: str | None = None,
             doc: dict | None = None) -> dict[str, Any]:
    """The what-if band of configurations that differ along axes (``twin sweep``'s grid keys, ``twin plan``'s
    search keys): ``changes`` {axis: the knobs it changes (``changed_knobs`` of two of its values)}, ``change``
    what the heading says the change is (``along the sweep``), ``no_band`` which configuration uses a cost model
    the evidence is not of. The keys of ``whatif_doc``, with ``change`` in place of ``reference``; where
    several axes change knobs, ``several_knobs`` holds ``ACROSS_AXES`` (a point that moves on several)."""
    doc = packaged_whatif() if doc is None else doc
    out: dict[str, Any] = {"change": change, "report": dict(doc["report"]), "errors": doc["errors"],
                           "min_pairs": doc["min_pairs"], "knobs": [], "several_knobs": {}, "no_band": no_band,
                           "lines": []}
    out = _fill(out, doc, changes)
    moved = list(dict.fromkeys(k for changed in changes.values() for k in changed))
    if sum(bool(c) for c in changes.values()) > 1 and len(moved) > 1:
        out["several_knobs"][ACROSS_AXES] = moved
        out["lines"] = whatif_lines(out)
    return out


def _evidence(doc: dict, knob: str) -> tuple[str | None, dict | None]:
    """("strict", cells) where the table's strict section holds ``knob``, else ("loose", cells) where its loose
    section does, else (None, None); cells by fold kind."""
    for pairing, kinds in (("strict", doc["kinds"]), ("loose", (doc.get("loose") or {}).get("kinds", {}))):
        cells = {k: kinds[k][knob] for k in KINDS if knob in kinds.get(k, {})}
        if cells:
            return pairing, cells
    return None, None


def loose_mark(view: dict[str, Any]) -> str:
    """What a loose band's heading says: the pairs may differ in the table's ``loose.ignore`` too."""
    what = [LOOSE_WHAT.get(a, a) for a in view["loose_ignore"] or ()]
    return f"loose: {' and '.join(what)} may differ too"


def _cell(cell: dict | None) -> str:
    if cell is None:
        return "-"
    size, signed = 100 * cell["ratio_abs_median"], 100 * cell["ratio_signed_median"]
    return re.sub(r"\(-0\.0\)|\(\+0\.0\)", "(0.0)", f"{size:.1f} ({signed:+.1f})")


def _right(cells: dict) -> str:
    shares = [cells[m]["direction_right"] for m in ("mean_ttft_ms", "mean_tpot_ms") if m in cells]
    shown = [f"{round(100 * s)}" for s in shares if s is not None]
    return (", ".join(shown) + "%") if shown else "-"


def _no_evidence(entry: dict, min_pairs: int, named: bool = True) -> str:
    why = "" if entry["knob"] not in KNOB_NAMES else f" (under {min_pairs} pairs)"
    who = f"{_named(entry['variants'])}: no" if named else "No"
    return f"{who} held-out evidence for a change of {entry['name']}{why}"


def _several(view: dict[str, Any], named: bool = True) -> list[str]:
    if not named:
        return [f"The what-if changes {len(changed)} knobs ({', '.join(knob_name(k) for k in changed)}): the errors "
                "may add" for changed in view["several_knobs"].values()]
    together: dict[tuple, list[str]] = {}
    for name, changed in view["several_knobs"].items():
        together.setdefault(tuple(changed), []).append(name)
    return [f"{_named(names)} change{'s' if len(names) == 1 else ''} {len(changed)} knobs "
            f"({', '.join(knob_name(k) for k in changed)}): the errors may add" for changed, names in together.items()]


def _band_rows(entry: dict) -> list[list[str]]:
    """Per fold kind of a knob's evidence: the kind, pairs, each metric's cell, the direction shares."""
    return [[kind, str(max(c["n"] for c in cells.values())), *(_cell(cells.get(m)) for m in METRICS),
             _right(cells)] for kind, cells in entry["evidence"].items()]


def _no_band(view: dict[str, Any]) -> str:
    return f"No what-if band: the held-out evidence is of the twin's roofline cost model; {view['no_band']}"


def _wrapped(text: str, indent: str = "  ") -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent + "  ", break_long_words=False,
                         break_on_hyphens=False)


def _where(view: dict[str, Any]) -> str:
    return view["change"] if "change" in view else f"from {view['reference']}"


def whatif_lines(view: dict[str, Any]) -> list[str]:
    """The printed block of a ``whatif_doc`` (its ``lines``), wrapped at ``WIDTH`` columns."""
    if view["no_band"]:
        return _wrapped(_no_band(view), "")
    head = ["change", "pairs", *TITLES.values(), "right way"]
    banded = [e for e in view["knobs"] if e["evidence"] is not None]
    rows: list[list[str] | str] = []
    for entry in banded:
        mark = f" ({loose_mark(view)})" if entry["pairing"] == "loose" else ""
        rows += _wrapped(f"{entry['name']}: {_named(entry['variants'])}{mark}")
        rows += [[f"  {row[0]}", *row[1:]] for row in _band_rows(entry)]
    table = [r for r in rows if isinstance(r, list)]
    lines = _wrapped(f"What-if band: the twin's error on the predicted change {_where(view)}, held out", "")
    if table:
        widths = [max(len(r[i]) for r in [head, *table]) for i in range(len(head))]
        gap = "  " if 2 + sum(widths) + 2 * (len(widths) - 1) <= WIDTH else " "   # one space where two overflow
        fmt = lambda r: ("  " + gap.join(f"{c:<{w}}" for c, w in zip(r, widths))).rstrip()  # noqa: E731
        lines.append(fmt(head))
    lines += [r if isinstance(r, str) else fmt(r) for r in rows]
    lines += [ln for e in view["knobs"] if e["evidence"] is None for ln in _wrapped(_no_evidence(e, view["min_pairs"]))]
    lines += [ln for text in _several(view) for ln in _wrapped(text)]
    if table:
        lines += ["  median |error of the predicted change| (signed), %; GPU / family held out;",
                  f"  right way: pairs with the measured direction (TTFT, TPOT); report {view['report']['commit']}"]
    return lines


def whatif_markdown(view: dict[str, Any]) -> str:
    """The dashboard's form of a ``whatif_doc``: a caption and a markdown table (a row per knob and fold kind),
    then the knobs with no held-out evidence and the several-knob note (the dashboard's one what-if: not named);
    "" where no knob changed."""
    if view["no_band"]:
        return _no_band(view)
    if not view["knobs"]:
        return ""
    rep = view["report"]
    out = []
    banded = [e for e in view["knobs"] if e["evidence"] is not None]
    if banded:
        rows = [f"| {e['name']}{f' ({loose_mark(view)})' if e['pairing'] == 'loose' else ''} | " + " | ".join(r)
                + " |" for e in banded for r in _band_rows(e)]
        out.append(f"**What-if band**: the twin's error on the predicted change {_where(view)}, held out: "
                   "median |error of the predicted change| (signed median), percent; right way: the share of pairs "
                   f"with the measured direction (TTFT, TPOT); report {rep['commit']}, {rep['date']}\n\n"
                   "| change | held out | pairs | " + " | ".join(TITLES.values()) + " | right way |\n|"
                   + "---|" * (len(TITLES) + 4) + "\n" + "\n".join(rows))
    out += [_no_evidence(e, view["min_pairs"], named=False) for e in view["knobs"] if e["evidence"] is None]
    return "\n\n".join(out + _several(view, named=False))
