"""Issue 33, round 12: Kimi-K2.5 NVFP4's per-request time (``twin.cost.mla_request``: ``expert_path_request_s`` on an
MLA model's NVFP4 experts), a reading that is not embedded: the table empty by default and the reading's value;
where the term acts once set (and nowhere else), on the request path and in no step, its scoped fit key, its
provenance if embedded (evidence the Kimi NVFP4 rows, stated prior 0: reset in a fold that holds them, absent from a
fold that keeps them), bad values, and the reading script's arithmetic."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace as NS

import pytest
from core_helpers import step_shape as step

from twin.cost import mla_request
from twin.cost.mla_request import READINGS, mla_request_s, mla_scoped_values, scoped_values
from twin.cost.roofline import RooflineCostModel
from twin.errors import TwinInputError
from twin.fitting.parameters import PARAMETERS_BY_NAME
from twin.fitting.provenance import RESET, embedded_entries, fold_plan
from twin.fitting.scoped import params_for
from twin.hardware.catalog import resolve_gpu, resolve_model
from twin.hardware.weight_formats import resolve_formats

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

KIMI, MINIMAX = "moonshotai/Kimi-K2.5", "MiniMaxAI/MiniMax-M2.5"
KEY = "expert_path_request_s@mla+experts_nvfp4"


@pytest.fixture
def embedded(monkeypatch):
    """The reading embedded, as it would be if adopted."""
    monkeypatch.setattr(mla_request, "MLA_EXPERT_REQUEST_S", dict(READINGS))


def test_a_reading_not_embedded():
    assert READINGS == {"nvfp4": 20.9e-3} and mla_request.MLA_EXPERT_REQUEST_S == {}
    m = RooflineCostModel(KIMI, "B200", tensor_parallel_size=4, weight_dtype="nvfp4", request_path_s=4e-3)
    assert m.expert_path_request_s == 0.0 and m.request_path_s == 4e-3
    assert scoped_values() == {} and set(mla_scoped_values()) == {"layer_overhead_s@mla"}
    assert KEY not in {e.parameter for e in embedded_entries()}


def test_once_embedded_it_acts_on_kimi_nvfp4_only(embedded):
    for tp in (4, 8):
        m = RooflineCostModel(KIMI, "B200", tensor_parallel_size=tp, weight_dtype="nvfp4", request_path_s=4e-3)
        assert m.expert_path_request_s == 20.9e-3
        assert m.request_path_s == pytest.approx(4e-3 + 20.9e-3, rel=1e-12)
    # Kimi's INT4 checkpoint, MiniMax's NVFP4 checkpoint: none
    for model, dtype in ((KIMI, "int4"), (MINIMAX, "nvfp4")):
        m = RooflineCostModel(model, "B200", tensor_parallel_size=8, weight_dtype=dtype, request_path_s=4e-3)
        assert m.expert_path_request_s == 0.0 and m.request_path_s == 4e-3
    assert mla_request_s(resolve_model("llama-3.1-70b"), resolve_formats("nvfp4")) is None
    assert mla_request_s(resolve_model(KIMI), None) is None


def test_given_value_wins_and_no_step_pays_it():
    kw = dict(model=KIMI, gpu="B200", tensor_parallel_size=4, weight_dtype="nvfp4")
    plain, m = RooflineCostModel(**kw, expert_path_request_s=0.0), RooflineCostModel(**kw, expert_path_request_s=0.03)
    assert plain.expert_path_request_s == 0.0 and m.expert_path_request_s == 0.03
    for s in (step([1024, 1, 1], [0, 900, 900]), step([1, 1], [900, 900])):
        assert m.step_time_s(s) == plain.step_time_s(s)
        assert m.explain(s) == plain.explain(s)
    assert m.request_path_s - plain.request_path_s == pytest.approx(0.03, rel=1e-12)


def test_bad_values_name_the_field():
    for bad in (-1e-3, float("nan"), "x"):
        with pytest.raises(TwinInputError, match="expert_path_request_s"):
            RooflineCostModel(KIMI, "B200", tensor_parallel_size=4, weight_dtype="nvfp4", expert_path_request_s=bad)


def _dep(model, dtype, gpu="B200"):
    return NS(gpu=resolve_gpu(gpu), weight_formats=resolve_formats(dtype), model=resolve_model(model))


def test_scoped_fit_key():
    p = PARAMETERS_BY_NAME[KEY]
    assert (p.prior, p.lower, p.upper, p.unit) == (0.0, 0.0, 100.0, "ms per request")
    assert params_for({KEY: 0.02}, _dep(KIMI, "nvfp4")) == {"expert_path_request_s": 0.02}
    for model, dtype in ((KIMI, "int4"), (MINIMAX, "nvfp4"), ("llama-3.1-70b", "nvfp4")):
        assert params_for({KEY: 0.02}, _dep(model, dtype)) == {}


def test_provenance_entry_with_prior_zero(embedded):
    assert scoped_values() == {KEY: 20.9e-3}
    entries = {e.parameter: e for e in embedded_entries()}
    e = entries[KEY]
    assert (e.value, e.prior, e.table) == (20.9e-3, 0.0, "MLA_EXPERT_REQUEST_S")
    assert entries["layer_overhead_s@mla"].table == "MLA_TERMS"         # round 8's entry unchanged
    assert e.is_evidence(None, _dep(KIMI, "nvfp4")) and e.is_evidence(None, _dep(KIMI, "nvfp4", "H100-SXM"))
    assert not e.is_evidence(None, _dep(KIMI, "int4")) and not e.is_evidence(None, _dep(MINIMAX, "nvfp4"))


def test_fold_prior_absent_where_kept_and_zero_where_held(embedded):
    entry = next(e for e in embedded_entries() if e.parameter == KEY)
    rows = [(NS(family="kimi", gpu="B200"), _dep(KIMI, "nvfp4")), (NS(family="kimi", gpu="B200"), _dep(KIMI, "int4")),
            (NS(family="minimax", gpu="B200"), _dep(MINIMAX, "nvfp4")),
            (NS(family="llama", gpu="H100"), _dep("llama-3.1-70b", "fp8", "H100-SXM"))]
    for group, of in (("kimi", lambda c: c.family), ("B200", lambda c: c.gpu)):
        plan = fold_plan(group, of, rows, fitted=(), entries=[entry])
        assert plan.actions[KEY][1] == RESET and plan.fixed == {KEY: 0.0}
    for group, of in (("minimax", lambda c: c.family), ("llama", lambda c: c.family), ("H100", lambda c: c.gpu)):
        plan = fold_plan(group, of, rows, fitted=(), entries=[entry])
        assert plan.actions == {} and plan.fixed == {}


def test_describe_names_it_per_request():
    d = RooflineCostModel(KIMI, "B200", tensor_parallel_size=4, weight_dtype="nvfp4",
                          expert_path_request_s=20.9e-3).describe()
    assert d["expert_path_request_s_per_request"] == 20.9e-3
    assert "expert_path_request_s_per_request" not in RooflineCostModel(
        KIMI, "B200", tensor_parallel_size=4, weight_dtype="nvfp4").describe()
    assert RooflineCostModel(MINIMAX, "B200", tensor_parallel_size=4, weight_dtype="fp8").describe()[
        "expert_path_request_s_per_request"] == 11.35e-3          # round 11's FP8 path


def test_reading_arithmetic():
    from kimi_request_reading import per_step_tpot_ms, reading_ms
    rows = [{"family": "kimi", "format": "nvfp4", "gap": g} for g in (18.0, 21.0, 25.0)] + \
        [{"family": "kimi", "format": "int4_wo", "gap": -20.0}, {"family": "minimax", "format": "nvfp4", "gap": 1.0}]
    assert reading_ms(rows) == (21.0, 3)
    assert reading_ms(rows, "int4_wo") == (-20.0, 1)
    # 64 sequences of 1024 nominal output tokens: 64 / 921.6 prompts per decode step
    assert per_step_tpot_ms(20.0, 64, 1024) == pytest.approx(20.0 * 64 / 921.6, rel=1e-12)
    assert per_step_tpot_ms(20.0, 2048, 1024) == 20.0          # at most one prompt step per step
