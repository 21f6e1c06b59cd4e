"""Metrics in `vllm bench serve`'s definitions, checked on a hand-computed case."""

from __future__ import annotations

import math
from array import array

import numpy as np
import pytest
from scipy import stats

from twin.errors import TwinInputError
from twin.results.metric_keys import BENCH_SERVE_SCALAR_KEYS
from twin.results.metrics import compute_metrics, describe
from twin.results.per_request import per_request_arrays
from twin.results.replications import replicate_summary
from twin.results.slo import parse_slo
from twin.results.records import RequestRecord, StepRecords
from twin.results.sim_result import SimResult


def _finished(rid, arrival, emits, counts=None, prompt=10, **kw):
    r = RequestRecord(rid, "chat", arrival, num_prompt_tokens=prompt, **kw)
    for i, t in enumerate(emits):
        r.add_emission(t, 1 if counts is None else counts[i])
    r.finish_s = emits[-1]
    r.num_output_tokens = len(emits) if counts is None else sum(counts)
    return r


def tiny_case() -> SimResult:
    """Times are exact binary fractions, so every expected value below is exact.

    A: arrives 0.00, emits at 0.50, 0.75 and 1.25 (two tokens at once): 4 tokens.
       TTFT 0.50, E2EL 1.25, TPOT 0.75/3 = 0.25, ITL [0.25, 0.50, 0.0].
    B: arrives 0.25, emits at 1.25, 2.00: TTFT 1.00, E2EL 1.75, TPOT 0.75, ITL [0.75]; 16 cached tokens, 1 preemption.
    C: arrives 0.50, rejected (prompt longer than max_model_len).
    D: arrives 1.50, one token at 2.50: TTFT 1.00, E2EL 1.00, no TPOT (one output token), no ITL.
    """
    a = _finished("A", 0.0, [0.5, 0.75, 1.25], counts=[1, 1, 2], prompt=10)
    b = _finished("B", 0.25, [1.25, 2.0], prompt=20, num_cached_tokens=16, num_preemptions=1)
    c = RequestRecord("C", "chat", 0.5, num_prompt_tokens=100_000, status="rejected",
                      reject_reason="prompt longer than max_model_len")
    d = _finished("D", 1.5, [2.5], prompt=30)
    steps = StepRecords()
    # start, duration, running, waiting, kv usage; idle from 2.25 to 2.5
    for start, dur, running, waiting, kv in [(0.0, 0.5, 1, 0, 0.25), (0.5, 0.5, 2, 1, 0.5),
                                              (1.0, 1.0, 2, 0, 0.75), (2.0, 0.25, 1, 0, 0.25)]:
        steps.append(start, dur, running, 0, running, 4 * running, 0, running, 0, 0, waiting, running, kv, 0)
    return SimResult([a, b, c, d], steps, config={"model": "tiny"})


def test_tiny_case_every_bench_serve_key():
    m = tiny_case().metrics(slo={"ttft_ms": 1000, "tpot_ms": 500})
    expected = {
        "duration": 2.5,
        "completed": 3,
        "failed": 1,
        "total_input_tokens": 60,
        "total_output_tokens": 7,
        "request_throughput": 3 / 2.5,
        "output_throughput": 7 / 2.5,
        "total_token_throughput": 67 / 2.5,
        # good: A (0.5 s, 0.25 s) and D (1.0 s <= 1.0 s; one token: TPOT 0); B's TPOT 0.75 s > 0.5 s
        "request_goodput": 2 / 2.5,
        # one-second buckets from t=0: tokens 0.5, 0.75 | 1.25 x3 | 2.0, 2.5
        "max_output_tokens_per_s": 3.0,
        # at most 2 are ever in flight at once (vLLM's one-second buckets would say 3: bucket 1 holds A (s0-1),
        # B (s0-2) and D (s1-2))
        "max_concurrent_requests": 2,
        "mean_ttft_ms": np.mean([0.5, 1.0, 1.0]) * 1000,
        "median_ttft_ms": 1000.0,
        "std_ttft_ms": np.std([0.5, 1.0, 1.0]) * 1000,
        "p50_ttft_ms": 1000.0,
        "p90_ttft_ms": 1000.0,
        "p95_ttft_ms": 1000.0,
        "p99_ttft_ms": 1000.0,
        "mean_tpot_ms": 500.0,
        "median_tpot_ms": 500.0,
        "std_tpot_ms": 250.0,
        "p50_tpot_ms": 500.0,
        "p90_tpot_ms": (0.25 + 0.9 * 0.5) * 1000,
        "p95_tpot_ms": (0.25 + 0.95 * 0.5) * 1000,
        "p99_tpot_ms": (0.25 + 0.99 * 0.5) * 1000,
        "mean_itl_ms": 375.0,  # [0.25, 0.5, 0.0, 0.75]
        "median_itl_ms": 375.0,
        "std_itl_ms": np.std([0.25, 0.5, 0.0, 0.75]) * 1000,
        "p50_itl_ms": 375.0,
        "p90_itl_ms": (0.5 + 0.7 * 0.25) * 1000,
        "p95_itl_ms": (0.5 + 0.85 * 0.25) * 1000,
        "p99_itl_ms": (0.5 + 0.97 * 0.25) * 1000,
        "mean_e2el_ms": np.mean([1.25, 1.75, 1.0]) * 1000,
        "median_e2el_ms": 1250.0,
        "std_e2el_ms": np.std([1.25, 1.75, 1.0]) * 1000,
        "p50_e2el_ms": 1250.0,
        "p90_e2el_ms": 1650.0,
        "p95_e2el_ms": 1700.0,
        "p99_e2el_ms": 1740.0,
    }
    assert set(expected) == set(BENCH_SERVE_SCALAR_KEYS)
    for key, value in expected.items():
        assert m[key] == pytest.approx(value, rel=1e-12, abs=1e-12), key
    # the exact integers and the exact binary fractions
    for key in ("duration", "completed", "failed", "total_input_tokens", "total_output_tokens",
                "max_output_tokens_per_s", "max_concurrent_requests", "median_ttft_ms", "mean_tpot_ms",
                "std_tpot_ms", "mean_itl_ms", "median_e2el_ms"):
        assert m[key] == expected[key], key
    assert isinstance(m["completed"], int) and isinstance(m["max_concurrent_requests"], int)


