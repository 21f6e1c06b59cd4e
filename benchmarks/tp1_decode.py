"""What a TP 1 decode step pays that the all-reduces carry at TP > 1 (issue 33, round 10; docs/fidelity.md "Round 10:
Llama on B200 and the vLLM 0.10.2 decode gap"; the term: ``twin.cost.unsharded_decode``).

No simulation, measured rows only. Per set of rows that differ in the TP size alone (same model, GPU, format,
release, measurement date, ISL / OSL, CONC <= 8, no expert or attention-data parallelism), the measured TPOT is
split by least squares into a fixed time K per (ISL, OSL, CONC) group, a part TP divides (w / TP, per group) and
one all-reduce part A that only TP > 1 pays:

    TPOT = K_g + w_g / TP + A x [TP > 1]

A is printed per step and per all-reduce (the twin's count at TP > 1: 2 per decoder layer, plus one per layer for
a q / k norm across heads). With A small, K is what a step pays at every TP, TP 1 included. Also printed: the fit
without A (how much it explains) and, per set, K against the decoder layers.

Then (issue 33, round 12; docs/fidelity.md "Round 12: a fixed decode time per decoder layer") the fixed time per
step against the decoder layers across sets, per GPU: at the reference group (1k / 1k, CONC 4) each set's fixed
time (K where the set has a TP 1 row; K + A, one number, where it has TP 2 / 4 / 8 only, the H100 sets) is split by
least squares into a part per step S and a part per decoder layer l, ``fixed = S + l x layers``, with standard
errors and each set held out in turn (what the others predict for it).

    python benchmarks/tp1_decode.py            # < 1 s
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from twin.errors import run_script  # noqa: E402
from twin.fitting.layer_fixed_prior import tp_split  # noqa: E402

GROUND_TRUTH = Path(__file__).resolve().parents[2] / "shared" / "ground-truth"
CSV = "vllm-silicon-h100-b200/measurements.csv"

# (label, decoder layers, all-reduces per step at TP > 1, row filter): the B200 sets with TP 1 rows
SETS = (
    ("Llama-3.1-70B FP8 (0.10.2)", 80, 160, lambda r: "Llama" in r["model_path"] and r["system"] == "b200_sxm"
     and r["precision"] == "fp8"),
    ("Llama-3.1-70B NVFP4 (0.10.2)", 80, 160, lambda r: "Llama" in r["model_path"] and r["system"] == "b200_sxm"
     and r["precision"] == "fp4"),
    ("MiniMax-M2.5 NVFP4 (0.19.0, 2026-04-22)", 62, 186, lambda r: "MiniMax" in r["model_path"]
     and r["precision"] == "fp4" and r["backend_version"] == "0.19.0" and "measured=2026-04-22" in
     r["silicon_data_source"]),
    ("gpt-oss-120b MXFP4 (0.15.1)", 36, 72, lambda r: "gpt-oss" in r["model_path"] and r["system"] == "b200_sxm"
     and r["backend_version"] == "0.15.1"),
)


# (label, decoder layers, row filter): the H100 sets (TP 2 / 4 / 8 only: K + A is one number)
H100_SETS = (
    ("Llama-3.1-70B FP8 (0.10.2)", 80, lambda r: "Llama" in r["model_path"] and r["system"] == "h100_sxm"
     and r["precision"] == "fp8"),
    ("gpt-oss-120b MXFP4 (0.18.0)", 36, lambda r: "gpt-oss" in r["model_path"] and r["system"] == "h100_sxm"
     and r["backend_version"] == "0.18.0"),
)
REFERENCE = (1024, 1024, 4)        # (ISL, OSL, CONC): the group every set has


def light_rows(rows: list[dict], keep) -> list[dict]:
    return [r for r in rows if r["mode"] == "agg" and keep(r) and int(r["batch_size"]) <= 8
            and r["moe_ep_size"] in ("", "1") and r["attention_dp_size"] in ("", "1")]


def split(rows: list[dict], with_allreduce: bool = True) -> tuple[dict, float | None, float]:
    """({group: (K, w)}, A or None, rms in ms) by least squares (``twin.fitting.layer_fixed_prior.tp_split``)."""
    return tp_split([(int(r["tp_size"]), (int(r["isl"]), int(r["osl"]), int(r["batch_size"])),
                      float(r["silicon_tpot_ms"])) for r in rows], with_allreduce)


def main() -> None:
    path = Path(sys.argv[1]) / CSV if len(sys.argv) > 1 else GROUND_TRUTH / CSV
    rows = list(csv.DictReader(path.open()))
    print("| rows (CONC <= 8) | n | TPs | A ms per step | A per all-reduce | K ms (range over groups) | "
          "K / layer (us) | rms with / without A (ms) |")
    print("|---|---|---|---|---|---|---|---|")
    for label, layers, n_ar, keep in SETS:
        sel = light_rows(rows, keep)
        tps = sorted({int(r["tp_size"]) for r in sel})
        groups, a, rms = split(sel)
        _, _, rms0 = split(sel, with_allreduce=False)
        ks = [k for k, _ in groups.values()]
        print(f"| {label} | {len(sel)} | {'/'.join(map(str, tps))} | {a:+.2f} | {a / n_ar * 1e3:+.1f} us | "
              f"{min(ks):.2f}-{max(ks):.2f} | {min(ks) / layers * 1e3:.0f}-{max(ks) / layers * 1e3:.0f} | "
              f"{rms:.3f} / {rms0:.3f} |")
    by_layers(rows)


def fixed_at_reference(rows: list[dict]) -> float:
    """ms: the set's fixed time per step at ``REFERENCE``: K with a TP 1 row, else K + A (TP 2 / 4 / 8 only)."""
    has_tp1 = any(int(r["tp_size"]) == 1 for r in rows)
    groups, a, _ = split(rows, with_allreduce=has_tp1)
    return groups[REFERENCE][0] + (0.0 if has_tp1 or a is None else a)


