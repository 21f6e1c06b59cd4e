"""Hostile input on round 22's new surfaces (docs/fidelity.md "Round 22: hostile input on the round's new
surfaces"): the server keys `twin calibrate --from-results` reads from a result JSON (``gpu``,
``tensor_parallel_size``, ``vllm_version``, the vLLM knobs: the twin's own ``--json`` writes them), `twin diagnose
--run NAME`, and the ``fitted_on`` record behind a server profile's model note. Each bad value is one line naming
the file, the key, what is allowed and the value (cut to a readable length); each genuinely valid form is read."""

from __future__ import annotations

import json
import warnings

import pytest
from click.testing import CliRunner

from tests.test_diagnose_formats import _table_rows
from tests.test_fitting_readers import bench_doc
from twin.analysis.measured import load_measured
from twin.cli.main import main
from twin.errors import TwinInputError
from twin.fitting.readers import read_results

LONG = "x" * 1_000_000          # a 1 MB value: refused or echoed cut, never echoed whole


def _read(tmp_path, **over):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(bench_doc(**over)))
    return path, read_results(path)


def _refused(tmp_path, **over) -> str:
    with pytest.raises(TwinInputError) as exc:
        _read(tmp_path, **over)
    return str(exc.value)


# ---- the result file's server keys -------------------------------------------------------------------------
NAME = "must be a name (text of 1 to 4,096 characters), e.g. H100-SXM (twin list gpus)"
COUNT = "must be a whole number 1 to 2,147,483,647"
FRACTION = "must be a number in (0, 1], the fraction of GPU memory vLLM may use"
VERSION = 'must be a release string (at most 100 characters), e.g. "0.11.0"'
NUMBER_VERSION = "a JSON number loses the release's trailing zeros (0.10 reads 0.1): " + VERSION


@pytest.mark.parametrize("key, value, message", [
    ("gpu", True, f"gpu = True: {NAME}"),                  # was read as the GPU named 'True'
    ("gpu", 8.5, f"gpu = 8.5: {NAME}"),
    ("gpu", ["H100-SXM"], f"gpu = ['H100-SXM']: {NAME}"),
    ("gpu", {"name": "H100-SXM"}, f"gpu = {{'name': 'H100-SXM'}}: {NAME}"),
    ("gpu", 0, f"gpu = 0: {NAME}"),                        # was taken as no GPU at all
    ("gpu", "", f"gpu = '': {NAME}"),
    ("gpu", LONG, f"gpu = '{'x' * 56}...: {NAME}"),       # was a traceback (a file name too long)
    ("model_id", 7, "model_id = 7: must be a name (text of 1 to 4,096 characters), e.g. "
                    "meta-llama/Llama-3.1-8B-Instruct (twin list models)"),   # was silently ignored
    ("tensor_parallel_size", 1e308, "tensor_parallel_size = 1e+308: must be a whole number 1 to 64"),
    ("tensor_parallel_size", 2**63, "tensor_parallel_size = 9223372036854775808: must be a whole number 1 to 64"),
    ("tensor_parallel_size", True, "tensor_parallel_size = True: must be a whole number >= 1"),
    ("tensor_parallel_size", 8.5, "tensor_parallel_size = 8.5: must be a whole number >= 1"),
    ("vllm_version", 0.1, f"vllm_version = 0.1: {NUMBER_VERSION}"),    # was read as release "0.1"
    ("vllm_version", 8.5, f"vllm_version = 8.5: {NUMBER_VERSION}"),    # was accepted as release "8.5"
    ("vllm_version", True, f"vllm_version = True: {VERSION}"),
    ("vllm_version", ["0.11"], f"vllm_version = ['0.11']: {VERSION}"),
    ("vllm_version", LONG, f"vllm_version = '{'x' * 56}...: {VERSION}"),   # was a 1 MB line
    ("vllm_version", "0.7.3", "vllm_version = '0.7.3' is not a modelled vLLM release (modelled: releases from 0.8"),
    ("max_num_seqs", 1e308, f"max_num_seqs = 1e+308: {COUNT}"),        # was a 309-digit line, not naming the file
    ("max_num_seqs", 0, "max_num_seqs = 0: must be a whole number >= 1"),
    ("max_num_batched_tokens", 2**63, f"max_num_batched_tokens = 9223372036854775808: {COUNT}"),
    ("max_model_len", 1e308, f"max_model_len = 1e+308: {COUNT}"),
    ("block_size", 7, "block_size = 7: must be one of vLLM's block sizes 1, 8, 16, 32, 64, 128, 256"),
    ("block_size", 1e308, f"block_size = 1e+308: {COUNT}"),
    ("gpu_memory_utilization", 1.5, f"gpu_memory_utilization = 1.5: {FRACTION}"),
    ("gpu_memory_utilization", 0, f"gpu_memory_utilization = 0: {FRACTION}"),
    ("gpu_memory_utilization", "8", f"gpu_memory_utilization = '8': {FRACTION}"),
    ("gpu_memory_utilization", "nan", f"gpu_memory_utilization = 'nan': {FRACTION}"),
    ("enable_prefix_caching", LONG, f"enable_prefix_caching = '{'x' * 56}...: must be true or false"),
    ("async_scheduling", 2, "async_scheduling = 2: must be true or false"),
    ("request_rate", LONG, f"request_rate = '{'x' * 56}...: must be a number > 0 or \"inf\""),
])
def test_a_bad_server_key_is_one_line_naming_the_file_key_range_and_value(tmp_path, key, value, message):
    text = _refused(tmp_path, **{key: value})
    assert text.startswith(f"{tmp_path / 'r.json'}: {message}"), text
    assert "\n" not in text and len(text) < 400


