"""vLLM's all-reduce routes and the multimem route's bytes (twin.cost.allreduce_routes; issue 33 round 22, opt-in),
and its trial script's switch (benchmarks/multimem_allreduce_trial.py)."""

from __future__ import annotations

import pytest
from core_helpers import step_shape as _step

from twin.cost import allreduce_routes as ar
from twin.cost.roofline import RooflineCostModel
from twin.errors import TwinInputError
from twin.hardware.catalog import resolve_gpu

MIB = 1024 * 1024
GPT_OSS_TOKEN_BYTES = 2880 * 2        # hidden 2880 in BF16


def test_the_route_is_off_by_default_and_the_ring_stays():
    assert ar.ENABLED is False
    assert ar.link_bytes_factor(resolve_gpu("H100-SXM"), 8) == pytest.approx(1.75)
    assert ar.link_bytes_factor(resolve_gpu("H100-SXM"), 2) == pytest.approx(1.0)


def test_ring_and_multimem_factors():
    assert [ar.ring_factor(n) for n in (2, 4, 8)] == pytest.approx([1.0, 1.5, 1.75])
    assert [ar.multimem_factor(n) for n in (2, 4, 8)] == pytest.approx([1.5, 1.25, 1.125])


@pytest.mark.parametrize("tp, tokens, route", [
    (2, 1024, "custom"), (2, 2048, "two-shot"), (2, 8192, "two-shot"),
    (4, 1024, "custom"), (4, 2048, "multimem"), (4, 8192, "nccl"),
    (8, 44, "custom"), (8, 46, "multimem"), (8, 8192, "multimem"), (8, 12000, "nccl")])
def test_vllms_routes_on_hopper_by_message_size(tp, tokens, route):
    assert ar.route_of(resolve_gpu("H100-SXM"), tp, tokens * GPT_OSS_TOKEN_BYTES) == route


def test_vllms_routes_on_blackwell_and_off_nvswitch():
    b200 = resolve_gpu("B200")
    assert ar.route_of(b200, 8, MIB - 1) == "custom" and ar.route_of(b200, 8, MIB) == "multimem"
    assert ar.route_of(b200, 4, 4 * MIB) == "two-shot" and ar.route_of(b200, 8, 128 * MIB) == "nccl"
    assert ar.route_of(resolve_gpu("H100-PCIe"), 8, 4 * MIB) == "nccl"
    assert ar.route_of(resolve_gpu("A100-SXM"), 8, 4 * MIB) == "nccl"       # no table for sm_80
    with pytest.raises(ValueError):
        ar.route_of(b200, 1, 0)


def test_which_deployments_take_the_multimem_factor():
    h100, b200 = resolve_gpu("H100-SXM"), resolve_gpu("B200")
    assert [ar.takes_multimem(h100, n) for n in (2, 4, 6, 8)] == [False, False, True, True]
    assert [ar.takes_multimem(b200, n) for n in (2, 4, 8)] == [False, False, True]
    assert not ar.takes_multimem(resolve_gpu("H100-PCIe"), 8) and not ar.takes_multimem(resolve_gpu("A100-SXM"), 8)


def _gpt_oss(tp):
    return RooflineCostModel("gpt-oss-120b", "H100-SXM", tensor_parallel_size=tp, weight_dtype="mxfp4")


def test_enabled_the_tp8_prompt_all_reduce_moves_the_multimem_bytes(monkeypatch):
    prompt = _step([8192], [0])
    ring8, ring2 = _gpt_oss(8), _gpt_oss(2)
    monkeypatch.setattr(ar, "ENABLED", True)
    mm8, mm2 = _gpt_oss(8), _gpt_oss(2)
    part = lambda m: m.explain(prompt)["allreduce_s"]     # noqa: E731
    latency = 72 * ring8.allreduce_latency_s
    assert (part(mm8) - latency) / (part(ring8) - latency) == pytest.approx(1.125 / 1.75)
    assert ring8.step_time_s(prompt) - mm8.step_time_s(prompt) == pytest.approx(part(ring8) - part(mm8))
    assert mm2.step_time_s(prompt) == ring2.step_time_s(prompt)          # TP 2: the ring's bytes either way


def test_the_trial_turns_the_route_on_for_its_run_only(monkeypatch):
    from benchmark_module import load_benchmark
    script = load_benchmark("multimem_allreduce_trial")
    seen = []

    def fake_run(args):
        seen.append((list(args), ar.ENABLED))
        raise RuntimeError("the run failed")

    monkeypatch.setattr(script, "run_fidelity_real", fake_run)
    with pytest.raises(RuntimeError):
        script.main(["--", "--folds", "GPU"])
    assert seen == [(["--folds", "GPU"], True)] and ar.ENABLED is False
    with pytest.raises(TwinInputError, match="after --"):
        script.main([])
    with pytest.raises(SystemExit):
        script.main(["--structure", "x", "--", "--folds", "GPU"])
