"""The user's path against the harness's (issue 33, round 19): for a few vLLM silicon rows, the scenario a new user
writes from what the row's published configuration says, run through ``twin run`` (the CLI, as a user runs it),
beside the embedded-defaults prediction ``benchmarks/fidelity_real.py --defaults-only`` makes for the same row
(``twin.fitting.replay.replay`` of ``twin.fitting.silicon.row_run``) and the measured values.

Each row's scenario is written from the published facts only (the ground-truth folder's README and the launch
flags of the public benchmark script in force on the row's date, as ``twin.fitting.silicon_scripts`` cites them):
the model's Hugging Face id, the GPU, the parallel layout the script launched, the weight and KV formats, the
vLLM release of the image, the launch flags, and the client (``--dataset-name random --random-range-ratio 0.8
--num-prompts 10 x CONC --max-concurrency CONC --request-rate inf --ignore-eos``; the benchmark suite's own copy of
``benchmark_serving.py``, whose range ratio draws lengths on [int(0.8 L), L]). Nothing is read from the harness.
The inference-perf stages (``STAGES``) are written from their experiment folder's published files
(``stage_scenario``) and compared with the harness's prediction of the stage (the whole stage since round 19).

    python benchmarks/user_path_rows.py        # every row and stage (~2 min on a loaded 2-core machine)
    python benchmarks/user_path_rows.py --rows llama-h100-tp2,gptoss-b200-tp1 [--stage-release none]
        [--keep-yaml DIR] [--json out.json]

Prints, per row and metric (TTFT mean and median, TPOT mean, E2E mean, request throughput): measured, harness, user
path and user / harness - 1. The harness simulates the row with its own length draws (``LengthSample``), the user path with
the scenario's (``twin.workload``): the same distributions, other random numbers, so the two agree to the sampling
scatter of 10 x CONC requests (``tests/test_user_path_rows.py`` states the tolerance), not to the last digit.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_out_path  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.yaml_input import parse_yaml, read_text  # noqa: E402

METRICS = (("mean_ttft_ms", "TTFT"), ("median_ttft_ms", "TTFT50"), ("mean_tpot_ms", "TPOT"), ("mean_e2el_ms", "E2E"),
           ("request_throughput", "req/s"))
GPU = {"h100_sxm": "H100-SXM", "b200_sxm": "B200"}

# row key -> (row id, the scenario's deployment and server as the row's published launch configuration gives them)
ROWS: dict[str, tuple[str, dict, dict]] = {
    # Llama-3.1-70B FP8 (Llama-3.3-70B-Instruct-FP8), image v0.10.2; README: FP8 KV, async scheduling, prefix caching
    # off, 8192 batched tokens, 0.9, max_num_seqs = CONC on H100
    "llama-h100-tp2": ("2026_04_06_llama_3_1_70b_h100_sxm_vllm_fp8_agg_1024x1024_c4_tp2_ep1_738",
                       {"model": "meta-llama/Llama-3.1-70B", "weight_dtype": "fp8", "kv_dtype": "fp8",
                        "tensor_parallel_size": 2},
                       {"vllm_version": "0.10.2", "async_scheduling": True, "enable_prefix_caching": False,
                        "max_num_batched_tokens": 8192, "gpu_memory_utilization": 0.9, "max_num_seqs": 4}),
    # ... 1k in / 8k out at C 64: the KV pool fills (the twin's known gap to the measured TTFT, the same both ways)
    "llama-h100-tp2-1k8k-c64": ("2026_04_06_llama_3_1_70b_h100_sxm_vllm_fp8_agg_1024x8192_c64_tp2_ep1_327",
                                {"model": "meta-llama/Llama-3.1-70B", "weight_dtype": "fp8", "kv_dtype": "fp8",
                                 "tensor_parallel_size": 2},
                                {"vllm_version": "0.10.2", "async_scheduling": True, "enable_prefix_caching": False,
                                 "max_num_batched_tokens": 8192, "gpu_memory_utilization": 0.9, "max_num_seqs": 64}),
    # ... on B200: max_num_seqs 512, 70b_fp8_b200_docker.sh: enable_fi_allreduce_fusion, FULL_DECODE_ONLY graphs
    "llama-b200-tp4": ("2026_04_06_llama_3_1_70b_b200_sxm_vllm_fp8_agg_1024x1024_c4_tp4_ep1_722",
                       {"model": "meta-llama/Llama-3.1-70B", "weight_dtype": "fp8", "kv_dtype": "fp8",
                        "tensor_parallel_size": 4},
                       {"vllm_version": "0.10.2", "async_scheduling": True, "enable_prefix_caching": False,
                        "max_num_batched_tokens": 8192, "gpu_memory_utilization": 0.9, "max_num_seqs": 512,
                        "fuse_allreduce_rms": True, "cudagraph_mode": "full_decode_only"}),
    # MiniMax-M2.5 FP8 B200, March (v0.17.0, minimaxm2.5_fp8_b200.sh f342df18e): block 32, 0.95
    "minimax-fp8-b200-march-tp4": ("2026_03_25_minimax_m2_5_b200_sxm_vllm_fp8_agg_1024x1024_c4_tp4_0_ep1_0_555",
                                   {"model": "MiniMaxAI/MiniMax-M2.5", "weight_dtype": "fp8",
                                    "tensor_parallel_size": 4},
                                   {"vllm_version": "0.17.0", "block_size": 32, "gpu_memory_utilization": 0.95}),
    # ... April (v0.19.0, measured 2026-04-03: bddbf4031): {tp: 2, ep: 2}: TP 2 with --enable-expert-parallel, FP8
    # KV, 0.90, 2 x ISL batched tokens, prefix caching off, capture size 2048 (the TF32 router came on 2026-04-21)
    "minimax-fp8-b200-april-tp2-ep": ("minimaxm2_5_b200_vllm_fp8_agg_1024x1024_c4_cfg690",
                                      {"model": "MiniMaxAI/MiniMax-M2.5", "weight_dtype": "fp8", "kv_dtype": "fp8",
                                       "tensor_parallel_size": 2, "enable_expert_parallel": True},
                                      {"vllm_version": "0.19.0", "block_size": 32, "gpu_memory_utilization": 0.90,
                                       "max_num_batched_tokens": 2048, "enable_prefix_caching": False,
                                       "max_cudagraph_capture_size": 2048}),
    # MiniMax-M2.5 NVFP4 B200 (nvidia/MiniMax-M2.5-NVFP4) on the nightly image nightly-5b8c30d6 (script 08bcde8f1):
    # 0.95, block 32, FP8 KV, prefix caching off
    "minimax-nvfp4-b200-nightly-tp2": ("2026_03_25_minimax_m2_5_b200_sxm_vllm_fp4_agg_1024x1024_c4_tp2_0_ep1_0_121",
                                       {"model": "MiniMaxAI/MiniMax-M2.5", "weight_dtype": "nvfp4",
                                        "kv_dtype": "fp8", "tensor_parallel_size": 2},
                                       {"vllm_version": "nightly-5b8c30d62b754b575e043ce2fc0dcbf8a64f6306",
                                        "gpu_memory_utilization": 0.95, "block_size": 32,
                                        "enable_prefix_caching": False}),
    # MiniMax-M2.5 FP8 H100 (v0.18.0, minimaxm2.5_fp8_h100.sh 1d5cae141): TP 4 + EP, 0.90, 256 seqs, prefix off
    "minimax-fp8-h100-tp4-ep": ("2026_03_25_minimax_m2_5_h100_sxm_vllm_fp8_agg_1024x1024_c4_tp4_0_ep4_0_234",
                                {"model": "MiniMaxAI/MiniMax-M2.5", "weight_dtype": "fp8",
                                 "tensor_parallel_size": 4, "enable_expert_parallel": True},
                                {"vllm_version": "0.18.0", "gpu_memory_utilization": 0.90, "max_num_seqs": 256,
                                 "enable_prefix_caching": False}),
    # Kimi-K2.5 INT4 (v0.15.1, kimik2.5_int4_b200.sh): the checkpoint's formats, 0.95, max_num_seqs = CONC, fusion
    "kimi-int4-b200-tp8": ("2026_03_25_kimi_k2_5_b200_sxm_vllm_int4_agg_1024x1024_c4_tp8_0_ep1_0_320",
                           {"model": "moonshotai/Kimi-K2.5", "weight_dtype": "auto", "tensor_parallel_size": 8},
                           {"vllm_version": "0.15.1", "gpu_memory_utilization": 0.95, "max_num_seqs": 4,
                            "fuse_allreduce_rms": True}),
    # Kimi-K2.5 NVFP4 (nvidia/Kimi-K2.5-NVFP4, v0.17.0, kimik2.5_fp4_b200.sh 6c3acebfa): FP8 KV, 0.90, CONC seqs,
    # 2 x ISL batched tokens, prefix off, capture size 2048, fusion
    "kimi-nvfp4-b200-tp4": ("kimik2_5_b200_vllm_fp4_agg_1024x1024_c4_cfg811",
                            {"model": "nvidia/Kimi-K2.5-NVFP4", "weight_dtype": "auto", "kv_dtype": "fp8",
                             "tensor_parallel_size": 4},
                            {"vllm_version": "0.17.0", "gpu_memory_utilization": 0.90, "max_num_seqs": 4,
                             "max_num_batched_tokens": 2048, "enable_prefix_caching": False,
                             "max_cudagraph_capture_size": 2048, "fuse_allreduce_rms": True}),
    # ... March (kimik2.5_fp4_b200.sh a58dedd5a): 0.90, CONC seqs, fusion, no --enable-expert-parallel (the {tp: 4,
    # ep: 4} label is TP 4), no --kv-cache-dtype: the checkpoint's FP8 (the twin asks for kv_dtype, see the docs)
    "kimi-nvfp4-b200-march-tp4": ("kimik2_5_b200_vllm_fp4_agg_1024x1024_c4_cfg635",
                                  {"model": "nvidia/Kimi-K2.5-NVFP4", "weight_dtype": "auto", "kv_dtype": "fp8",
                                   "tensor_parallel_size": 4},
                                  {"vllm_version": "0.17.0", "gpu_memory_utilization": 0.90, "max_num_seqs": 4,
                                   "fuse_allreduce_rms": True}),
    # ... 8k in / 1k out at C 64: where the KV format decides whether the pool holds the running set
    "kimi-nvfp4-b200-march-8k1k-c64": ("kimik2_5_b200_vllm_fp4_agg_8192x1024_c64_cfg635",
                                       {"model": "nvidia/Kimi-K2.5-NVFP4", "weight_dtype": "auto", "kv_dtype": "fp8",
                                        "tensor_parallel_size": 4},
                                       {"vllm_version": "0.17.0", "gpu_memory_utilization": 0.90, "max_num_seqs": 64,
                                        "fuse_allreduce_rms": True}),
    # gpt-oss-120b B200 (v0.15.1, gptoss_fp4_b200.sh d2c2acb19): FP8 KV, prefix off, 8192 tokens, 512 seqs, 0.9,
    # capture size 2048
    "gptoss-b200-tp1": ("2026_04_06_gpt_oss_120b_b200_sxm_vllm_fp4_agg_1024x1024_c4_tp1_ep1_302",
                        {"model": "openai/gpt-oss-120b", "weight_dtype": "auto", "kv_dtype": "fp8",
                         "tensor_parallel_size": 1},
                        {"vllm_version": "0.15.1", "enable_prefix_caching": False, "max_num_batched_tokens": 8192,
                         "max_num_seqs": 512, "gpu_memory_utilization": 0.9, "max_cudagraph_capture_size": 2048}),
    # gpt-oss-120b H100 (v0.18.0, gptoss_fp4_h100.sh cec542a9a): Marlin MXFP4, prefix off, 8192, CONC seqs, 0.9
    "gptoss-h100-tp2": ("2026_04_06_gpt_oss_120b_h100_sxm_vllm_fp4_agg_1024x1024_c4_tp2_ep1_312",
                        {"model": "openai/gpt-oss-120b", "weight_dtype": "auto", "tensor_parallel_size": 2},
                        {"vllm_version": "0.18.0", "enable_prefix_caching": False, "max_num_batched_tokens": 8192,
                         "max_num_seqs": 4, "gpu_memory_utilization": 0.9, "max_cudagraph_capture_size": 2048}),
}

# inference-perf stages: key -> (experiment folder, stage, the deployment as exp-config.yaml names it); the client and
# the server knobs are read from the folder's published files (``stage_scenario``)
STAGES: dict[str, tuple[str, int, dict]] = {
    "llama-2-7b-codegen-stage0": ("20260217-155451-llama-2-7b-tp1-codegen", 0,
                                  {"model": "meta-llama/Llama-2-7b-hf", "tensor_parallel_size": 1}),
    "llama-2-7b-codegen-stage1": ("20260217-155451-llama-2-7b-tp1-codegen", 1,
                                  {"model": "meta-llama/Llama-2-7b-hf", "tensor_parallel_size": 1}),
    "llama-2-70b-general-stage1": ("20260217-202857-llama-2-70b-tp4-general", 1,
                                   {"model": "meta-llama/Llama-2-70b-hf", "tensor_parallel_size": 4}),
    "mixtral-codegen-stage0": ("20260218-120914-mixtral-8x7b-v0-1-tp2-codegen", 0,
                               {"model": "mistralai/Mixtral-8x7B-v0.1", "tensor_parallel_size": 2}),
}
# no release is published for these runs; their date (February 2026, when 0.14-0.16 were current) gives one
STAGE_RELEASE = "0.14"
SERVER_KEYS = ("max_model_len", "max_num_batched_tokens", "max_num_seqs")


def stage_scenario(folder: Path, stage: int, deployment: dict, release: str | None = STAGE_RELEASE) -> dict:
    """A stage as a user writes it from the experiment's published files: ``results_config.yaml`` (what the
    client ran: its stages, the shared-prefix data, ``ignore_eos``; the input ``profile.yaml`` names keys that
    client ignored) and ``exp-config.yaml`` (the server). inference-perf's ``constant`` load draws exponential
    gaps (a Poisson process) and scales them to sum to the stage's duration (``scale_to_duration``: round 20);
    the first stage is its server's first traffic (``server_start: cold``)."""
    client, server = (parse_yaml(read_text(folder / name, "inference-perf file"), str(folder / name))
                      for name in ("results_config.yaml", "exp-config.yaml"))
    load = client["load"]["stages"][stage]
    sp = client["data"]["shared_prefix"]
    return {"name": f"{folder.name}-stage{stage}", "seed": 0, "server_start": "cold" if stage == 0 else "warm",
            "deployment": {"gpu": "H100-SXM", **deployment},
            "server": {k: server[k] for k in SERVER_KEYS if k in server}
            | ({"vllm_version": release} if release else {}),
            "workload": {"arrivals": {"process": "poisson", "rate_per_s": float(load["rate"]),
                                      "scale_to_duration": True},
                         "duration_s": float(load["duration"]),
                         "dataset": {"kind": "shared_prefix", "num_groups": sp["num_groups"],
                                     "num_prompts_per_group": sp["num_prompts_per_group"],
                                     "system_prompt_len": sp["system_prompt_len"], "question_len": sp["question_len"],
                                     "output_len": sp["output_len"],
                                     "ignore_eos": bool(client["server"]["ignore_eos"])}}}


