"""The capacity planner: it finds the known optimum of a constructed case, its max-rate bisection agrees with
direct runs, replications give intervals, pruning does not change the answer, bad input is one line."""

from __future__ import annotations

import json
import math

import pytest
import yaml
from click.testing import CliRunner

from twin.sim.run import metrics_of, run_body
from twin.cli.main import main
from twin.errors import TwinInputError
from twin.plan.evaluate import (
    Criteria,
    SimJob,
    effective_replications,
    judge,
    offered_rate,
    replication_data,
    scale_arrivals,
)
from twin.plan.executor import Runner, SerialExecutor, make_executor
from twin.plan.capacity import bisect_scale
from twin.plan.plan_result import pareto
from twin.plan.plan_spec import PlanSpec
from twin.plan.planner import Planner, plan
from twin.hardware.pricing import (
    PriceTable,
    default_prices,
    parse_price_options,
    usd_per_million_tokens,
)
from twin.scenario import Scenario

STEP_S = 0.01
OUTPUT_TOKENS = 10


def constant_case(process: str = "constant", rate: float = 20.0, duration: float = 4.0) -> dict:
    """Every step costs STEP_S whatever it holds, every request wants OUTPUT_TOKENS tokens: a replica capped at
    B sequences completes B / (OUTPUT_TOKENS * STEP_S) requests per second, no more."""
    return {
        "name": "constant", "deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b"},
        "server": {"max_model_len": 4096, "num_gpu_blocks_override": 2048},  # a small pool builds fast
        "cost_model": {"kind": "constant", "params": {"step_s": STEP_S}},
        "workload": {"arrivals": {"process": process, "rate_per_s": rate}, "duration_s": duration,
                     "classes": [{"name": "c", "share": 1.0, "prompt": {"suffix_tokens": 100},
                                  "output_tokens": OUTPUT_TOKENS}]},
    }


def capacity(max_num_seqs: int) -> float:
    return max_num_seqs / (OUTPUT_TOKENS * STEP_S)


PRICES = PriceTable({"A100-SXM-80GB": 1.0, "H100-SXM": 2.5, "H200-SXM": 4.0}, use_defaults=False)
SLO = Criteria({"ttft_ms": {"p99": 100}})


def test_planner_finds_the_known_optimum():
    # capacities 40, 80, 160 req/s at $1, $2.5, $4 per replica-hour; 100 req/s needs 3, 2 and 1 replicas:
    # $3, $5 and $4. The cheapest is 3 x A100 although one H200 alone would do.
    cands = [{"deployment.gpu": "A100-SXM-80GB", "server.max_num_seqs": 4},
             {"deployment.gpu": "H100-SXM", "server.max_num_seqs": 8},
             {"deployment.gpu": "H200-SXM", "server.max_num_seqs": 16}]
    spec = PlanSpec(constant_case(), SLO, target_rate=100, prices=PRICES, candidates=cands, replications=1,
                    router="round_robin")
    result = plan(spec, SerialExecutor())
    rates = {c["gpu"]: c["max_rate_per_s"] for c in result.candidates}
    for c, b in zip(cands, (4, 8, 16)):
        assert capacity(b) * 0.95 <= rates[c["deployment.gpu"]] <= capacity(b) * 1.001
    minimal = {d["gpu"]: d["replicas"] for d in result.deployments if d.get("minimal")}
    assert minimal == {"A100-SXM-80GB": 3, "H100-SXM": 2, "H200-SXM": 1}
    best = result.best
    assert (best["gpu"], best["replicas"], best["cost_per_hour"]) == ("A100-SXM-80GB", 3, 3.0)
    assert best["max_num_seqs"] == 4 and best["tensor_parallel_size"] == 1
    assert result.frontier[0]["cost_per_hour"] == 3.0
    # cost per million output tokens at the target: $3/h over 100 req/s x 10 tokens
    assert best["usd_per_million_output_tokens"] == pytest.approx(3.0 / (100 * OUTPUT_TOKENS * 3600) * 1e6, rel=0.05)
    a100 = next(c for c in result.candidates if c["gpu"] == "A100-SXM-80GB")
    assert a100["usd_per_million_output_tokens_at_max_rate"] == pytest.approx(
        1.0 / (40 * OUTPUT_TOKENS * 3600) * 1e6, rel=0.06)
    # tensor parallelism costs GPUs: TP=2 doubles a replica's price
    spec2 = PlanSpec(constant_case(), SLO, target_rate=100, prices=PRICES, replications=1, router="round_robin",
                     candidates=[{"deployment.gpu": "A100-SXM-80GB", "deployment.tensor_parallel_size": 2,
                                  "server.max_num_seqs": 4}])
    r2 = plan(spec2, SerialExecutor())
    assert r2.best["cost_per_hour"] == 6.0 and r2.best["gpus"] == 6


