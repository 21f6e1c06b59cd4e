"""benchmarks/llama70b_stage1_tail.py: Little's law on a stage, one simulation's summary, the elasticity, the
share of draws reaching the measured value, the step-scaling and slot-holding trial wrappers, and hostile options
(exact, no simulation)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from benchmark_module import load_benchmark
from twin.core.scheduler_config import SchedulerConfig
from twin.errors import TwinInputError

ROOT = Path(__file__).resolve().parents[1]
tail = load_benchmark("llama70b_stage1_tail")


def test_slots_in_use_is_littles_law():
    busy, occupancy = tail.slots_in_use(20.0, 5577.5, 128)
    assert busy == pytest.approx(111.55, abs=1e-12) and occupancy == pytest.approx(111.55 / 128, abs=1e-15)
    for bad in ((0.0, 5577.5, 128), (20.0, -1.0, 128), (20.0, 5577.5, 0), (float("nan"), 1.0, 1)):
        with pytest.raises(TwinInputError) as err:
            tail.slots_in_use(*bad)
        assert "\n" not in str(err.value)


def test_summarize_exact():
    ttft_s = np.array([0.05, 0.06, 0.07, 0.20, 1.00])
    e2e_s = np.array([5.0, 5.0, 5.5, 6.0, 6.5])
    got = tail.summarize(ttft_s, e2e_s, 22.0, 20.0, 128)
    assert got["mean_ttft_ms"] == pytest.approx(276.0)
    assert got["p50_ttft_ms"] == pytest.approx(70.0)
    assert got["p90_ttft_ms"] == pytest.approx(680.0)        # numpy's linear interpolation: 200 + 0.6 x 800
    assert got["over_100ms"] == pytest.approx(0.4)
    assert got["mean_tpot_ms"] == 22.0 and got["mean_e2el_ms"] == pytest.approx(5600.0)
    assert got["slots_in_use"] == pytest.approx(112.0) and got["occupancy"] == pytest.approx(112.0 / 128)


def test_elasticity_and_its_refusals():
    assert tail.elasticity((100.0, 20.0), (110.0, 22.0)) == pytest.approx(1.0)
    assert tail.elasticity((80.0, 21.0), (120.0, 22.0)) == pytest.approx(math.log(1.5) / math.log(22 / 21))
    for base, other in (((100.0, 20.0), (110.0, 20.0)), ((0.0, 20.0), (1.0, 21.0))):
        with pytest.raises(TwinInputError):
            tail.elasticity(base, other)


def test_share_at_least():
    assert tail.share_at_least([60.0, 121.3, 150.0, 90.0], 121.3) == 0.5
    with pytest.raises(TwinInputError):
        tail.share_at_least([], 1.0)


def test_pooled_means_and_range():
    got = tail.pooled([{"mean_ttft_ms": 60.0, "mean_tpot_ms": 21.0}, {"mean_ttft_ms": 100.0, "mean_tpot_ms": 22.0}])
    assert got == {"mean_ttft_ms": 80.0, "mean_tpot_ms": 21.5, "mean_ttft_ms_min": 60.0, "mean_ttft_ms_max": 100.0}


def test_variants_list():
    assert tail.variants([1.0, 1.03], 1024, 128) == [("steps x1", 1.0, 128), ("steps x1.03", 1.03, 128),
                                                     ("steps x1, max_num_seqs 1024", 1.0, 1024)]
    assert tail.variants([1.03], 1024, 128, [128, 125]) == [("steps x1.03", 1.03, 128),
                                                            ("steps x1.03, max_num_seqs 125", 1.03, 125),
                                                            ("steps x1, max_num_seqs 1024", 1.0, 1024)]


def test_scaled_steps_scale_time_and_explain():
    inner = SimpleNamespace(name="r", request_path_s=0.004, request_path_jitter_s=0.001,
                            step_time_s=lambda step: 0.020, explain=lambda step: {"a_s": 0.015, "total_s": 0.020})
    scaled = tail.ScaledSteps(inner, 1.5)
    assert scaled.step_time_s(None) == pytest.approx(0.030)
    assert scaled.explain(None) == pytest.approx({"a_s": 0.0225, "total_s": 0.030})
    assert (scaled.name, scaled.request_path_s, scaled.request_path_jitter_s) == ("r", 0.004, 0.001)


def test_holding_slots_counts_last_steps_finished_while_admitting():
    config = SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=64, async_scheduling=True,
                             async_free_after_next_schedule=True)
    seen = []
    sched = SimpleNamespace(config=config, free_after_schedule=[])
    sched.schedule_waiting = lambda *a: seen.append(sched.config.max_num_seqs) or a[1]
    tail.holding_slots(sched)
    assert sched.schedule_waiting(None, 64, [], [], False) == 64           # nothing held: the cap as configured
    sched.free_after_schedule = ["r1", "r2", "r3"]                          # three finished in the last step
    assert sched.schedule_waiting(None, 32, [], [], False) == 32
    assert seen == [8, 5] and sched.config is config                         # restored after the call


def test_simulate_stage_refuses_an_unknown_hold():
    with pytest.raises(TwinInputError) as err:
        tail.simulate_stage(None, {}, scale=1.0, max_num_seqs=128, seed=0, hold="forever")
    assert "none, blocks, slots" in str(err.value)


def _last_line(*args: str) -> tuple[int, str]:
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "llama70b_stage1_tail.py"), *args],
                         capture_output=True, text=True, timeout=120)
    assert "Traceback" not in res.stderr, res.stderr
    return res.returncode, res.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("args, message", [
    (("--seeds", "0,x"), "--seeds '0,x': 'x' is not a whole number"),
    (("--seeds", "1,1"), "--seeds, --scales and --caps: give each value once"),
    (("--caps", "125,125"), "--seeds, --scales and --caps: give each value once"),
    (("--caps", "0"), "--caps '0': '0': must be >= 1"),
    (("--scales", "0"), "--scales '0': '0': must be > 0"),
    (("--scales", "nan"), "--scales 'nan': 'nan' is not a finite number"),
    (("--fold", "GPU:H100-SXM"), "--report and --fold go together"),
    (("--uncapped-seqs", "0"), "argument --uncapped-seqs: '0': must be >= 1"),
    (("--hold", "forever"), "argument --hold: invalid choice: 'forever'"),
    (("--stage", "gpt"), "argument --stage: invalid choice: 'gpt'")])
def test_hostile_options_are_one_line(args, message):
    rc, line = _last_line(*args)
    assert rc != 0 and message in line
