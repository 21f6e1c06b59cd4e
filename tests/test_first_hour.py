"""A new user's first mistakes get an error that says what to write instead (issue 33, round 20: the first
hour): a field name misspelt, its unit left off, put at the wrong level, or a number given with its unit."""

import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from twin.cli.main import main
from twin.hardware.catalog import list_gpus, list_models
from twin.workload.strict_model import unknown_field_hint

SCENARIO = """name: first-hour
deployment: {gpu: H100-SXM, model: llama-3.1-8b}
workload:
  arrivals: {process: poisson, rate_per_s: 2}
  num_requests: 4
  classes:
    - {name: chat, share: 1.0, prompt: {suffix_tokens: 64}, output_tokens: 8}
slo: {ttft_ms: 500}
"""


N_GPUS, N_MODELS = len(list_gpus()), len(list_models())   # the CLI counts the catalogue, not lists it


def run_with(tmp_path, *sets: str):
    path = tmp_path / "first.yaml"
    path.write_text(SCENARIO, encoding="utf-8")
    args = ["run", str(path), "-q"]
    for s in sets:
        args += ["--set", s]
    return CliRunner().invoke(main, args)


def first_line(result) -> str:
    assert result.exit_code == 2 and "Traceback" not in result.output
    return result.output.strip().splitlines()[0]


@pytest.mark.parametrize("setting, expected", [
    ("server.max_num_seq=4", "server: unknown field 'max_num_seq'; did you mean 'max_num_seqs'? (allowed: "),
    ("max_num_seqs=4", "top level: unknown field 'max_num_seqs'; did you mean 'server.max_num_seqs'? (allowed: "),
    ("gpu=H200-SXM", "top level: unknown field 'gpu'; did you mean 'deployment.gpu'? (allowed: "),
    ("workload.arrivals.rate=10", "workload.arrivals: unknown field 'rate'; did you mean 'rate_per_s'? "
                                  "(allowed: max_concurrency, process, rate_per_s, scale_to_duration)"),
    ("slo.ttf=500", "slo.ttf: unknown SLO metric; did you mean 'ttft_ms'?; allowed: ttft_ms, tpot_ms, itl_ms, "
                    "e2el_ms (or vLLM's ttft, tpot, e2el, itl)"),    # round 21: slo.ttft (vLLM's name) is read
    ("sed=3", "top level: unknown field 'sed'; did you mean 'seed'? (allowed: "),
])
def test_unknown_field_says_what_was_meant(tmp_path, setting, expected):
    assert expected in first_line(run_with(tmp_path, setting))


def test_unknown_field_with_nothing_close_lists_the_allowed_only(tmp_path):
    line = first_line(run_with(tmp_path, "server.bogus=1"))
    assert "server: unknown field 'bogus' (allowed: admission_watermark, " in line
    assert "did you mean" not in line


@pytest.mark.parametrize("setting, expected", [
    ("workload.arrivals.rate_per_s=10rps", "workload.arrivals.rate_per_s: must be a number (got '10rps'; write the "
                                           "number alone: its name's _per_s is the unit)"),
    ("workload.arrivals.rate_per_s=10 req/s", "(got '10 req/s'; write the number alone: its name's _per_s is the "
                                              "unit)"),
    ("workload.duration_s=5min", "workload.duration_s: must be a number (got '5min'; write the number alone: its "
                                 "name's _s is the unit)"),
    ("slo.ttft_ms=500ms", "slo.ttft_ms: must be a number of milliseconds > 0, or a mapping like {p99: 1000} (got "
                          "'500ms'; write the number alone: its name's _ms is the unit)"),
    ("slo.ttft_ms.p99=500ms", "slo.ttft_ms.p99: must be a number of milliseconds > 0 (got '500ms'; write the number "
                              "alone: its name's _ms is the unit)"),
])
def test_a_number_with_its_unit_says_to_drop_the_unit(tmp_path, setting, expected):
    assert expected in first_line(run_with(tmp_path, setting))


@pytest.mark.parametrize("setting, expected", [
    ("workload.duration_s=long", "workload.duration_s: must be a number (got 'long')"),
    ("server.max_num_seqs=four", "server.max_num_seqs: must be an integer (got 'four')"),
    ("slo.ttft_ms=true", "slo.ttft_ms: must be a number of milliseconds > 0, or a mapping like {p99: 1000} (got "
                         "True)"),
])
def test_other_bad_numbers_keep_their_message(tmp_path, setting, expected):
    line = first_line(run_with(tmp_path, setting))
    assert line.endswith(expected) and "write the number alone" not in line


