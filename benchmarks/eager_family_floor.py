"""The Blackwell eager MoE floor per family, held out (issue 33, round 14; docs/fidelity.md "Round 14: the MoE eager
floor per family"): a trial, not embedded.

Embedded (round 14): MiniMax-M2.5's NVFP4 layer at its launch count on a GQA-only key (``twin.cost.
eager_path_floors``) and the nightly rows' own script (``twin.fitting.minimax_scripts``). This script tries the
rest of round 13's trial on top, each fold run by ``benchmarks/fidelity_real.py`` in this process with:

* ``--fp8-count``: MiniMax's March Triton FP8 layer at its launch count too (27 ops: 0.5775 ms per MoE layer,
  ``eager_moe_layer_host_s@blackwell+experts_fp8``, evidence the B200 Llama rows' per-layer value), so no MiniMax
  row reads the generation's floor, whose evidence becomes the Kimi-K2.5 and Llama B200 rows;
* ``--kimi-count``: the generation's floor not fitted per fold (dropped from the fold terms), so a fold holding
  Kimi out resets it to its stated prior, and each of Kimi's expert paths to its launch count
  (``twin.fitting.launch_prior.PATH_LAYER_OPS``: Marlin INT4 26 ops, FlashInfer NVFP4 24, at the fold's per-op
  time): a Kimi prior that reads no MiniMax row.

    python benchmarks/eager_family_floor.py --fp8-count --kimi-count -- --ground-truth ../shared/ground-truth \\
        --workers 1 --folds family --groups kimi,minimax --json X.json          # ~15-25 min on 2 busy cores

Everything after ``--`` goes to ``fidelity_real.py``; with ``--kimi-count`` the fold terms are the default report's
less ``eager_moe_layer_host_s@blackwell`` (``--terms``), at the default report's settings (``--silicon-every 16
--fit-sim-s 30``).
"""

from __future__ import annotations

import argparse
import sys
from contextlib import contextmanager, nullcontext
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from twin.cost import generation_experts  # noqa: E402
from twin.cost.default_terms import GENERATION_TERMS  # noqa: E402
from benchmarks.fidelity_passthrough import run_fidelity_real, split_at_dashes  # noqa: E402
from twin.errors import run_script  # noqa: E402
from twin.fitting import provenance as pv  # noqa: E402
from twin.fitting.carried_patches import Patch, carried  # noqa: E402
from twin.fitting.launch_prior import PATH_LAYER_OPS, moe_extra_s  # noqa: E402

FP8_KEY = "eager_moe_layer_host_s@blackwell+experts_fp8"
GENERIC_KEY = "eager_moe_layer_host_s@blackwell"
LLAMA_COUNT = "a launch count times the B200 Llama rows' per-layer value"


def fp8_count_s() -> float:
    """MiniMax's Triton FP8 layer's counted floor per MoE layer at Blackwell's embedded per-layer time (s)."""
    return moe_extra_s(GENERATION_TERMS["blackwell"]["eager_layer_host_s"], PATH_LAYER_OPS[("blackwell", "fp8")][0])


@contextmanager
def fp8_counted():
    """MiniMax FP8's count in ``GENERATION_EXPERT_TERMS``, its evidence the B200 Llama rows, and the generation's
    floor's evidence the Kimi and Llama B200 rows (no MiniMax row reads it any more): in place, so every reader
    inside the block sees them (the table carried to every simulation worker; the evidence is read by the fold
    plans, in this process only); restored when it ends (also on error)."""
    terms = generation_experts.GENERATION_EXPERT_TERMS
    fp8 = {**terms.get(("blackwell", "fp8"), {}), "eager_moe_layer_host_s": fp8_count_s()}
    evidence = {FP8_KEY: (LLAMA_COUNT, pv.silicon_rows_of("b200_sxm", "llama")),
                GENERIC_KEY: ("the B200 Kimi-K2.5 rows, given the B200 Llama rows' per-layer value",
                              pv.silicon_rows_of("b200_sxm", "kimi", "llama"))}
    table = Patch(generation_experts.__name__, "GENERATION_EXPERT_TERMS", {("blackwell", "fp8"): fp8}, "dict")
    with carried(table), \
            mock.patch.dict(pv.DECLARED_EVIDENCE, evidence):
        yield


def fidelity_argv(rest: list[str], kimi_count: bool, fold_terms: tuple[str, ...]) -> list[str]:
    """``fidelity_real.py``'s arguments: ``rest``, and with ``kimi_count`` the default report's fold terms
    (``fold_terms``: ``fidelity_real.FOLD_TERMS``) less the generation's floor, at the default report's settings
    (unless ``rest`` gives them). ``--terms``, not ``--drop-terms``: that one drops from ``JOINT_NAMES``, another
    term set."""
    out = list(rest)
    if kimi_count:
        out += ["--terms", ",".join(t for t in fold_terms if t != GENERIC_KEY)]
        from fidelity_real import REFIT_FIT_SIM_S, REFIT_SILICON_EVERY
        for flag, value in (("--silicon-every", str(REFIT_SILICON_EVERY)), ("--fit-sim-s", f"{REFIT_FIT_SIM_S:g}")):
            if flag not in out:
                out += [flag, value]
    return out


def main() -> None:
    own, rest = split_at_dashes(sys.argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fp8-count", action="store_true")
    ap.add_argument("--kimi-count", action="store_true")
    args = ap.parse_args(own)
    with fp8_counted() if args.fp8_count else nullcontext():
        from benchmarks.fidelity_real import FOLD_TERMS
        run_fidelity_real(fidelity_argv(rest, args.kimi_count, FOLD_TERMS))


if __name__ == "__main__":
    run_script(main)
