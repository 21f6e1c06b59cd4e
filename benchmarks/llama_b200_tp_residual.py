"""The Llama-3.1-70B B200 decode by TP size: what the TP 1 rows miss is the end of a split at every TP (issue 33,
round 16; docs/fidelity.md "Round 16: the B200 TP 1 decode held out").

Two readings of the 120 Llama-3.1-70B B200 rows (vLLM 0.10.2, FP8 and NVFP4 weights, FP8 KV; TP 1 / 2 / 4 / 8):

1. Measured rows only (no simulation, < 1 s): per weight format and ISL / OSL, at CONC <= 8, TPOT = K_g + w_g / TP
   by least squares (``twin.fitting.layer_fixed_prior.tp_split`` without its all-reduce part, which these rows
   put at ~0), and the weight stream's achieved fraction of the datasheet bandwidth, ``bytes / (w x bandwidth)``
   (the twin's weight bytes per step at TP 1, ``ModelSpec.weight_read_bytes``). The H100 Llama FP8 rows beside it
   (TP 2 / 4 / 8: K + A and w per group).
2. With ``--load`` (a file ``--simulate`` wrote: every row at the embedded defaults, 60 s of traffic, ~4 min), the
   twin's error per row as measured - twin TPOT (ms) = a + b / TP by least squares per (format, ISL / OSL, load
   band): b is per-GPU work the twin under-prices (it scales as 1 / TP), a a fixed part it over-prices.

    python benchmarks/llama_b200_tp_residual.py                                 # reading 1
    python benchmarks/llama_b200_tp_residual.py --simulate runs.json            # reading 2, ~4 min shared
    python benchmarks/llama_b200_tp_residual.py --load runs.json
    python benchmarks/llama_b200_tp_residual.py --simulate fp8.json --precision fp8 \
        --set memory_efficiency@blackwell=0.785 --set allreduce_latency_s@blackwell=19e-6 \
        --set unsharded_allreduce_link_s@blackwell=0      # a trial split (model units), in-sample

``--set`` (fit keys, model units, ``twin.yaml_input.parse_set_options``) changes the simulated values from the
embedded defaults; ``--precision`` keeps one weight format's rows. ``--others`` simulates instead the other families'
B200 rows of the defaults sample (every 3rd silicon row) at the embedded defaults and at the ``--set`` values and
prints their TPOT per family (~8 min): whether a split is the generation's or the dense layers' alone.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.line_fit import line_fit  # noqa: E402
from twin.errors import run_script  # noqa: E402
from twin.fitting.layer_fixed_prior import tp_split  # noqa: E402

PAIRS = ((1024, 1024), (1024, 8192), (8192, 1024))
BANDS = {"C <= 8": (1, 8), "C 16-32": (16, 32), "C 64": (64, 64)}


def stream_fraction(weight_bytes: float, w_s: float, bandwidth_bytes_per_s: float) -> float:
    """The fraction of ``bandwidth_bytes_per_s`` a per-step stream of ``weight_bytes`` reaches in ``w_s`` seconds."""
    if w_s <= 0 or bandwidth_bytes_per_s <= 0:
        raise ValueError("stream time and bandwidth must be positive")
    return weight_bytes / (w_s * bandwidth_bytes_per_s)


def fixed_and_per_tp(points: list[tuple[int, float]]) -> tuple[float, float, float]:
    """(a, b, rms) of y = a + b / TP by least squares over ``points`` ((TP, y)); a ValueError with fewer than two
    TP sizes."""
    if len({tp for tp, _ in points}) < 2:
        raise ValueError("a + b / TP needs at least two TP sizes")
    return line_fit([(1.0 / tp, v) for tp, v in points])


def _cases(system: str):
    from twin.fitting.silicon import model_family, silicon_cases
    return [c for c in silicon_cases()[0] if model_family(c.row.model_path) == "llama" and c.row.system == system]


def measured_reading() -> None:
    from twin.hardware.catalog import resolve_gpu, resolve_model
    for system, gpu_name in (("b200_sxm", "B200"), ("h100_sxm", "H100-SXM")):
        cases = _cases(system)
        bw = resolve_gpu(gpu_name).memory_bandwidth_bytes_per_s
        print(f"\n{gpu_name} ({bw / 1e12:.2f} TB/s), CONC <= 8: TPOT = K + w / TP per group")
        print("| format | ISL / OSL | TPs | K ms (median) | w ms (median) | weight GB at TP 1 | stream fraction |")
        print("|---|---|---|---|---|---|---|")
        for fmt in sorted({c.row.precision for c in cases}):
            one = [c for c in cases if c.row.precision == fmt]
            target = one[0].target
            nbytes = resolve_model(target.model).weight_read_bytes(target.weight_formats or target.weight_dtype, 1)
            for pair in PAIRS:
                pts = [(c.row.tp, (c.row.isl, c.row.osl, c.row.concurrency), c.row.tpot_ms) for c in one
                       if (c.row.isl, c.row.osl) == pair and c.row.concurrency <= 8]
                if not pts:
                    continue
                groups, _, _ = tp_split(pts, with_allreduce=False)
                k = statistics.median(v[0] for v in groups.values())
                w = statistics.median(v[1] for v in groups.values())
                tps = "/".join(map(str, sorted({p[0] for p in pts})))
                print(f"| {fmt} | {pair[0]} / {pair[1]} | {tps} | {k:.2f} | {w:.2f} | {nbytes / 1e9:.1f} | "
                      f"{stream_fraction(nbytes, w * 1e-3, bw):.3f} |")


def set_values(items: list[str]) -> dict[str, float]:
    """``--set KEY=VALUE`` items as {key: float}: a fit key, or a roofline keyword with an optional ``@scope`` (as a
    fold's plan sets them, e.g. ``unsharded_allreduce_link_s@blackwell``); a one-line error for an unknown key or a
    non-number."""
    import inspect

    from twin.cost.roofline import RooflineCostModel
    from twin.fitting.parameters import PARAMETERS_BY_NAME
    from twin.fitting.scoped import parse_scoped_set_options
    keywords = set(inspect.signature(RooflineCostModel.__init__).parameters) - {"self", "model", "gpu"}
    out = parse_scoped_set_options(items)
    for key in out:
        if key not in PARAMETERS_BY_NAME and key.split("@", 1)[0] not in keywords:
            raise SystemExit(f"--set {key}: neither a fit key nor a roofline keyword")
    return out


def simulate(path: Path, values: dict[str, float], precision: str | None) -> None:
    from twin.fitting.fit import simulate_cases
    from twin.fitting.joint import default_start
    cases = [c for c in _cases("b200_sxm") if precision is None or c.row.precision == precision]
    runs = simulate_cases(cases, default_start(()) | values, max_sim_s=60.0)
    path.write_text(json.dumps([dict(tp=c.row.tp, fmt=c.row.precision, isl=c.row.isl, osl=c.row.osl,
                                     conc=c.row.concurrency, mtpot=c.row.tpot_ms, ptpot=r.metrics["mean_tpot_ms"])
                                for c, r in zip(cases, runs)]))


def others_check(values: dict[str, float]) -> None:
    from twin.fitting.fit import simulate_cases
    from twin.fitting.joint import all_cases, default_start, errors, family_of, gpu_of
    cases = [c for c in all_cases(None, silicon_every=3) if gpu_of(c).lower().startswith("b200")
             and family_of(c) != "llama"]
    runs = {label: [errors(c, r.metrics)["mean_tpot_ms"] for c, r in zip(cases, simulate_cases(
        cases, default_start(()) | v, max_sim_s=60.0))] for label, v in (("defaults", {}), ("--set", values))}
    print("\nthe other families' B200 rows (every 3rd silicon row), TPOT median |error| (signed): defaults -> --set")
    for fam in sorted({family_of(c) for c in cases}) + ["all"]:
        idx = [i for i, c in enumerate(cases) if fam in ("all", family_of(c))]
        cells = [f"{100 * statistics.median(abs(runs[k][i]) for i in idx):.1f} % "
                 f"({100 * statistics.median(runs[k][i] for i in idx):+.1f} %)" for k in runs]
        print(f"  {fam} ({len(idx)}): {cells[0]} -> {cells[1]}")


ROW_FIELDS = {"tp": int, "fmt": str, "isl": int, "osl": int, "conc": int, "mtpot": float, "ptpot": float}


def load_rows(path: Path) -> list[dict]:
    """The rows a ``--simulate`` run wrote to ``path``, validated: a JSON list of objects with ``ROW_FIELDS``
    (positive integers, a format name, finite TPOTs in ms); anything else is one ``TwinInputError`` line."""
    from benchmarks.fold_report import finite_number
    from twin.errors import TwinInputError
    from twin.json_input import parse_json
    from twin.yaml_input import MAX_INPUT_BYTES, read_text
    if not path.is_file():
        raise TwinInputError(f"--load {path}: no such file")
    rows = parse_json(read_text(path, "--load", MAX_INPUT_BYTES), str(path))
    if not isinstance(rows, list) or not rows:
        raise TwinInputError(f"--load {path}: not a non-empty list of rows (write it with --simulate)")
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or set(row) != set(ROW_FIELDS):
            raise TwinInputError(f"--load {path}: row {i} must be an object with exactly {sorted(ROW_FIELDS)}")
        for key, kind in ROW_FIELDS.items():
            v = row[key]
            ok = (isinstance(v, str) and bool(v)) if kind is str else (
                finite_number(v) and v > 0 and (kind is float or isinstance(v, int)))
            if not ok:
                raise TwinInputError(f"--load {path}: row {i} {key} = {v!r}, expected a positive "
                                     f"{'format name' if kind is str else kind.__name__}")
    return rows


def residual_reading(rows: list[dict]) -> None:
    print("\nmeasured - twin TPOT at the embedded defaults (ms) = a + b / TP")
    print("| format | ISL / OSL | load | rows | a ms | b ms | rms | per TP (ms) |")
    print("|---|---|---|---|---|---|---|---|")
    for fmt in sorted({r["fmt"] for r in rows}):
        for pair in PAIRS:
            for band, (lo, hi) in BANDS.items():
                sel = [r for r in rows if r["fmt"] == fmt and (r["isl"], r["osl"]) == pair and lo <= r["conc"] <= hi]
                if len({r["tp"] for r in sel}) < 2:
                    continue
                a, b, rms = fixed_and_per_tp([(r["tp"], r["mtpot"] - r["ptpot"]) for r in sel])
                per_tp = " ".join(f"{tp}: {statistics.median(r['mtpot'] - r['ptpot'] for r in sel if r['tp'] == tp):+.2f}"
                                  for tp in sorted({r["tp"] for r in sel}))
                print(f"| {fmt} | {pair[0]} / {pair[1]} | {band} | {len(sel)} | {a:+.2f} | {b:+.2f} | {rms:.2f} | "
                      f"{per_tp} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--simulate", type=Path, help="simulate every B200 Llama row at the defaults, save, then read")
    ap.add_argument("--load", type=Path, help="read a file --simulate wrote")
    ap.add_argument("--set", action="append", default=[], help="KEY=VALUE: a fit key's value for --simulate")
    ap.add_argument("--precision", choices=("fp8", "fp4"), help="--simulate one weight format's rows only")
    ap.add_argument("--others", action="store_true", help="the other families' B200 rows at the --set values")
    args = ap.parse_args()
    if args.simulate and args.load:
        raise SystemExit("--simulate and --load: give one")
    if args.others and (args.simulate or args.load or args.precision or not args.set):
        raise SystemExit("--others: with --set only (not with --simulate, --load or --precision)")
    if args.precision and not args.simulate:
        raise SystemExit("--precision: only with --simulate")
    if args.set and not (args.simulate or args.others):
        raise SystemExit("--set: only with --simulate or --others")
    values = set_values(args.set)
    if args.others:
        return others_check(values)
    measured_reading()
    if args.simulate:
        simulate(args.simulate, values, args.precision)
    path = args.simulate or args.load
    if path:
        residual_reading(load_rows(path))


if __name__ == "__main__":
    run_script(main)
