"""The what-if hour's leftovers (issue 33, round 23): the words `twin plan` and `twin sweep` print. Exact strings."""

from __future__ import annotations

import pytest

from twin.results import numbers as n


@pytest.mark.parametrize("sign, exponent, text", [(1, 400, "inf"), (-1, 400, "-inf"), (1, 5000, "inf")])
def test_an_integer_too_large_for_a_float_is_shown_not_finite(sign, exponent, text):
    value = sign * 10**exponent          # 5000 digits: more than str() of an int may write (Python 3.11+)
    assert n.finite_number(value) is None
    for show in (n.number, n.duration_ms, n.duration_s, n.given, n.count, n.percent):
        assert show(value) == text
    assert n.with_unit(value, "req/s") == text
    for show in (n.delta, n.delta_ms, n.percent_change):
        assert show(value) == text


def test_finite_numbers_are_unchanged():
    assert n.finite_number(10**300) == 1e300
    assert n.number(10**6) == "1.00M"
    assert n.number(None) == "-" and n.number(float("nan")) == "nan" and n.number("x") == "x"


def test_an_slo_in_the_dashboards_words():
    from twin.results.slo_words import slo_words

    assert slo_words({"ttft_ms": 500, "tpot_ms": 50}) == "TTFT ≤ 500 ms, TPOT ≤ 50 ms"
    assert slo_words({"ttft_ms": {"p99": 1000}, "tpot_ms": {"p99": 50}}) == "p99 TTFT ≤ 1000 ms, p99 TPOT ≤ 50 ms"
    assert slo_words({"e2el_ms": 20000, "ttft_ms": {"p99.9": 2000}}) == "E2E ≤ 20.0 s, p99.9 TTFT ≤ 2000 ms"
    assert slo_words(None) == slo_words({}) == "none"


def test_a_plans_header_writes_the_slo_in_words(tmp_path):
    import yaml
    from click.testing import CliRunner

    from twin.cli.main import main

    scenario = {"name": "s", "deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b"},
                "workload": {"arrivals": {"process": "poisson", "rate_per_s": 2}, "duration_s": 2,
                             "classes": [{"name": "c", "share": 1.0, "prompt": {"suffix_tokens": 100},
                                          "output_tokens": 10}]}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario), encoding="utf-8")
    res = CliRunner().invoke(main, ["plan", str(path), "-q", "--backend", "serial", "--replications", "1",
                                    "--slo", "ttft_ms.p99=1000", "--slo", "tpot_ms=50",
                                    "--search", "server.max_num_seqs=4"])
    assert res.exit_code == 0, res.output
    assert " | SLO TPOT ≤ 50 ms, p99 TTFT ≤ 1000 ms | router " in " ".join(res.output.split())  # wrapped at 80


def test_a_miss_with_no_limit_binding_reads_step_time_and_an_inferred_verdict_says_so():
    from twin.cli.plan_words import STEP_TIME, STEP_TIME_NOTE, limit_words, verdict_words

    assert STEP_TIME == "step time"                  # twin.analysis.causes' name for it
    assert STEP_TIME_NOTE == ("step time: the SLO is missed while no limit binds (no scheduler limit holds requests "
                              "back and the GPU keeps up): the steps themselves are too slow; a faster GPU or "
                              "another TP helps, not a scheduler knob.")
    assert limit_words("none", False) == STEP_TIME
    assert [limit_words("none", p) for p in (True, None, float("nan"))] == ["none"] * 3     # keeps up / no SLO
    assert limit_words("max_num_seqs", False) == "max_num_seqs" and limit_words(None, False) is None
    assert verdict_words(False, "ok") == "[red]no[/]" and verdict_words(True, "ok") == "[green]yes[/]"
    assert verdict_words(False, "pruned") == "[red]no[/] (inferred)"
    assert verdict_words(True, "inferred-pass") == "[green]yes[/] (inferred)"
    assert verdict_words(False, "inferred-fail") == "[red]no[/] (inferred)"
    assert verdict_words(None, "ok") == verdict_words(float("nan"), "ok") == "-"