def test_the_valid_forms_of_the_server_keys_are_read(tmp_path):
    """`vllm bench serve --metadata KEY=VALUE` writes every value as text; the twin's own --json writes them typed;
    a future release takes the newest behaviours (twin.core.vllm_versions); null is absent."""
    _, [run] = _read(tmp_path, gpu="h100", tensor_parallel_size="8", vllm_version="v0.19.0-cu130",
                     max_num_seqs="64", block_size="32", gpu_memory_utilization="0.85", enable_prefix_caching="false",
                     async_scheduling=True, max_model_len=None)
    assert (run.gpu, run.tensor_parallel_size) == ("h100", 8)
    assert run.server == {"vllm_version": "v0.19.0-cu130", "max_num_seqs": 64, "block_size": 32,
                          "gpu_memory_utilization": 0.85, "enable_prefix_caching": False, "async_scheduling": True}
    _, [run] = _read(tmp_path, vllm_version="9.99", gpu=None)
    assert run.server == {"vllm_version": "9.99"} and run.gpu is None


def _twin_json(tmp_path, monkeypatch, **over):
    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(main, ["run", "concurrency_cap_trap", "--json", "out.json"]).exit_code == 0
    doc = json.loads((tmp_path / "out.json").read_text())
    (tmp_path / "out.json").write_text(json.dumps({**doc, **over}))


def _calibrate(*args) -> tuple[int, str]:
    res = CliRunner().invoke(main, ["calibrate", "--from-results", "out.json", "-q", "--max-sim-s", "10", *args])
    return res.exit_code, res.output.strip().splitlines()[-1]


@pytest.mark.parametrize("over, line", [
    ({"gpu": "H100-SXMM"}, "error: out: the result file's gpu: unknown GPU 'H100-SXMM'; did you mean 'H100-SXM'"),
    ({"model_id": "llama-3.1-8bb"}, "error: out: the result file's model: unknown model 'llama-3.1-8bb'; did you "
                                    "mean 'llama-3.1-8b'"),
    ({"tensor_parallel_size": 7}, "error: out: the result file's tensor_parallel_size = 7: must divide "
                                  "num_attention_heads (32) of model llama-3.1-8b"),
])
def test_what_the_twins_json_says_wrongly_is_named_as_the_files(tmp_path, monkeypatch, over, line):
    _twin_json(tmp_path, monkeypatch, **over)
    code, last = _calibrate()
    assert code == 2 and last.startswith(line), last


