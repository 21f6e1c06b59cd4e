"""What the bench client's request path scales with, held out (issue 33, round 17).

A fold fits ``request_path_s@client_vllm_bench`` as ONE constant per request (15-19 ms where a family is held out,
4.8 ms embedded). This reading asks whether the time the rows want on the request path is better described as a
constant, or as growing with the prompt (tokenisation, the API server's per-prompt-token work), with the output
(detokenisation and streaming, whose event-loop work competes with a new request's), or with the server (the
model's decoder layers: per-layer first-step work charged per request).

It reads a per-case JSON of ``benchmarks/fidelity_real.py --defaults-only --json`` (the embedded defaults; no
simulation here) and, per fold, fits each structure's shift (ms added to every request's path; the twin already
charges the embedded 4.8 ms + 3.2 ms jitter mean) on the fold's TRAINING rows by the fold fits' loss (summed squared
log ratio of mean TTFT), then reports the held-out rows' median |error| and signed median with that shift added:

* family folds: the bench-client rows of the other families train, the held-out family's rows are scored;
* source fold (silicon held out): only the inference-perf runs train (the twin's unscoped path); the silicon
  rows are scored.

The shift is added to the twin's mean TTFT, first order for an extra per-request delay (exact at light load, a
queueing row moves more). The other terms stay at the embedded defaults, i.e. in-sample for the held-out family:
a screen for which structure deserves a fold run, not a held-out figure of the twin.

    python benchmarks/fidelity_real.py --defaults-only --silicon-every 3 --eval-sim-s 60 --json D.json
    python benchmarks/request_path_structure.py D.json [--max-conc 64]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fold_report import defaults_cases  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402

# the inference-perf runs name their model in the run name; the silicon rows carry it
RUN_MODELS = (("codellama-34b", "codellama-34b"), ("llama-2-70b", "llama-2-70b"), ("llama-2-7b", "llama-2-7b"),
              ("mixtral-8x7b", "mixtral-8x7b"))
# structure -> feature columns (per row) whose coefficients are fitted; "one" is the constant (ms)
STRUCTURES = {
    "constant": ("one",),
    "prompt": ("one", "prompt_ktokens"),
    "output": ("one", "output_ktokens"),
    "layers": ("layers_per_100",),
    "constant + layers": ("one", "layers_per_100"),
}
FAMILY_FOLDS = ("gpt-oss", "kimi", "minimax", "llama")


def layers_of(case: dict) -> int:
    """Decoder layers of the row's model (the twin's catalog); a one-line error for a model it does not know."""
    from twin.hardware.model_catalog import resolve_model
    name = case.get("model")
    if not name:
        run = case["name"].lower()
        name = next((m for key, m in RUN_MODELS if key in run), None)
        if name is None:
            raise TwinInputError(f"{case['name']}: no model named in the run name")
    try:
        return int(resolve_model(name).num_hidden_layers)
    except ValueError as exc:
        raise TwinInputError(f"{case['name']}: model: {exc}") from None


def features(case: dict) -> dict[str, float]:
    """The row's feature columns (a validated record: ``fold_report.check_case``)."""
    p = case["predicted"]
    done = p.get("completed") or 0
    if done <= 0:
        raise TwinInputError(f"{case['name']}: no completed request in the twin's run")
    for key in ("total_input_tokens", "total_output_tokens"):
        if p.get(key) is None:
            raise TwinInputError(f"{case['name']}: predicted.{key} is missing")
    return {"one": 1.0, "prompt_ktokens": p["total_input_tokens"] / done / 1000.0,
            "output_ktokens": p["total_output_tokens"] / done / 1000.0, "layers_per_100": layers_of(case) / 100.0}


def usable(case: dict) -> bool:
    """Whether a validated record has a measured and a predicted mean TTFT (a gap-analysis case has none); a TTFT
    that is not positive is a one-line error."""
    m, p = case.get("measured", {}).get("mean_ttft_ms"), case.get("predicted", {}).get("mean_ttft_ms")
    for side, value in (("measured", m), ("predicted", p)):
        if value is not None and value <= 0:
            raise TwinInputError(f"{case['name']}: {side}.mean_ttft_ms is {value!r}, not a positive number")
    return m is not None and p is not None


