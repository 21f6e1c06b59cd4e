"""The per-request TTFT intercept at light load: what the silicon rows' constant per-request gap (measured - twin
TTFT, ms) follows, and the eager-step floor (``twin.cost.eager_steps``) that the CUDA-graph launch facts imply.

Sections (published-client rows only; ``--csv`` reuses a ``benchmarks/ttft_light_load.py --csv`` table of the
defaults instead of simulating them):

A. measured only: the same configuration (model, GPU, format, layout, release, ISL/OSL, CONC) measured in batches
   whose prompt step a CUDA graph covers and does not (``graphed``: mean prompt + CONC - 1 tokens within the
   server's graph limit for a step with a prompt in it, ``twin.fitting.silicon_scripts.row_cudagraphs``);
B. one-off costs spread over the run (hypothesis: no warm-up, JIT / autotuning on first use) would make the mean
   TTFT gap fall like 1 / (10 x CONC): the median gap per group at CONC 4..64 and gap(C) / gap(4) beside 4 / C;
C. the implied host floor of the eager prompt steps at CONC <= 8 (1k prompts, B200): the twin's prompt step (GPU
   time) + the gap, per decoder layer, and least squares of ``floor = a x layers + b x MoE layers`` on dense rows
   (a) and on each MoE family with the other held out (b);
D. ``--values A_US,B_US``: the rows re-simulated with ``eager_layer_host_s@blackwell = A`` and
   ``eager_moe_layer_host_s@blackwell = B`` (us per layer) beside the defaults: median signed error of mean TTFT and
   TPOT per family, GPU, month and release.

    python benchmarks/ttft_intercept.py --csv light64.csv                    # A, B, C from a light-load table
    python benchmarks/ttft_intercept.py --max-conc 8 --gpu B200 --values "840,870;840,1313;840,1145"   # D, ~15 min

(D's "defaults" column is the embedded defaults of the checkout it runs in.)
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmarks.cli_checks import number_list, positive_int  # noqa: E402
from benchmarks.light_table import read_table  # noqa: E402
from twin.cost.eager_steps import capture_size_tokens, graph_limits  # noqa: E402
from twin.fitting.fit import simulate_cases  # noqa: E402
from twin.fitting.joint import JOINT_NAMES, default_start, family_of  # noqa: E402
from twin.fitting.replay import deployment_for  # noqa: E402
from twin.fitting.silicon import lengths, model_family, row_cudagraphs, row_server, silicon_cases  # noqa: E402
from twin.fitting.silicon_rows import read_silicon  # noqa: E402
from twin.hardware.catalog import resolve_model  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402


def prompt_step_graphed(row, max_num_seqs: int, max_num_batched_tokens: int) -> bool:
    """Whether a CUDA graph covers the step of a mean-length prompt beside CONC - 1 decodes on ``row``'s server."""
    facts = row_cudagraphs(row)
    cap = capture_size_tokens(max_num_seqs, max_num_batched_tokens, facts.get("max_cudagraph_capture_size"))
    _, mixed = graph_limits(facts.get("cudagraph_mode"), cap)
    return lengths(row)[0].mean + row.concurrency - 1 <= mixed


def row_graphed(case) -> bool:
    sched = deployment_for(case.run, case.target).scheduler_config
    return prompt_step_graphed(case.row, sched.max_num_seqs, sched.max_num_batched_tokens)


def section_a() -> None:
    """Measured TTFT of one configuration across measurement batches, where its prompt step's graph coverage
    differs between them (no simulation: max_num_seqs / budget as the server knobs say, vLLM's 1024 / 8192
    otherwise)."""
    groups: dict[tuple, dict[tuple, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in read_silicon():
        if not row.published_client or row.mode != "agg" or row.concurrency > 16:
            continue
        server = row_server(row)
        graphed = prompt_step_graphed(row, server.get("max_num_seqs", 1024), server.get("max_num_batched_tokens", 8192))
        key = (model_family(row.model_path), row.system[:4], row.precision, row.tp, row.isl, row.osl, row.concurrency)
        batch = (row.measured, (row.vllm_version or "-")[:7], f"EP{row.moe_ep}DP{row.attention_dp}", graphed)
        groups[key][batch].append(row.ttft_ms)
    print("\nA. one configuration, batches whose prompt step is graphed (G) or eager (E): measured mean TTFT, ms")
    for key, by in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))):
        if len({b[-1] for b in by}) < 2:
            continue
        cells = "  ".join(f"{d[5:]} {v[:6]} {lay} {'G' if g else 'E'} {statistics.median(t):5.0f}"
                          for (d, v, lay, g), t in sorted(by.items()))
        print(f"  {key[0]:<7} {key[1]} {key[2]} TP{key[3]} {key[4]}/{key[5]} C{key[6]:<3} | {cells}")