def test_a_name_too_long_to_be_a_path_is_one_line_everywhere(tmp_path, monkeypatch):
    """`--gpu`, `--model`, a scenario's deployment.gpu: each was a traceback (OSError: File name too long)."""
    _twin_json(tmp_path, monkeypatch)
    long = "y" * 5000
    for args in (["--gpu", long], ["--model", long]):
        code, last = _calibrate(*args)
        assert code == 2 and "'yyyyy" in last and "...;" in last and len(last) < 1500, last
    res = CliRunner().invoke(main, ["run", "concurrency_cap_trap", "-q", "--set", f"deployment.gpu={long}"])
    assert res.exit_code == 2
    assert len(res.output.strip().splitlines()) == 1 and "unknown GPU 'yyy" in res.output
    from twin.hardware.catalog import resolve_gpu, resolve_model

    for resolve in (resolve_gpu, resolve_model):
        with pytest.raises(TwinInputError) as exc:
            resolve("z" * 300)            # one path component over 255 bytes
        assert f"'{'z' * 300}'" in str(exc.value)


# ---- twin diagnose --run ----------------------------------------------------------------------------------------
def _sweep(tmp_path, concurrencies=(1, 2)):
    rows = [r for r in _table_rows() if r["output_tokens"] is not None]
    path = tmp_path / "sweep.jsonl"
    path.write_text("".join(json.dumps({**row, "concurrency": c}) + "\n" for c in concurrencies for row in rows))
    return path


@pytest.mark.parametrize("name, shown", [
    ("", "''"), (" ", "' '"), ("sweep/c1\nsweep/c2", "'sweep/c1\\nsweep/c2'"), (" sweep/c1", "' sweep/c1'"),
    ("sweep/c1\u200b", "'sweep/c1\\u200b'"), ("y" * 100_000, "'" + "y" * 56 + "..."),
])
def test_an_odd_run_name_is_echoed_quoted_and_cut(tmp_path, name, shown):
    """An empty name read ``--run :``, a 100 kB one was echoed whole."""
    path = _sweep(tmp_path)
    with pytest.raises(TwinInputError) as exc:
        load_measured(path, name)
    assert str(exc.value).startswith(f"--run {shown}: not a run in {path} (it holds sweep/c1, sweep/c2)")
    assert len(str(exc.value)) < 300


def test_a_run_name_is_matched_exactly_and_unicode_names_read_as_given(tmp_path):
    path = _sweep(tmp_path)
    with pytest.raises(TwinInputError) as exc:
        load_measured(path, "sweep/c")            # a prefix of both runs: neither is picked
    assert str(exc.value) == (f"--run sweep/c: not a run in {path} (it holds sweep/c1, sweep/c2); did you mean "
                              f"'sweep/c2' or 'sweep/c1'?")
    with pytest.raises(TwinInputError) as exc:
        load_measured(path, "ßwéep/c1")
    assert str(exc.value).startswith("--run ßwéep/c1: not a run")
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps(bench_doc()))
    with pytest.raises(TwinInputError) as exc:
        load_measured(bench, "")
    assert str(exc.value) == f"--run '': {bench} holds one run, bench; leave --run out (or give that name)"


def test_a_file_of_many_runs_lists_eight_and_counts_the_rest(tmp_path):
    """3,000 runs were listed whole: a 35 kB line."""
    path = _sweep(tmp_path, concurrencies=range(1, 31))
    first = ", ".join(f"sweep/c{c}" for c in range(1, 9))
    with pytest.raises(TwinInputError) as exc:
        load_measured(path)
    assert str(exc.value) == (f"{path}: holds 30 runs ({first} and 22 more); twin diagnose reads one run: pick one "
                              f"with --run NAME (twin calibrate --from-results reads them all)")
    with pytest.raises(TwinInputError) as exc:
        load_measured(path, "nope")
    assert str(exc.value) == f"--run nope: not a run in {path} (it holds {first} and 22 more)"
    assert load_measured(path, "sweep/c30").max_concurrency == 30


# ---- a server profile's fitted_on --------------------------------------------------------------------------------
def _profile(path, fitted_on):
    path.write_text(json.dumps({"format": "twin-server-profile", "version": 1, "params": {"step_overhead_s": 2e-3},
                                "fitted_on": fitted_on}))
    return path


LIST = "must be a list of names (text of 1 to 4,096 characters each)"


