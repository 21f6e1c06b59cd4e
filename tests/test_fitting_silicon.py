"""The vLLM silicon measurements as fit cases: validation of the CSV, what each row tells the twin (server,
client, release), which rows the twin cannot run and why, and a row simulated end to end."""

from __future__ import annotations

import collections
import csv
import math
from pathlib import Path

import pytest

from twin.errors import TwinInputError
from twin.fitting.replay import replay
from twin.fitting.silicon import (CSV_NAME, REQUIRED_COLUMNS, derived_metrics, model_family, modelled_release,
                                  not_expressible, read_silicon, row_run, row_scenario, row_server, silicon_cases,
                                  silicon_dir)
from twin.scenario import ScenarioBody

REAL = silicon_dir() / CSV_NAME
needs_data = pytest.mark.skipif(not REAL.is_file(), reason="ground truth not present beside the project")

BASE = {c: "" for c in REQUIRED_COLUMNS}
BASE.update({"id": "llama_row", "backend": "vllm", "backend_version": "",
             "silicon_data_source": "source_file=2026-04-06.csv; model=Llama-3.1-70B; silicon_concurrency=16; "
                                    "measured=2025-10-29T00:00:00.000Z; wip=False",
             "model_path": "meta-llama/Llama-3.1-70B", "system": "h100_sxm", "precision": "fp8", "mode": "agg",
             "isl": "1024", "osl": "8192", "gemm_quant_mode": "fp8", "moe_quant_mode": "fp8", "batch_size": "16",
             "tp_size": "2.0", "pp_size": "1.0", "attention_dp_size": "1.0", "moe_tp_size": "2.0",
             "moe_ep_size": "1.0", "silicon_ttft_ms": "120.5", "silicon_tpot_ms": "20.0"})


def _write(tmp_path: Path, rows: list[dict], columns=REQUIRED_COLUMNS) -> Path:
    path = tmp_path / CSV_NAME
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(columns), extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return path


def test_a_row_reads_with_its_provenance(tmp_path):
    (row,) = read_silicon(_write(tmp_path, [BASE]))
    assert (row.line, row.concurrency, row.tp, row.isl, row.osl) == (2, 16, 2, 1024, 8192)
    assert row.measured == "2025-10-29" and row.vllm_version == "0.10.2"   # blank Llama rows ran v0.10.2
    assert (row.ttft_ms, row.tpot_ms) == (120.5, 20.0)
    assert not_expressible(row) is None


@pytest.mark.parametrize("field, value, words", [
    ("isl", "abc", "isl = 'abc': must be an integer >= 2"),
    ("isl", "1.5", "isl = '1.5'"),
    ("silicon_ttft_ms", "-3", "silicon_ttft_ms = '-3': must be a finite number of ms > 0"),
    ("silicon_tpot_ms", "nan", "silicon_tpot_ms = 'nan'"),
    ("mode", "both", "mode = 'both': must be agg or disagg"),
    ("batch_size", "", "batch_size = '': required"),
    ("silicon_data_source", "x; silicon_concurrency=0", "silicon_concurrency = '0'"),
])
def test_a_bad_field_is_one_line_naming_file_line_and_field(tmp_path, field, value, words):
    bad = {**BASE, field: value}
    path = _write(tmp_path, [BASE, bad])
    with pytest.raises(TwinInputError) as err:
        read_silicon(path)
    msg = str(err.value)
    assert "\n" not in msg and str(path) in msg and "line 3" in msg and words in msg


def test_a_missing_column_and_an_empty_file_are_named(tmp_path):
    cols = [c for c in REQUIRED_COLUMNS if c != "silicon_tpot_ms"]
    with pytest.raises(TwinInputError, match="missing column 'silicon_tpot_ms'"):
        read_silicon(_write(tmp_path, [BASE], cols))
    with pytest.raises(TwinInputError, match="no data rows"):
        read_silicon(_write(tmp_path, []))


@pytest.mark.parametrize("change, reason", [
    ({"mode": "disagg"}, "disaggregated serving"),
    ({"system": "gb300"}, "GPU 'gb300' is not in the catalog"),
    ({"model_path": "org/unknown"}, "model 'org/unknown' has no config"),
    ({"precision": "int2"}, "weight format 'int2'"),
    ({"attention_dp_size": "2", "moe_tp_size": "1", "moe_ep_size": "8", "batch_size": "8"},
     "expert layout moe_tp 1 x moe_ep 8 is not tp 2 x attention DP 2"),
])
def test_rows_the_twin_cannot_run_say_why(tmp_path, change, reason):
    (row,) = read_silicon(_write(tmp_path, [{**BASE, **change}]))
    assert reason in not_expressible(row)


