"""No server knob is lost between `twin run X --json out.json` and `twin calibrate --from-results out.json`: every
field of a scenario's ``server`` and ``deployment`` sections is written and read back (the server calibration
replays is the one the run simulated: its scheduler, KV pool and offload tiers, CUDA graphs, all-reduce fusion,
FP32 GEMM precision and parallel layout), or calibration refuses it in one line naming the knob and what to give
instead (``twin.results.server_keys``, ``twin.fitting.readers.knob_fields``, ``twin.cli.calibrate_layout``).

A field added to ``ServerConfig`` or ``DeploymentConfig`` fails ``test_every_field_has_its_round_trip`` until it is
given a case here: a future knob cannot be dropped silently."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from twin.cli.main import main
from twin.errors import TwinInputError
from twin.fitting.readers import read_results
from twin.fitting.replay import deployment_for
from twin.results.server_keys import KNOB_FIELDS, KNOB_KEYS, LAYOUT_KEYS, REFUSED_KEYS, SERVER_KNOBS
from twin.scenario import DeploymentConfig, ServerConfig, load_scenario, parse_set_options
from twin.sim.deployment import resolve_deployment

from tests.test_layout_roundtrip import _bench_file, _read  # a result file with top-level keys; calibrate's read
from tests.test_layout_roundtrip import _run as _run_args

SMALL = ("workload.num_requests=16",)
MOE_DP = "minimax_m2_5_fp8_b200_dp4_ep4"

# one non-default value per server field (with what it needs beside it): each run must be replayed as it ran
SERVER_CASES = {
    "kv_offloading_size": ("server.kv_offloading_size=4",),
    "kv_offloading_backend": ("server.kv_offloading_size=4", "server.kv_offloading_backend=lmcache"),
    "kv_offloading_bandwidth_gb_s": ("server.kv_offloading_size=4", "server.kv_offloading_bandwidth_gb_s=20"),
    "kv_offloading_lower": ("server.kv_offloading_size=4", "server.kv_offloading_lower.size_gib=8",
                            "server.kv_offloading_lower.bandwidth_gb_s=5"),
    "scheduler": ("server.scheduler=prefill_first",),
    "enable_chunked_prefill": ("server.enable_chunked_prefill=false",),
    "enable_prefix_caching": ("server.enable_prefix_caching=false",),
    "block_size": ("server.block_size=32",),
    "long_prefill_token_threshold": ("server.long_prefill_token_threshold=256",),
    "policy": None,             # refused: test_priority_scheduling_is_refused_in_one_line
    "async_scheduling": ("server.async_scheduling=false",),
    "async_free_after_next_schedule": ("server.async_free_after_next_schedule=true",),
    "async_hold_finished_slots": ("server.async_hold_finished_slots=true",),
    "reserve_null_block": ("server.reserve_null_block=false",),
    "free_unhashed_blocks_to_head": ("server.free_unhashed_blocks_to_head=false",),
    "scheduler_reserve_full_isl": ("server.scheduler_reserve_full_isl=false",),
    "prefix_cache_stats_at_admission": ("server.prefix_cache_stats_at_admission=false",),
    "pad_spec_decode_first_step": ("server.pad_spec_decode_first_step=false",),
    "admission_watermark": ("server.admission_watermark=0.1",),
    "static_batch_size": ("server.scheduler=static", "server.static_batch_size=4"),
    "static_batch_timeout_s": ("server.scheduler=static", "server.static_batch_timeout_s=0.5"),
    "static_reserve_max_length": ("server.scheduler=static", "server.static_reserve_max_length=false"),
    "static_pad_finished": ("server.scheduler=static", "server.static_pad_finished=false"),
    "max_num_seqs": ("server.max_num_seqs=8",),
    "max_num_batched_tokens": ("server.max_num_batched_tokens=4096",),
    "max_model_len": ("server.max_model_len=8192",),
    "gpu_memory_utilization": ("server.gpu_memory_utilization=0.8",),
    "num_gpu_blocks_override": ("server.max_model_len=8192", "server.num_gpu_blocks_override=20000"),
    "vllm_version": ("server.vllm_version=0.11.0",),
    "entrypoint": ("server.entrypoint=llm",),
    "fuse_allreduce_rms": ("deployment.model=llama-3.1-70b", "deployment.tensor_parallel_size=4",
                           "server.fuse_allreduce_rms=false"),
    "max_cudagraph_capture_size": ("server.max_cudagraph_capture_size=64",),
    "cudagraph_mode": ("server.cudagraph_mode=piecewise",),
    "float32_matmul_precision": ("server.float32_matmul_precision=high",),
}
# each deployment field: the case that writes it (scenario, --set) and reads it back, or None where it is refused
DEPLOYMENT_CASES = {
    "gpu": ("concurrency_cap_trap", ("deployment.gpu=B200",)),
    "model": ("concurrency_cap_trap", ("deployment.model=qwen3-30b-a3b",)),
    "tensor_parallel_size": ("concurrency_cap_trap", ("deployment.tensor_parallel_size=2",)),
    "weight_dtype": ("concurrency_cap_trap", ("deployment.weight_dtype=fp8",)),
    "weight_formats": ("concurrency_cap_trap", ("deployment.weight_formats.attention=fp8",)),
    "kv_dtype": ("concurrency_cap_trap", ("deployment.kv_dtype=fp8",)),
    "pipeline_parallel_size": ("concurrency_cap_trap", ("deployment.pipeline_parallel_size=2",)),
    "data_parallel_size": ("concurrency_cap_trap", ("deployment.data_parallel_size=2",)),
    "enable_expert_parallel": ("moe_qwen3_30b_a3b", ("deployment.tensor_parallel_size=2",
                                                     "deployment.enable_expert_parallel=true")),
    "all2all_backend": (MOE_DP, ("deployment.all2all_backend=deepep",)),
    # several servers behind a router: refused (tests/test_layout_roundtrip.py); ``router`` routes only between
    # them (one server's data-parallel ranks are balanced by vLLM's own front end, twin.sim.dp_router)
    "replicas": None, "groups": None, "router": None,
}


def _run(tmp_path, scenario, sets, name="out.json"):
    return _run_args(tmp_path, scenario, *(a for s in (*SMALL, *sets) for a in ("--set", s)), name=name)


def _served(dep):
    """What a replica is: its scheduler (offload tiers included), KV pool and the cost model's server inputs."""
    return {"scheduler": dep.scheduler_config.model_dump(), "num_gpu_blocks": dep.num_gpu_blocks,
            "allreduce_fusion": dep.allreduce_fusion, "cudagraph_tokens": dep.cudagraph_tokens,
            "float32_matmul_precision": dep.float32_matmul_precision, "model": dep.model.name, "gpu": dep.gpu.name,
            "layout": dep.layout.as_dict(), "weight_formats": dep.weight_formats.as_dict()}