def stage_harness(name: str):
    """The stage's case as the harness reads it and its embedded-defaults prediction (the whole stage, as
    ``fidelity_real.py``'s ``--eval-sim-s`` default since round 19)."""
    from twin.fitting.ground_truth import h100_cases
    from twin.fitting.replay import replay
    case = next(c for c in h100_cases()[0] if c.run.name == name)
    return case.run.metrics, replay(case.run, case.target, {}, seed=0, max_sim_s=None).metrics


def user_scenario(row, deployment: dict, server: dict) -> dict:
    """The scenario a user writes: the published deployment and server, the GPU, and the client's load."""
    conc = row.concurrency
    return {"name": row.id, "seed": 0,
            "deployment": {"gpu": GPU[row.system], **deployment},
            "server": dict(server),
            "workload": {"arrivals": {"process": "poisson", "rate_per_s": float("inf"), "max_concurrency": conc},
                         "num_requests": 10 * conc,
                         "dataset": {"kind": "random", "input_len": row.isl, "output_len": row.osl,
                                     "range_ratio": 0.8, "range_ratio_mode": "lower_bound", "ignore_eos": True}}}


def run_user(scenario: dict, folder: Path) -> dict:
    """``twin run FILE --json OUT -q`` in a subprocess, as a user runs it; the JSON's metrics."""
    path = folder / f"{scenario['name']}.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    out = folder / f"{scenario['name']}.json"
    proc = subprocess.run([sys.executable, "-m", "twin.cli.main", "run", str(path), "--json", str(out), "-q"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["(no message)"])[-1]}
    return json.loads(out.read_text())


