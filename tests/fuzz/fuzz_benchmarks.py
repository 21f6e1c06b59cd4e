"""Fuzz cases for the benchmark scripts that read a held-out report or a what-if table, and for the packaged
tables' loaders (round 23, 33zG): ``multi_seed_report.py`` given three reports one of which is hostile,
``whatif_export.py`` given a hostile ``whatif_fidelity.py --json`` table (as the table or as ``--loose``), and
``twin.results.heldout_bands.load_bands`` / ``twin.results.whatif_bands.load_whatif`` given a hostile file.

Each hostile file is one of ``fuzz_product.HOSTILE`` (empty, binary, non-UTF-8, 100,000-deep nesting, a folder, a
missing file, a link loop, ``/dev/zero``, a named pipe nothing writes to, a 2 GiB sparse file, ...), a key given
twice, or the script's valid document with one field made hostile (a report's folds, errors, summaries and args; a
table's cells; a bands file's numbers: strings, null, NaN, infinities, 10**400, booleans, a 100 kB case name, a
case held out twice, a partial report). Every one must be refused in one line (exit 2).

A script runs as a user runs it (``python benchmarks/X.py ...``) in a child process with a time bound and an
address-space bound; the child waits ``PIPE_WAIT_S`` on a named pipe (the product's 10 s shortened)."""

from __future__ import annotations

import copy
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from hypothesis import strategies as st

from fuzz_product import HOSTILE
from fuzz_runner import Outcome
from fuzz_values import Case

ROOT = Path(__file__).resolve().parents[2]
MEMORY_BYTES = 4 << 30          # the child's address space (a 2 GiB file read whole would pass it)
PIPE_WAIT_S = 1.0
# the child: the product's pipe wait shortened, then the script (or a loader) as ``python`` runs it
CHILD = ("import runpy, sys; import twin.yaml_input as y; y.PIPE_WAIT_S = {wait}; sys.argv = sys.argv[1:]; "
         "exec(sys.argv[1], {{'__name__': '__main__'}}) if sys.argv[0] == '-c' else "
         "runpy.run_path(sys.argv[0], run_name='__main__')")
LOADER = ("import sys; from twin.errors import run_script; from twin.results.{module} import {function}; "
          "run_script(lambda: {function}(sys.argv[-1]))")
KEYS = ("mean_ttft_ms", "median_ttft_ms", "mean_tpot_ms", "mean_e2el_ms", "request_throughput")


