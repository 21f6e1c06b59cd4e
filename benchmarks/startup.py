"""Start-up of ``twin run`` on a one-request scenario: wall time of the whole process (a fresh interpreter each
time: imports, scenario checks, catalogs, one simulated request, the report), median of N runs.

    python benchmarks/startup.py [--runs 7]

Target (issue 16): under 1 s. The figure depends on the machine and its load; run it on an idle one.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 1.0
SCENARIO = """\
name: one-request
deployment: {gpu: H100-SXM, model: llama-3.1-8b}
workload:
  arrivals: {process: poisson, rate_per_s: 1}
  num_requests: 1
  classes: [{name: chat, share: 1.0, prompt: {suffix_tokens: 128}, output_tokens: 32}]
"""


def twin_command() -> list[str]:
    """The installed ``twin`` entry point, else the same ``main`` through this interpreter."""
    exe = shutil.which("twin")
    if exe:
        return [exe]
    return [sys.executable, "-c", "import sys; from twin.cli.main import main; sys.argv[0] = 'twin'; main()"]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7, help="fresh processes to time (default 7)")
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs: must be >= 1")
    with tempfile.TemporaryDirectory() as tmp:
        scenario = Path(tmp) / "one.yaml"
        scenario.write_text(SCENARIO)
        cmd = [*twin_command(), "run", str(scenario)]
        walls_s = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=tmp)
            walls_s.append(time.perf_counter() - t0)
    median_s = statistics.median(walls_s)
    verdict = "meets" if median_s < TARGET_S else "misses"
    print(f"twin run, one-request scenario: median {median_s:.3f} s wall over {args.runs} fresh processes "
          f"(min {min(walls_s):.3f} s, max {max(walls_s):.3f} s); target < {TARGET_S:.1f} s: {verdict}")


if __name__ == "__main__":
    main()
