"""The Marlin W4A16 MoE terms of Kimi-K2.5's INT4 experts on B200, fitted with other configurations held out
(issue 33, round 5; docs/fidelity.md "Round 5: Kimi-K2.5").

Kimi-K2.5 INT4 is the only INT4-expert family in the data, so a family fold cannot test these terms; the fold
here is by configuration: the terms are fitted on the 1k/1k rows (decode) and the 8k/1k row at C = 4 (prefill,
against the 1k/1k row at C = 4: the difference of their mean TTFT removes any per-request intercept), and the
other rows (every 1k/8k row, the 8k/1k rows at C >= 8) are held out.

* Decode (TPOT): per decode step, the twin at the pre-round-5 priors misses ``gap = L x a + (1 / e - 1) x R(n)``,
  with L = 60 MoE layers, ``a`` = ``moe_layer_overhead_s@experts_int4`` (s per MoE layer per step), ``e`` =
  ``moe_expert_efficiency@experts_int4`` (the expert weight streams' share of the dense streams' rate) and
  R(n) the twin's routed-expert weight read time at the row's mean running batch n. Linear least squares on
  the training rows' (measured - predicted) TPOT gives L x a and 1 / e - 1.
* Prefill (TTFT): ``c`` = ``moe_expert_compute_efficiency@experts_int4`` (the expert GEMMs' FLOP rate against the
  dense bf16 GEMMs'), set so the simulated TTFT(8k/1k, C = 4) - TTFT(1k/1k, C = 4) matches the measured one
  (interpolated in 1 / c - 1 between two simulations, then checked). One difference sets one value exactly:
  ``c`` has no standard error from these rows; ``a`` and ``e`` get theirs from the least squares.

    python benchmarks/kimi_int4_fit.py       # ~3 min
    python benchmarks/kimi_int4_fit.py --keep-decode    # a and e at their embedded values, c refitted

Round 7: Marlin's padded token blocks (``twin.cost.marlin_blocks``) are on for INT4 experts, so ``c`` is read with
them in the prompt steps (they do not act on pure decode steps: ``a`` and ``e`` are read as before).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.kimi_slices import kimi_cases, parse_set, run  # noqa: E402
from twin.cost.marlin_moe import MARLIN_W4A16_MOE_TERMS  # noqa: E402
from twin.fitting.joint import default_start  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.fitting.replay import cost_model_for, deployment_for  # noqa: E402

A, E, C = ("moe_layer_overhead_s@experts_int4", "moe_expert_efficiency@experts_int4",
           "moe_expert_compute_efficiency@experts_int4")
PRIORS = {A: 0.0, E: 1.0, C: 1.0}


DECODE_SHAPES = [(1024, 1024)]     # the shapes whose rows the decode terms are read off (``--decode-on``)


def parse_shapes(text: str) -> list[tuple[int, int]]:
    """``--decode-on`` (comma-separated ISL/OSL pairs) -> [(isl, osl)]; a malformed pair is a one-line error."""
    out = []
    for item in (t.strip() for t in text.split(",") if t.strip()):
        try:
            isl, osl = (int(x) for x in item.split("/"))
        except ValueError:
            raise TwinInputError(f"--decode-on {item!r}: expected ISL/OSL, e.g. 1024/8192") from None
        if min(isl, osl) < 1:
            raise TwinInputError(f"--decode-on {item!r}: ISL and OSL must be >= 1")
        out.append((isl, osl))
    if not out:
        raise TwinInputError("--decode-on: no ISL/OSL pair given")
    return out


@contextmanager
def decode_shapes(shapes: list[tuple[int, int]]):
    """``DECODE_SHAPES`` (the same list, in place) holding ``shapes`` inside the block only (restored after it)."""
    saved = DECODE_SHAPES[:]
    DECODE_SHAPES[:] = shapes
    try:
        yield
    finally:
        DECODE_SHAPES[:] = saved


def is_train(rec: dict) -> bool:
    """Training rows: the decode shape's runs, and the C = 4 pair (1k/1k, 8k/1k) whose TTFT difference sets c."""
    return ((rec["isl"], rec["osl"]) in DECODE_SHAPES
            or (rec["conc"] == 4 and (rec["isl"], rec["osl"]) in ((1024, 1024), (8192, 1024))))


def expert_read_s(case, params: dict[str, float], batch: float) -> float:
    """The twin's routed-expert weight read time of a decode step of ``batch`` sequences (interpolated)."""
    cm = cost_model_for(deployment_for(case.run, case.target), case.target, params | {E: 0.5})   # 1/e - 1 = 1
    lo = max(1, int(batch))
    r = [cm._moe_weights_s(n) - cm._moe_weights_dense_eff(n) for n in (lo, lo + 1)]
    return r[0] + (batch - lo) * (r[1] - r[0])