@pytest.mark.parametrize("change, fmt, layout", [
    ({"precision": "fp4", "gemm_quant_mode": "nvfp4", "moe_quant_mode": "nvfp4"}, "nvfp4", {}),
    ({"model_path": "openai/gpt-oss-120b", "precision": "fp4", "gemm_quant_mode": "nvfp4"}, "auto", {}),
    ({"model_path": "moonshotai/Kimi-K2.5", "precision": "int4", "gemm_quant_mode": "int4_wo", "tp_size": "8"},
     "auto", {}),
    ({"model_path": "MiniMaxAI/MiniMax-M2.5", "attention_dp_size": "2", "moe_tp_size": "1", "moe_ep_size": "4",
      "batch_size": "8"}, "fp8", {"tensor_parallel_size": 2, "data_parallel_size": 1,
                                  "enable_expert_parallel": True}),     # InferenceX {tp: 2, ep: 2}: 2 GPUs
    ({"pp_size": "2"}, "fp8", {"pipeline_parallel_size": 2}),
])
def test_fp4_per_group_and_parallel_rows_become_scenarios(tmp_path, change, fmt, layout):
    (row,) = read_silicon(_write(tmp_path, [{**BASE, **change}]))
    assert not_expressible(row) is None
    body = ScenarioBody.model_validate(row_scenario(row, max_requests=None))
    assert body.deployment.weight_dtype == fmt
    for key, value in layout.items():
        assert getattr(body.deployment, key) == value


def test_server_facts_per_model(tmp_path):
    h100, b200 = read_silicon(_write(tmp_path, [BASE, {**BASE, "system": "b200_sxm"}]))
    assert row_server(h100) == {"vllm_version": modelled_release("0.10.2"), "async_scheduling": True,
                                "enable_prefix_caching": False, "max_num_batched_tokens": 8192,
                                "gpu_memory_utilization": 0.9, "max_num_seqs": 16}
    assert row_server(b200)["max_num_seqs"] == 512
    mm = {**BASE, "model_path": "MiniMaxAI/MiniMax-M2.5", "system": "b200_sxm", "backend_version": "0.19.0",
          "isl": "8192"}
    march = {**mm, "silicon_data_source": "source_file=2026-03-25.csv; silicon_concurrency=8; measured=2026-03-12"}
    april = {**mm, "silicon_data_source": "db-dump/2026-04-27; silicon_concurrency=8; measured=2026-04-22T00:00"}
    m, a = read_silicon(_write(tmp_path, [march, april]))
    # fuse_allreduce_rms: vLLM 0.19's default at TP > 1 on Blackwell (issue 33, round 4), set explicitly
    assert row_server(m) == {"vllm_version": "0.19", "block_size": 32, "gpu_memory_utilization": 0.95,
                             "fuse_allreduce_rms": True}
    assert row_server(a) == {"vllm_version": "0.19", "block_size": 32, "gpu_memory_utilization": 0.90,
                             "max_num_batched_tokens": 16384, "enable_prefix_caching": False,
                             "fuse_allreduce_rms": True, "max_cudagraph_capture_size": 2048,
                             "float32_matmul_precision": "high"}    # 41ed82dc1 (2026-04-21): TF32 router
    assert row_server(b200)["fuse_allreduce_rms"] is True and "fuse_allreduce_rms" not in row_server(h100)


def test_the_2025_gpt_oss_h100_servers_ran_with_async_scheduling(tmp_path):
    """InferenceX's gptoss_fp4_h100_docker.sh (25506e87c, 4e135fd3f) passed ``async-scheduling: true``: the
    v0.11.2 rows are async servers although 0.11 defaults it off (issue 33, round 8); the 2026 rows keep theirs."""
    src = "source_file=2026-04-06.csv; silicon_concurrency=512; measured=2025-12-08T00:00:00.000Z"
    oss = {**BASE, "model_path": "openai/gpt-oss-120b", "precision": "fp4", "backend_version": "0.11.2",
           "batch_size": "512", "silicon_data_source": src}
    march = {**oss, "backend_version": "0.18.0", "batch_size": "16",
             "silicon_data_source": "source_file=2026-04-06.csv; silicon_concurrency=16; measured=2026-03-27"}
    dec, mar = read_silicon(_write(tmp_path, [oss, march]))
    assert row_server(dec) == {"vllm_version": "0.11", "async_scheduling": True, "gpu_memory_utilization": 0.9,
                               "max_num_batched_tokens": 8192, "max_num_seqs": 512, "enable_prefix_caching": False,
                               "max_cudagraph_capture_size": 2048}
    assert "async_scheduling" not in row_server(mar)          # 0.18: on by default