def test_tiny_case_per_request_lists():
    arrays = per_request_arrays(tiny_case().requests)
    assert arrays["input_lens"] == [10, 20, 100_000, 30]
    assert arrays["output_lens"] == [4, 2, 0, 1]
    assert arrays["ttfts"] == [0.5, 1.0, 0.0, 1.0]
    assert arrays["itls"] == [[0.25, 0.5, 0.0], [0.75], [], []]  # the 2-token emission gives a gap then a 0
    assert arrays["latencies"] == [1.25, 1.75, 0.0, 1.0]
    assert arrays["start_times"] == [0.0, 0.25, 0.5, 1.5]
    assert arrays["errors"] == ["", "", "prompt longer than max_model_len", ""]


def test_tiny_case_twin_keys():
    m = tiny_case().metrics()
    assert m["request_goodput"] is None and m["num_good_requests"] is None and m["slo_met"] == {}
    assert m["num_requests"] == 4 and m["num_rejected"] == 1 and m["num_incomplete"] == 0
    assert m["prefix_cache_hit_tokens"] == 16 and m["prefix_cache_query_tokens"] == 60
    assert m["prefix_cache_hit_rate"] == 16 / 60
    assert m["num_preemptions"] == 1
    assert m["max_in_flight_requests"] == m["max_concurrent_requests"] == 2  # exact peak
    assert m["num_steps"] == 4 and m["num_replicas"] == 1
    assert m["busy_fraction"] == 2.25 / 2.5
    assert m["mean_running_batch"] == pytest.approx((1 * 0.5 + 2 * 0.5 + 2 * 1.0 + 1 * 0.25) / 2.25)
    assert m["mean_queue_length"] == 0.5 / 2.5
    assert m["mean_kv_usage"] == pytest.approx((0.25 * 0.5 + 0.5 * 0.5 + 0.75 + 0.25 * 0.25) / 2.25)
    assert m["p99_kv_usage"] == np.percentile([0.25, 0.5, 0.75, 0.25], 99)
    assert m["max_kv_usage"] == 0.75
    assert m["mean_batched_tokens"] == 6.0
    assert not any(k.startswith("spec_decode") for k in m)


def test_engine_counters_replace_derived_ones_for_the_whole_run():
    res = tiny_case()
    res.prefix_cache_hit_tokens, res.prefix_cache_query_tokens, res.num_preemptions = 32, 80, 3
    m = res.metrics()
    assert (m["prefix_cache_hit_rate"], m["num_preemptions"]) == (32 / 80, 3)
    windowed = res.metrics(window=(0.0, None))  # a window derives them from the requests in it
    assert (windowed["prefix_cache_hit_rate"], windowed["num_preemptions"]) == (16 / 60, 1)


