"""Which serving-stack property owns the per-token prompt cost ``layer_token_overhead_s`` (issue 33, round 16;
docs/fidelity.md "Round 16: the owner of Blackwell's per-token prompt cost").

The pooled light-load reading (``silicon_gemm_fraction.py``: X / layer = a + b x G / layer over TP) puts the part
TP does not divide, a, at 0.20-0.23 us per prompt token per decoder layer on every B200 family (Llama, MiniMax,
Kimi) and at 0.195 us on the H100 gpt-oss rows, but at 0.016 us on the H100 dense Llama rows (the same release as
B200 Llama). A property of the serving stack that every "high" group shares and no "low" group has would be a
better scope for the term than the GPU generation, and would let a fold without B200 rows learn it from the
H100 gpt-oss rows. This script states, per reading group, the candidate properties as vLLM's source and the
launch scripts give them (``OWNER_FACTS``), and tests each for that partition: a property owns the term only if
the values it takes on the high groups and on the low groups are disjoint (``partitions``).

``rows`` then says what a generation-free owner would be worth held out: the B200-held-out GPU fold's held-out
rows (the default report's, every 16th silicon row) at the fold's values (``--report``, a ``fidelity_real.py
--json`` file), and with Blackwell's dense per-token term at the value the fold already carries to Blackwell's
MoE paths from the H100 gpt-oss rows (``twin.fitting.moe_token_prior``). The fold's training rows have no B200
row, so its refit does not depend on a Blackwell-scoped value: the variant is exactly the fold such a scope would
give (no fit here).

    python benchmarks/layer_token_owner.py facts
    python benchmarks/layer_token_owner.py rows --report REPORT.json [--kind GPU --group B200]
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import positive_float, refuse_given  # noqa: E402
from benchmarks.fidelity_real import REFIT_SILICON_EVERY  # noqa: E402
from benchmarks.fold_report import fold_params  # noqa: E402
from benchmarks.error_medians import median_cell  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402

HIGH_US = 0.1       # a per layer above this: the group carries the term (the readings are 0.016 or 0.18-0.47)
TOKEN = "layer_token_overhead_s@blackwell"
SHARE = "layer_token_decode_share@blackwell"
CARRIED = "layer_token_overhead_s@blackwell+experts_mxfp4"   # what the B200 fold sets from the H100 gpt-oss rows

# reading group -> (a: us per prompt token per decoder layer, from silicon_gemm_fraction.py's pooled split, or the
# single-TP upper bound a + b G where only one TP was read; the properties below). Sources per property:
#   attention: vLLM's selector (vllm/platforms/cuda.py, _get_backend_priorities: SM100 tries FLASHINFER first, other
#     CUDA GPUs FLASH_ATTN; MLA on SM100 forces FLASHINFER_MLA where qk_nope_head_dim is 128, Kimi's); gpt-oss's
#     attention sinks do not move Hopper off FLASH_ATTN (FlashAttentionBackend.supports_sink: FA3 takes sinks,
#     fa_utils.flash_attn_supports_sinks), and GptOssForCausalLMConfig forces no backend (it raises the CUDA-graph
#     capture size only); vllm-project/vllm#19118: FlashInfer the Blackwell default from June 2025 (0.10.2's B200 rows)
#   kv: the launch scripts' --kv-cache-dtype (docs/fidelity.md, "Round 14"/"Round 15" launch tables; auto = bf16)
#   graph_8k: whether a CUDA graph covers an 8k prompt step (the scripts' capture sizes, 2048 at most: eager everywhere)
#   fused_ar: the all-reduce + RMSNorm fusion on the 8k prompt step (TP 1: no all-reduce; the fusion's FlashInfer
#     path runs below a size threshold only, 8-32 MB on the Llama B200 scripts, under an 8k chunk's 8192 x hidden x 2
#     bytes; MiniMax 0.17: not passed, the release's default off)
#   act: the activation format entering the GEMMs that carry the weights (W4A16 Marlin: 16-bit activations)
#   async: async scheduling (the scripts' flag on 0.10.2; the release default from 0.14)
OWNER_FACTS: dict[str, tuple[float, dict[str, str]]] = {
    "B200 Llama-3.1-70B FP8/NVFP4 (0.10.2)": (0.197, {
        "generation": "blackwell", "release": "0.10.2", "moe": "dense", "attention": "FLASHINFER",
        "kv": "fp8", "graph_8k": "eager", "fused_ar": "none / unfused", "act": "fp8 / nvfp4", "async": "on"}),
    "B200 MiniMax-M2.5 NVFP4/FP8 (0.19)": (0.197, {
        "generation": "blackwell", "release": "0.19.0", "moe": "moe", "attention": "FLASHINFER",
        "kv": "fp8", "graph_8k": "eager", "fused_ar": "none / fused", "act": "nvfp4 / fp8", "async": "on"}),
    "B200 MiniMax-M2.5 FP8 (0.17, one TP)": (0.474, {
        "generation": "blackwell", "release": "0.17.0", "moe": "moe", "attention": "FLASHINFER",
        "kv": "auto", "graph_8k": "eager", "fused_ar": "unfused", "act": "fp8", "async": "on"}),
    "B200 Kimi-K2.5 NVFP4 (0.17)": (0.230, {
        "generation": "blackwell", "release": "0.17.0", "moe": "moe", "attention": "FLASHINFER_MLA",
        "kv": "auto / fp8", "graph_8k": "eager", "fused_ar": "fused", "act": "nvfp4", "async": "on"}),
    "B200 gpt-oss-120b MXFP4 (0.15.1, TP 1)": (0.178, {
        "generation": "blackwell", "release": "0.15.1", "moe": "moe", "attention": "FLASHINFER",
        "kv": "fp8", "graph_8k": "eager", "fused_ar": "none", "act": "mxfp8", "async": "on"}),
    "H100 gpt-oss-120b MXFP4 Marlin (0.18)": (0.195, {
        "generation": "hopper", "release": "0.18.0", "moe": "moe", "attention": "FLASH_ATTN",
        "kv": "auto", "graph_8k": "eager", "fused_ar": "fused", "act": "bf16 (W4A16)", "async": "on"}),
    "H100 Llama-3.1-70B FP8 (0.10.2)": (0.016, {
        "generation": "hopper", "release": "0.10.2", "moe": "dense", "attention": "FLASH_ATTN",
        "kv": "fp8", "graph_8k": "eager", "fused_ar": "unfused", "act": "fp8", "async": "on"}),
}


def _values(text: str) -> set[str]:
    """A fact's values: ``a / b`` lists the values a group's rows take (per release, format or TP)."""
    return {v.strip() for v in text.split(" / ")}


def partitions(facts: dict[str, tuple[float, dict[str, str]]], prop: str,
               high_us: float = HIGH_US) -> tuple[bool, set, set]:
    """Whether ``prop`` separates the groups whose a exceeds ``high_us`` from the others: (owns, high values, low
    values); it owns the term only if no value occurs on both sides (and both sides have groups)."""
    if not facts:
        raise TwinInputError("no reading groups")
    high, low = set(), set()
    for name, (a_us, props) in facts.items():
        if prop not in props:
            raise TwinInputError(f"group {name!r} has no fact for {prop!r}")
        (high if a_us > high_us else low).update(_values(props[prop]))
    return bool(high) and bool(low) and not (high & low), high, low


def facts_table() -> None:
    props = list(next(iter(OWNER_FACTS.values()))[1])
    print(f"a: us per prompt token per decoder layer (silicon_gemm_fraction.py); high above {HIGH_US} us")
    for name, (a_us, p) in OWNER_FACTS.items():
        print(f"  {name:<42} a {a_us:5.3f} | " + "; ".join(f"{k} {v}" for k, v in p.items()))
    print("\nproperty: does it separate the high groups from the low ones?")
    for prop in props:
        owns, high, low = partitions(OWNER_FACTS, prop)
        print(f"  {prop:<10} {'OWNS' if owns else 'no  '}  high {sorted(high)}  low {sorted(low)}")


def rows(report: Path, kind: str, group: str, sim_s: float) -> None:
    from twin.fitting.fit import simulate_cases
    from twin.fitting.joint import FOLDS, all_cases, errors, family_of
    fold = fold_params(report, kind, group)
    if CARRIED not in fold:
        raise TwinInputError(f"the {kind} fold holding {group} out carries no {CARRIED} (no H100 gpt-oss reading kept)")
    cases = [c for c in all_cases(silicon_every=REFIT_SILICON_EVERY) if FOLDS[kind](c) == group]
    carried = fold[CARRIED]
    at = f"dense Blackwell at the carried {1e6 * carried:.3f} us"
    variants = {"the fold's values": fold, f"{at}, prompt tokens only": fold | {TOKEN: carried, SHARE: 0.0},
                f"{at}, decode tokens too": fold | {TOKEN: carried}}
    print(f"{len(cases)} held-out cases ({kind} fold, {group}); per slice: TTFT mean |error| median % (signed) / TPOT")
    for label, params in variants.items():
        runs = simulate_cases(cases, params, max_sim_s=sim_s)
        errs = [(family_of(c), c, errors(c, r.metrics)) for c, r in zip(cases, runs)]
        print(f"== {label}: " + "; ".join(_summary(name, es) for name, es in _slices(errs).items()), flush=True)


def _slices(errs: list) -> dict[str, list[dict]]:
    """all / MoE / dense / per family: the errors of each slice."""
    from twin.hardware.catalog import resolve_model
    out: dict[str, list[dict]] = collections.defaultdict(list)
    for fam, case, e in errs:
        moe = resolve_model(case.target.model).is_moe
        for key in ("all", "MoE" if moe else "dense", fam):
            out[key].append(e)
    return out


def _summary(name: str, errs: list[dict]) -> str:
    """``name`` TTFT |median| (signed) / TPOT |median| (signed) (n)."""
    cells = [median_cell([e[key] for e in errs if key in e]) for key in ("mean_ttft_ms", "mean_tpot_ms")]
    return f"{name} {cells[0]} / {cells[1]} ({len(errs)})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("facts", "rows"))
    ap.add_argument("--report", type=Path, default=None, help="rows: a fidelity_real.py --json report")
    ap.add_argument("--kind", default=None, choices=("source", "GPU", "family"), help="rows: default GPU")
    ap.add_argument("--group", default=None, help="rows: default B200")
    ap.add_argument("--sim-s", type=positive_float, default=None, help="rows: default 60")
    args = ap.parse_args()
    if args.what == "facts":
        refuse_given(args, ("--report", "--kind", "--group", "--sim-s"), "to 'rows'")
        return facts_table()
    if args.report is None:
        raise TwinInputError("rows needs --report")
    rows(args.report, args.kind or "GPU", args.group or "B200", 60.0 if args.sim_s is None else args.sim_s)


if __name__ == "__main__":
    run_script(main)