def test_releases_map_onto_the_newest_modelled_one_not_newer():
    assert modelled_release("0.10.2") == "0.11"          # older than every modelled release: the oldest
    assert modelled_release("0.12.0") == "0.11"
    assert modelled_release("0.15.1") == "0.14"
    assert modelled_release("0.19.0") == "0.19"
    assert modelled_release("nightly-5b8c30d6", "2026-03-25") == "0.14"
    # a blank version: the image its script ran, v0.10.2-0.11.2 in 2025 (the gpt-oss rows); else the newest
    assert modelled_release("", "2025-11-02") == modelled_release(None, "2025-12-05") == "0.11"
    assert modelled_release("") == modelled_release("", "2026-04-01") == "0.28"


def test_the_2025_gpt_oss_b200_servers(tmp_path):
    """gptoss_fp4_b200_docker.sh (4b860b78e, 2025-10-01): async scheduling on, no prefix caching, 8192 batched
    tokens, 512 sequences, 0.9; blank version, so the image of its date (before 0.14); the v0.15.1 rows keep theirs."""
    src = "source_file=2026-04-06.csv; silicon_concurrency=64; measured=2025-11-02T00:00:00.000Z"
    nov = {**BASE, "model_path": "openai/gpt-oss-120b", "precision": "fp4", "system": "b200_sxm", "batch_size": "64",
           "silicon_data_source": src}
    feb = {**nov, "backend_version": "0.15.1",
           "silicon_data_source": "source_file=2026-04-06.csv; silicon_concurrency=64; measured=2026-02-25"}
    old, new = (row_server(r) for r in read_silicon(_write(tmp_path, [nov, feb])))
    assert old["vllm_version"] == "0.11" and old["async_scheduling"] is True
    assert {k: old[k] for k in ("gpu_memory_utilization", "max_num_batched_tokens", "max_num_seqs",
                                "enable_prefix_caching")} == {"gpu_memory_utilization": 0.9,
                                                              "max_num_batched_tokens": 8192, "max_num_seqs": 512,
                                                              "enable_prefix_caching": False}
    assert new["vllm_version"] == "0.14" and "async_scheduling" not in new and new["max_num_seqs"] == 512


def test_the_run_is_the_clients_closed_loop_capped_and_its_derived_metrics(tmp_path):
    (row,) = read_silicon(_write(tmp_path, [BASE]))
    full = row_run(row, max_requests=None)
    assert full.closed_loop and not full.queueing and full.max_concurrency == 16 and full.num_requests == 160
    assert full.prompt_tokens.quantiles == ((0.0, 819.0), (1.0, 1024.0))
    assert full.output_tokens.quantiles == ((0.0, 6553.0), (1.0, 8192.0))
    # by default every request the client sent: a cut run over-weighs the first burst of CONC prefills
    assert row_run(row).num_requests == 160 and not row_run(row).name.endswith("]")
    capped = row_run(row, max_requests=20)
    assert capped.num_requests == 48 and capped.name.endswith("[48/160]")   # never under 3 waves of CONC
    d = derived_metrics(row)
    osl = (6553 + 8192) / 2
    assert d["mean_e2el_ms"] == pytest.approx(120.5 + (osl - 1) * 20.0, rel=1e-3)
    assert d["request_throughput"] == pytest.approx(16 / (d["mean_e2el_ms"] / 1e3), rel=1e-12)


def test_the_scenario_validates(tmp_path):
    (row,) = read_silicon(_write(tmp_path, [BASE]))
    body = ScenarioBody.model_validate(row_scenario(row, max_requests=None))
    assert body.deployment.weight_dtype == "fp8" and body.deployment.kv_dtype == "fp8"
    assert body.workload.num_requests == 160 and body.server.enable_prefix_caching is False


