"""What limits each configuration where users plan (issue 33, round 21): `twin sweep`'s and `twin plan`'s tables
carry the verdict's short form (`twin.analysis.run_limits.short_limit`) as a ``limit`` column and their CSV / JSON
as ``limit`` / ``limit_knob``; the verdict's queue figures read as one story with counted plurals; and `twin run`
says, as the dashboard does and in the same sentence (`twin.analysis.offered_load`), when the offered load is
above what the server sustains. Short seeded runs: exact cells and lines."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from plan_cli_helpers import header_cells

from twin.analysis.causes import (COMPUTE, CONCURRENCY_CAP, IDLE, KV_CAPACITY, MEMORY_BANDWIDTH, STATIC_BATCH,
                                  TOKEN_BUDGET, Diagnosis)
from twin.analysis.offered_load import load_doc, overload_sentence, overloaded
from twin.analysis.run_limits import agreed, part_knob, short_limit
from twin.cli.main import main

# 40 req/s of 200-token prompts and 32-token answers for 4 s: max_num_seqs = 2 and 8 cap the batch, 64 does not
SCENARIO = {"name": "tiny-cap", "deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b"},
            "server": {"max_num_seqs": 4},
            "workload": {"arrivals": {"process": "poisson", "rate_per_s": 40}, "duration_s": 4,
                         "classes": [{"name": "c", "share": 1.0, "prompt": {"suffix_tokens": 200},
                                      "output_tokens": 32}]},
            "slo": {"ttft_ms": {"p99": 500}}}
# a small KV pool (a quarter of the GPU's memory) and long prompts: with 64 sequences allowed, the pool binds
KV_SCENARIO = {"name": "t", "deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b"},
               "server": {"gpu_memory_utilization": 0.25, "max_model_len": 4096},
               "workload": {"arrivals": {"process": "poisson", "rate_per_s": 10}, "duration_s": 4,
                            "classes": [{"name": "c", "share": 1.0, "prompt": {"suffix_tokens": 2000},
                                         "output_tokens": 64}]},
               "slo": {"ttft_ms": {"p99": 1000}}}


def _invoke(*args: str):
    r = CliRunner().invoke(main, list(args))
    assert r.exit_code == 0, r.output
    return r


@pytest.fixture
def scenario_file(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    return path


def _d(limit: str, saturated: bool, **stats) -> Diagnosis:
    return Diagnosis(limit, saturated, "verdict", stats=stats)


# ------------------------------------------------------------------------------------------- the short form
def test_the_short_form_names_each_limit_in_a_word_or_two():
    assert [short_limit(_d(k, True)) for k in (CONCURRENCY_CAP, KV_CAPACITY, TOKEN_BUDGET, STATIC_BATCH)] == [
        "max_num_seqs", "KV pool", "max_num_batched_tokens", "static batching"]
    assert short_limit(_d(COMPUTE, True)) == "GPU (compute-bound)"          # queues while no scheduler limit holds
    assert short_limit(_d(MEMORY_BANDWIDTH, False)) == "none"               # the server keeps up
    assert short_limit(_d(IDLE, False)) == "nothing ran"
    assert short_limit(None) == "not judged"                                # aggregated step records
    assert short_limit(_d(KV_CAPACITY, True, pool="decode")) == "KV pool in the decode pool"
    assert short_limit(_d(CONCURRENCY_CAP, True, group="a100")) == "max_num_seqs in the a100 group"
    assert part_knob(_d(CONCURRENCY_CAP, True, group="a100"), {"h100": None, "a100": None}) == (
        "server.max_num_seqs (the a100 group's own: under deployment.groups[1])")
    assert part_knob(_d(MEMORY_BANDWIDTH, False), {}) is None


def test_replications_agree_or_each_limit_is_counted():
    assert agreed(["KV pool", "KV pool"]) == "KV pool"
    assert agreed(["max_num_seqs", "none", "max_num_seqs"]) == "max_num_seqs (2 of 3), none (1 of 3)"
    assert agreed([None, "none"]) == "none"
    assert agreed([]) is None and agreed([None]) is None


# ------------------------------------------------------------------------------------------------- twin sweep
def test_a_sweep_over_max_num_seqs_shows_where_the_cap_stops_binding(scenario_file, tmp_path, wide_console):
    rows, summary = tmp_path / "rows.csv", tmp_path / "summary.csv"
    out = _invoke("sweep", str(scenario_file), "--grid", "server.max_num_seqs=2,8,64", "--backend", "serial", "-q",
                  "--out", str(rows), "--summary-out", str(summary)).stdout
    assert header_cells(out, "server")[-1] == "limit"
    cells = [[c.strip() for c in x.strip("│").split("│")] for x in out.splitlines() if x.startswith("│")]
    assert [(c[0], c[2], c[-1]) for c in cells] == [("2", "no", "max_num_seqs"), ("8", "yes", "max_num_seqs"),
                                                    ("64", "yes", "none")]
    for path in (rows, summary):
        frame = pd.read_csv(path, keep_default_na=False)
        assert list(frame["limit"]) == ["max_num_seqs", "max_num_seqs", "none"]
        assert list(frame["limit_knob"]) == ["server.max_num_seqs", "server.max_num_seqs", ""]
        cols = list(frame.columns)   # after the run's own columns, before the held-out bands and the what-if (last)
        assert cols[-5:] == ["limit", "limit_knob", "heldout_server", "heldout_bands", "whatif"]


# -------------------------------------------------------------------------------------------------- twin plan
def test_a_plan_says_what_stops_each_candidate_and_what_limits_each_deployment(tmp_path, wide_console):
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"name": "p", "scenario": KV_SCENARIO, "target_rate_per_s": 20,
                                    "search": {"server.max_num_seqs": [2, 64]}, "replications": 1,
                                    "max_replicas": 8}))
    js, cand, deps = tmp_path / "plan.json", tmp_path / "cand.csv", tmp_path / "deps.csv"
    out = _invoke("plan", str(plan), "--backend", "serial", "-q", "--verify-all", "--json", str(js), "--csv",
                  str(cand), "--deployments-csv", str(deps)).stdout
    assert header_cells(out, "#")[-1] == "limit above max"
    assert header_cells(out, "# ┃ replicas")[-1] == "limit"
    doc = json.loads(js.read_text())
    # what stops a higher rate (the limit at the lowest failing rate): the cap at 2 sequences, the KV pool at 64
    assert [(c["limit"], c["limit_knob"]) for c in doc["candidates"]] == [
        ("max_num_seqs", "server.max_num_seqs"),
        ("KV pool", "server.gpu_memory_utilization, deployment.kv_dtype: fp8, deployment.tensor_parallel_size or "
                    "deployment.replicas")]
    assert [(d["candidate"], d["replicas"], d["limit"]) for d in doc["deployments"]] == [
        (1, 2, "none"), (1, 3, "none"), (0, 5, "max_num_seqs"), (0, 6, "none")]
    assert doc["best"]["limit"] == "none" and doc["best"]["limit_knob"] is None
    assert list(pd.read_csv(cand, keep_default_na=False)["limit"]) == ["max_num_seqs", "KV pool"]
    assert list(pd.read_csv(deps, keep_default_na=False)["limit"]) == ["none", "none", "max_num_seqs", "none"]


# ------------------------------------------------------------------------------- twin run: one story, the load
def test_an_overloaded_open_loop_run_says_so_in_the_dashboards_sentence(scenario_file, tmp_path, wide_console):
    js = tmp_path / "run.json"
    out = _invoke("run", str(scenario_file), "--set", "server.max_num_seqs=2", "-q", "--json", str(js)).stdout
    lines = out[out.index("What limits"):out.index("Error band")].splitlines()
    assert lines == [
        "What limits baseline: concurrency cap (max_num_seqs) binds (99% of the busy time)",
        "  Binding limit: offered load (40.0 req/s) above what this server sustains (9.77 req/s); under it, "
        "concurrency cap (max_num_seqs)",
        "  Concurrency cap binds: the running batch sits at max_num_seqs = 2 for 99% of the busy time while "
        "requests wait (about 60 requests on average whenever any wait). Raising max_num_seqs lets queued "
        "requests start sooner (as long as KV capacity allows).",
        "  Evidence: mean running batch 2.00 at max_num_seqs = 2, mean queue length 59.4 over the run, TTFT mean "
        "6.11 s; KV usage p99 0.1%, about 3.3% with the waiting requests running too: the KV pool has room for "
        "them (raising the cap costs no KV capacity).",
        "  Knob: server.max_num_seqs",
    ]
    load = json.loads(js.read_text())["twin"]["limits"]["load"]
    assert (load["offered_rate_per_s"], load["overloaded"]) == (40.0, True)
    assert load["served_rate_per_s"] == pytest.approx(9.77, abs=0.005)
    assert load["sentence"] == lines[1].removeprefix("  Binding limit: ")


def test_a_run_that_keeps_up_says_nothing_about_the_load(scenario_file, tmp_path):
    js = tmp_path / "run.json"
    out = _invoke("run", str(scenario_file), "--set", "server.max_num_seqs=64", "-q", "--json", str(js)).stdout
    assert "What limits baseline: no limit binds at this load" in out and "Binding limit" not in out
    load = json.loads(js.read_text())["twin"]["limits"]["load"]
    assert (load["offered_rate_per_s"], load["overloaded"], load["sentence"]) == (40.0, False, None)


def test_the_overload_rule_and_sentence():
    cap = Diagnosis(CONCURRENCY_CAP, True, "v", stats={"pool": "decode"})
    assert overloaded(12.0, 8.1, True) and not overloaded(12.0, 11.5, True)      # below 95 % of offered
    assert not overloaded(12.0, 8.1, False) and not overloaded(None, 8.1, True)  # no queue; no open-loop rate
    assert overload_sentence(12.0, 8.1, cap) == ("offered load (12.0 req/s) above what this server sustains "
                                                 "(8.10 req/s); under it, concurrency cap (max_num_seqs) "
                                                 "(decode pool)")
    assert overload_sentence(12.0, 8.1, _d(MEMORY_BANDWIDTH, True)) == (        # the GPU itself: no scheduler limit
        "offered load (12.0 req/s) above what this server sustains (8.10 req/s); under it, GPU memory bandwidth")
    assert overload_sentence(12.0, 8.1) == "offered load (12.0 req/s) above what this server sustains (8.10 req/s)"
    assert load_doc(None, {"request_throughput": 3.0}, None) == {
        "offered_rate_per_s": None, "served_rate_per_s": 3.0, "overloaded": False, "sentence": None}


def test_the_dashboard_prints_the_sentence_twin_run_writes():
    from twin.dashboard import meaning
    from twin.dashboard import state as dash

    small = {"name": "small", "deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b"},
             "server": {"max_num_seqs": 8, "max_model_len": 8192},
             "workload": {"arrivals": {"process": "poisson", "rate_per_s": 400}, "num_requests": 400,
                          "classes": [{"name": "c", "share": 1.0, "prompt": {"suffix_tokens": 128},
                                       "output_tokens": 64}]}}
    over = dash.run_scenario(small)
    assert over.limits["load"]["overloaded"]
    assert meaning.limit_line(over) == f"**Binding limit: {over.limits['load']['sentence']}**"