def section_b(rows: list[dict]) -> None:
    groups: dict[tuple, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        groups[(r["family"], r["gpu"][:4], r["month"], r["version"][:7] or "-", r["isl"])][r["conc"]].append(r["gap_ms"])
    print("\nB. median TTFT gap (measured - twin, ms) by CONC; a one-off cost spread over 10 x CONC requests would give"
          "\n   gap(C) / gap(4) = 4 / C (0.50, 0.25, 0.13, 0.06 at C = 8, 16, 32, 64)")
    for key, by in sorted(groups.items()):
        if 4 not in by:
            continue
        g4 = statistics.median(by[4])
        cells = "  ".join(f"C{c}: {statistics.median(v):+6.0f}" for c, v in sorted(by.items()) if c <= 64)
        ratios = "  ".join(f"{statistics.median(v) / g4:+5.2f}" for c, v in sorted(by.items()) if 4 < c <= 64) \
            if abs(g4) >= 10 else "(|gap(4)| < 10 ms)"
        print(f"  {key[0]:<8} {key[1]} {key[2]} {key[3]:<7} ISL {key[4]:<5} | {cells} | ratio to C4: {ratios}")


def section_c(rows: list[dict], graphed: dict[str, bool]) -> tuple[float, dict[str, float]]:
    """(a, {held-out family: b fitted without it}) in ms per layer."""
    eager = [r for r in rows if r["gpu"] == "B200" and r["conc"] <= 8 and r["isl"] <= 1024
             and graphed.get(r["id"]) is False]
    print("\nC. implied host floor of the eager 1k prompt steps on B200, C <= 8 (twin prompt step + gap), ms")
    by: dict[tuple, list[dict]] = defaultdict(list)
    for r in eager:
        by[(r["family"], r["month"], r["version"][:7], r["tp"])].append(r)
    for key, rs in sorted(by.items()):
        floor = statistics.median(r["prefill_ms"] + r["gap_ms"] for r in rs)
        print(f"  {key[0]:<8} {key[1]} {key[2]:<7} TP{key[3]} n={len(rs):<2} twin step "
              f"{statistics.median(r['prefill_ms'] for r in rs):6.1f}  gap {statistics.median(r['gap_ms'] for r in rs):+6.1f}"
              f"  floor {floor:6.1f}  per layer {floor / rs[0]['layers']:.2f}")
    moe_layers = {f: resolve_model(m).moe_layers if resolve_model(m).is_moe else 0 for f, m in MODEL_OF.items()}
    dense = [r["prefill_ms"] + r["gap_ms"] for r in eager if not moe_layers[r["family"]]]
    a = float(np.median([f / r["layers"] for f, r in zip(dense, [r for r in eager if not moe_layers[r["family"]]])])) \
        if dense else 0.0
    print(f"  a (dense rows, median per layer) = {a:.3f} ms per layer")
    fams = sorted({r["family"] for r in eager if moe_layers[r["family"]]})
    held: dict[str, float] = {}
    for out in fams + [None]:
        train = [r for r in eager if moe_layers[r["family"]] and r["family"] != out]
        if not train:
            continue
        x = np.array([moe_layers[r["family"]] for r in train], dtype=float)
        y = np.array([r["prefill_ms"] + r["gap_ms"] - a * r["layers"] for r in train])
        b = float(x @ y / (x @ x))
        if out is None:
            print(f"  b (all MoE rows) = {b:.3f} ms per MoE layer")
            held["all"] = b
            continue
        test = [r for r in eager if r["family"] == out]
        pred = [a * r["layers"] + b * moe_layers[out] for r in test]
        meas = [r["prefill_ms"] + r["gap_ms"] for r in test]
        print(f"  b without {out:<8} = {b:.3f} ms per MoE layer; {out} floor predicted "
              f"{statistics.median(pred):6.1f} vs implied {statistics.median(meas):6.1f} ms (n={len(test)})")
        held[out] = b
    return a, held


MODEL_OF = {"llama": "llama-3.1-70b", "gpt-oss": "gpt-oss-120b", "minimax": "minimax-m2.5", "kimi": "kimi-k2.5"}


def section_d(cases, values: list[tuple[float, float]]) -> None:
    base = default_start(JOINT_NAMES)
    settings = {"defaults": base}
    for a_us, b_us in values:
        settings[f"{a_us:g}/{b_us:g} us"] = base | {"eager_layer_host_s@blackwell": a_us * 1e-6,
                                                   "eager_moe_layer_host_s@blackwell": b_us * 1e-6}
    errs: dict[str, dict[tuple, list[tuple[float, float]]]] = {}
    for label, params in settings.items():
        preds = simulate_cases(cases, params, max_sim_s=None)
        for c, p in zip(cases, preds):
            row = c.row
            key = (family_of(c), c.target.gpu[:4], row.month, (row.vllm_version or "-")[:7],
                   "G" if row_graphed(c) else "E")
            errs.setdefault(label, {}).setdefault(key, []).append(
                (p.metrics["mean_ttft_ms"] / row.ttft_ms - 1.0, p.metrics["mean_tpot_ms"] / row.tpot_ms - 1.0))
    labels = list(settings)
    print(f"\nD. median signed error, TTFT mean / TPOT (prompt step G graphed / E eager), {len(cases)} rows")
    print(f"  {'group':<36} {'n':>3} | " + " | ".join(f"{lab:>17}" for lab in labels))
    pooled: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for key in sorted(errs["defaults"]):
        cells = []
        for lab in labels:
            v = errs[lab][key]
            pooled[lab].extend(v)
            cells.append(f"{100 * np.median([t for t, _ in v]):+7.1f}% / {100 * np.median([p for _, p in v]):+5.1f}%")
        print(f"  {' '.join(key):<36} {len(errs['defaults'][key]):>3} | " + " | ".join(cells))
    for name, f in (("all (signed)", lambda x: x), ("all |error|", abs)):
        print(f"  {name:<36} {len(pooled['defaults']):>3} | " + " | ".join(
            f"{100 * np.median([f(t) for t, _ in pooled[lab]]):+7.1f}% / "
            f"{100 * np.median([f(p) for _, p in pooled[lab]]):+5.1f}%" for lab in labels))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, default=None, help="a ttft_light_load.py --csv table (defaults) for B and C")
    ap.add_argument("--max-conc", type=positive_int, default=8, help="rows re-simulated in D: CONC up to this")
    ap.add_argument("--gpu", default="", help="D: only rows on this GPU (B200, H100-SXM)")
    ap.add_argument("--values", default="", help="D: A_US,B_US[;A_US,B_US...] (us per layer / per MoE layer)")
    args = ap.parse_args()
    values = [tuple(number_list(v, "--values", low=0.0)) for v in args.values.split(";") if v]
    if any(len(v) != 2 for v in values):
        raise TwinInputError(f"--values {args.values!r}: expected A_US,B_US[;A_US,B_US...]")
    rows = read_table(args.csv) if args.csv else None
    section_a()
    cases = [c for c in silicon_cases()[0] if c.row.published_client]
    graphed = {c.row.id: row_graphed(c) for c in cases}
    if rows is not None:
        section_b(rows)
        section_c(rows, graphed)
    if values:
        section_d([c for c in cases if c.row.concurrency <= args.max_conc
                   and (not args.gpu or c.target.gpu == args.gpu)], values)


if __name__ == "__main__":
    run_script(main)
