"""Compact records for long runs: records: {token_times: summary} (first/last token times and a run-wide ITL
summary) and records: {steps: aggregate} (per-second step sums), against the full records of the same run."""

from __future__ import annotations

import math

import numpy as np
import pytest

from twin.core.request import Request
from twin.errors import TwinInputError
from twin.results.metrics import compute_metrics
from twin.results.per_request import per_request_arrays
from twin.results.records import ABORTED
from twin.results.request_sample import RequestSample
from twin.results.token_summary import REL_BIN_WIDTH, ItlSummary, SummaryRequestRecord, record_factory
from twin.scenario import load_scenario
from twin.sim.run import run_body

ITL_PCT = ("median_itl_ms", "p50_itl_ms", "p90_itl_ms", "p95_itl_ms", "p99_itl_ms")
SHORT = {"workload": {"duration_s": 20}}


def _runs(name: str, extra: dict):
    sc = load_scenario(name)
    full = run_body(sc.body(overrides=extra), sc.base_dir)
    summary = run_body(sc.body(overrides={**extra, "records": {"token_times": "summary"}}), sc.base_dir)
    return full, summary


@pytest.mark.parametrize("name", ["chat_shared_prompt", "speculative_decoding"])
def test_summary_matches_full_run(name):
    full, summ = _runs(name, SHORT)
    assert isinstance(summ.requests[0], SummaryRequestRecord)
    # per-request TTFT, TPOT, E2EL and counters: identical
    assert full.requests_frame().equals(summ.requests_frame())
    mf, ms = full.metrics(), summ.metrics()
    itl_keys = {"mean_itl_ms", "std_itl_ms", *ITL_PCT}
    assert {k: v for k, v in mf.items() if k not in itl_keys} == {k: v for k, v in ms.items() if k not in itl_keys}
    # exact count and max; mean and std up to summation order
    gaps = RequestSample(full.requests).itl_flat
    itl = summ.requests[0].itl
    assert itl.num_gaps + itl.num_zero_gaps == gaps.size > 0
    assert itl.max_gap_s == gaps.max()
    assert ms["mean_itl_ms"] == pytest.approx(mf["mean_itl_ms"], rel=1e-9)
    assert ms["std_itl_ms"] == pytest.approx(mf["std_itl_ms"], rel=1e-6)
    for key in ITL_PCT:   # histogram percentiles: within half a bin's relative width
        assert ms[key] == pytest.approx(mf[key], rel=REL_BIN_WIDTH / 2)


def test_emission_calls_give_exact_gaps_and_tokens():
    itl = ItlSummary()
    a = SummaryRequestRecord("a", "c", 0.5, itl)
    b = SummaryRequestRecord("b", "c", 0.75, itl)
    a.add_emission(1.0)            # first token: no gap
    a.add_emission(1.5, 3)         # gap 0.5 and two zero gaps
    b.add_emission(1.25)
    # a and b each emit one token in steps ending at 2.0, 2.25, 2.75: the gaps within counted by step (0.25,
    # 0.5, twice each), the ones before by the records (a 0.5, b 0.75)
    itl.add_steps([math.nan, 2.0, 2.25], [2.0, 2.25, 2.75], [2, 2, 2])
    a.add_counted_emissions(2.0, 2.75, 3, False)
    b.add_counted_emissions(2.0, 2.75, 3, False)
    itl.add_steps([2.75], [3.0], [1])   # a alone in the next step: its gap (0.25) counted by the step
    a.add_counted_emissions(3.0, 3.0, 1, True)
    assert (a.first_token_s, a.last_token_s, a.num_emissions) == (1.0, 3.0, 6)
    assert (b.first_token_s, b.last_token_s, b.num_emissions) == (1.25, 2.75, 4)
    out = itl.describe_itl([100])
    gaps = [0.5, 0.0, 0.0, 0.5, 0.25, 0.5, 0.75, 0.25, 0.5, 0.25]
    assert (itl.num_gaps, itl.num_zero_gaps, itl.max_gap_s, itl.min_gap_s) == (8, 2, 0.75, 0.25)
    assert out["mean_itl_ms"] == pytest.approx(np.mean(gaps) * 1000, rel=1e-12)
    assert out["std_itl_ms"] == pytest.approx(np.std(gaps) * 1000, rel=1e-12)
    assert out["p100_itl_ms"] == 750.0
    # tokens per second from the first arrival (0.5): [0.5, 1.5) has 1 + 1, [1.5, 2.5) has 3 + 2 + 2, then 2 + 1
    assert itl.max_output_tokens_per_s() == 7.0
    assert list(itl._tokens[:3]) == [2, 7, 3]


