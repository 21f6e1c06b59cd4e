"""The GPU run's dry run on the CPU (``python -m calibration.gpu_run --device cpu --tiny``): every phase end
to end on the tiny model, the report's figures computed from its own rows, the time limit's clear stop, bad
options. The GPU itself is exercised by the same command without ``--tiny`` (issue 18)."""

from __future__ import annotations

import json

import pytest

from twin.errors import TwinInputError

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
    for suffix in (".json", ".samples.json", ".report.json", ".report.md", ".heldout-steps.json"):
        assert (tmp_path / f"cpu-tiny-llama{suffix}").exists(), suffix
    report = json.loads((tmp_path / "cpu-tiny-llama.report.json").read_text())
    assert report["complete"] is True and report["stopped"] == []
    assert list(report["phases_s"]) == ["set-up", "decode check", "prefill check", "first-use check",
                                        "calibration", "held-out validation"]
    # new shapes: a prompt from position 0 and a chunk after a context, each first run against its repeats
    first_use = report["first_use_check"]["rows"]
    assert [(r["context"], r["cudnn_attention"]) for r in first_use] == [(0, False), (512, False)]
    assert all(r["first_s"] > 0 and r["repeat_median_s"] > 0 for r in first_use)
    assert len({r["tokens"] for r in first_use}) == 2
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
    # every held-out step of every load, with what the twin predicted for its shape, in a file of its own
    held = json.loads((tmp_path / "cpu-tiny-llama.heldout-steps.json").read_text())["loads"]
    assert list(held) == [f"{load:g}" for load in LOADS] and "steps" not in loads[0]
    for row in loads:
        rows = held[f"{row['load']:g}"]
        assert len(rows) == row["step_time"]["steps"]
        assert {"n", "c", "wall_s", "predicted_s", "graph", "attention_calls"} <= set(rows[0])
        assert any(r["graph"] for r in rows) and any(not r["graph"] for r in rows)
        assert sum(r["predicted_s"] for r in rows) / len(rows) * 1e3 == pytest.approx(
            row["step_time"]["mean_predicted_ms"])
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


def test_revalidate_reproduces_the_run_when_the_model_is_unchanged(tmp_path):
    """Refitting a run's samples with the cost model it ran with gives its own profile back, and the
    regenerated held-out workloads give the twin's very predictions: every error as the run reported it."""
    from calibration.revalidate import main as revalidate_main, revalidate

    assert main(["--device", "cpu", "--tiny", "--budget", "1.5", "--validation-budget", "3", "--out-dir",
                 str(tmp_path)]) == 0
    stem = tmp_path / "cpu-tiny-llama"
    result = revalidate(stem)
    refit = json.loads((tmp_path / "cpu-tiny-llama.refit.json").read_text())
    ran = json.loads((tmp_path / "cpu-tiny-llama.json").read_text())
    assert refit["cost_model"]["coefficients"] == ran["cost_model"]["coefficients"]
    assert refit["decode_padding"] == ran["decode_padding"] and ran["decode_padding"]["block_size"] == 16
    for row in result["loads"]:
        assert row["errors"] == row["as_run_errors"]
        assert row["step_time"] == pytest.approx(row["as_run_step_time"])
    md = (tmp_path / "cpu-tiny-llama.refit.md").read_text()
    assert "| 90% | refitted |" in md and "| 30% | as run |" in md
    # a run that never reached its validation, a field missing, a field of the wrong type: one line, exit 2
    report = json.loads((tmp_path / "cpu-tiny-llama.report.json").read_text())
    broken_row = {k: v for k, v in report["validation"]["loads"][0].items() if k != "offered_rate_per_s"}
    bad_config = dict(report["validation"]["scheduler_config"], max_num_seqs="many")
    for doc, needle in ((dict(report, validation=None), "holds no held-out loads"),
                        (dict(report, validation=dict(report["validation"], loads=[broken_row])),
                         "'offered_rate_per_s' is missing"),
                        (dict(report, validation=dict(report["validation"], scheduler_config=bad_config)),
                         "scheduler_config")):
        (tmp_path / "cpu-tiny-llama.report.json").write_text(json.dumps(doc))
        with pytest.raises(TwinInputError, match=needle):
            revalidate(stem)
    assert revalidate_main([str(stem)]) == 2