def run_harness(row) -> dict:
    """The embedded defaults' prediction of the row, as ``fidelity_real.py --defaults-only`` makes it."""
    from twin.fitting.replay import replay
    from twin.fitting.silicon import row_run, row_target
    return replay(row_run(row), row_target(row), {}, seed=0).metrics


def compare(keys: list[str], keep: Path | None, release: str | None = STAGE_RELEASE) -> list[dict]:
    from twin.fitting.ground_truth import H100_FOLDER, ground_truth_dir
    from twin.fitting.silicon import derived_metrics, read_silicon, silicon_dir
    rows = {r.id: r for r in read_silicon(silicon_dir() / "measurements.csv")}
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = keep or Path(tmp)
        for key in keys:
            if key in STAGES:
                exp, stage, deployment = STAGES[key]
                measured, harness = stage_harness(f"{exp}/stage{stage}")
                user = run_user(stage_scenario(ground_truth_dir() / H100_FOLDER / exp, stage, deployment, release),
                                folder)
                out.append({"key": key, "row": f"{exp}/stage{stage}", "measured": measured, "harness": harness,
                            "user": user})
                continue
            row_id, deployment, server = ROWS[key]
            row = rows[row_id]
            user = run_user(user_scenario(row, deployment, server), folder)
            out.append({"key": key, "row": row_id, "measured": derived_metrics(row), "harness": run_harness(row),
                        "user": user})
    return out