def _round_trip(tmp_path, scenario, sets):
    out = _run(tmp_path, scenario, sets)
    case = _read(out)
    ran = resolve_deployment(load_scenario(scenario).body(overrides=parse_set_options((*SMALL, *sets))))
    assert _served(deployment_for(case.run, case.target)) == _served(ran)
    return out, case


def test_every_field_has_its_round_trip():
    assert set(SERVER_CASES) == set(ServerConfig.model_fields)
    assert set(DEPLOYMENT_CASES) == set(DeploymentConfig.model_fields)
    # every server field is written: the settings every reader reads, or the other knobs
    assert set(ServerConfig.model_fields) == set(SERVER_KNOBS) | set(KNOB_FIELDS)
    assert not set(KNOB_KEYS) & (set(SERVER_KNOBS) | set(LAYOUT_KEYS) | set(REFUSED_KEYS))


@pytest.mark.parametrize("field", [f for f, sets in SERVER_CASES.items() if sets is not None])
def test_each_server_knob_is_replayed_as_the_run_ran(tmp_path, field):
    out, case = _round_trip(tmp_path, "concurrency_cap_trap", SERVER_CASES[field])
    if field in KNOB_FIELDS:      # written under its key and read back, not left to the default
        assert KNOB_FIELDS[field] in json.loads(out.read_text())
        assert field in case.run.server


