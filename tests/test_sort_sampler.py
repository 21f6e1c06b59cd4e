"""The sort-based top-k / top-p sampler's time per sequence (twin.cost.sort_sampler), which rows pay it
(twin.fitting.sampler_facts) and the sync prior a fold without a sync server takes with it (twin.fitting.held_priors;
issue 33, round 10)."""

from __future__ import annotations

import pytest
from benchmark_module import load_benchmark

from tests.fitting_helpers import silicon_row as _row
from twin.cost.sort_sampler import (RADIX_SORT_BANDWIDTH_FRACTION, explain_sort_sampler, sampler_bytes,
                                    sampler_kernels_per_step, sort_path, sort_sampler_bound_s, sort_sampler_seq_s)
from twin.errors import TwinInputError
from twin.fitting import provenance as pv
from twin.fitting.held_priors import SYNC_KEY, SYNC_SEQ_HOST_PRIOR_S, held_priors_after_fit
from twin.fitting.joint import FOLDS, with_deployments
from twin.fitting.sampler_facts import pays_sort_sampler, sort_sampler_prior_s
from twin.fitting.silicon_rows import SiliconRow

GAP = "source_file=/x/aic-auto-gap-analysis/data/h100_sxm/vllm/0.12.0/Qwen_Qwen3-32B.csv"


def _silicon_row(source: str, version: str) -> SiliconRow:
    return SiliconRow(line=2, id="r", source=source, measured=None, image=None, backend="vllm", vllm_version=version,
                      model_path="Qwen/Qwen3-32B", system="h100_sxm", precision=None, gemm_quant=None, moe_quant=None,
                      mode="agg", isl=1024, osl=128, concurrency=8, batch_size=8, tp=2, pp=1, attention_dp=1,
                      moe_tp=1, moe_ep=1, ttft_ms=100.0, tpot_ms=10.0)


def _qwen(source: str = GAP, version: str = "0.12.0", model: str = "qwen3-32b"):
    case = _row("q", model, "H100-SXM", 2, "0.11")
    object.__setattr__(case, "row", _silicon_row(source, version))
    return case


def test_the_sort_path_by_rows_as_pytorchs_stable_sort_picks_it():
    assert [sort_path(r) for r in (1, 2, 127, 128, 144)] == ["one row", "full sort", "full sort", "segmented",
                                                             "segmented"]
    for bad in (0, -1, 1.5, True):
        with pytest.raises(TwinInputError, match="rows = "):
            sort_path(bad)


def test_bytes_per_entry_by_class_and_path():
    assert sampler_bytes(64) == {"stream": 148, "radix": 124}     # full sort: Onesweep pairs + the row-bit pass
    assert sampler_bytes(128) == {"stream": 124, "radix": 168}    # CUB segmented: 6 passes of 28 B
    assert sampler_bytes(1) == {"stream": 124, "radix": 100}
    assert [sampler_kernels_per_step(r) for r in (1, 64, 128)] == [28, 33, 24]


def test_radix_passes_at_cubs_stated_fraction_streaming_at_the_datasheet():
    assert RADIX_SORT_BANDWIDTH_FRACTION == pytest.approx(1.92e9 * 100 / 336.5e9, abs=0.005)
    v, bw = 151_936, 3.35e12
    assert sort_sampler_seq_s(v, bw, 64) == pytest.approx((148 + 124 / RADIX_SORT_BANDWIDTH_FRACTION) * v / bw,
                                                          rel=1e-12)
    assert sort_sampler_seq_s(v, bw, 64) == pytest.approx(16.58e-6, rel=1e-3)
    assert sort_sampler_seq_s(v, bw, 128) == pytest.approx(18.99e-6, rel=1e-3)
    assert sort_sampler_bound_s(v, bw, 64) == pytest.approx(272 * v / bw, rel=1e-12)
    assert sort_sampler_bound_s(v, bw, 64) < sort_sampler_seq_s(v, bw, 64)
    line = explain_sort_sampler(v, bw, 64)
    assert "16.58 us per sequence per step" in line and "12.34 us" in line and "33 kernels" in line
    with pytest.raises(TwinInputError, match="memory_bytes_per_s = 0"):
        sort_sampler_seq_s(v, 0)
    with pytest.raises(TwinInputError, match="vocab_size = -1"):
        sort_sampler_seq_s(-1, bw)