def test_families():
    assert [model_family(m) for m in ("codellama-34b", "meta-llama/Llama-3.1-70B", "mixtral-8x7b",
                                      "Qwen/Qwen3-32B", "MiniMaxAI/MiniMax-M2.5", "openai/gpt-oss-120b")] == \
        ["llama", "llama", "mixtral", "qwen3", "minimax", "gpt-oss"]


@needs_data
def test_the_shipped_file_reads_whole_and_splits_as_counted():
    rows = read_silicon()
    assert len(rows) == 863
    cases, skipped = silicon_cases()
    # issue 34: FP4 weights, per-group formats (Kimi INT4 experts), EP and attention DP are expressible
    assert len(cases) == 860
    reasons = collections.Counter(r.split(" (")[0] for _, r in skipped)
    assert reasons == {"disaggregated serving": 3}


@needs_data
def test_a_row_simulates_and_lands_near_its_measurement():
    cases, _ = silicon_cases(max_requests=64)
    case = next(c for c in cases if c.row.concurrency == 4 and c.row.osl == 1024 and "Llama" in c.row.model_path)
    m = replay(case.run, case.target, {}).metrics
    for key in ("mean_ttft_ms", "mean_tpot_ms"):
        assert math.isfinite(m[key]) and 0.3 < m[key] / case.run.metrics[key] < 3.0, key


def test_rows_without_a_published_client_compare_tpot_only_at_half_weight(tmp_path):
    gap = {**BASE, "model_path": "Qwen/Qwen3-32B", "precision": "", "gemm_quant_mode": "", "moe_quant_mode": "",
           "backend_version": "0.12.0", "isl": "1024", "osl": "128",
           "silicon_data_source": "source_file=/x/aic-auto-gap-analysis/data/Qwen_Qwen3-32B.csv; silicon_concurrency=8"}
    (row,) = read_silicon(_write(tmp_path, [gap]))
    assert not row.published_client and not_expressible(row) is None
    run = row_run(row, max_requests=None)
    assert run.metrics == {"mean_tpot_ms": 20.0} and run.num_requests == 80
    assert run.prompt_tokens.quantiles == ((0.0, 1024.0), (1.0, 1024.0))
    assert run.server == {"vllm_version": "0.11"}          # vLLM 0.12's defaults: no async scheduling
    (case,), skipped = silicon_cases(rows=[row])
    assert case.weight == 0.5 and skipped == []


def _layout_of(tmp_path, change):
    from twin.fitting.silicon import row_layout, row_target
    (row,) = read_silicon(_write(tmp_path, [{**BASE, **change}]))
    lay, t = row_layout(row), row_target(row)
    assert (t.tensor_parallel_size, t.pipeline_parallel_size, t.data_parallel_size, t.enable_expert_parallel) == (
        lay["tensor_parallel_size"], lay["pipeline_parallel_size"], lay["data_parallel_size"],
        lay["enable_expert_parallel"])
    assert row_run(row).tensor_parallel_size == lay["tensor_parallel_size"]
    return (lay["tensor_parallel_size"], lay["data_parallel_size"], lay["enable_expert_parallel"])


MINIMAX_B200 = {"model_path": "MiniMaxAI/MiniMax-M2.5", "system": "b200_sxm", "backend_version": "0.19.0",
                "isl": "1024", "osl": "1024"}
KIMI_FP4 = {"model_path": "moonshotai/Kimi-K2.5", "system": "b200_sxm", "backend_version": "0.17.0",
            "precision": "fp4", "gemm_quant_mode": "nvfp4", "moe_quant_mode": "nvfp4", "isl": "8192", "osl": "1024",
            "silicon_data_source": "source_file=2026-04-06.csv; silicon_concurrency=4; measured=2026-03-27"}


