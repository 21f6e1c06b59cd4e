"""Inputs the product used to accept and then ignore: a misspelt GPU in a price table, a result path that is a
folder or a pipe, a shared link's ``scenario`` / ``start`` that names nothing (issue 33, round 21)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from twin.cli.main import main
from twin.errors import TwinInputError
from twin.plan.price_names import check_price_names, gpu_names_in

ROOT = Path(__file__).resolve().parent.parent
CAP = str(ROOT / "scenarios" / "concurrency_cap_trap.yaml")
CATALOGUED = ("H100-SXM, H100-PCIe, H200-SXM, H20, B200, B300, GB200, A100-SXM-80GB, A100-PCIe-80GB, A100-40GB, "
              "L40S, L4, MI300X, MI325X, RTX-PRO-6000, RTX-4090, RTX-5090, CPU")
SPEC = """name: my-gpu
peak_flops: {bf16: 500 TFLOPS}
memory_bandwidth_bytes_per_s: 2.5 TB/s
memory_bytes: 64 GiB
interconnect_bytes_per_s: 400e9
"""


def refused(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1, (result.exit_code, result.stdout, result.stderr)
    return lines[0]


# ------------------------------------------------------------------------------------------------ (a) prices
def test_the_gpus_a_sweep_or_plan_names_are_found_wherever_they_are_given():
    data = {"deployment": {"gpu": "H100-SXM"}, "disaggregation": {"prefill": {"gpu": "B200"}}}
    grid = [("deployment.gpu", ["H200-SXM", "my.yaml"]), ("groups", [[{"gpu": "L4", "replicas": 1}]]),
            ("server.max_num_seqs", [4, 8])]
    candidates = [{"deployment.gpu": "A100-40GB"}]
    assert gpu_names_in(data, grid, candidates, None) == {"H100-SXM", "B200", "H200-SXM", "my.yaml", "L4",
                                                          "A100-40GB"}


def test_a_misspelt_gpu_in_a_prices_file_is_refused_by_the_sweep(tmp_path):
    prices = tmp_path / "prices.yaml"
    prices.write_text("H100-SMX: 2.0\nA100-SXM-80GB: 1.5\n")
    assert refused("sweep", CAP, "--grid", "server.max_num_seqs=4", "--prices", str(prices), "-q") == (
        f"error: --prices {prices}: GPU 'H100-SMX' is neither catalogued nor used by this sweep, so its price would "
        f"never apply; did you mean 'H100-SXM' or 'H200-SXM'?; {len(CATALOGUED.split(', '))} GPUs catalogued: "
        "`twin list gpus`")


def test_a_misspelt_gpu_in_a_price_option_or_a_plan_file_is_refused_by_the_plan(tmp_path):
    assert refused("plan", CAP, "--price", "H10=3", "-q").startswith(
        "error: --price: GPU 'H10' is neither catalogued nor used by this plan, so its price would never apply; "
        "did you mean 'H100-SXM' or 'H20'?; ")
    plan = tmp_path / "plan.yaml"
    plan.write_text(f"scenario: {CAP}\ntarget_rate_per_s: 1\nprices: {{b300x: 3}}\n")
    assert refused("plan", str(plan), "-q").startswith(
        "error: plan file prices:: GPU 'b300x' is neither catalogued nor used by this plan")


def test_aliases_catalogued_gpus_and_custom_spec_names_are_kept(tmp_path):
    check_price_names({"h100": "--price", "MI300X": "--price", "rtx-4090": "--prices p.yaml"}, {"H100-SXM"}, "x")
    (tmp_path / "my.yaml").write_text(SPEC)
    # a custom GPU is priced by its spec's name; its path is found relative to the scenario's folder
    check_price_names({"my-gpu": "--price"}, {"my.yaml"}, "this sweep", base_dir=str(tmp_path))
    with pytest.raises(TwinInputError, match="'my-gpu' is neither catalogued nor used by this sweep"):
        check_price_names({"my-gpu": "--price"}, {"H100-SXM"}, "this sweep")


# ------------------------------------------------------------------------------------------------ (b) read_json
def test_a_result_path_that_is_a_folder_or_a_pipe_says_which(tmp_path):
    from twin.results.export import read_json

    with pytest.raises(TwinInputError) as e:
        read_json(tmp_path)
    assert str(e.value) == f"result file {str(tmp_path)!r}: is a folder; give a file"
    pipe = tmp_path / "p.json"
    os.mkfifo(pipe)
    with pytest.raises(TwinInputError) as e:
        read_json(pipe)
    assert str(e.value) == f"result file {str(pipe)!r}: is a pipe; give a file"
    with pytest.raises(TwinInputError, match="no such file"):
        read_json(tmp_path / "nope.json")


# ------------------------------------------------------------------------------------------------ (c) dashboard
def test_the_url_warning_names_the_parameter_the_value_the_choices_and_the_dropped_changes():
    from twin.dashboard.share import url_choice_warning

    from twin.dashboard.share import link_params

    assert url_choice_warning("start", "nope", ["baseline", "vllm-default"], "vllm-default") == (
        "URL parameter start='nope': not one of baseline, vllm-default; showing vllm-default")
    assert url_choice_warning("start", "x", ["baseline"], "baseline", ["w.a", "w.seed"]) == (
        "URL parameter start='x': not one of baseline; showing baseline, without the link's w.a, w.seed")
    assert link_params({"scenario": "a", "start": "b", "embed": "true", "w.x": "1", "other": "2"}, ("scenario",)) == [
        "start", "w.x"]


@pytest.mark.parametrize("params, warning", [
    ({"scenario": "concurrency_cap_trap", "start": "vllm-defualt", "w.max_num_seqs": "16"},
     "URL parameter start='vllm-defualt': not one of baseline, vllm-default; showing vllm-default, without the "
     "link's w.max_num_seqs"),
    ({"scenario": "concurrency_cap_tarp", "start": "baseline"},
     "URL parameter scenario='concurrency_cap_tarp': not one of {names}; showing {first}, without the link's "
     "start"),
    ({"start": "baseline", "seed": "3", "w.max_num_seqs": "16"},
     "URL parameter scenario is missing (one of {names}); showing {first}, without the link's start, seed, "
     "w.max_num_seqs"),
    ({"scenario": "concurrency_cap_trap", "w.max_num_seqs": "16"},
     "URL parameter start is missing (one of baseline, vllm-default); showing vllm-default, without the link's "
     "w.max_num_seqs"),
    ({"scenario": "concurrency_cap_trap", "start": "vllm-default"}, None),
    ({"scenario": "concurrency_cap_trap"}, None),
    ({}, None),
], ids=["unknown-start", "unknown-scenario", "missing-scenario", "missing-start", "known-start", "scenario-alone",
        "no-link"])
def test_a_shared_link_whose_start_or_scenario_names_nothing_says_so(params, warning):
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params.update(params)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    from twin.dashboard.state import bundled_scenarios

    names = list(bundled_scenarios())
    warning = warning and warning.format(names=", ".join(names), first=names[0])
    url = [w.value.replace("\\", "") for w in at.warning if w.value.startswith("URL parameter")]
    assert url == ([warning] if warning else [])


def test_a_shared_link_parameter_the_page_does_not_read_is_named():
    from twin.dashboard.share import unknown_params_warning

    assert unknown_params_warning({"scenario": "a", "start": "b", "seed": "0", "w.x": "1", "embed": "true"}) is None
    assert unknown_params_warning({"scenario": "a", "max_num_seqs": "16"}) == (
        "URL parameter max_num_seqs='16': not read by this page (it reads scenario, start, seed and w.<setting>); "
        "left out")
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params.update({"scenario": "concurrency_cap_trap", "start": "baseline", "strat": "vllm-default"})
    at.run()
    assert not at.exception and not at.error
    assert [w.value.replace("\\", "") for w in at.warning if w.value.startswith("URL parameter")] == [
        "URL parameter strat='vllm-default': not read by this page (it reads scenario, start, seed and "
        "w.<setting>); left out"]


# ------------------------------------------------------------------------------------------------ P:D plans
PD_PLAN = str(ROOT / "examples" / "plan_pd_ratio.yaml")


@pytest.mark.parametrize("option", [["--csv", "x.csv"], ["--deployments-csv", "x.csv"], ["--plot", "x.html"],
                                    ["--router", "round_robin"], ["--rel-tol", "0.1"], ["--confidence", "0.9"],
                                    ["--max-replicas", "8"], ["--frontier-extra", "2"], ["--no-prune"],
                                    ["--verify-all"]])
def test_a_replica_plan_option_is_refused_by_a_pd_plan(tmp_path, option):
    given = [str(tmp_path / a) if a.endswith((".csv", ".html")) else a for a in option]
    assert refused("plan", PD_PLAN, *given, "-q") == (
        f"error: {option[0]}: applies only with a plan of replicas, not a P:D grid (the scenario has disaggregation:)")


def test_a_replica_plan_field_is_refused_in_a_pd_plan_file(tmp_path):
    plan = tmp_path / "plan.yaml"
    scenario = ROOT / "scenarios" / "pd_disaggregation.yaml"
    plan.write_text(f"scenario: {scenario}\nvariant: 2p1d\ntarget_rate_per_s: 5\nslo: {{ttft_ms: 500}}\n"
                    "max_replicas: 8\n")
    assert refused("plan", str(plan), "-q") == (
        f"error: {plan}: max_replicas: applies only with a plan of replicas, not a P:D grid (the scenario has "
        "disaggregation:)")


# ------------------------------------------------------------------------------------------------ sweep options
def test_sweep_options_that_would_change_nothing_are_refused():
    sweep = ["sweep", CAP, "--grid", "server.max_num_seqs=4", "-q"]
    assert refused(*sweep, "--per-replica") == (
        "error: --per-replica: applies only with --out (the table it adds a column to)")
    assert refused(*sweep, "--prune", "bisect") == (
        "error: --prune: applies only with --search grid, a rate axis (--grid rate=... or rate_scale=...) and an SLO")


def test_an_explicit_variant_baseline_wins_over_the_plan_files_variant(tmp_path):
    plan = tmp_path / "plan.yaml"
    scenario = ROOT / "scenarios" / "pd_disaggregation.yaml"
    plan.write_text(f"scenario: {scenario}\nvariant: 2p1d\ntarget_rate_per_s: 5\nslo: {{ttft_ms: 500}}\nrouter: nope\n")
    assert "router: applies only with a plan of replicas" in refused("plan", str(plan), "-q")   # the 2p1d P:D grid
    assert refused("plan", str(plan), "-v", "baseline", "-q").startswith("error: router: 'nope': allowed: ")


# ------------------------------------------------------------------------------------------------ calibrate modes
@pytest.mark.parametrize("args, line", [
    (["--from-results", "r.json", "--quick"], "error: --quick: applies only with a run on the engine (without "
                                              "--from-results or --plan)"),
    (["--from-results", "r.json", "--device", "cpu"], "error: --device: applies only with a run on the engine "
                                                      "(without --from-results or --plan)"),
    (["--quick", "--gpu", "H100-SXM"], "error: --gpu: applies only with --from-results or --plan"),
    (["--quick", "--workers", "2"], "error: --workers: applies only with --from-results"),
    (["--quick", "--tp", "2"], "error: --tp: applies only with --from-results"),
    (["--plan", "-o", "x.json"], "error: --output: applies only with a calibration (without --plan)"),
    (["--plan", "--from-results", "r.json"], "error: --plan: prints the benchmark runs to make; give it without "
                                             "--from-results"),
], ids=["results-quick", "results-device", "engine-gpu", "engine-workers", "engine-tp", "plan-output",
        "plan-results"])
def test_a_calibrate_option_of_the_other_mode_is_refused(args, line):
    assert refused("calibrate", *args) == line
