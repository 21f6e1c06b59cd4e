"""The decode weight streams' bandwidth of a generation no training row comes from (issue 33, round 9): a fold that
resets the reference generation's fraction takes the OTHER generations' fractions it fitted (and the entries that
inherit it follow); the rows whose decode the cost model knowingly cannot express are kept out of the fold fits."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from tests.fitting_helpers import fake_fold_fit, provenance_entry
from twin.fitting import provenance as pv
from twin.fitting.unseen_bandwidth import unexplained_decode_gap, unseen_reference


def _plan(fixed_fitted=()) -> pv.FoldPlan:
    """Hopper held out: the unscoped fraction and the Hopper FP8 KV read rate (inheriting it) reset."""
    me, kv = provenance_entry("memory_efficiency", 0.978), provenance_entry("kv_memory_efficiency@hopper+kv_fp8", 0.3)
    assert kv.prior == pv.INHERIT
    actions = {"memory_efficiency": (me, pv.RESET), kv.parameter: (kv, pv.RESET)}
    fixed = {"memory_efficiency": 0.8, kv.parameter: 0.8} | {n: 0.5 for n in fixed_fitted}
    return pv.FoldPlan(actions, fixed, {}, {})


def test_a_reset_reference_fraction_takes_the_other_generations_fitted_fractions():
    out = unseen_reference(_plan(), {"memory_efficiency": 0.8, "memory_efficiency@blackwell": 0.92,
                                     "step_overhead_s": 1.9e-3})
    assert out == {"memory_efficiency": 0.92, "kv_memory_efficiency@hopper+kv_fp8": 0.92}
    # several fitted generations: their geometric mean
    two = unseen_reference(_plan(), {"memory_efficiency@blackwell": 0.9, "memory_efficiency@ampere": 0.8})
    assert two["memory_efficiency"] == pytest.approx(math.sqrt(0.9 * 0.8), rel=1e-12)


def test_nothing_is_carried_without_a_fitted_generation_value():
    # the scoped value held by the plan (not fitted) does not speak for the held-out generation
    assert unseen_reference(_plan(("memory_efficiency@blackwell",)), {"memory_efficiency@blackwell": 0.5}) == {}
    assert unseen_reference(_plan(), {"memory_efficiency": 0.8}) == {}
    # a refit (not reset) reference keeps its own fitted value
    me = provenance_entry("memory_efficiency", 0.978)
    refit = pv.FoldPlan({"memory_efficiency": (me, pv.REFIT)}, {}, {}, {})
    assert unseen_reference(refit, {"memory_efficiency": 0.95, "memory_efficiency@blackwell": 0.8}) == {}


@dataclass
class _Row:
    model_path: str
    system: str
    tp: int
    vllm_version: str


@dataclass
class _Case:
    row: _Row | None


def test_the_rows_no_term_explains_are_the_llama_b200_tp1_rows_of_vllm_0_10_2():
    llama = "meta-llama/Llama-3.1-70B"
    assert unexplained_decode_gap(_Case(_Row(llama, "b200_sxm", 1, "0.10.2"))) is not None
    for row in (_Row(llama, "b200_sxm", 2, "0.10.2"), _Row(llama, "h100_sxm", 1, "0.10.2"),
                _Row(llama, "b200_sxm", 1, "0.15.1"), _Row("openai/gpt-oss-120b", "b200_sxm", 1, "0.15.1")):
        assert unexplained_decode_gap(_Case(row)) is None
    assert unexplained_decode_gap(_Case(None)) is None


def test_a_fold_fits_without_the_unexplained_rows_and_still_predicts_them(monkeypatch):
    from types import SimpleNamespace

    from twin.fitting import joint
    from twin.fitting.fit import Case
    from twin.fitting.measured_run import LengthSample, MeasuredRun
    from twin.fitting.replay import Target

    def run(name: str) -> MeasuredRun:
        return MeasuredRun(name=name, source="test", num_requests=12, rate_per_s=float("inf"), max_concurrency=4,
                           prompt_tokens=LengthSample.constant(1024), output_tokens=LengthSample.constant(32),
                           metrics={"completed": 1.0, "mean_ttft_ms": 50.0, "mean_tpot_ms": 10.0},
                           server={"enable_prefix_caching": False, "vllm_version": "0.14"}, experiment=name)

    calls, _ = fake_fold_fit(monkeypatch, 2e-3)
    monkeypatch.setattr(joint, "unexplained_decode_gap", lambda c: "gap" if c.run.name.startswith("gap") else None)
    target = Target("llama-2-7b", "H100-SXM", 1)
    cases = [Case(run("train"), target), Case(run("gap-train"), target), Case(run("gap-test"), target),
             Case(run("test"), target)]
    first = [SimpleNamespace(metrics={}) for _ in cases]
    fold = joint.run_fold("GPU", "test", cases, lambda c: "test" if c.run.name.endswith("test") else "train", first,
                          names=("step_overhead_s",), outer_iterations=1, evidence=[])
    assert [kw["fitted_on"] for kw in calls] == [["train"]]
    assert [c.run.name for c in fold.cases] == ["gap-test", "test"]