@pytest.mark.parametrize("field", [f for f, c in DEPLOYMENT_CASES.items() if c is not None])
def test_each_deployment_field_is_replayed_as_the_run_ran(tmp_path, field):
    scenario, sets = DEPLOYMENT_CASES[field]
    _round_trip(tmp_path, scenario, sets)


def test_a_plain_run_writes_no_other_knob(tmp_path):
    doc = json.loads(_run(tmp_path, "concurrency_cap_trap", ()).read_text())
    assert not set(doc) & (set(KNOB_KEYS) | {"server_start"}) and "server_knobs" not in doc["twin"]["config"]


def test_the_knobs_are_written_under_vllm_s_names_and_shown_before_the_fit(tmp_path, monkeypatch):
    from twin.cli import calibrate_results

    out = _run(tmp_path, "concurrency_cap_trap", ("server.cudagraph_mode=full_decode_only",
                                                  "server.max_cudagraph_capture_size=32", "server.entrypoint=llm"))
    doc = json.loads(out.read_text())
    assert (doc["cudagraph_mode"], doc["max_cudagraph_capture_size"], doc["entrypoint"]) == ("full_decode_only", 32,
                                                                                             "llm")
    monkeypatch.setattr(calibrate_results, "calibrate_fit", _no_fit)
    res = CliRunner().invoke(main, ["calibrate", "--from-results", str(out), "-o", str(tmp_path / "p.json")],
                             env={"COLUMNS": "200"})
    rows = {cells[0]: cells[1:] for line in res.output.splitlines() if line.count("│") == 4
            for cells in [[c.strip() for c in line.split("│")[1:4]]]}
    assert res.exit_code == 0, res.output
    assert rows["cudagraph_mode"] == ["full_decode_only", "result file (cudagraph_mode)"]
    assert rows["entrypoint"] == ["llm", "result file (entrypoint)"]
    # the command line still goes first, and says so
    res = CliRunner().invoke(main, ["calibrate", "--from-results", str(out), "--set", "server.cudagraph_mode=none",
                                    "-o", str(tmp_path / "p.json")], env={"COLUMNS": "200"})
    assert any(line.split("│")[1:4] and [c.strip() for c in line.split("│")[1:4]] == ["cudagraph_mode", "none", "--set"]
               for line in res.output.splitlines() if line.count("│") == 4), res.output


def _no_fit(*_args, **_kw):
    from twin.cli.console import console

    console.print("fitted")
    raise SystemExit(0)


def test_a_cold_server_is_read_back_cold(tmp_path):
    out = _run(tmp_path, "concurrency_cap_trap", ("server_start=cold",))
    assert json.loads(out.read_text())["server_start"] == "cold"
    assert _read(out).run.cold_start
    assert not _read(_run(tmp_path, "concurrency_cap_trap", (), name="warm.json")).run.cold_start


def test_the_expert_exchange_is_replayed_and_an_unmodelled_one_refused(tmp_path):
    _, case = _round_trip(tmp_path, MOE_DP, ("deployment.all2all_backend=deepep",))
    assert case.target.all2all_backend == "deepep"
    path = _bench_file(tmp_path, all2all_backend="pplx")
    with pytest.raises(TwinInputError) as exc:
        _read(path)
    assert str(exc.value) == (
        "b: all2all_backend = pplx: not an expert-parallel exchange the twin models (allgather_reducescatter, naive, "
        "deepep): give the one whose bytes it moves with --set deployment.all2all_backend=NAME (DeepEP's and pplx's "
        "all-to-all: deepep)")
    assert _read(path, sets=("deployment.all2all_backend=deepep",)).target.all2all_backend == "deepep"
    with pytest.raises(TwinInputError, match="the result file says all2all_backend naive"):
        _read(_bench_file(tmp_path, all2all_backend="naive"), sets=("deployment.all2all_backend=deepep",))