def test_pruning_keeps_the_answer_and_saves_simulations():
    space = [("deployment.gpu", ["A100-SXM-80GB"]), ("server.max_num_seqs", [8, 2, 4])]
    kw = {"target_rate": 60, "prices": PRICES, "space": space, "replications": 1, "frontier_extra": 0}
    pruned = plan(PlanSpec(constant_case(), SLO, **kw), SerialExecutor())
    full = plan(PlanSpec(constant_case(), SLO, prune=False, **kw), SerialExecutor())
    assert pruned.best["max_num_seqs"] == full.best["max_num_seqs"] == 8
    assert pruned.best["replicas"] == full.best["replicas"] == 1
    statuses = [c["status"] for c in pruned.candidates]
    assert statuses == ["measured", "pruned", "pruned"]
    for c in pruned.candidates[1:]:
        assert c["max_rate_upper_bound"] <= capacity(8) * 1.06
    assert pruned.num_simulations < full.num_simulations
    assert [c["status"] for c in full.candidates] == ["measured"] * 3


def test_bisection_agrees_with_direct_runs():
    data = constant_case("poisson", rate=30.0, duration=6.0)
    data["server"]["max_num_seqs"] = 4
    criteria = Criteria({"ttft_ms": {"p99": 200}})
    runner = Runner(SerialExecutor())
    for replication in (0, 1):
        bracket = runner.drive(bisect_scale(lambda s, r=replication: SimJob(data, None, r, s, criteria=criteria),
                                            start=1.0, rel_tol=0.02))
        assert bracket.lo is not None and bracket.hi is not None
        assert bracket.hi / bracket.lo <= 1.02 + 1e-12
        for scale, expect in ((bracket.lo, True), (bracket.hi, False)):
            scaled = scale_arrivals({**data, "slo": {"ttft_ms": {"p99": 200}}}, scale)
            body = Scenario(scaled).body()
            metrics = metrics_of(run_body(body, replication=replication), body)
            assert judge(metrics, criteria)[0] is expect, (replication, scale, metrics["p99_ttft_ms"])
        # every probe below lo passed and every probe above hi failed
        assert all(ok for s, ok in bracket.trail if s <= bracket.lo)
        assert not any(ok for s, ok in bracket.trail if s >= bracket.hi)


def test_replications_give_a_confidence_interval():
    data = constant_case("poisson", rate=20.0, duration=6.0)
    spec = PlanSpec(data, Criteria({"ttft_ms": {"p99": 150}}), target_rate=30, prices=PRICES, replications=3,
                    candidates=[{"deployment.gpu": "A100-SXM-80GB", "server.max_num_seqs": 4}], frontier_extra=0)
    result = plan(spec, SerialExecutor())
    (c,) = result.candidates
    reps = c["max_rate_per_replication"]
    assert len(reps) == 3 and len(set(reps)) > 1
    assert c["max_rate_ci_low"] < c["max_rate_per_s"] < c["max_rate_ci_high"]
    assert c["max_rate_per_s"] == pytest.approx(sum(reps) / 3)
    assert c["max_rate_per_s"] < capacity(4)
    assert result.best["passed"]