def test_goodput_uses_value_at_most_slo():
    res = tiny_case()
    assert res.metrics(slo={"ttft_ms": 900, "tpot_ms": 500, "e2el_ms": 1500})["request_goodput"] == 1 / 2.5
    assert res.metrics(slo={"e2el_ms": 1250})["num_good_requests"] == 2  # A at exactly 1.25 s, D
    assert res.metrics(slo="ttft:1000 tpot:500")["request_goodput"] == 2 / 2.5  # vLLM's CLI form
    assert res.metrics(slo=["ttft:400"])["request_goodput"] == 0.0


def test_percentile_slo_reports_met_and_drives_goodput():
    m = tiny_case().metrics(slo={"ttft_ms": {"p99": 1000}, "tpot_ms": {"p99": 700}, "itl_ms": {"mean": 400}})
    assert m["slo_met"] == {"p99_ttft_ms": True, "p99_tpot_ms": False, "mean_itl_ms": True}
    assert m["slo_all_met"] is False
    assert m["num_good_requests"] == 2  # per-request: TTFT <= 1000 ms and TPOT <= 700 ms: A and D
    m = tiny_case().metrics(slo={"e2el_ms": {"p99.9": 2000}})
    assert m["p99.9_e2el_ms"] == np.percentile([1.25, 1.75, 1.0], 99.9) * 1000
    assert m["slo_met"] == {"p99.9_e2el_ms": True} and m["slo_all_met"] is True


@pytest.mark.parametrize("slo", [
    {"ttft": -1}, {"latency_ms": 5}, {"ttft_ms": {"p101": 5}}, {"ttft_ms": {"max": 5}}, {"itl_ms": 50},
    {"ttft_ms": "fast"}, "ttft=500", {"tpot_ms": {}},
])
def test_bad_slo_is_a_clear_error(slo):
    with pytest.raises(TwinInputError, match="slo"):
        parse_slo(slo)


def test_window_keeps_arrivals_in_half_open_interval():
    res = tiny_case()
    m = res.metrics(window=(0.25, 2.0))  # B, C, D; not A (arrived at 0.0)
    assert (m["completed"], m["failed"], m["num_requests"]) == (2, 1, 3)
    assert m["duration"] == 2.5 - 0.25
    assert m["total_output_tokens"] == 3
    assert m["mean_ttft_ms"] == 1000.0
    assert m["window"] == [0.25, 2.0]
    assert res.metrics(window=(0.0, 1.5))["completed"] == 2  # D arrives at 1.5: excluded
    assert res.metrics(window=(None, 0.25))["completed"] == 1
    # steps are clipped to the measured span [0.25, 2.5]
    assert m["busy_fraction"] == 2.0 / 2.25
    with pytest.raises(TwinInputError, match="window"):
        res.metrics(window=(2.0, 1.0))
    with pytest.raises(TwinInputError, match="window"):
        res.metrics(window=(0.0,))


def test_percentile_convention_matches_numpy_linear():
    rng = np.random.default_rng(7)
    x = rng.lognormal(size=1001)
    d = describe(x, "ttft", (50, 90, 95, 99, 99.9))
    assert d["mean_ttft_ms"] == np.mean(x) * 1000
    assert d["median_ttft_ms"] == np.median(x) * 1000
    assert d["std_ttft_ms"] == np.std(x) * 1000
    for p in (50, 90, 95, 99, 99.9):
        key = f"p{p:g}_ttft_ms"
        assert d[key] == np.percentile(x, p) * 1000
        assert d[key] == pytest.approx(np.quantile(x, p / 100, method="linear") * 1000)


@pytest.mark.parametrize("seed", range(5))
def test_max_in_flight_is_the_event_sweep_peak(seed):
    """Against a sweep over every arrival (+1) and completion (-1) in time order, completions first at equal
    times; times on a coarse grid so that ties (an arrival at another's finish) happen."""
    from types import SimpleNamespace

    from twin.results.metrics import max_in_flight

    rng = np.random.default_rng(seed)
    arrival = rng.integers(0, 40, 300) / 4
    finish = arrival + rng.integers(0, 12, 300) / 4
    events = sorted([(t, -1) for t in finish] + [(t, 1) for t in arrival])
    peak = max(np.cumsum([d for _, d in events]))
    sample = SimpleNamespace(finished=list(range(300)), fin_arrival=arrival, fin_finish=finish)
    assert max_in_flight(sample) == peak


def test_first_emission_of_several_tokens_gives_zeros():
    r = _finished("s", 0.0, [1.0, 2.0], counts=[3, 2])
    arrays = per_request_arrays([r])
    assert arrays["itls"] == [[0.0, 0.0, 1.0, 0.0]]
    assert arrays["output_lens"] == [5]
    m = compute_metrics([r])
    assert m["mean_tpot_ms"] == 250.0  # (2.0 - 1.0) / 4
    assert m["max_output_tokens_per_s"] == 3.0


