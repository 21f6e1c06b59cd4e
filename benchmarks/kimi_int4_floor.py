"""Kimi-K2.5 INT4's Marlin eager MoE floor at its launch count, and the Marlin terms refitted with it (issue 33,
round 16; docs/fidelity.md "Round 16: Kimi-K2.5 INT4's Marlin eager floor"): a trial, not embedded.

* ``--count``: the Marlin W4A16 path gets its own eager MoE floor (``twin.cost.eager_path_floors``,
  ``eager_moe_layer_host_s@blackwell+experts_int4``): 26 host-dispatched ops per decoder layer, 10 beyond the dense
  layer, at the generation's per-op time (0.84 ms / 16): 0.525 ms per MoE layer instead of the generation's 1.15 ms.
  Its evidence is the B200 Llama rows (the per-op time; no Kimi row is read), so a fold holding them out prices it
  at the same count times its own per-layer prior (``twin.fitting.launch_prior``), and every other fold keeps it.
* ``--refit``: with ``--count``, the Marlin stream rate refitted under that floor (``REFIT``): ``benchmarks/
  kimi_int4_fit.py --decode-on 1024/1024,1024/8192`` reads fixed time 36.2 +/- 4.6 us per MoE layer (embedded 38.2:
  within its error, kept), stream 0.497 +/- 0.018 of the dense rate (embedded 0.618, read off the 1k/1k rows under
  the generation's floor; the 1k/8k rows alone read 0.484 +/- 0.008, the 1k/1k alone 0.511 +/- 0.029) and prompt
  FLOP rate 0.203 (embedded 0.171; set exactly by one TTFT difference whose 1k side is the eager step the count
  prices, so not identified apart from the floor: kept).

Every fold runs through ``benchmarks/fidelity_real.py`` in this process (everything after ``--`` goes to it):

    python benchmarks/kimi_int4_floor.py --count --refit -- --ground-truth ../shared/ground-truth --workers 1 \\
        --folds family --groups kimi,minimax --json X.json                 # ~15 min on 2 busy cores
"""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack, contextmanager
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmarks.fidelity_passthrough import run_fidelity_real, split_at_dashes  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402

KEY = "eager_moe_layer_host_s@blackwell+experts_int4"
# benchmarks/kimi_int4_fit.py --decode-on 1024/1024,1024/8192 under the counted floor (round 16): the stream
REFIT: dict[str, float] = {"moe_expert_efficiency": 0.497}


@contextmanager
def counted():
    """The Marlin INT4 count in the embedded tables (in place, carried to every simulation worker: every reader
    inside the block sees it) with its evidence (read by the fold plans, in this process only), restored when the
    block ends (also on error)."""
    from twin.cost import eager_path_floors as epf
    from twin.fitting import launch_prior, provenance
    from twin.fitting.carried_patches import Patch, carried
    with carried(Patch(epf.__name__, "EXPERT_PATH_LAYER_OPS", {("blackwell", "int4"): epf.MARLIN_INT4_LAYER_OPS},
                       "dict")), \
            mock.patch.dict(provenance.DECLARED_EVIDENCE, {KEY: launch_prior.COUNT_EVIDENCE}):
        yield


def refitted():
    """The Marlin stream rate as refitted under the counted floor (``REFIT``) in the embedded table, inside the
    block only (carried to every simulation worker)."""
    from twin.cost import marlin_moe
    from twin.fitting.carried_patches import Patch, carried
    return carried(Patch(marlin_moe.__name__, "MARLIN_W4A16_MOE_TERMS", REFIT, "dict"))


def main() -> None:
    own, rest = split_at_dashes(sys.argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", action="store_true", help="the Marlin INT4 path's own counted eager floor")
    ap.add_argument("--refit", action="store_true", help="with --count: the Marlin stream rate refitted under it")
    args = ap.parse_args(own)
    if args.refit and not args.count:
        raise TwinInputError("--refit: the values were fitted under the counted floor; give --count too")
    with ExitStack() as stack:
        if args.count:
            stack.enter_context(counted())
        if args.refit:
            stack.enter_context(refitted())
        run_fidelity_real(rest)


if __name__ == "__main__":
    run_script(main)
