"""Fit scopes by vLLM release (issue 33, round 16; docs/fidelity.md "Round 16: the request path by vLLM release"):
``@vllm_<major>.<minor>`` covers the replayed runs whose server ran that release line (``vllm_0.10``: 0.10.0 ..
0.10.2), as the measured row names it (``MeasuredRun.release``, copied onto the replayed ``Deployment``); a run
that does not name its release (a blank 2025 gpt-oss row, a user's scenario) is never covered.

What it is for: ``request_path_s@client_vllm_bench+vllm_0.10`` gives the bench-client rows measured on vLLM
0.10.x their own request path apart from the later releases' (a per-request time of the release's front end and
engine hand-off: ``twin.workload.clients``). Prior: the bench path's own stated prior (4.8 ms, the inference-perf
path: no release-specific time). Identification: in the ground truth here the 0.10.x rows are the Llama-3.1-70B
rows and the Llama rows of the bench client are all 0.10.x, so the release is confounded with that family: a fold
that holds the Llama family out has no run in the scope and leaves the term out (its rows fall back to the fold's
bench path, ``twin.fitting.joint``); only folds that keep Llama's rows read it. Within the release the two
Llama checkpoints differ (FP8 rows miss ~+21 ms at the embedded terms on B200, NVFP4 ones ~0), so a release-flat
time over-charges the NVFP4 rows. Opt-in (``fidelity_real.py --terms <FOLD_TERMS>,<this term>``): held out it did
not free the bench path (the gpt-oss fold's 15.2 -> 14.1 ms) and cost the B200 fold; not embedded."""

from __future__ import annotations

from typing import Any

from twin.core.vllm_versions import NIGHTLY, parse_vllm_version

PREFIX = "vllm_"
SCOPES = (PREFIX + "0.10",)


def release_line(release: str | None) -> str | None:
    """``"0.10"`` for ``"0.10.2"`` / ``"v0.10.1-cu128"`` (``twin.core.vllm_versions.parse_vllm_version``); None for a
    blank, nightly, unparsable or unmodelled release."""
    if not release:
        return None
    try:
        line = parse_vllm_version(release)
    except ValueError:
        return None
    return None if line == NIGHTLY else f"{line[0]}.{line[1]}"


def in_release_scope(scope: str, deployment: Any) -> bool:
    """Whether ``deployment`` ran the release line ``scope`` (``vllm_0.10``) names."""
    line = release_line(getattr(deployment, "release", None))
    return line is not None and PREFIX + line == scope