def test_empty_and_degenerate_inputs_give_none_not_nan():
    def no_nan(m):
        for k, v in m.items():
            assert not (isinstance(v, float) and math.isnan(v)), k

    m = compute_metrics([])
    no_nan(m)
    assert m["completed"] == 0 and m["duration"] is None and m["request_throughput"] is None
    assert m["mean_ttft_ms"] is None and m["p99_e2el_ms"] is None and m["max_concurrent_requests"] == 0

    rejected = [RequestRecord(i, "x", float(i), num_prompt_tokens=5, status="rejected") for i in range(3)]
    m = compute_metrics(rejected, StepRecords(), slo={"ttft_ms": 100})
    no_nan(m)
    assert (m["completed"], m["failed"], m["duration"]) == (0, 3, 2.0)
    assert m["request_throughput"] == 0.0 and m["request_goodput"] == 0.0 and m["mean_ttft_ms"] is None

    ones = [_finished(i, float(i), [i + 0.5]) for i in range(4)]  # all one-token outputs
    m = compute_metrics(ones, slo={"tpot_ms": {"p99": 10}})
    no_nan(m)
    assert m["mean_tpot_ms"] is None and m["mean_itl_ms"] is None and m["mean_ttft_ms"] == 500.0
    assert m["slo_met"] == {"p99_tpot_ms": None} and m["slo_all_met"] is None
    assert m["num_good_requests"] == 4  # vLLM counts TPOT as 0 for one-token outputs

    zero = [_finished(0, 1.0, [1.0])]  # zero duration
    m = compute_metrics(zero)
    no_nan(m)
    assert m["duration"] == 0.0 and m["request_throughput"] is None


def test_incomplete_requests_are_neither_completed_nor_failed():
    recs = list(tiny_case().requests)
    stuck = RequestRecord("E", "chat", 2.0, num_prompt_tokens=5, status="incomplete")
    stuck.add_emission(2.25)
    m = compute_metrics(recs + [stuck])
    assert (m["completed"], m["failed"], m["num_incomplete"]) == (3, 1, 1)
    assert m["duration"] == 2.5


def test_finished_record_without_times_is_rejected_clearly():
    bad = RequestRecord("Z", "chat", 0.0, num_prompt_tokens=5, num_output_tokens=3)
    with pytest.raises(TwinInputError, match="'Z'.*first_token_s"):
        compute_metrics([bad])


def test_spec_decode_keys_as_vllm_reports_them():
    recs = []
    for i, (drafts, accepted, per_pos) in enumerate([(4, 6, [3, 2, 1]), (2, 1, [1, 0, 0])]):
        r = _finished(i, 0.0, [1.0, 2.0], counts=[1, 2])
        r.num_spec_drafts, r.num_spec_draft_tokens, r.num_spec_accepted_tokens = drafts, 3 * drafts, accepted
        r.spec_accepted_per_position = array("i", per_pos)
        recs.append(r)
    m = compute_metrics(recs)
    assert m["spec_decode_num_drafts"] == 6
    assert m["spec_decode_draft_tokens"] == 18
    assert m["spec_decode_accepted_tokens"] == 7
    assert m["spec_decode_acceptance_rate"] == 7 / 18 * 100  # percent, as `vllm bench serve` writes it
    assert m["spec_decode_acceptance_length"] == 1 + 7 / 6
    assert m["spec_decode_per_position_acceptance_rates"] == [4 / 6, 2 / 6, 1 / 6]


def test_replicate_summary_matches_scipy_t_interval():
    runs = [{"mean_ttft_ms": v, "completed": 10, "slo_met": {}, "label": "x", "p99_tpot_ms": None}
            for v in (1.0, 2.0, 3.0, 4.0, 6.0)]
    runs[0]["p99_tpot_ms"] = 5.0
    s = replicate_summary(runs, confidence=0.9)
    data = np.array([1.0, 2.0, 3.0, 4.0, 6.0])
    lo, hi = stats.t.interval(0.9, len(data) - 1, loc=data.mean(), scale=stats.sem(data))
    assert s["mean_ttft_ms"]["mean"] == pytest.approx(3.2)
    assert s["mean_ttft_ms"]["half_width"] == pytest.approx((hi - lo) / 2, rel=1e-12)
    assert s["mean_ttft_ms"]["low"] == pytest.approx(lo) and s["mean_ttft_ms"]["high"] == pytest.approx(hi)
    assert s["mean_ttft_ms"]["n"] == 5
    assert s["completed"]["half_width"] == 0.0
    assert s["p99_tpot_ms"] == {"mean": 5.0, "half_width": None, "low": None, "high": None, "std": None, "n": 1}
    assert "slo_met" not in s and "label" not in s
    with pytest.raises(TwinInputError, match="confidence"):
        replicate_summary(runs, confidence=95)