@pytest.mark.parametrize("fitted_on, message", [
    ("x", "fitted_on = 'x': must be an object (gpus, models, ...)"),               # was AttributeError
    ([1, 2], "fitted_on = [1, 2]: must be an object (gpus, models, ...)"),
    ({"models": 7}, f"fitted_on.models = 7: {LIST}"),                              # was TypeError
    ({"models": "llama-3.1-70b"}, f"fitted_on.models = 'llama-3.1-70b': {LIST}"),  # was 'l, l, a, m, a, ...'
    ({"models": [1, None]}, f"fitted_on.models = [1, None]: {LIST}"),             # was 'fitted on 1, None'
    ({"models": [["qwen3-32b"]]}, f"fitted_on.models = [['qwen3-32b']]: {LIST}"),
    ({"gpus": 3}, f"fitted_on.gpus = 3: {LIST}"),                                  # was TypeError
    ({"gpus": ["y" * 5000]}, f"fitted_on.gpus = ['{'y' * 55}...: {LIST}"),        # was a 5 kB warning
])
def test_a_profile_whose_fitted_on_is_not_names_is_refused(tmp_path, fitted_on, message):
    from twin.cost.server_profile import read_server_profile

    path = _profile(tmp_path / "p.json", fitted_on)
    with pytest.raises(TwinInputError) as exc:
        read_server_profile(path)
    assert str(exc.value) == f"profile {path}: {message}"


def test_a_profile_fitted_on_many_models_names_four(tmp_path):
    from twin.cost.server_profile import fitted_model_note, validate_server_profile

    doc = json.loads(_profile(tmp_path / "p.json", {"models": [f"m{i}" for i in range(100)]}).read_text())
    validate_server_profile(doc, "p.json")
    assert fitted_model_note(doc, "p.json", "llama-3.1-70b").startswith(
        "p.json was fitted on m0, m1, m2, m3 and 96 more, the deployment runs llama-3.1-70b: ")
    for fitted_on in (None, {}, {"models": None, "gpus": []}, {"models": ["llama-3.1-70b"]}):
        doc["fitted_on"] = fitted_on
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            validate_server_profile(doc, "p.json")
            assert fitted_model_note(doc, "p.json", "llama-3.1-70b") is None


# ---- inference-perf's exp-config.yaml: the same keys, the same checks ---------------------------------------
def _stage_folder(tmp_path, **server):
    import yaml

    from tests.fitting_helpers import write_config, write_stage

    folder = tmp_path / "res"
    write_config(folder, model="meta-llama/Llama-3.1-8B-Instruct", tp=1, groups=2, per_group=4, system_tokens=64,
                 question_tokens=32, output_tokens=8, stages=[(4.0, 5.0)])
    write_stage(folder, 0, rate=4.0, duration_s=5.0, prompt_tokens=96, output_tokens=8,
                metrics={"mean_ttft_ms": 30.0, "median_ttft_ms": 28.0, "p90_ttft_ms": 35.0, "p99_ttft_ms": 50.0,
                         "mean_e2el_ms": 120.0, "median_e2el_ms": 110.0, "p99_e2el_ms": 200.0})
    cfg = yaml.safe_load((folder / "exp-config.yaml").read_text())
    (folder / "exp-config.yaml").write_text(yaml.safe_dump({**cfg, **server}))
    return folder


@pytest.mark.parametrize("over, message", [
    ({"tensor_parallelism": 1.5}, "tensor_parallelism = 1.5: must be a whole number >= 1"),   # was TP 1, silently
    ({"tensor_parallelism": [2]}, "tensor_parallelism = [2]: must be a whole number >= 1"),   # was TP 1, silently
    ({"tensor_parallelism": 10**30}, f"tensor_parallelism = {10**30}: must be a whole number 1 to 64"),
    ({"model": ["a"]}, "model = ['a']: must be a name (text of 1 to 4,096 characters), e.g. "
                       "meta-llama/Llama-3.1-8B-Instruct (twin list models)"),       # was read as the model "['a']"
    ({"max_num_seqs": "x" * 100_000}, f"max_num_seqs = '{'x' * 56}...: must be a whole number >= 1"),  # 100 kB line
    ({"max_model_len": 2**63}, f"max_model_len = {2**63}: {COUNT}"),       # did not name the file
    ({"vllm_version": "v" * 1000}, f"vllm_version = '{'v' * 56}...: {VERSION}"),
])
def test_a_bad_exp_config_setting_is_one_line_naming_the_file(tmp_path, over, message):
    folder = _stage_folder(tmp_path, **over)
    with pytest.raises(TwinInputError) as exc:
        read_results(folder)
    assert str(exc.value) == f"{folder / 'exp-config.yaml'}: {message}"


