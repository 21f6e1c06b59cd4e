"""The eager step's structure held out (issue 33, round 18; docs/fidelity.md "Round 18: the eager step's
structure"): a trial, not embedded.

``twin.cost.eager_steps`` prices a step no CUDA graph covers as max(GPU step, eager host time). A cost model takes
another structure of ``twin.cost.eager_steps.EAGER_STRUCTURES`` as its ``eager_structure`` keyword; the folds build
theirs from fitted numbers only, so ``--structure`` swaps the embedded one (``EMBEDDED_STRUCTURE``) for this run
(restored after it) and runs ``fidelity_real.py`` with the arguments after ``--``:

    python benchmarks/eager_structure_trial.py --structure moe_additive -- --ground-truth ../shared/ground-truth \\
        --workers 1 --folds family --groups kimi --json X.json

The swap is carried to every simulation worker (``twin.fitting.carried_patches``), whatever their start method.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from twin.cost import eager_steps  # noqa: E402
from benchmarks.fidelity_passthrough import run_fidelity_real, split_at_dashes  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.fitting.carried_patches import Patch, carried  # noqa: E402


def main() -> None:
    own, rest = split_at_dashes(sys.argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--structure", required=True, choices=eager_steps.EAGER_STRUCTURES,
                    help="how an eager step's host time meets its GPU time (twin.cost.eager_steps)")
    args = ap.parse_args(own)
    if not rest:
        raise TwinInputError("give fidelity_real.py's arguments after -- (e.g. --folds family --groups kimi)")
    with carried(Patch(eager_steps.__name__, "EMBEDDED_STRUCTURE", args.structure)):
        run_fidelity_real(rest)


if __name__ == "__main__":
    run_script(main)
