"""MiniMax-M2.5's prompt steps on B200 (issue 33, round 6): where the missing TTFT sits, and the held-out test of
a Blackwell block-FP8 expert FLOP efficiency (``twin.cost.generation_experts``), which the rows reject once the
FP32 router GEMM is priced (``twin.cost.router_gemm``; docs/fidelity.md "Round 6: MiniMax-M2.5 prompt steps").

    # per layout and concurrency (C <= 16, OSL 1k): measured and twin TTFT at ISL 1k and 8k, the gap at 1k (the
    # intercept) and the 8k - 1k slope in us per prompt token, measured vs twin, FP8 and NVFP4 side by side (~1 min)
    python benchmarks/minimax_prefill.py table
    # moe_expert_compute_efficiency@blackwell+experts_fp8 from the 8k - 1k TTFT differences of the v0.19 FP8 rows,
    # fitted on one part and tested on the other: by TP (2 / 4) and by measurement date (~4 min)
    python benchmarks/minimax_prefill.py slope-fit
    # round 7: moe_prompt_stream_efficiency (twin.cost.prompt_experts) on a grid, fitted on the light-load (CONC <= 16)
    # 1k/1k rows of one part and held out on the others: by TP, by GPU (B200 FP8 -> H100 FP8), by ISL / OSL, and
    # the high-load rows (CONC >= 32) at every fitted value (~15 min with --every 2)
    python benchmarks/minimax_prefill.py stream-test --every 2
    # round 8: that stream fitted TOGETHER with the share of Blackwell's per-token-per-layer cost a decode token pays
    # (twin.cost.decode_tokens), on the B200 v0.19 FP8 rows of one part (TP, ISL/OSL, load band), held out on the rest
    python benchmarks/minimax_prefill.py joint-test --every 3        # ~6 min
    # round 8b: the eager host time per MoE layer each light-load (CONC <= 8) 1k row with eager prompt steps implies,
    # beyond the embedded 0.84 ms per decoder layer, by GPU, family, expert format and release: all rows, not a
    # sample (benchmarks/eager_floor_by_generation.py's reading); --pair: with MiniMax FP8's B200 pair in place
    python benchmarks/minimax_prefill.py floor-by-path [--pair]     # ~30 s

The fit uses differences, as ``benchmarks/hopper_rows.py prefill-fit`` does: per cell (TP, CONC <= 16, date) the
measured mean TTFT of the 8k/1k rows minus the 1k/1k rows' (medians over repeats), against the twin's at each
efficiency of a grid (log-interpolated); a per-request offset (the request path, a first step, the 1k prompt
step's own gap) cancels. The fitted value zeroes the median log ratio on the training cells. Signed errors:
predicted / measured - 1.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

import numpy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import positive_int  # noqa: E402
from twin.errors import run_script  # noqa: E402
from twin.fitting.fit import simulate_cases  # noqa: E402
from twin.fitting.joint import default_start  # noqa: E402
from twin.fitting.silicon import model_family, silicon_cases  # noqa: E402

EFF = "moe_expert_compute_efficiency@blackwell+experts_fp8"
GRID = (1.0, 0.6, 0.45, 0.35, 0.28, 0.2)
MEAN_PROMPT_DELTA_TOKENS = 0.9 * (8192 - 1024)    # the client's lengths are uniform on [0.8 L, L]


def _cases(keep) -> list:
    return [c for c in silicon_cases()[0] if model_family(c.row.model_path) == "minimax" and c.row.system ==
            "b200_sxm" and c.row.osl == 1024 and c.row.isl in (1024, 8192) and c.row.concurrency <= 16
            and keep(c.row)]


def _ttft(cases: list, params: dict) -> list[float]:
    return [r.metrics["mean_ttft_ms"] for r in simulate_cases(cases, default_start() | params, max_sim_s=60.0)]


def _layout(row) -> str:
    return f"TP{row.tp}" + (f" EP{row.moe_ep}" if row.moe_ep > 1 else "") + (
        f" DP{row.attention_dp}" if row.attention_dp > 1 else "")


def _cells(cases: list, key) -> dict[tuple, dict[int, list[int]]]:
    out: dict[tuple, dict[int, list[int]]] = {}
    for i, c in enumerate(cases):
        out.setdefault(key(c.row), {}).setdefault(c.row.isl, []).append(i)
    return out


def _med(values: list[float], idx: list[int]) -> float:
    return statistics.median(values[i] for i in idx)


def table() -> None:
    cases = _cases(lambda r: r.vllm_version == "0.19.0")
    pred = _ttft(cases, {})
    meas = [c.run.metrics["mean_ttft_ms"] for c in cases]
    cells = _cells(cases, lambda r: ((r.precision or "").lower(), _layout(r), r.concurrency))
    print(f"{'format layout C':<22} | 1k: meas  twin   gap | 8k: meas  twin   gap | slope us/token: meas twin")
    for k in sorted(cells):
        one, eight = cells[k].get(1024), cells[k].get(8192)
        m1, p1 = (_med(meas, one), _med(pred, one)) if one else (math.nan, math.nan)
        m8, p8 = (_med(meas, eight), _med(pred, eight)) if eight else (math.nan, math.nan)
        d = MEAN_PROMPT_DELTA_TOKENS / 1e3
        print(f"{k[0]:<6}{k[1]:<11} C{k[2]:<3} | {m1:8.0f} {p1:5.0f} {m1 - p1:+5.0f} | {m8:8.0f} {p8:5.0f} "
              f"{m8 - p8:+5.0f} | {(m8 - m1) / d:19.1f} {(p8 - p1) / d:4.1f}")


def slope_fit() -> None:
    cases = _cases(lambda r: r.vllm_version == "0.19.0" and (r.precision or "").lower() == "fp8"
                   and r.moe_ep == 1 and r.attention_dp == 1)
    pred = {e: _ttft(cases, {EFF: e}) for e in GRID}
    meas = [c.run.metrics["mean_ttft_ms"] for c in cases]
    cells = {k: v for k, v in _cells(cases, lambda r: (r.tp, r.concurrency, (r.measured or "")[:10])).items()
             if len(v) == 2}

    def delta(values, k) -> float:
        return _med(values, cells[k][8192]) - _med(values, cells[k][1024])

    def at(e: float, k) -> float:       # the twin's difference at efficiency e, log-interpolated on the grid
        assert GRID[-1] <= e <= GRID[0], e
        xs = [math.log(g) for g in reversed(GRID)]
        return math.exp(numpy.interp(math.log(e), xs, [math.log(delta(pred[g], k)) for g in reversed(GRID)]))

    fine = [round(GRID[-1] + 0.005 * i, 3) for i in range(int((GRID[0] - GRID[-1]) / 0.005) + 1)]
    splits = {"TP": lambda k: f"TP{k[0]}", "date": lambda k: k[2]}
    for name, part in splits.items():
        parts = sorted({part(k) for k in cells})
        for train in [[p] for p in parts] + [parts]:
            ks = [k for k in cells if part(k) in train]
            best = min(fine, key=lambda e: abs(statistics.median(math.log(at(e, k) / delta(meas, k)) for k in ks)))
            held = [k for k in sorted(cells) if part(k) not in train]
            print(f"by {name}, fit on {', '.join(train)} ({len(ks)} cells): {EFF} = {best}")
            for k in held:
                m = delta(meas, k)
                print(f"  held out TP{k[0]} C={k[1]:<3} {k[2]}: 8k - 1k TTFT measured {m:5.0f} ms, twin at 1.0 "
                      f"{delta(pred[1.0], k):4.0f} ({delta(pred[1.0], k) / m - 1:+5.0%}), at {best} "
                      f"{at(best, k):4.0f} ({at(best, k) / m - 1:+5.0%})")
            if held:
                e0 = [abs(delta(pred[1.0], k) / delta(meas, k) - 1) for k in held]
                e1 = [abs(at(best, k) / delta(meas, k) - 1) for k in held]
                print(f"  held-out median |error|: {statistics.median(e0):.1%} -> {statistics.median(e1):.1%}")


STREAM = "moe_prompt_stream_efficiency@{}+experts_{}"
STREAM_EXTRA = (0.0, 0.5, 1.0, 1.5, 2.0)        # x = 1 / efficiency - 1: the grid (the errors are linear in x)


def fp8(row) -> bool:
    """An FP8 row (the rest of MiniMax's are NVFP4)."""
    return (row.precision or "").lower() == "fp8"


def _group(r) -> tuple:
    return (r.system[:4], (r.precision or "").lower(), _layout(r), "C<=16" if r.concurrency <= 16 else "C>=32",
            f"{r.isl // 1024}k/{r.osl // 1024}k")


def stream_test(every: int) -> None:
    cases = [c for c in silicon_cases()[0] if model_family(c.row.model_path) == "minimax" and (
        (c.row.system == "b200_sxm" and c.row.vllm_version == "0.19.0") or c.row.system == "h100_sxm")][::every]
    scopes = [STREAM.format(g, f) for g, f in (("blackwell", "fp8"), ("hopper", "fp8"), ("blackwell", "nvfp4"))]
    errs = {}        # x -> [(TTFT, TPOT) signed error per case]
    for x in STREAM_EXTRA:
        res = simulate_cases(cases, default_start() | {k: 1.0 / (1.0 + x) for k in scopes} | {
            "layer_token_decode_share@blackwell+experts_fp8": 1.0}, max_sim_s=60.0)   # round 7's (round 8: 0)
        errs[x] = [(r.metrics["mean_ttft_ms"] / c.run.metrics["mean_ttft_ms"] - 1,
                    r.metrics["mean_tpot_ms"] / c.run.metrics["mean_tpot_ms"] - 1) for c, r in zip(cases, res)]

    def at(x: float, i: int, j: int) -> float:      # case i's error j at extra x, linear between grid points
        return float(numpy.interp(x, STREAM_EXTRA, [errs[g][i][j] for g in STREAM_EXTRA]))

    def fit(train) -> float:                          # the x whose median signed TTFT on the training cases is 0
        idx = [i for i, c in enumerate(cases) if train(c.row)]
        fine = numpy.linspace(STREAM_EXTRA[0], STREAM_EXTRA[-1], 401)
        return float(min(fine, key=lambda x: abs(statistics.median(at(x, i, 0) for i in idx)))), len(idx)

    light_1k = lambda r: r.concurrency <= 16 and r.isl == r.osl == 1024          # noqa: E731
    b200 = lambda r: r.system == "b200_sxm"                                       # noqa: E731
    splits = [("B200 FP8, fit on TP2", lambda r: b200(r) and fp8(r) and r.tp == 2 and r.moe_ep == 1 and light_1k(r),
               lambda r: b200(r) and fp8(r)),
              ("B200 FP8, fit on TP4", lambda r: b200(r) and fp8(r) and r.tp == 4 and r.moe_ep == 1 and light_1k(r),
               lambda r: b200(r) and fp8(r)),
              ("FP8, fit on B200 (GPU held out: H100)", lambda r: b200(r) and fp8(r) and light_1k(r), fp8),
              ("FP8, fit on H100 (GPU held out: B200)", lambda r: not b200(r) and light_1k(r), fp8),
              ("B200 NVFP4, fit on TP1 + TP2", lambda r: not fp8(r) and r.tp <= 2 and r.moe_ep == 1 and light_1k(r),
               lambda r: not fp8(r))]
    for name, train, shown in splits:
        x, n = fit(train)
        print(f"{name} ({n} cases): moe_prompt_stream_efficiency = {1 / (1 + x):.3f} (x = 1/eff - 1 = {x:.2f})")
        groups: dict[tuple, list[int]] = {}
        for i, c in enumerate(cases):
            if shown(c.row):
                groups.setdefault(_group(c.row), []).append(i)
        def med(idx: list[int], x_: float, j: int, absolute: bool = False) -> float:
            return statistics.median(abs(at(x_, i, j)) if absolute else at(x_, i, j) for i in idx)

        for g, idx in sorted(groups.items()):
            tag = "fit " if all(train(cases[i].row) for i in idx) else "held"
            print(f"  {tag} {' '.join(g):<34} n={len(idx):<3} TTFT {med(idx, 0, 0):+6.1%} -> {med(idx, x, 0):+6.1%}"
                  f"   TPOT {med(idx, 0, 1):+6.1%} -> {med(idx, x, 1):+6.1%}")
        for band in ("C<=16", "C>=32"):
            idx = [i for i, c in enumerate(cases) if shown(c.row) and not train(c.row) and _group(c.row)[3] == band]
            if idx:
                print(f"  held out, {band}: n={len(idx)} median |TTFT| {med(idx, 0, 0, True):.1%} -> "
                      f"{med(idx, x, 0, True):.1%} (signed {med(idx, 0, 0):+.1%} -> {med(idx, x, 0):+.1%}), |TPOT| "
                      f"{med(idx, 0, 1, True):.1%} -> {med(idx, x, 1, True):.1%} (signed {med(idx, 0, 1):+.1%} -> "
                      f"{med(idx, x, 1):+.1%})")


def joint_test(every: int) -> None:
    """Round 8: the prompt steps' expert stream (x = 1/e - 1 of ``moe_prompt_stream_efficiency@blackwell+experts_fp8``)
    and the share of Blackwell's per-token-per-layer cost a decode token pays (``layer_token_decode_share@blackwell+
    experts_fp8``, twin.cost.decode_tokens) fitted together on the B200 v0.19 MiniMax FP8 rows of one part (least
    squares of the signed TTFT and TPOT errors, bilinear between the grid's corners: the errors are linear in x,
    round 7, and in the share, which moves a per-sequence constant) and held out on the others. The embedded
    values are the baseline here too, so the corners are set explicitly."""
    cases = [c for c in silicon_cases()[0] if model_family(c.row.model_path) == "minimax" and
             c.row.system == "b200_sxm" and c.row.vllm_version == "0.19.0"][::every]
    e_key, s_key = STREAM.format("blackwell", "fp8"), "layer_token_decode_share@blackwell+experts_fp8"
    x_hi = 1.2
    corners = {}
    for x, share in ((0.0, 1.0), (x_hi, 1.0), (0.0, 0.0), (x_hi, 0.0)):
        res = simulate_cases(cases, default_start() | {e_key: 1.0 / (1.0 + x), s_key: share}, max_sim_s=60.0)
        corners[x, share] = [(r.metrics["mean_ttft_ms"] / c.run.metrics["mean_ttft_ms"] - 1,
                              r.metrics["mean_tpot_ms"] / c.run.metrics["mean_tpot_ms"] - 1)
                             for c, r in zip(cases, res)]

    def err(i: int, x: float, share: float, j: int) -> float:
        fx, fs = x / x_hi, 1.0 - share
        return ((1 - fx) * (1 - fs) * corners[0.0, 1.0][i][j] + fx * (1 - fs) * corners[x_hi, 1.0][i][j]
                + (1 - fx) * fs * corners[0.0, 0.0][i][j] + fx * fs * corners[x_hi, 0.0][i][j])

    splits = [("TP2 (EP1)", lambda r: fp8(r) and (r.tp, r.moe_ep, r.attention_dp) == (2, 1, 1)),
              ("TP4 (EP1)", lambda r: fp8(r) and (r.tp, r.moe_ep, r.attention_dp) == (4, 1, 1)),
              ("1k/1k", lambda r: fp8(r) and r.isl == r.osl == 1024),
              ("C <= 16 and C >= 128", lambda r: fp8(r) and (r.concurrency <= 16 or r.concurrency >= 128))]
    grid = [(x, sh) for x in numpy.linspace(0.0, 2.4, 49) for sh in numpy.linspace(0.0, 1.0, 21)]
    for name, train in splits:
        tr = [i for i, c in enumerate(cases) if train(c.row)]
        best = min(grid, key=lambda p: sum(err(i, *p, 0) ** 2 + err(i, *p, 1) ** 2 for i in tr))
        print(f"fit on FP8 {name} ({len(tr)} cases): moe_prompt_stream_efficiency = {1 / (1 + best[0]):.3f}, "
              f"layer_token_decode_share = {best[1]:.2f}")
        held = [i for i, c in enumerate(cases) if fp8(c.row) and not train(c.row)]
        light = [i for i in held if cases[i].row.concurrency <= 16]
        for label, idx in (("held out", held), ("held out, C <= 16", light),
                           ("held out, C >= 32", [i for i in held if i not in light])):
            if not idx:
                continue
            def med(p, j, a=False):
                return statistics.median(abs(err(i, *p, j)) if a else err(i, *p, j) for i in idx)
            b = (0.0, 1.0)
            print(f"  {label:<18} n={len(idx):<3} TTFT {med(b, 0, True):5.1%} ({med(b, 0):+5.1%}) -> "
                  f"{med(best, 0, True):5.1%} ({med(best, 0):+5.1%})   TPOT {med(b, 1, True):5.1%} ({med(b, 1):+5.1%}) "
                  f"-> {med(best, 1, True):5.1%} ({med(best, 1):+5.1%})")


PAIR = {"moe_prompt_stream_efficiency@blackwell+experts_fp8": 0.5, "layer_token_decode_share@blackwell+experts_fp8": 0.0}


def floor_by_path(pair: bool) -> None:
    from twin.cost.default_terms import GENERATION_TERMS
    from twin.fitting.identify import eager_prompt_steps
    from twin.fitting.joint import with_deployments
    from twin.fitting.replay import cost_model_for
    from twin.hardware.weight_formats import format_family
    from benchmarks.eager_floor_by_generation import (implied_host_s, implied_moe_layer_s, print_medians,
                                                      prompt_step_gpu_s)
    per_layer_s = GENERATION_TERMS["blackwell"]["eager_layer_host_s"]      # the embedded floor per decoder layer
    params = default_start() | (PAIR if pair else {})
    sel = [(c, d) for c, d in with_deployments([c for c in silicon_cases()[0] if c.row.concurrency <= 8
                                                and c.row.isl == 1024])
           if d.model.is_moe and eager_prompt_steps(c, d)]
    groups: dict[tuple, list[float]] = {}
    for (c, d), r in zip(sel, simulate_cases([c for c, _ in sel], params, max_sim_s=60.0)):
        m, p = c.run.metrics.get("mean_ttft_ms"), r.metrics.get("mean_ttft_ms")
        if m is None or p is None:
            continue
        cost = cost_model_for(d, c.target, params)
        gpu_s = prompt_step_gpu_s(cost, int(c.run.prompt_tokens.mean))
        step = implied_host_s(gpu_s, getattr(cost, "eager_host_s_per_step", 0.0), (m - p) / 1e3)
        moe = implied_moe_layer_s(step, per_layer_s, d.model)
        key = (c.row.system, model_family(c.row.model_path), format_family(d.weight_formats.routed_experts),
               c.row.vllm_version or "?")
        groups.setdefault(key, []).append(moe)
        print(f"{' '.join(key):36} {c.row.measured} {_layout(c.row):<11} C{c.row.concurrency:<2} GPU step "
              f"{1e3 * gpu_s:5.1f} ms, TTFT {m:6.1f} measured, {p:6.1f} twin: {1e3 * moe:5.2f} ms per MoE layer")
    print_medians(f"\nmedian per MoE layer beyond {1e3 * per_layer_s:.2f} ms per decoder layer (ms)"
                  f"{' (with the pair)' * pair}:", groups, width=36)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("table")
    sub.add_parser("slope-fit")
    st = sub.add_parser("stream-test")
    st.add_argument("--every", type=positive_int, default=2, help="every n-th MiniMax row (default 2)")
    jt = sub.add_parser("joint-test")
    jt.add_argument("--every", type=positive_int, default=3, help="every n-th B200 v0.19 MiniMax row (default 3)")
    fb = sub.add_parser("floor-by-path")
    fb.add_argument("--pair", action="store_true", help="with MiniMax FP8's B200 pair (stream 0.5, share 0)")
    args = ap.parse_args()
    if args.cmd == "floor-by-path":
        floor_by_path(args.pair)
    elif args.cmd == "stream-test":
        stream_test(args.every)
    elif args.cmd == "joint-test":
        joint_test(args.every)
    else:
        table() if args.cmd == "table" else slope_fit()


if __name__ == "__main__":
    run_script(main)
