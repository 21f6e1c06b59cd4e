"""The paired-rows reading (benchmarks/request_time_pairs.py): exact logic on synthetic rows, no simulation."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import request_time_pairs as rtp  # noqa: E402
from twin.fitting.silicon_rows import SiliconRow  # noqa: E402

_LINE = iter(range(2, 10_000))


def _row(quant, version, ttft, tpot=10.0, isl=1024, tp=4, conc=4, source="source_file=2026-04-06.csv",
         mode="agg", model="meta-llama/Llama-3.1-70B"):
    return SiliconRow(line=next(_LINE), id="x", source=source, measured="2026-04-01", image=None, backend="vllm",
                      vllm_version=version, model_path=model, system="b200_sxm", precision=quant,
                      gemm_quant=quant, moe_quant=quant, mode=mode, isl=isl, osl=1024, concurrency=conc,
                      batch_size=conc, tp=tp, pp=1, attention_dp=1, moe_tp=tp, moe_ep=1, ttft_ms=ttft,
                      tpot_ms=tpot)


def test_checkpoint_pairs_share_everything_but_the_checkpoint():
    rows = [_row("fp8", "0.10.2", 130.0, 11.0), _row("nvfp4", "0.10.2", 100.0, 10.0),
            _row("fp8", "0.10.2", 400.0, isl=8192), _row("nvfp4", "0.10.2", 300.0, isl=8192),
            _row("fp8", "0.10.2", 120.0, tp=8)]                       # no NVFP4 partner: unpaired
    got = rtp.pairs(rows, "checkpoint", 8)
    assert list(got) == [("b200_sxm", "llama", "0.10.2", "fp8 vs nvfp4")]
    items = got[("b200_sxm", "llama", "0.10.2", "fp8 vs nvfp4")]
    assert sorted(round(dt, 9) for _, dt, _, _ in items) == [30.0, 100.0]
    s = rtp.summary(items)
    assert s["n"] == 2 and s["dttft_ms"] == pytest.approx(65.0)
    assert s["by_isl"] == {1024: pytest.approx(30.0), 8192: pytest.approx(100.0)}
    assert "missed_ms" not in s                                        # no twin values given


def test_release_pairs_and_the_load_and_client_filters():
    rows = [_row("fp8", "0.17.0", 150.0), _row("fp8", "0.19.0", 110.0),
            _row("fp8", "0.17.0", 900.0, conc=64), _row("fp8", "0.19.0", 500.0, conc=64),   # above --max-conc
            _row("fp8", "0.17.0", 90.0, tp=2, source="kimi-k2.5-gap-analysis"),             # no published client
            _row("fp8", "0.19.0", 80.0, tp=2)]
    got = rtp.pairs(rows, "release", 8)
    assert list(got) == [("b200_sxm", "llama", "fp8", "0.17.0 vs 0.19.0")]
    assert [round(dt, 9) for _, dt, _, _ in got[("b200_sxm", "llama", "fp8", "0.17.0 vs 0.19.0")]] == [40.0]


def test_a_setting_measured_twice_keeps_the_mean_and_the_twin_difference():
    a1, a2, b = _row("fp8", "0.10.2", 120.0), _row("fp8", "0.10.2", 140.0), _row("nvfp4", "0.10.2", 100.0)
    twin = {a1.line: 95.0, a2.line: 105.0, b.line: 90.0}
    items = rtp.pairs([a1, a2, b], "checkpoint", 8, twin)[("b200_sxm", "llama", "0.10.2", "fp8 vs nvfp4")]
    assert len(items) == 1
    _, dt, _, dtwin = items[0]
    assert dt == pytest.approx(30.0) and dtwin == pytest.approx(10.0)
    s = rtp.summary(items)
    assert s["missed_ms"] == pytest.approx(20.0) and s["missed_by_tp"] == {4: pytest.approx(20.0)}


def test_input_errors():
    with pytest.raises(ValueError):
        rtp.pairs([], "gpu", 8)
    with pytest.raises(ValueError):
        rtp.pairs([], "checkpoint", 0)
    with pytest.raises(ValueError):
        rtp.summary([])