def test_exp_config_reads_yaml_numbers_and_numeric_text_as_before(tmp_path):
    folder = _stage_folder(tmp_path, tensor_parallelism="2", vllm_version=0.11, max_num_seqs=128,
                           enable_prefix_caching="true", app="inference-perf")
    [run] = read_results(folder)
    assert (run.model, run.tensor_parallel_size) == ("meta-llama/Llama-3.1-8B-Instruct", 2)
    assert run.server == {"vllm_version": "0.11", "max_num_seqs": 128, "enable_prefix_caching": True}


def test_exp_config_giving_two_tp_sizes_is_refused(tmp_path):
    """tensor_parallelism was read and a contradicting (or invalid) tensor_parallel_size ignored."""
    folder = _stage_folder(tmp_path, tensor_parallelism=2, tensor_parallel_size=4)
    with pytest.raises(TwinInputError) as exc:
        read_results(folder)
    assert str(exc.value) == (f"{folder / 'exp-config.yaml'}: tensor_parallelism = 2 but tensor_parallel_size = 4: "
                              f"give one")
    folder = _stage_folder(tmp_path / "b", tensor_parallelism=2, tensor_parallel_size=-1)
    with pytest.raises(TwinInputError, match="tensor_parallel_size = -1: must be a whole number >= 1"):
        read_results(folder)
    [run] = read_results(_stage_folder(tmp_path / "c", tensor_parallelism=2, tensor_parallel_size="2"))
    assert run.tensor_parallel_size == 2


# ---- twin calibrate --sweep-plan (the engine calibration's plan file: no fuzz surface reached it) -------------
@pytest.mark.parametrize("doc, message", [
    ({"decode_batches": "abc"}, "plan: decode_batches = 'abc': must be a list of at most 256 whole numbers 1 to "
                                "1,048,576"),                                             # was a TypeError traceback
    ({"decode_batches": [float("nan")]}, "plan: decode_batches = [nan]: must be a list of at most 256 whole numbers "
                                         "1 to 1,048,576"),                               # was a TypeError traceback
    ({"decode_batches": [-1]}, "plan: decode_batches = [-1]: must be a list of at most 256 whole numbers 1 to "
                               "1,048,576"),                          # was 'max() arg is an empty sequence'
    ({"prefill_chunks": [1] * 200_000}, "plan: prefill_chunks = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, "
                                        "1, 1,...: must be a list of at most 256 whole numbers 1 to 1,048,576"),  # hung
    ({"mixed": [[4, 40, 24]]}, "plan: mixed = [[4, 40, 24]]: must be a list of at most 256 [decode batch >= 1, "
                               "decode context, chunk >= 1, chunk context] whole numbers to 1,048,576"),
    ({"replay_prompt": [48, 8]}, "plan: replay_prompt = [48, 8]: must be [least, most] tokens, 1 <= least <= most "
                                 "<= 1,048,576"),
    ({"replay_share": 1.5}, "plan: replay_share = 1.5: must be a number in [0, 1), the budget's share"),
    ({"fill_budget": "no"}, "plan: fill_budget = 'no': must be true or false"),
    ({"repeats": 0}, "plan: repeats = 0: must be a whole number 1 to 100"),
    ({"seed": 1.5}, "plan: seed = 1.5: must be a whole number 0 to 4,294,967,295"),
])
def test_a_bad_sweep_plan_field_is_one_line_naming_the_file(tmp_path, doc, message):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(doc))
    res = CliRunner().invoke(main, ["calibrate", "--device", "cpu", "--sweep-plan", str(plan), "-q",
                                    "-o", str(tmp_path / "p.json")])
    assert res.exit_code == 2 and res.output.strip() == f"error: --sweep-plan {plan}: {message}", res.output


def test_a_sweep_plan_that_is_not_an_object_names_its_option(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text("42")
    res = CliRunner().invoke(main, ["calibrate", "--device", "cpu", "--sweep-plan", str(plan), "-q"])
    assert res.output.strip() == f"error: --sweep-plan {plan}: expected a JSON object of plan fields"  # said --plan