@pytest.mark.parametrize("flush_at", [5, 1 << 16])
def test_steps_fold_as_their_emissions_one_by_one(flush_at, monkeypatch):
    """Steps handed over in runs (buffered, one entry per step whatever the requests in it, folded in bulk,
    also across flushes mid-way) give the counts, histogram and per-second tokens of the same emissions one
    at a time."""
    import twin.results.token_summary as summary_module

    monkeypatch.setattr(summary_module, "_FLUSH_AT", flush_at)
    rng = np.random.default_rng(11)
    ends = np.cumsum(rng.exponential(0.3, 400)) + 1.0
    bulk, one_by_one = ItlSummary(), ItlSummary()
    for itl in (bulk, one_by_one):
        itl.add_record(0.25)
    num_tokens = 0
    for _ in range(60):
        start = int(rng.integers(0, 390))
        run = [float(t) for t in ends[start:start + int(rng.integers(1, 12))]]
        prev = float(ends[start - 1]) if start and rng.random() < 0.7 else None
        count = int(rng.integers(1, 9))                 # requests emitting in every step of the run
        bulk.add_steps([math.nan if prev is None else prev] + run[:-1], run, [count] * len(run))
        for before, t in zip([prev] + run, run):
            for _ in range(count):
                if before is not None:
                    one_by_one.add_gap(t - before)
            one_by_one.add_tokens(t, count)
        num_tokens += count * len(run)
    for itl in (bulk, one_by_one):
        itl.flush()
    assert (bulk.num_gaps, bulk.num_zero_gaps, bulk.max_gap_s, bulk.min_gap_s) == \
        (one_by_one.num_gaps, one_by_one.num_zero_gaps, one_by_one.max_gap_s, one_by_one.min_gap_s)
    assert bulk.num_gaps > 0
    assert np.array_equal(bulk._hist, one_by_one._hist)
    assert bulk.max_output_tokens_per_s() == one_by_one.max_output_tokens_per_s()
    assert sum(bulk._tokens) == sum(one_by_one._tokens) == num_tokens
    assert np.array_equal(np.trim_zeros(np.array(bulk._tokens), "b"), np.trim_zeros(np.array(one_by_one._tokens), "b"))
    assert bulk.describe_itl([50, 99]) == pytest.approx(one_by_one.describe_itl([50, 99]), rel=1e-12)


def test_histogram_percentiles_within_stated_resolution():
    rng = np.random.default_rng(7)
    values = rng.lognormal(np.log(0.02), 1.0, 20_000)
    itl = ItlSummary()
    for v in values.tolist():
        itl.add_gap(v)
    out = itl.describe_itl([1, 10, 50, 90, 99, 99.9])
    for p in (1, 10, 50, 90, 99, 99.9):
        word = str(p).replace(".", "_") if p != int(p) else str(int(p))
        exact = float(np.percentile(values, p)) * 1000
        got = out.get(f"p{word}_itl_ms", out.get(f"p{p}_itl_ms"))
        assert abs(got - exact) <= exact * REL_BIN_WIDTH / 2


def test_summary_keys_none_where_it_cannot_answer():
    make = record_factory("summary")
    recs = [make(Request(f"r{i}", float(i), 4, 2)) for i in range(2)]
    for r in recs:
        r.add_emission(r.arrival_s + 0.1)
        r.add_emission(r.arrival_s + 0.2)
        r.num_output_tokens, r.finish_s = 2, r.arrival_s + 0.2
    m = compute_metrics(recs)
    assert m["mean_itl_ms"] == pytest.approx(100.0) and m["max_output_tokens_per_s"] == 2.0
    assert compute_metrics(recs[:1])["mean_itl_ms"] is None                  # a subset of the run
    assert compute_metrics(recs, window=(0.5, 5.0))["p99_itl_ms"] is None    # a window leaving one out
    assert compute_metrics(recs, window=(0.0, 5.0))["p99_itl_ms"] == pytest.approx(100.0)  # one keeping all
    recs[1].status = ABORTED                                                 # cut mid-stream
    assert compute_metrics(recs)["mean_itl_ms"] is None
    assert compute_metrics(recs)["max_output_tokens_per_s"] is None
    assert "itls" not in per_request_arrays(recs)
    with pytest.raises(TwinInputError, match="records.token_times"):
        RequestSample(recs[:1]).itl_lists()


@pytest.mark.parametrize("records, match", [
    ({"token_times": "compact"}, r"records.token_times.*'full'.*'summary'"),
    ({"token_time": "summary"}, r"records: unknown field 'token_time'; did you mean 'token_times'\? \(allowed: steps, token_times\)"),
    ({"steps": "rows"}, r"records.steps.*'full'.*'aggregate'"),
    ("summary", r"records"),
])
def test_records_section_validated(records, match):
    sc = load_scenario("chat_shared_prompt")
    with pytest.raises(TwinInputError, match=match):
        sc.body(overrides={"records": records})


