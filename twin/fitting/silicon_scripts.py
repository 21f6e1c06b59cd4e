"""What each vLLM silicon row's server ran (``twin.fitting.silicon``'s rows): the launch facts of the public
benchmark scripts in force on the row's measurement date, as the twin's ``server:`` knobs (``row_server``,
``row_cudagraphs``), its KV cache format (``kv_dtype``) and the release it maps onto (``modelled_release``).

Per row (facts from the ground-truth folder's README, which read them from those scripts):

* the server, per model: Llama-3.1-70B FP8 (2025-10-29, v0.10.2): FP8 KV, async scheduling on, prefix caching
  off, ``max_num_batched_tokens`` 8192, ``gpu_memory_utilization`` 0.9, ``max_num_seqs`` = CONC on H100, 512 on
  B200; MiniMax-M2.5 FP8 on B200: block size 32, 0.95 (March) or 0.90 with FP8 KV, ``max_num_batched_tokens`` =
  2 x ISL and prefix caching off (April); Kimi-K2.5 INT4: 0.95 (NVFP4: 0.90, its script), ``max_num_seqs`` = CONC; others vLLM's defaults;
* the vLLM release: ``backend_version`` (blank Llama rows: 0.10.2), mapped onto the newest release the twin
  models that is not newer (``twin.core.vllm_versions``; the oldest modelled one for older releases, with the
  row's known flags such as async scheduling set explicitly).

Launch flags that change costs (issue 33, round 4; SemiAnalysisAI/InferenceX ``benchmarks/`` scripts in force on
each row's measurement date, read at the snapshot of 2026-08-21, commit 843c6254f):

* the all-reduce + RMSNorm fusion (``twin.cost.kernel_path``; vLLM's ``fuse_allreduce_rms``, before 0.12
  ``enable_fi_allreduce_fusion``), passed explicitly by every B200 script of these rows: Llama-3.1-70B FP8 / FP4
  (``70b_fp8_b200_docker.sh``, ``70b_fp4_b200_docker.sh`` at 4b860b78e, 2025-10-01: ``enable_fi_allreduce_fusion:
  true``, thresholds 32 / 32 / 8 MB at TP 2 / 4 / 8), gpt-oss-120b (``gptoss_fp4_b200_docker.sh`` at 4b860b78e,
  the 2025-11 rows: the same; ``single_node/gptoss_fp4_b200.sh`` at d2c2acb19, 2026-02-25, the v0.15.1 rows:
  ``fuse_allreduce_rms: true``) and Kimi-K2.5 (``kimik2.5_int4_b200.sh`` from eb02101ef, 2026-02-23, and
  ``kimik2.5_fp4_b200.sh`` from a58dedd5a, 2026-03-11: ``--compilation_config.pass_config.fuse_allreduce_rms
  true``); the MiniMax-M2.5 scripts (``minimaxm2.5_fp8_b200.sh`` f342df18e / bddbf4031 / 41ed82dc1,
  ``minimaxm2.5_fp4_b200.sh`` 79bd988e9 / 13962fcfa, ``minimaxm2.5_fp8_h100.sh``) and the H100 scripts do not
  pass it, so those rows take their release's default (off before 0.18, on from 0.18 with TP > 1);
* gpt-oss-120b on B200, v0.15.1 (d2c2acb19): FP8 KV cache, prefix caching off, ``max_num_batched_tokens`` 8192,
  ``max_num_seqs`` 512, ``gpu_memory_utilization`` 0.9, ``max_cudagraph_capture_size`` 2048, MoE on FlashInfer's
  MXFP4 x MXFP8 kernels (``VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1``); the 2025-11 B200 rows: the same without
  FP8 KV, with async scheduling. gpt-oss on H100 v0.18.0 (cec542a9a, 2026-03-27): MXFP4 experts on Marlin
  (``VLLM_MXFP4_USE_MARLIN=1``), prefix caching off, 8192 batched tokens, ``max_num_seqs`` = CONC,
  ``gpu_memory_utilization`` 0.9 (set per row from round 5). The MXFP4 expert path by GPU (FP8 tensor rate on
  Blackwell with MXFP8 activations, the B200 path's fused all-reduce): ``twin.cost.mxfp4_path``;
* expert kernel paths by format, recorded for ``@experts_<format>`` scopes (``twin.fitting.scoped``): MiniMax FP8
  on B200 in March 2026 (v0.17.0, f342df18e) ran with ``VLLM_USE_FLASHINFER_MOE_FP8=0 VLLM_MOE_USE_DEEP_GEMM=0``
  (vLLM's Triton / CUTLASS block-FP8 MoE), from 2026-04-03 (v0.19.0) with vLLM's default FP8 MoE and
  ``VLLM_FLASHINFER_ALLREDUCE_BACKEND=mnnvl``, from 2026-04-21 (41ed82dc1; NVFP4 13962fcfa)
  ``VLLM_FLOAT32_MATMUL_PRECISION=high`` (its FP32 router on TF32 tensor cores: ``twin.cost.router_gemm``); Kimi
  INT4 with ``VLLM_USE_FLASHINFER_MOE_INT4=1`` from 79ea3651a (2026-03-24), Marlin W4A16 MoE before;
* Kimi-K2.5 INT4 (v0.15.1; issue 33, round 5): every row ran the Marlin W4A16 MoE (``fused_marlin_moe`` via
  compressed-tensors' ``CompressedTensorsWNA16MarlinMoEMethod``), priced by the ``int4`` expert-path terms of
  ``twin.cost.marlin_moe``: vLLM PR #39315 (2026-04-08) states that ``VLLM_USE_FLASHINFER_MOE_INT4`` "has been
  unusable in vLLM since v0.15.1" and that, fixed, it runs 1k/1k ~4 % faster, so with or without the flag the
  rows measure Marlin (the ``2026-03-25.csv`` and ``2026-04-06.csv`` copies of each run carry the same TTFT and
  TPOT: one set of runs). TP8 without ``--enable-expert-parallel``: each rank runs all 384 experts at 2048 / 8 =
  256 intermediate columns. 79ea3651a also passed ``--no-enable-prefix-caching`` (moot here: random prompts).
  Kimi NVFP4 (v0.17.0) and INT4: MLA decode on FlashInfer's TRT-LLM-gen kernel (``FLASHINFER_MLA``, the
  Blackwell default since vLLM PR #32339, January 2026; its vLLM wrapper passes the query heads unpadded), not
  CUTLASS MLA (which pads to 128 heads);
* Kimi-K2.5 NVFP4 from 6c3acebfa (2026-04-20): FP8 KV, ``max_num_batched_tokens`` = 2 x ISL, prefix caching off;
  MiniMax-M2.5 FP8 on H100 (1d5cae141, 2026-03-27): ``cudagraph_mode: PIECEWISE`` (attention outside the CUDA
  graphs; recorded only), ``gpu_memory_utilization`` 0.90, ``max_num_seqs`` 256, TP4 with
  ``--enable-expert-parallel`` (EP4, no attention DP: every rank sees every token, so the experts' outputs are
  summed by the TP all-reduce, no all-to-all), bf16 KV, default batched tokens; from 0f78cf4eb (2026-03-27
  19:17 PDT) ``--no-enable-prefix-caching`` (set on every H100 MiniMax row: random prompts share no prefix, so
  it changes nothing but the warm-up, which is not simulated);
* Qwen3-32B on H100 (``aic-auto-gap-analysis``, v0.12.0, TP 2 / 4 / 8, bf16): no published script; vLLM 0.12's
  defaults: no async scheduling (on from 0.14), no all-reduce + RMSNorm fusion (off at every level in 0.12),
  CUDA graphs ``FULL_AND_PIECEWISE`` (the default since 0.11, vllm-project/vllm#25444), bf16 KV, 8192 batched tokens on an 80 GB GPU.
"""

