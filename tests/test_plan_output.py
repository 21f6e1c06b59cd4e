"""``twin plan``'s printed output for humans (issue 33, round 20, from docs/first-hour.md's leftovers): table
headers that say what they hold with units, the share of requests within the SLO (not called ``goodput``,
which `twin run` prints in requests per second), the cheapest / frontier lines naming the latency metric as
`twin run` does (``TTFT p99``), and progress on stderr only. The CSV / JSON keys are a file format and stay."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner
from plan_cli_helpers import TINY_SCENARIO as SCENARIO, header_cells

from twin.cli import plan_progress
from twin.cli.main import main
from twin.cli.plan_output import CANDIDATE_HEADERS, deployment_headers


@pytest.fixture
def plan_file(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump({"name": "p", "scenario": SCENARIO, "target_rate_per_s": 20,
                                    "search": {"deployment.gpu": ["H100-SXM"]}, "replications": 1}))
    return path


def _plan(plan_file, *extra):
    res = CliRunner().invoke(main, ["plan", str(plan_file), "--backend", "serial", *extra])
    assert res.exit_code == 0, res.output
    return res


def test_the_headers_say_what_they_hold():
    assert CANDIDATE_HEADERS == (
        "#", "GPU", "TP", "max seqs", "max batch tok", "prefix cache", "speculative decoding", "status",
        "max req/s per replica", "CI", "$/h per replica", "$/M out tok at max", "replicas (est.)", "limit above max")
    assert deployment_headers("p99_ttft_ms") == (
        "#", "replicas", "GPU", "TP", "GPUs", "$/h", "meets SLO", "TTFT p99", "TPOT p99",
        "within SLO (% of requests)", "$/M output tok", "limit")
    assert deployment_headers("p99_tpot_ms")[7:9] == ("TPOT p99", "within SLO (% of requests)")   # not twice
    assert deployment_headers("p99.9_e2el_ms")[7:9] == ("E2EL p99.9", "TPOT p99")


def test_a_tiny_plan_prints_the_headers_the_share_within_slo_and_the_cheapest_line(plan_file, wide_console):
    out = _plan(plan_file, "-q").stdout
    assert header_cells(out, "#") == [
        "#", "GPU", "TP", "max seqs", "max batch tok", "prefix cache", "status", "max req/s per replica",
        "95% CI (req/s)", "$/h per replica", "$/M out tok at max", "replicas (est.)", "limit above max"]
    assert header_cells(out, "# ┃ replicas") == list(deployment_headers("p99_ttft_ms"))
    rows = [x for x in out.splitlines() if x.startswith("│ 0 │")]
    assert [r.split("│")[10].strip() for r in rows[1:]] == ["100.0%", "100.0%"]     # a share, not 1.00
    cheapest = next(x for x in out.splitlines() if x.startswith("cheapest:"))
    assert cheapest.startswith("cheapest: 1 x H100-SXM TP1 max_num_seqs=1024 max_num_batched_tokens=16384 "
                               "prefix_caching=on = 1 GPU, $2.99/h, $")
    assert " per million output tokens, TTFT p99 " in cheapest and cheapest.endswith(" ms")
    assert "p99_ttft_ms" not in out and "goodput" not in out
    assert any(x.startswith("frontier ($/h -> TTFT p99): $2.99/h 1x1 H100-SXM -> ") for x in out.splitlines())


def _without_wall_time(stdout: str) -> str:
    return "\n".join(x for x in stdout.splitlines() if " simulations in " not in x)


def test_progress_goes_to_stderr_only_and_quiet_hides_it(plan_file, tmp_path):
    loud = _plan(plan_file, "--json", str(tmp_path / "a.json"))
    quiet = _plan(plan_file, "-q", "--json", str(tmp_path / "b.json"))
    assert loud.stderr == "plan: running simulations (a line every 30 s on stderr; -q hides them)\n"
    assert quiet.stderr == ""
    assert _without_wall_time(loud.stdout).replace("a.json", "b.json") == _without_wall_time(quiet.stdout)
    a, b = (json.loads((tmp_path / n).read_text()) for n in ("a.json", "b.json"))
    assert a.pop("wall_s") >= 0 and b.pop("wall_s") >= 0 and a == b


def test_without_a_terminal_progress_prints_a_line_per_interval(monkeypatch, capsys):
    now = iter([100.0, 105.0, 131.0, 140.0, 162.0])
    with plan_progress.LineProgress("plan", every_s=30, clock=lambda: next(now)) as p:
        task = p.add_task("plan", total=None)
        for n in (4, 4, 1, 2):
            p.advance(task, n)
    assert capsys.readouterr().err.splitlines() == [
        "plan: running simulations (a line every 30 s on stderr; -q hides them)",
        "plan: 8 simulations done, 31 s",
        "plan: 11 simulations done, 62 s"]
    assert capsys.readouterr().out == ""


def test_a_pd_plans_cheapest_and_frontier_lines_name_the_metric(capsys):
    from twin.cli.plan_pd import print_pd_plan

    row = {"config": "1P1D", "gpus": 2, "usd_per_hour": 4.0, "p99_ttft_ms": 120.0, "p99_tpot_ms": 10.0,
           "output_throughput": 500.0, "usd_per_million_output_tokens": 1.0, "passed": True, "reasons": []}
    print_pd_plan({"latency_metric": "p99_ttft_ms", "target_rate_per_s": 4.0, "base_rate_per_s": 2.0,
                   "replications": 1, "criteria": {"slo": {"ttft_ms": {"p99": 500}}}, "rows": [row],
                   "cheapest": row, "frontier": [row], "heldout_bands": {"note": []}})
    lines = capsys.readouterr().out.splitlines()
    assert "| config | GPUs | $/h | TTFT p99 | TPOT p99 | output tok/s | $/M output tok | verdict | limit |" in lines
    assert lines[-2:] == ["cheapest: 1P1D: 2 GPUs, $4.00/h, TTFT p99 120 ms",
                          "frontier ($/h -> TTFT p99): 1P1D $4.00 120 ms"]


def test_a_plans_goodput_criterion_reads_as_a_share_of_requests(plan_file, wide_console):
    out = _plan(plan_file, "-q", "--slo", "ttft_ms=2000", "--goodput", "0.995").stdout
    assert out.splitlines()[0].endswith(' | SLO TTFT ≤ 2000 ms, >= 99.5% of requests within the SLO | '
                                        'router least_outstanding | 1 replication')
    assert "goodput" not in out
