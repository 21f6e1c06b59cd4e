"""Figure builders: the right traces, downsampled step logs, sensible reductions."""

from __future__ import annotations

import numpy as np
import pytest

from twin.results import figures
from twin.sim.run import run_body
from twin.analysis.causes import StepSplit
from twin.results.records import RequestRecord, StepRecords
from twin.results.sim_result import SimResult
from twin.scenario import load_scenario


@pytest.fixture(scope="module")
def run() -> SimResult:
    return run_body(load_scenario("concurrency_cap_trap").body())


def test_quantile_curve_keeps_small_samples_and_thins_large_ones():
    x, y = figures.quantile_curve(np.array([3.0, 1.0, 2.0]))
    assert list(x) == [1.0, 2.0, 3.0] and list(y) == pytest.approx([1 / 3, 2 / 3, 1.0])
    x, y = figures.quantile_curve(np.arange(10_000.0), max_points=100)
    assert len(x) == 100 and x[0] == 0 and x[-1] == 9999 and y[-1] == 1.0
    assert figures.quantile_curve(np.array([]))[0].size == 0


def test_binned_steps_are_time_weighted_and_bounded(run):
    b = figures.binned_steps(run, max_points=50)
    assert len(b["t"]) == 50
    assert np.nanmax(b["running"]) <= 4 + 1e-9  # max_num_seqs = 4
    assert np.nanmean(b["queue"]) > 5            # 12 of 16 streams wait most of the time
    assert np.all((b["busy"] >= 0) & (b["busy"] <= 1 + 1e-9))
    assert b["preemptions"].sum() == 0


def test_binned_steps_hand_case():
    steps = StepRecords()
    # two steps in the first half (busy 0.5 of it), one in the second; a 2 s horizon, 2 bins
    steps.append(0.0, 0.25, 2, 0, 2, 2, 0, 2, 0, 0, 4, 2, 0.5)
    steps.append(0.25, 0.25, 2, 0, 2, 2, 0, 2, 0, 1, 0, 2, 0.7)
    steps.append(1.0, 1.0, 1, 0, 1, 1, 0, 1, 0, 0, 0, 1, 0.2)
    b = figures.binned_steps(SimResult(steps=steps, sim_end_s=2.0), max_points=2)
    assert list(b["queue"]) == pytest.approx([1.0, 0.0])       # 4 waiting for 0.25 s of a 1 s bin
    assert list(b["running"]) == pytest.approx([1.0, 1.0])
    assert list(b["kv_usage"]) == pytest.approx([0.6, 0.2])
    assert list(b["preemptions"]) == [1.0, 0.0]
    assert list(b["busy"]) == pytest.approx([0.5, 1.0])


def test_latency_cdfs_have_one_line_per_run_and_metric(run):
    fig = figures.latency_cdfs({"baseline": run, "what-if": run})
    assert len(fig.data) == 6
    assert [t.name for t in fig.data if t.showlegend] == ["baseline", "what-if"]
    assert max(fig.data[0].y) == 1.0


def test_server_timeseries_has_four_panels(run):
    fig = figures.server_timeseries({"baseline": run})
    assert len(fig.data) == 4
    assert all(len(t.x) <= figures.MAX_POINTS for t in fig.data)


def test_batch_composition_is_a_slice_of_real_steps(run):
    fig = figures.batch_composition(run, max_num_batched_tokens=8192, num_steps=100)
    assert [t.name for t in fig.data] == ["decode tokens", "prefill tokens"]
    assert len(fig.data[0].x) == 100
    c = figures.step_slice(run, num_steps=100, at=0.5)
    n = len(run.steps)
    assert c["index"][0] == round(0.5 * (n - 100))
    assert np.all(np.diff(c["start"]) > 0)
    # each bar is one step: its tokens are the step's own, its width the step's duration
    i = int(c["index"][0])
    assert c["decode"][0] == run.steps.column("num_decode_tokens")[i]
    assert list(fig.data[0].width) == pytest.approx(list(c["duration"]))
    assert np.all(c["decode"] <= 4)  # max_num_seqs = 4 decodes per step
    assert figures.step_slice(run, num_steps=10 ** 9, at=1.0)["index"].size == n
    assert figures.step_slice(SimResult(), 10)["index"].size == 0


def test_prefix_hit_rate_over_time():
    recs = [RequestRecord(i, "c", float(i), num_prompt_tokens=100, num_cached_tokens=50 if i % 2 else 0)
            for i in range(100)]
    h = figures.prefix_hits_over_time(SimResult(requests=recs), max_points=5)
    assert np.nanmean(h["hit_rate"]) == pytest.approx(0.25, abs=0.02)
    fig = figures.prefix_hit_rate({"baseline": SimResult(requests=recs)}, {"baseline": 0.25})
    assert fig.data[0].name == "baseline (overall 25%)"


def test_throughput_latency_and_step_split():
    pts = [{"load": "1 req/s", "output_throughput": 100.0, "median_ttft_ms": 50.0, "p99_ttft_ms": 90.0,
            "median_tpot_ms": 10.0, "p99_tpot_ms": 12.0},
           {"load": "2 req/s", "output_throughput": 190.0, "median_ttft_ms": 60.0, "p99_ttft_ms": 200.0,
            "median_tpot_ms": 11.0, "p99_tpot_ms": 15.0}]
    fig = figures.throughput_latency({"baseline": pts, "what-if": pts})
    assert len(fig.data) == 8
    assert list(fig.data[0].x) == [100.0, 190.0]
    split = StepSplit(compute=0.2, memory=0.6, communication=0.0, overhead=0.2, bound="memory_bandwidth")
    fig = figures.step_time_split({"baseline": split, "what-if": None})
    assert [t.name for t in fig.data][:2] == ["compute", "memory (weights + KV)"]
    assert list(fig.data[1].x) == [0.6]
