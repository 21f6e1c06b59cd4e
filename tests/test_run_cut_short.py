"""A run cut by ``max_sim_time_s`` before requests reach the engine: every request it made is accounted for
(incomplete, not 'finished' without times), and its metrics come out."""

from __future__ import annotations

from twin.deploy.run import run_body
from twin.results.records import FINISHED, INCOMPLETE
from twin.scenario import ScenarioBody


def body(max_sim_time_s: float, rate_per_s: float = 2000.0, **server) -> ScenarioBody:
    return ScenarioBody.model_validate({
        "name": "cut", "seed": 0, "max_sim_time_s": max_sim_time_s,
        "deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b"},
        "server": server,
        "workload": {"arrivals": {"process": "poisson", "rate_per_s": rate_per_s}, "num_requests": 50,
                     "dataset": {"kind": "random", "input_len": 2000, "output_len": 20}},
    })


def test_requests_still_on_the_request_path_are_incomplete():
    result = run_body(body(0.002))       # the request path (~5 ms) is longer than the run
    assert result.requests and {r.status for r in result.requests} == {INCOMPLETE}
    assert result.metrics()["completed"] == 0


def test_a_cut_mid_run_leaves_finished_requests_with_their_times():
    result = run_body(body(1.0, rate_per_s=20.0))
    statuses = [r.status for r in result.requests]
    assert FINISHED in statuses and INCOMPLETE in statuses and set(statuses) <= {FINISHED, INCOMPLETE}
    assert all(r.first_token_s is not None and r.finish_s is not None
               for r in result.requests if r.status == FINISHED)
    assert result.metrics()["completed"] == statuses.count(FINISHED)
