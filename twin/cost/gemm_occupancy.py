"""A dense decode GEMM's weight stream limited by the SMs its tiles occupy (issue 33, round 17; docs/fidelity.md
"Round 17: Blackwell's dense weight stream at small batch"). A reading and an opt-in trial, not embedded.

The hypothesis. At decode (a few tokens per step) a weight GEMM is one row of output tiles along the weights'
output dimension N; vLLM's CUTLASS kernels give each tile one thread block (CTA) on one SM, which streams that
tile's column of the weight matrix (tile N x K) through its shared-memory pipeline. By Little's law an SM keeps at
most its pipeline's weight bytes in flight, so it pulls ``r = bytes in flight / memory latency``; a GEMM whose CTAs
(``ceil(N / tile N)``, rounded up to the cluster, in ``ceil(CTAs / SMs)`` waves) times ``r`` fall short of the HBM's
datasheet rate runs at that product, not at the datasheet. A GPU with more bandwidth per SM (B200 8 TB/s over 148
SMs, 54 GB/s per SM; H100 3.35 TB/s over 132, 25 GB/s) needs more CTAs to saturate, so the same shapes might stream
at a lower fraction of the datasheet on Blackwell (its dense Llama rows read 0.76-0.79 FP8, 0.65-0.68 NVFP4; round
16) than on Hopper.

The prior, from kernel and datasheet facts only (it reads no measured row):
* the shapes: a GQA decoder layer's four GEMMs per TP shard, QKV (N = (q + 2 kv) / TP, K = hidden), o_proj (N =
  hidden, K = q / TP), gate_up (N = 2 intermediate / TP, K = hidden), down (N = hidden, K = intermediate / TP);
* the kernels (vLLM's CUTLASS dispatch at M <= 16, ``DECODE_KERNELS``): SM100 FP8 swap-AB, 128 weight rows x 128 K
  per stage, clusters of 4 along N; SM100 NVFP4, 128 (tokens) x 256 (weights) x 256 K, clusters of 4 along N; SM90
  FP8, 64 (tokens) x 64 (weights) x 128 K, clusters of 4 along N;
* the pipeline: as many stages as fit 227 KB of shared memory per block (SM90 and SM100 alike; CUTLASS's
  automatic stage count, its epilogue carve-out not subtracted: an upper bound on the bytes in flight);
* the latency: ``DEFAULT_LATENCY_S`` (1 us, the loaded HBM latency round 15's Marlin reading used; not a datasheet
  figure, so the trial takes it as an argument);
* SMs: ``SM_COUNT`` (NVIDIA datasheets).

A GPU, format or model the table does not cover (MoE and MLA layers, bf16 GEMMs that cuBLAS picks tiles for, other
GPUs) gets no term: ``occupancy_extra_s`` returns 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from twin.errors import TwinInputError
from twin.hardware.quant import bytes_per_weight

SM_COUNT = {"B200": 148, "H100-SXM": 132}     # streaming multiprocessors (NVIDIA B200 / H100 SXM5 datasheets)
SHARED_MEMORY_PER_BLOCK_BYTES = 227 * 1024    # the most one block may use on SM90 and SM100 (CUDA guide)
DEFAULT_LATENCY_S = 1.0e-6                    # loaded HBM latency (round 15's Marlin reading; stated, not measured)


@dataclass(frozen=True)
class DecodeKernel:
    """One decode GEMM kernel's tile as vLLM dispatches it at M <= 16: the weight rows (N) and K per tile, the
    token rows its tile pads to (its activation tile), and the cluster size along N (CTAs launch in whole
    clusters)."""
    tile_n: int
    tile_k: int
    tile_tokens: int
    cluster_n: int

    def stage_bytes(self, bytes_per_param: float) -> float:
        """Bytes one pipeline stage holds: the weight tile and the activation tile, both in the weights' format
        (these kernels are W8A8 / W4A4; block scales not counted)."""
        return self.tile_k * (self.tile_n + self.tile_tokens) * bytes_per_param

    def weight_bytes_in_flight(self, bytes_per_param: float) -> float:
        """Weight bytes one CTA keeps in flight: the stages that fit ``SHARED_MEMORY_PER_BLOCK_BYTES``, times
        the weight tile."""
        stages = SHARED_MEMORY_PER_BLOCK_BYTES // self.stage_bytes(bytes_per_param)
        return stages * self.tile_k * self.tile_n * bytes_per_param


# (GPU, weight format) -> vLLM 0.10.x's CUTLASS decode tile: SM100 FP8 ``sm100_fp8_config_M16_swap_ab`` (tile
# 128 x 32 x 128 after the swap, cluster 4 x 1), SM100 NVFP4 ``Fp4GemmSm100`` small-M config (128 x 256 x 256,
# cluster 1 x 4), SM90 FP8 ``sm90_fp8_config_M16`` (64 x 64 x 128, cluster 1 x 4)
DECODE_KERNELS: dict[tuple[str, str], DecodeKernel] = {
    ("B200", "fp8"): DecodeKernel(tile_n=128, tile_k=128, tile_tokens=32, cluster_n=4),
    ("B200", "nvfp4"): DecodeKernel(tile_n=256, tile_k=256, tile_tokens=128, cluster_n=4),
    ("H100-SXM", "fp8"): DecodeKernel(tile_n=64, tile_k=128, tile_tokens=64, cluster_n=4),
}


def gqa_decode_gemms(model, tensor_parallel_size: int) -> list[tuple[int, int]]:
    """(N, K) per TP shard of a dense GQA decoder layer's four weight GEMMs (QKV, o_proj, gate_up, down); a
    one-line error for a model that is not one (experts, MLA) or a TP size that does not divide its widths."""
    if model.is_moe or model.is_mla:
        raise TwinInputError(f"{model.name}: the occupancy shapes cover dense GQA layers only")
    tp = tensor_parallel_size
    widths = (model.q_dim + 2 * model.kv_dim, model.q_dim, 2 * model.intermediate_size, model.intermediate_size)
    if tp < 1 or any(w % tp for w in widths):
        raise TwinInputError(f"{model.name}: TP {tp} does not divide its GEMM widths {widths}")
    h = model.hidden_size
    return [(widths[0] // tp, h), (h, widths[1] // tp), (widths[2] // tp, h), (h, widths[3] // tp)]


def gemm_stream_s(n: int, k: int, kernel: DecodeKernel, sms: int, sm_bytes_per_s: float, bandwidth: float,
                  weight_bytes_per_param: float) -> float:
    """Seconds to stream an N x K weight GEMM: the longer of the bytes at ``bandwidth`` and the SM-limited time
    (its CTAs' waves, each a tile column at ``sm_bytes_per_s``)."""
    if min(n, k, sms) < 1 or not all(math.isfinite(r) and r > 0 for r in (sm_bytes_per_s, bandwidth)):
        raise TwinInputError(f"GEMM shape ({n} x {k}) and SM count ({sms}) must be >= 1, the rates "
                             f"({sm_bytes_per_s}, {bandwidth} bytes / s) positive and finite")
    ctas = math.ceil(math.ceil(n / kernel.tile_n) / kernel.cluster_n) * kernel.cluster_n
    tile_bytes = kernel.tile_n * k * weight_bytes_per_param
    return max(n * k * weight_bytes_per_param / bandwidth, math.ceil(ctas / sms) * tile_bytes / sm_bytes_per_s)


def sm_bytes_per_s(kernel: DecodeKernel, weight_format: str, latency_s: float = DEFAULT_LATENCY_S) -> float:
    """The weight bytes per second one SM pulls with ``kernel`` (Little's law: bytes in flight / ``latency_s``)."""
    if not (math.isfinite(latency_s) and latency_s > 0):
        raise TwinInputError(f"latency_s must be a positive finite number, got {latency_s}")
    return kernel.weight_bytes_in_flight(float(bytes_per_weight(weight_format))) / latency_s


def occupancy_extra_s(model, gpu_name: str, weight_format: str, tensor_parallel_size: int, bandwidth: float,
                      latency_s: float = DEFAULT_LATENCY_S) -> float:
    """Seconds per decode step the SM-limited streams add over the same GEMMs at ``bandwidth`` (the twin's
    achieved weight-stream rate, bytes / s), over every decoder layer; 0 where ``DECODE_KERNELS`` or
    ``SM_COUNT`` has no entry or the model is not a dense GQA one."""
    kernel, sms = DECODE_KERNELS.get((gpu_name, weight_format)), SM_COUNT.get(gpu_name)
    if kernel is None or sms is None or model.is_moe or model.is_mla:
        return 0.0
    bpw = float(bytes_per_weight(weight_format))
    rate = sm_bytes_per_s(kernel, weight_format, latency_s)
    extra = sum(gemm_stream_s(n, k, kernel, sms, rate, bandwidth, bpw) - n * k * bpw / bandwidth
                for n, k in gqa_decode_gemms(model, tensor_parallel_size))
    return model.num_hidden_layers * extra
