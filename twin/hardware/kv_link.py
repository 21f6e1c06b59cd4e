"""Moving a request's KV cache between engines: how many bytes, over which link, in how long.

Used by prefill/decode disaggregation (``twin.deploy``): a prefill engine computes a prompt's KV, the connector
(vLLM's ``NixlConnector`` and its peers) moves it to a decode engine.

Bytes. A token's KV in the model's layout: every layer's K and V for every KV head (MLA: the latent and the
rope key once, as vLLM keeps it), in ``kv_dtype`` -- ``ModelSpec.kv_bytes_per_token(kv_dtype, 1)``, the same
figure the KV pool is sized by at tensor_parallel_size 1. A prompt of n tokens moves n times that (the whole
prompt: NIXL reads every block of the prompt, the last partial one included).

Time. ``latency_s + bytes / (bandwidth x lanes)``, where ``lanes = min(TP_prefill, TP_decode)``: each
tensor-parallel rank holds its heads' share of the KV and the rank pairs move their shares at once, one link
each. Bandwidth is one direction per GPU. With ``layerwise`` (the KV of layer l leaves while layer l+1 is
computed, as LMCache's and Mooncake's layer-wise modes do) the part exposed after the prefill's last step is
``max(wire/L, wire - step x (L-1)/L)``: the last layer's share, or what the step's compute could not hide.

Link kinds and their stated priors (bandwidth one direction per GPU; latency a per-transfer setup and
completion notification, not a wire figure):

=============  =========================================================  ===========
kind           bandwidth (unless ``bandwidth_gb_s`` is given)             latency
=============  =========================================================  ===========
nvlink         the GPU's NVLink figure / 2 (catalog: bidirectional)       10 us
nvswitch       the same; P and D may span one NVSwitch domain (NVL72)     10 us
infiniband     the GPU's scale-out NIC (catalog ``scale_out_bytes_per_s``) 20 us
roce           the same NIC figure                                        30 us
pcie           32 GB/s (PCIe Gen4 x16, one direction, nominal)            10 us
=============  =========================================================  ===========
"""

from __future__ import annotations

from dataclasses import dataclass

from twin.errors import TwinInputError
from twin.hardware.gpus import GpuSpec
from twin.hardware.models import ModelSpec

LINK_KINDS = ("nvlink", "nvswitch", "infiniband", "roce", "pcie")
DEFAULT_LATENCY_S = {"nvlink": 10e-6, "nvswitch": 10e-6, "infiniband": 20e-6, "roce": 30e-6, "pcie": 10e-6}
PCIE_GEN4_X16_BYTES_PER_S = 32e9


def kv_transfer_bytes_per_token(model: ModelSpec, kv_dtype: str = "bf16") -> int:
    """Bytes of KV one token moves between engines: the model's whole KV layout per token in ``kv_dtype``."""
    return model.kv_bytes_per_token(kv_dtype, 1)


@dataclass(frozen=True)
class KvLink:
    """A resolved link between a prefill engine and a decode engine."""

    kind: str
    bandwidth_bytes_per_s: float   # one direction, per GPU pair
    latency_s: float
    lanes: int                     # GPU pairs moving shares at once: min(TP_prefill, TP_decode)
    layerwise: bool
    num_layers: int

    def wire_s(self, num_bytes: float) -> float:
        """Seconds the bytes occupy the link (no latency)."""
        return num_bytes / (self.bandwidth_bytes_per_s * self.lanes)

    def exposed_s(self, num_bytes: float, last_step_s: float) -> float:
        """Seconds from the end of the prefill's last step until the KV is at the decode engine, on an idle
        link: latency plus the wire time, less what layer-wise sending hid behind that step's compute."""
        wire = self.wire_s(num_bytes)
        if self.layerwise and self.num_layers > 1:
            hidden = last_step_s * (self.num_layers - 1) / self.num_layers
            wire = max(wire / self.num_layers, wire - hidden)
        return self.latency_s + wire

    def as_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "bandwidth_gb_s": self.bandwidth_bytes_per_s / 1e9,
                "latency_us": self.latency_s * 1e6, "lanes": self.lanes, "layerwise": self.layerwise}


def resolve_link(kind: str, prefill_gpu: GpuSpec, decode_gpu: GpuSpec, model: ModelSpec, tp_prefill: int,
                 tp_decode: int, num_gpus: int, bandwidth_gb_s: float | None = None,
                 latency_us: float | None = None, layerwise: bool = False) -> KvLink:
    """The link of kind ``kind`` between the pools; ``num_gpus`` is every GPU of both pools (an NVLink link
    must keep them in one NVLink domain of one GPU type)."""
    if kind not in LINK_KINDS:
        raise TwinInputError(f"disaggregation.link.kind: {kind!r}: must be one of {', '.join(LINK_KINDS)}")
    if kind in ("nvlink", "nvswitch"):
        if prefill_gpu.name != decode_gpu.name:
            raise TwinInputError(f"disaggregation.link.kind: {kind} joins GPUs of one type; the pools use "
                                 f"{prefill_gpu.name} and {decode_gpu.name} (use infiniband, roce or pcie)")
        if not prefill_gpu.has_nvlink_class_interconnect:
            raise TwinInputError(f"disaggregation.link.kind: {kind}: {prefill_gpu.name} has no NVLink "
                                 f"({prefill_gpu.interconnect or 'none'}); use pcie, infiniband or roce")
        if num_gpus > prefill_gpu.nvlink_domain_gpus:
            raise TwinInputError(f"disaggregation.link.kind: {kind}: the pools use {num_gpus} GPUs, more than one "
                                 f"NVLink domain of {prefill_gpu.nvlink_domain_gpus} {prefill_gpu.name}; use "
                                 f"infiniband or roce")
        default_bw = min(prefill_gpu.interconnect_bytes_per_s, decode_gpu.interconnect_bytes_per_s) / 2
    elif kind in ("infiniband", "roce"):
        default_bw = min(prefill_gpu.scale_out_bytes_per_s, decode_gpu.scale_out_bytes_per_s)
    else:
        default_bw = PCIE_GEN4_X16_BYTES_PER_S
    bw = bandwidth_gb_s * 1e9 if bandwidth_gb_s is not None else default_bw
    lat = latency_us * 1e-6 if latency_us is not None else DEFAULT_LATENCY_S[kind]
    return KvLink(kind, bw, lat, max(1, min(tp_prefill, tp_decode)), layerwise, model.num_hidden_layers)
