"""The MLA layer prior net of the all-reduces' own time (issue 33, round 18; twin.fitting.mla_kernel_prior): opt-in,
exact arithmetic, and the reading scripts' pure helpers and argument checks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from twin.cost.kernel_path import nccl_ll_allreduce_latency_s
from twin.fitting import mla_kernel_prior as mkp
from twin.fitting.held_priors import mla_layer_prior_s

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def test_own_allreduce_time_is_nccl_smallest_exchange():
    assert mkp.ALLREDUCE_OWN_S == pytest.approx(nccl_ll_allreduce_latency_s(2), rel=1e-12)
    assert mkp.ALLREDUCE_OWN_S == pytest.approx(7.8e-6, rel=1e-9)


def test_default_is_round_9_even_spread():
    """Off by default: every fold keeps round 9 / 15's prior."""
    assert mkp.short_kernel_s(24e-6) == pytest.approx(2 * 24e-6 / 12, rel=1e-12)
    assert mla_layer_prior_s(24e-6, fused=True) == pytest.approx(4 * 2 * 24e-6 / 12, rel=1e-12)


def test_net_of_allreduces_arithmetic():
    # (L - a) / 5 per short kernel; 4 net MLA kernels where the servers fuse, 6 where they do not
    assert mkp.short_kernel_s(25e-6, True) == pytest.approx((25e-6 - 7.8e-6) / 5, rel=1e-9)
    assert mkp.short_kernel_s(5e-6, True) == 0.0                      # a latency below the exchange: no time
    assert mkp.short_kernel_s(25e-6, False) == pytest.approx(25e-6 / 6, rel=1e-12)


def test_argument_reaches_held_priors():
    net = {"net_of_allreduces": True}
    assert mla_layer_prior_s(25.066e-6, fused=True, **net) == pytest.approx(4 * (25.066e-6 - 7.8e-6) / 5, rel=1e-9)
    assert mla_layer_prior_s(25.066e-6, **net) == pytest.approx(6 * (25.066e-6 - 7.8e-6) / 5, rel=1e-9)
    assert mkp.extra_kernels_s(4, 25.066e-6, True) == 4 * mkp.short_kernel_s(25.066e-6, True)


def test_reading_helpers():
    import kimi_family_mla as kfm
    from family_thr_terms import moved_terms
    errs = [{"request_throughput": 0.02, "mean_tpot_ms": -0.01}, {"request_throughput": -0.04}, {}]
    s = kfm.medians(errs)
    assert s["request_throughput"] == pytest.approx((0.03, -0.01, 2))
    assert s["mean_tpot_ms"] == pytest.approx((0.01, -0.01, 1))
    assert s["mean_ttft_ms"] is None
    even, net = kfm.prior_values({"allreduce_latency_s": 24e-6})
    assert (even, net) == (pytest.approx(16e-6), pytest.approx(4 * (24e-6 - 7.8e-6) / 5))
    assert moved_terms({"a": 1.0, "b": 1.005, "c": 2.0}, {"a": 1.5, "b": 1.0}) == [("a", 1.0, 1.5)]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize("extra, message", [
    (("--folds", "family,bad"), "--folds"),
    (("--folds", "GPU,GPU"), "--folds"),
    (("--blackwell-memory-efficiency", "0.95"), "family folds fit it"),
    (("--folds", "GPU", "--blackwell-memory-efficiency", "nan"), "must lie in"),
    (("--workers", "0"), "--workers"),
    (("--in-sample",), "--in-sample takes no report"),
])
def test_kimi_family_mla_rejects_bad_options(tmp_path, extra, message):
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"folds": {}}))
    out = _run(str(ROOT / "benchmarks" / "kimi_family_mla.py"), str(report), *extra)
    assert out.returncode != 0 and message in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("script, extra", [("kimi_family_mla.py", ()), ("family_thr_terms.py", ("--group", "kimi"))])
def test_scripts_reject_a_report_without_folds(tmp_path, script, extra):
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"folds": {}}))
    out = _run(str(ROOT / "benchmarks" / script), str(report), *extra)
    assert out.returncode != 0 and "no folds" in out.stderr and "Traceback" not in out.stderr


def test_off_is_round_9_bit_for_bit():
    for latency in (21.6e-6, 24.249384219086883e-06, 25.066071774088233e-06):
        for kernels in (4, 6):
            assert mkp.extra_kernels_s(kernels, latency) == kernels * 2 * latency / 12


def test_kimi_family_mla_needs_a_report_or_in_sample():
    out = _run(str(ROOT / "benchmarks" / "kimi_family_mla.py"))
    assert out.returncode != 0 and "a report is required" in out.stderr
    out = _run(str(ROOT / "benchmarks" / "kimi_family_mla.py"), "--in-sample", "--folds", "GPU")
    assert out.returncode != 0 and "--in-sample takes no" in out.stderr


def test_kimi_family_mla_refuses_a_fold_that_names_none_of_the_cases(tmp_path):
    from twin.fitting.ground_truth import ground_truth_dir
    if not (ground_truth_dir() / "h100-vllm-inference-perf").is_dir():
        pytest.skip("the ground-truth folder is not beside the checkout")
    fold = {"held_out": "B200", "params": {"allreduce_latency_s": 24e-6, "memory_efficiency": 0.95},
            "errors": {"no-such-case": {"mean_tpot_ms": 0.01}},
            "measured": {"no-such-case": {"mean_tpot_ms": 10.0}}, "predicted": {"no-such-case": {"mean_tpot_ms": 10.1}}}
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"args": {"silicon_every": 16}, "folds": {"GPU": {"folds": [fold]}}}))
    out = _run(str(ROOT / "benchmarks" / "kimi_family_mla.py"), str(report), "--folds", "GPU",
               "--blackwell-memory-efficiency", "0.95")
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "the GPU fold holding B200 out names none of the cases at silicon every 16" in out.stderr