def step_and_layer(points: list[tuple[int, float]]) -> tuple[float, float, float, float]:
    """(S, l, se of S, se of l) of ``fixed = S + l x layers`` by least squares over ``points`` ((layers, fixed));
    standard errors nan with fewer than three points."""
    x = np.array([[1.0, float(n)] for n, _ in points])
    y = np.array([f for _, f in points])
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    dof = len(points) - 2
    if dof <= 0:
        return float(beta[0]), float(beta[1]), float("nan"), float("nan")
    sigma2 = float(np.sum((x @ beta - y) ** 2)) / dof
    cov = sigma2 * np.linalg.inv(x.T @ x)
    return float(beta[0]), float(beta[1]), float(np.sqrt(cov[0, 0])), float(np.sqrt(cov[1, 1]))


def by_layers(rows: list[dict]) -> None:
    """The fixed time per step at ``REFERENCE`` against the decoder layers, per GPU (see the module docstring)."""
    for gpu, sets in (("B200", [(lbl, n, keep) for lbl, n, _, keep in SETS]), ("H100", list(H100_SETS))):
        points = []
        print(f"\n{gpu}, {REFERENCE[0]} / {REFERENCE[1]} CONC {REFERENCE[2]}: fixed time per step = S + l x layers")
        print("| set | layers | fixed ms | per layer us | held out: S + l x layers (ms) |")
        print("|---|---|---|---|---|")
        for label, layers, keep in sets:
            points.append((label, layers, fixed_at_reference(light_rows(rows, keep))))
        for label, layers, fixed in points:
            others = [(n, f) for lbl, n, f in points if lbl != label]
            s0, l0, _, _ = step_and_layer(others)
            held = f"{s0 + l0 * layers:.2f}" if len({n for n, _ in others}) >= 2 else "- (one depth left)"
            print(f"| {label} | {layers} | {fixed:.2f} | {fixed / layers * 1e3:.1f} | {held} |")
        s0, l0, se_s, se_l = step_and_layer([(n, f) for _, n, f in points])
        print(f"S = {s0:+.2f} +/- {se_s:.2f} ms per step, l = {l0 * 1e3:.1f} +/- {se_l * 1e3:.1f} us per layer "
              f"({len(points)} sets)")


if __name__ == "__main__":
    run_script(main)
