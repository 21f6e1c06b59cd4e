"""The vLLM silicon measurements (``../shared/ground-truth/vllm-silicon-h100-b200/measurements.csv``): mean TTFT
and mean TPOT of real vLLM servers on H100 and B200, one row per (model, GPU, weight format, layout, ISL x OSL,
concurrency), read as fit cases.

Per row, what the twin is told (facts from that folder's README, which read them from the public benchmark
scripts in force on each row's measurement date):

* the client: ``vllm bench serve``-style closed loop, ``CONC`` in flight (``silicon_concurrency``), ``10 x
  CONC`` prompts, lengths uniform on ``[int(0.8 L), L]`` for ISL and OSL, ``ignore_eos``; the ``2 x CONC``
  warm-up requests are not measured and not simulated (prefix caching is off, or the warm-up prompt is not the
  measured ones', so they leave no state that matters). Rows from ``aic-auto-gap-analysis`` have no published
  client: fixed lengths (as that README says) and the same 10 x CONC closed loop, weighed half, and their TTFT is
  left out: it measures the unknown client's bursts (fixed lengths keep the users in lock-step, each round a
  burst of CONC prefills; the twin's mean TTFT on these rows moves from +53 % to -37 % between fixed and
  uniform lengths, while its TPOT moves from -9 % to -7 %), so only their TPOT is compared;
* the server (its launch flags by model, script and date) and the vLLM release it maps onto:
  ``twin.fitting.silicon_scripts``.

Weight formats (FP8, NVFP4, gpt-oss's MXFP4 and Kimi-K2.5's INT4-expert checkpoints) and the TP/PP/DP/EP layout
of each row: ``twin.fitting.silicon_layout``. Rows the twin cannot run get a reason from ``not_expressible``
(disaggregated serving, an unknown model or GPU, an expert layout that is not tp x dp). The measured TPOT is
the mean over requests of (E2E - TTFT) / (OSL - 1); E2E and throughput are not in the file: derived from the
means (``derived_metrics``). MiniMax-M2.5 NVFP4 B200 rows: their own scripts (``twin.fitting.minimax_scripts``).

Simulated size: every row is simulated with all of its client's 10 x CONC requests by default. The client sends
them all at t = 0 and holds CONC in flight, so its first CONC requests queue behind one burst of CONC prefills
and the rest arrive spread out as earlier ones finish: the burst's share of the mean TTFT is 1/10 in the real run
and CONC / n in a run cut to n requests. The old cut of 160 (at least 3 x CONC) weighed the burst 1/3 at
CONC >= 64 and roughly doubled the twin's mean TTFT there (MiniMax-M2.5 B200 1k/1k at CONC 256: 411 ms cut, 168 ms
whole, 397 ms measured), which hid that the twin is as far too fast at high load as at light load. The fast path
makes whole rows cheap (the every-3rd subset: 88 s whole vs 68 s cut). ``row_run(max_requests=...)`` still caps
the count for quick checks, never below ``MIN_WAVES x CONC``; a capped case says so (``num_requests`` is the
simulated count and the name ends in ``[n/N]``; ``MeasuredRun.server`` is untouched).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from twin.fitting.fit import Case
from twin.fitting.measured_run import LengthSample, MeasuredRun
from twin.workload.clients import VLLM_BENCH
from twin.fitting.replay import Target
from twin.fitting.silicon_layout import row_layout, weight_dtype, weight_formats  # noqa: F401 (re-exported)
from twin.fitting.silicon_rows import (CSV_NAME, GPUS, LLAMA_DEFAULT_VERSION, REQUIRED_COLUMNS,  # noqa: F401
                                       SILICON_FOLDER, SiliconRow, model_family, read_silicon, silicon_dir)
from twin.fitting.silicon_scripts import (fused_allreduce_rms, gptoss_b200_v0151, gptoss_h100_2025,  # noqa: F401
                                          gptoss_h100_v0180, kimi_april_fp4, kimi_nvfp4_fp8_kv, kv_dtype,
                                          minimax_b200_tf32_router, minimax_h100, modelled_release,
                                          row_cudagraphs, row_server)

# HF id -> the twin's model: a catalog name, or the config.json the folder ships
MODELS = {
    "meta-llama/Llama-3.1-70B": "llama-3.1-70b",
    "Qwen/Qwen3-32B": "Qwen--Qwen3-32B_config.json",
    "Qwen/Qwen3-235B-A22B-FP8": "Qwen--Qwen3-235B-A22B-FP8_config.json",
    "MiniMaxAI/MiniMax-M2.5": "MiniMaxAI--MiniMax-M2.5_config.json",
    "moonshotai/Kimi-K2.5": "moonshotai--Kimi-K2.5_config.json",
    "openai/gpt-oss-120b": "openai--gpt-oss-120b_config.json",
}
LENGTH_LOW_FRACTION = 0.8            # --random-range-ratio 0.8: lengths uniform on [int(0.8 L), L]
PROMPTS_PER_CONCURRENCY = 10         # --num-prompts 10 x CONC
GAP_ANALYSIS_WEIGHT = 0.5
DEFAULT_MAX_REQUESTS: int | None = None   # simulated requests per row: all (see the module docstring)
MIN_WAVES = 3



# ---------------------------------------------------------------------------------------------- what the twin runs
def not_expressible(row: SiliconRow) -> str | None:
    """Why the twin cannot run ``row`` today, or None when it can."""
    if row.backend.lower() != "vllm":
        return f"backend {row.backend!r} (the twin models vLLM)"
    if row.mode != "agg":
        return "disaggregated serving (prefill and decode engines)"
    if row.system not in GPUS:
        return f"GPU {row.system!r} is not in the catalog"
    if row.model_path not in MODELS:
        return f"model {row.model_path!r} has no config"
    if weight_dtype(row) is None:
        return f"weight format {row.precision!r}"
    if row.moe_ep > 1 and row.moe_tp * row.moe_ep != row.tp * row.attention_dp:
        return (f"expert layout moe_tp {row.moe_tp} x moe_ep {row.moe_ep} is not tp {row.tp} x attention DP "
                f"{row.attention_dp} (vLLM spreads the experts over tp x dp GPUs)")
    return None


def row_target(row: SiliconRow, folder: Path | None = None) -> Target:
    model = MODELS[row.model_path]
    if model.endswith(".json"):
        model = str((folder or silicon_dir()) / "model_configs" / model)
    lay = row_layout(row)
    return Target(model, GPUS[row.system], lay["tensor_parallel_size"], weight_dtype(row) or "bf16", kv_dtype(row),
                  weight_formats=weight_formats(row), pipeline_parallel_size=lay["pipeline_parallel_size"],
                  data_parallel_size=lay["data_parallel_size"],
                  enable_expert_parallel=lay["enable_expert_parallel"])


def lengths(row: SiliconRow) -> tuple[LengthSample, LengthSample]:
    """(prompt, output) lengths: uniform on [int(0.8 L), L], or fixed for rows without a published client."""
    if not row.published_client:
        return LengthSample.constant(row.isl), LengthSample.constant(row.osl)

    def uniform(n: int) -> LengthSample:
        return LengthSample(quantiles=((0.0, float(int(LENGTH_LOW_FRACTION * n))), (1.0, float(n))))
    return uniform(row.isl), uniform(row.osl)


def measured_requests(row: SiliconRow) -> int:
    return PROMPTS_PER_CONCURRENCY * row.concurrency


def derived_metrics(row: SiliconRow) -> dict[str, float]:
    """Measured means, and E2E and throughput derived from them: E2E = TTFT + (mean OSL - 1) x TPOT; a closed
    loop of CONC users each sending a request per E2E serves CONC / E2E requests per second (Little's law).
    A row without a published client: its TPOT only (see the module docstring)."""
    if not row.published_client:
        return {"mean_tpot_ms": row.tpot_ms}
    osl = lengths(row)[1].mean
    e2e_ms = row.ttft_ms + (osl - 1.0) * row.tpot_ms
    rps = row.concurrency / (e2e_ms / 1e3)
    return {"mean_ttft_ms": row.ttft_ms, "mean_tpot_ms": row.tpot_ms, "mean_e2el_ms": e2e_ms,
            "request_throughput": rps, "output_throughput": rps * osl}


def row_run(row: SiliconRow, max_requests: int | None = DEFAULT_MAX_REQUESTS) -> MeasuredRun:
    """The row as a closed-loop run of its client: CONC in flight, 10 x CONC requests (at most ``max_requests``,
    never fewer than ``MIN_WAVES`` x CONC), all sent at t = 0 and held to CONC in flight."""
    prompt, output = lengths(row)
    total = measured_requests(row)
    n = total if max_requests is None else min(total, max(max_requests, MIN_WAVES * row.concurrency))
    name = row.id if n == total else f"{row.id} [{n}/{total}]"
    return MeasuredRun(name=name, source=str(row.source or SILICON_FOLDER), num_requests=n, prompt_tokens=prompt,
                       output_tokens=output, metrics=derived_metrics(row), rate_per_s=math.inf,
                       max_concurrency=row.concurrency, model=row.model_path, gpu=GPUS.get(row.system, row.system),
                       tensor_parallel_size=row_layout(row)["tensor_parallel_size"], server=row_server(row),
                       experiment=row.id, client=VLLM_BENCH if row.published_client else None, release=row.vllm_version)


def row_scenario(row: SiliconRow, folder: Path | None = None, max_requests: int | None = None) -> dict:
    """The row as a twin scenario (``ScenarioBody`` fields): deployment, server, and the client's workload."""
    t = row_target(row, folder)
    prompt, output = lengths(row)
    lo_in, lo_out = (int(prompt.quantiles[0][1]), int(output.quantiles[0][1]))
    run = row_run(row, max_requests)
    return {
        "name": row.id,
        "deployment": {"gpu": t.gpu, "model": t.model, "weight_dtype": t.weight_dtype, "kv_dtype": t.kv_dtype,
                       **({"weight_formats": t.weight_formats} if t.weight_formats else {}), **row_layout(row)},
        "server": row_server(row),
        "workload": {"arrivals": {"process": "poisson", "rate_per_s": math.inf, "max_concurrency": row.concurrency},
                     "num_requests": run.num_requests,
                     "classes": [{"name": "random", "share": 1.0,
                                  "prompt": {"suffix_tokens": {"uniform": [lo_in, row.isl]}},
                                  "output_tokens": {"uniform": [lo_out, row.osl]}}]},
    }


@dataclass(frozen=True)
class SiliconCase(Case):
    """A fit case from a silicon row (``weight``: how much the fit trusts it)."""

    row: SiliconRow | None = None
    weight: float = 1.0


def silicon_cases(ground_truth: Path | None = None, *, max_requests: int | None = DEFAULT_MAX_REQUESTS,
                  rows: list[SiliconRow] | None = None) -> tuple[list[SiliconCase], list[tuple[SiliconRow, str]]]:
    """(cases the twin can run, (row, reason) for those it cannot)."""
    folder = silicon_dir(ground_truth)
    rows = rows if rows is not None else read_silicon(folder / CSV_NAME)
    cases, skipped = [], []
    for row in rows:
        reason = not_expressible(row)
        if reason:
            skipped.append((row, reason))
            continue
        cases.append(SiliconCase(row_run(row, max_requests), row_target(row, folder), row=row,
                                 weight=1.0 if row.published_client else GAP_ANALYSIS_WEIGHT))
    return cases, skipped
