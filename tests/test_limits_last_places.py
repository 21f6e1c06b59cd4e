"""The limit verdict's last places (issue 33 round 21, 33zo): a P/D plan's ``limit`` column and keys, `twin
protocol`'s counted plurals and queue wording, and a many-variant compare's one line that keeps an overload."""

from __future__ import annotations

from twin.hardware.pricing import PriceTable
from twin.plan.evaluate import Criteria
from twin.plan.executor import Runner, SerialExecutor
from twin.plan.pd_plan import PD_KEYS, plan_pd

from tests.test_pd_plan import DATA


def _pd_plan() -> dict:
    with SerialExecutor() as ex:
        return plan_pd(DATA, base_dir=None, criteria=Criteria(DATA["slo"]), prices=PriceTable({"A100-SXM-80GB": 2.0}),
                       target_rate=None, space=[(PD_KEYS[0], [1, 2]), (PD_KEYS[1], [1])], replications=1,
                       runner=Runner(ex))


def test_a_pd_plan_names_what_limits_each_point_and_the_pool_it_binds_in():
    out = _pd_plan()
    rows = {r["config"]: r for r in out["rows"]}
    # one prefill engine falls behind 100 req/s of 1000-token prompts: its token budget fills while prompts queue
    assert rows["1P1D"]["limit"] == "max_num_batched_tokens in the prefill pool"
    assert rows["1P1D"]["limit_knob"] == ("server.max_num_batched_tokens (the prefill pool's own: under "
                                          "disaggregation.prefill)")
    assert rows["2P1D"]["limit"] == "none" and rows["2P1D"]["limit_knob"] is None
    # the keys sit after the row's own columns and before the held-out band's, as in plain plans
    keys = list(rows["1P1D"])
    assert keys.index("usd_per_million_output_tokens") < keys.index("limit") < keys.index("limit_knob") \
        < keys.index("heldout_server")
    assert out["cheapest"]["limit"] == "none"


def test_a_pd_plans_table_prints_the_limit_column_last(capsys):
    from twin.cli.plan_pd import print_pd_plan

    print_pd_plan(_pd_plan())
    out = capsys.readouterr().out.splitlines()
    lines = out[next(i for i, line in enumerate(out) if line.startswith("| config")) - 1:]
    assert lines[1] == ("| config | GPUs | $/h | TTFT p99 | TPOT p99 | output tok/s | $/M output tok | verdict | "
                        "limit |")
    assert lines[3] == ("| 1P1D | 2 | 4.00 | 2.18 s | 10.1 ms | 656 | 1.693 | misses: TTFT p99 = 2.18 s | "
                        "max_num_batched_tokens in the prefill pool |")
    assert lines[4] == "| 2P1D | 3 | 6.00 | 153 ms | 10.1 ms | 999 | 1.669 | meets | none |"


def test_a_pd_plan_row_without_a_limit_prints_a_dash(capsys):
    from twin.cli.plan_pd import print_pd_plan

    row = {"config": "1P1D", "gpus": 2, "usd_per_hour": None, "p99_ttft_ms": None, "p99_tpot_ms": None,
           "output_throughput": None, "usd_per_million_output_tokens": None, "passed": False,
           "reasons": ["workload: bad"]}
    print_pd_plan({"latency_metric": "p99_ttft_ms", "target_rate_per_s": 4.0, "base_rate_per_s": 2.0,
                   "replications": 1, "criteria": {"slo": {}}, "rows": [row], "cheapest": None, "frontier": [],
                   "heldout_bands": {"note": []}})
    assert "| 1P1D | 2 | - | - | - | - | - | misses: workload: bad | - |" in capsys.readouterr().out