def print_table(records: list[dict]) -> None:
    print(f"{'row':<30} {'metric':<6} {'measured':>10} {'harness':>10} {'user':>10} {'user/harness':>13}")
    for rec in records:
        if "error" in rec["user"]:
            print(f"{rec['key']:<30} user path: {rec['user']['error']}")
            continue
        for k, label in METRICS:
            m, h, u = rec["measured"].get(k), rec["harness"].get(k), rec["user"].get(k)
            rel = f"{100 * (u / h - 1):+12.2f}%" if h and u is not None else f"{'-':>13}"
            print(f"{rec['key']:<30} {label:<6} {m or float('nan'):10.2f} {h or float('nan'):10.2f} "
                  f"{u if u is not None else float('nan'):10.2f} {rel}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="", help="comma-separated row and stage keys (default: all): "
                    + ", ".join([*ROWS, *STAGES]))
    ap.add_argument("--stage-release", default=STAGE_RELEASE, help="the inference-perf stages' vllm_version "
                    "(default %(default)s, their date; 'none': left out, the twin's newest)")
    ap.add_argument("--keep-yaml", type=Path, default=None, help="write the user scenarios (and JSON) here")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    check_out_path(args.json, "--json")
    keys = [k.strip() for k in args.rows.split(",") if k.strip()] or [*ROWS, *STAGES]
    unknown = [k for k in keys if k not in ROWS and k not in STAGES]
    if unknown:
        raise TwinInputError(f"--rows: unknown row {unknown[0]!r}; allowed: {', '.join([*ROWS, *STAGES])}")
    if args.keep_yaml is not None and not args.keep_yaml.is_dir():
        raise TwinInputError(f"--keep-yaml {args.keep_yaml}: not a folder")
    release = None if args.stage_release == "none" else args.stage_release
    if release is not None:
        from twin.core.vllm_versions import vllm_release
        try:
            vllm_release(release)
        except ValueError as exc:
            raise TwinInputError(f"--stage-release: {exc}") from None
    records = compare(keys, args.keep_yaml, release)
    print_table(records)
    if args.json:
        args.json.write_text(json.dumps(records, indent=1, default=str))


if __name__ == "__main__":
    run_script(main)
