"""Host time per dispatched op of an eager decoder layer, measured on this machine's CPU: what the Python-level
dispatch of a layer's ops costs without any GPU row (issue 33, round 10; docs/fidelity.md "Round 10: the
silicon-held-out source fold").

An eager prompt step's floor in the twin is host time (``twin.cost.eager_steps``): per decoder layer, the CPU issuing
each op (``twin.fitting.launch_prior`` counts 16 for a dense GQA layer with FP8 weights). The only readings of the
time per op are the silicon rows' (57.5 us on H100, 52.5 us on B200), which a fold holding those rows out cannot use.
This script times the part of that work that can be stated without them: our own model of a dense layer's eager
forward as vLLM structures it (a decoder-layer module calling sub-modules; each op a module call, a dispatch wrapper
choosing the platform's implementation, as vLLM's ``CustomOp`` does, and one registered operator that allocates its
output through the dispatcher), run on tiny CPU tensors so the kernels' own work is negligible.

Not modelled (so the figure is a LOWER bound of a server's host time per op): the CUDA driver's launch
(``cudaLaunchKernel``) and the caching allocator's device path, torch.compile / Dynamo guards where a release runs
its compiled graph outside the CUDA graphs, the attention backend's per-step metadata, logging and the GIL's
hand-offs between the engine core's threads. A server's CPU may be faster or slower than this one.

    python benchmarks/eager_host_prior.py [--layers 80] [--repeats 20]

Prints microseconds per op: (time of a forward of --layers layers) / (layers x 16), the fastest of --repeats
timings of the process's CPU time (a shared machine's waits do not count).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import positive_int  # noqa: E402

OPS_PER_LAYER = 16          # twin.fitting.launch_prior.DENSE_LAYER_OPS: the layer timed here


class DispatchedOp(nn.Module):
    """One host-dispatched op: a module call, a platform dispatch wrapper, one operator allocating its output."""

    def __init__(self, fn):
        super().__init__()
        self._fn = fn

    def forward(self, *args):
        return self.dispatch(*args)

    def dispatch(self, *args):      # the platform's implementation chosen per call (vLLM's CustomOp.forward)
        return self.forward_device(*args)

    def forward_device(self, *args):
        return self._fn(*args)


def _op(fn) -> DispatchedOp:
    return DispatchedOp(fn)


class DenseLayer(nn.Module):
    """A dense GQA decoder layer with FP8-style quantised linears: the 16 ops ``launch_prior`` counts, in order."""

    def __init__(self, hidden: int = 8):
        super().__init__()
        w = torch.ones(hidden, hidden)
        self.w_qkv, self.w_o, self.w_gu, self.w_d = w, w, torch.ones(hidden, 2 * hidden), torch.ones(hidden, hidden)
        self.norm1 = _op(lambda x, r: (torch.add(x, r), r))                # fused_add_rms_norm
        self.quant1 = _op(lambda x: torch.mul(x, 0.5))                     # scaled_fp8_quant
        self.qkv = _op(lambda x: torch.mm(x, self.w_qkv))                  # cutlass_scaled_mm (qkv)
        self.rope = _op(lambda q: torch.mul(q, 1.0))                       # rotary_embedding
        self.cache = _op(lambda k: torch.clone(k))                         # reshape_and_cache_flash
        self.attn = _op(lambda q: torch.softmax(q, dim=-1))                # the attention kernel
        self.quant2 = _op(lambda x: torch.mul(x, 0.5))                     # scaled_fp8_quant
        self.o = _op(lambda x: torch.mm(x, self.w_o))                      # cutlass_scaled_mm (o_proj)
        self.ar1 = _op(lambda x: torch.add(x, 0.0))                        # all-reduce
        self.norm2 = _op(lambda x, r: (torch.add(x, r), r))                # fused_add_rms_norm
        self.quant3 = _op(lambda x: torch.mul(x, 0.5))                     # quant
        self.gate_up = _op(lambda x: torch.mm(x, self.w_gu))               # gate_up GEMM
        self.act = _op(lambda x: torch.mul(x[:, : x.shape[1] // 2], x[:, x.shape[1] // 2:]))   # silu_and_mul
        self.quant4 = _op(lambda x: torch.mul(x, 0.5))                     # quant
        self.down = _op(lambda x: torch.mm(x, self.w_d))                   # down GEMM
        self.ar2 = _op(lambda x: torch.add(x, 0.0))                        # all-reduce

    def forward(self, x, residual):
        h, residual = self.norm1(x, residual)
        q = self.qkv(self.quant1(h))
        q = self.rope(q)
        self.cache(q)
        a = self.ar1(self.o(self.quant2(self.attn(q))))
        h, residual = self.norm2(a, residual)
        g = self.act(self.gate_up(self.quant3(h)))
        return self.ar2(self.down(self.quant4(g))), residual


def per_op_us(layers: int = 80, repeats: int = 20) -> float:
    """Fastest CPU time of one forward through ``layers`` dense layers, per op, in microseconds."""
    torch.set_num_threads(1)
    model = nn.ModuleList(DenseLayer() for _ in range(layers))
    x = torch.ones(4, 8)
    best = float("inf")
    with torch.inference_mode():
        for _ in range(repeats):
            t0 = time.process_time()
            h, r = x, x
            for layer in model:
                h, r = layer(h, r)
            best = min(best, time.process_time() - t0)
    return 1e6 * best / (layers * OPS_PER_LAYER)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=positive_int, default=80)
    ap.add_argument("--repeats", type=positive_int, default=20)
    a = ap.parse_args()
    us = per_op_us(a.layers, a.repeats)
    print(f"host time per dispatched op: {us:.2f} us (lower bound; {OPS_PER_LAYER} ops per dense layer: "
          f"{OPS_PER_LAYER * us / 1e3:.3f} ms per layer)")


if __name__ == "__main__":
    main()
