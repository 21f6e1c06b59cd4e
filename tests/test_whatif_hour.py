"""A new user's what-if hour (issue 33, round 23): a Llama-3.1-70B FP8 server on 4 H100s written the way a vLLM
user writes it. vLLM's own option names in the wrong place point at the scenario's key; the run's first line
names a weight format / KV-cache dtype the scenario sets; EAGLE-3 without an acceptance says what to give;
``NVIDIA H100`` is a GPU name; a plan on ``gpu: h100`` does not search H100-SXM twice; the what-if band's table
fits 80 columns. Exact strings; the runs are short and seeded."""

from __future__ import annotations

import re

import pytest
import yaml
from click.testing import CliRunner

from twin.cli.main import main

PROD = {"name": "prod-70b",
        "deployment": {"gpu": "h100", "model": "llama-3.1-70b-fp8", "tensor_parallel_size": 4},
        "server": {"max_num_seqs": 256},
        "workload": {"arrivals": {"process": "poisson", "rate_per_s": 4}, "duration_s": 3,
                     "classes": [{"name": "chat", "share": 1.0,
                                  "prompt": {"shared_prefix_tokens": 1500, "suffix_tokens": 400},
                                  "output_tokens": 30}]},
        "slo": {"ttft_ms": 500, "tpot_ms": 50}}


def _twin(tmp_path, *args: str, scenario: dict | None = None):
    path = tmp_path / "prod.yaml"
    path.write_text(yaml.safe_dump(scenario or PROD), encoding="utf-8")
    return CliRunner().invoke(main, [args[0], str(path), *args[1:]])


@pytest.mark.parametrize("setting, hint", [
    ("server.quantization=fp8", "server: unknown field 'quantization'; did you mean 'deployment.weight_dtype'?"),
    ("deployment.quantization=fp8",
     "deployment: unknown field 'quantization'; did you mean 'deployment.weight_dtype'?"),
    ("server.kv_cache_dtype=fp8", "server: unknown field 'kv_cache_dtype'; did you mean 'deployment.kv_dtype'?"),
    ("server.tensor_parallel_size=2",
     "server: unknown field 'tensor_parallel_size'; did you mean 'deployment.tensor_parallel_size'?"),
    ("deployment.tp=2", "deployment: unknown field 'tp'; did you mean 'deployment.tensor_parallel_size'?"),
    ("workload.request_rate=3",
     "workload: unknown field 'request_rate'; did you mean 'workload.arrivals.rate_per_s'?"),
    ("workload.max_concurrency=64",
     "workload: unknown field 'max_concurrency'; did you mean 'workload.arrivals.max_concurrency'?"),
    ("workload.concurrency=64", "workload: unknown field 'concurrency'; did you mean "
     "'workload.arrivals.max_concurrency' or 'workload.arrivals.concurrency'?"),
    # a benchmark's length names in a task class: not the close spelling (min_tokens, output_tokens)
    ("workload.classes.0.input_tokens=400",
     "workload.classes[0]: unknown field 'input_tokens'; did you mean 'prompt.suffix_tokens'?"),
    ("workload.classes.0.isl=400", "workload.classes[0]: unknown field 'isl'; did you mean 'prompt.suffix_tokens'?"),
    ("workload.classes.0.output_len=30",
     "workload.classes[0]: unknown field 'output_len'; did you mean 'output_tokens'?"),
    # a close spelling in the section still wins over vLLM's name
    ("deployment.kv_cache_dtype=fp8", "deployment: unknown field 'kv_cache_dtype'; did you mean 'kv_dtype'?"),
])
def test_vllm_option_names_point_at_the_scenario_key(tmp_path, setting, hint):
    result = _twin(tmp_path, "run", "--set", setting)
    assert result.exit_code == 2
    assert hint in " ".join(result.output.split())


def test_a_key_nobody_knows_still_gets_no_guess():
    from twin.workload.vllm_option_names import vllm_name_hint

    assert vllm_name_hint("max_num_seqz") == ""
    assert vllm_name_hint(3) == ""
    assert vllm_name_hint("kv-cache-dtype") == "; did you mean 'deployment.kv_dtype'?"