def run_benchmark(args: list[str], timeout_s: float) -> Outcome:
    """``python ARGS`` (a script path and its options, or ``-c`` code) in a child, bounded."""
    start = time.monotonic()
    head = [sys.executable, "-c", CHILD.format(wait=PIPE_WAIT_S)]

    def bound() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))

    env = {"PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    try:
        res = subprocess.run([*head, *args], cwd=ROOT, env=env, capture_output=True, text=True, errors="replace",
                             timeout=timeout_s, preexec_fn=bound)
    except subprocess.TimeoutExpired:
        return Outcome(None, "", "", None, True, time.monotonic() - start)
    printed = res.stdout + res.stderr
    tb = printed if "Traceback (most recent call last)" in printed or "MemoryError" in printed else None
    return Outcome(res.returncode, res.stdout, res.stderr, tb, False, time.monotonic() - start)


def _summary(n: int = 1) -> dict:
    return {k: {"n": n, "abs": 0.1, "signed": -0.05} for k in KEYS}


def report(seed: int) -> dict:
    """A small valid GPU-fold report of ``--seed`` ``seed`` (two groups, one case each)."""
    folds = [{"held_out": g, "params": {"step_overhead_s": 1e-3}, "summary": _summary(),
              "errors": {f"run-{g}/stage0": {k: 0.01 * (i + 1) for k in KEYS}}} for i, g in enumerate(("H100", "B200"))]
    return {"args": {"seed": seed, "fit_sim_s": 30.0}, "complete": True,
            "folds": {"GPU": {"pooled": _summary(2), "folds": folds}},
            "moe_vs_dense": {"GPU": {"dense models": _summary(), "MoE models": _summary()}}}


def _fold(doc: dict) -> dict:
    return doc["folds"]["GPU"]["folds"][0]


def _case(doc: dict) -> dict:
    return next(iter(_fold(doc)["errors"].values()))


def _set(where, key, value):
    return lambda d: where(d).__setitem__(key, value)


BAD_NUMBERS = {"text": "0.1", "null": None, "nan": float("nan"), "inf": float("inf"), "huge-int": 10**400,
               "true": True, "list": [0.1], "below -1": -2.0, "1e300": 1e300}
REPORT_MUTATIONS = {
    "no folds": lambda d: d.pop("folds"),
    "folds a list": _set(lambda d: d, "folds", []),
    "a fold kind a list": _set(lambda d: d["folds"], "GPU", []),
    "a fold not an object": lambda d: d["folds"]["GPU"]["folds"].__setitem__(0, 3),
    "a fold without held_out": lambda d: _fold(d).pop("held_out"),
    "a group held out twice": _set(_fold, "held_out", "B200"),
    "errors a list": _set(_fold, "errors", []),
    "a case held out by two folds": lambda d: d["folds"]["GPU"]["folds"][1]["errors"].update(_fold(d)["errors"]),
    "a case in one report only (100 kB name)": lambda d: _fold(d)["errors"].__setitem__("x" * 100_000, {}),
    "an error that is not a metric": _set(_case, "p99_ttft_ms", 0.1),
    **{f"an error {k}": _set(_case, "mean_tpot_ms", v) for k, v in BAD_NUMBERS.items()},
    "a summary count as text": lambda d: _fold(d)["summary"]["mean_tpot_ms"].__setitem__("n", "1"),
    "a summary NaN": lambda d: _fold(d)["summary"]["mean_tpot_ms"].__setitem__("abs", float("nan")),
    "no moe_vs_dense": lambda d: d.pop("moe_vs_dense"),
    "a partial report": _set(lambda d: d, "complete", False),
    "complete as text": _set(lambda d: d, "complete", "yes"),
    "args a list": _set(lambda d: d, "args", []),
    "a seed as text": lambda d: d["args"].__setitem__("seed", "2"),
    "the seed of another report": lambda d: d["args"].__setitem__("seed", (d["args"]["seed"] + 1) % 3),
    "another option": lambda d: d["args"].__setitem__("fit_sim_s", 60.0),
}


def whatif_table() -> dict:
    """A small valid ``whatif_fidelity.py --json`` output (strict pairs: ``ignore`` empty)."""
    cell = {"n": 4, "ratio_abs_median": 0.05, "ratio_signed_median": -0.02, "abs_error_median": 0.1,
            "direction_judged": 4, "direction_right": 1.0, "cancels": 0, "compounds": 0}
    return {"summary": {"GPU": {"concurrency": {"mean_tpot_ms": cell}}, "family": {}}, "ignore": [],
            "report": "r.json", "floor_scale": 1.0, "kinds": ["GPU", "family"], "pairs": []}


def _cell(d: dict) -> dict:
    return d["summary"]["GPU"]["concurrency"]["mean_tpot_ms"]


WHATIF_MUTATIONS = {
    "no summary": lambda d: d.pop("summary"),
    "a kind a list": _set(lambda d: d["summary"], "GPU", []),
    "a knob as text": _set(lambda d: d["summary"]["GPU"], "concurrency", "x"),
    "a cell a number": _set(lambda d: d["summary"]["GPU"]["concurrency"], "mean_tpot_ms", 3),
    "a cell without n": lambda d: _cell(d).pop("n"),
    **{f"n {k}": _set(_cell, "n", v) for k, v in BAD_NUMBERS.items() if k != "below -1"},
    **{f"a median {k}": _set(_cell, "ratio_abs_median", v) for k, v in BAD_NUMBERS.items()},
    "a knob that is not one": lambda d: d["summary"]["GPU"].__setitem__("bogus", d["summary"]["GPU"]["concurrency"]),
    "ignore as text": _set(lambda d: d, "ignore", "release"),
}
BANDS_FILES = {"load_bands": ("heldout_bands", "twin/results/data/heldout_bands.json"),
               "load_whatif": ("whatif_bands", "twin/results/data/whatif_bands.json")}


def _bands_number(doc: dict, loader: str) -> dict:
    if loader == "load_bands":
        return next(iter(doc["kinds"]["GPU"][0]["metrics"].values()))
    knobs = next(iter(doc["kinds"].values()))
    return next(iter(next(iter(knobs.values())).values()))


def _dump(doc: dict) -> bytes:
    return json.dumps(doc).encode()


@st.composite
def report_cases(draw) -> Case:
    """``multi_seed_report.py`` over three reports, one of them hostile (a whole file or one field)."""
    at = draw(st.integers(0, 2))
    kind = draw(st.sampled_from(sorted(HOSTILE) + ["duplicate-key"] + sorted(REPORT_MUTATIONS)))
    files = {f"r{i}.json": _dump(report(i)) for i in range(3)}
    if kind in REPORT_MUTATIONS:
        doc = copy.deepcopy(report(at))
        REPORT_MUTATIONS[kind](doc)
        files[f"r{at}.json"] = _dump(doc)
    elif kind == "duplicate-key":
        files[f"r{at}.json"] = b'{"folds": {}, "folds": {}}'
    elif HOSTILE[kind] is None:
        files.pop(f"r{at}.json")
    else:
        files[f"r{at}.json"] = HOSTILE[kind]
    case = Case("benchmark-multi-seed-report", ["benchmarks/multi_seed_report.py", "{d}/r0.json", "{d}/r1.json",
                                                "{d}/r2.json", "--folds", "GPU"], files)
    case.refuse(f"report {at} is {kind}")
    return case


@st.composite
def whatif_cases(draw) -> Case:
    """``whatif_export.py`` given a hostile table, as the table or as ``--loose``."""
    loose = draw(st.booleans())
    kind = draw(st.sampled_from(sorted(HOSTILE) + sorted(WHATIF_MUTATIONS)))
    if kind in WHATIF_MUTATIONS:
        doc = whatif_table()
        if loose:
            doc["ignore"] = ["release"]
        WHATIF_MUTATIONS[kind](doc)
        data = _dump(doc)
    else:
        data = HOSTILE[kind]
    files = {"w.json": _dump(whatif_table())} | ({} if data is None else {"x.json": data})
    args = ["benchmarks/whatif_export.py", "{d}/w.json" if loose else "{d}/x.json", "--report-commit", "abcdef1",
            "--report-date", "2026-01-01", "--command", "x", "--out", "{d}/o.json", "--min-pairs", "1"]
    case = Case("benchmark-whatif-export", args + (["--loose", "{d}/x.json"] if loose else []), files)
    case.refuse(f"the {'loose ' if loose else ''}table is {kind}")
    return case


@st.composite
def bands_cases(draw) -> Case:
    """A packaged table's loader given a hostile file (the packaged file with one number made hostile, or a
    hostile file)."""
    loader = draw(st.sampled_from(sorted(BANDS_FILES)))
    module, packaged = BANDS_FILES[loader]
    kind = draw(st.sampled_from(sorted(HOSTILE) + [f"a number {k}" for k in BAD_NUMBERS]))
    if kind in HOSTILE:
        data = HOSTILE[kind]
    else:
        doc = json.loads((ROOT / packaged).read_text())
        cell = _bands_number(doc, loader)
        key = "signed_median" if loader == "load_bands" else "ratio_signed_median"
        cell[key] = BAD_NUMBERS[kind[len("a number "):]]
        data = _dump(doc)
    code = LOADER.format(module=module, function=loader)
    case = Case(f"benchmark-{loader}", ["-c", code, "{d}/x.json"], {} if data is None else {"x.json": data})
    case.refuse(f"the file is {kind}")
    return case


def seeds() -> list[tuple[list[str], dict[str, bytes]]]:
    """The unmutated inputs the cases start from (each must run)."""
    return [(["benchmarks/multi_seed_report.py", "{d}/r0.json", "{d}/r1.json", "{d}/r2.json", "--folds", "GPU"],
             {f"r{i}.json": _dump(report(i)) for i in range(3)}),
            (["benchmarks/whatif_export.py", "{d}/w.json", "--report-commit", "abcdef1", "--report-date",
              "2026-01-01", "--command", "x", "--out", "{d}/o.json", "--min-pairs", "1"],
             {"w.json": _dump(whatif_table())}),
            *[(["-c", LOADER.format(module=m, function=f), str(ROOT / p)], {}) for f, (m, p) in BANDS_FILES.items()]]
