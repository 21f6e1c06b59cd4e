"""A run that met its server cold (twin.fitting.measured_run.COLD_START_UNFITTED): the inference-perf reader marks
the first stage, the fit leaves that run's mean TTFT to the evaluation, and a one-off tail in it does not move
the request path a fit recovers from twin-generated runs."""

from __future__ import annotations

import dataclasses

import pytest

from tests.fitting_helpers import write_config, write_stage
from twin.cli.calibrate_results import runs_table
from twin.fitting.calibrate_fit import calibrate_fit
from twin.fitting.fit import Case, _measured, fit
from twin.fitting.measured_run import COLD_START_UNFITTED, LengthSample, MeasuredRun, is_fit_target
from twin.fitting.readers.inference_perf import read_inference_perf
from twin.fitting.replay import Target, replay

METRICS = {"mean_ttft_ms": 30.0, "median_ttft_ms": 28.0, "p90_ttft_ms": 35.0, "p99_ttft_ms": 50.0,
           "mean_e2el_ms": 330.0, "median_e2el_ms": 320.0, "p99_e2el_ms": 400.0}
TARGET = Target("llama-2-7b", "H100-SXM", 1)


def _run(name: str, conc: int, cold: bool = False) -> MeasuredRun:
    return MeasuredRun(name=name, source="test", num_requests=3 * conc, rate_per_s=float("inf"),
                       max_concurrency=conc, prompt_tokens=LengthSample.constant(256),
                       output_tokens=LengthSample.constant(32), metrics={"completed": 1.0},
                       server={"enable_prefix_caching": False, "vllm_version": "0.14"}, experiment=name,
                       client="inference-perf", cold_start=cold)


def _stalled_runs(concurrencies) -> dict[bool, list[Case]]:
    """Twin-generated runs (a 5 ms request path, no jitter), each measured mean TTFT then given +10 ms of a one-off
    stall (its median and p90 stay: the stall hit 1 % of the requests), marked cold (True) and warm (False)."""
    true = {"request_path_s": 5e-3, "request_path_jitter_s": 0.0}
    cases: dict[bool, list[Case]] = {True: [], False: []}
    for conc in concurrencies:
        run = _run(f"r{conc}", conc)
        m = replay(run, TARGET, true).metrics
        metrics = {k: m[k] for k in ("mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms", "mean_tpot_ms")}
        metrics["mean_ttft_ms"] += 10.0
        for cold in (True, False):
            cases[cold].append(Case(dataclasses.replace(run, metrics=metrics, cold_start=cold), TARGET))
    return cases


def test_the_first_inference_perf_stage_is_cold_the_later_ones_are_not(tmp_path):
    d = tmp_path / "exp"
    write_config(d, model="meta-llama/Llama-2-7b-hf", tp=1, groups=2, per_group=2, system_tokens=50,
                 question_tokens=100, output_tokens=20, stages=[(5.0, 60.0), (10.0, 60.0)], server={})
    for i, rate in enumerate((5.0, 10.0)):
        write_stage(d, i, rate=rate, duration_s=60.0, metrics=METRICS, prompt_tokens=150, output_tokens=20)
    assert [r.cold_start for r in read_inference_perf(d)] == [True, False]
    assert MeasuredRun.__dataclass_fields__["cold_start"].default is False      # other readers: warm


def test_a_cold_runs_mean_ttft_is_not_a_fit_target():
    metrics = {"mean_ttft_ms": 63.0, "median_ttft_ms": 53.0, "p90_ttft_ms": 61.0, "mean_tpot_ms": 18.0}
    warm = Case(dataclasses.replace(_run("w", 4), metrics=metrics), TARGET)
    cold = Case(dataclasses.replace(_run("c", 4, cold=True), metrics=metrics), TARGET)
    assert COLD_START_UNFITTED == ("mean_ttft_ms",)
    assert [k for k, _, _ in _measured(warm)] == ["mean_tpot_ms", "mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms"]
    assert [k for k, _, _ in _measured(cold)] == ["mean_tpot_ms", "median_ttft_ms", "p90_ttft_ms"]
    assert [v for _, v, _ in _measured(cold)] == [18.0, 53.0, 61.0]


def test_a_one_off_tail_in_a_cold_runs_mean_does_not_move_the_fitted_request_path():
    """Twin-generated runs at a 5 ms path; each run's measured mean TTFT then gets +10 ms of a one-off stall
    (its median and p90 stay: the stall hit 1 % of the requests). Marked cold, the fit recovers 5 ms; the same
    runs marked warm pull the path up (the stall is spread over every request)."""
    cases = _stalled_runs((2, 8))
    kw = dict(names=("request_path_s",), start={"request_path_s": 10e-3, "request_path_jitter_s": 0.0},
              fixed={"request_path_jitter_s": 0.0}, outer_iterations=2)
    cold = fit(cases[True], **kw).params["request_path_s"]
    warm = fit(cases[False], **kw).params["request_path_s"]
    # stated tolerance: 0.5 ms (the other costs are the generator's own)
    assert cold == pytest.approx(5e-3, abs=0.5e-3)
    assert warm > 7e-3


def test_is_fit_target_leaves_out_a_cold_runs_mean_ttft_and_unmeasured_metrics():
    metrics = {"mean_ttft_ms": 63.0, "median_ttft_ms": 53.0, "mean_tpot_ms": 0.0}
    warm = dataclasses.replace(_run("w", 4), metrics=metrics)
    cold = dataclasses.replace(_run("c", 4, cold=True), metrics=metrics)
    keys = ("mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms", "mean_tpot_ms")
    assert [k for k in keys if is_fit_target(warm, k)] == ["mean_ttft_ms", "median_ttft_ms"]
    assert [k for k in keys if is_fit_target(cold, k)] == ["median_ttft_ms"]


