"""What limits a run (`twin.analysis.run_limits`): the verdict `twin run` / `twin compare` print under the tables
and write under ``twin.limits``. Exact lines on the bundled scenarios that exist to show each limit (seeded,
deterministic runs), exact wording of every branch on built diagnoses, and the CLI hooks."""

from __future__ import annotations

import json
from dataclasses import replace

from click.testing import CliRunner

from twin.analysis.causes import (COMPUTE, CONCURRENCY_CAP, IDLE, MEMORY_BANDWIDTH, TOKEN_BUDGET, Diagnosis,
                                  StepSplit)
from twin.analysis.run_limits import GPU_KNOB, evidence, headline, knob, limit_lines, limits_doc
from twin.cli.main import main
from twin.deploy.run import metrics_of, resolve_for_run, run_body
from twin.scenario import load_scenario, parse_set_options


def _limits(scenario: str, variant: str = "baseline", *sets: str) -> dict:
    sc = load_scenario(scenario)
    body = sc.body(variant, parse_set_options(sets))
    dep = resolve_for_run(body, sc.base_dir)
    result = run_body(body, sc.base_dir, deployment=dep)
    return limits_doc(result, dep, metrics_of(result, body))


def test_the_concurrency_cap_trap_names_max_num_seqs_and_the_kv_room():
    doc = _limits("concurrency_cap_trap")
    assert (doc["limit"], doc["binding"], doc["saturated"], doc["knob"]) == (CONCURRENCY_CAP, True, True,
                                                                             "server.max_num_seqs")
    assert limit_lines("baseline", doc) == [
        "What limits baseline: concurrency cap (max_num_seqs) binds (94% of the busy",
        "  time)",
        "  Concurrency cap binds: the running batch sits at max_num_seqs = 4 for 94% of",
        "    the busy time while requests wait (about 11 requests on average whenever any",
        "    wait). Raising max_num_seqs lets queued requests start sooner (as long as KV",
        "    capacity allows).",
        "  Evidence: mean running batch 4.00 at max_num_seqs = 4, mean queue length 10.4",
        "    over the run, TTFT mean 4.51 s; KV usage p99 0.7%, about 2.5% with the",
        "    waiting requests running too: the KV pool has room for them (raising the cap",
        "    costs no KV capacity).",
        "  Knob: server.max_num_seqs",
    ]


def test_an_underloaded_run_says_no_limit_binds_and_names_no_knob():
    doc = _limits("concurrency_cap_trap", "vllm-default")
    assert (doc["limit"], doc["binding"], doc["saturated"], doc["knob"]) == (MEMORY_BANDWIDTH, False, False, None)
    assert limit_lines("vllm-default", doc) == [
        "What limits vllm-default: no limit binds at this load (memory-bandwidth-bound",
        "  steps)",
        "  No serving limit binds at this load: the server keeps up (requests wait in the",
        "    queue only 0% of the busy time; 16 running on average). Latency follows the",
        "    step time, which is memory-bandwidth-bound (59% of a typical step reads",
        "    weights and KV cache).",
        "  Evidence: busy fraction 99.9%, mean running batch 15.7 (max_num_seqs = 1024),",
        "    mean queue length 0 over the run, TTFT mean 179 ms, KV usage p99 2.8%.",
    ]


def test_the_kv_pool_binds_in_the_agentic_scenario():
    doc = _limits("kv_offload_agentic")
    assert limit_lines("baseline", doc)[0] == "What limits baseline: KV-cache capacity binds (41% of the busy time)"
    assert doc["evidence"] == ("KV usage p99 99.9%, 13 preemptions, mean running batch 34.9 (max_num_seqs = "
                               "1024), mean queue length 24.6 over the run, TTFT mean 8.93 s.")
    assert doc["knob"].startswith("server.gpu_memory_utilization, deployment.kv_dtype: fp8")


def test_the_token_budget_binds_under_an_unbounded_burst():
    doc = _limits("bench_random", "timeout-3s")
    assert (doc["limit"], doc["knob"]) == (TOKEN_BUDGET, "server.max_num_batched_tokens")
    assert doc["headline"] == "token budget (max_num_batched_tokens) binds (28% of the busy time)"
    assert doc["evidence"] == ("steps filled to max_num_batched_tokens = 16384 for 28% of the busy time, mean "
                               "queue length 5.16 over the run, TTFT mean 659 ms.")


