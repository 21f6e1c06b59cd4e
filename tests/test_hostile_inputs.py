"""One minimal case per cause the hostile-input campaign found (issue 38): each was a traceback, an
out-of-memory kill or a silent acceptance, and is now one ``TwinInputError`` line naming the file and field
(or, where vLLM would serve the input, the answer vLLM gives)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from twin.errors import TwinInputError
from twin.fitting.measured_run import LengthSample, MeasuredRun
from twin.fitting.readers import read_results
from twin.fitting.replay import Target, deployment_for, requests_to_simulate
from twin.hardware.model_catalog import model_from_hf_config
from twin.json_input import MAX_JSON_DEPTH, parse_json

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_fitting_readers import bench_doc  # noqa: E402

HF = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192,
      "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
      "max_position_embeddings": 131072}
TARGET = Target("llama-3.1-8b", "H100-SXM")


def one_line(exc_info) -> str:
    msg = str(exc_info.value)
    assert "\n" not in msg
    return msg


def write(tmp_path: Path, name: str, content) -> Path:
    p = tmp_path / name
    p.write_bytes(content if isinstance(content, bytes) else
                  (content if isinstance(content, str) else json.dumps(content)).encode())
    return p


# ------------------------------------------------------------------------------------------------ JSON parsing
def test_json_depth_is_limited_and_duplicates_refused():
    ok = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert parse_json(ok, "f.json") is not None
    with pytest.raises(TwinInputError) as err:
        parse_json("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1), "f.json")
    assert one_line(err).startswith(f"f.json: JSON nested {MAX_JSON_DEPTH + 1}+ levels deep")
    with pytest.raises(TwinInputError, match="f.json: JSON nested too deeply"):
        parse_json("[" * 100_000 + "]" * 100_000, "f.json")          # RecursionError inside the parser
    with pytest.raises(TwinInputError, match="f.json: key 'a' appears twice"):
        parse_json('{"a": 1, "b": {"c": 2}, "a": 3}', "f.json")
    with pytest.raises(TwinInputError, match="f.json: not valid JSON"):
        parse_json("1" * 5000, "f.json")                             # past Python's integer digit limit


def test_deep_nesting_in_a_result_file_and_a_model_config(tmp_path):
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(TwinInputError) as err:
        read_results(write(tmp_path, "b.json", '{"completed": 1, "request_rate": 1, "x": ' + deep + "}"))
    assert "nested too deeply" in one_line(err)
    with pytest.raises(TwinInputError) as err:
        model_from_hf_config(write(tmp_path, "config.json", deep))
    assert one_line(err).startswith(f"model config {tmp_path / 'config.json'}: JSON nested too deeply")


def test_duplicate_keys_in_a_result_file(tmp_path):
    text = json.dumps(bench_doc())
    with pytest.raises(TwinInputError, match="key 'completed' appears twice"):
        read_results(write(tmp_path, "b.json", '{"completed": 40, ' + text[1:]))


def test_model_config_that_is_not_utf8(tmp_path):
    p = write(tmp_path, "config.json", json.dumps(HF).encode()[:-1] + b', "name": "caf\xe9"}')
    with pytest.raises(TwinInputError) as err:
        model_from_hf_config(p)
    assert "not UTF-8 text (byte 0xe9)" in one_line(err)


def test_moe_expert_count_as_a_float_is_refused_not_dense():
    cfg = dict(HF, model_type="mixtral", num_local_experts=8.0, num_experts_per_tok=2)
    with pytest.raises(TwinInputError, match=r"num_local_experts = 8.0: must be a positive integer"):
        model_from_hf_config(cfg)
    assert model_from_hf_config(dict(cfg, num_local_experts=8)).num_experts == 8
    assert model_from_hf_config(dict(HF, num_local_experts=1)).num_experts in (0, 1, None)
    with pytest.raises(TwinInputError, match="hidden_size = 10000000000: must be a positive integer"):
        model_from_hf_config(dict(HF, hidden_size=10**10))


# ---------------------------------------------------------------------------------------------- result files
@pytest.mark.parametrize("edit, message", [
    (dict(completed=10**12, failed=0, num_prompts=10**12, total_input_tokens=10**14, total_output_tokens=10**13),
     "requests; a run replays 1 to 1,000,000"),      # 29.8 GiB in draw
    (dict(total_input_tokens=math.inf), "total_input_tokens = inf"),
    (dict(mean_ttft_ms=math.nan), "mean_ttft_ms = nan"),
    (dict(output_throughput=1e30), "output_throughput = 1e+30: must be a finite number >= 0 and at most"),
    (dict(num_prompts=10**12), "num_prompts = 1000000000000 but completed + failed = 4"),
    (dict(median_ttft_ms=1e30), "median_ttft_ms = 1e+30: must be a finite number >= 0 and at most 1e+12"),
])
def test_summary_only_results_beyond_the_limits(tmp_path, edit, message):
    doc = bench_doc(detailed=False, **edit)
    with pytest.raises(TwinInputError) as err:
        read_results(write(tmp_path, "b.json", json.dumps(doc, allow_nan=True)))
    assert message in one_line(err)


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["input_lens"].__setitem__(0, 0), "input_lens[0] = 0: a completed request needs"),
    (lambda d: d["input_lens"].__setitem__(0, -5), "input_lens[0] = -5"),
    (lambda d: d["input_lens"].__setitem__(0, 3_000_000_000), "prompt lengths[0] = 3000000000: must be 1 to"),
    (lambda d: d.update(completed=40), "completed = 40, failed = 1 but the per-request arrays hold 4 requests"),
    (lambda d: d["ttfts"].append(0.1), "ttfts has 5 entries, expected 4"),
    (lambda d: d.update(input_lens=[], output_lens=[]), ""),
])
def test_detailed_results_that_contradict_themselves(tmp_path, edit, message):
    doc = bench_doc()
    edit(doc)
    with pytest.raises(TwinInputError) as err:
        read_results(write(tmp_path, "b.json", doc))
    assert message in one_line(err)


@pytest.mark.parametrize("rows, message", [
    ("send_time,ttft,e2el,prompt_tokens,output_tokens\n-1,0.1,0.5,10,5\n", "send_time = '-1': must be a finite "
                                                                          "number >= 0"),
    ("send_time,ttft,e2el,prompt_tokens,output_tokens\n1,0.1,-0.5,10,5\n", "e2el = '-0.5'"),
    ("send_time,first_token_time,end_time,prompt_tokens,output_tokens\n5,4,6,10,5\n", "times out of order"),
    ("send_time,ttft,e2el,prompt_tokens,output_tokens\n1,0.1,0.5,0,5\n", "prompt_tokens = 0: must be a whole number >= 1"),
    ("send_time,ttft,e2el,prompt_tokens,output_tokens\n1,0.1,0.5," + "9" * 200_000 + ",5\n",
     "not a valid CSV row (field larger than field limit"),
    ("send_time,ttft,e2el,prompt_tokens,output_tokens\n1,0.1,0.5,1\r0,5\n", "output_tokens = None"),  # a lone CR ends the row
    ("send_time,ttft,e2el,prompt_tokens,output_tokens\n1,0.1,0.5,10,5,7\n", "6 cells; the header names 5"),
])
def test_request_tables(tmp_path, rows, message):
    with pytest.raises(TwinInputError) as err:
        read_results(write(tmp_path, "requests.csv", rows))
    assert message in one_line(err)


def run_of(**over) -> MeasuredRun:
    fields = dict(name="r", source="test", num_requests=100, prompt_tokens=LengthSample.constant(100),
                  output_tokens=LengthSample.constant(10), metrics={}, rate_per_s=10.0)
    fields.update(over)
    return MeasuredRun(**fields)


def test_requests_to_simulate_with_a_huge_rate():
    assert requests_to_simulate(run_of(rate_per_s=1e308), 120.0) == 100       # was OverflowError
    assert requests_to_simulate(run_of(rate_per_s=math.inf, duration_s=1e-300), 120.0) == 100
    assert requests_to_simulate(run_of(rate_per_s=0.5), 10.0) == 5


def test_server_settings_from_a_result_file_are_one_line():
    with pytest.raises(TwinInputError) as err:
        deployment_for(run_of(server={"gpu_memory_utilization": 5.0}), TARGET)   # was a pydantic traceback
    assert one_line(err).startswith("r: the server settings the result file gives: server.gpu_memory_utilization")


def test_a_request_longer_than_the_context_is_refused_not_capped():
    with pytest.raises(TwinInputError) as err:
        deployment_for(run_of(prompt_tokens=LengthSample(values=(2_000_000_000,)), num_requests=1), TARGET)
    assert "exceeds max_model_len = 131,072" in one_line(err)
    deployment_for(run_of(server={"max_model_len": 4096}), TARGET)


def test_calibrating_on_runs_with_single_token_outputs(tmp_path):
    """Every request with one output token: the replay has no TPOT (None reached the surrogate's arithmetic)."""
    from twin.cli.main import main

    doc = bench_doc(output_lens=[1, 1, 0, 1], itls=[[], [], [], []], mean_tpot_ms=None, median_tpot_ms=None,
                    p99_tpot_ms=None, mean_itl_ms=None, median_itl_ms=None, p99_itl_ms=None,
                    latencies=[0.1, 0.2, 0.0, 0.3])
    out = tmp_path / "p.json"
    result = CliRunner().invoke(main, ["calibrate", "--from-results", str(write(tmp_path, "b.json", doc)),
                                       "--gpu", "H100-SXM", "-o", str(out), "-q", "--max-sim-s", "10"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    assert result.exit_code in (0, 2) and "Traceback" not in result.output


# ------------------------------------------------------------------------------------- scenarios (earlier list)
SCENARIO = {"name": "t", "deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b"},
            "server": {"max_num_seqs": 8, "max_model_len": 4096},
            "workload": {"arrivals": {"process": "poisson", "rate_per_s": 20}, "num_requests": 4,
                         "classes": [{"name": "c", "share": 1.0, "prompt": {"suffix_tokens": 64},
                                      "output_tokens": 4}]}}


@pytest.mark.parametrize("override, message", [
    ({"warmup_s": math.inf}, "warmup_s"),
    ({"max_sim_time_s": 1e308}, "max_sim_time_s"),
    ({"server": {"block_size": 7}}, "server.block_size: must be one of vLLM's block sizes 1, 8, 16, 32, 64, 128, 256"),
    ({"workload": {"arrivals": {"max_concurrency": 10**12}}}, "workload.arrivals.max_concurrency"),
    ({"workload": {"arrivals": {"process": "closed_loop", "concurrency": 10**12, "_replace": True}}},
     "workload.arrivals.concurrency"),
    ({"workload": {"classes": [{"name": "c", "share": 1.0, "prompt": {"suffix_tokens": 64},
                                "output_tokens": 10**30}]}}, "output_tokens"),
    # found by TWIN_FUZZ_EXAMPLES=2000: a pool past int32 block ids, a group count past int64
    ({"server": {"num_gpu_blocks_override": 10**30}}, "server.num_gpu_blocks_override: must be <= 2147483647"),
    ({"workload": {"classes": [{"name": "c", "share": 1.0,
                                "prompt": {"suffix_tokens": 64, "num_prefix_groups": 10**23},
                                "output_tokens": 10}]}}, "prompt.num_prefix_groups: must be <= 1000000"),
])
def test_scenario_values_beyond_the_limits(override, message):
    from twin.scenario import Scenario

    with pytest.raises(TwinInputError) as err:
        Scenario(SCENARIO, source="s.yaml").body(overrides=override)
    assert message in one_line(err)


def test_idle_users_of_a_large_concurrency_are_not_started():
    from twin.workload.capped_open_loop import CappedOpenLoop
    from twin.workload.spec import RequestSpec

    specs = [RequestSpec(i, 0.1 * i, 10, 2, (((("u", i)), 10),)) for i in range(3)]
    assert CappedOpenLoop(specs, 10**6).max_users == 3


def test_an_slo_of_zero_ms_is_refused():
    from twin.results.slo import parse_slo

    with pytest.raises(TwinInputError, match=r"slo.ttft_ms.p99: must be a number of milliseconds > 0 \(got 0\)"):
        parse_slo({"ttft_ms": {"p99": 0}})
    with pytest.raises(TwinInputError, match=r"slo.tpot: must be a number of milliseconds > 0, .*\(got 0.0\)"):
        parse_slo(["tpot:0"])


@pytest.mark.parametrize("entrypoint, completed", [("serve", 0), ("llm", 4)])
def test_an_output_past_max_model_len(entrypoint, completed):
    """vllm serve answers 400 to prompt + max_tokens > max_model_len; the offline LLM class stops at the context."""
    from twin.scenario import Scenario
    from twin.sim.run import run_body

    body = Scenario(SCENARIO, source="s.yaml").body(overrides={
        "server": {"entrypoint": entrypoint},
        "workload": {"classes": [{"name": "c", "share": 1.0, "prompt": {"suffix_tokens": 64},
                                  "output_tokens": 200_000}]}})
    result = run_body(body)
    finished = [r for r in result.requests if r.first_token_s is not None]
    assert len(finished) == completed


def test_a_trace_row_with_a_key_twice_or_a_huge_integer(tmp_path):
    from twin.workload.trace_rows import jsonl_rows

    p = write(tmp_path, "t.jsonl", '{"timestamp": 1, "input_length": 5, "output_length": 3}\n'
                                   '{"timestamp": 2, "input_length": 5, "input_length": 9, "output_length": 3}\n')
    with pytest.raises(TwinInputError, match=r"t.jsonl:2: key 'input_length' appears twice"):
        list(jsonl_rows(p))
    p = write(tmp_path, "u.jsonl", '{"timestamp": ' + "9" * 5000 + "}\n")
    with pytest.raises(TwinInputError, match=r"u.jsonl:1: not valid JSON \(Exceeds the limit"):
        list(jsonl_rows(p))


def test_a_sweep_grid_value_must_name_a_known_gpu():
    from twin.plan.grid import parse_grid_options
    from twin.plan.sweep import SweepSpec

    with pytest.raises(TwinInputError) as err:
        SweepSpec(dict(SCENARIO), parse_grid_options(["deployment.gpu=[H100-SXM, 1e+308]"]))
    assert one_line(err).startswith("grid deployment.gpu=1e+308: gpu: unknown GPU '1e+308'")


def test_diagnose_refuses_an_empty_prompt_of_a_completed_request(tmp_path):
    """A zero prompt length reached the simulation as a bare ValueError."""
    from twin.analysis.measured import load_measured

    doc = bench_doc(input_lens=[0, 200, 300, 400])
    with pytest.raises(TwinInputError) as err:
        load_measured(write(tmp_path, "b.json", doc))
    assert "input_lens[0] = 0 for a completed request" in one_line(err)


def test_an_infinite_token_count_in_a_trace_row_is_one_line():
    # found by TWIN_FUZZ_EXAMPLES=2000 on Mooncake rows: int(inf) raised OverflowError
    from twin.workload.trace_rows import token_count

    with pytest.raises(TwinInputError, match="input_length' must be a whole number of tokens"):
        token_count(math.inf, Path("t.jsonl"), 1, "input_length")
