"""gpt-oss-120b's loaded B200 rows at the embedded defaults, term by term (issue 33, round 12): the signed TPOT /
TTFT error of every N-th gpt-oss B200 row (or of another family's rows, ``--family``) by concurrency band and prompt
length, at the embedded defaults and with one candidate term changed at a time (a variant: fit keys and values in
model units, as the fit passes them to the cost model).

    python benchmarks/gptoss_loaded_rows.py [--every 3] [--family gpt-oss] [--gpu b200] [--variants a,b] [--rows]

Variants (each a hypothesis of docs/fidelity.md "Round 12: gpt-oss's loaded B200 rows"; none embedded):
* ``embedded``: the defaults; ``uniform routing``: gpt-oss's active expert share at its prior 1, which is the
  default (round 12 tried 0.75 and left it out: the same as ``embedded`` unless an entry is embedded);
* ``mxfp4 eager MoE 0``: the MXFP4 TRT-LLM-gen path's eager floor per MoE layer at the op-count rule's 0 (11 host
  ops per layer, fewer than the dense layer's 16: ``twin.fitting.launch_prior``) instead of the generation's 1.15 ms;
* ``layer-token 0.16``: that floor at 0 and Blackwell's per-token-per-layer time at gpt-oss's own reading (0.16 us,
  ``benchmarks/layer_token_reading.py`` with the floor at 0) instead of 0.2; ``layer-token 0.16 only``: without the
  floor;
* ``decode share 0``: the MXFP4 path's decode tokens pay none of the per-token-per-layer time
  (``twin.cost.decode_tokens``; prior 1); ``share 0 + token 0.16``: both;
* ``per-seq 9 us``: the per-sequence time halved (18.7 -> 9.35 us);
* ``active share 0.8`` / ``0.75``: the MXFP4 experts' routing drawn uniformly from only that share of them
  (``moe_active_expert_share``, twin.cost.moe_terms).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from twin.errors import TwinInputError, run_script  # noqa: E402

MXFP4_FLOOR = "eager_moe_layer_host_s@blackwell+experts_mxfp4"
LAYER_TOKEN = "layer_token_overhead_s@blackwell"
SHARE = "layer_token_decode_share@blackwell+experts_mxfp4"
ACTIVE_SHARE = "moe_active_expert_share@experts_mxfp4"     # twin.cost.moe_terms (round 12; tried 0.75, not embedded)

VARIANTS: dict[str, dict[str, float]] = {
    "embedded": {},
    "uniform routing": {ACTIVE_SHARE: 1.0},
    "mxfp4 eager MoE 0": {MXFP4_FLOOR: 0.0},
    "layer-token 0.16": {MXFP4_FLOOR: 0.0, LAYER_TOKEN: 0.16e-6},
    "layer-token 0.16 only": {LAYER_TOKEN: 0.16e-6},
    "decode share 0": {SHARE: 0.0},
    "share 0 + token 0.16": {SHARE: 0.0, LAYER_TOKEN: 0.16e-6},
    "per-seq 9 us": {"per_seq_overhead_s": 9.35e-6},
    "active share 0.8": {ACTIVE_SHARE: 0.8},
    "active share 0.75": {ACTIVE_SHARE: 0.75},
}


def band(conc: int) -> str:
    return "C<=16" if conc <= 16 else "C>=32"


def rows(family: str, gpu: str, every: int) -> list:
    from twin.fitting.silicon import model_family, silicon_cases
    cases = [c for c in silicon_cases()[0]
             if model_family(c.row.model_path) == family and c.row.system.startswith(gpu)]
    return cases[::every]


def summary(cases: list, replayed: list) -> dict[str, str]:
    """Median |error| (median signed) of TPOT and TTFT, all rows and by band / prompt length."""
    out = {}
    groups = {"all": lambda r: True, "C<=16": lambda r: r.concurrency <= 16, "C>=32": lambda r: r.concurrency >= 32,
              "ISL 1k": lambda r: r.isl <= 1024, "ISL 8k": lambda r: r.isl > 1024}
    for g, keep in groups.items():
        for metric, key in (("TPOT", "mean_tpot_ms"), ("TTFT", "mean_ttft_ms")):
            errs = [p.metrics[key] / getattr(c.row, key.removeprefix("mean_")) - 1
                    for c, p in zip(cases, replayed) if keep(c.row)]
            out[f"{metric} {g}"] = (f"{statistics.median(abs(e) for e in errs):.1%} "
                                    f"({statistics.median(errs):+.1%})" if errs else "-")
    return out


def main() -> None:
    from twin.fitting.fit import simulate_cases
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--every", type=int, default=3)
    ap.add_argument("--family", default="gpt-oss")
    ap.add_argument("--gpu", default="b200")
    ap.add_argument("--variants", default="", help="comma-separated variant names (default: all)")
    ap.add_argument("--rows", action="store_true", help="also print every row's signed TPOT / TTFT")
    args = ap.parse_args()
    only = [v.strip() for v in args.variants.split(",") if v.strip()]
    if unknown := [v for v in only if v not in VARIANTS]:
        raise TwinInputError(f"--variants: {', '.join(unknown)} unknown; allowed: {', '.join(VARIANTS)}")
    if args.every < 1:
        raise TwinInputError(f"--every = {args.every}: must be >= 1")
    cases = rows(args.family, args.gpu, args.every)
    if not cases:
        raise TwinInputError(f"--family {args.family} --gpu {args.gpu}: no silicon rows")
    table, per_row = {}, {}
    for name, params in VARIANTS.items():
        if only and name not in only:
            continue
        replayed = simulate_cases(cases, params, max_sim_s=60.0)
        table[name], per_row[name] = summary(cases, replayed), replayed
        print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in table[name].items()), flush=True)
    if args.rows:
        names = list(per_row)
        print("| row | TPOT ms | TTFT ms | " + " | ".join(names) + " |")
        for i, c in enumerate(cases):
            r = c.row
            cells = [f"{per_row[n][i].metrics['mean_tpot_ms'] / r.tpot_ms - 1:+.1%} / "
                     f"{per_row[n][i].metrics['mean_ttft_ms'] / r.ttft_ms - 1:+.1%}" for n in names]
            print(f"| {r.isl}/{r.osl} C{r.concurrency} TP{r.tp} {r.vllm_version or '-'} | {r.tpot_ms:.2f} | "
                  f"{r.ttft_ms:.0f} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    run_script(main)
