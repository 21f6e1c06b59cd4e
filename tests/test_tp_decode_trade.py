"""benchmarks/tp_decode_trade.py: each candidate's step time per unit, the least-squares fit recovering known
values (and refusing a design that cannot separate them), the first-order shift, per-model and per-(family, TP)
summaries, the batch and context of a run, a fold's residuals, hostile options (exact, no simulation)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmark_module import load_benchmark
from twin.errors import TwinInputError
from twin.fitting.measured_run import LengthSample

ROOT = Path(__file__).resolve().parents[1]
trade = load_benchmark("tp_decode_trade")
PARTS = {"weight_read_s": 8.0, "linear_compute_s": 2.0, "kv_read_s": 0.5, "attention_compute_s": 0.1,
         "kv_write_s": 0.0, "allreduce_s": 4.0, "overhead_s": 2.0, "total_s": 16.6}


def row(model="llama-2-70b", layers=80, tp=4, measured=18.0, twin=17.5, family="llama"):
    return {"model": model, "family": family, "layers": layers, "tp": tp, "parts": dict(PARTS),
            "measured_ms": measured, "twin_ms": twin, "allreduce_bytes_ms": 0.25 if tp > 1 else 0.0, "name": f"{model}/stage0", "source": "inference-perf"}


def test_features_are_the_step_time_of_one_unit():
    r70, r34, r7 = row(), row("codellama-34b", 48, 2), row("llama-2-7b", 32, 1)
    assert trade.feature_ms("step_ms", r70) == 1.0
    assert trade.feature_ms("layer_us", r70) == pytest.approx(0.080, abs=1e-15)
    assert trade.feature_ms("allreduce_us", r70) == pytest.approx(0.160, abs=1e-15)
    assert trade.feature_ms("allreduce_us", r7) == 0.0                       # TP 1: no all-reduce
    assert trade.feature_ms("allreduce_ring_hop_us", r70) == pytest.approx(0.160 * 6, abs=1e-15)
    assert trade.feature_ms("allreduce_ring_hop_us", r34) == pytest.approx(0.096 * 2, abs=1e-15)
    assert trade.feature_ms("allreduce_log2_us", r70) == pytest.approx(0.160 * 2, abs=1e-15)
    assert trade.feature_ms("allreduce_log2_us", r34) == pytest.approx(0.096, abs=1e-15)
    assert trade.feature_ms("kv_time_fraction", r70) == pytest.approx(0.6, abs=1e-15)
    assert trade.feature_ms("weight_time_fraction", r70) == pytest.approx(10.0, abs=1e-15)
    assert trade.feature_ms("allreduce_bytes_fraction", r70) == 0.25 and trade.feature_ms("allreduce_bytes_fraction", r7) == 0
    with pytest.raises(TwinInputError):
        trade.feature_ms("nonsense", r70)


def test_every_candidate_names_known_features():
    for features in trade.CANDIDATES.values():
        for f in features:
            trade.feature_ms(f, row())


def synthetic(hop_us: float, allreduce_us: float) -> list[dict]:
    """Rows whose residual is exactly ``hop_us`` per ring hop plus ``allreduce_us`` per all-reduce."""
    out = []
    for model, layers, tp in (("llama-2-70b", 80, 4), ("codellama-34b", 48, 2), ("mixtral-8x7b", 32, 2),
                              ("llama-2-7b", 32, 1), ("llama-2-70b", 80, 4)):
        r = row(model, layers, tp, measured=20.0)
        r["twin_ms"] = 20.0 - (hop_us * 2 * layers * 2 * (tp - 1) + allreduce_us * (2 * layers if tp > 1 else 0)) / 1e3
        out.append(r)
    return out


def test_fit_recovers_known_values_and_closes_the_trade():
    rows = synthetic(3.0, -14.8)
    fit = trade.fit_candidate(rows, "ring_hop + allreduce_us")
    assert fit["identified"] and fit["features"] == ["allreduce_ring_hop_us", "allreduce_us"]
    assert fit["values"] == pytest.approx([3.0, -14.8], abs=1e-9)
    assert fit["rms_after_ms"] == pytest.approx(0.0, abs=1e-9) and fit["rms_before_ms"] > 0.1
    for r in rows:
        assert trade.shifted_ms(r, fit) == pytest.approx(r["measured_ms"], abs=1e-9)
    assert trade.trade(trade.model_means(rows, fit)) == pytest.approx(0.0, abs=1e-12)
    assert trade.trade(trade.model_means(rows)) < -0.01                     # before: the 70B short of the 34B


def test_a_design_that_cannot_separate_its_features_is_not_identified():
    rows = [row("llama-2-7b", 32, 1, twin=17.0 + i) for i in range(5)]     # TP 1 only: no all-reduce anywhere
    fit = trade.fit_candidate(rows, "allreduce_us")
    assert not fit["identified"] and fit["values"] is None and fit["rms_after_ms"] is None
    assert trade.shifted_ms(rows[0], fit) == rows[0]["twin_ms"]
    assert not trade.fit_candidate(rows[:2], "layer_us")["identified"]      # no more rows than features


def test_model_means_trade_and_family_tp_medians():
    rows = [row(measured=20.0, twin=19.0), row(measured=20.0, twin=19.5),
            row("codellama-34b", 48, 2, measured=10.0, twin=11.0)]
    means = trade.model_means(rows)
    assert means == pytest.approx({"codellama-34b": 0.1, "llama-2-70b": -0.0375}, abs=1e-12)
    assert trade.trade(means) == pytest.approx(-0.1375, abs=1e-12)
    assert trade.trade({"llama-2-70b": 0.0}) is None
    assert trade.by_family_tp(rows) == {"llama TP 2": (1, pytest.approx(0.1)), "llama TP 4": (2, pytest.approx(-0.0375))}


def test_stage_batch_is_littles_law_else_the_concurrency_and_the_mean_context():
    lengths = SimpleNamespace(prompt_tokens=LengthSample(values=(500, 700)),
                              output_tokens=LengthSample(quantiles=((0.0, 200.0), (1.0, 200.0))))
    run = SimpleNamespace(name="x", metrics={"request_throughput": 20.0, "mean_e2el_ms": 5577.5},
                          max_concurrency=None, **vars(lengths))
    assert trade.stage_batch(run) == (112, pytest.approx(700.0, abs=1e-9))
    run.metrics, run.max_concurrency = {}, 64
    assert trade.stage_batch(run)[0] == 64
    run.max_concurrency = None
    with pytest.raises(TwinInputError):
        trade.stage_batch(run)
    ramp = LengthSample(quantiles=((0.0, 0.0), (1.0, 100.0)))
    assert trade.mean_length(ramp) == pytest.approx(50.0, abs=1e-9)


def test_fold_cases_take_the_folds_held_out_tpot():
    cases = [{"name": "a", "measured": {"mean_tpot_ms": 10.0}, "predicted": {"mean_tpot_ms": 11.0}},
             {"name": "b", "measured": {"mean_tpot_ms": 10.0}, "predicted": {"mean_tpot_ms": 9.0}}]
    out = trade.fold_cases(cases, {"a": {"mean_tpot_ms": -0.05}})
    assert [c["name"] for c in out] == ["a"] and out[0]["predicted"]["mean_tpot_ms"] == pytest.approx(9.5)
    assert cases[0]["predicted"]["mean_tpot_ms"] == 11.0                   # the input is not changed
    with pytest.raises(TwinInputError):
        trade.fold_cases(cases, {"zzz": {"mean_tpot_ms": 0.0}})


@pytest.mark.parametrize("args, words", [
    ([], "--defaults"),
    (["--defaults", "x.json", "--fold", "source:inference-perf"], "--report and --fold go together"),
    (["--defaults", "missing.json"], "missing.json"),
])
def test_hostile_options_are_one_line(tmp_path, args, words):
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "tp_decode_trade.py"), *args],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert words in proc.stderr.strip().splitlines()[-1]                 # the error is its last line
