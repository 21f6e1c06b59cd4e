"""Does the MoE residual follow the expert GEMM shape? The embedded defaults' signed errors on the MoE silicon rows
by per-rank expert width and tokens per expert, beside a dense control and EP / TP-only pairs.

Reads the per-case records of ``python benchmarks/fidelity_real.py --defaults-only --json out.json`` and re-reads
each silicon row's layout as its server ran it (``twin.fitting.silicon_layout.row_layout``; the records carry the
row's labels). Shape per rank, for the hypothesis that grouped-GEMM efficiency falls with narrow or thin expert
GEMMs (issue 33, round 3):

* per-rank expert width ``n`` (intermediate columns of one expert on one GPU): ``moe_intermediate_size`` / TP
  without expert parallelism (each expert split over the TP ranks), the full width with it (whole experts per
  rank);
* tokens per expert per decode step ``m_dec`` = running batch (the twin's mean, all DP ranks) x top_k / experts;
* tokens per expert in a prompt chunk ``m_pf`` = min(ISL, 8,192) x top_k / experts (light load, C <= 8).

Errors: predicted / measured - 1 (negative: the twin is too fast), median per group.

    python benchmarks/moe_shape_slices.py out.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fold_report import defaults_cases  # noqa: E402
from twin.fitting.silicon import silicon_cases  # noqa: E402
from twin.fitting.silicon_layout import row_layout  # noqa: E402
from twin.hardware.catalog import ModelSpec, resolve_model  # noqa: E402
from twin.hardware.moe import touched_fraction  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402

PREFILL_CHUNK_TOKENS = 8192     # the silicon rows' max_num_batched_tokens bound on one prompt chunk


def expert_width_per_rank(model: ModelSpec, tensor_parallel_size: int, expert_parallel: bool) -> int:
    """Intermediate columns of one routed expert on one GPU: whole experts with expert parallelism, else TP-split."""
    return model.moe_intermediate_size if expert_parallel else model.moe_intermediate_size // tensor_parallel_size


def tokens_per_expert(model: ModelSpec, tokens: float) -> float:
    """Mean tokens each routed expert receives from ``tokens`` tokens (uniform routing): tokens x top_k / experts."""
    return tokens * model.num_experts_per_tok / model.num_experts


def _base(name: str) -> str:
    """A case name without its request-count tag (" [160/320]")."""
    return name.split(" [")[0]


def shape_rows(records: list[dict], source: object = "the defaults file") -> list[dict]:
    """The silicon records with their run layout and (MoE) expert shape; a record of no runnable silicon row or of
    an unknown model is one line naming ``source``."""
    rows_by_name = {_base(c.run.name): c.row for c in silicon_cases(max_requests=None)[0]}
    out = []
    for r in records:
        if r["source"] != "silicon":
            continue
        if _base(r["name"]) not in rows_by_name:
            raise TwinInputError(f"{source}: case {r['name']!r}: not a runnable silicon row of the ground truth")
        lay = row_layout(rows_by_name[_base(r["name"])])
        tp, dp, ep = lay["tensor_parallel_size"], lay["data_parallel_size"], lay["enable_expert_parallel"]
        try:
            model = resolve_model(r["model"])
        except ValueError as exc:
            raise TwinInputError(f"{source}: case {r['name']!r}: model: {exc}") from None
        x = dict(family=r["family"], gpu=r["gpu"], fmt=r.get("moe_quant"), conc=r["conc"], isl=r["isl"], osl=r["osl"],
                 version=r.get("version"), tp=tp, dp=dp, ep=ep, ttft=r["errors"].get("mean_ttft_ms"),
                 tpot=r["errors"].get("mean_tpot_ms"), measured_tpot_ms=r["measured"]["mean_tpot_ms"],
                 predicted_tpot_ms=r["predicted"]["mean_tpot_ms"], moe=model.is_moe,
                 layout=f"TP{tp}" + (f" DP{dp}" if dp > 1 else "") + (" EP" if ep else ""))
        if model.is_moe:
            batch = r["predicted"].get("mean_running_batch") or r["conc"]
            x.update(width=expert_width_per_rank(model, tp, ep), m_dec=tokens_per_expert(model, batch),
                     m_pf=tokens_per_expert(model, min(r["isl"], PREFILL_CHUNK_TOKENS)),
                     touched=touched_fraction(model.num_experts, model.num_experts_per_tok, round(batch)))
        out.append(x)
    return out


def _med(xs: list) -> str:
    xs = [v for v in xs if v is not None]
    return f"{statistics.median(xs):+.1%}" if xs else "-"


def table(title: str, rows: list[dict], key: Callable[[dict], tuple]) -> list[str]:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for x in rows:
        groups[key(x)].append(x)
    lines = [f"\n{title}", "| group | n | TTFT mean | TPOT |", "|---|---|---|---|"]
    for g in sorted(groups, key=str):
        xs = groups[g]
        lines.append(f"| {' '.join(str(v) for v in g)} | {len(xs)} | {_med([x['ttft'] for x in xs])} | "
                     f"{_med([x['tpot'] for x in xs])} |")
    return lines


def ep_pairs(rows: list[dict]) -> list[str]:
    """MoE rows run with and without expert parallelism, otherwise alike (GPU, format, TP, lengths, load, release);
    repeated measurements of one setting are pooled (medians)."""
    def key(x: dict) -> tuple:
        return x["family"], x["gpu"], x["fmt"], x["tp"], x["isl"], x["osl"], x["conc"], x["version"]
    sides: dict[tuple, tuple[list[dict], list[dict]]] = defaultdict(lambda: ([], []))
    for x in rows:
        if x["moe"] and x["dp"] == 1:
            sides[key(x)][0 if x["ep"] else 1].append(x)
    lines = ["\nEP (whole experts per rank) vs TP-only (experts split over TP), same GPU, format, TP, ISL/OSL, C, "
             "vLLM", "| family GPU format TP ISL/OSL C vLLM | rows EP / TP-only | width EP / TP-only | "
             "TPOT measured ms EP / TP-only | TPOT twin ms EP / TP-only | TPOT error EP / TP-only | "
             "TTFT error EP / TP-only |",
             "|---|---|---|---|---|---|---|"]
    diffs = []

    def med(xs: list[dict], f: str) -> float:
        return statistics.median(x[f] for x in xs)
    for k in sorted(sides, key=lambda k: (k[3], k[6])):
        e, t = sides[k]
        if not e or not t:
            continue
        diffs.append(med(e, "measured_tpot_ms") / med(t, "measured_tpot_ms") - 1)
        fam, gpu, fmt, tp, isl, osl, conc, ver = k
        lines.append(f"| {fam} {gpu} {fmt} TP{tp} {isl}/{osl} C{conc} {ver} | {len(e)} / {len(t)} | "
                     f"{e[0]['width']} / {t[0]['width']} | {med(e, 'measured_tpot_ms'):.2f} / "
                     f"{med(t, 'measured_tpot_ms'):.2f} | {med(e, 'predicted_tpot_ms'):.2f} / "
                     f"{med(t, 'predicted_tpot_ms'):.2f} | {_med([x['tpot'] for x in e])} / "
                     f"{_med([x['tpot'] for x in t])} | {_med([x['ttft'] for x in e])} / "
                     f"{_med([x['ttft'] for x in t])} |")
    if diffs:
        lines.append(f"{len(diffs)} settings: measured TPOT, EP / TP-only - 1: median {_med(diffs)}, "
                     f"range {min(diffs):+.1%} .. {max(diffs):+.1%}")
    return lines


def decode_gap_by_load(rows: list[dict]) -> list[str]:
    """Measured - twin TPOT (ms) against concurrency at ISL/OSL 1k/1k, per deployment with >= 3 loads, and for MoE
    the routed experts a decode step touches (uniform routing, as a share of all): an expert-efficiency term scales
    with that work, a per-step cost does not."""
    groups: dict[tuple, dict[int, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for x in rows:
        if (x["isl"], x["osl"]) == (1024, 1024):
            groups[(x["family"], x["gpu"], x["fmt"], x["layout"], x["version"])][x["conc"]].append(x)
    lines = ["\nDecode: measured - twin TPOT, ms, by concurrency (1k/1k; MoE: [share of routed experts a step "
             "touches])",
             "| family GPU format layout vLLM | C: gap ms [touched] |", "|---|---|"]
    for k in sorted(groups, key=str):
        by_c = groups[k]
        if len(by_c) < 3:
            continue
        cells = []
        for c in sorted(by_c):
            xs = by_c[c]
            gap = statistics.median(x["measured_tpot_ms"] - x["predicted_tpot_ms"] for x in xs)
            touched = f" [{xs[0]['touched']:.2f}]" if xs[0]["moe"] else ""
            cells.append(f"C{c} {gap:+.2f}{touched}")
        lines.append(f"| {' '.join(str(v) for v in k)} | {', '.join(cells)} |")
    return lines


def _band(m: float) -> str:
    return "<1" if m < 1 else "1-4" if m < 4 else "4-16" if m < 16 else ">=16"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", type=Path)
    args = ap.parse_args()
    records = defaults_cases(args.json, need=("source", "errors", "measured", "predicted"),
                             row_need=("model", "family", "gpu", "conc", "isl", "osl"), metrics=("mean_tpot_ms",))
    rows = shape_rows(records, args.json)
    moe = [x for x in rows if x["moe"]]
    print(f"{len(rows)} silicon rows, {len(moe)} MoE")
    out = table("MoE rows by family, GPU, expert format, per-rank expert width (columns), layout", moe,
                lambda x: (x["family"], x["gpu"], x["fmt"], x["width"], x["layout"]))
    out += table("Dense control by family, GPU, layout", [x for x in rows if not x["moe"]],
                 lambda x: (x["family"], x["gpu"], x["layout"]))
    out += table("MoE decode by tokens per expert per step (running batch x top_k / experts)", moe,
                 lambda x: (x["family"], x["gpu"], _band(x["m_dec"])))
    out += table("MoE prefill at C <= 8 by tokens per expert in a prompt chunk (min(ISL, 8192) x top_k / experts)",
                 [x for x in moe if x["conc"] <= 8], lambda x: (x["family"], x["gpu"], round(x["m_pf"])))
    out += ep_pairs(rows)
    out += decode_gap_by_load(rows)
    print("\n".join(out))


if __name__ == "__main__":
    run_script(main)
