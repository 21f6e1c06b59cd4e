"""MiniMax-M2.5's nightly NVFP4 B200 rows by benchmark script (twin.fitting.minimax_scripts; issue 33, round 13):
they ran the pull request's early script (08bcde8f1: 0.95, vLLM's default batched tokens and CUDA-graph sizes), not
the merged one's April flags (2 x ISL, graphs to 2048) the twin gives them; and the launch-count floors of
benchmarks/minimax_ttft.py."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from benchmark_module import load_benchmark

from twin.cost.eager_steps import capture_size_tokens
from twin.fitting.minimax_scripts import merged_nvfp4_row, nightly_pr_row, pr_script_server, row_script_server
from twin.fitting.silicon import (CSV_NAME, REQUIRED_COLUMNS, read_silicon, row_run, row_server, silicon_cases,
                                  silicon_dir)

NIGHTLY = "nightly-5b8c30d62b754b575e043ce2fc0dcbf8a64f6306"
ROW = {c: "" for c in REQUIRED_COLUMNS}
ROW.update({"id": "mm", "backend": "vllm", "backend_version": "0.19.0", "model_path": "MiniMaxAI/MiniMax-M2.5",
            "system": "b200_sxm", "precision": "fp4", "mode": "agg", "isl": "1024", "osl": "1024",
            "gemm_quant_mode": "fp4", "moe_quant_mode": "fp4", "batch_size": "4", "tp_size": "2.0",
            "pp_size": "1.0", "attention_dp_size": "1.0", "moe_tp_size": "2.0", "moe_ep_size": "1.0",
            "silicon_ttft_ms": "100.0", "silicon_tpot_ms": "7.5",
            "silicon_data_source": "db-dump/2026-04-27; silicon_concurrency=4; measured=2026-04-08T00:00:00.000Z"})


def _rows(tmp_path: Path, changes: list[dict]):
    path = tmp_path / CSV_NAME
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(REQUIRED_COLUMNS), extrasaction="ignore")
        w.writeheader()
        w.writerows({**ROW, **c} for c in changes)
    return read_silicon(path)


def _nightly() -> dict:
    return {"backend_version": NIGHTLY, "silicon_data_source": "source_file=2026-03-25.csv; model=MiniMax-M2.5; "
            f"silicon_concurrency=4; measured=2026-04-03; wip=True; image=vllm/vllm-openai:{NIGHTLY}"}


def test_the_nightly_rows_ran_the_pull_requests_first_script(tmp_path):
    nightly, april = _rows(tmp_path, [_nightly(), {}])
    assert nightly_pr_row(nightly) and not nightly_pr_row(april)
    # the April rows keep the merged script's flags (row_server); the nightly one gets 08bcde8f1's (round 14)
    assert row_server(april)["max_cudagraph_capture_size"] == 2048
    assert row_server(april)["max_num_batched_tokens"] == 2048
    # 08bcde8f1's flags on the nightly row: 0.95, vLLM's default batched tokens and graph sizes; the rest kept
    server = row_server(nightly)
    assert server == pr_script_server(server, nightly)       # applied once, idempotent
    assert server["gpu_memory_utilization"] == 0.95 and server["block_size"] == 32
    assert server["enable_prefix_caching"] is False
    assert "max_cudagraph_capture_size" not in server and "max_num_batched_tokens" not in server
    assert pr_script_server(row_server(april), april) == row_server(april)


def test_a_1k_prompt_step_is_above_the_nightly_rows_graphs(tmp_path):
    (nightly,) = _rows(tmp_path, [_nightly()])
    server = pr_script_server(row_server(nightly), nightly)
    # vLLM's default capture limit (max_num_seqs 256-1024 on a B200 serve): 512 tokens < the 819-1,024 of a prompt
    for max_num_seqs in (256, 1024):
        assert capture_size_tokens(max_num_seqs, server.get("max_num_batched_tokens", 8192),
                                   server.get("max_cudagraph_capture_size")) == 512
    assert capture_size_tokens(1024, 2048, 2048) == 2048      # the merged script's April flags


def test_other_rows_are_not_the_pull_requests(tmp_path):
    rows = _rows(tmp_path, [
        {"backend_version": "0.17.0", "precision": "fp8", "moe_quant_mode": "fp8", "gemm_quant_mode": "fp8",
         "silicon_data_source": "source_file=2026-03-25.csv; silicon_concurrency=4; measured=2026-03-11"},
        {"system": "h100_sxm", "backend_version": "0.18.0", "precision": "fp8"},
        {**_nightly(), "model_path": "moonshotai/Kimi-K2.5"}])
    for row in rows:
        assert not nightly_pr_row(row)
        assert pr_script_server(row_server(row), row) == row_server(row)


@pytest.mark.skipif(not (silicon_dir() / CSV_NAME).is_file(), reason="ground truth not present beside the project")
def test_the_real_nightly_rows_are_the_pull_requests_search_space():
    """The 53 nightly rows: MiniMax NVFP4 on B200, TP 2 / 4, CONC 4-256, measured 2026-04-03 (08bcde8f1's
    search space: TP 2 / 4, CONC 4-512 at 1k/1k, 4-256 at 8k/1k)."""
    rows = [c.row for c in silicon_cases()[0] if nightly_pr_row(c.row)]
    assert len(rows) == 53
    assert {r.tp for r in rows} == {2, 4} and {r.precision for r in rows} == {"fp4"}
    assert {r.measured[:10] for r in rows} == {"2026-04-03"}
    assert all("max_cudagraph_capture_size" not in pr_script_server(row_run(r).server, r) for r in rows)


def test_minimax_paths_launch_counted_floors():
    """(ops - 16) x 0.84 ms / 16 per MoE layer: FP8 Triton 27 ops -> 0.5775 ms, NVFP4 22 ops -> 0.315 ms."""
    floors = load_benchmark("minimax_ttft").counted_floors_s()
    assert floors == pytest.approx({"eager_moe_layer_host_s@blackwell+experts_fp8": 11 * 0.84e-3 / 16,
                                    "eager_moe_layer_host_s@blackwell+experts_nvfp4": 6 * 0.84e-3 / 16})


def test_compare_names_a_file_that_is_not_a_saved_run(tmp_path):
    from twin.errors import TwinInputError
    bad = tmp_path / "bad.json"
    bad.write_text('[{"id": "x"}]')
    mod = load_benchmark("minimax_ttft")
    for path in (bad, tmp_path / "missing.json"):
        with pytest.raises(TwinInputError, match=str(path.name)):
            mod._saved(path)
    good = tmp_path / "good.json"
    good.write_text(json.dumps([{"id": "x", "ttft_ms": 100.0, "tpot_ms": 10.0, "twin_ttft_ms": 90.0,
                                 "twin_tpot_ms": 11.0}]))
    assert mod._errors(mod._saved(good)[0]) == pytest.approx((-0.1, 0.1))


def test_the_merged_nvfp4_script_runs_vllms_default_block_size(tmp_path):
    """79bd988e9 (v0.19.0 NVFP4) dropped ``--block-size=32``: those rows get none (vLLM's 16 for a GQA model); the
    nightly rows (08bcde8f1) and the FP8 rows keep 32."""
    merged, nightly, fp8 = _rows(tmp_path, [{}, _nightly(), {"precision": "fp8", "moe_quant_mode": "fp8",
                                                               "gemm_quant_mode": "fp8"}])
    assert merged_nvfp4_row(merged) and not merged_nvfp4_row(nightly) and not merged_nvfp4_row(fp8)
    assert "block_size" not in row_server(merged)
    assert row_server(nightly)["block_size"] == 32 and row_server(fp8)["block_size"] == 32
    assert row_script_server({"block_size": 32, "x": 1}, merged) == {"x": 1}
    assert row_script_server({"block_size": 32, "x": 1}, fp8) == {"block_size": 32, "x": 1}
