"""Is Blackwell's per-token prompt time prefill attention that grows with the context? (issue 33, round 13;
docs/fidelity.md "Round 13: prefill attention on Blackwell").

The hypothesis: the attention kernels vLLM runs for prefill on B200 reach a much smaller share of the bf16 tensor
peak than the twin's ``compute_efficiency`` (0.6), and the time the twin lacks there is what
``layer_token_overhead_s@blackwell`` (0.2 us per token per decoder layer, read off B200 rows only) stands in for.
Two tests, no fit of the twin:

``reading``: per group of CONC = 4 rows that differ only in the prompt length (``layer_token_reading``), the time per
prompt token the twin lacks, X, split over TP in three forms: ``k x GEMM + U`` (round 9: a GEMM share and a part
every TP rank repeats), ``k x GEMM + a x ATTN`` (the attention form: ATTN is the twin's prefill attention time per
prompt token, 8k minus 1k over the token difference, which TP divides like the GEMMs), and ``a x ATTN`` alone
(attention the only missing work; the attention share it implies is ``compute_efficiency / (1 + a)``); with
``--attention-share``, also ``k x GEMM + U`` on what is left once the attention is charged at that share.

``rows``: the B200 silicon rows of the default report's subset simulated at the embedded defaults, then with the
per-token term at 0 and the prefill attention (steps with a prompt chunk, and the windowed layers) charged at a
smaller share of the peak (``--attention-share``, a fraction of the twin's ``compute_efficiency``: 1 = the twin's
0.6): median signed TTFT / TPOT error by prompt length, TP and family. The attention share is applied by wrapping
``attention_terms`` for Blackwell GPUs inside this script only: a reading, not a term of the twin.

    python benchmarks/prefill_attention.py reading [--attention-share 0.26]
    python benchmarks/prefill_attention.py rows --attention-share 0.25,0.1 [--every 16] [--sim-s 60]
    python benchmarks/prefill_attention.py rows --report X.json --kind GPU --group B200 --attention-share 0.25

With ``--report`` the rows start from a held-out fold's values (a ``fidelity_real.py --json`` report): what a
stated attention share would do to that fold's B200 rows, no fit.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import statistics
import sys
from pathlib import Path
from unittest import mock

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import positive_float, positive_int, refuse_given  # noqa: E402
from benchmarks.fidelity_real import REFIT_SILICON_EVERY  # noqa: E402
from benchmarks.layer_token_reading import readings  # noqa: E402
from benchmarks.fold_report import fold_params  # noqa: E402
from twin.errors import run_script  # noqa: E402
from twin.fitting.fit import simulate_cases  # noqa: E402
from twin.fitting.joint import JOINT_NAMES, all_cases, default_start, errors, family_of, gpu_of  # noqa: E402

TOKEN = "layer_token_overhead_s@blackwell"


def split_forms(x: np.ndarray, gemm: np.ndarray, attn: np.ndarray) -> dict[str, tuple[np.ndarray, float]]:
    """Least squares of the missing time per prompt token ``x`` over TP in each form: name -> (coefficients, rms s)."""
    one = np.ones(len(x))
    out = {}
    for name, cols in (("kG+U", (gemm, one)), ("kG+aA", (gemm, attn)), ("aA", (attn,))):
        a = np.column_stack(cols)
        c, *_ = np.linalg.lstsq(a, x, rcond=None)
        out[name] = (c, float(np.sqrt(np.mean((x - a @ c) ** 2))))
    return out


def reading(shares: list[float]) -> None:
    rows = [r for r in readings(4) if np.isfinite(r["x_s"]) and r["ep"] == 1 and r["dp"] == 1]
    print("CONC = 4, us per prompt token: X the twin lacks, GEMM and ATTN the twin's (ATTN: 8k - 1k attention over the tokens)")
    by: dict[tuple, list[dict]] = collections.defaultdict(list)
    for r in rows:
        by[(r["family"], r["gpu"], r["precision"])].append(r)
        print(f"{r['family']:<8} {r['gpu']:<9} {r['precision']:<5} {r['version'][:8]:<8} TP {r['tp']}: "
              f"X {1e6 * r['x_s']:6.2f}  GEMM {1e6 * r['gemm_s']:6.2f}  ATTN {1e6 * r['attn_slope_s']:6.3f}")
    eff = default_start(JOINT_NAMES).get("compute_efficiency", 0.6)
    print("\nforms over TP (rms in us per token; 'share' = the attention share of the peak the form implies)")
    for key, rs in sorted(by.items()):
        if len({r["tp"] for r in rs}) < 2:
            continue
        x, g, at = (np.array([r[k] for r in rs]) for k in ("x_s", "gemm_s", "attn_slope_s"))
        f = split_forms(x, g, at)
        (k1, u), e1 = f["kG+U"]
        (k2, a2), e2 = f["kG+aA"]
        (a3,), e3 = f["aA"]
        tps = ",".join(str(r["tp"]) for r in rs)
        print(f"{key[0]:<8} {key[1]:<9} {key[2]:<5} TP {tps:<9} | kG+U: k {k1:5.2f} U {1e6 * u:5.1f} us "
              f"({1e6 * u / rs[0]['layers']:.3f}/layer) rms {1e6 * e1:5.2f} | kG+aA: k {k2:5.2f} a {a2:6.2f} rms "
              f"{1e6 * e2:5.2f} | aA: a {a3:5.1f} share {eff / (1 + a3):.3f} rms {1e6 * e3:5.2f}")
        for share in shares:      # the attention at a stated share of the twin's rate, then kG + U on what is left
            (k, u), e = split_forms(x - (1 / share - 1) * at, g, at)["kG+U"]
            print(f"{'':<27}   attention at {share:g} x, then kG+U: k {k:5.2f} U {1e6 * u:5.1f} us "
                  f"({1e6 * u / rs[0]['layers']:.3f}/layer) rms {1e6 * e:5.2f}")


@contextlib.contextmanager
def blackwell_prefill_attention(share: float):
    """Charge Blackwell's prefill attention (mixed steps' pairs, windowed layers' pairs) at ``share`` x the twin's
    compute rate, inside the block only (the roofline resolves its attention terms when a cost model is made)."""
    import twin.cost.roofline as roofline
    from twin.cost.generations import gpu_generation
    base = roofline.attention_terms

    def wrapped(model, gpu, *args):
        at = base(model, gpu, *args)
        if gpu_generation(gpu) != "blackwell":
            return at
        return dataclasses.replace(at, k_attn_mixed=at.k_attn_mixed / share, k_attn_win=at.k_attn_win / share)

    with mock.patch.object(roofline, "attention_terms", wrapped):
        yield


def _slices(cases, errs) -> dict[str, dict[str, list[dict]]]:
    out: dict[str, dict[str, list[dict]]] = {k: collections.defaultdict(list) for k in ("ISL", "TP", "family x ISL")}
    for c, e in zip(cases, errs):
        isl = "8k" if c.row.isl >= 8000 else "1k"
        out["ISL"][isl].append(e)
        out["TP"][str(c.target.tensor_parallel_size)].append(e)
        out["family x ISL"][f"{family_of(c)} {isl}"].append(e)
    return out


def _med(errs, key, absolute=False):
    xs = [abs(e[key]) if absolute else e[key] for e in errs if key in e]
    return f"{100 * statistics.median(xs):+.1f}" if xs else "-"


def _slice_line(errs) -> str:
    """signed TTFT / signed TPOT [median |TTFT|] (n)"""
    return f"{_med(errs, 'mean_ttft_ms')}/{_med(errs, 'mean_tpot_ms')} [{_med(errs, 'mean_ttft_ms', True)}] ({len(errs)})"


def rows(shares: list[float], every: int, sim_s: float, fold: dict[str, float] | None = None) -> None:
    """The B200 rows at the embedded defaults (or at a held-out fold's values, ``fold``: the per-token term as the
    fold has it) without and with the prefill attention at each share."""
    cases = [c for c in all_cases(silicon_every=every) if gpu_of(c).lower().startswith("b200")]
    if fold is None:
        base = default_start(JOINT_NAMES)
        todo = [("embedded (per-token 0.2 us)", base, None), ("per-token 0", base | {TOKEN: 0.0}, None)]
        todo += [(f"per-token 0, prefill attention at {s:g} x", base | {TOKEN: 0.0}, s) for s in shares]
    else:
        todo = [("the fold's values", fold, None)]
        todo += [(f"the fold's values, prefill attention at {s:g} x", fold, s) for s in shares]
    print(f"{len(cases)} B200 rows (every {every}th silicon row); median signed TTFT / TPOT [median |TTFT|] (rows) by slice")
    for label, params, share in todo:
        with blackwell_prefill_attention(share) if share else contextlib.nullcontext():
            runs = simulate_cases(cases, params, max_sim_s=sim_s)
        errs = [errors(c, r.metrics) for c, r in zip(cases, runs)]
        print(f"== {label}: all {_slice_line(errs)}")
        for kind, groups in _slices(cases, errs).items():
            print(f"   {kind}: " + "; ".join(f"{g} {_slice_line(v)}" for g, v in sorted(groups.items())), flush=True)


def attention_shares(text: str) -> list[float]:
    """``--attention-share``: comma-separated fractions in (0, 1] of the twin's compute rate."""
    try:
        shares = [float(s) for s in text.split(",") if s.strip()]
    except ValueError:
        shares = [float("nan")]
    if any(not 0 < s <= 1 for s in shares):
        raise argparse.ArgumentTypeError(f"each value must be a number in (0, 1], got {text!r}")
    return shares


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("reading", "rows"))
    ap.add_argument("--attention-share", type=attention_shares, default=[],
                    help="comma-separated shares of the twin's compute rate for Blackwell's prefill attention")
    ap.add_argument("--every", type=positive_int, default=None, help=f"rows: default {REFIT_SILICON_EVERY}")
    ap.add_argument("--sim-s", type=positive_float, default=None, help="rows: default 60")
    ap.add_argument("--report", type=Path, default=None, help="a fidelity_real.py --json report: start from a fold's values")
    ap.add_argument("--kind", default=None, help="with --report: the fold kind (GPU, source, family; default GPU)")
    ap.add_argument("--group", default=None, help="with --report: the held-out group (default B200)")
    args = ap.parse_args()
    shares = args.attention_share
    if args.what == "reading":
        refuse_given(args, ("--every", "--sim-s", "--report", "--kind", "--group"), "to 'rows'")
        return reading(shares)
    if args.report is None:
        refuse_given(args, ("--kind", "--group"), "with --report")
    every = REFIT_SILICON_EVERY if args.every is None else args.every
    sim_s = 60.0 if args.sim_s is None else args.sim_s
    rows(shares, every, sim_s, fold_params(args.report, args.kind or "GPU", args.group or "B200") if args.report else None)


if __name__ == "__main__":
    run_script(main)
