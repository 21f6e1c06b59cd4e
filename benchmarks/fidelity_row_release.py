"""``fidelity_real.py`` with the KV pool's sampler reserve by release, every silicon row run as the vLLM release its
server ran (not its representative).

``twin.fitting.silicon_scripts.row_server`` names each row's release by ``modelled_release`` (the twin's representative
releases 0.11 / 0.14 / 0.19 / 0.28); every scheduling knob is the same for the row's own release (checked on all
860 runnable cases: same scheduler configuration, all-reduce fusion, graph sizes), but the KV pool's profiled
sampler reserve is not (``twin.hardware.pool_release``: 0.10.2 and 0.11.0 sample with FlashInfer, 0.11.1 - 0.16
sort, 0.17 - 0.20 run the Triton kernels). This runs the report with ``modelled_release`` replaced by
``benchmarks.pool_release_rows.row_release`` and every pool sized by its scenario's release
(``pool_release_rows.release_pools``), in this process (use ``--workers 1``): the rule of docs/fidelity.md
("Round 14: the KV pool by vLLM release"), measured there and not embedded:

    python benchmarks/fidelity_row_release.py --ground-truth ... --workers 1 [--cuda-total] [--moe-workspace]
        [fidelity_real.py's options]

``--cuda-total`` also sizes every budget from the device total CUDA reports, ``--moe-workspace`` bounds the
profile's forward phase by the fused-MoE workspaces (``twin.hardware.pool_memory``; docs/fidelity.md, "Round 15:
memory outside the KV cache").
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import fidelity_real  # noqa: E402
from benchmarks.fidelity_passthrough import workers_given  # noqa: E402
from benchmarks.pool_release_rows import release_pools, row_release  # noqa: E402
from twin.errors import run_script  # noqa: E402
from twin.fitting import silicon_scripts  # noqa: E402


def own_release(version: str | None, measured: str | None = None) -> str:
    """The release a row's server ran, from the two fields ``modelled_release`` is given."""
    return row_release(SimpleNamespace(vllm_version=version, measured=measured))


def main() -> None:
    if any(w != "1" for w in workers_given(sys.argv[1:])):      # its replacements are functions: not carried
        raise SystemExit("--workers: must be 1 (the replacement applies in this process only)")
    flags = {name: f"--{name.replace('_', '-')}" in sys.argv for name in ("cuda_total", "moe_workspace")}
    argv = [a for a in sys.argv if a not in ("--cuda-total", "--moe-workspace")]      # fidelity_real's (this call)
    with mock.patch.object(sys, "argv", argv), mock.patch.object(silicon_scripts, "modelled_release", own_release), \
            release_pools(**flags):
        fidelity_real.main()


if __name__ == "__main__":
    run_script(main)