def shift_ms(case: dict, cols: tuple[str, ...], coef) -> float:
    f = case["_features"]
    return float(sum(c * f[k] for k, c in zip(cols, coef)))


def fit(cases: list[dict], cols: tuple[str, ...]) -> np.ndarray:
    """Coefficients (ms per unit of each column) minimising the summed squared log ratio of mean TTFT with the
    shift added (the prediction floored at 1 us, so a shift cannot make it negative)."""
    if not cases:
        raise ValueError("fit: no training rows")
    x = np.array([[c["_features"][k] for k in cols] for c in cases])
    pred = np.array([c["predicted"]["mean_ttft_ms"] for c in cases])
    meas = np.array([c["measured"]["mean_ttft_ms"] for c in cases])

    def resid(coef):
        return np.log(np.maximum(pred + x @ coef, 1e-3) / meas)

    return least_squares(resid, np.zeros(len(cols))).x


def score(cases: list[dict], cols: tuple[str, ...] | None, coef) -> tuple[float, float]:
    """(median |error|, signed median) of mean TTFT over ``cases`` with the structure's shift added."""
    errs = []
    for c in cases:
        add = shift_ms(c, cols, coef) if cols else 0.0
        errs.append((c["predicted"]["mean_ttft_ms"] + add) / c["measured"]["mean_ttft_ms"] - 1.0)
    return statistics.median(abs(e) for e in errs), statistics.median(errs)


def folds(cases: list[dict], max_conc: int) -> list[tuple[str, list[dict], list[dict]]]:
    """(label, training rows, held-out rows); bench rows above ``max_conc`` neither train nor score."""
    for c in cases:
        if c.get("source") == "silicon" and c.get("client") and (c.get("conc") is None or c.get("family") is None):
            raise TwinInputError(f"{c['name']}: a bench-client row without its conc or family")
    bench = [c for c in cases if c.get("source") == "silicon" and c.get("client") and c["conc"] <= max_conc]
    perf = [c for c in cases if c.get("source") == "inference-perf"]
    out = [(f"family {g}", [c for c in bench if c["family"] != g], [c for c in bench if c["family"] == g])
           for g in FAMILY_FOLDS]
    out.append(("source silicon", perf, bench))
    return out


def load(path: Path) -> list[dict]:
    """The usable cases of a ``--defaults-only`` report (``fold_report.defaults_cases``), each with its features."""
    records = defaults_cases(path, need=("measured", "predicted"))
    try:
        cases = [c for c in records if usable(c)]
        for c in cases:
            c["_features"] = features(c)
    except TwinInputError as exc:
        raise TwinInputError(f"{path}: {exc}") from None
    if not cases:
        raise TwinInputError(f"{path}: no case with a measured and a predicted mean TTFT")
    return cases


def describe(cols: tuple[str, ...], coef) -> str:
    units = {"one": "ms", "prompt_ktokens": "ms/1k prompt tok", "output_ktokens": "ms/1k output tok",
             "layers_per_100": "ms/100 layers"}
    return ", ".join(f"{c:+.2f} {units[k]}" for k, c in zip(cols, coef))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("defaults_json")
    ap.add_argument("--max-conc", type=int, default=10**9, help="bench rows at CONC <= this only (default: all)")
    args = ap.parse_args(argv)
    if args.max_conc < 1:
        raise TwinInputError(f"--max-conc {args.max_conc}: must be >= 1")
    cases = load(Path(args.defaults_json))
    for label, train, held in folds(cases, args.max_conc):
        if not train or not held:
            print(f"{label}: no rows ({len(train)} training, {len(held)} held out)")
            continue
        a, s = score(held, None, ())
        print(f"\n{label}: {len(train)} training rows, {len(held)} held out; embedded path: "
              f"{100 * a:.1f} % ({100 * s:+.1f} %)")
        for name, cols in STRUCTURES.items():
            coef = fit(train, cols)
            a, s = score(held, cols, coef)
            print(f"  {name:18s} {100 * a:5.1f} % ({100 * s:+6.1f} %)   fitted: {describe(cols, coef)}")


if __name__ == "__main__":
    run_script(main)
