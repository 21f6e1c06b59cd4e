"""The twin's P/D disaggregation against the disaggregated vLLM rows of the ground truth it can express.

``vllm-silicon-h100-b200/measurements.csv`` holds three ``mode == disagg`` rows (vLLM 0.12, H100); two are
Qwen3-235B-A22B with attention data parallelism inside a pool (not expressible per pool here), one is dense:
Qwen3-32B FP8, 8 prefill engines at TP1 and 2 decode engines at TP4, ISL 4000 / OSL 1000. Its client
concurrency is not a column: ``decode_batch_size`` is "concurrency per engine", which reads as 224 x 2 decode
engines = 448 in flight, or as 224 in all. Both readings are run, with bf16 and fp8 KV (the row does not say),
as the README's client sends: random lengths in [0.8 L, L], rate inf under the concurrency cap, 10 x CONC
prompts, ignore_eos; the KV link is InfiniBand at the catalog's NIC figure. Nothing is fitted: the figures are
the roofline twin's as it stands.

    python benchmarks/pd_ground_truth.py
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from twin.deploy.run import metrics_of, run_body  # noqa: E402
from twin.fitting.ground_truth import ground_truth_dir  # noqa: E402
from twin.scenario import ScenarioBody  # noqa: E402
from twin.errors import run_script  # noqa: E402


def disagg_rows() -> list[dict[str, str]]:
    path = ground_truth_dir() / "vllm-silicon-h100-b200" / "measurements.csv"
    if not path.exists():
        print(f"no ground truth at {path} (set TWIN_GROUND_TRUTH)")
        return []
    with path.open() as f:
        return [r for r in csv.DictReader(f) if r["mode"] == "disagg"]


def body(row: dict[str, str], concurrency: int, kv_dtype: str) -> ScenarioBody:
    return ScenarioBody.model_validate({
        "name": row["id"],
        "deployment": {"gpu": "H100-SXM", "model": "qwen3-32b", "weight_dtype": "fp8", "kv_dtype": kv_dtype},
        "server": {"enable_prefix_caching": False},
        "workload": {"arrivals": {"process": "poisson", "rate_per_s": float("inf"), "max_concurrency": concurrency},
                     "num_requests": 10 * concurrency,
                     "dataset": {"kind": "random", "input_len": int(row["isl"]), "output_len": int(row["osl"]),
                                 "range_ratio": 0.8, "ignore_eos": True}},
        "records": {"token_times": "summary"},
        "disaggregation": {
            "prefill": {"replicas": int(row["prefill_num_workers"]), "tensor_parallel_size": int(row["prefill_tp_size"]),
                        "kv_transfer_config": {"kv_role": "kv_producer"}},
            "decode": {"replicas": int(row["decode_num_workers"]), "tensor_parallel_size": int(row["decode_tp_size"]),
                       "kv_transfer_config": {"kv_role": "kv_consumer"}},
            "link": {"kind": "infiniband"}},
    })


def main() -> None:
    for row in disagg_rows():
        if row["model_path"] != "Qwen/Qwen3-32B":
            print(f"{row['id']}: skipped (attention data parallelism inside a pool)")
            continue
        ttft, tpot = float(row["silicon_ttft_ms"]), float(row["silicon_tpot_ms"])
        print(f"{row['id']}: measured mean TTFT {ttft:.0f} ms, mean TPOT {tpot:.2f} ms")
        per_engine = int(row["decode_batch_size"])
        for conc in (per_engine * int(row["decode_num_workers"]), per_engine):
            for kv in ("bf16", "fp8"):
                b = body(row, conc, kv)
                m = metrics_of(run_body(b), b)
                print(f"  twin, {conc} in flight, {kv} KV: TTFT {m['mean_ttft_ms']:.0f} ms "
                      f"({m['mean_ttft_ms'] / ttft - 1:+.0%}), TPOT {m['mean_tpot_ms']:.2f} ms "
                      f"({m['mean_tpot_ms'] / tpot - 1:+.0%})")


if __name__ == "__main__":
    run_script(main)
