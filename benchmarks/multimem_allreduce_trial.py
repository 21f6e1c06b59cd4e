"""The multimem all-reduce route held out (issue 33, round 22; docs/fidelity.md "Round 22: gpt-oss-120b's H100 TP 8
prompts held out"): a trial, not embedded.

``twin.cost.allreduce_routes`` charges a TP 6 / 8 all-reduce on an NVSwitch Hopper or Blackwell board the bytes of
vLLM's symmetric-memory multimem route, (1 + 1/tp) x the message per GPU, instead of the ring's 2 (tp - 1) / tp,
when its ``ENABLED`` is on. This script turns it on for one ``fidelity_real.py`` run (restored after it), with the
arguments after ``--``; every fold fits and predicts with it, the embedded defaults stay the ring's (the report's
``args`` record ``switches: {"multimem_allreduce": true}``):

    python benchmarks/multimem_allreduce_trial.py -- --ground-truth ../shared/ground-truth \\
        --workers 1 --folds GPU --groups H100-SXM --json X.json

Any ``--workers`` (round 23): the switch travels with every simulation job to the worker processes, whatever their
start method (``twin.fitting.switches``; before, a worker started by spawn or forkserver simulated the ring).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmarks.fidelity_passthrough import run_fidelity_real, split_at_dashes  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.fitting.switches import switched  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    own, rest = split_at_dashes(sys.argv[1:] if argv is None else argv)
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(own)    # --help; nothing else
    if not rest:
        raise TwinInputError("give fidelity_real.py's arguments after -- (e.g. --folds GPU --groups H100-SXM)")
    with switched(multimem_allreduce=True):
        run_fidelity_real(rest)


if __name__ == "__main__":
    run_script(main)