def test_only_a_row_whose_client_leaves_sampling_to_a_top_k_top_p_config_on_0_12_pays_it():
    assert pays_sort_sampler(_qwen())
    assert not pays_sort_sampler(_qwen(source="db-dump/2026-04-27"))           # InferenceX: greedy client
    assert not pays_sort_sampler(_qwen(version="0.14.0"))                      # release not asserted
    assert not pays_sort_sampler(_qwen(model="llama-3.1-70b"))                 # generation config not asserted
    assert not pays_sort_sampler(_row("i", "qwen3-32b", "H100-SXM", 2, "0.12"))   # no silicon row
    assert sort_sampler_prior_s([_qwen(), _qwen(source="db-dump/x")]) == pytest.approx(      # batch 8: full sort
        sort_sampler_seq_s(151_936, 3.35e12, 8), rel=1e-12)
    assert sort_sampler_prior_s([_qwen(version="0.19.0")]) == 0.0


def test_the_qwen3_fold_adds_the_sampler_to_the_host_prior():
    q, llama = _qwen(), _row("l", "llama-3.1-70b", "H100-SXM", 8, "0.14")
    ev = with_deployments([q, llama])
    names = ("per_seq_overhead_s", SYNC_KEY)
    plan = pv.fold_plan("qwen3", FOLDS["family"], ev, names)
    sampler = sort_sampler_seq_s(151_936, 3.35e12, 8)
    _, added = held_priors_after_fit(plan, {"per_seq_overhead_s": 5e-6}, names, with_deployments([q]))
    assert added == {SYNC_KEY: pytest.approx(5e-6 + SYNC_SEQ_HOST_PRIOR_S + sampler, rel=1e-12)}
    # held-out rows that do not pay it (a greedy client): the host time alone, as in round 9
    greedy = _qwen(source="db-dump/x")
    _, added = held_priors_after_fit(plan, {"per_seq_overhead_s": 5e-6}, names, with_deployments([greedy]))
    assert added == {SYNC_KEY: pytest.approx(5e-6 + SYNC_SEQ_HOST_PRIOR_S, rel=1e-12)}
    reset = pv.fold_plan("qwen3", FOLDS["family"], ev, ())
    assert held_priors_after_fit(reset, {}, (), with_deployments([q]))[0] == {
        SYNC_KEY: pytest.approx(18.7e-6 + SYNC_SEQ_HOST_PRIOR_S + sampler, rel=1e-12)}


def test_the_shape_reading_recovers_a_per_step_and_a_per_sequence_part():
    """benchmarks/sync_sampler_shape.py: each row's implied per-sequence value from two simulated values (TPOT
    linear in it), and implied = a + S / B fitted over the batch B, on rows built with a = 20 us, S = 80 us."""
    mod = load_benchmark("sync_sampler_shape")
    runs = []
    for conc in (8, 16, 64, 128):
        true_us = 20.0 + 80.0 / conc
        meas = 5.0 + 0.01 * conc * true_us                    # TPOT (ms) at the row's true per-sequence value
        for v in (10.0, 40.0):
            runs.append(dict(v_us=v, tp=2, isl=1024, osl=128, conc=conc, fp8=False, meas=meas,
                             pred=5.0 + 0.01 * conc * v))
    rows = mod.implied(runs)
    want = sorted(round(20.0 + 80.0 / c, 9) for c in (8, 16, 64, 128))
    assert sorted(round(r["implied_us"], 9) for r in rows) == want
    a, s = mod.fit_a_s(rows)
    assert a == pytest.approx(20.0, abs=1e-9) and s == pytest.approx(80.0, abs=1e-9)