from __future__ import annotations

import re

from twin.core.vllm_versions import VLLM_RELEASES
from twin.cost.generations import gpu_generation
from twin.cost.kernel_path import fusion_default
from twin.fitting.minimax_scripts import row_script_server
from twin.fitting.silicon_rows import GPUS, LLAMA_DEFAULT_VERSION, SiliconRow, model_family


def modelled_release(version: str | None, measured: str | None = None) -> str:
    """The newest release the twin models that is not newer than ``version`` (the oldest modelled one for older
    releases). A nightly build counts as the release current at its measurement date's month (>= 2026-03:
    0.18); a blank one measured in 2025 (gpt-oss) as its script's image, v0.10.2-0.11.2 (InferenceX 25506e87c)."""
    def key(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", v)[:2])
    known = sorted(VLLM_RELEASES, key=key)
    if not version:
        return known[0] if (measured or "9999") < "2026" else known[-1]
    if version.startswith("nightly"):
        version = "0.18" if (measured or "") >= "2026-03" else known[-1]
    v = key(version)
    older = [k for k in known if key(k) <= v]
    return older[-1] if older else known[0]


def row_server(row: SiliconRow) -> dict:
    """The row's vLLM settings as the twin's ``server:`` knobs (README facts per model; vLLM defaults else)."""
    fam = model_family(row.model_path)
    server: dict = {"vllm_version": modelled_release(row.vllm_version, row.measured)}
    if fam == "llama" and row.vllm_version == LLAMA_DEFAULT_VERSION:
        server.update(async_scheduling=True, enable_prefix_caching=False, max_num_batched_tokens=8192,
                      gpu_memory_utilization=0.9,
                      max_num_seqs=row.concurrency if row.system == "h100_sxm" else 512)
    elif fam == "minimax" and row.system == "b200_sxm":
        server["block_size"] = 32
        if row.month >= "2026-04":
            server.update(gpu_memory_utilization=0.90, max_num_batched_tokens=2 * row.isl, enable_prefix_caching=False)
        else:
            server.update(gpu_memory_utilization=0.95)
    elif fam == "kimi" and row.month.startswith("2026-03"):
        # INT4: 0.95 (the README); NVFP4: kimik2.5_fp4_b200.sh passed 0.90 (InferenceX, March 2026)
        server.update(gpu_memory_utilization=0.90 if (row.precision or "").lower() == "fp4" else 0.95,
                      max_num_seqs=row.concurrency)
    elif kimi_april_fp4(row):
        # kimik2.5_fp4_b200.sh from 6c3acebfa (2026-04-20): FP8 KV, 2 x ISL batched tokens, prefix caching off
        server.update(gpu_memory_utilization=0.90, max_num_seqs=row.concurrency, max_num_batched_tokens=2 * row.isl,
                      enable_prefix_caching=False)
    elif minimax_h100(row):
        # minimaxm2.5_fp8_h100.sh (1d5cae141, 2026-03-27; 0f78cf4eb adds --no-enable-prefix-caching): bf16 KV
        server.update(gpu_memory_utilization=0.90, max_num_seqs=256, enable_prefix_caching=False)
    elif gptoss_b200_v0151(row) or (fam == "gpt-oss" and row.system == "b200_sxm" and row.month < "2026"):
        server.update(gpu_memory_utilization=0.9, max_num_batched_tokens=8192, max_num_seqs=512,
                      enable_prefix_caching=False, **({} if gptoss_b200_v0151(row) else {"async_scheduling": True}))
    elif gptoss_h100_v0180(row):       # single_node/gptoss_fp4_h100.sh, cec542a9a (Marlin MXFP4 MoE)
        server.update(gpu_memory_utilization=0.9, max_num_batched_tokens=8192, max_num_seqs=row.concurrency,
                      enable_prefix_caching=False)
    elif gptoss_h100_2025(row):        # gptoss_fp4_h100_docker.sh (2025-09 .. 12): async-scheduling true
        server.update(async_scheduling=True, gpu_memory_utilization=0.9, max_num_batched_tokens=8192,
                      max_num_seqs=row.concurrency, enable_prefix_caching=False)
    if fused_allreduce_rms(row):
        server["fuse_allreduce_rms"] = True
    if minimax_b200_tf32_router(row):
        server["float32_matmul_precision"] = "high"
    return row_script_server(server | row_cudagraphs(row), row)      # MiniMax NVFP4's own scripts (round 14)


def row_cudagraphs(row: SiliconRow) -> dict:
    """The row's CUDA-graph launch facts (``twin.cost.eager_steps``; InferenceX scripts as cited in the module
    docstring): the Llama B200 scripts (4b860b78e) set ``cudagraph_mode: FULL_DECODE_ONLY`` (a step with a prompt
    runs eagerly); ``--max-cudagraph-capture-size 2048`` (0.10-0.11: ``cuda-graph-sizes: 2048``; the 2025 gpt-oss
    rows: ``gptoss_fp4_b200_docker.sh`` 4b860b78e, ``gptoss_fp4_h100_docker.sh`` 25506e87c): gpt-oss B200 v0.15.1
    (d2c2acb19) and H100 v0.18 (cec542a9a), MiniMax-M2.5 B200 from 2026-04-03 (bddbf4031, 41ed82dc1; NVFP4
    79bd988e9, 13962fcfa), Kimi-K2.5 NVFP4 from 2026-04-20 (6c3acebfa). Else vLLM's default, min(2 x max_num_seqs,
    512) (the March Kimi scripts pass ``--max-num-seqs CONC``; MiniMax March: 512)."""
    fam = model_family(row.model_path)
    if fam == "llama" and row.system == "b200_sxm" and row.vllm_version == LLAMA_DEFAULT_VERSION:
        return {"cudagraph_mode": "full_decode_only"}
    if (gptoss_b200_v0151(row) or kimi_april_fp4(row) or gptoss_h100_v0180(row)
            or (fam == "gpt-oss" and (row.measured or "") < "2026")   # cuda-graph-sizes / max-cudagraph-capture-size
            or (fam == "minimax" and row.system == "b200_sxm" and row.month >= "2026-04")):
        return {"max_cudagraph_capture_size": 2048}
    return {}


def gptoss_h100_2025(row: SiliconRow) -> bool:
    """A 2025 gpt-oss-120b H100 row (``gptoss_fp4_h100_docker.sh`` af4ccd03f / 25506e87c / 4e135fd3f: ``async-
    scheduling: true`` in every version since 2025-09, so async although v0.11 defaults it off; issue 33, round 8)."""
    return model_family(row.model_path) == "gpt-oss" and row.system == "h100_sxm" and (row.measured or "") < "2026"


def gptoss_b200_v0151(row: SiliconRow) -> bool:
    """A gpt-oss-120b B200 row on v0.15.1, run by ``single_node/gptoss_fp4_b200.sh`` of d2c2acb19."""
    return model_family(row.model_path) == "gpt-oss" and row.system == "b200_sxm" and row.vllm_version == "0.15.1"


def minimax_b200_tf32_router(row: SiliconRow) -> bool:
    """A MiniMax-M2.5 B200 row measured under ``VLLM_FLOAT32_MATMUL_PRECISION=high`` (``minimaxm2.5_fp8_b200.sh``
    41ed82dc1, ``minimaxm2.5_fp4_b200.sh`` 13962fcfa, both 2026-04-21; rows measured from that day): its FP32
    router GEMM on TF32 tensor cores (``twin.cost.router_gemm``). Earlier MiniMax scripts (B200 and H100) leave
    vLLM's default, ``highest`` (FP32 on the CUDA cores)."""
    return (model_family(row.model_path) == "minimax" and row.system == "b200_sxm"
            and (row.measured or "") >= "2026-04-21")


def minimax_h100(row: SiliconRow) -> bool:
    """A MiniMax-M2.5 FP8 H100 row (v0.18.0, ``single_node/minimaxm2.5_fp8_h100.sh`` of 1d5cae141)."""
    return model_family(row.model_path) == "minimax" and row.system == "h100_sxm"


def gptoss_h100_v0180(row: SiliconRow) -> bool:
    """A gpt-oss-120b H100 row on v0.18.0, run by ``single_node/gptoss_fp4_h100.sh`` of cec542a9a."""
    return model_family(row.model_path) == "gpt-oss" and row.system == "h100_sxm" and row.vllm_version == "0.18.0"


def kimi_april_fp4(row: SiliconRow) -> bool:
    """A Kimi-K2.5 NVFP4 B200 row measured under ``kimik2.5_fp4_b200.sh`` of 6c3acebfa (2026-04-20; rows measured
    that day are taken as run by it)."""
    return (model_family(row.model_path) == "kimi" and row.system == "b200_sxm"
            and (row.precision or "").lower() == "fp4" and (row.measured or "") >= "2026-04-20")


def fused_allreduce_rms(row: SiliconRow) -> bool:
    """Whether the row's server fused its all-reduces with RMSNorm (see the module docstring): the B200 scripts
    of Llama, gpt-oss and Kimi passed it; the others take the default of the release they ran (not of the
    release the twin maps it onto: 0.18 maps onto 0.14's scheduler behaviour but has 0.18's fusion default)."""
    if row.tp <= 1:
        return False
    fam = model_family(row.model_path)
    if row.system == "b200_sxm" and (fam in ("gpt-oss", "kimi")
                                     or (fam == "llama" and row.vllm_version == LLAMA_DEFAULT_VERSION)):
        return True
    version = row.vllm_version or ""
    if version.startswith("nightly"):
        version = "0.18" if (row.measured or "") >= "2026-03" else ""
    key = tuple(int(x) for x in re.findall(r"\d+", version)[:2])
    return len(key) == 2 and fusion_default(key, gpu_generation(GPUS.get(row.system, row.system)), row.tp)


def kimi_nvfp4_fp8_kv(row: SiliconRow) -> bool:
    """A Kimi-K2.5 NVFP4 row (nvidia/Kimi-K2.5-NVFP4, vLLM 0.17.0): its KV cache is FP8 whether or not the script
    passed ``--kv-cache-dtype fp8`` (only 6c3acebfa, 2026-04-20, did). With ``--kv-cache-dtype auto`` vLLM takes a
    ModelOpt checkpoint's ``kv_cache_quant_algo`` (vLLM PR #29980, "Load kv-cache dtype from hf_quant_config.json
    automatically", merged 2025-12), and NVIDIA's ModelOpt NVFP4 checkpoints of this family declare FP8 there
    (nvidia/DeepSeek-R1-0528-NVFP4, nvidia/MiniMax-M2.5-NVFP4). The rows agree: at 8k/1k, C = 64 (TP4) the bf16
    pool holds ~40 of the 64 sequences and the twin queued them (TTFT 10 s) where the server measured 1.3 s."""
    return (model_family(row.model_path) == "kimi" and (row.precision or "").lower() == "fp4"
            and (row.vllm_version or "") == "0.17.0")


def kv_dtype(row: SiliconRow) -> str:
    fam = model_family(row.model_path)
    if kimi_nvfp4_fp8_kv(row):
        return "fp8"
    if fam == "llama" and row.vllm_version == LLAMA_DEFAULT_VERSION:
        return "fp8"
    if gptoss_b200_v0151(row) or kimi_april_fp4(row):
        return "fp8"
    if fam == "minimax" and row.system == "b200_sxm" and row.month >= "2026-04":
        return "fp8"
    return "bf16"