@pytest.mark.parametrize("change, launched", [
    # the import's TP4 DP4 EP16 (16 GPUs) is InferenceX's {tp: 4, ep: 4}: 4 GPUs, TP4 with EP
    ({**MINIMAX_B200, "tp_size": "4", "attention_dp_size": "4", "moe_tp_size": "1", "moe_ep_size": "16",
      "batch_size": "4"}, (4, 1, True)),
    # the same run as 2026-03-25.csv labels it: TP4, attention DP 1, moe_ep 4
    ({**MINIMAX_B200, "tp_size": "4", "moe_tp_size": "1", "moe_ep_size": "4"}, (4, 1, True)),
    # kimik2.5_fp4_b200.sh passed only --tensor-parallel-size: no expert parallelism, either label
    ({**KIMI_FP4, "tp_size": "4", "attention_dp_size": "4", "moe_tp_size": "1", "moe_ep_size": "16",
      "batch_size": "1"}, (4, 1, False)),
    ({**KIMI_FP4, "tp_size": "4", "moe_tp_size": "1", "moe_ep_size": "4", "batch_size": "4"}, (4, 1, False)),
    # dp-attn runs (minimaxm2.5-fp4-b200-vllm 1k/1k, conc 256-1024, from 2026-04-22): TP1 x DP2 with EP
    ({**MINIMAX_B200, "precision": "fp4", "gemm_quant_mode": "nvfp4", "moe_quant_mode": "nvfp4", "tp_size": "2",
      "attention_dp_size": "2", "moe_tp_size": "1", "moe_ep_size": "4", "batch_size": "128",
      "silicon_data_source": "db-dump/2026-04-27; silicon_concurrency=256; measured=2026-04-22T00:00"}, (1, 2, True)),
    # ... but not the same label at conc 128, nor measured before the dp-attn entry, nor at 8k/1k
    ({**MINIMAX_B200, "precision": "fp4", "gemm_quant_mode": "nvfp4", "moe_quant_mode": "nvfp4", "tp_size": "2",
      "attention_dp_size": "2", "moe_tp_size": "1", "moe_ep_size": "4", "batch_size": "64",
      "silicon_data_source": "db-dump/2026-04-27; silicon_concurrency=128; measured=2026-04-22T00:00"}, (2, 1, True)),
    ({**MINIMAX_B200, "precision": "fp4", "gemm_quant_mode": "nvfp4", "moe_quant_mode": "nvfp4", "tp_size": "2",
      "attention_dp_size": "2", "moe_tp_size": "1", "moe_ep_size": "4", "batch_size": "128",
      "silicon_data_source": "db-dump/2026-04-27; silicon_concurrency=256; measured=2026-04-08T00:00"}, (2, 1, True)),
    ({**MINIMAX_B200, "precision": "fp4", "gemm_quant_mode": "nvfp4", "moe_quant_mode": "nvfp4", "tp_size": "2",
      "isl": "8192", "attention_dp_size": "2", "moe_tp_size": "1", "moe_ep_size": "4", "batch_size": "128",
      "silicon_data_source": "db-dump/2026-04-27; silicon_concurrency=256; measured=2026-04-22T00:00"}, (2, 1, True)),
    # a genuine attention-DP label of another shape is read as it stands
    ({**MINIMAX_B200, "tp_size": "1", "attention_dp_size": "4", "moe_tp_size": "1", "moe_ep_size": "4",
      "batch_size": "2"}, (1, 4, True)),
])
def test_rows_run_the_layout_their_script_launched(tmp_path, change, launched):
    assert _layout_of(tmp_path, change) == launched


@needs_data
def test_every_attention_dp_label_in_the_data_is_the_imports_tp_times_ep_encoding():
    """Every row labelled attention DP > 1 has DP = TP and moe_ep = TP x DP (the shape ``row_layout`` reads as TP
    GPUs), and the Kimi-K2.5 ones (both copies, 2026-04-06.csv and db-dump) have a twin labelled TP4, DP 1, moe_ep 4 with
    the same TTFT and TPOT (the gap-analysis copy of the same runs)."""
    from twin.fitting.silicon import row_layout
    rows = [r for r in read_silicon() if r.mode == "agg"]
    dp = [r for r in rows if r.attention_dp > 1]
    assert len(dp) == 79
    assert all(r.attention_dp == r.tp and r.moe_ep == r.tp * r.attention_dp for r in dp)
    runs = collections.Counter((row_layout(r)["tensor_parallel_size"], row_layout(r)["data_parallel_size"])
                               for r in dp)
    assert runs == {(4, 1): 56, (2, 1): 20, (1, 2): 3}
    def key(r):
        return r.model_path, r.system, r.isl, r.osl, r.concurrency, round(r.ttft_ms, 2), round(r.tpot_ms, 2)
    same = {key(r) for r in rows if r.attention_dp == 1}
    twins = [r for r in dp if key(r) in same]
    assert len(twins) == 30 and all(r.tp == 4 and "Kimi" in r.model_path for r in twins)