def test_hint_order_unit_then_section_then_spelling():
    from twin.scenario import ScenarioBody
    from twin.workload.arrival_config import PoissonArrivals
    assert unknown_field_hint(PoissonArrivals, "rate") == "; did you mean 'rate_per_s'?"
    assert unknown_field_hint(ScenarioBody, "max_num_seqs") == "; did you mean 'server.max_num_seqs'?"
    assert unknown_field_hint(ScenarioBody, "seeds") == "; did you mean 'seed'?"
    assert unknown_field_hint(ScenarioBody, "zzz") == ""


def test_good_input_runs(tmp_path):
    result = run_with(tmp_path, "server.max_num_seqs=4", "workload.arrivals.rate_per_s=3")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("baseline: llama-3.1-8b on 1x1 H100-SXM, continuous, max_num_seqs=4, ")


@pytest.mark.parametrize("setting, expected", [
    ("deployment.gpu=h10", f"gpu: unknown GPU 'h10'; did you mean 'H100-SXM' or 'H20'?; {N_GPUS} GPUs catalogued: "
                           "`twin list gpus`; or give a YAML spec file path"),
    ("deployment.gpu=H100-SMX", f"gpu: unknown GPU 'H100-SMX'; did you mean 'H100-SXM' or 'H200-SXM'?; {N_GPUS} "
                                "GPUs catalogued: `twin list gpus`; or give a YAML spec file path"),
    ("deployment.model=Llama-3.1-8B-Instruc", "model: unknown model 'Llama-3.1-8B-Instruc'; did you mean "
                                              f"'llama-3.1-8b' or 'llama-3.1-70b'?; {N_MODELS} models catalogued: "
                                              "`twin list models`; or give a path to a Hugging Face config.json"),
])
def test_a_mistyped_gpu_or_model_is_matched_against_aliases_too(tmp_path, setting, expected):
    assert expected in first_line(run_with(tmp_path, setting))


def test_did_you_mean_suggests_the_name_an_alias_stands_for():
    from twin.errors import did_you_mean
    assert did_you_mean("h10", ["H100-SXM", "H20"], {"h100": "H100-SXM", "h100-sxm5": "H100-SXM"}) == \
        "; did you mean 'H100-SXM' or 'H20'?"
    assert did_you_mean("zzz", ["H100-SXM"], {"h100": "H100-SXM"}) == ""


def test_list_says_aliases_work():
    gpus = CliRunner().invoke(main, ["list", "gpus"])
    models = CliRunner().invoke(main, ["list", "models"])
    assert gpus.exit_code == 0 and "Any case; aliases work too (h100, a100, h200, b200, 4090)." in gpus.output
    assert models.exit_code == 0 and "Hugging Face ids work too" in models.output


def test_help_points_at_discovery_and_says_the_baseline_always_runs():
    run_help = CliRunner().invoke(main, ["run", "--help"]).output
    compare_help = " ".join(CliRunner().invoke(main, ["compare", "--help"]).output.split())
    assert "bundled scenario's name: twin list" in " ".join(run_help.split())
    assert "Comma-separated variants, run beside the baseline (default: all)." in compare_help


def test_set_with_a_space_instead_of_equals_says_how_to_write_it(tmp_path):
    path = tmp_path / "first.yaml"
    path.write_text(SCENARIO, encoding="utf-8")
    result = CliRunner().invoke(main, ["run", str(path), "--set", "server.max_num_seqs", "4"])
    assert first_line(result).startswith("error: Got unexpected extra argument (4); --set takes KEY=VALUE as one "
                                         "word: --set server.max_num_seqs=4 (see ")
    other = CliRunner().invoke(main, ["run", str(path), "extra"])
    assert first_line(other).startswith("error: Got unexpected extra argument (extra) (see ")


def test_a_missing_trace_names_the_folder_rule_and_the_closest_file(tmp_path, monkeypatch):
    from twin.workload.paths import missing_path_hint
    (tmp_path / "azure_conv.csv").write_text("x\n", encoding="utf-8")
    monkeypatch.setenv("TWIN_TRACES_DIR", str(tmp_path))
    assert missing_path_hint("{traces}/azure_conv.cvs", tmp_path / "azure_conv.cvs") == \
        f"; did you mean 'azure_conv.csv'? ('{{traces}}' is TWIN_TRACES_DIR={tmp_path})"
    monkeypatch.delenv("TWIN_TRACES_DIR")
    assert missing_path_hint("{traces}/nope.csv", tmp_path / "nope.csv") == \
        " ('{traces}' is the shared/traces folder beside the checkout: TWIN_TRACES_DIR is unset)"
    assert missing_path_hint("traces/x.csv", tmp_path / "traces" / "x.csv") == \
        " (a relative path is read from the scenario file's folder)"
    assert missing_path_hint(str(tmp_path / "gone.csv"), tmp_path / "gone.csv") == ""


