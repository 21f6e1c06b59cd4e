"""Per-replica metrics (``twin.results.per_replica``) on a 2-replica run: each replica measured exactly as a
one-replica run of the requests it served, in the result JSON, the ``--replicas-out`` table and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from click.testing import CliRunner

from twin.cli.main import main
from twin.results.export import to_bench_serve_json
from twin.results.per_replica import PER_REPLICA_FIELDS, load_imbalance, per_replica_metrics
from twin.scenario import Scenario
from twin.sim.run import run_body

SLO = {"ttft_ms": 200, "tpot_ms": 50}


def _scenario(replicas: int, rate_per_s: float, num_requests: int) -> dict:
    """Constant arrivals, fixed lengths, no prefix caching: round robin hands replica 0 every other request,
    which is a one-replica run at half the rate (replica 1's is the same run, shifted by one gap)."""
    return {"name": "per-replica", "deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b", "replicas": replicas,
                                                  "router": "round_robin"},
            "server": {"enable_prefix_caching": False, "max_num_seqs": 2},
            "workload": {"arrivals": {"process": "constant", "rate_per_s": rate_per_s},
                         "num_requests": num_requests,
                         "classes": [{"name": "c", "share": 1.0, "prompt": {"suffix_tokens": 512},
                                      "output_tokens": 64}]},
            "slo": SLO, "seed": 0}


def test_each_replica_of_a_round_robin_pair_measures_as_a_one_replica_run_of_its_requests():
    pair = run_body(Scenario(_scenario(2, 40.0, 12)).body())
    one = run_body(Scenario(_scenario(1, 20.0, 6)).body())
    rows = per_replica_metrics(pair, slo=SLO)
    alone = one.metrics(slo=SLO)
    assert [r["replica"] for r in rows] == [0, 1]
    assert [r["num_requests"] for r in rows] == [6, 6] and [r["completed"] for r in rows] == [6, 6]
    assert [r["share_of_requests"] for r in rows] == [0.5, 0.5]
    assert load_imbalance(rows) == 1.0
    assert [r["gpu"] for r in rows] == ["H100-SXM", "H100-SXM"]
    # queueing behind max_num_seqs=2 makes TTFT grow request by request: the comparison is not vacuous
    assert alone["p99_ttft_ms"] > alone["median_ttft_ms"] > 0
    for key in ("request_throughput", "output_throughput", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms",
                "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms", "p99_e2el_ms", "num_good_requests",
                "busy_fraction", "mean_running_batch", "mean_kv_usage", "max_kv_usage"):
        assert rows[0][key] == alone[key], key
    # replica 1's requests draw other request-path delays (by request index): its row from its own records
    mine = [r for r in pair.requests if r.replica == 1]
    assert [r.arrival_s for r in mine] == [0.025, 0.075, 0.125, 0.175, 0.225, 0.275]
    duration = max(r.finish_s for r in mine) - 0.025
    assert rows[1]["request_throughput"] == 6 / duration
    assert rows[1]["output_throughput"] == 6 * 64 / duration
    assert rows[1]["mean_ttft_ms"] == float(np.mean([r.ttft_s for r in mine])) * 1000
    assert rows[1]["p99_tpot_ms"] == float(np.percentile([r.tpot_s for r in mine], 99)) * 1000
    assert rows[1]["mean_ttft_ms"] != rows[0]["mean_ttft_ms"]
    # the whole pair serves twice the requests in the same time (the second replica starts one gap later)
    whole = pair.metrics(slo=SLO)
    assert whole["completed"] == 12
    assert sum(r["num_good_requests"] for r in rows) == whole["num_good_requests"]


def test_per_replica_rows_in_the_json_and_only_for_more_than_one_replica():
    pair = run_body(Scenario(_scenario(2, 40.0, 12)).body())
    doc = to_bench_serve_json(pair, SLO)
    assert doc["twin"]["per_replica"] == per_replica_metrics(pair, slo=SLO)
    assert doc["twin"]["load_imbalance"] == 1.0
    one = run_body(Scenario(_scenario(1, 20.0, 6)).body())
    assert "per_replica" not in to_bench_serve_json(one, SLO)["twin"]


def test_cli_writes_the_per_replica_table_and_json(tmp_path):
    path = tmp_path / "pair.yaml"
    path.write_text(json.dumps(_scenario(2, 40.0, 12)))    # JSON is YAML
    out_csv, out_json = tmp_path / "replicas.csv", tmp_path / "out.json"
    res = CliRunner().invoke(main, ["run", str(path), "--quiet", "--replicas-out", str(out_csv),
                                    "--json", str(out_json)])
    assert res.exit_code == 0, res.output
    assert "per replica (load imbalance 1.00" in res.output
    frame = pd.read_csv(out_csv)
    assert list(frame.columns) == list(PER_REPLICA_FIELDS)
    assert frame["replica"].tolist() == [0, 1] and frame["completed"].tolist() == [6, 6]
    rows = json.loads(out_json.read_text())["twin"]["per_replica"]
    assert frame["p99_ttft_ms"].tolist() == [r["p99_ttft_ms"] for r in rows]
    assert frame["output_throughput"].tolist() == [r["output_throughput"] for r in rows]
