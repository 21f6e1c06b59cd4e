"""``twin sweep``'s printed output for humans (issue 33, round 20, 33zb's leftovers): the table's headers in
`twin run`'s words with units (the CSV / Parquet keep their keys: a file format, docs/result-formats.md),
progress on stderr only, and plan's counted nouns / SLO-miss reasons in `twin run`'s metric names."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from plan_cli_helpers import TINY_SCENARIO as SCENARIO, header_cells

from twin.cli.main import main
from twin.cli.plan_output import sweep_header


@pytest.fixture
def scenario_file(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    return path


def _sweep(scenario_file, *extra):
    res = CliRunner().invoke(main, ["sweep", str(scenario_file), "--grid", "server.max_num_seqs=4,64",
                                    "--grid", "rate=5,40", "--backend", "serial", *extra])
    assert res.exit_code == 0, res.output
    return res


def test_a_sweep_column_header_is_a_knob_as_typed_or_a_metric_in_twin_runs_words():
    assert sweep_header("server.max_num_seqs", ["server.max_num_seqs"]) == "server.max_num_seqs"
    assert [sweep_header(k) for k in ("offered_rate_per_s", "status", "passed", "request_throughput",
                                      "p99_ttft_ms", "p99_tpot_ms", "p99_e2el_ms",
                                      "usd_per_million_output_tokens")] == [
        "offered rate (req/s)", "status", "meets SLO", "request throughput (req/s)", "TTFT p99", "TPOT p99",
        "E2EL p99", "$/M output tok"]


def test_a_tiny_sweep_prints_human_headers_and_keeps_the_file_keys(scenario_file, tmp_path, wide_console):
    out = _sweep(scenario_file, "-q", "--summary-out", str(tmp_path / "s.csv")).stdout
    assert header_cells(out, "server") == [
        "server.max_num_seqs", "offered rate (req/s)", "status", "meets SLO", "request throughput (req/s)",
        "TTFT p99", "TPOT p99", "E2EL p99", "$/M output tok", "limit"]
    assert "p99_ttft_ms" not in out and "rate/s" not in out
    keys = list(pd.read_csv(tmp_path / "s.csv").columns)
    for key in ("server.max_num_seqs", "offered_rate_per_s", "status", "passed", "request_throughput",
                "p99_ttft_ms", "p99_tpot_ms", "p99_e2el_ms", "usd_per_million_output_tokens"):
        assert key in keys


def _without_counts(stdout: str) -> str:
    return "\n".join(x for x in stdout.splitlines() if not x.startswith("wrote "))


def test_sweep_progress_goes_to_stderr_only_and_quiet_hides_it(scenario_file, tmp_path):
    loud = _sweep(scenario_file, "--summary-out", str(tmp_path / "a.csv"))
    quiet = _sweep(scenario_file, "-q", "--summary-out", str(tmp_path / "b.csv"))
    assert loud.stderr == "sweep: running simulations (a line every 30 s on stderr; -q hides them)\n"
    assert quiet.stderr == ""
    assert _without_counts(loud.stdout) == _without_counts(quiet.stdout)
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()


def test_counts_take_their_noun_in_the_right_number():
    from twin.results.numbers import counted

    assert [counted(n, "GPU") for n in (0, 1, 2, 9)] == ["0 GPUs", "1 GPU", "2 GPUs", "9 GPUs"]
    assert counted(1, "replication") == "1 replication"


def test_a_sweep_of_one_rate_and_one_replication_says_so_in_the_singular(scenario_file):
    res = CliRunner().invoke(main, ["sweep", str(scenario_file), "--grid", "server.max_num_seqs=4,64",
                                    "--backend", "serial", "-q"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0] == "2 configurations x 1 rate x 1 replication = 2 runs at most | backend serial"
    assert "2 simulations run" in lines


def test_a_pd_plans_cheapest_line_counts_one_gpu_in_the_singular(capsys):
    from twin.cli.plan_pd import print_pd_plan

    row = {"config": "1P0D", "gpus": 1, "usd_per_hour": 2.0, "p99_ttft_ms": 120.0, "p99_tpot_ms": 10.0,
           "output_throughput": 500.0, "usd_per_million_output_tokens": 1.0, "passed": True, "reasons": []}
    print_pd_plan({"latency_metric": "p99_ttft_ms", "target_rate_per_s": 4.0, "base_rate_per_s": 2.0,
                   "replications": 1, "criteria": {"slo": {"ttft_ms": {"p99": 500}}}, "rows": [row],
                   "cheapest": row, "frontier": [row], "heldout_bands": {"note": []}})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("P/D plan at 4.00 req/s (the scenario offers 2.00 req/s), 1 replication, SLO")
    assert "cheapest: 1P0D: 1 GPU, $2.00/h, TTFT p99 120 ms" in lines


def test_a_reason_for_missing_the_slo_reads_in_twin_runs_words():
    from twin.cli.plan_words import human_reason

    assert human_reason("p99_ttft_ms = 55.9 s") == "TTFT p99 = 55.9 s"
    assert human_reason("p99.9_e2el_ms = 812 ms") == "E2EL p99.9 = 812 ms"
    assert human_reason("mean_tpot_ms undefined") == "TPOT mean undefined"
    assert human_reason("median_itl_ms missed") == "ITL p50 missed"
    assert human_reason("goodput fraction 0.9812 < 0.995") == \
        "within SLO 98.12% of requests, below the 99.5% required"
    for prose in ("3 requests still in flight when the run stopped", "2 of 40 requests rejected (never fit)",
                  "no request completed", "no price for A100"):
        assert human_reason(prose) == prose


def test_a_pd_plans_verdict_names_the_missed_metric_and_its_json_keeps_the_key(tmp_path):
    import json

    from tests.test_pd_plan import DATA

    path = tmp_path / "pd.yaml"
    path.write_text(yaml.safe_dump({"name": "pd", "description": "test", **DATA}))
    out = tmp_path / "plan.json"
    res = CliRunner().invoke(main, ["plan", str(path), "--search", "disaggregation.prefill.replicas=1,2",
                                    "--search", "disaggregation.decode.replicas=1", "--replications", "1",
                                    "--price", "A100-SXM-80GB=2", "--backend", "serial", "-q", "--json", str(out)])
    assert res.exit_code == 0, res.output
    row = next(x for x in res.stdout.splitlines() if x.startswith("| 1P1D |"))
    assert row.endswith(" | misses: TTFT p99 = 2.18 s | max_num_batched_tokens in the prefill pool |")
    assert "p99_ttft_ms" not in row
    assert json.loads(out.read_text())["rows"][0]["reasons"] == ["p99_ttft_ms = 2.18 s"]


def test_a_plans_first_line_counts_one_candidate_and_one_replication_in_the_singular(tmp_path, wide_console):
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump({"name": "p", "scenario": SCENARIO, "target_rate_per_s": 20,
                                    "search": {"deployment.gpu": ["H100-SXM"]}, "replications": 1}))
    res = CliRunner().invoke(main, ["plan", str(path), "--backend", "serial", "-q"])
    assert res.exit_code == 0, res.output
    first = res.stdout.splitlines()[0]
    assert "| 1 candidate (1 feasible) |" in first and first.endswith(" | 1 replication")
