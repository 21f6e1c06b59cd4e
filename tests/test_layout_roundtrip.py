"""Every layout round-trips through the twin's ``--json``: `twin run X --set LAYOUT --json out.json` then `twin
calibrate --from-results out.json` with no other option replays the run on the layout it ran (weight format, KV
cache, pipeline / data / expert parallelism), or refuses in one line naming the layout and what to give instead
(replicas, replica groups, disaggregation, speculative decoding). A command line
contradicting the file is one line naming both; hostile values of each key are one line naming the file and the
key (``twin.results.server_keys``, ``twin.fitting.readers.layout_fields``, ``twin.cli.calibrate_layout``)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from twin.cli.calibrate_results import read_cases
from twin.cli.main import main
from twin.errors import TwinInputError
from twin.fitting.readers import read_results
from twin.fitting.replay import deployment_for

SMALL = ("--set", "workload.num_requests=16")
MOE = ("moe_qwen3_30b_a3b", "--set", "workload.num_requests=16")


def _run(tmp_path, scenario, *args, name="out.json"):
    res = CliRunner().invoke(main, ["run", scenario, *args, "-q", "--json", str(tmp_path / name)])
    assert res.exit_code == 0, res.output
    return tmp_path / name


def _read(path, **opts):
    kw = {"scenario": None, "sets": (), "vllm_version": None, "gpu": None, "model": None, "tp": None, **opts}
    _, [case] = read_cases([str(path)], **kw)
    return case


def _calibrate(path, *args):
    res = CliRunner().invoke(main, ["calibrate", "--from-results", str(path), *args, "-o",
                                    str(path.parent / "p.json")], env={"COLUMNS": "200"})
    return res.exit_code, res.output.strip().splitlines()


LAYOUTS = [
    # (scenario and --set, the Target fields calibration reads back)
    (("concurrency_cap_trap", *SMALL), {"weight_dtype": "auto", "kv_dtype": "bf16"}),
    (("concurrency_cap_trap", *SMALL, "--set", "deployment.weight_dtype=fp8", "--set", "deployment.kv_dtype=fp8"),
     {"weight_dtype": "fp8", "kv_dtype": "fp8"}),
    (("concurrency_cap_trap", *SMALL, "--set", "deployment.weight_dtype=awq"), {"weight_dtype": "int4"}),
    (("concurrency_cap_trap", *SMALL, "--set", "deployment.weight_dtype=int4-g64-sym"),
     {"weight_dtype": "int4-g64-sym"}),
    (("concurrency_cap_trap", *SMALL, "--set", "deployment.kv_dtype=fp16"), {"kv_dtype": "fp16"}),
    (("concurrency_cap_trap", *SMALL, "--set", "deployment.kv_dtype=fp32"), {"kv_dtype": "fp32"}),
    (("concurrency_cap_trap", *SMALL, "--set", "deployment.weight_formats.attention=fp8"),
     {"weight_formats": {"attention": "fp8"}}),
    (("concurrency_cap_trap", *SMALL, "--set", "deployment.pipeline_parallel_size=2"), {"pipeline_parallel_size": 2}),
    (("concurrency_cap_trap", *SMALL, "--set", "deployment.data_parallel_size=2"), {"data_parallel_size": 2}),
    ((*MOE, "--set", "deployment.tensor_parallel_size=2", "--set", "deployment.enable_expert_parallel=true"),
     {"enable_expert_parallel": True, "tensor_parallel_size": 2}),
    ((*MOE, "--set", "deployment.data_parallel_size=2", "--set", "deployment.enable_expert_parallel=true",
      "--set", "deployment.kv_dtype=fp8"),
     {"enable_expert_parallel": True, "data_parallel_size": 2, "kv_dtype": "fp8"}),
]


@pytest.mark.parametrize("args,fields", LAYOUTS, ids=lambda v: " ".join(v[1:]) if isinstance(v, tuple) else "")
def test_every_layout_calibration_can_fit_is_read_back_as_the_run_ran(tmp_path, args, fields):
    out = _run(tmp_path, *args)
    config = json.loads(out.read_text())["twin"]["config"]
    case = _read(out)
    for field, value in fields.items():
        assert getattr(case.target, field) == value, (field, case.target)
    # the server calibration replays is the run's: its KV pool, weight formats and parallel layout
    dep = deployment_for(case.run, case.target)
    assert dep.num_gpu_blocks == config["num_gpu_blocks"]
    assert dep.weight_formats.as_dict() == config["weight_formats"]
    assert (dep.layout.as_dict() if not dep.layout.is_trivial else None) == config.get("layout")


def test_calibrate_reads_the_layout_with_no_other_option_and_shows_where_it_came_from(tmp_path, monkeypatch):
    from twin.cli import calibrate_results

    monkeypatch.setattr(calibrate_results, "calibrate_fit", _no_fit)
    out = _run(tmp_path, "concurrency_cap_trap", *SMALL, "--set", "deployment.weight_dtype=fp8", "--set",
               "deployment.kv_dtype=fp8", "--set", "deployment.data_parallel_size=2")
    code, lines = _calibrate(out)
    assert code == 0 and lines[-1] == "fitted", lines
    rows = {cells[0]: cells[1:] for line in lines if line.count("│") == 4
            for cells in [[c.strip() for c in line.split("│")[1:4]]]}
    assert rows["weight_dtype"] == ["fp8", "result file (quantization)"]
    assert rows["kv_dtype"] == ["fp8", "result file (kv_cache_dtype)"]
    assert rows["data_parallel_size"] == ["2", "result file (data_parallel_size)"]
    # a plain run shows no layout row (its table is round 22's)
    plain = _run(tmp_path, "concurrency_cap_trap", *SMALL, name="plain.json")
    assert not any("weight_dtype" in line or "kv_dtype" in line for line in _calibrate(plain)[1])


def _no_fit(*_args, **_kw):
    """calibrate's fit, stopped: these tests are about what is read and shown before it."""
    from twin.cli.console import console

    console.print("fitted")
    raise SystemExit(0)