def test_static_batching_names_the_scheduler():
    doc = _limits("static_vs_continuous", "static-varied")
    assert doc["headline"] == "static batching binds (91% of the busy time)"
    assert doc["evidence"] == ("mean running batch 5.68 of static_batch_size = 32, mean queue length 23.3 over the run, TTFT mean "
                               "10.7 s.")
    assert doc["knob"] == "server.scheduler: continuous"


def test_a_pd_run_names_the_pool_and_its_own_knobs():
    doc = _limits("pd_disaggregation", "1p1d")
    assert doc["headline"] == ("token budget (max_num_batched_tokens) binds in the prefill pool (100% of the busy "
                               "time)")
    assert doc["evidence"].startswith("in the prefill pool, steps filled to max_num_batched_tokens = 2048")
    assert doc["knob"] == "server.max_num_batched_tokens (the prefill pool's own: under disaggregation.prefill)"
    assert set(doc["parts"]) == {"prefill", "decode"} and doc["parts"]["decode"]["saturated"] is False


def test_a_mixed_cluster_names_the_group():
    doc = _limits("cluster_prefix_affinity", "mixed-h100-a100")
    assert doc["headline"] == "KV-cache capacity binds in the a100 group (90% of the busy time)"
    assert doc["knob"].endswith("(the a100 group's own: under deployment.groups[1])")
    assert list(doc["parts"]) == ["h100", "a100"]


def test_a_run_where_every_request_is_rejected_says_why():
    doc = _limits("concurrency_cap_trap", "baseline", "server.max_model_len=64")
    assert (doc["limit"], doc["headline"], doc["knob"]) == ("idle", "nothing ran (no engine step)", None)
    assert doc["evidence"] == ("64 requests were rejected: longer than max_model_len (64) or than the whole KV "
                               "pool.")


def test_aggregated_step_records_are_not_judged_but_keep_the_evidence():
    doc = _limits("concurrency_cap_trap", "baseline", "records.steps=aggregate")
    assert (doc["limit"], doc["binding"], doc["knob"]) == (None, None, None)
    assert doc["headline"] == "not judged (aggregated step records)"
    assert doc["evidence"] == ("busy fraction 100.0%, mean running batch 4.00 (max_num_seqs = 4), mean queue "
                               "length 10.4 over the run, TTFT mean 4.51 s, KV usage p99 0.7%.")


# ---- every branch's words on built diagnoses ----------------------------------------------------------------
_M = {"mean_running_batch": 64.0, "mean_queue_length": 30.0, "mean_ttft_ms": 2500.0, "p99_kv_usage": 0.5,
      "busy_fraction": 1.0, "num_preemptions": 0, "num_replicas": 1}


def _d(limit: str, saturated: bool, share: float = 0.0) -> Diagnosis:
    return Diagnosis(limit, saturated, "verdict", shares={CONCURRENCY_CAP: share, TOKEN_BUDGET: 0.0},
                     stats={"cap": 64, "budget": 8192, "queued": 0.8})


def test_a_saturated_gpu_points_at_more_gpus():
    d = _d(COMPUTE, True)
    assert headline(d) == "the GPU: requests queue while no scheduler limit holds (compute-bound steps)"
    assert knob(d) == GPU_KNOB
    assert evidence(d, _M) == ("busy fraction 100.0%, mean running batch 64.0 (max_num_seqs = 64), mean queue "
                               "length 30.0 over the run, TTFT mean 2.50 s, KV usage p99 50.0%.")


def test_a_run_without_a_split_or_without_steps():
    assert headline(_d("step_time", False)) == "no limit binds at this load"
    assert headline(_d("step_time", True), "the decode pool") == ("the GPU in the decode pool: requests queue while "
                                                                  "no scheduler limit holds")
    idle = Diagnosis(IDLE, False, "Nothing ran: no engine step was taken.")
    assert (headline(idle), knob(idle)) == ("nothing ran (no engine step)", None)


