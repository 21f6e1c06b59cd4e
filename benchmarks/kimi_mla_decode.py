"""MLA's fixed time per decoder layer and step, read off the Kimi-K2.5 NVFP4 rows' decode with configurations held
out (issue 33, round 8; ``twin.cost.mla_decode``; docs/fidelity.md "Round 8: Kimi-K2.5 (issue 33)").

The NVFP4 rows have no expert-path term of their own, so their TPOT gap (measured - twin, seconds per step) at the
embedded defaults with the MLA term at its prior 0 is what the roofline misses. Models of the gap, fitted by least
squares on one part of the rows and tested on the rest:

* ``const``: c0 per step (embedded as ``layer_overhead_s@mla`` = c0 / decoder layers);
* ``const+n``: c0 + k x (mean running batch x layers) (a per-token-per-layer part; not embedded).

Held-out splits: by TP and date (train the TP4 runs measured 2026-03-27 / 04-20, test the TP8 runs and the runs
measured 2026-03-11), by date (train the 03-11 runs, test the others), by shape (train 1k/1k and 8k/1k, test 1k/8k). Errors: median |TPOT error| (median signed) of the test rows, from the twin's
TPOT plus the fitted gap (the gap model is linear in the step time; ``--check`` simulates the embedded value).

    python benchmarks/kimi_mla_decode.py            # ~1 min: the fits
    python benchmarks/kimi_mla_decode.py --check    # + the NVFP4 rows simulated at the embedded value
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from twin.errors import run_script  # noqa: E402

from benchmarks.kimi_slices import kimi_cases, run  # noqa: E402
from twin.cost.mla_decode import MLA_TERMS  # noqa: E402
from twin.fitting.joint import default_start  # noqa: E402
from twin.hardware.catalog import resolve_model  # noqa: E402

KEY = "layer_overhead_s@mla"
MODELS = {"const": lambda r: [1.0], "const+n": lambda r: [1.0, r["n"] * r["layers"]]}
SPLITS = {"train TP4 03-27/04-20, test TP8 + 03-11": lambda r: r["tp"] == 4 and r["date"] != "03-11",
          "train 03-11, test 03-27/04-20": lambda r: r["date"] == "03-11",
          "train 1k/1k + 8k/1k, test 1k/8k": lambda r: r["osl"] == 1024,
          "all rows (the embedded value)": lambda r: True}


def records(recs: list[dict], cases: list) -> list[dict]:
    by_name = {c.run.name: c for c in cases}
    out = []
    for r in recs:
        c = by_name[r["name"]]
        out.append({"name": r["name"], "tp": c.target.tensor_parallel_size, "osl": r["osl"], "conc": r["conc"],
                    # measured 2026-03-11 (the 2026-03-25 file's runs), else 2026-03-27 or 04-20
                    "date": "03-11" if "2026_03_25" in r["name"] else "03-27/04-20",
                    "layers": resolve_model(c.target.model).num_hidden_layers,
                    "n": r["predicted"]["mean_running_batch"], "tpot_ms": r["measured"]["mean_tpot_ms"],
                    "gap_s": (r["measured"]["mean_tpot_ms"] - r["predicted"]["mean_tpot_ms"]) * 1e-3})
    return out


def _fmt(errs: list[float]) -> str:
    return f"{100 * statistics.median(abs(e) for e in errs):.1f}% ({100 * statistics.median(errs):+.1f}%)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="also simulate the NVFP4 rows at the embedded value")
    args = ap.parse_args()
    t0 = time.perf_counter()
    cases = [c for c in kimi_cases() if (c.row.precision or "").lower() != "int4"]
    rows = records(run(cases, default_start() | {KEY: 0.0}), cases)
    print(f"{len(rows)} distinct Kimi-K2.5 NVFP4 runs; TPOT gap at the prior 0 (ms per step) by CONC: "
          + ", ".join(f"C={c}: {1e3 * statistics.median(r['gap_s'] for r in rows if r['conc'] == c):+.2f}"
                      for c in sorted({r["conc"] for r in rows})))
    for split_name, is_train in SPLITS.items():
        train = [r for r in rows if is_train(r)]
        test = [r for r in rows if not is_train(r)] or train
        for model_name, cols in MODELS.items():
            x = np.array([cols(r) for r in train])
            coef, *_ = np.linalg.lstsq(x, np.array([r["gap_s"] for r in train]), rcond=None)
            before = [(r["tpot_ms"] - 1e3 * r["gap_s"]) / r["tpot_ms"] - 1 for r in test]
            after = [(r["tpot_ms"] - 1e3 * (r["gap_s"] - float(np.dot(coef, cols(r))))) / r["tpot_ms"] - 1
                     for r in test]
            per_layer = coef[0] / train[0]["layers"]
            extra = f", k = {coef[1] * 1e6:+.2f} us per token per layer" if len(coef) > 1 else ""
            print(f"{split_name:<40} {model_name:<8} c0 = {coef[0] * 1e3:.3f} ms per step ({per_layer * 1e6:.1f} us "
                  f"per layer){extra}; test n = {len(test)}: TPOT {_fmt(before)} -> {_fmt(after)}")
    print(f"embedded: {KEY} = {MLA_TERMS['layer_overhead_s'] * 1e6:.1f} us per decoder layer")
    if args.check:
        recs = run(cases, default_start())
        errs = [r["errors"]["mean_tpot_ms"] for r in recs]
        ttft = [r["errors"]["mean_ttft_ms"] for r in recs if "mean_ttft_ms" in r["errors"]]
        print(f"simulated at the embedded value: TPOT {_fmt(errs)}, TTFT {_fmt(ttft)} (n = {len(errs)})")
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    run_script(main)
