"""Speculative decoding acceptance from what a server exposes: vLLM's /metrics text dump (per-position accepted
counters and drafts, summed over engines, a before-dump subtracted) and `vllm bench serve`'s acceptance fields,
read into per-position rates that a scenario's ``speculative_decoding.acceptance`` replays."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from twin.cli.main import main
from twin.errors import TwinInputError
from twin.fitting.readers.spec_counters import read_acceptance
from twin.spec_decode.config import AcceptanceConfig


def dump(drafts: dict[str, float], per_pos: dict[tuple[str, int], float]) -> str:
    lines = ["# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.",
             "# TYPE vllm:spec_decode_num_drafts_total counter"]
    for engine, v in drafts.items():
        lines.append(f'vllm:spec_decode_num_drafts_total{{engine="{engine}",model_name="m"}} {v}')
        lines.append(f'vllm:spec_decode_num_drafts_created{{engine="{engine}",model_name="m"}} 1.7e9')
    lines.append("# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter")
    for (engine, pos), v in per_pos.items():
        lines.append(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="{engine}",model_name="m",'
                     f'position="{pos}"}} {v}')
    lines.append('vllm:num_requests_running{engine="0",model_name="m"} 3.0')
    return "\n".join(lines) + "\n"


def test_metrics_dump_sums_engines_and_gives_per_position_rates(tmp_path):
    p = tmp_path / "after.txt"
    p.write_text(dump({"0": 600.0, "1": 400.0}, {("0", 0): 420.0, ("1", 0): 280.0, ("0", 1): 300.0,
                                                  ("1", 1): 180.0, ("0", 2): 200.0, ("1", 2): 130.0}))
    acc = read_acceptance(p)
    assert acc.num_drafts == 1000.0 and acc.accepted_per_position == (700.0, 480.0, 330.0)
    assert acc.rates == (0.7, 0.48, 0.33) and acc.mean_acceptance_length == pytest.approx(2.51, abs=1e-12)
    # the entry replays in a scenario as the same rates
    cfg = AcceptanceConfig.model_validate(acc.scenario_entry())
    assert cfg.measured_rates() == pytest.approx([0.7, 0.48, 0.33], abs=1e-12)


def test_before_dump_is_subtracted(tmp_path):
    (tmp_path / "before.txt").write_text(dump({"0": 100.0}, {("0", 0): 90.0, ("0", 1): 60.0}))
    (tmp_path / "after.txt").write_text(dump({"0": 300.0}, {("0", 0): 190.0, ("0", 1): 110.0}))
    acc = read_acceptance(tmp_path / "after.txt", tmp_path / "before.txt")
    assert (acc.num_drafts, acc.accepted_per_position, acc.rates) == (200.0, (100.0, 50.0), (0.5, 0.25))


def test_vllm_bench_serve_acceptance_fields(tmp_path):
    doc = {"completed": 10, "request_throughput": 1.0, "mean_ttft_ms": 20.0, "spec_decode_acceptance_rate": 51.0,
           "spec_decode_acceptance_length": 2.53, "spec_decode_num_drafts": 2000,
           "spec_decode_per_position_acceptance_rates": [0.75, 0.5, 0.28]}
    (tmp_path / "b.json").write_text(json.dumps(doc))
    acc = read_acceptance(tmp_path / "b.json")
    assert acc.rates == pytest.approx((0.75, 0.5, 0.28), abs=1e-12) and acc.num_drafts == 2000
    assert acc.accepted_per_position == pytest.approx((1500.0, 1000.0, 560.0))


@pytest.mark.parametrize("text, message", [
    (dump({"0": 10.0}, {("0", 0): 8.0, ("0", 2): 3.0}), 'has no position="1"'),
    (dump({"0": 10.0}, {("0", 0): 5.0, ("0", 1): 6.0}), "accepted_per_position[1]: must be in [0, 5]"),
    (dump({"0": 10.0}, {("0", 0): 11.0}), "accepted_per_position[0]: must be in [0, 10]"),
    (dump({"0": 0.0}, {("0", 0): 0.0}), "num_drafts: must be > 0"),
    ('vllm:spec_decode_num_drafts_total{engine="0"} lots\n', "= 'lots': not a number"),
    ('vllm:spec_decode_num_drafts_total{engine="0"} -3\n', "a counter is a finite number >= 0"),
    ("vllm:num_requests_running 3\n", "no vllm:spec_decode_num_drafts_total"),
])
def test_broken_dumps_are_one_line(tmp_path, text, message):
    p = tmp_path / "m.txt"
    p.write_text(text)
    with pytest.raises(TwinInputError) as exc:
        read_acceptance(p)
    assert message in str(exc.value) and "m.txt" in str(exc.value) and "\n" not in str(exc.value)


def test_counters_going_down_between_dumps(tmp_path):
    (tmp_path / "before.txt").write_text(dump({"0": 500.0}, {("0", 0): 300.0}))
    (tmp_path / "after.txt").write_text(dump({"0": 100.0}, {("0", 0): 60.0}))
    with pytest.raises(TwinInputError, match="a counter went down between the dumps"):
        read_acceptance(tmp_path / "after.txt", tmp_path / "before.txt")


def test_bench_result_without_acceptance_says_so(tmp_path):
    (tmp_path / "b.json").write_text(json.dumps({"completed": 3, "request_throughput": 1.0}))
    with pytest.raises(TwinInputError, match="missing field spec_decode_per_position_acceptance_rates"):
        read_acceptance(tmp_path / "b.json")


def test_cli_prints_rates_and_the_scenario_entry(tmp_path):
    (tmp_path / "after.txt").write_text(dump({"0": 1000.0}, {("0", 0): 700.0, ("0", 1): 480.0}))
    r = CliRunner().invoke(main, ["calibrate", "--acceptance", str(tmp_path / "after.txt")], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "0.700, 0.480" in r.output
    assert "accepted_per_position: [700, 480]" in r.output
    r = CliRunner().invoke(main, ["calibrate", "--acceptance-before", str(tmp_path / "after.txt")])
    assert r.exit_code == 2 and "goes with --acceptance" in r.output