def test_a_cap_whose_queue_would_overfill_the_kv_pool_says_so():
    # 64 running at 50 % KV with 30 waiting: 50 % x 94 / 64 = 73 % -> room; 100 waiting: 128 % -> no room
    d = _d(CONCURRENCY_CAP, True, 0.9)
    assert "about 73% with the waiting requests running too: the KV pool has room for them" in evidence(d, _M)
    full = evidence(d, {**_M, "mean_queue_length": 100.0})
    assert full.endswith("about 128% with the waiting requests running too: the KV pool cannot hold them all at "
                         "once (a higher cap helps until KV capacity binds).")
    split = StepSplit(compute=0.8, memory=0.1, communication=0.0, overhead=0.1, bound=COMPUTE)
    assert evidence(replace(d, step_split=split), _M).endswith(
        "; steps are already compute-bound (80% matrix math): a bigger batch also lengthens each step (TPOT).")
    assert headline(d, "the decode pool") == ("concurrency cap (max_num_seqs) binds in the decode pool (90% of the "
                                              "busy time)")


def test_short_lines_and_width():
    doc = {"headline": "h " * 50, "verdict": "a\n\nb", "evidence": "e", "knob": None}
    short = limit_lines("x", doc, short=True)
    assert short[0].startswith("What limits x: h h") and all(ln.startswith("  h") for ln in short[1:])
    assert " ".join(short).split() == ["What", "limits", "x:"] + ["h"] * 50 and max(map(len, short)) <= 80
    assert limit_lines("x", {**doc, "headline": "h"}) == ["What limits x: h", "  a", "  b", "  Evidence: e"]
    assert max(map(len, limit_lines("x", doc, width=120))) <= 120


# ---- the CLI hooks ------------------------------------------------------------------------------------------
def _invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_twin_run_prints_the_verdict_after_the_tables_and_writes_it_to_json(tmp_path):
    out = tmp_path / "out.json"
    r = _invoke("run", "concurrency_cap_trap", "-q", "--json", str(out))
    assert r.exit_code == 0, r.output
    text = r.stdout
    assert text.index("mean queue length") < text.index("What limits baseline: concurrency cap") < text.index(
        "Error band")
    doc = json.loads(out.read_text())["twin"]["limits"]
    assert doc == _limits("concurrency_cap_trap")
    assert set(doc) == {"limit", "limit_name", "binding", "saturated", "headline", "verdict", "evidence", "knob",
                        "notes", "shares", "step_split", "parts", "load"}
    assert doc["load"] == {"offered_rate_per_s": None, "served_rate_per_s": doc["load"]["served_rate_per_s"],
                           "overloaded": False, "sentence": None}       # a closed loop offers no rate


def test_twin_compare_of_many_variants_prints_one_line_each(tmp_path):
    out = tmp_path / "cmp.json"
    r = _invoke("compare", "speculative_random_tokens", "-q", "--json", str(out))
    assert r.exit_code == 0, r.output
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("What limits")]
    assert lines[0] == "What limits baseline: no limit binds at this load (memory-bandwidth-bound steps)"
    # an overloaded variant's one line is the offered-load sentence (run_limits.compact_headline, round 21 33zo)
    # with the binding limit's share of the busy time (round 22)
    said = " ".join(r.stdout.split())
    assert ("What limits sat: offered load (400 req/s) above what this server sustains (63.5 req/s); under it, "
            "concurrency cap (max_num_seqs), 76% of the busy time What limits sat-nospec:") in said
    assert len(lines) == 6 and "Evidence:" not in r.stdout
    docs = json.loads(out.read_text())["variants"]
    assert docs["sat"]["twin"]["limits"]["knob"] == "server.max_num_seqs"


def test_the_dashboard_shows_the_same_evidence_and_writes_the_same_key():
    from twin.dashboard import meaning
    from twin.dashboard import state as dash

    raw = load_scenario("concurrency_cap_trap").raw()
    run = dash.run_scenario(raw)
    doc = _limits("concurrency_cap_trap")
    assert run.limits == doc
    assert meaning.evidence_line(run) == f"Evidence: {doc['evidence']} · Knob: server.max_num_seqs"
    assert json.loads(dash.result_json(run))["twin"]["limits"] == doc


def test_twin_compare_of_few_variants_prints_every_verdict():
    r = _invoke("compare", "concurrency_cap_trap", "-q")
    assert r.exit_code == 0, r.output
    assert "What limits baseline: concurrency cap" in r.stdout and "What limits vllm-default: no limit" in r.stdout
    assert r.stdout.count("  Evidence:") == 2