def test_a_sweeps_table_says_a_pruned_rate_was_inferred_and_why_a_rate_failed(tmp_path, wide_console):
    import pandas as pd
    import yaml
    from click.testing import CliRunner
    from plan_cli_helpers import TINY_SCENARIO

    from twin.cli.main import main

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(TINY_SCENARIO), encoding="utf-8")
    res = CliRunner().invoke(main, ["sweep", str(path), "--grid", "rate=5,40", "--slo", "ttft_ms.p99=1",
                                    "--prune", "monotone", "--backend", "serial", "-q",
                                    "--summary-out", str(tmp_path / "s.csv")])
    assert res.exit_code == 0, res.output
    rows = [[c.strip() for c in x.strip("│").split("│")] for x in res.stdout.splitlines() if x.startswith("│")]
    assert [r[1:3] + r[-1:] for r in rows] == [["ok", "no", "step time"], ["pruned", "no (inferred)", "-"]]
    assert " step time: the SLO is missed while no limit binds (" in " ".join(res.stdout.split())
    frame = pd.read_csv(tmp_path / "s.csv")                # the file keeps its values (docs/result-formats.md)
    assert list(frame["status"]) == ["ok", "pruned"] and list(frame["passed"]) == [False, False]
    assert frame["limit"].iloc[0] == "none"


def test_a_variant_back_at_the_models_own_formats_names_them_against_an_fp8_reference(tmp_path):
    import yaml
    from click.testing import CliRunner

    from twin.cli.main import main
    from twin.results.deployment_formats import returned_parts

    scenario = {"name": "fmt", "deployment": {"gpu": "H100-SXM", "model": "llama-3.1-70b", "tensor_parallel_size": 4,
                                              "weight_dtype": "fp8", "kv_dtype": "fp8"},
                "server": {"max_num_seqs": 256},
                "workload": {"arrivals": {"process": "poisson", "rate_per_s": 2}, "duration_s": 1,
                             "classes": [{"name": "c", "share": 1.0, "prompt": {"suffix_tokens": 100},
                                          "output_tokens": 4}]},
                "variants": {"bf16-kv": {"deployment": {"kv_dtype": "bf16"}},
                             "both": {"deployment": {"weight_dtype": "auto", "kv_dtype": "bf16"}},
                             "same": {"server": {"max_num_seqs": 256}}}}
    path = tmp_path / "fmt.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False), encoding="utf-8")
    res = CliRunner().invoke(main, ["run", str(path), "--all-variants"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert "bf16-kv: bf16 KV cache, KV pool 689,520 tokens" in lines
    assert "both: bf16 weights, bf16 KV cache, KV pool 480,624 tokens" in lines
    assert "same deployment as baseline: same" in lines           # the reference's own formats: nothing added

    class D:
        weight_dtype, weight_formats, kv_dtype = "auto", None, "bf16"

    assert returned_parts(D, D, "bf16") == []                       # both at the model's own: nothing named


def test_a_pd_plans_miss_with_no_limit_binding_reads_step_time_with_its_note(capsys, wide_console):
    from twin.cli.plan_pd import print_pd_plan
    from twin.cli.plan_words import STEP_TIME_NOTE

    row = {"config": "1P1D", "gpus": 2, "usd_per_hour": 4.0, "p99_ttft_ms": 1200.0, "p99_tpot_ms": 10.0,
           "output_throughput": 500.0, "usd_per_million_output_tokens": 1.0, "passed": False,
           "reasons": ["p99_ttft_ms = 1200 ms"], "limit": "none"}
    print_pd_plan({"latency_metric": "p99_ttft_ms", "target_rate_per_s": 4.0, "base_rate_per_s": 2.0,
                   "replications": 1, "criteria": {"slo": {"ttft_ms": {"p99": 500}}}, "rows": [row],
                   "cheapest": None, "frontier": [], "heldout_bands": {"note": []}})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "P/D plan at 4.00 req/s (the scenario offers 2.00 req/s), 1 replication, SLO p99 TTFT ≤ 500 ms"
    assert lines[3].endswith("| misses: TTFT p99 = 1200 ms | step time |") and lines[4] == STEP_TIME_NOTE
