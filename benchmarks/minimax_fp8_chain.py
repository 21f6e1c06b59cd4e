"""MiniMax-M2.5's block-FP8 layer chain and its 1k-in / 8k-out rows (issue 33, round 16; docs/fidelity.md "Round 16:
MiniMax-M2.5's block-FP8 layer chain and the C 8 1k/8k rows").

* ``heldout``: ``benchmarks/fidelity_real.py`` in this process with the q / k norm all-reduce priced as the exchange
  plus the counted block-FP8 chain on Blackwell's FP8 expert path (``twin.cost.block_fp8_chain.CHAIN_PATHS``;
  ``--extra-kernels N`` overrides the count of 3; 7 is round 15's pricing exactly). Everything after ``--`` goes to
  fidelity_real.
* ``rows``: the B200 block-FP8 1k-in / 8k-out rows (every release, layout and CONC) at the embedded defaults and at
  the parameters of a report's folds (``--report``: the MiniMax-held-out family fold and the B200-held-out GPU
  fold), measured against twin mean / p50 TTFT and TPOT, in-sample for the defaults; with ``--chain`` the chain on;
  with ``--fp8-count`` also the defaults with MiniMax FP8's eager MoE floor at its launch count (0.5775 ms per MoE
  layer, round 14's trial) instead of Blackwell's 1.15 ms: the v0.17.0 rows' 1k prompt steps run eagerly.

    python benchmarks/minimax_fp8_chain.py heldout -- --ground-truth ../shared/ground-truth --workers 1 \
        --folds family --groups minimax --json X.json                        # ~10-20 min on 2 busy cores
    python benchmarks/minimax_fp8_chain.py rows --report report.json         # ~4 min
"""

from __future__ import annotations

import argparse
import statistics
import sys
from contextlib import ExitStack, nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import nonneg_int  # noqa: E402
from benchmarks.fold_report import FoldReport, read_json  # noqa: E402
from benchmarks.fidelity_passthrough import run_fidelity_real, split_at_dashes  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402

CHAIN_PATH = ("blackwell", "fp8")
FOLDS = (("family", "minimax"), ("GPU", "B200"))


def chain_patch(extra_kernels: int | None):
    """The patch that puts Blackwell's FP8 expert path on the chained q / k pricing for every cost model made while
    it is on, carried to every simulation worker (``extra_kernels``: the count, None: the module's
    ``BLOCK_FP8_EXTRA_KERNELS``)."""
    from twin.cost import block_fp8_chain as bfc
    from twin.fitting.carried_patches import Patch, carried
    if extra_kernels is None:
        extra_kernels = bfc.BLOCK_FP8_EXTRA_KERNELS
    elif extra_kernels < 0:
        raise TwinInputError(f"--extra-kernels {extra_kernels}: must be >= 0")
    return carried(Patch(bfc.__name__, "CHAIN_PATHS", {CHAIN_PATH: extra_kernels}, "dict"))


def fold_params(report: dict, source: object = "the report") -> dict[str, dict]:
    """{label: the fold's fitted parameters} for the MiniMax family fold and the B200 GPU fold of a fidelity_real
    ``--json`` report (those it has; ``source`` names it); a report with neither is a one-line error."""
    rep = FoldReport(report, source)
    out = {}
    for kind, held in FOLDS:
        for fold in rep.folds(kind) if kind in rep.kinds() else []:
            if fold["held_out"] == held:
                out[f"{kind}:{held}"] = rep.params(fold)
    if not out:
        raise rep.error("no " + " and no ".join(f"{kind} fold holding {held!r} out" for kind, held in FOLDS))
    return out


