"""``twin plan`` over P:D ratios (twin.plan.pd_plan): the grid, the cost of both pools, the cheapest passing
point and the frontier."""

from __future__ import annotations

from twin.hardware.pricing import PriceTable
from twin.plan.evaluate import Criteria
from twin.plan.executor import Runner, SerialExecutor
from twin.plan.pd_plan import PD_KEYS, pd_points, plan_pd

DATA = {
    "deployment": {"gpu": "A100-SXM-80GB", "model": "llama-3.1-8b"},
    "cost_model": {"kind": "constant", "params": {"step_s": 0.01, "per_token_s": 1e-5}},
    "workload": {"arrivals": {"process": "poisson", "rate_per_s": 100}, "num_requests": 400,
                 "dataset": {"kind": "random", "input_len": 1000, "output_len": 10, "range_ratio": 0.0,
                             "ignore_eos": True}},
    "disaggregation": {"prefill": {"replicas": 1}, "decode": {"replicas": 1},
                       "link": {"kind": "infiniband", "bandwidth_gb_s": 25}},
    "slo": {"ttft_ms": {"p99": 500}},
}


def test_the_grid_defaults_to_one_to_four_engines_per_pool():
    pts = pd_points([])
    assert len(pts) == 16 and pts[0] == {PD_KEYS[0]: 1, PD_KEYS[1]: 1} and pts[-1] == {PD_KEYS[0]: 4, PD_KEYS[1]: 4}
    pts = pd_points([(PD_KEYS[0], [1, 2]), ("server.kv_offloading_size", [None, 64])])
    assert len(pts) == 2 * 4 * 2 and list(pts[0]) == [*PD_KEYS, "server.kv_offloading_size"]


def test_plan_prices_both_pools_and_picks_the_cheapest_passing_point():
    prices = PriceTable({"A100-SXM-80GB": 2.0})
    with SerialExecutor() as ex:
        out = plan_pd(DATA, base_dir=None, criteria=Criteria(DATA["slo"]), prices=prices, target_rate=None,
                      space=[(PD_KEYS[0], [1, 2, 3]), (PD_KEYS[1], [1, 2])], replications=1, runner=Runner(ex))
    rows = {r["config"]: r for r in out["rows"]}
    assert set(rows) == {"1P1D", "1P2D", "2P1D", "2P2D", "3P1D", "3P2D"}
    assert rows["2P1D"]["gpus"] == 3 and rows["2P1D"]["usd_per_hour"] == 3 * 2.0
    # one prefill engine at 100 req/s of 1000-token prompts (2 prompts per 30 ms step: ~65 req/s) falls behind
    assert not rows["1P1D"]["passed"] and not rows["1P2D"]["passed"]
    passing = [r for r in out["rows"] if r["passed"]]
    assert passing and out["cheapest"]["usd_per_hour"] == min(r["usd_per_hour"] for r in passing)
    costs = [r["usd_per_hour"] for r in out["frontier"]]
    lat = [r["p99_ttft_ms"] for r in out["frontier"]]
    assert costs == sorted(costs) and lat == sorted(lat, reverse=True)


def test_twin_plan_on_a_pd_scenario_prints_the_grid_and_the_cheapest(tmp_path):
    import yaml
    from click.testing import CliRunner

    from twin.cli.main import main

    path = tmp_path / "pd.yaml"
    path.write_text(yaml.safe_dump({"name": "pd", "description": "test", **DATA}))
    out = tmp_path / "plan.json"
    res = CliRunner().invoke(main, ["plan", str(path), "--search", "disaggregation.prefill.replicas=1,2",
                                    "--search", "disaggregation.decode.replicas=1", "--replications", "1",
                                    "--price", "A100-SXM-80GB=2", "--workers", "1", "-q", "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "| 1P1D |" in res.output and "| 2P1D |" in res.output and "cheapest: 2P1D" in res.output
    import json

    assert json.loads(out.read_text())["cheapest"]["config"] == "2P1D"
