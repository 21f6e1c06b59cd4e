"""The profile's dummy-sampler path and bytes by vLLM release (twin.hardware.pool_release)."""

from __future__ import annotations

import pytest

from twin.hardware.pool_release import (NO_SORT_BYTES_PER_LOGIT, SORT_BYTES_PER_LOGIT, profile_sampler_path,
                                        release_key, sampler_bytes_per_logit)


def test_release_key_reads_the_patch_level():
    assert release_key("0.11.0") == (0, 11, 0) and release_key("0.11.1") == (0, 11, 1)
    assert release_key("0.11") == (0, 11, 0)                     # a representative release: its .0
    assert release_key("v0.19.0-cu130") == (0, 19, 0) and release_key("0.11.1rc2") == (0, 11, 1)
    assert release_key("nightly-5b8c30d62b754b57") > release_key("0.28.0")
    for bad in ("latest", "", "0", "v1"):
        with pytest.raises(ValueError, match="release"):
            release_key(bad)


@pytest.mark.parametrize("version, path", [
    ("0.10.2", "flashinfer"), ("0.11.0", "flashinfer"),           # FlashInfer's sampler where installed
    ("0.11.1", "sort"), ("0.11.2", "sort"), ("0.12.0", "sort"),   # PR #26859: FlashInfer opt-in
    ("0.15.1", "sort"), ("0.16.0", "sort"),
    ("0.17.0", "triton"), ("0.18.0", "triton"), ("0.19.0", "triton"), ("0.20.2", "triton"),   # PR #33538
    ("0.21.0", "flashinfer"), ("0.28", "flashinfer"), ("nightly", "flashinfer"),               # PR #40376
    ("0.11", "flashinfer"), ("0.14", "sort"), ("0.19", "triton"),                              # representatives
])
def test_path_by_release(version, path):
    assert profile_sampler_path(version, 1024) == path


def test_triton_sorts_below_eight_rows():
    assert profile_sampler_path("0.18.0", 8) == "triton"
    assert profile_sampler_path("0.18.0", 7) == "sort"
    assert profile_sampler_path("0.12.0", 1) == "sort" and profile_sampler_path("0.21.0", 1) == "flashinfer"


def test_bytes_per_logit():
    # sort: fp32 logits 4 + sorted keys 4 + int64 indices 8 + int64 iota 8 + CUB's alternate keys 4 and values 8
    assert SORT_BYTES_PER_LOGIT == sampler_bytes_per_logit("sort") == 36
    # no sort: fp32 logits, softmax, exponential noise
    assert NO_SORT_BYTES_PER_LOGIT == sampler_bytes_per_logit("triton") == sampler_bytes_per_logit("flashinfer") == 12
    with pytest.raises(ValueError, match="sampler path"):
        sampler_bytes_per_logit("bubble")