def test_plans_are_the_same_on_every_backend():
    cands = [{"deployment.gpu": "A100-SXM-80GB", "server.max_num_seqs": 4},
             {"deployment.gpu": "H200-SXM", "server.max_num_seqs": 16}]
    spec = PlanSpec(constant_case("poisson", 20.0, 3.0), SLO, target_rate=60, prices=PRICES, candidates=cands,
                    replications=2)
    serial = plan(spec, SerialExecutor()).to_dict()
    with make_executor("process", 2) as ex:
        pooled = plan(spec, ex).to_dict()
    for d in (serial, pooled):
        d.pop("wall_s")
    assert json.dumps(serial, sort_keys=True, default=str) == json.dumps(pooled, sort_keys=True, default=str)


def test_infeasible_candidates_are_reported_not_fatal():
    cands = [{"deployment.gpu": "A100-SXM-80GB", "deployment.tensor_parallel_size": 3},
             {"deployment.gpu": "L4"},
             {"deployment.gpu": "A100-SXM-80GB", "server.max_num_seqs": 4}]
    spec = PlanSpec(constant_case(), SLO, target_rate=30, prices=PRICES, candidates=cands, replications=1,
                    frontier_extra=0)
    result = plan(spec, SerialExecutor())
    notes = [c.get("note", "") for c in result.candidates]
    assert result.candidates[0]["status"] == "infeasible" and "tensor_parallel_size = 3" in notes[0]
    assert result.candidates[1]["status"] == "infeasible" and "no price for GPU 'L4'" in notes[1]
    assert result.best["gpu"] == "A100-SXM-80GB"


def test_rate_scaling_and_offered_rate(tmp_path):
    poisson = constant_case("poisson", rate=8.0)
    assert scale_arrivals(poisson, 2.5)["workload"]["arrivals"]["rate_per_s"] == 20.0
    assert poisson["workload"]["arrivals"]["rate_per_s"] == 8.0  # a copy
    assert offered_rate(poisson) == 8.0
    pw = constant_case()
    pw["workload"]["arrivals"] = {"process": "piecewise", "schedule": [{"until_s": 2, "rate_per_s": 5},
                                                                       {"rate_per_s": 10}]}
    assert [p["rate_per_s"] for p in scale_arrivals(pw, 2)["workload"]["arrivals"]["schedule"]] == [10, 20]
    ramp = constant_case()
    ramp["workload"]["arrivals"] = {"process": "ramp_up", "strategy": "linear", "start_rps": 1, "end_rps": 4}
    assert scale_arrivals(ramp, 2)["workload"]["arrivals"] == {"process": "ramp_up", "strategy": "linear",
                                                               "start_rps": 2.0, "end_rps": 8.0}
    trace = tmp_path / "t.csv"
    trace.write_text("num_prefill_tokens,num_decode_tokens\n100,10\n200,20\n")
    azure = tmp_path / "azure.csv"
    rows = [f"2023-11-16 18:00:{s:02d}.0000000,{100 + s},{10 + s}" for s in range(0, 40, 2)]
    azure.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\n")
    tr = {"workload": {"trace": {"path": str(azure), "format": "azure", "window_s": 20}}}
    assert scale_arrivals(tr, 3)["workload"]["trace"]["time_scale"] == 3
    assert offered_rate(tr) == pytest.approx(10 / 20)
    # a trace replayed as it is has nothing random: replications are successive windows of it
    assert replication_data(tr, 1)["workload"]["trace"]["start_s"] == 20
    assert effective_replications(tr, 5) == 5
    assert effective_replications({"workload": {"trace": {"path": str(azure)}}}, 5) == 1
    assert effective_replications(poisson, 5) == 5
    closed = constant_case()
    closed["workload"]["arrivals"] = {"process": "closed_loop", "concurrency": 4}
    with pytest.raises(TwinInputError, match="closed_loop"):
        scale_arrivals(closed, 2)
    with pytest.raises(TwinInputError, match="rate scale"):
        scale_arrivals(poisson, 0)


