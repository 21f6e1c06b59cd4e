"""Fuzz the benchmark scripts that read a held-out report or a what-if table, and the packaged tables' loaders
(round 23, 33zG; the cases: ``fuzz_benchmarks``). Each case runs the script as a user would, in a child with a time
and memory bound, and must end in exit 2 with one line on stderr: never a traceback, a hang, another exit status,
several lines, or exit 0 (every case's input is invalid). The counts join the fuzz suite's summary line.

CI runs ``TWIN_FUZZ_EXAMPLES`` cases per surface (the defaults below: 40 cases, about 30 s on 2 shared cores)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import fuzz_benchmarks
import fuzz_tally
from fuzz_values import Case, place
from test_fuzz_cli import run_surface

TIMEOUT_S = float(os.environ.get("TWIN_FUZZ_TIMEOUT_S", "30"))


def check(case: Case) -> str | None:
    """The finding of one case (None where it was refused in one line, or ran where it may)."""
    with tempfile.TemporaryDirectory(prefix="twin-fuzz-") as d:
        for name, data in case.files.items():
            place(Path(d, name), data)
        out = fuzz_benchmarks.run_benchmark([a.replace("{d}", d) for a in case.args], TIMEOUT_S)
    if out.hung:
        kind, problem = "hang", f"still running after {TIMEOUT_S:g} s"
    elif out.traceback is not None:
        kind, problem = ("oom" if "MemoryError" in out.traceback else "traceback"), out.traceback[-3000:]
    elif out.exit_code not in (0, 2):
        kind, problem = "exit", f"exit status {out.exit_code}: {(out.stdout + out.stderr)[-1500:]}"
    elif out.exit_code == 2 and len(out.stderr_lines) != 1:
        kind, problem = "lines", f"{len(out.stderr_lines)} lines on stderr: {out.stderr[-1500:]}"
    elif out.exit_code == 0 and case.must_fail:
        kind, problem = "silent", f"accepted although {case.must_fail}"
    else:
        kind, problem = ("refused" if out.exit_code == 2 else "ran"), None
    fuzz_tally.record(case.category, kind)
    return None if problem is None else f"{kind}: {case.category} ({case.must_fail}): {problem}"


def test_multi_seed_report_given_a_hostile_report():
    run_surface(fuzz_benchmarks.report_cases(), 16, check)


def test_whatif_export_given_a_hostile_table():
    run_surface(fuzz_benchmarks.whatif_cases(), 12, check)


def test_packaged_table_loaders_given_a_hostile_file():
    run_surface(fuzz_benchmarks.bands_cases(), 12, check)


def test_the_valid_seeds_run():
    """The unmutated inputs the cases start from run (so a refusal is the mutation's doing)."""
    for args, files in fuzz_benchmarks.seeds():
        with tempfile.TemporaryDirectory(prefix="twin-fuzz-") as d:
            for name, data in files.items():
                Path(d, name).write_bytes(data)
            out = fuzz_benchmarks.run_benchmark([a.replace("{d}", d) for a in args], TIMEOUT_S)
        assert out.exit_code == 0 and out.traceback is None, (args, out.stderr)