REFUSED = [
    (("concurrency_cap_trap", *SMALL, "--set", "deployment.replicas=2"),
     "error: out: the run was served by 2 replicas behind a router (replicas = 2); calibrate fits one server: give a "
     "run of one server (benchmarked directly; twin run: --set deployment.replicas=1)"),
    (("pd_disaggregation", "-v", "1p2d", "--set", "workload.num_requests=60", "--set", "warmup_s=0"),
     "error: out: the run was served disaggregated (disaggregation = 1P2D: prefill and decode servers apart); "
     "calibrate fits one server that does both: give a run of one colocated server (twin run: without "
     "disaggregation)"),
    (("speculative_decoding", "--set", "workload.num_requests=16"),
     "error: out: the run drafted tokens (speculative_config: eagle, 4 draft tokens); calibrate replays the target "
     "model alone: give runs with speculative decoding off, and the server's acceptance with --acceptance"),
    # a non-default all2all_backend is replayed since 33zJ (tests/test_knob_roundtrip.py)
]


@pytest.mark.parametrize("args,line", REFUSED, ids=lambda v: v[0] if isinstance(v, tuple) else "")
def test_a_layout_calibration_cannot_fit_is_refused_in_one_line(tmp_path, args, line):
    out = _run(tmp_path, *args)
    code, lines = _calibrate(out)
    assert code == 2 and lines[-1] == line and not any("Traceback" in x for x in lines), lines
    # whatever else the command line says: never a silent fit at another layout
    code, lines = _calibrate(out, "--gpu", "H100-SXM", "--model", "llama-3.1-8b")
    assert code == 2 and lines[-1] == line, lines


def test_several_replica_groups_are_refused(tmp_path):
    scenario = tmp_path / "groups.yaml"
    scenario.write_text(
        "name: two-groups\ndeployment:\n  model: llama-3.1-8b\n  groups:\n"
        "    - {name: a, gpu: H100-SXM, replicas: 1}\n    - {name: b, gpu: A100-SXM-80GB, replicas: 1}\n"
        "workload:\n  arrivals: {process: closed_loop, concurrency: 4}\n  num_requests: 16\n  classes:\n"
        "    - {name: c, share: 1.0, prompt: {suffix_tokens: 128}, output_tokens: 16}\n")
    out = _run(tmp_path, str(scenario))
    doc = json.loads(out.read_text())
    assert doc["replica_groups"] == 2 and "gpu" not in doc
    code, lines = _calibrate(out)
    assert code == 2 and lines[-1] == (
        "error: out: the run was served by 2 replica groups behind a router (replica_groups = 2); calibrate fits one "
        "server: give a run of one group's server (benchmarked directly; twin run: a deployment without groups)")