def test_priority_scheduling_is_refused_in_one_line(tmp_path):
    out = _run(tmp_path, "concurrency_cap_trap", ("server.policy=priority",))
    assert json.loads(out.read_text())["scheduling_policy"] == "priority"
    res = CliRunner().invoke(main, ["calibrate", "--from-results", str(out), "-o", str(tmp_path / "p.json")],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 2 and res.output.strip().splitlines()[-1] == (
        "error: out: scheduling_policy = priority: a result file does not record its requests' priorities and "
        "calibrate replays them all at one; give runs served first come, first served (scheduling_policy fcfs)")
    assert _read(_bench_file(tmp_path, scheduling_policy="FCFS")).run.server["policy"] == "fcfs"


@pytest.mark.parametrize("keys,server", [
    # --metadata records every value as text
    ({"cudagraph_mode": "FULL_DECODE_ONLY", "max_cudagraph_capture_size": "64"},
     {"cudagraph_mode": "full_decode_only", "max_cudagraph_capture_size": 64}),
    ({"num_gpu_blocks_override": "20000", "fuse_allreduce_rms": "0"},
     {"num_gpu_blocks_override": 20000, "fuse_allreduce_rms": False}),
    ({"kv_offloading_size": "4.5", "kv_offloading_backend": "LMCache",
      "kv_offloading_lower": '{"size_gib": 8, "bandwidth_gb_s": 5}'},
     {"kv_offloading_size": 4.5, "kv_offloading_backend": "lmcache",
      "kv_offloading_lower": {"size_gib": 8.0, "bandwidth_gb_s": 5.0}}),
    ({"long_prefill_token_threshold": 256, "admission_watermark": "0.05", "float32_matmul_precision": "high"},
     {"long_prefill_token_threshold": 256, "admission_watermark": 0.05, "float32_matmul_precision": "high"}),
])
def test_vllm_s_own_spellings_are_read(tmp_path, keys, server):
    [run] = read_results(_bench_file(tmp_path, **keys))
    assert run.server == server


@pytest.mark.parametrize("key,value,said", [
    ("cudagraph_mode", "sometimes", "cudagraph_mode = 'sometimes': must be one of 'full_and_piecewise', 'piecewise'"),
    ("cudagraph_mode", 3, "cudagraph_mode = 3: "),
    ("num_gpu_blocks_override", 1, "num_gpu_blocks_override = 1: must be >= 2"),
    ("num_gpu_blocks_override", "lots", "num_gpu_blocks_override = 'lots': "),
    ("num_gpu_blocks_override", 2**31, "num_gpu_blocks_override = 2147483648: must be <= 2147483647"),
    ("max_cudagraph_capture_size", 0, "max_cudagraph_capture_size = 0: must be >= 1"),
    ("max_cudagraph_capture_size", True, "max_cudagraph_capture_size = True: "),
    ("kv_offloading_size", "1e309", "kv_offloading_size = '1e309': "),
    ("kv_offloading_size", -4, "kv_offloading_size = -4: must be > 0"),
    ("kv_offloading_lower", "[" * 5000, "kv_offloading_lower = '[[[["),
    ("kv_offloading_lower", {"size_gib": 8}, "kv_offloading_lower = {'size_gib': 8}: bandwidth_gb_s: is required"),
    ("fuse_allreduce_rms", "yes", "fuse_allreduce_rms = 'yes': must be true or false"),
    ("scheduling_policy", 5, "scheduling_policy = 5: "),
    ("entrypoint", "x" * 100_000, "entrypoint = 'xxxx"),
    ("admission_watermark", 1.0, "admission_watermark = 1.0: must be < 1"),
    ("server_start", "lukewarm", "server_start = 'lukewarm': must be \"warm\" or \"cold\""),
    ("server_start", ["cold"], "server_start = ['cold']: must be \"warm\" or \"cold\""),
])
def test_a_hostile_knob_value_is_one_line_naming_the_file_and_the_key(tmp_path, key, value, said):
    path = _bench_file(tmp_path, **{key: value})
    with pytest.raises(TwinInputError) as exc:
        read_results(path)
    msg = str(exc.value)
    assert msg.startswith(f"{path}: ") and said in msg and "\n" not in msg and len(msg) < 400, msg
