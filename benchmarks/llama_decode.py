"""The FP8 KV decode attention read rate on Hopper (``kv_memory_efficiency@hopper+kv_fp8``, twin.cost.kv_attention;
issue 33, round 7), picked on the Llama-3.1-70B FP8 H100 rows with each TP, each ISL / OSL pair and each load band
held out in turn.

Every H100 Llama row (vLLM 0.10.2, FP8 KV, async scheduling) is simulated at the embedded defaults with the term
at each grid value (60 s of traffic); per fold the value whose median signed TPOT error on the OTHER rows is
nearest 0 is picked, and the held-out rows' TPOT and TTFT are reported at the prior (0.978, the weights' rate) and
at the pick. Also printed: the decode gap split, per TP, into a per-step constant, a per-sequence slope and a
multiple of the twin's own KV read time (the part of the gap that scales with the KV bytes each GPU reads).

    python benchmarks/llama_decode.py                       # grid 0.2-0.45 and 0.978, ~6-10 min shared
    python benchmarks/llama_decode.py --grid 0.25,0.3 --save runs.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_out_path, number_list  # noqa: E402
from benchmarks.fold_report import read_json  # noqa: E402
from benchmarks.saved_rows import check_rows  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402

KEY = "kv_memory_efficiency@hopper+kv_fp8"
PRIOR = 0.978
FOLDS = {"TP2": lambda r: r["tp"] == 2, "TP4": lambda r: r["tp"] == 4, "TP8": lambda r: r["tp"] == 8,
         "1k/1k": lambda r: r["isl"] == 1024 and r["osl"] == 1024, "1k/8k": lambda r: r["osl"] == 8192,
         "8k/1k": lambda r: r["isl"] == 8192, "C <= 8": lambda r: r["conc"] <= 8, "C >= 16": lambda r: r["conc"] >= 16}


def simulate(value: float) -> list[dict]:
    from twin.fitting.fit import simulate_cases
    from twin.fitting.joint import default_start
    from twin.fitting.silicon import model_family, silicon_cases
    cases = [c for c in silicon_cases()[0] if model_family(c.row.model_path) == "llama" and c.row.system == "h100_sxm"]
    res = simulate_cases(cases, default_start() | {KEY: value}, max_sim_s=60.0)
    return [dict(v=value, tp=c.row.tp, isl=c.row.isl, osl=c.row.osl, conc=c.row.concurrency, mtpot=c.row.tpot_ms,
                 ptpot=r.metrics["mean_tpot_ms"], mttft=c.row.ttft_ms, pttft=r.metrics["mean_ttft_ms"])
            for c, r in zip(cases, res)]


def _errors(rows: list[dict], metric: str) -> list[float]:
    return [r["p" + metric] / r["m" + metric] - 1.0 for r in rows]


def _cell(rows: list[dict], metric: str) -> str:
    e = _errors(rows, metric)
    return f"{statistics.median(e):+.1%} ({statistics.median(map(abs, e)):.1%})"


def gap_split(rows: list[dict]) -> list[str]:
    """Per TP: measured - twin TPOT (ms) = a + b x C + k x (the twin's FP8 KV read time per step), by least
    squares, leaving out the rows whose server queued (measured TTFT over 3x the twin's: the KV pool)."""
    from twin.hardware.catalog import resolve_gpu, resolve_model
    m, gpu = resolve_model("llama-3.1-70b"), resolve_gpu("H100-SXM")
    out = []
    for tp in sorted({r["tp"] for r in rows}):
        rs = [r for r in rows if r["tp"] == tp and r["mttft"] < 3 * r["pttft"]]
        per_token = m.num_hidden_layers * m.num_key_value_heads / tp * m.head_dim * 2      # FP8 K and V bytes
        kv_ms = [r["conc"] * (0.9 * r["isl"] + 0.45 * r["osl"]) * per_token / (gpu.memory_bandwidth_bytes_per_s
                                                                                 * PRIOR) * 1e3 for r in rs]
        x = np.c_[np.ones(len(rs)), [r["conc"] for r in rs], kv_ms]
        (a, b, k), *_ = np.linalg.lstsq(x, np.array([r["mtpot"] - r["ptpot"] for r in rs]), rcond=None)
        out.append(f"TP{tp}: n {len(rs)}, a {a:+.2f} ms per step, b {b * 1e3:+.1f} us per sequence, "
                   f"k {k:+.2f} x the twin's KV read time")
    return out


def report(runs: dict[float, list[dict]]) -> None:
    values = sorted(runs)
    base = runs.get(PRIOR)
    if base:
        print("the decode gap at the prior:", *gap_split(base), sep="\n  ")
    print("\n| held out | n | picked on the others | TPOT at the prior | at the pick | TTFT at the prior | at the pick |")
    print("|---|---|---|---|---|---|---|")
    for name, held in FOLDS.items():
        pick = min(values, key=lambda v: abs(statistics.median(_errors([r for r in runs[v] if not held(r)], "tpot"))))
        test = {v: [r for r in runs[v] if held(r)] for v in values}
        prior = _cell(test[PRIOR], "tpot") if base else "-"
        prior_ttft = _cell(test[PRIOR], "ttft") if base else "-"
        print(f"| {name} | {len(test[pick])} | {pick} | {prior} | {_cell(test[pick], 'tpot')} | {prior_ttft} | "
              f"{_cell(test[pick], 'ttft')} |")
    print()
    for v in values:
        print(f"{v}: all {len(runs[v])} rows TPOT {_cell(runs[v], 'tpot')}, TTFT {_cell(runs[v], 'ttft')}")


RUN_COUNTS = ("tp", "isl", "osl", "conc")
RUN_TIMES = ("mtpot", "ptpot", "mttft", "pttft")


def read_runs(path: Path) -> dict[float, list[dict]]:
    """A ``--save`` file: {value: [row, ...]}, each value a number in (0, 1], each row's counts whole numbers >= 1
    and its times finite numbers > 0 (``simulate``'s rows, ``saved_rows.check_rows``); else one line."""
    out = {}
    for key, rows in read_json(path).items():
        value = number_list(key, f"{path}: key", low=0.0, low_open=True, high=1.0)
        if len(value) != 1:
            raise TwinInputError(f"{path}: {key!r}: expected one value in (0, 1] (a --save file)")
        out[value[0]] = check_rows(rows, f"{path}: {key!r}", counts=RUN_COUNTS, positive=RUN_TIMES)
    if not out:
        raise TwinInputError(f"{path}: no runs (a --save file)")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", default="0.2,0.25,0.3,0.35,0.4,0.45")
    ap.add_argument("--save", type=Path)
    ap.add_argument("--load", type=Path)
    args = ap.parse_args()
    check_out_path(args.save, "--save")
    if args.load:
        runs = read_runs(args.load)
    else:
        runs = {v: simulate(v) for v in number_list(args.grid, "--grid", low=0.0, low_open=True, high=1.0) + [PRIOR]}
    if args.save:
        args.save.write_text(json.dumps(runs))
    report(runs)


if __name__ == "__main__":
    run_script(main)
