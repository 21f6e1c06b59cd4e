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

    python benchmarks/tp1_decode.py            # < 1 s
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

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


if __name__ == "__main__":
    main()
