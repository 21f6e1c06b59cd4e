"""Fuzz the ``twin`` command line with malformed inputs: mutated scenarios and ``--set`` overrides, traces in
the four formats, calibration profiles, bench results, sweep grids and plan files (``fuzz_scenarios``,
``fuzz_traces``, ``fuzz_files``, ``fuzz_grids``), and every result format ``twin calibrate --from-results``
reads, Hugging Face ``config.json`` models and GPU spec files (``fuzz_results``), hostile files in place of
every file a command reads and hostile option values (``fuzz_product``). The dashboard's upload path is fuzzed
in-process by ``test_fuzz_upload``.

Every case runs the real CLI entry under a time and memory bound (``fuzz_runner``) and must end in exit 0
or exit 2 with one line on stderr: never a traceback, never a hang, never an out-of-memory error (the child's
address space is capped), and never exit 0 for an input the design says is invalid (a silent acceptance).
Every case of a surface runs (a finding does not stop the rest), so the summary counts per surface are
complete; then the surface's test fails on any finding. ``TWIN_FUZZ_LOG=file.jsonl`` writes each finding.

CI runs a fixed corpus (hypothesis derandomized, no example database: the same cases on every machine) of
``TWIN_FUZZ_EXAMPLES`` cases per surface (the defaults below: about 300 cases, about 50 s on 2 shared
cores). A longer local run::

    TWIN_FUZZ_EXAMPLES=2000 TWIN_HYPOTHESIS_RANDOM=1 python -m pytest -q -p no:cacheprovider tests/fuzz
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings

import fuzz_files
import fuzz_grids
import fuzz_product
import fuzz_results
import fuzz_round22
import fuzz_round23_layout
import fuzz_scenarios
import fuzz_traces
import fuzz_tally
from fuzz_runner import run_cli
from fuzz_values import Case, place


EXAMPLES = int(os.environ.get("TWIN_FUZZ_EXAMPLES", "0"))
TIMEOUT_S = float(os.environ.get("TWIN_FUZZ_TIMEOUT_S", "30"))


def fuzz(default_examples: int):
    return settings(max_examples=EXAMPLES or default_examples, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def check(case: Case) -> None:
    with tempfile.TemporaryDirectory(prefix="twin-fuzz-") as d:
        for name, data in case.files.items():
            place(Path(d, name), data)
        args = [a.replace("{d}", d) for a in case.args]
        out = run_cli(args, TIMEOUT_S)
    shown = " ".join(case.args)
    if out.hung:
        kind, problem = "hang", f"still running after {TIMEOUT_S:g} s"
    elif out.traceback is not None and ("MemoryError" in out.traceback or out.exit_code is None):
        kind, problem = "oom", out.traceback[-3000:]
    elif out.traceback is not None:
        kind, problem = "traceback", out.traceback[-3000:]
    elif out.exit_code not in (0, 2):
        kind, problem = "exit", f"exit status {out.exit_code}: {(out.stdout + out.stderr)[-1500:]}"
    elif out.exit_code == 2 and len(out.stderr_lines) != 1:
        kind, problem = "lines", f"{len(out.stderr_lines)} lines on stderr: {out.stderr[-1500:]}"
    elif out.exit_code == 0 and case.must_fail:
        kind, problem = "silent", f"accepted although {case.must_fail}"
    else:
        kind, problem = ("refused" if out.exit_code == 2 else "ran"), None
    fuzz_tally.record(case.category, kind)
    log = os.environ.get("TWIN_FUZZ_LOG")   # every finding as a JSON line, for sorting them by cause
    if log and problem is not None:
        import base64
        import json

        files = {n: base64.b64encode(b[:65536] if isinstance(b, bytes) else b.encode()).decode()
                 for n, b in case.files.items()}
        with open(log, "a") as fh:
            fh.write(json.dumps({"category": case.category, "kind": kind, "args": shown, "problem": problem,
                                 "must_fail": case.must_fail, "files": files})
                     + "\n")
    return None if problem is None else f"{kind}: twin {shown}: {problem}"


def run_surface(strategy, default_examples: int, check_case=None) -> None:
    """Every case of ``strategy`` checked by ``check_case`` (default: ``check``, the CLI's), all of them so the
    counts are complete, then fail on any finding."""
    problems: list[str] = []

    @fuzz(default_examples)
    @given(strategy)
    def one(case):
        problem = (check_case or check)(case)
        if problem is not None:
            problems.append(problem)

    one()
    assert not problems, f"{len(problems)} findings; the first: {problems[0]}"


def test_mutated_scenarios():
    run_surface(fuzz_scenarios.scenario_cases(), 30)


def test_set_overrides():
    run_surface(fuzz_scenarios.set_cases(), 25)


def test_csv_traces():
    run_surface(fuzz_traces.csv_trace_cases(), 35)


def test_mooncake_traces():
    run_surface(fuzz_traces.mooncake_cases(), 15)


def test_profiles():
    run_surface(fuzz_files.profile_cases(), 15)


def test_bench_results():
    run_surface(fuzz_files.bench_cases(), 20)


def test_sweep_grids():
    run_surface(fuzz_grids.sweep_cases(), 12)


def test_plan_files():
    run_surface(fuzz_grids.plan_cases(), 8)


def test_vllm_bench_results():
    run_surface(fuzz_results.bench_result_cases(), 20)


def test_guidellm_reports():
    run_surface(fuzz_results.guidellm_cases(), 12)


def test_inference_perf_folders():
    run_surface(fuzz_results.inference_perf_cases(), 10)


def test_inference_perf_request_files():
    run_surface(fuzz_results.inference_perf_request_cases(), 10)


def test_request_tables():
    run_surface(fuzz_results.table_cases(), 15)


def test_model_configs():
    run_surface(fuzz_results.model_config_cases(), 15)


def test_gpu_spec_files():
    run_surface(fuzz_results.gpu_spec_cases(), 6)


def test_hostile_files_in_place_of_the_twins_own():
    run_surface(fuzz_product.file_cases(), 40)


def test_hostile_option_values():
    run_surface(fuzz_product.option_cases(), 20)


def test_round22_result_server_keys():
    run_surface(fuzz_round22.server_key_cases(), 20)


def test_round22_diagnose_run_names():
    run_surface(fuzz_round22.run_name_cases(), 12)


def test_round22_profile_fitted_on():
    run_surface(fuzz_round22.fitted_on_cases(), 10)


def test_round22_exp_config():
    run_surface(fuzz_round22.exp_config_cases(), 10)


def test_round22_aiperf_records():
    run_surface(fuzz_round22.aiperf_cases(), 12)


def test_round22_guidellm_read_by_diagnose():
    run_surface(fuzz_round22.guidellm_diagnose_cases(), 8)


def test_the_valid_seeds_of_every_category_run():
    """The unmutated inputs the cases start from run (so a refusal is the mutation's doing)."""
    import json

    import yaml

    base = yaml.safe_dump(fuzz_scenarios.BASE_SCENARIO).encode()
    for args, files in [
        (["run", "{d}/s.yaml", "-q"], {"s.yaml": base}),
        (["run", "{d}/s.yaml", "-q"], {"p.json": json.dumps(fuzz_files.PROFILE).encode(),
                                       "s.yaml": yaml.safe_dump(fuzz_files.PROFILE_SCENARIO).encode()}),
        (["plan", "{d}/plan.yaml", "--backend", "serial", "-q"],
         {"plan.yaml": yaml.safe_dump(fuzz_grids.PLAN_BASE).encode(), "s.yaml": base}),
        *fuzz_results.seeds(),
        *fuzz_round22.seeds(),
    ]:
        with tempfile.TemporaryDirectory(prefix="twin-fuzz-") as d:
            for name, data in files.items():
                Path(d, name).parent.mkdir(parents=True, exist_ok=True)
                Path(d, name).write_bytes(data)
            out = run_cli([a.replace("{d}", d) for a in args], TIMEOUT_S)
        assert out.exit_code == 0 and out.traceback is None, (args, out.stderr, out.traceback)


# round 23 (33zF): the layout keys of a result JSON, read by calibrate with no other option
def test_round23_result_layout_keys():
    run_surface(fuzz_round23_layout.layout_key_cases(), 20)


def test_round23_valid_layout_seeds_run():
    for args, files in fuzz_round23_layout.seeds():
        with tempfile.TemporaryDirectory(prefix="twin-fuzz-") as d:
            for name, data in files.items():
                place(Path(d, name), data)
            out = run_cli([a.replace("{d}", d) for a in args], TIMEOUT_S)
        assert out.exit_code == 0 and out.traceback is None, (args, out.stderr, out.traceback)


# round 23 (33zJ): every other server knob of a result JSON and server_start, read by calibrate with no other option
def test_round23_result_knob_keys():
    run_surface(fuzz_round23_layout.knob_key_cases(), 20)