def fp8_8k_out_cases() -> list:
    from twin.fitting.silicon import model_family, silicon_cases
    out, seen = [], set()
    for c in silicon_cases()[0]:
        w = c.row
        if w.system != "b200_sxm" or w.precision != "fp8" or model_family(w.model_path) != "minimax" or w.osl < 4096:
            continue
        key = (w.vllm_version, w.id[:10], w.tp, w.moe_ep, w.attention_dp, w.isl, w.osl, w.concurrency, w.ttft_ms)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def counted_fp8_floor():
    """``benchmarks/eager_family_floor.py --fp8-count``'s tables, on inside the block only."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from eager_family_floor import fp8_counted
    return fp8_counted()


def rows(report_path: Path | None, fp8_count: bool) -> None:
    """Print each 1k/8k-out FP8 row's measured and twin TTFT / TPOT per variant, then the medians per variant."""
    from twin.fitting.fit import simulate_cases
    from twin.fitting.joint import default_start
    variants = [("defaults", dict)]
    if report_path is not None:
        variants += [(k, lambda p=p: p) for k, p in fold_params(read_json(report_path), report_path).items()]
    if fp8_count:        # MiniMax's Triton FP8 eager floor at its launch count (round 14's trial, after the others)
        variants.append(("defaults+count", None))
    cases = sorted(fp8_8k_out_cases(), key=lambda c: (c.row.vllm_version, c.row.tp, c.row.concurrency, c.row.id))
    out: dict[str, list[dict]] = {}
    for label, params in variants:
        with counted_fp8_floor() if params is None else nullcontext():
            out[label] = [r.metrics for r in simulate_cases(cases, default_start() | (params or dict)(),
                                                            max_sim_s=60.0)]
    for i, c in enumerate(cases):
        w = c.row
        print(f"{w.id[:10]} v{w.vllm_version} TP{w.tp} EP{w.moe_ep} {w.isl}/{w.osl} C{w.concurrency:<3d} "
              f"measured TTFT {w.ttft_ms:7.1f} TPOT {w.tpot_ms:6.2f}")
        for label, ms in out.items():
            m = ms[i]
            print(f"    {label:16s} TTFT {m['mean_ttft_ms']:7.1f} ({m['mean_ttft_ms'] / w.ttft_ms - 1.0:+6.1%}) p50 "
                  f"{m['median_ttft_ms']:7.1f}  TPOT {m['mean_tpot_ms']:6.2f} ({m['mean_tpot_ms'] / w.tpot_ms - 1.0:+6.1%})")
    for label, ms in out.items():
        v = [m["mean_ttft_ms"] / c.row.ttft_ms - 1.0 for m, c in zip(ms, cases)]
        if v:
            print(f"{label:16s} TTFT median signed {statistics.median(v):+6.1%}  |error| "
                  f"{statistics.median(map(abs, v)):6.1%}  (n={len(v)})")


def main() -> None:
    own, rest = split_at_dashes(sys.argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("rows", "heldout"))
    ap.add_argument("--extra-kernels", type=nonneg_int, default=None, help="the block-FP8 chain's count (default: 3)")
    ap.add_argument("--chain", action="store_true", help="rows: with the chained q / k pricing on")
    ap.add_argument("--report", type=Path, default=None, help="rows: a fidelity_real --json report with folds")
    ap.add_argument("--fp8-count", action="store_true", help="rows: also the defaults with MiniMax FP8's eager "
                    "floor at its launch count (benchmarks/eager_family_floor.py --fp8-count)")
    args = ap.parse_args(own)
    if args.mode == "rows" and rest:
        raise TwinInputError("rows takes no arguments after --")
    if args.mode == "heldout" and (args.report is not None or args.fp8_count):
        raise TwinInputError("--report and --fp8-count are rows options")
    with ExitStack() as stack:
        if args.mode == "heldout" or args.chain:
            stack.enter_context(chain_patch(args.extra_kernels))
        elif args.extra_kernels is not None:
            raise TwinInputError("--extra-kernels needs heldout or --chain")
        if args.mode == "heldout":
            run_fidelity_real(rest)
            return
        rows(args.report, args.fp8_count)


if __name__ == "__main__":
    run_script(main)
