"""What each fold of a held-out report read for the shared serving terms, and whether the two one-generation GPU
folds agree (issue 33, round 13; docs/fidelity.md "Round 13: terms that transfer between generations"). No
simulation: the values and standard errors of a ``fidelity_real.py --json`` file.

A term read on B200 rows alone (the H100-held-out fold) and on H100 rows alone (the B200-held-out fold) whose two
readings agree within about their combined standard error transfers between the generations as the data show it.
For the generation-scoped pair (``memory_efficiency`` beside ``memory_efficiency@blackwell``) the folds that train on
both generations read the gap directly: one sign in every fold says the term is a generation's.

    python benchmarks/transfer_readings.py REPORT.json [OTHER.json ...]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fold_report import FoldReport, read_json  # noqa: E402
from twin.errors import run_script  # noqa: E402

# the shared terms a fold refits, in the units they are printed in
TERMS: dict[str, tuple[str, float]] = {
    "memory_efficiency": ("Hopper fraction", 1.0), "memory_efficiency@blackwell": ("Blackwell fraction", 1.0),
    "step_overhead_s": ("step ms", 1e3), "per_seq_overhead_s": ("per-seq us", 1e6),
    "allreduce_latency_s": ("all-reduce us", 1e6), "request_path_s@client_vllm_bench": ("bench path ms", 1e3),
}
ONE_GENERATION = {("GPU", "H100-SXM"): "B200 rows", ("GPU", "B200"): "H100 rows",
                  ("source", "silicon"): "H100 inference-perf runs"}


Reading = tuple[str, str, str, dict[str, tuple[float, "float | None", bool]]]


def readings(report: dict, source: object = "the report") -> list[Reading]:
    """(fold kind, held-out group, what it trained on, {term: (value, std or None, fitted)}) for every fold of
    ``report`` (``source`` names it)."""
    rep = FoldReport(report, source)
    out = []
    for kind in rep.kinds():
        for fold in rep.folds(kind):
            params, std, ident = rep.params(fold), rep.std(fold), rep.identification(fold)
            vals = {t: (params[t], std.get(t), ident.get(t, "identified") == "identified")
                    for t in TERMS if t in params}
            out.append((kind, fold["held_out"], ONE_GENERATION.get((kind, fold["held_out"]), "both"), vals))
    return out


def agreement(a: tuple[float, float | None, bool], b: tuple[float, float | None, bool]) -> float | None:
    """|a - b| in units of their combined standard error (None where either has none)."""
    if a[1] is None or b[1] is None or not (a[1] or b[1]):
        return None
    return abs(a[0] - b[0]) / math.hypot(a[1], b[1])


def _fmt(term: str, v: tuple[float, float | None, bool] | None) -> str:
    if v is None:
        return "-"
    scale = TERMS[term][1]
    std = "" if v[1] is None else f" +/- {v[1] * scale:.3g}"
    return f"{v[0] * scale:.3g}{std}{'' if v[2] else ' (held)'}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reports", type=Path, nargs="+")
    args = ap.parse_args()
    for path in args.reports:
        rows = readings(read_json(path), path)
        print(f"## {path.name}\n\n| fold | trained on | " + " | ".join(lbl for lbl, _ in TERMS.values()) + " |")
        print("|---|---|" + "---|" * len(TERMS))
        for kind, group, trained, vals in rows:
            print(f"| {kind}: {group} held out | {trained} | " + " | ".join(_fmt(t, vals.get(t)) for t in TERMS) + " |")
        gaps = [(f"{kind}: {group}", agreement(v["memory_efficiency"], v["memory_efficiency@blackwell"]),
                 v["memory_efficiency"][0] - v["memory_efficiency@blackwell"][0])
                for kind, group, trained, v in rows if trained == "both" and "memory_efficiency@blackwell" in v]
        print("\nHopper - Blackwell fraction in the folds that read both (standard errors): " + ", ".join(
            f"{f} {d:+.3f} ({z:.1f})" for f, z, d in gaps if z is not None))
        one = {trained: vals for kind, _, trained, vals in rows if kind == "GPU"}
        if len(one) == 2:
            b, h = one["B200 rows"], one["H100 rows"]
            # the H100-held-out fold's Hopper value is the carried one; its reading is Blackwell's
            pairs = {t: (b.get("memory_efficiency@blackwell" if t == "memory_efficiency" else t), h.get(t))
                     for t in TERMS if t != "memory_efficiency@blackwell"}
            print("\nB200 rows alone vs H100 rows alone (|difference| / combined standard error): " + ", ".join(
                f"{TERMS[t][0]} {z:.1f}" for t, (x, y) in pairs.items()
                if x and y and (z := agreement(x, y)) is not None))
        print()


if __name__ == "__main__":
    run_script(main)
