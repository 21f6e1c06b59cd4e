"""Every fold's held-out cost models, printed to the bit: a check that a change moves no fold (issue 33, round 17;
docs/fidelity.md "Round 17: legibility with no behaviour change"). No fit, no simulation:

    python benchmarks/fold_cost_models.py [--ground-truth DIR] [--silicon-every 6] > costs.txt

runs ``twin.fitting.joint.run_fold`` with nothing fitted (``names=()``: the plan's resets, its stated priors before
and after the fit, the held-out priors), with the simulation of each held-out case replaced by its cost model at the
fold's parameters (``twin.fitting.replay.cost_model_for``) and that model's step times at a few fixed shapes
(``SHAPES``, and a run of decode steps), each printed with ``repr``. Run it on two commits and diff the outputs:
identical text means every fold costs every held-out case alike.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmarks.cli_checks import positive_int  # noqa: E402
from twin.errors import run_script  # noqa: E402
from unseen_generation import GROUPS  # noqa: E402

# step_time_from_sums arguments (sequences, tokens, context, new x context, new squared, drafts): decodes at two
# batches, one prompt, a mixed step of a chunk beside three decodes
SHAPES = ((8, 8, 8 * 4000, 0, 8, 0), (64, 64, 64 * 1500, 0, 64, 0), (1, 2048, 0, 0, 2048 ** 2, 0),
          (4, 1027, 3000 + 1000, 1024 * 1000, 1024 ** 2 + 3, 0))
DECODE_RUN = (16, 16 * 2000, 3)      # decode_step_times_s: sequences, context, steps


def cost_lines(model) -> list[str]:
    """``repr`` of ``model``'s step times at ``SHAPES``, then of its ``decode_step_times_s`` run (where it has
    one), then of its request path."""
    times = [model.step_time_from_sums(*shape) for shape in SHAPES]
    decode_run = getattr(model, "decode_step_times_s", None)
    if decode_run is not None:
        times += decode_run(*DECODE_RUN)
    return [repr(t) for t in times] + [repr(getattr(model, "request_path_s", None))]


def print_fold_costs(ground_truth: Path | None, silicon_every: int) -> None:
    from twin.fitting import joint
    from twin.fitting.replay import cost_model_for, deployment_for

    def costed(cases, params, **_):
        return [SimpleNamespace(metrics={"lines": cost_lines(cost_model_for(deployment_for(c.run, c.target),
                                                                            c.target, params))}) for c in cases]

    cases = joint.all_cases(ground_truth, silicon_every=silicon_every)
    evidence = joint.with_deployments(joint.all_cases(ground_truth))
    with mock.patch.object(joint, "simulate_cases", costed):       # for these folds only (restored after)
        for kind, groups in GROUPS:
            for group in groups:
                fold = joint.run_fold(kind, group, cases, joint.FOLDS[kind], None, names=(), evidence=evidence)
                for case, costs in zip(fold.cases, fold.predicted):
                    print(kind, group, case.run.name, " ".join(costs["lines"]))
                print(kind, group, "params", sorted((k, repr(v)) for k, v in fold.params.items()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ground-truth", type=Path, default=None,
                    help="the measurements' folder (default: the project's, or TWIN_GROUND_TRUTH)")
    ap.add_argument("--silicon-every", type=positive_int, default=6, help="every N-th runnable silicon row (default 6)")
    a = ap.parse_args(argv)
    if a.silicon_every < 1:
        ap.error(f"--silicon-every {a.silicon_every}: must be >= 1")
    print_fold_costs(a.ground_truth, a.silicon_every)
    return 0


if __name__ == "__main__":
    run_script(main)
