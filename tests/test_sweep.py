"""Sweeps: grids parse, results are identical on every backend and worker count (Ray included), pruning
along the rate axis agrees with running everything, tables and plots are written."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from twin.cli.main import main
from twin.errors import TwinInputError
from twin.plan.evaluate import Criteria
from twin.plan.executor import Runner, SerialExecutor, gather, make_executor, run_once
from twin.plan.grid import parse_grid_options
from twin.plan.sweep import SweepSpec, run_sweep
from twin.plan.sweep_tables import summarize


def scenario(rate: float = 20.0) -> dict:
    return {
        "name": "sweep-test", "deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b"},
        "server": {"max_model_len": 4096, "num_gpu_blocks_override": 2048},
        "cost_model": {"kind": "constant", "params": {"step_s": 0.01, "per_token_s": 1e-5}},
        "workload": {"arrivals": {"process": "poisson", "rate_per_s": rate}, "duration_s": 3,
                     "classes": [{"name": "c", "share": 1.0, "prompt": {"suffix_tokens": {"uniform": [50, 150]}},
                                  "output_tokens": {"uniform": [5, 15]}}]},
    }


GRID = ["server.max_num_seqs=2,4,8", "rate_scale=0.5,1,2,4"]
SLO = Criteria({"ttft_ms": {"p99": 150}})


def spec(prune: str = "monotone", grid=GRID, replications: int = 2) -> SweepSpec:
    return SweepSpec(scenario(), parse_grid_options(grid), replications=replications, criteria=SLO, prune=prune)


def comparable(rows):
    return json.dumps(rows, sort_keys=True, default=str)


def test_parse_grid_options():
    grid = parse_grid_options(["server.max_num_seqs=4,16,64", "deployment.gpu=H100-SXM,A100-SXM-80GB",
                               "server.enable_prefix_caching=true,false", "server.max_num_batched_tokens=null,2048",
                               "speculative_decoding=[null, {method: ngram, num_speculative_tokens: 3}]"])
    assert grid[0] == ("server.max_num_seqs", [4, 16, 64])
    assert grid[1] == ("deployment.gpu", ["H100-SXM", "A100-SXM-80GB"])
    assert grid[2][1] == [True, False] and grid[3][1] == [None, 2048]
    assert grid[4][1] == [None, {"method": "ngram", "num_speculative_tokens": 3}]
    for bad, msg in ((["nokey"], "expected key.path"), (["a=1", "a=2"], "given twice"),
                     (["rate_scale=1", "rate=2"], "not both"), (["rate_scale=0,1"], "not a rate"),
                     (["a..b=1"], "dotted")):
        with pytest.raises(TwinInputError, match=msg):
            parse_grid_options(bad)


def test_results_identical_on_every_backend_and_worker_count():
    s = spec()
    serial = run_sweep(s, SerialExecutor())
    with make_executor("process", 2) as ex:
        pooled = run_sweep(s, ex)
    with make_executor("process", 1) as ex:
        one = run_sweep(s, ex)
    assert comparable(serial) == comparable(pooled) == comparable(one)
    assert len(serial) > 0 and all(r["status"] in ("ok", "pruned") for r in serial)


def test_ray_backend_gives_the_process_pool_results():
    ray = pytest.importorskip("ray")
    s = spec(replications=1)
    with make_executor("process", 2) as ex:
        pooled = run_sweep(s, ex)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        with make_executor("ray") as ex:
            assert ex.backend == "ray"
            remote = run_sweep(s, ex)
    finally:
        ray.shutdown()
    assert comparable(remote) == comparable(pooled)


def test_monotone_pruning_agrees_with_running_everything():
    full = run_sweep(spec("none"), SerialExecutor())
    mono = run_sweep(spec("monotone"), SerialExecutor())
    bis = run_sweep(spec("bisect"), SerialExecutor())

    def verdicts(rows):
        s = summarize(rows, ["server.max_num_seqs"])
        return {(int(r["server.max_num_seqs"]), float(r["rate_scale"])): (r["status"], r["passed"])
                for _, r in s.iterrows()}

    vf, vm, vb = verdicts(full), verdicts(mono), verdicts(bis)
    assert vf.keys() == vm.keys() == vb.keys()
    # the constructed case is monotone in rate: every verdict agrees, whether run, pruned or inferred
    for key, (status, passed) in vf.items():
        assert status == "ok"
        assert vm[key][1] == passed and vb[key][1] == passed, key
    assert any(s == "pruned" for s, _ in vm.values())
    assert any(s.startswith("inferred") for s, _ in vb.values())
    # and the runs the pruned sweeps did are the same runs
    ran = {(r["config"], r["rate_scale"], r["replication"]): r for r in full}
    for r in mono + bis:
        if r["status"] == "ok":
            assert comparable(r) == comparable(ran[(r["config"], r["rate_scale"], r["replication"])])
    n = lambda rows: sum(r["status"] == "ok" for r in rows)
    assert n(bis) <= n(mono) < n(full)


def test_invalid_points_become_error_rows():
    s = SweepSpec(scenario(), parse_grid_options(["deployment.tensor_parallel_size=1,3"]))
    rows = run_sweep(s, SerialExecutor())
    assert [r["status"] for r in rows] == ["ok", "error"]
    assert "tensor_parallel_size = 3" in rows[1]["reasons"]


def test_rate_axis_in_requests_per_second_and_costs():
    from twin.hardware.pricing import PriceTable

    s = SweepSpec(scenario(), parse_grid_options(["rate=10,40"]), prices=PriceTable({"H100-SXM": 2.0}))
    rows = run_sweep(s, SerialExecutor())
    assert [r["rate_scale"] for r in rows] == [0.5, 2.0]
    assert [r["offered_rate_per_s"] for r in rows] == [10.0, 40.0]
    assert rows[0]["cost_per_hour"] == 2.0
    assert rows[0]["usd_per_million_output_tokens"] == pytest.approx(
        2.0 / (rows[0]["output_throughput"] * 3600) * 1e6)


def test_gather_batches_searches_into_waves():
    def search(tag):
        a = yield [tag]
        b = yield [tag, tag]
        return a + b

    class Echo(SerialExecutor):
        pass

    class Job:
        def __init__(self, v):
            self.v = v

        def key(self):
            return repr(self.v)

    runner = Runner(Echo(), fn=lambda j: j.v * 10)
    out = runner.drive(gather([search(Job(1)), search(Job(2)), run_once([])]))
    assert out == [[10, 10, 10], [20, 20, 20], []]
    assert runner.num_run == 2 and runner.num_waves == 1  # repeated jobs run once; a cached wave is free


def test_sweep_cli_writes_tables_and_a_plot(tmp_path):
    import yaml

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario()))
    csv, pq, summary, html = (tmp_path / n for n in ("runs.csv", "runs.parquet", "summary.csv", "plot.html"))
    args = ["sweep", str(path), "--grid", "server.max_num_seqs=2,8", "--grid", "rate_scale=1,4",
            "--slo", "ttft_ms.p99=150", "--backend", "serial", "-q", "--out", str(csv), "--summary-out",
            str(summary), "--plot", str(html), "--price", "H100-SXM=2"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    frame = pd.read_csv(csv)
    assert {"config", "server.max_num_seqs", "rate_scale", "replication", "passed", "p99_ttft_ms",
            "usd_per_million_output_tokens"} <= set(frame.columns)
    assert len(pd.read_csv(summary)) == 4
    assert html.stat().st_size > 100_000
    pytest.importorskip("pyarrow")
    res = CliRunner().invoke(main, args[:-6] + ["--out", str(pq)])
    assert res.exit_code == 0, res.output
    assert pd.read_parquet(pq).shape[0] == frame.shape[0]
    bad = CliRunner().invoke(main, ["sweep", str(path), "--grid", "server.max_num_seqs=0", "-q",
                                    "--backend", "serial"])
    # an invalid value is refused before anything runs, naming the axis and value
    assert bad.exit_code == 2 and "grid server.max_num_seqs=0: server.max_num_seqs: must be >= 1" in bad.stderr
    none = CliRunner().invoke(main, ["sweep", str(path)])
    assert none.exit_code == 2 and "--grid" in none.output


def test_optuna_search_is_deterministic():
    pytest.importorskip("optuna")
    from twin.plan.sweep_optuna import optuna_search

    s = SweepSpec(scenario(), parse_grid_options(["server.max_num_seqs=1,2,4,8,16"]), criteria=SLO)
    a = Runner(SerialExecutor()).drive(optuna_search(s, trials=6, objective="request_throughput", seed=3))
    with make_executor("process", 2) as ex:
        b = Runner(ex).drive(optuna_search(s, trials=6, objective="request_throughput", seed=3))
    assert comparable(a) == comparable(b) and len(a) >= 1


def test_mixed_cluster_groups_as_a_grid_axis():
    from twin.hardware.pricing import PriceTable

    grid = parse_grid_options([("groups=[[{gpu: H100-SXM, replicas: 2}], "
                               "[{gpu: H100-SXM, replicas: 1}, {gpu: A100-SXM-80GB, replicas: 1}]]")])
    s = SweepSpec(scenario(), grid, prices=PriceTable({"H100-SXM": 2.0, "A100-SXM-80GB": 1.0}), per_replica=True)
    rows = run_sweep(s, SerialExecutor())
    assert [r["replicas"] for r in rows] == [2, 2]
    assert [r["cost_per_hour"] for r in rows] == [4.0, 3.0]
    assert rows[1]["gpu"] == "H100-SXM+A100-SXM-80GB"
    per_replica = json.loads(rows[1]["per_replica"])
    assert [r["gpu"] for r in per_replica] == ["H100-SXM", "A100-SXM-80GB"]
    assert sum(r["num_requests"] for r in per_replica) == rows[1]["num_requests"]
