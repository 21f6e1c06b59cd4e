"""The measuring client as an input of a run (twin.workload.clients): readers name it, a bad name is a one-line
error, its scope covers that client's runs only, and a fit gives each client's runs their own request path."""

from __future__ import annotations

import dataclasses

import pytest

from tests.fitting_helpers import write_config, write_stage
from twin.errors import TwinInputError
from twin.fitting.fit import Case, fit
from twin.fitting.identify import held_at_prior
from twin.fitting.measured_run import LengthSample, MeasuredRun
from twin.fitting.readers.inference_perf import read_inference_perf
from twin.fitting.replay import Target, cost_model_for, deployment_for, replay
from twin.fitting.scoped import in_scope, params_for
from twin.fitting.silicon import row_run
from twin.fitting.silicon_rows import read_silicon
from twin.workload.clients import CLIENT_SCOPES, check_client, client_scope

METRICS = {"mean_ttft_ms": 30.0, "median_ttft_ms": 28.0, "p90_ttft_ms": 35.0, "p99_ttft_ms": 50.0,
           "mean_e2el_ms": 330.0, "median_e2el_ms": 320.0, "p99_e2el_ms": 400.0}
TARGET = Target("llama-2-7b", "H100-SXM", 1)


def _run(name: str, client: str | None, conc: int = 4, requests_per_user: int = 3,
         output_tokens: int = 32) -> MeasuredRun:
    """A closed-loop run of ``conc`` users at 256 prompt tokens (other tests build theirs with it too)."""
    return MeasuredRun(name=name, source="test", num_requests=requests_per_user * conc, rate_per_s=float("inf"),
                       max_concurrency=conc, prompt_tokens=LengthSample.constant(256),
                       output_tokens=LengthSample.constant(output_tokens), metrics={"completed": 1.0},
                       server={"enable_prefix_caching": False, "vllm_version": "0.14"}, experiment=name,
                       client=client)


def test_client_names_and_scopes():
    assert client_scope("vllm-bench") == "client_vllm_bench"
    assert CLIENT_SCOPES == ("client_vllm_bench", "client_inference_perf", "client_aiperf", "client_guidellm")
    assert check_client(None, "x") is None and check_client("inference-perf", "x") == "inference-perf"


def test_an_unknown_client_is_a_one_line_error_naming_the_run():
    with pytest.raises(TwinInputError) as exc:
        _run("r1", "curl")
    msg = str(exc.value)
    assert msg.startswith("r1: client: client = 'curl': allowed vllm-bench, inference-perf") and "\n" not in msg


def test_readers_name_their_client(tmp_path):
    d = tmp_path / "exp"
    write_config(d, model="meta-llama/Llama-2-7b-hf", tp=1, groups=2, per_group=2, system_tokens=50,
                 question_tokens=100, output_tokens=20, stages=[(5.0, 60.0)], server={})
    write_stage(d, 0, rate=5.0, duration_s=60.0, metrics=METRICS,
                prompt_tokens=150, output_tokens=20)
    assert [r.client for r in read_inference_perf(d)] == ["inference-perf"]


def test_silicon_rows_with_a_published_client_are_vllm_bench_the_others_unknown():
    rows = read_silicon()
    published = next(r for r in rows if r.published_client)
    gap = next((r for r in rows if not r.published_client), None)
    assert row_run(published).client == "vllm-bench"
    if gap is not None:
        assert row_run(gap).client is None


def test_the_client_scope_covers_that_clients_runs_only():
    bench, iperf, unknown = (deployment_for(_run(n, c), TARGET) for n, c in
                             (("a", "vllm-bench"), ("b", "inference-perf"), ("c", None)))
    assert in_scope("client_vllm_bench", bench) and not in_scope("client_vllm_bench", iperf)
    assert in_scope("client_inference_perf", iperf) and not in_scope("client_inference_perf", unknown)
    params = {"request_path_s": 4.8e-3, "request_path_s@client_vllm_bench": 17e-3}
    assert params_for(params, bench) == {"request_path_s": 17e-3}
    assert params_for(params, iperf) == {"request_path_s": 4.8e-3}
    assert cost_model_for(bench, TARGET, params).request_path_s == 17e-3
    assert cost_model_for(unknown, TARGET, params).request_path_s == 4.8e-3


def test_the_unscoped_path_is_identified_by_the_other_clients_runs_only():
    only_bench = [Case(_run("a", "vllm-bench"), TARGET)]
    held = held_at_prior(only_bench, ["request_path_s", "request_path_s@client_vllm_bench"])
    assert held == {"request_path_s": "no run (outside client_vllm_bench) in the data"}
    held = held_at_prior([Case(_run("b", "inference-perf"), TARGET)], ["request_path_s@client_vllm_bench"])
    assert held == {"request_path_s@client_vllm_bench": "no run (client_vllm_bench) in the data"}


@pytest.mark.slow
def test_a_fit_gives_each_clients_runs_their_own_request_path():
    true = {"request_path_s": 5e-3, "request_path_s@client_vllm_bench": 20e-3, "request_path_jitter_s": 0.0}
    cases = []
    for client in ("vllm-bench", "inference-perf"):
        for conc in (2, 8):
            run = _run(f"{client}-{conc}", client, conc)
            m = replay(run, TARGET, true).metrics
            cases.append(Case(dataclasses.replace(run, metrics={k: m[k] for k in (
                "mean_ttft_ms", "median_ttft_ms", "mean_tpot_ms", "mean_e2el_ms")}), TARGET))
    names = ("request_path_s", "request_path_s@client_vllm_bench")
    res = fit(cases, names=names, start={"request_path_s": 10e-3, "request_path_s@client_vllm_bench": 10e-3,
                                         "request_path_jitter_s": 0.0}, fixed={"request_path_jitter_s": 0.0},
              outer_iterations=2)
    # stated tolerance: 0.5 ms of each (the other costs are the generator's own)
    assert res.params["request_path_s"] == pytest.approx(5e-3, abs=0.5e-3)
    assert res.params["request_path_s@client_vllm_bench"] == pytest.approx(20e-3, abs=0.5e-3)