def test_replicate_summary_over_simulated_metrics():
    ms = [tiny_case().metrics() for _ in range(3)]
    s = replicate_summary(ms)
    assert s["request_throughput"]["mean"] == 1.2 and s["request_throughput"]["half_width"] == 0.0


def test_step_records_columns_and_frame():
    steps = tiny_case().steps
    assert len(steps) == 4
    frame = steps.to_frame()
    assert list(frame.columns) == ["start_s", "duration_s", "num_seqs", "num_prefill_seqs", "num_decode_seqs",
                                   "num_new_tokens", "num_prefill_tokens", "num_decode_tokens", "num_spec_tokens",
                                   "num_preempted", "num_waiting", "num_running", "kv_usage", "replica", "draft_s"]
    assert frame["num_running"].tolist() == [1, 2, 2, 1]
    col = steps.column("start_s")
    steps.append(3.0, 0.1, 1, 0, 1, 1, 0, 1, 0, 0, 0, 1, 0.1, 1)  # a copy: appending still works
    assert len(col) == 4 and len(steps) == 5
    assert compute_metrics(tiny_case().requests, steps)["num_replicas"] == 2
    with pytest.raises(KeyError):
        steps.column("nope")


def test_large_itl_arrays_are_vectorised():
    rng = np.random.default_rng(1)
    recs = []
    for i in range(2000):
        times = i * 0.05 + np.cumsum(rng.exponential(0.02, 200))
        r = RequestRecord(i, "c", i * 0.05, first_token_s=float(times[0]), finish_s=float(times[-1]),
                          num_prompt_tokens=50, num_output_tokens=200, emit_times_s=array("d", times))
        recs.append(r)
    m = compute_metrics(recs)
    gaps = np.concatenate([np.diff(np.frombuffer(r.emit_times_s)) for r in recs])
    assert gaps.size == 2000 * 199
    assert m["mean_itl_ms"] == pytest.approx(gaps.mean() * 1000, rel=1e-12)
    assert m["p99_itl_ms"] == np.percentile(gaps, 99) * 1000


@pytest.mark.parametrize("users", [3, 40])
def test_closed_loop_peak_concurrency_never_exceeds_the_users(users):
    # short requests turn over several times a second, where vLLM's one-second buckets over-count
    from twin.scenario import Scenario
    from twin.sim.run import metrics_of, run_body

    body = Scenario({
        "name": "closed", "deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b"},
        "workload": {"arrivals": {"process": "closed_loop", "concurrency": users}, "num_requests": 20 * users,
                     "classes": [{"name": "c", "share": 1.0, "prompt": {"suffix_tokens": {"uniform": [20, 200]}},
                                  "output_tokens": {"uniform": [2, 30]}}]},
        "seed": 5}).body()
    result = run_body(body)
    m = metrics_of(result, body)
    assert m["completed"] == 20 * users
    assert m["max_concurrent_requests"] == m["max_in_flight_requests"] == users
    # vLLM's bucketed count (every request active in a one-second bucket) reads more than the users here
    start = min(r.arrival_s for r in result.requests)
    buckets: dict[int, int] = {}
    for r in result.requests:
        for b in range(int(r.arrival_s - start), int(r.finish_s - start) + 1):
            buckets[b] = buckets.get(b, 0) + 1
    assert max(buckets.values()) > users


def test_add_emissions_equals_one_add_emission_per_time():
    from array import array
    from twin.results.records import RequestRecord

    one, many = RequestRecord(0, "c", 0.0), RequestRecord(0, "c", 0.0)
    for rec in (one, many):
        rec.add_emission(0.5, 3)          # counts switched on before the run
    for t in (1.0, 1.25, 1.5):
        one.add_emission(t)
    many.add_emissions(array("d", [1.0, 1.25, 1.5]))
    many.add_emissions(array("d"))
    assert (one.first_token_s, list(one.emit_times_s), list(one.emit_counts)) == \
        (many.first_token_s, list(many.emit_times_s), list(many.emit_counts)) == (0.5, [0.5, 1.0, 1.25, 1.5], [3, 1, 1, 1])
    fresh = RequestRecord(1, "c", 0.0)
    fresh.add_emissions(array("d", [2.0, 3.0]))
    assert fresh.first_token_s == 2.0 and fresh.emit_counts is None and list(fresh.emit_times_s) == [2.0, 3.0]
