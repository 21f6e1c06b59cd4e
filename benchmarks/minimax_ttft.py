"""MiniMax-M2.5's TTFT residuals in-sample, over every row (issue 33, round 13; docs/fidelity.md "Round 13:
MiniMax-M2.5's prompt time").

    # every MiniMax row at the embedded defaults: signed / |error| medians of TTFT and TPOT by GPU, release,
    # format, ISL and load band (light: CONC <= 16); --pr-script: the nightly NVFP4 rows with their own script's
    # flags (twin.fitting.minimax_scripts; from round 14 row_server gives them these, so a no-op); --path-floors:
    # MiniMax's eager MoE floors at their launch counts (the @blackwell+experts_<format> keys, on MiniMax's rows
    # only; round 14 embeds the NVFP4 one on a GQA-only key, twin.cost.eager_path_floors)
    python benchmarks/minimax_ttft.py residuals [--pr-script] [--path-floors] [--save X.json]      # ~6-15 min
    python benchmarks/minimax_ttft.py compare A.json B.json
    # the eager MoE floor per MiniMax path read off its light-load 1k rows whose prompt steps run eagerly (the
    # March v0.17.0 FP8 rows; the nightly NVFP4 rows with their own script's flags), beside its launch count
    python benchmarks/minimax_ttft.py floor-grid                                                 # ~3 min

The launch counts (host-dispatched ops per decoder layer of an eager prompt step, ``twin.fitting.launch_prior``):
the FP8 Triton path 27; the NVFP4 path 22: GQA attention 9 + the TP query / key RMSNorm 4 (as the FP8 layer), MoE
9 (fused_add_rms_norm, the FP32 router's cast and GEMM, sigmoid + bias top-k and renormalisation 3, the FP4
activation quant, FlashInfer's fused MoE call, the all-reduce). The floor per MoE layer beyond a dense layer's is
(ops - 16) x the per-op time of Blackwell's embedded 0.84 ms per 16-op layer.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_out_path  # noqa: E402
from twin.cost.default_terms import GENERATION_TERMS  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.fitting.fit import simulate_cases  # noqa: E402
from twin.fitting.joint import default_start  # noqa: E402
from twin.fitting.launch_prior import PATH_LAYER_OPS, moe_extra_s  # noqa: E402
from twin.fitting.minimax_scripts import nightly_pr_row, pr_script_server  # noqa: E402
from twin.fitting.silicon import model_family, silicon_cases  # noqa: E402

FLOOR = "eager_moe_layer_host_s@blackwell+experts_{}"
MINIMAX_NVFP4_LAYER_OPS = 22
LAYER_OPS = {"fp8": PATH_LAYER_OPS[("blackwell", "fp8")][0], "nvfp4": MINIMAX_NVFP4_LAYER_OPS}
LIGHT_CONC = 16
GRID_MS = (0.0, 0.3, 0.6, 0.9, 1.15)


def counted_floors_s() -> dict[str, float]:
    per_layer = GENERATION_TERMS["blackwell"]["eager_layer_host_s"]
    return {FLOOR.format(fmt): moe_extra_s(per_layer, ops) for fmt, ops in LAYER_OPS.items()}


def minimax_cases(pr_script: bool, keep=lambda row: True) -> list:
    out = []
    for c in silicon_cases()[0]:
        if model_family(c.row.model_path) != "minimax" or not keep(c.row):
            continue
        if pr_script and nightly_pr_row(c.row):
            c = dataclasses.replace(c, run=dataclasses.replace(c.run, server=pr_script_server(c.run.server, c.row)))
        out.append(c)
    return out


def _records(cases: list, params: dict) -> list[dict]:
    out = []
    for c, r in zip(cases, simulate_cases(cases, default_start() | params, max_sim_s=60.0)):
        w = c.row
        out.append({"id": w.id, "gpu": w.system, "release": w.vllm_version, "format": w.precision, "isl": w.isl,
                    "osl": w.osl, "conc": w.concurrency, "tp": w.tp, "ttft_ms": w.ttft_ms, "tpot_ms": w.tpot_ms,
                    "twin_ttft_ms": r.metrics["mean_ttft_ms"], "twin_tpot_ms": r.metrics["mean_tpot_ms"]})
    return out


def _slice(r: dict) -> tuple:
    return (r["gpu"][:4], r["release"][:9], r["format"], r["isl"], "light" if r["conc"] <= LIGHT_CONC else "loaded")


def _errors(r: dict) -> tuple[float, float]:
    return r["twin_ttft_ms"] / r["ttft_ms"] - 1.0, r["twin_tpot_ms"] / r["tpot_ms"] - 1.0


def table(runs: list[list[dict]]) -> None:
    """Per slice and over all rows: TTFT / TPOT signed median and |error| median of each run (before -> after)."""
    groups: dict = collections.defaultdict(lambda: [[] for _ in runs])
    for i, recs in enumerate(runs):
        for r in recs:
            for key in (_slice(r), ("all",)):
                groups[key][i].append(_errors(r))

    def fmt(vals: list, j: int) -> str:
        signed = 100 * statistics.median(v[j] for v in vals)
        return f"{signed:+6.1f} ({100 * statistics.median(abs(v[j]) for v in vals):4.1f})"
    print(f"{'slice':42s} {'n':>4s}  TTFT signed (|error|) medians{'':10s} TPOT")
    for key in sorted(groups, key=str):
        cols = groups[key]
        print(f"{str(key):42s} {len(cols[0]):4d}  {' -> '.join(fmt(v, 0) for v in cols):34s}  "
              f"{' -> '.join(fmt(v, 1) for v in cols)}")


def floor_grid() -> None:
    light_1k = (lambda row: row.isl == 1024 and row.concurrency <= LIGHT_CONC
                and (nightly_pr_row(row) or row.vllm_version == "0.17.0"))
    cases = minimax_cases(True, light_1k)
    counted = counted_floors_s()
    print("counted floor per MoE layer:", {k: f"{v * 1e3:.3f} ms" for k, v in counted.items()})
    for fmt, label in (("fp8", "March v0.17.0 FP8 (Triton), 1k, CONC <= 16"),
                       ("nvfp4", "nightly NVFP4 (08bcde8f1 flags), 1k, CONC <= 16")):
        part = [c for c in cases if (c.row.precision == "fp4") == (fmt == "nvfp4")]
        print(f"{label}: {len(part)} rows")
        for ms in GRID_MS + (counted[FLOOR.format(fmt)] * 1e3,):
            recs = _records(part, {FLOOR.format(fmt): ms * 1e-3})
            errs = [_errors(r)[0] for r in recs]
            print(f"  floor {ms:5.3f} ms: TTFT signed median {100 * statistics.median(errs):+6.1f} %  "
                  f"(TP 2 {100 * statistics.median(e for e, r in zip(errs, recs) if r['tp'] == 2):+6.1f}, "
                  f"TP 4 {100 * statistics.median(e for e, r in zip(errs, recs) if r['tp'] == 4):+6.1f})")


def _saved(path: Path) -> list[dict]:
    """A ``residuals --save`` file's records, or a one-line error naming the file."""
    try:
        recs = json.loads(path.read_text())
        _ = [(r["id"], _errors(r)) for r in recs]
    except (OSError, ValueError, TypeError, KeyError, ZeroDivisionError) as exc:
        raise TwinInputError(f"compare: {path}: not a `residuals --save` file ({type(exc).__name__})") from None
    return recs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    res = sub.add_parser("residuals")
    res.add_argument("--pr-script", action="store_true")
    res.add_argument("--path-floors", action="store_true")
    res.add_argument("--save", type=Path)
    cmp_ = sub.add_parser("compare")
    cmp_.add_argument("files", type=Path, nargs=2)
    sub.add_parser("floor-grid")
    args = ap.parse_args()
    check_out_path(getattr(args, "save", None), "--save")
    if args.cmd == "residuals":
        recs = _records(minimax_cases(args.pr_script), counted_floors_s() if args.path_floors else {})
        if args.save:
            args.save.write_text(json.dumps(recs))
        table([recs])
    elif args.cmd == "compare":
        runs = [{r["id"]: r for r in _saved(p)} for p in args.files]
        if runs[0].keys() != runs[1].keys():
            raise TwinInputError(f"compare: {args.files[0]} and {args.files[1]} hold different rows")
        table([list(runs[0].values()), [runs[1][k] for k in runs[0]]])
    else:
        floor_grid()


if __name__ == "__main__":
    run_script(main)