def test_a_command_line_layout_contradicting_the_file_is_refused(tmp_path):
    out = _run(tmp_path, "concurrency_cap_trap", *SMALL, "--set", "deployment.weight_dtype=awq", "--set",
               "deployment.kv_dtype=fp8", "--set", "deployment.data_parallel_size=2")
    with pytest.raises(TwinInputError) as exc:
        _read(out, sets=("deployment.kv_dtype=bf16",))
    assert str(exc.value) == ("--set deployment.kv_dtype=bf16: the result file says kv_cache_dtype fp8 (run out); "
                              "leave --set deployment.kv_dtype out or give the file's value")
    with pytest.raises(TwinInputError) as exc:
        _read(out, sets=("deployment.data_parallel_size=4",))
    assert str(exc.value).startswith("--set deployment.data_parallel_size=4: the result file says data_parallel_size 2")
    with pytest.raises(TwinInputError) as exc:
        _read(out, sets=("deployment.weight_dtype=auto",))
    assert "the result file says quantization int4" in str(exc.value)
    # the same value by another name is no contradiction; a field the file leaves out takes the command line's
    case = _read(out, sets=("deployment.weight_dtype=gptq", "deployment.kv_dtype=fp8",
                            "deployment.enable_expert_parallel=false"))
    assert (case.target.weight_dtype, case.target.kv_dtype, case.target.data_parallel_size) == ("gptq", "fp8", 2)


def test_the_file_wins_over_the_scenario_and_fills_what_it_leaves_out(tmp_path):
    out = _run(tmp_path, "concurrency_cap_trap", *SMALL, "--set", "deployment.kv_dtype=fp8")
    scenario = tmp_path / "s.yaml"
    scenario.write_text("deployment: {gpu: H100-SXM, model: llama-3.1-8b, kv_dtype: bf16, weight_dtype: fp8}\n"
                        "workload: {arrivals: {process: poisson, rate_per_s: 1}, num_requests: 4, classes: [{name: c, "
                        "share: 1.0, prompt: {suffix_tokens: 8}, output_tokens: 4}]}\n")
    case = _read(out, scenario=str(scenario))
    assert (case.target.kv_dtype, case.target.weight_dtype) == ("fp8", "fp8")


def _bench_file(tmp_path, **keys):
    """A one-run `vllm bench serve` result with ``keys`` at its top level (as --metadata KEY=VALUE writes them)."""
    doc = {"backend": "vllm", "model_id": "llama-3.1-8b", "num_prompts": 4, "request_rate": "inf",
           "max_concurrency": 4, "duration": 2.0, "completed": 4, "failed": 0, "total_input_tokens": 2048,
           "total_output_tokens": 256, "request_throughput": 2.0, "output_throughput": 128.0, "mean_ttft_ms": 60.0,
           "median_ttft_ms": 60.0, "mean_tpot_ms": 6.5, "gpu": "H100-SXM", **keys}
    path = tmp_path / "b.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("keys,layout", [
    ({"quantization": "awq_marlin"}, {"weight_dtype": "int4"}),
    ({"quantization": "modelopt_fp4"}, {"weight_dtype": "nvfp4"}),
    ({"quantization": "None", "kv_cache_dtype": "auto"}, {"kv_dtype": "bf16"}),
    ({"kv_cache_dtype": "fp8_e5m2", "data_parallel_size": "2", "enable_expert_parallel": "false"},
     {"kv_dtype": "fp8", "data_parallel_size": 2, "enable_expert_parallel": False}),
    ({"speculative_config": '{"method": "ngram", "num_speculative_tokens": 3}'},
     {"speculative_config": "ngram, 3 draft tokens"}),
    ({"disaggregation": "2p1d", "replicas": "1"}, {"disaggregation": "2P1D", "replicas": 1}),
    # a speculative server's counters, as vllm bench serve records them, without --metadata speculative_config
    ({"spec_decode_acceptance_rate": 61.5, "spec_decode_num_drafts": 412},
     {"speculative_config": "the file's spec_decode_* counters"}),
])
def test_vllm_s_own_values_are_read(tmp_path, keys, layout):
    [run] = read_results(_bench_file(tmp_path, **keys))
    assert run.layout == layout


