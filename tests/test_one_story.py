"""One story in every output (issue 33, round 22): a library caller's SLO echoed in the form every other path
prints; a many-variant compare's one line keeps the binding limit's share beside an overload; one definition of
offered load for `twin run` and the dashboard (a replayed trace offers its arrival rate, a closed loop none);
counts written as the tables write them; an unknown GPU or model counted, not listed, on a terminal. Exact
strings; the runs are short and seeded."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from twin.cli.main import main
from twin.errors import TwinInputError

# 50 req/s for 4 s of 200-token prompts and 32-token answers, at trace timestamps; max_num_seqs = 2 sustains ~10
TRACE_ROWS = [f"2023-11-16 18:00:{i * 0.02:010.7f},200,32" for i in range(200)]
BASE = {"deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b"}, "server": {"max_num_seqs": 2}}
SENTENCE = ("offered load (50.0 req/s) above what this server sustains (9.77 req/s); under it, concurrency cap "
            "(max_num_seqs)")


# ------------------------------------------------------------------------ (a) Criteria.as_dict: the scenario's form
@pytest.mark.parametrize("slo, echoed", [
    ({"ttft": 500}, {"ttft_ms": 500}),
    ({"ttft": {"p99": 100}, "tpot_ms": 50}, {"ttft_ms": {"p99": 100}, "tpot_ms": 50}),
    ("ttft:500 tpot:50", {"ttft_ms": 500.0, "tpot_ms": 50.0}),
    (["e2el:20000"], {"e2el_ms": 20000.0}),
    ({"ttft_ms": {"p99.9": 1000}}, {"ttft_ms": {"p99.9": 1000}}),     # the normalised form reads back unchanged
    (None, None),
])
def test_criteria_echo_the_slo_as_every_other_path_prints_it(slo, echoed):
    from twin.plan.evaluate import Criteria

    assert Criteria(slo).as_dict() == {"slo": echoed, "goodput": None, "max_rejected_fraction": 0.0}


def test_criteria_read_vllms_string_form_and_refuse_as_the_slo_reader_does():
    from twin.plan.evaluate import Criteria

    assert Criteria("ttft:500").effective_goodput == 0.99            # a threshold alone: 0.99 of requests
    assert Criteria({"ttft": {"p99": 500}}).effective_goodput is None
    with pytest.raises(TwinInputError) as err:
        Criteria({"ttfb": 500})
    assert str(err.value) == ("slo.ttfb: unknown SLO metric; did you mean 'ttft_ms'?; allowed: ttft_ms, tpot_ms, "
                              "itl_ms, e2el_ms (or vLLM's ttft, tpot, e2el, itl)")


# ------------------------------------------------------------------ (b) the one-line verdict keeps the share
def _doc(overloaded: bool, share: float | None = 0.94, binding: bool = True) -> dict:
    return {"limit": "concurrency_cap", "binding": binding, "shares": {} if share is None else {
        "concurrency_cap": share}, "headline": "concurrency cap (max_num_seqs) binds (94% of the busy time)",
            "load": {"overloaded": overloaded, "sentence": SENTENCE if overloaded else None}}


def test_the_one_line_verdict_of_an_overload_keeps_the_binding_limits_share():
    from twin.analysis.run_limits import compact_headline, limit_lines

    longer = f"{SENTENCE}, 94% of the busy time"
    assert compact_headline(_doc(True)) == longer
    assert compact_headline(_doc(False)) == "concurrency cap (max_num_seqs) binds (94% of the busy time)"
    assert compact_headline(_doc(True, share=None)) == SENTENCE          # no share known
    assert compact_headline(_doc(True, binding=False)) == SENTENCE       # the GPU itself: no limit's share
    # width permitting: left out only where it would make one line two
    assert compact_headline(_doc(True), width=len(SENTENCE)) == SENTENCE
    assert compact_headline(_doc(True), width=len(longer)) == longer
    assert compact_headline(_doc(True), width=len(SENTENCE) - 1) == longer   # wraps either way
    assert limit_lines("sat", _doc(True), short=True, width=200) == [f"What limits sat: {longer}"]


def test_a_many_variant_compare_prints_the_share_beside_the_overload(tmp_path, wide_console):
    data = {"name": "many", **BASE, "workload": {"arrivals": {"process": "poisson", "rate_per_s": 40},
                                                 "duration_s": 4, "classes": [{"name": "c", "share": 1.0,
                                                 "prompt": {"suffix_tokens": 200}, "output_tokens": 32}]},
            "variants": {f"cap{n}": {"server": {"max_num_seqs": n}} for n in (4, 8, 16, 32, 64)}}
    path = tmp_path / "many.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    r = CliRunner().invoke(main, ["compare", str(path), "-q"])
    assert r.exit_code == 0, r.output
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("What limits")]
    assert lines[:3] == [
        "What limits baseline: offered load (40.0 req/s) above what this server sustains (9.77 req/s); under it, "
        "concurrency cap (max_num_seqs), 99% of the busy time",
        "What limits cap4: offered load (40.0 req/s) above what this server sustains (19.0 req/s); under it, "
        "concurrency cap (max_num_seqs), 97% of the busy time",
        "What limits cap8: offered load (40.0 req/s) above what this server sustains (36.2 req/s); under it, "
        "concurrency cap (max_num_seqs), 88% of the busy time"]
    assert lines[3:] == [f"What limits cap{n}: no limit binds at this load (memory-bandwidth-bound steps)"
                         for n in (16, 32, 64)]


# ------------------------------------------------------------------------------------ (c) one offered load
def _trace_scenario(tmp_path, arrivals: dict | None = None) -> dict:
    (tmp_path / "azure.csv").write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(TRACE_ROWS) + "\n")
    workload = {"trace": {"path": str(tmp_path / "azure.csv"), "format": "azure"}}
    if arrivals is not None:
        workload["arrivals"] = arrivals
    return {"name": "trace", **BASE, "workload": workload}


def _run_load(tmp_path, data: dict) -> dict:
    path, out = tmp_path / "s.yaml", tmp_path / "run.json"
    path.write_text(yaml.safe_dump(data))
    r = CliRunner().invoke(main, ["run", str(path), "-q", "--json", str(out)])
    assert r.exit_code == 0, r.output
    return json.loads(out.read_text())["twin"]["limits"]["load"]


def test_a_replayed_trace_offers_its_arrival_rate_in_twin_run_and_the_dashboard(tmp_path):
    from twin.dashboard.meaning import cost_line, limit_line, offered_vs_served
    from twin.dashboard.runs import run_scenario
    from twin.plan.evaluate import offered_rate

    data = _trace_scenario(tmp_path)
    load = _run_load(tmp_path, data)
    assert (load["offered_rate_per_s"], load["overloaded"], load["sentence"]) == (
        pytest.approx(50.0), True, SENTENCE)           # 200 rows 0.02 s apart: 199 gaps over 3.98 s
    run = run_scenario(data)
    assert run.info["offered_rate_per_s"] == load["offered_rate_per_s"]
    assert offered_vs_served(run)["overloaded"] and limit_line(run) == f"**Binding limit: {SENTENCE}**"
    assert run.limits["load"] == load
    assert offered_rate(data) == load["offered_rate_per_s"]                # the planner counts it the same
    assert cost_line(run).endswith(" × 1 GPU (bundled price table, approximate)")


def test_a_closed_loop_offers_no_rate_on_either_side(tmp_path):
    from twin.dashboard.meaning import offered_vs_served
    from twin.dashboard.runs import run_scenario
    from twin.plan.evaluate import offered_rate

    data = _trace_scenario(tmp_path, {"process": "closed_loop", "concurrency": 4})
    load = _run_load(tmp_path, data)
    assert (load["offered_rate_per_s"], load["overloaded"], load["sentence"]) == (None, False, None)
    run = run_scenario(data)
    assert run.info["offered_rate_per_s"] is None and not offered_vs_served(run)["overloaded"]
    assert run.limits["load"] == load
    with pytest.raises(TwinInputError, match="closed_loop has no offered rate"):
        offered_rate(data)


def test_offered_rate_rules():
    from twin.analysis.offered_load import offered_rate, request_arrivals
    from twin.plan.evaluate import validate_body

    def body(workload: dict):
        return validate_body({**BASE, "workload": workload})

    classes = [{"name": "c", "share": 1.0, "prompt": {"suffix_tokens": 8}, "output_tokens": 4}]
    poisson = body({"arrivals": {"process": "poisson", "rate_per_s": 8}, "duration_s": 2, "classes": classes})
    assert offered_rate(poisson) == 8.0 and offered_rate(poisson, [0.0, 100.0]) == 8.0      # nominal wins
    trace = body({"trace": {"path": "t.csv", "format": "azure"}})
    assert offered_rate(trace) is None                       # its own timestamps: the arrivals are needed
    assert offered_rate(trace, [0.0, 0.5, 1.0]) == 2.0 and offered_rate(trace, [1.0, 0.0]) == 1.0
    assert offered_rate(trace, [0.0]) is None and offered_rate(trace, [3.0, 3.0]) is None
    windowed = body({"trace": {"path": "t.csv", "format": "azure", "window_s": 10, "time_scale": 2.0}})
    assert offered_rate(windowed, [0.0, 1.0, 2.0]) == 3 / 5              # n over window_s / time_scale
    rows_at_a_rate = body({"trace": {"path": "t.csv", "format": "lengths"},
                           "arrivals": {"process": "poisson", "rate_per_s": 3}})
    assert offered_rate(rows_at_a_rate) == 3.0
    capped = body({"arrivals": {"process": "piecewise", "schedule": [{"rate_per_s": 4}], "max_concurrency": 2},
                   "num_requests": 4, "classes": classes})

    class Result:
        requests = [type("R", (), {"arrival_s": t})() for t in (0.0, 1.0)]
    assert request_arrivals(capped, Result()) is None                    # a capped send is the server's pace
    assert request_arrivals(trace, Result()) == [0.0, 1.0]


# --------------------------------------------------------------------------------- (d) counts as tables write them
def test_counts_take_the_tables_thousands_separator_and_the_noun_in_the_right_number():
    from twin.analysis.causes import KV_CAPACITY, Diagnosis
    from twin.analysis.run_limits import evidence
    from twin.results.numbers import count, counted
    from twin.workload.validation_errors import format_validation_error

    assert [counted(n, "preemption") for n in (0, 1, 2, 1234, 1_234_567, None)] == [
        "0 preemptions", "1 preemption", "2 preemptions", "1,234 preemptions", "1,234,567 preemptions",
        "- preemptions"]
    for n in (0, 1, 999, 1000, 1234.0, 2_000_000, None, float("nan")):      # the count as a table cell writes it
        assert counted(n, "x").rsplit(" ", 1)[0] == count(n)
    d = Diagnosis(KV_CAPACITY, True, "v", stats={"cap": 256})
    metrics = {"p99_kv_usage": 0.99, "num_preemptions": 1234, "mean_running_batch": 40.0,
               "mean_queue_length": 3.0, "mean_ttft_ms": 812.0}
    assert evidence(d, metrics) == ("KV usage p99 99.0%, 1,234 preemptions, mean running batch 40.0 "
                                    "(max_num_seqs = 256), mean queue length 3.00 over the run, TTFT mean 812 ms.")
    assert evidence(d, {**metrics, "num_preemptions": 1}).startswith("KV usage p99 99.0%, 1 preemption, ")

    from pydantic import BaseModel, ValidationError

    class Two(BaseModel):
        a: int
        b: int
        c: int

    for given, tail in (({"a": "x", "b": 1}, " [and 1 more problem]"), ({"a": "x"}, " [and 2 more problems]")):
        with pytest.raises(ValidationError) as err:
            Two.model_validate(given)
        assert format_validation_error(err.value).endswith(tail)


def test_the_dashboards_pool_rows_count_gpus_as_everywhere():
    from twin.dashboard.pd_run import pool_rows

    rows = pool_rows({"pools": {"prefill": {"engines": 1, "gpus": 1}, "decode": {"engines": 2, "gpus": 1024}}})
    assert rows[0] == {"": "engines (GPUs)", "prefill": "1 (1 GPU)", "decode": "2 (1,024 GPUs)"}


# ------------------------------------------------------------------- (e) an unknown name on a terminal: counted
def test_an_unknown_gpu_or_model_is_counted_on_the_cli_and_listed_for_the_dashboard(tmp_path):
    from twin.cli.catalog_pointer import on_terminal
    from twin.hardware.catalog import list_gpus, list_models, resolve_gpu, resolve_model

    gpus, models = [g.name for g in list_gpus()], [m.name for m in list_models()]
    with pytest.raises(TwinInputError) as gpu_err:
        resolve_gpu("h10")
    whole = str(gpu_err.value)
    assert whole == (f"gpu: unknown GPU 'h10'; did you mean 'H100-SXM' or 'H20'?; known: {', '.join(gpus)}; or "
                     "give a YAML spec file path")                 # the dashboard's line: every name
    assert on_terminal(whole) == (f"gpu: unknown GPU 'h10'; did you mean 'H100-SXM' or 'H20'?; {len(gpus)} GPUs "
                                  "catalogued: `twin list gpus`; or give a YAML spec file path")
    with pytest.raises(TwinInputError) as model_err:
        resolve_model("gpt-5")
    assert on_terminal(f"grid deployment.model=gpt-5: {model_err.value}") == (
        f"grid deployment.model=gpt-5: model: unknown model 'gpt-5'; {len(models)} models catalogued: "
        "`twin list models`; or give a path to a Hugging Face config.json")
    other = "slo.ttfb: unknown SLO metric; allowed: ttft_ms"
    assert on_terminal(other) == other                                    # no catalogue list: as given
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"name": "s", "deployment": {"gpu": "h10", "model": "llama-3.1-8b"},
                                    "workload": {"arrivals": {"process": "closed_loop", "concurrency": 1},
                                                 "num_requests": 1, "classes": [{"name": "c", "share": 1.0,
                                                 "prompt": {"suffix_tokens": 8}, "output_tokens": 4}]}}))
    r = CliRunner().invoke(main, ["run", str(path), "-q"])
    assert r.exit_code == 2 and r.output.splitlines() == [
        f"error: {path}: gpu: unknown GPU 'h10'; did you mean 'H100-SXM' or 'H20'?; {len(gpus)} GPUs catalogued: "
        "`twin list gpus`; or give a YAML spec file path"]
    assert CliRunner().invoke(main, ["list", "gpus"]).exit_code == 0      # the command the line names