def summary(recs: list[dict], train: bool) -> str:
    part = [r for r in recs if is_train(r) == train]
    out = []
    for k, label in (("mean_ttft_ms", "TTFT"), ("mean_tpot_ms", "TPOT"), ("mean_e2el_ms", "E2E"),
                     ("request_throughput", "thr")):
        xs = [r["errors"][k] for r in part if k in r["errors"]]
        out.append(f"{label} {100 * statistics.median(abs(x) for x in xs):.1f}% "
                   f"({100 * statistics.median(xs):+.1f}%)")
    return f"{'train' if train else 'held out'} (n={len(part)}): " + ", ".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep-decode", action="store_true",
                    help="a and e at their embedded values (twin.cost.marlin_moe); only c is fitted")
    ap.add_argument("--set", action="append", default=[],
                    help="name=value in model units held fixed under the fit (repeatable), e.g. "
                         "eager_moe_layer_host_s@blackwell+experts_int4=0.5e-3")
    ap.add_argument("--decode-on", default="1024/1024",
                    help="ISL/OSL of the runs a and e are read off, comma-separated (1024/8192: the decode-dominated "
                         "runs, whose prompt steps are an eighth as frequent; 1024/1024,1024/8192: both jointly)")
    args = ap.parse_args()
    with decode_shapes(parse_shapes(args.decode_on)):
        fit(args)


def fit(args) -> None:
    """The fit of ``main``'s options (``args``), printed; reads the module's ``DECODE_SHAPES``."""
    t0 = time.perf_counter()
    cases = [c for c in kimi_cases() if (c.row.precision or "").lower() == "int4"]
    by_name = {c.run.name: c for c in cases}
    base_params = default_start() | PRIORS | parse_set(args.set)
    base = run(cases, base_params)
    print("priors (a = 0, e = 1, c = 1):\n  " + summary(base, True) + "\n  " + summary(base, False))

    train = [r for r in base if (r["isl"], r["osl"]) in DECODE_SHAPES]
    y = np.array([(r["measured"]["mean_tpot_ms"] - r["predicted"]["mean_tpot_ms"]) * 1e-3 for r in train])
    layers = 60.0
    x = np.array([[layers, expert_read_s(by_name[r["name"]], base_params, r["predicted"]["mean_running_batch"])]
                  for r in train])
    (a, extra), *_ = np.linalg.lstsq(x, y, rcond=None)     # a: the coefficient of the L column
    e = 1.0 / (1.0 + extra)
    if args.keep_decode:
        a, e = MARLIN_W4A16_MOE_TERMS["moe_layer_overhead_s"], MARLIN_W4A16_MOE_TERMS["moe_expert_efficiency"]
        extra = 1.0 / e - 1.0
        print(f"--keep-decode: a = {a * 1e6:.1f} us, e = {e:.3f} (embedded)")
    resid = y - x @ np.array([a, extra])
    cov = float(resid @ resid) / (len(y) - 2) * np.linalg.inv(x.T @ x)       # least-squares standard errors
    se_a, se_x = np.sqrt(np.diag(cov))
    se_e = se_x / (1.0 + extra) ** 2                                           # delta method for e = 1/(1 + x)
    print(f"decode fit on {len(train)} {args.decode_on} rows: a = {a * 1e6:.1f} +/- {se_a * 1e6:.1f} us per MoE layer, "
          f"e = {e:.3f} +/- {se_e:.3f} (1/e - 1 = {extra:.3f}); residuals (ms): "
          + ", ".join(f"{v * 1e3:+.2f}" for v in resid))

    pair = [r for r in base if r["conc"] == 4 and (r["isl"], r["osl"]) in ((1024, 1024), (8192, 1024))]
    pair_cases = [by_name[r["name"]] for r in pair]
    m_delta = (max(r["measured"]["mean_ttft_ms"] for r in pair if r["isl"] == 8192)
               - min(r["measured"]["mean_ttft_ms"] for r in pair if r["isl"] == 1024))

    def delta(c_value: float) -> float:
        recs = run(pair_cases, base_params | {A: a, E: e, C: c_value})
        return (statistics.mean(r["predicted"]["mean_ttft_ms"] for r in recs if r["isl"] == 8192)
                - statistics.mean(r["predicted"]["mean_ttft_ms"] for r in recs if r["isl"] == 1024))

    d1, c2 = delta(1.0), 0.25
    d2 = delta(c2)
    u = (m_delta - d1) / (d2 - d1) * (1.0 / c2 - 1.0)        # 1/c - 1, linear between the two
    c = 1.0 / (1.0 + u)
    print(f"prefill: measured TTFT(8k) - TTFT(1k) at C = 4: {m_delta:.1f} ms; twin {d1:.1f} ms at c = 1, "
          f"{d2:.1f} ms at c = {c2}; fitted c = {c:.3f}, check: {delta(c):.1f} ms")

    fitted = run(cases, base_params | {A: a, E: e, C: c})
    print(f"fitted (a = {a * 1e6:.1f} us, e = {e:.3f}, c = {c:.3f}):\n  " + summary(fitted, True) + "\n  "
          + summary(fitted, False))
    for r in sorted(fitted, key=lambda r: (r["isl"], r["osl"], r["conc"])):
        print(f"  {'train' if is_train(r) else 'held '} {r['isl']}/{r['osl']} C={r['conc']:<3d} TTFT "
              f"{100 * r['errors']['mean_ttft_ms']:+6.1f}%  TPOT {100 * r['errors']['mean_tpot_ms']:+6.1f}%")
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    run_script(main)