@pytest.mark.parametrize("key,value,said", [
    ("quantization", 8, "quantization = 8: must be a weight format name"),
    ("quantization", "q" * 5000, "quantization = 'qqqq"),
    ("kv_cache_dtype", ["fp8"], "kv_cache_dtype = ['fp8']: must be a KV-cache format name"),
    ("weight_formats", {"mlp": "fp8"}, "weight_formats key 'mlp': unknown layer group; allowed: attention, "),
    ("weight_formats", {"attention": "zz"}, "weight_formats.attention: 'zz' is not a known weight format"),
    ("weight_formats", "attention=fp8", "weight_formats = 'attention=fp8': must be an object of layer group"),
    ("pipeline_parallel_size", 65, "pipeline_parallel_size = 65: must be a whole number 1 to 64"),
    ("data_parallel_size", 0, "data_parallel_size = 0: must be a whole number >= 1"),
    ("data_parallel_size", 1e308, "data_parallel_size = 1e+308: must be a whole number 1 to 1,024"),
    ("replicas", 1.5, "replicas = 1.5: must be a whole number >= 1"),
    ("replica_groups", 4097, "replica_groups = 4097: must be a whole number 1 to 4,096"),
    ("enable_expert_parallel", "yes", "enable_expert_parallel = 'yes': must be true or false"),
    ("all2all_backend", "Deep EP", "all2all_backend = 'Deep EP': must be a backend name"),
    ("disaggregation", "1P", "disaggregation = '1P': must be \"<P>P<D>D\""),
    ("disaggregation", "0P1D", "disaggregation = '0P1D': must be \"<P>P<D>D\""),
    ("speculative_config", 5, "speculative_config = 5: must be vLLM's --speculative-config"),
    ("speculative_config", "[" * 5000, "speculative_config = '[[[["),
])
def test_a_hostile_layout_value_is_one_line_naming_the_file_and_the_key(tmp_path, key, value, said):
    path = _bench_file(tmp_path, **{key: value})
    with pytest.raises(TwinInputError) as exc:
        read_results(path)
    msg = str(exc.value)
    assert msg.startswith(f"{path}: ") and said in msg and "\n" not in msg and len(msg) < 400, msg


def test_a_format_the_twin_does_not_model_is_read_and_refused_by_calibrate_alone(tmp_path):
    # read (twin diagnose does not use it), refused by calibrate; a weight format given on the command line stands in
    path = _bench_file(tmp_path, quantization="compressed-tensors")
    [run] = read_results(path)
    assert run.layout == {"unmodelled": {"quantization": "compressed-tensors"}}
    with pytest.raises(TwinInputError) as exc:
        _read(path)
    assert str(exc.value) == (
        "b: quantization = compressed-tensors: not a weight format the twin models (bf16, fp16, fp32, fp8, int8, "
        "int4, nf4, nvfp4, mxfp4, int4-g<group>[-sym]; vLLM's awq, gptq, modelopt_fp4, ...): give the checkpoint's "
        "with --set deployment.weight_dtype=FORMAT")
    assert _read(path, sets=("deployment.weight_dtype=fp8",)).target.weight_dtype == "fp8"
    path = _bench_file(tmp_path, kv_cache_dtype="int8")
    with pytest.raises(TwinInputError) as exc:
        _read(path, sets=("deployment.kv_dtype=fp8",))
    assert str(exc.value) == (
        "b: kv_cache_dtype = int8: not a KV-cache format the twin models (vLLM's auto, bfloat16, bf16, float16, fp16, "
        "float32, fp32, fp8, fp8_e4m3, fp8_e5m2): give runs with one of them")


def test_an_exp_config_states_its_layout_too(tmp_path):
    from tests.client_layouts import simulate_run, write_inference_perf

    folder = write_inference_perf(tmp_path / "ip", [(4.0, simulate_run(4.0, None, 40, 256, 32))], output_len=32,
                                  exp_config={"model": "llama-3.1-8b", "tensor_parallelism": 1,
                                              "kv_cache_dtype": "fp8", "data_parallel_size": 2})
    [run] = read_results(folder)
    assert run.layout == {"kv_dtype": "fp8", "data_parallel_size": 2}