def test_protocols_scheduler_step_counts_the_waiting_requests_as_twin_run_does():
    from twin.analysis.protocol import run_protocol
    from twin.scenario import load_scenario

    rep = run_protocol(load_scenario("concurrency_cap_trap"), scenario_arg="concurrency_cap_trap", replications=1)
    step = next(s for s in rep.steps if s.key == "scheduler_limits")
    assert step.finding.startswith(
        "The running batch sits at max_num_seqs = 4 for 94% of the busy time while requests wait (about 11 "
        "requests on average whenever any wait; offered: 16 closed-loop streams; 12 of the 16 streams queue). "
        "Lifting (max_num_seqs 4 -> 1024) predicts: ")
    assert "(s)" not in " ".join([step.finding, *step.notes])


HEADLINE = "concurrency cap (max_num_seqs) binds (76% of the busy time)"
SENTENCE = ("offered load (400 req/s) above what this server sustains (63.5 req/s); under it, concurrency cap "
            "(max_num_seqs)")


def _doc(overloaded: bool) -> dict:
    return {"headline": HEADLINE, "verdict": "Concurrency cap binds.", "evidence": "e.", "knob": "server.max_num_seqs",
            "load": {"offered_rate_per_s": 400.0, "served_rate_per_s": 63.5 if overloaded else 399.0,
                     "overloaded": overloaded, "sentence": SENTENCE if overloaded else None}}


def test_the_one_line_verdict_says_an_overload_first_and_the_headline_otherwise():
    from twin.analysis.run_limits import compact_headline, limit_lines

    assert compact_headline(_doc(False)) == HEADLINE
    assert compact_headline(_doc(True)) == SENTENCE
    assert compact_headline({"headline": HEADLINE}) == HEADLINE          # a doc without ``load``
    assert limit_lines("sat", _doc(True), short=True, width=200) == [f"What limits sat: {SENTENCE}"]
    assert limit_lines("low", _doc(False), short=True, width=200) == [f"What limits low: {HEADLINE}"]
    # the full form is unchanged: the headline first, the overload on its own "Binding limit" line
    full = limit_lines("sat", _doc(True), width=200)
    assert full[:2] == [f"What limits sat: {HEADLINE}", f"  Binding limit: {SENTENCE}"]


def test_a_many_variant_compare_prints_the_overloaded_variants_sentence(capsys):
    from rich.console import Console

    from twin.cli.pd_output import print_limits

    runs = {"low": {"limits": _doc(False)}, "sat": {"limits": _doc(True)}}
    print_limits(runs, Console(width=200), short=True)
    assert capsys.readouterr().out.splitlines() == [f"What limits low: {HEADLINE}", f"What limits sat: {SENTENCE}"]


def test_counts_in_printed_text_take_the_noun_in_the_right_number():
    from twin.results.numbers import counted
    from twin.sim.cold_server import cold_start_line
    from twin.workload.validation_errors import describe_error

    assert [counted(n, "request") for n in (0, 1, 2)] == ["0 requests", "1 request", "2 requests"]
    line = cold_start_line({"priced": True, "stalls": 1, "stall_time_s": 0.74, "stall_s_per_specialisation": 0.74,
                            "specialisations_per_replica": 13, "replicas_priced": 2})
    assert line == ("server start: cold, 1 one-off compile stall met, 0.74 s in all (0.74 s each; 13 possible per "
                    "replica, 2 replicas priced)")
    assert describe_error({"type": "too_short", "loc": ("rates",), "ctx": {"min_length": 1}, "input": []}) \
        == "rates: must have at least 1 item"
    assert describe_error({"type": "too_long", "loc": ("rates",), "ctx": {"max_length": 2}, "input": [1, 2, 3]}) \
        == "rates: must have at most 2 items"


def test_a_workload_of_one_request_says_so_in_the_singular():
    import pytest

    from twin.errors import TwinInputError
    from twin.plan.evaluate import offered_rate

    data = {k: v for k, v in DATA.items() if k != "disaggregation"}
    data["workload"] = {**DATA["workload"], "num_requests": 1,
                        "arrivals": {"process": "piecewise", "schedule": [{"rate_per_s": 1.0}]}}
    with pytest.raises(TwinInputError) as exc:
        offered_rate(data, None)
    assert str(exc.value) == "workload: 1 request; cannot tell an arrival rate from fewer than 2"
