"""The eager step's structure held out (issue 33, round 18; docs/fidelity.md "Round 18: the eager step's
structure"): a trial, not embedded.

``twin.cost.eager_steps`` prices a step no CUDA graph covers as max(GPU step, eager host time). ``--structure``
switches every cost model of the run (the folds' fits and their predictions) to another structure of
``twin.cost.eager_steps.EAGER_STRUCTURES`` and runs ``fidelity_real.py`` with the arguments after ``--``:

    python benchmarks/eager_structure_trial.py --structure moe_additive -- --ground-truth ../shared/ground-truth \\
        --workers 1 --folds family --groups kimi --json X.json

``--workers 1`` keeps the run in one process (the switch is a module setting; worker processes forked after it
inherit it as well).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from twin.cost.eager_steps import EAGER_STRUCTURES, set_structure  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402


def split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """(this script's arguments, fidelity_real's: those after ``--``)."""
    if "--" not in argv:
        return argv, []
    i = argv.index("--")
    return argv[:i], argv[i + 1:]


def main() -> None:
    own, rest = split_argv(sys.argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--structure", required=True, choices=EAGER_STRUCTURES,
                    help="how an eager step's host time meets its GPU time (twin.cost.eager_steps)")
    args = ap.parse_args(own)
    if not rest:
        raise TwinInputError("give fidelity_real.py's arguments after -- (e.g. --folds family --groups kimi)")
    set_structure(args.structure)
    import fidelity_real
    sys.argv = ["fidelity_real.py", *rest]
    fidelity_real.main()


if __name__ == "__main__":
    run_script(main)
