"""A scenario started on a freshly started server (``server_start: cold``, twin.sim.cold_server): validated, the
default warm and unchanged, the one-off stalls of a priced deployment reported and paid, an unpriced deployment
run exactly as warm."""

from __future__ import annotations

import pytest

from twin.cost.cold_compile import KERNELS_PER_SPECIALISATION, TRITON_COMPILE_S_PER_KERNEL
from twin.errors import TwinInputError
from twin.scenario import Scenario
from twin.sim.cold_server import cold_start_line
from twin.sim.run import metrics_of, run_body

WORKLOAD = {"arrivals": {"process": "closed_loop", "concurrency": 4}, "num_requests": 24,
            "classes": [{"name": "chat", "share": 1.0, "prompt": {"suffix_tokens": 700}, "output_tokens": 16}]}
MIXTRAL = {"deployment": {"gpu": "H100-SXM", "model": "mixtral-8x7b", "tensor_parallel_size": 2},
           "server": {"max_num_seqs": 64}, "workload": WORKLOAD}
DENSE = {"deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b"}, "workload": WORKLOAD}
STALL_S = KERNELS_PER_SPECIALISATION * TRITON_COMPILE_S_PER_KERNEL


def _run(data: dict, start: str | None):
    body = Scenario(data if start is None else {**data, "server_start": start}).body()
    result = run_body(body)
    return result, metrics_of(result, body)


def test_the_default_is_a_warm_server_and_bad_values_are_one_line_errors():
    assert Scenario(MIXTRAL).body().server_start == "warm"
    assert Scenario({**MIXTRAL, "variants": {"fresh": {"server_start": "cold"}}}).body("fresh").server_start == "cold"
    with pytest.raises(TwinInputError) as bad:
        Scenario({**MIXTRAL, "server_start": "frozen"})
    assert "server_start" in str(bad.value) and "'warm' or 'cold'" in str(bad.value) and "\n" not in str(bad.value)
    pd = {"deployment": {"model": "llama-3.1-8b"}, "workload": WORKLOAD, "server_start": "cold",
          "disaggregation": {"prefill": {"replicas": 1}, "decode": {"replicas": 1}}}
    with pytest.raises(TwinInputError, match="server_start: 'cold' with disaggregation is not modelled"):
        Scenario(pd)


def test_a_cold_mixtral_server_pays_and_reports_its_compile_stalls():
    warm, wm = _run(MIXTRAL, None)
    explicit, em = _run(MIXTRAL, "warm")
    cold, cm = _run(MIXTRAL, "cold")
    assert "cold_start" not in warm.config and em == wm                  # warm: nothing built, same run
    cs = cold.config["cold_start"]
    assert cs["priced"] and cs["replicas_priced"] == 1 and cs["terms"] == ["triton_fused_moe_compile"]
    assert cs["stalls"] >= 1 and cs["stall_time_s"] == pytest.approx(cs["stalls"] * STALL_S)
    assert cs["stall_s_per_specialisation"] == pytest.approx(STALL_S) and cs["specialisations_per_replica"] >= 13
    assert cm["completed"] == wm["completed"] and cm["total_output_tokens"] == wm["total_output_tokens"]
    assert cm["mean_ttft_ms"] > wm["mean_ttft_ms"] and cm["mean_e2el_ms"] > wm["mean_e2el_ms"]
    # the stalls delay the run by at most their own time (queueing behind them included, closed loop)
    assert 0 < cm["duration"] - wm["duration"] <= cs["stall_time_s"] + 1e-9
    stalls = f"{cs['stalls']} one-off compile stall{'' if cs['stalls'] == 1 else 's'} met"
    assert stalls in cold_start_line(cs) and "(s)" not in cold_start_line(cs)


def test_an_unpriced_deployment_runs_cold_exactly_as_warm_and_says_so():
    warm, wm = _run(DENSE, None)
    cold, cm = _run(DENSE, "cold")
    cs = cold.config["cold_start"]
    assert not cs["priced"] and cs["stalls"] == 0 and cs["stall_time_s"] == 0.0 and cs["terms"] == []
    assert cm == wm
    assert "no cold-start term is priced" in cold_start_line(cs)


def test_each_replica_of_a_cluster_is_its_own_fresh_server():
    data = {**MIXTRAL, "deployment": {**MIXTRAL["deployment"], "replicas": 2},
            "workload": {**WORKLOAD, "arrivals": {"process": "closed_loop", "concurrency": 8}, "num_requests": 48}}
    cold, _ = _run(data, "cold")
    cs = cold.config["cold_start"]
    assert cs["replicas_priced"] == 2 and cs["stalls"] >= 2      # both servers meet their first specialisation