def test_prices_and_costs():
    table = PriceTable()
    assert table.price("h100") == default_prices()["H100-SXM"]  # aliases and case resolve
    assert PriceTable({"H100-SXM": 1.5}).price("H100-SXM") == 1.5
    assert parse_price_options(["A100-SXM-80GB=1.2"]) == {"A100-SXM-80GB": 1.2}
    with pytest.raises(TwinInputError, match="GPU=USD"):
        parse_price_options(["A100"])
    with pytest.raises(TwinInputError, match="no price"):
        PriceTable({}, use_defaults=False).price("H100-SXM")
    assert usd_per_million_tokens(3.6, 1000) == pytest.approx(1.0)
    assert usd_per_million_tokens(3.6, 0) is None
    pts = [{"c": 1, "l": 5}, {"c": 2, "l": 6}, {"c": 3, "l": 2}, {"c": 3, "l": 1}]
    assert [(p["c"], p["l"]) for p in pareto(pts, "c", "l")] == [(1, 5), (3, 1)]


def test_criteria():
    assert Criteria({"ttft_ms": 500}).effective_goodput == 0.99
    assert Criteria({"ttft_ms": {"p99": 500}}).effective_goodput is None
    m = {"num_requests": 100, "completed": 100, "num_good_requests": 98, "num_rejected": 0,
         "num_incomplete": 0, "slo_met": {"p99_ttft_ms": True}}
    assert judge(m, Criteria({"ttft_ms": {"p99": 500}})) == (True, [])
    ok, why = judge(m, Criteria({"ttft_ms": {"p99": 500}}, goodput=0.99))
    assert not ok and "goodput fraction 0.9800 < 0.99" in why[0]
    with pytest.raises(TwinInputError, match="goodput"):
        Criteria({"ttft_ms": 1}, goodput=1.5)
    with pytest.raises(TwinInputError, match="slo"):
        PlanSpec(constant_case(), Criteria(None))


def test_plan_cli_with_a_plan_file(tmp_path):
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(yaml.safe_dump({
        "scenario": constant_case("constant", 20.0, 3.0), "target_rate_per_s": 70,
        "slo": {"ttft_ms": {"p99": 100}}, "prices": {"A100-SXM-80GB": 1.0, "H100-SXM": 2.5},
        "search": {"deployment.gpu": ["A100-SXM-80GB", "H100-SXM"], "server.max_num_seqs": [4]},
        "replications": 1, "router": "round_robin",
    }))
    out_json, out_csv, out_html = tmp_path / "p.json", tmp_path / "c.csv", tmp_path / "f.html"
    res = CliRunner().invoke(main, ["plan", str(plan_file), "--backend", "serial", "-q", "--json", str(out_json),
                                    "--csv", str(out_csv), "--plot", str(out_html)])
    assert res.exit_code == 0, res.output
    assert "cheapest: 2 x A100-SXM-80GB" in res.output
    doc = json.loads(out_json.read_text())
    assert doc["best"]["replicas"] == 2 and doc["best"]["cost_per_hour"] == 2.0
    assert math.isclose(doc["target_rate_per_s"], 70)
    assert "max_rate_per_s" in out_csv.read_text().splitlines()[0]
    assert "plotly" in out_html.read_text()[:5000].lower()
    # CLI options override the file; bad input is one line, exit 2
    res = CliRunner().invoke(main, ["plan", str(plan_file), "--backend", "serial", "-q", "--price", "A100=oops"])
    assert res.exit_code == 2 and "not a number" in res.output
    res = CliRunner().invoke(main, ["plan", str(plan_file), "--backend", "serial", "-q",
                                    "--search", "deployment.gpu=H100-SXM", "--target-rate", "50"])
    assert res.exit_code == 0 and "cheapest: 1 x H100-SXM" in res.output


def test_default_space_and_planner_setup():
    from twin.plan.plan_spec import default_space

    data = constant_case()
    space = dict(default_space(data))
    assert space["deployment.gpu"][:1] == ["H100-SXM"] and "A100-SXM-80GB" in space["deployment.gpu"]
    assert "server.enable_prefix_caching" not in space  # nothing to share
    data["workload"]["classes"][0]["prompt"]["shared_prefix_tokens"] = 500
    assert dict(default_space(data))["server.enable_prefix_caching"] == [True, False]
    p = Planner(PlanSpec(constant_case(), SLO, target_rate=50, prices=PRICES, replications=1))
    assert p.base_rate == 20 and p.target_scale == 2.5
    assert len(p.candidates) == 3 * 1 * 3