def test_a_length_name_outside_a_task_class_gets_no_class_hint():
    from twin.workload.vllm_option_names import class_length_hint

    assert class_length_hint(["arrivals", "classes"], "input_tokens") == ""
    assert (class_length_hint(["prompt", "output_tokens", "share"], "input_len")
            == "; did you mean 'prompt.suffix_tokens'?")


def test_the_first_line_names_the_formats_the_scenario_sets(tmp_path):
    result = _twin(tmp_path, "run", "--set", "deployment.model=llama-3.1-70b", "--set",
                   "deployment.weight_dtype=fp8", "--set", "deployment.kv_dtype=fp8")
    assert result.exit_code == 0, result.output
    first = " ".join(result.output.split("baseline: latency")[0].split())
    assert first.startswith("baseline: llama-3.1-70b on 1x4 H100-SXM, fp8 weights, fp8 KV cache, continuous, "
                            "max_num_seqs=256, ")


def test_the_first_line_is_unchanged_at_the_models_own_formats(tmp_path):
    result = _twin(tmp_path, "run")
    assert result.exit_code == 0, result.output
    first = " ".join(result.output.split("baseline: latency")[0].split())
    assert first.startswith("baseline: llama-3.1-70b-fp8 on 1x4 H100-SXM, continuous, max_num_seqs=256, ")
    assert "weights" not in first and "KV cache" not in first


def test_eagle3_without_an_acceptance_says_what_to_give(tmp_path):
    scenario = dict(PROD, speculative_decoding={"method": "eagle3", "num_speculative_tokens": 3})
    result = _twin(tmp_path, "run", scenario=scenario)
    assert result.exit_code == 2
    assert ("speculative_decoding.acceptance: is required: what the drafter accepts on your traffic, measured "
            "(for all classes, e.g. acceptance: {per_position: [0.8, 0.62, 0.48]}, vLLM's logged per-position "
            "acceptance rate; per task class, and the other forms: docs/speculative_decoding.md), unless "
            "rejection_sample_method is synthetic") in " ".join(result.output.split())


@pytest.mark.parametrize("name, catalogued", [
    ("nvidia-h100", "H100-SXM"), ("NVIDIA H200", "H200-SXM"), ("NVIDIA B200", "B200"),
    ("AMD Instinct MI300X", "MI300X"), ("NVIDIA GeForce RTX 4090", "RTX-4090"), ("h100", "H100-SXM"),
])
def test_a_gpu_named_with_its_vendor_is_the_catalogued_one(name, catalogued):
    from twin.hardware.gpus import resolve_gpu

    assert resolve_gpu(name).name == catalogued


def test_plan_searches_the_scenarios_gpu_once_whatever_its_spelling():
    from twin.plan.plan_spec import default_space

    for spelt in ("h100", "NVIDIA H100", "H100-SXM"):
        data = dict(PROD, deployment=dict(PROD["deployment"], gpu=spelt))
        assert default_space(data)[0] == ("deployment.gpu", [spelt, "H200-SXM", "A100-SXM-80GB"])
    data = dict(PROD, deployment=dict(PROD["deployment"], gpu="b200"))
    assert default_space(data)[0] == ("deployment.gpu", ["b200", "H100-SXM", "H200-SXM", "A100-SXM-80GB"])


