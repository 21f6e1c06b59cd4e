"""Where the decode (TPOT) residual sits (issue 33, round 6): per slice of the silicon rows, the measured minus
the twin's mean TPOT split by least squares into a per-step constant (ms per step), a per-sequence slope (us per
sequence per step) and a per-context-token slope (us per sequence per 1,000 context tokens), beside the slice's
median signed error; the model's vocabulary beside its per-sequence slope; and the MiniMax-M2.5 B200 FP8 / NVFP4
pairs (same layout, shape, concurrency and release) whose TPOT difference the weight bytes do not explain.

    python benchmarks/decode_slices.py out.json          # a ``fidelity_real.py --defaults-only --json`` file

Per row: gap = measured - twin TPOT (ms); C = concurrency per engine (CONC / attention DP); context per sequence
at the middle of its output = 0.9 x ISL + 0.45 x OSL (the client's uniform lengths on [0.8 L, L]). Fitted per
slice (n >= 4): gap = a + b x C + c x C x context / 1000.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fold_report import defaults_cases  # noqa: E402
from twin.errors import run_script  # noqa: E402

# the row attributes the fits compute with (each silicon record carries them)
ROW_KEYS = ("gpu", "family", "tp", "ep", "dp", "isl", "osl", "conc")

# vocabulary (config.json ``vocab_size``) of the silicon models, for the per-sequence-slope-by-vocabulary table
VOCAB = {"qwen3": 151_936, "llama": 128_256, "kimi": 163_840, "minimax": 200_064, "gpt-oss": 201_088}


def _rows(path: Path) -> list[dict]:
    cases = defaults_cases(path, need=("source", "errors", "measured", "predicted"), row_need=ROW_KEYS)
    return [r for r in cases if r["source"] != "inference-perf" and "mean_tpot_ms" in r["errors"]]


def _fit(rs: list[dict]) -> tuple[float, float, float, float, float]:
    conc = np.array([r["conc"] / max(1, r["dp"]) for r in rs], float)
    ctx = np.array([(0.9 * r["isl"] + 0.45 * r["osl"]) / 1000.0 for r in rs])
    gap = np.array([r["measured"]["mean_tpot_ms"] - r["predicted"]["mean_tpot_ms"] for r in rs])
    (a, b, c), *_ = np.linalg.lstsq(np.c_[np.ones_like(conc), conc, conc * ctx], gap, rcond=None)
    (a2, b2), *_ = np.linalg.lstsq(np.c_[np.ones_like(conc), conc], gap, rcond=None)
    return a, b * 1e3, c * 1e3, a2, b2 * 1e3


def decomposition(rows: list[dict]) -> list[str]:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        fmt = str(r.get("moe_quant") or r.get("gemm_quant") or "bf16")
        groups[(r["family"], r["gpu"][:4], fmt, f"TP{r['tp']}", str(r.get("version")))].append(r)
    out = [f"{'family GPU format TP vLLM':<44} {'n':>3} | {'a ms':>6} {'b us/seq':>8} {'c us/seq/kctx':>13} | "
           f"{'a2 ms':>6} {'b2 us/seq':>9} | TPOT signed"]
    for k in sorted(groups, key=str):
        rs = groups[k]
        if len(rs) < 4:
            continue
        a, b, c, a2, b2 = _fit(rs)
        med = statistics.median(r["errors"]["mean_tpot_ms"] for r in rs)
        out.append(f"{' '.join(k):<44} {len(rs):>3} | {a:+6.2f} {b:+8.1f} {c:+13.1f} | {a2:+6.2f} {b2:+9.1f} | "
                   f"{med:+6.1%}")
    return out


def by_vocabulary(rows: list[dict]) -> list[str]:
    out = [f"{'family GPU':<16} {'vocab':>8} {'n':>4} | per-sequence slope b2 (us), two-term fit"]
    fams: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        fams[(r["family"], r["gpu"][:4])].append(r)
    for k in sorted(fams):
        if len(fams[k]) >= 4 and k[0] in VOCAB:
            out.append(f"{' '.join(k):<16} {VOCAB[k[0]]:>8} {len(fams[k]):>4} | {_fit(fams[k])[4]:+7.1f}")
    return out


def minimax_pairs(rows: list[dict]) -> list[str]:
    pairs: dict[tuple, dict] = defaultdict(dict)
    for r in rows:
        if r["family"] == "minimax" and r["gpu"].startswith("B200"):
            key = (r["tp"], r["ep"], r["dp"], r["isl"], r["osl"], r["conc"], str(r.get("version")))
            pairs[key][r.get("moe_quant")] = r
    out = ["MiniMax-M2.5 B200, FP8 minus NVFP4 TPOT (ms), same layout/shape/CONC/release: measured, twin, excess"]
    for k in sorted(pairs):
        p = pairs[k]
        if {"fp8", "nvfp4"} <= set(p):
            m = p["fp8"]["measured"]["mean_tpot_ms"] - p["nvfp4"]["measured"]["mean_tpot_ms"]
            t = p["fp8"]["predicted"]["mean_tpot_ms"] - p["nvfp4"]["predicted"]["mean_tpot_ms"]
            out.append(f"  TP{k[0]} EP{k[1]} DP{k[2]} {k[3]}/{k[4]} C={k[5]:<4} v{k[6]}: {m:+6.2f} {t:+6.2f} "
                       f"{m - t:+6.2f}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", type=Path)
    rows = _rows(ap.parse_args().json)
    for block in (decomposition(rows), by_vocabulary(rows), minimax_pairs(rows)):
        print("\n".join(block), end="\n\n")


if __name__ == "__main__":
    run_script(main)
