"""``fidelity_real.py``'s printed table cells and its ``--defaults-only`` report (no folds: the embedded defaults'
errors by source, GPU and family, and every case's record), moved out of ``benchmarks/fidelity_real.py`` unchanged
(round 23, 33zD: that file's size)."""

from __future__ import annotations

import time

from twin.fitting.joint import FOLDS, METRICS, errors, summarize
from twin.hardware.catalog import resolve_model


def cells(summary: dict) -> str:
    out = []
    for key, _ in METRICS:
        s = summary[key]
        out.append(f"{100 * s['abs']:5.1f}% {100 * s['signed']:+6.1f}%" if s["abs"] is not None else f"{'-':>14}")
    return " | ".join(out)


def header(first: str) -> str:
    return f"{first:<34} {'n':>4} | " + " | ".join(f"{t:>14}" for _, t in METRICS)


def case_record(case, predicted: dict) -> dict:
    """One case's attributes (for slicing the errors: GPU, family, format, layout, lengths, load) and its
    signed errors at the predicted metrics."""
    rec = {"name": case.run.name, "source": FOLDS["source"](case), "gpu": FOLDS["GPU"](case),
           "family": FOLDS["family"](case), "moe": resolve_model(case.target.model).is_moe,
           "errors": errors(case, predicted),
           "measured": {k: case.run.metrics.get(k) for k, _ in METRICS}, "predicted": dict(predicted)}
    row = getattr(case, "row", None)
    if row is not None:
        rec.update(model=row.model_path, version=row.vllm_version, gemm_quant=row.gemm_quant,
                   moe_quant=row.moe_quant, isl=row.isl, osl=row.osl, conc=row.concurrency, tp=row.tp,
                   ep=row.moe_ep, dp=row.attention_dp, client=row.published_client, system=row.system)
    return rec


def defaults_only(cases, default_pred, report, args, t0) -> None:
    pairs = list(zip(cases, default_pred))
    for kind, group_of in FOLDS.items():
        print(f"\n== embedded defaults by {kind}")
        print(header(kind))
        for g in dict.fromkeys(group_of(c) for c in cases):
            part = [(c, p) for c, p in pairs if group_of(c) == g]
            print(f"{g[:34]:<34} {len(part):4d} | {cells(summarize(part))}")
            report["folds"].setdefault(kind, {})[g] = summarize(part)
    for label, moe in (("dense models", False), ("MoE models", True)):
        part = [(c, p) for c, p in pairs if resolve_model(c.target.model).is_moe == moe]
        print(f"{label:<34} {len(part):4d} | {cells(summarize(part))}")
    print(f"{'all':<34} {len(pairs):4d} | {cells(summarize(pairs))}")
    print(f"\n({time.perf_counter() - t0:.0f} s)")
    report["cases"] = [case_record(c, p) for c, p in pairs]