def test_twin_calibrate_leaves_a_cold_runs_one_off_tail_out_of_the_request_path():
    """``twin calibrate``'s objective on the same twin-generated runs (5 ms path, no jitter) with a +10 ms one-off
    stall in each mean TTFT: marked cold, the fitted time per request (path plus mean jitter, which the fit may
    trade) stays at the generator's; marked warm, the stall pulls it up."""
    cases = _stalled_runs((1, 2, 4, 8))
    fits = {cold: calibrate_fit(cases[cold], replications=1, max_sim_s=10.0, outer_iterations=2, report=False)
            for cold in (True, False)}
    per_request_s = {cold: f.params["request_path_s"] + f.params["request_path_jitter_s"] for cold, f in fits.items()}
    # stated tolerance: 0.5 ms (the other costs are the generator's own; measured 4.99 ms cold, 8.4 ms warm)
    assert per_request_s[True] == pytest.approx(5e-3, abs=0.5e-3)
    assert per_request_s[False] > 7e-3
    roles = {cold: list(runs_table(cases[cold], fits[cold]).columns[1].cells) for cold in (True, False)}
    assert roles == {True: ["latency, cold start: mean TTFT not fitted"] * 4, False: ["latency"] * 4}


# ---- round 11: a cold run's one-off fused-MoE compiles, priced into its means (twin.fitting.cold_start) ----

MIXTRAL_TP2 = Target("mistralai/Mixtral-8x7B-v0.1", "H100-SXM", 2)


def _mixtral_run(cold: bool) -> MeasuredRun:
    """Eight unique 600-token prompts, four at a time: prompt steps above the 256-token graphs."""
    return MeasuredRun(name="m", source="test", num_requests=8, rate_per_s=float("inf"), max_concurrency=4,
                       prompt_tokens=LengthSample.constant(600), output_tokens=LengthSample.constant(8),
                       metrics={"completed": 1.0},
                       server={"enable_prefix_caching": False, "vllm_version": "0.14", "max_num_seqs": 128,
                               "max_num_batched_tokens": 2048, "max_model_len": 4096},
                       experiment="m", client="inference-perf", cold_start=cold)


def test_a_cold_mixtral_run_adds_its_compile_stalls_to_its_means_spread_over_its_requests(monkeypatch):
    from twin.fitting import cold_start
    params = {"request_path_s": 5e-3, "request_path_jitter_s": 0.0}
    warm = replay(_mixtral_run(False), MIXTRAL_TP2, params)
    assert warm.cold_start is None
    cold = replay(_mixtral_run(True), MIXTRAL_TP2, params)
    cs = cold.cold_start
    assert cs.specialisations == 13 and cs.stall_s == pytest.approx(0.74)
    assert cs.stalls >= 1
    for k in ("mean_ttft_ms", "mean_e2el_ms"):
        assert cs.added_ms[k] > 0
        assert cold.metrics[k] == pytest.approx(warm.metrics[k] + cs.added_ms[k], rel=1e-12)
    # a stall shifts every later step: the request whose prompt step paid it waits its whole 740 ms, no request
    # gains, and the sum is spread over the run's 8 requests
    assert cs.added_ms["mean_ttft_ms"] >= 740.0 / 8 - 1e-6
    assert cold.metrics["median_ttft_ms"] == warm.metrics["median_ttft_ms"]       # medians left alone
    monkeypatch.setattr(cold_start, "ENABLED", False)
    off = replay(_mixtral_run(True), MIXTRAL_TP2, params)
    assert off.cold_start is None and off.metrics == warm.metrics


def test_a_cold_dense_run_is_replayed_warm():
    params = {"request_path_s": 5e-3, "request_path_jitter_s": 0.0}
    cold = replay(_run("d", 4, cold=True), TARGET, params)
    warm = replay(_run("d", 4), TARGET, params)
    assert cold.cold_start is None and cold.metrics == warm.metrics


def test_cold_added_spreads_each_metrics_summed_increase_over_the_requests_sent():
    from types import SimpleNamespace as R

    from twin.cost.cold_compile import FUSED_MOE_CONFIGS, ColdCompiles
    from twin.fitting.cold_start import cold_added, with_cold_start
    compiles = ColdCompiles(FUSED_MOE_CONFIGS[("H100-SXM", 8, 7168)], 2, 8, 2048, 256)

    def rec(i, first, finish, out=11):
        return R(request_id=i, arrival_s=0.0, first_token_s=first, finish_s=finish, num_output_tokens=out)
    warm = [rec(0, 0.1, 1.1), rec(1, 0.2, 1.2), rec(2, None, None)]
    cold = [rec(0, 0.1, 1.6), rec(1, 0.9, 2.0), rec(2, 0.5, 1.0)]     # request 2 has no warm first token: skipped
    wrapped = []
    out = cold_added(_mixtral_run(True), warm, lambda wrap: (wrapped.append(wrap(object())), cold)[1], compiles)
    # sums: TTFT 0.7 s, E2E 0.5 + 0.8 s, TPOT (0.05 + 0.01) s; over max(8 requests sent, 3 simulated)
    assert out.added_ms == pytest.approx({"mean_ttft_ms": 700 / 8, "mean_e2el_ms": 1300 / 8,
                                          "mean_tpot_ms": 60 / 8})
    assert out.stalls == 0 and out.specialisations == 13 and len(wrapped) == 1
    assert with_cold_start({"mean_ttft_ms": 50.0, "median_ttft_ms": 40.0}, out) == \
        {"mean_ttft_ms": pytest.approx(50.0 + 87.5), "median_ttft_ms": 40.0}
    assert with_cold_start({"mean_ttft_ms": 50.0}, None) == {"mean_ttft_ms": 50.0}