def test_run_of_a_missing_trace_is_one_line(tmp_path):
    path = tmp_path / "trace.yaml"
    path.write_text("deployment: {gpu: H100-SXM, model: llama-3.1-8b}\n"
                    "workload: {trace: {path: traces/none.csv, format: azure}}\n", encoding="utf-8")
    line = first_line(CliRunner().invoke(main, ["run", str(path), "-q"]))
    assert line == (f"error: workload.trace.path: file not found: {tmp_path / 'traces' / 'none.csv'} (a relative "
                    "path is read from the scenario file's folder)")


@pytest.mark.parametrize("command", ["run", "compare", "list", "sweep", "plan", "diagnose", "protocol", "validate",
                                     "calibrate"])
def test_help_shows_no_docstring_markup(command):
    result = CliRunner().invoke(main, [command, "--help"])
    assert result.exit_code == 0 and "``" not in result.output


def test_an_override_indexes_into_a_list():
    from twin.errors import TwinInputError
    from twin.yaml_input import deep_merge, parse_set_options
    base = {"workload": {"classes": [{"name": "a", "prompt": {"suffix_tokens": 64}}, {"name": "b"}]}}
    merged = deep_merge(base, parse_set_options(["workload.classes.0.prompt.num_prefix_groups=50",
                                                 "workload.classes.1.share=0.5"]))
    assert merged == {"workload": {"classes": [{"name": "a", "prompt": {"suffix_tokens": 64, "num_prefix_groups": 50}},
                                               {"name": "b", "share": 0.5}]}}
    assert base["workload"]["classes"][0] == {"name": "a", "prompt": {"suffix_tokens": 64}}   # not modified
    with pytest.raises(TwinInputError, match=r"^classes.2 \(an override\): no such item \(classes has 2, numbered "
                                             r"from 0\)$"):
        deep_merge(base, parse_set_options(["workload.classes.2.share=1"]))


def test_set_of_a_class_field_runs(tmp_path):
    result = run_with(tmp_path, "workload.classes.0.output_tokens=4")
    assert result.exit_code == 0, result.output


def test_set_adjusts_a_datasets_expansion_as_the_readme_says():
    from twin.errors import TwinInputError
    from twin.workload import load_workload_config
    data = {"arrivals": {"process": "poisson", "rate_per_s": 2}, "num_requests": 10,
            "dataset": {"kind": "random", "input_len": 128, "output_len": 16}}
    plain = load_workload_config(data)
    edited = load_workload_config(dict(data, classes={"0": {"timeout_s": 5}}))
    assert plain.classes[0].timeout_s is None and edited.classes[0].timeout_s == 5
    assert edited.classes[0].name == plain.classes[0].name == "random"
    with pytest.raises(TwinInputError, match=r"classes.1 \(an override\): no such item \(classes has 1"):
        load_workload_config(dict(data, classes={"1": {"timeout_s": 5}}))
    with pytest.raises(TwinInputError, match="give exactly one of classes, dataset"):
        load_workload_config(dict(data, classes=[{"name": "x"}]))


DOC = Path(__file__).resolve().parents[1] / "docs" / "first-hour.md"
# docs/first-hour.md's question table: the commands cheap enough to run here (plan: minutes, its own tests;
# spec_methods: 30 runs), each with a row its answer is read from
DOC_COMMANDS = {
    "twin run concurrency_cap_trap --all-variants": "mean queue length",
    "twin compare chat_shared_prompt --variants caching-off --set workload.classes.0.prompt.num_prefix_groups=50":
        "prefix cache hit rate",
    "twin compare speculative_decoding --variants creative-c256 --reference creative-c256-nospec":
        "spec acceptance length",
    "twin run chat_shared_prompt --set deployment.model=Qwen/Qwen2.5-7B-Instruct --set deployment.gpu=h200 --set "
    "workload.arrivals.rate_per_s=12": "request throughput",
}


@pytest.mark.parametrize("command", list(DOC_COMMANDS))
def test_first_hour_doc_commands_run_as_printed(command):
    assert f"`{command}`" in DOC.read_text(encoding="utf-8")
    result = CliRunner().invoke(main, shlex.split(command)[1:] + ["-q"])
    assert result.exit_code == 0, result.output
    assert DOC_COMMANDS[command] in result.output
