"""GPU catalog against the vendor datasheets it cites: every catalogued figure equals the printed one (dense =
printed / 2 where the datasheet quotes 2:4 sparsity), and each GPU entry carries its source."""

from __future__ import annotations

import pytest

from twin.cost.roofline import ALLREDUCE_LATENCY_FAST_S, ALLREDUCE_LATENCY_PCIE_S, RooflineCostModel
from twin.hardware.catalog import list_gpus, resolve_gpu

GPUS = [g for g in list_gpus() if g.kind == "gpu"]


def test_every_gpu_cites_a_datasheet():
    for g in GPUS:
        assert g.datasheet is not None and g.datasheet.source.strip(), g.name
        ds = g.datasheet
        assert ds.tensor_tflops and ds.fp32_tflops and ds.memory_gb and ds.bandwidth_gb_s and ds.interconnect_gb_s


@pytest.mark.parametrize("gpu", GPUS, ids=lambda g: g.name)
def test_catalogued_figures_equal_the_cited_datasheet(gpu):
    ds = gpu.datasheet
    per = 2.0 if ds.sparse else 1.0
    assert set(ds.tensor_tflops) == set(gpu.peak_flops) - {"fp32"}
    for dtype, printed in ds.tensor_tflops.items():
        assert gpu.peak_flops[dtype] == pytest.approx(printed * 1e12 / per, rel=1e-9), dtype
    assert gpu.peak_flops["fp32"] == pytest.approx(ds.fp32_tflops * 1e12, rel=1e-9)
    assert gpu.memory_bandwidth_bytes_per_s == pytest.approx(ds.bandwidth_gb_s * 1e9, rel=1e-9)
    assert gpu.interconnect_bytes_per_s == pytest.approx(ds.interconnect_gb_s * 1e9, rel=1e-9)
    # capacity is what the driver reports: a little under the marketing figure read as GiB
    assert 0.93 * ds.memory_gb * 2**30 <= gpu.memory_bytes <= ds.memory_gb * 2**30


@pytest.mark.parametrize("name, bf16, fp8, bandwidth, memory_gb", [
    ("RTX-4090", 165.2e12, 330.3e12, 1.008e12, 24),       # Ada whitepaper, FP32 accumulate (not 82.6 non-tensor)
    ("H100-SXM", 989.5e12, 1979e12, 3.35e12, 80),
    ("H100-PCIe", 756.5e12, 1513e12, 2.0e12, 80),
    ("A100-PCIe-80GB", 312e12, 312e12, 1.935e12, 80),     # no fp8: weight-only at the bf16 rate
    ("L40S", 362.05e12, 733e12, 0.864e12, 48),
    ("H20", 148e12, 296e12, 4.0e12, 96),
    ("B200", 2250e12, 4500e12, 8.0e12, 180),
    ("MI300X", 1307.4e12, 2614.9e12, 5.3e12, 192),
    ("MI325X", 1307.4e12, 2614.9e12, 6.0e12, 256),
    ("RTX-PRO-6000", 503.8e12, 1007.6e12, 1.792e12, 96),
])
def test_pinned_figures(name, bf16, fp8, bandwidth, memory_gb):
    g = resolve_gpu(name)
    assert g.flops("bf16") == bf16 and g.flops("fp8") == fp8
    assert g.memory_bandwidth_bytes_per_s == bandwidth and g.datasheet.memory_gb == memory_gb


def test_int8_rate_and_fallback():
    assert resolve_gpu("H100-SXM").flops("int8") == 1979e12
    assert resolve_gpu("cpu").flops("int8") == resolve_gpu("cpu").flops("bf16")    # no int8 path: bf16


@pytest.mark.parametrize("name, nvlink", [("RTX-PRO-6000", False), ("A100-PCIe-80GB", False), ("L40S", False),
                                          ("RTX-4090", False), ("H100-SXM", True), ("B200", True),
                                          ("MI325X", True)])
def test_tensor_parallel_over_pcie(name, nvlink):
    g = resolve_gpu(name)
    assert g.has_nvlink_class_interconnect is nvlink
    cm = RooflineCostModel("llama-3.1-8b", g, tensor_parallel_size=2)
    assert cm.allreduce_latency_s == (ALLREDUCE_LATENCY_FAST_S if nvlink else ALLREDUCE_LATENCY_PCIE_S)
    # the ring all-reduce runs over one direction of the link the datasheet quotes
    link = g.interconnect_bytes_per_s / 2 * cm.interconnect_efficiency
    assert cm._k_allreduce == pytest.approx(2 * 32 * (2 * 1 / 2 * 4096 * 2) / link, rel=1e-12)
