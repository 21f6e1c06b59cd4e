"""What the Kimi-K2.5 silicon rows' servers ran (issue 33, round 5): the NVFP4 checkpoint's FP8 KV cache and bf16
attention, and the INT4 checkpoint's formats, per row (twin.fitting.silicon, twin.fitting.silicon_layout)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from twin.fitting.silicon import CSV_NAME, REQUIRED_COLUMNS, kv_dtype, read_silicon, row_target
from twin.fitting.silicon_layout import weight_formats

BASE = {c: "" for c in REQUIRED_COLUMNS}
BASE.update({"id": "kimi_row", "backend": "vllm", "model_path": "moonshotai/Kimi-K2.5", "system": "b200_sxm",
             "mode": "agg", "isl": "8192", "osl": "1024", "batch_size": "4", "tp_size": "4", "pp_size": "1",
             "attention_dp_size": "1", "moe_tp_size": "1", "moe_ep_size": "4", "silicon_ttft_ms": "250",
             "silicon_tpot_ms": "9.0"})
NVFP4 = {"backend_version": "0.17.0", "precision": "fp4", "gemm_quant_mode": "nvfp4", "moe_quant_mode": "nvfp4"}
INT4 = {"backend_version": "0.15.1", "precision": "int4", "gemm_quant_mode": "int4_wo", "moe_quant_mode": "int4_wo",
        "tp_size": "8", "moe_ep_size": "1"}


def _row(tmp_path: Path, change: dict):
    path = tmp_path / CSV_NAME
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(REQUIRED_COLUMNS), extrasaction="ignore")
        w.writeheader()
        w.writerow({**BASE, **change})
    (row,) = read_silicon(path)
    return row


@pytest.mark.parametrize("measured", ["2026-03-11", "2026-03-27", "2026-04-20"])
def test_every_kimi_nvfp4_row_ran_an_fp8_kv_cache(tmp_path, measured):
    """March scripts passed no --kv-cache-dtype (auto: the ModelOpt checkpoint's FP8), April's passed fp8."""
    row = _row(tmp_path, {**NVFP4, "silicon_data_source": f"source_file=x.csv; silicon_concurrency=4; "
                                                          f"measured={measured}T00:00:00.000Z"})
    assert kv_dtype(row) == "fp8" and row_target(row).kv_dtype == "fp8"


def test_the_kimi_int4_rows_keep_a_bf16_kv_cache_and_their_checkpoints_formats(tmp_path):
    row = _row(tmp_path, {**INT4, "silicon_data_source": "source_file=2026-03-25.csv; silicon_concurrency=4"})
    assert kv_dtype(row) == "bf16" and weight_formats(row) is None


def test_the_kimi_nvfp4_checkpoint_keeps_attention_and_the_router_in_bf16(tmp_path):
    row = _row(tmp_path, {**NVFP4, "silicon_data_source": "source_file=x.csv; silicon_concurrency=4"})
    assert weight_formats(row) == {"attention": "bf16", "router": "bf16"}
    t = row_target(row)
    assert t.weight_dtype == "nvfp4" and t.weight_formats == {"attention": "bf16", "router": "bf16"}
    # another family's NVFP4 row keeps its label
    other = _row(tmp_path, {**NVFP4, "model_path": "MiniMaxAI/MiniMax-M2.5"})
    assert weight_formats(other) is None and kv_dtype(other) == "bf16"