def test_bad_mode_in_api_is_one_line_error():
    with pytest.raises(TwinInputError, match="records.token_times = 'x': must be one of full, summary"):
        record_factory("x")


def test_bench_serve_json_of_summary_run_omits_itls_with_a_note():
    from twin.results.export import to_bench_serve_json

    _, summ = _runs("chat_shared_prompt", {"workload": {"duration_s": 5}})
    doc = to_bench_serve_json(summ)
    assert "itls" not in doc and "ttfts" in doc
    assert doc["twin"]["note"] == "itls omitted: records.token_times: summary keeps no per-token times"
    assert doc["p99_itl_ms"] is not None


def test_aggregate_steps_match_full_totals_and_metrics():
    from twin.results.step_summary import StepSummary

    sc = load_scenario("cluster_prefix_affinity")
    extra = {"workload": {"duration_s": 10}}
    full = run_body(sc.body(overrides=extra), sc.base_dir)
    agg = run_body(sc.body(overrides={**extra, "records": {"steps": "aggregate"}}), sc.base_dir)
    assert isinstance(agg.steps, StepSummary) and len(agg.steps) == len(full.steps) > 0
    t = agg.steps.totals()
    for name in ("num_seqs", "num_new_tokens", "num_prefill_tokens", "num_decode_tokens", "num_preempted"):
        assert t[name] == full.steps.column(name).sum()
    assert t["duration_s"] == pytest.approx(full.steps.column("duration_s").sum(), rel=1e-12)
    assert t["max_kv_usage"] == full.steps.column("kv_usage").max()
    frame = agg.steps_frame()
    assert frame["num_steps"].sum() == len(full.steps)
    assert set(frame["replica"]) == set(full.steps.column("replica").tolist())
    mf, ma = full.metrics(), agg.metrics()
    for key in ("num_steps", "p99_kv_usage", "max_kv_usage"):
        assert ma[key] == mf[key]
    for key in ("busy_fraction", "mean_running_batch", "mean_queue_length", "mean_batched_tokens",
                "mean_kv_usage"):
        assert ma[key] == pytest.approx(mf[key], rel=1e-9)
    assert agg.metrics(window=(5.0, None))["num_steps"] is None   # a window needs per-step overlap
    with pytest.raises(TwinInputError, match="records.steps: aggregate"):
        agg.steps.column("kv_usage")


def test_bad_steps_mode_in_api_is_one_line_error():
    from twin.results.step_summary import new_step_log

    with pytest.raises(TwinInputError, match="records.steps = 'rows': must be one of full, aggregate"):
        new_step_log("rows")


def test_decode_runs_read_as_their_rows_appended_one_by_one():
    """Decode runs keep their start and duration columns and their blocks taken until a column is read; read
    between appends, extended and rebuilt per replica, every column equals the same rows appended one at a
    time, KV usage to the bit."""
    from twin.results.records import STEP_COLUMN_NAMES, StepRecords

    rng = np.random.default_rng(3)
    lazy, eager = StepRecords(), StepRecords()
    row = 0
    for i in range(60):
        if rng.random() < 0.5:
            k = int(rng.integers(0, 5))       # a run of 0 steps adds nothing
            n, rep = int(rng.integers(1, 9)), int(rng.integers(0, 3))
            start = [float(row + j) for j in range(k)]
            dur = [0.5 + j for j in range(k)]
            free, usable = int(rng.integers(40, 60)), 97
            taken = sorted(int(v) for v in rng.integers(0, 40, size=k))
            usage = [1.0 - (free - u) / usable for u in taken]
            lazy.append_decode_run(start, dur, n, rep, free, usable, taken)
            for j in range(k):
                eager.append(start[j], dur[j], n, 0, n, n, 0, n, 0, 0, 0, n, usage[j], rep, 0.0)
            row += k
        else:
            args = (float(row), 0.25, *(int(v) for v in rng.integers(1, 50, size=10)), 0.5,
                    int(rng.integers(0, 3)), 0.125)
            lazy.append(*args)
            eager.append(*args)
            row += 1
        if i % 17 == 16:                        # a read in between writes the pending runs
            assert np.array_equal(lazy.column("num_running"), eager.column("num_running"))
    assert len(lazy) == len(eager) == row
    assert list(lazy.num_seqs) == list(eager.num_seqs)    # the attributes read complete columns too
    for name in STEP_COLUMN_NAMES:
        assert np.array_equal(lazy.column(name), eager.column(name)), name
        assert lazy.column(name).dtype == eager.column(name).dtype
    both = StepRecords.concat([eager, lazy])
    assert np.array_equal(both.column("num_seqs"), np.tile(eager.column("num_seqs"), 2))
    rebuilt = StepRecords.from_columns({name: lazy.column(name) for name in STEP_COLUMN_NAMES})
    assert all(np.array_equal(rebuilt.column(n), eager.column(n)) for n in STEP_COLUMN_NAMES)