def test_the_whatif_band_fits_80_columns_with_wide_cells():
    from twin.results.whatif_view import WIDTH, whatif_lines

    cell = {"n": 223, "ratio_abs_median": 0.158, "ratio_signed_median": 0.128, "direction_right": 1.0}
    entry = {"knob": "gpu", "name": "GPU", "variants": ["b200"], "pairing": "loose",
             "evidence": {kind: {m: cell for m in ("mean_ttft_ms", "mean_tpot_ms", "mean_e2el_ms",
                                                    "request_throughput")} for kind in ("GPU", "family")}}
    view = {"no_band": None, "knobs": [entry], "reference": "baseline", "several_knobs": {}, "min_pairs": 5,
            "loose_ignore": ["release"], "report": {"commit": "cdbc430"}}
    lines = whatif_lines(view)
    assert max(len(line) for line in lines) <= WIDTH
    assert lines[1] == "  change   pairs TTFT mean    TPOT         E2E mean     throughput   right way"
    assert lines[3] == "    GPU    223   15.8 (+12.8) 15.8 (+12.8) 15.8 (+12.8) 15.8 (+12.8) 100, 100%"


def test_a_narrow_whatif_band_keeps_two_spaces():
    from twin.results.whatif_view import whatif_lines

    cell = {"n": 8, "ratio_abs_median": 0.028, "ratio_signed_median": 0.01, "direction_right": 1.0}
    entry = {"knob": "rate", "name": "arrival rate", "variants": ["x"], "pairing": "strict",
             "evidence": {"GPU": {m: cell for m in ("mean_ttft_ms", "mean_tpot_ms")}}}
    view = {"no_band": None, "knobs": [entry], "reference": "baseline", "several_knobs": {}, "min_pairs": 5,
            "loose_ignore": None, "report": {"commit": "cdbc430"}}
    assert whatif_lines(view)[1] == "  change  pairs  TTFT mean   TPOT        E2E mean  throughput  right way"


def test_the_dashboards_caption_names_the_formats_as_the_cli_does():
    from twin.dashboard.runs import headline

    info = {"model": "llama-3.1-70b", "replicas": 1, "tensor_parallel_size": 4, "gpu": "H100-SXM",
            "formats": ["fp8 weights", "fp8 KV cache"], "scheduler": "continuous", "max_num_seqs": 256,
            "max_num_batched_tokens": 16384, "enable_prefix_caching": True, "kv_capacity_tokens": 1379056}
    assert headline(info) == ("llama-3.1-70b on 1×4 H100-SXM, fp8 weights, fp8 KV cache · continuous, max_num_seqs "
                              "256, max_num_batched_tokens 16384, prefix caching on · KV pool 1,379,056 tokens")
    assert headline(dict(info, formats=[])).startswith("llama-3.1-70b on 1×4 H100-SXM · continuous, ")


@pytest.mark.parametrize("args, line", [
    (["plan", "--target-rate", "16rps"],
     "Invalid value for '--target-rate': '16rps' is not a number: write the number alone."),
    (["plan", "--target-rate", "1e400"], "Invalid value for '--target-rate': '1e400' is not a finite number."),
    (["sweep", "--grid", "rate=8req/s"],
     "grid rate: '8req/s' is not a rate; give numbers > 0 (req/s, the number alone)"),
    (["sweep", "--grid", "rate_scale=2x"],
     "grid rate_scale: '2x' is not a rate; give numbers > 0 (a multiple of the scenario's rate, the number alone)"),
])
def test_a_rate_with_its_unit_says_to_write_the_number_alone(tmp_path, args, line):
    result = _twin(tmp_path, args[0], *args[1:], "-q")
    assert result.exit_code == 2
    assert line in " ".join(result.output.split())


def test_the_plans_frontier_names_replicas_x_tp_as_twin_run_does(tmp_path):
    result = _twin(tmp_path, "plan", "--search", "deployment.tensor_parallel_size=2,4", "--target-rate", "8",
                   "--set", "workload.duration_s=20", "-q", "-j", "1", "--backend", "serial")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    frontier = text[text.index("frontier ($/h -> TTFT p99): "):text.index(" cheapest #")]
    entries = frontier.split(": ", 1)[1].split("; ")
    assert all(re.fullmatch(r"\$\d+\.\d\d/h \dx[24] H100-SXM -> \S+ ms", e) for e in entries), entries
    assert len({e.split(" -> ")[0].split(" ", 1)[1] for e in entries}) == len(entries)   # no two read the same
