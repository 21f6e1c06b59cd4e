"""Do the shared terms carry across folds under another case weighting? (issue 33, docs/fidelity.md "Round 19: the
fit's case weights"). Reads two ``fidelity_real.py --json`` held-out reports (e.g. the default ``--case-weights
source`` and ``--case-weights cell``) and prints, for each term the folds fit, its value in every fold of both
(fit units; ``*`` where that fold's fit did not identify it) and its range across the folds that identify it
(min..max): the hypothesis "cell weights make the shared terms a property of the server, not of the mix" predicts
a narrower range. No simulation.

    python benchmarks/case_weight_terms.py BEFORE.json AFTER.json [--kinds source,GPU,family]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fold_report import FoldReport, load_report  # noqa: E402
from twin.fitting.parameters import PARAMETERS_BY_NAME  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402

IDENTIFIED = "identified"


def term_values(report: FoldReport, kinds: list[str], name: str) -> list[tuple[str, float | None, bool]]:
    """(kind/group, the term's value in fit units or None, identified) per fold of ``kinds``."""
    out = []
    for kind in kinds:
        for fold in report.folds(kind):
            value = report.params(fold).get(name)
            ident = report.identification(fold).get(name) == IDENTIFIED
            shown = None if value is None else PARAMETERS_BY_NAME[name].from_model(value)
            out.append((f"{kind}/{fold['held_out']}", shown, ident))
    return out


def spread(values: list[tuple[str, float | None, bool]]) -> tuple[float, float] | None:
    """(min, max) over the identified values (None with fewer than two)."""
    kept = [v for _, v, ident in values if ident and v is not None]
    return (min(kept), max(kept)) if len(kept) > 1 else None


def _range(lim: tuple[float, float] | None) -> str:
    return "-" if lim is None else f"{lim[0]:.4g}..{lim[1]:.4g}"


def _cell(value: float | None, ident: bool) -> str:
    return "-" if value is None else f"{value:.4g}" + ("" if ident else "*")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--kinds", default="source,GPU,family", help="comma-separated fold kinds both reports hold")
    args = ap.parse_args()
    before, after = load_report(args.before), load_report(args.after)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    if not kinds:
        raise TwinInputError("--kinds: no fold kind given")
    names = before.data.get("names")
    if not isinstance(names, list) or not names or not all(n in PARAMETERS_BY_NAME for n in names):
        raise before.error("no list of known fitted parameter names (names)")
    for name in names:
        a, b = term_values(before, kinds, name), term_values(after, kinds, name)
        sa, sb = spread(a), spread(b)
        print(f"{name} ({PARAMETERS_BY_NAME[name].unit}); range over identified folds: {_range(sa)} -> "
              f"{_range(sb)}")
        later = {fold: (v, ident) for fold, v, ident in b}      # folds matched by name: a report may hold fewer
        for fold, va, ia in a + [(f, None, False) for f, _, _ in b if f not in {x[0] for x in a}]:
            vb, ib = later.get(fold, (None, False))
            print(f"    {fold:28s} {_cell(va, ia):>12s} -> {_cell(vb, ib):<12s}")


if __name__ == "__main__":
    run_script(main)
