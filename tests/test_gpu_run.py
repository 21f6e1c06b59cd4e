"""The GPU run's dry run on the CPU (``python -m calibration.gpu_run --device cpu --tiny``): every phase end
to end on the tiny model, the report's figures computed from its own rows, the time limit's clear stop, bad
options. The GPU itself is exercised by the same command without ``--tiny`` (issue 18)."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from calibration.gpu_run import main, model_tag  # noqa: E402
from calibration.heldout import HEADLINE_METRICS, LOADS  # noqa: E402
from twin.cost.profile import ProfileCostModel  # noqa: E402


@pytest.fixture(autouse=True)
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_dry_run_exercises_every_phase(tmp_path, capsys):
    rc = main(["--device", "cpu", "--tiny", "--budget", "1.5", "--validation-budget", "3", "--out-dir",
               str(tmp_path)])
    assert rc == 0, capsys.readouterr()
    for suffix in (".json", ".samples.json", ".report.json", ".report.md"):
        assert (tmp_path / f"cpu-tiny-llama{suffix}").exists(), suffix
    report = json.loads((tmp_path / "cpu-tiny-llama.report.json").read_text())
    assert report["complete"] is True and report["stopped"] == []
    assert list(report["phases_s"]) == ["set-up", "decode check", "prefill check", "calibration",
                                        "held-out validation"]
    assert report["cuda_graphs"] is True and report["environment"]["cuda_graphs"] is True
    # the decode check: the CPU catalog entry's 15 GB/s gives the bound; the ratio is the first row's
    check = report["decode_check"]
    assert check["weight_bound_s"] == pytest.approx(check["weight_read_bytes"] / 15.0e9)
    assert check["ratio"] == pytest.approx(check["rows"][0]["wall_median_s"] / check["weight_bound_s"])
    assert check["target_ratio"] == 1.3 and check["within_target"] in (True, False)
    assert check["eager_wall_median_s"] > 0
    # three held-out loads, each with an error for throughput, TTFT and TPOT and a step-time error
    loads = report["validation"]["loads"]
    assert [row["load"] for row in loads] == list(LOADS)
    rates = [row["offered_rate_per_s"] for row in loads]
    assert rates == sorted(rates) and rates[0] > 0
    for row in loads:
        assert set(row["errors"]) == set(HEADLINE_METRICS)
        for metric in ("request_throughput", "mean_ttft_ms", "mean_tpot_ms"):
            assert row["errors"][metric] is not None, (row["load"], metric)
        assert row["completed"][0] == row["completed"][1] == row["num_requests"]
        assert row["step_time"]["steps"] > 0
    head = report["headline"]
    assert head["decode_ratio"] == check["ratio"]
    assert head["fit_test_mape"] == pytest.approx(report["fit"]["test"]["mape_pct"] / 100)
    steps = [row["step_time"] for row in loads]
    assert head["heldout_step_mape"] == pytest.approx(sum(s["mape"] * s["steps"] for s in steps)
                                                      / sum(s["steps"] for s in steps))
    assert [h["load"] for h in head["loads"]] == list(LOADS)
    # the profile is one the twin reads
    assert ProfileCostModel(tmp_path / "cpu-tiny-llama.json").profile["device"]["type"] == "cpu"
    md = (tmp_path / "cpu-tiny-llama.report.md").read_text()
    for needle in ("weight-read bound", "held-out step-time MAPE", "| 90% |", "mean TTFT err"):
        assert needle in md, needle


def test_time_limit_stops_clearly_and_still_reports(tmp_path):
    rc = main(["--device", "cpu", "--tiny", "--time-limit", "0.5", "--out-dir", str(tmp_path)])
    assert rc == 3
    report = json.loads((tmp_path / "cpu-tiny-llama.report.json").read_text())
    assert report["complete"] is False
    assert any(s.startswith("calibration skipped") for s in report["stopped"])
    assert report["validation"] is None and report["fit"] is None
    assert "STOPPED EARLY" in (tmp_path / "cpu-tiny-llama.report.md").read_text()


def test_bad_options_exit_2(tmp_path, capsys):
    assert main(["--device", "cpu", "--tiny", "--budget", "0", "--out-dir", str(tmp_path)]) == 2
    assert "--budget must be > 0" in capsys.readouterr().err
    assert main(["--device", "cpu", "--model", "no-such-model", "--out-dir", str(tmp_path)]) == 2
    if not torch.cuda.is_available():
        assert main(["--device", "cuda"]) == 2
        assert "--device cpu --tiny" in capsys.readouterr().err


@pytest.mark.parametrize("name, tag", [("llama-3.1-8b", "8b"), ("llama-3.1-70b", "70b"),
                                       ("tiny-llama", "tiny-llama"), ("Qwen2.5-7B", "7b")])
def test_model_tag(name, tag):
    assert model_tag(name) == tag
