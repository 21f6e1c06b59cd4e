"""benchmarks/pool_release_rows.py: the release each silicon row's server ran (issue 33, round 14)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.benchmark_module import load_benchmark
from twin.hardware.pool_release import profile_sampler_path

rows = load_benchmark("pool_release_rows")


@pytest.mark.parametrize("version, measured, release, path", [
    ("0.10.2", "2025-10-29", "0.10.2", "flashinfer"),          # the Llama rows
    (None, "2025-11-02", "0.10.2", "flashinfer"),              # blank 2025 gpt-oss rows: their script's image
    (None, "2025-11-04", "0.11.0", "flashinfer"),
    (None, "2025-12-05", "0.11.2", "sort"),
    ("0.12.0", "2026-01-10", "0.12.0", "sort"),                # Qwen3
    ("0.15.1", "", "0.15.1", "sort"),
    ("nightly-5b8c30d62b754b57", "2026-04-02", "0.18.0", "triton"),
    ("0.19.0", "2026-04-03", "0.19.0", "triton"),
    (None, "2026-02-01", "0.28", "flashinfer"),                # as modelled_release: the newest
    (None, None, "0.28", "flashinfer"),
])
def test_row_release(version, measured, release, path):
    row = SimpleNamespace(vllm_version=version, measured=measured)
    assert rows.row_release(row) == release
    assert profile_sampler_path(release, 512) == path
