"""Whose per-request time is it: measured TTFT of paired silicon rows that share a front end (issue 33, round 15).

The bench client's fitted path (``request_path_s@client_vllm_bench``) absorbs a per-request time the twin does not
price on a few B200 deployments (docs/fidelity.md "Round 14: the bench client's request path"). A per-request term
that lives in the serving front end (the bench client, the API server's parse / tokenise / detokenise / SSE, a
multimodal processor, the engine's request set-up and sampler set-up, the release's scheduling of a new request)
depends only on the tokenizer, the vLLM release, the client and the load, not on the weight checkpoint. So two rows
that differ ONLY in their checkpoint (same model and tokenizer, release, GPU, layout, lengths, concurrency and
client) have the same front-end time, and their measured TTFT difference is the engine's (the prompt step's GPU or
host time, and the wait behind the other requests' steps).

This script reads only the measurements (no simulation): it pairs such rows and prints, per pair group, the median
measured TTFT and TPOT difference by prompt length and TP at light load (CONC <= ``--max-conc``), beside the
difference a pure per-request term could make (0: the same front end). It also pairs rows that differ only in their
release (same checkpoint), where a release-scoped per-request term would show as a TP- and prompt-flat difference.

    python benchmarks/request_time_pairs.py [--ground-truth DIR] [--max-conc 8]
    python benchmarks/request_time_pairs.py --simulate      # + the twin's difference (embedded defaults; the
                                                            # paired rows simulated whole, a few minutes)
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import positive_int  # noqa: E402
from twin.errors import run_script  # noqa: E402
from twin.fitting.silicon import model_family  # noqa: E402
from twin.fitting.silicon_rows import read_silicon, silicon_dir  # noqa: E402


def checkpoint(row) -> str:
    return (row.moe_quant or row.gemm_quant or row.precision or "bf16").lower()


def release(row) -> str:
    return row.vllm_version or "-"


def setting(row) -> tuple:
    """What a front end and the engine's load share: GPU, family, layout, lengths, concurrency."""
    return (row.system, model_family(row.model_path), row.tp, row.moe_ep, row.attention_dp, row.isl, row.osl,
            row.concurrency)


def pairs(rows, vary: str, max_conc: int, twin_ms: dict | None = None) -> dict[tuple, list[tuple]]:
    """Rows paired on ``setting`` plus the attribute held fixed, differing in ``vary`` ('checkpoint' or 'release'):
    (group -> [(setting, dTTFT ms, dTPOT ms, twin dTTFT ms or None), ...]); group = (GPU, family, fixed value,
    'a vs b'). Published-client agg rows at CONC <= ``max_conc`` only; a setting measured twice on one side keeps
    the mean of its rows. ``twin_ms``: row line -> the twin's mean TTFT (ms), for the twin's difference."""
    if vary not in ("checkpoint", "release"):
        raise ValueError(f"pairs: vary must be 'checkpoint' or 'release', got {vary!r}")
    if max_conc < 1:
        raise ValueError(f"pairs: max_conc must be >= 1, got {max_conc}")
    fixed_of, vary_of = (release, checkpoint) if vary == "checkpoint" else (checkpoint, release)
    cells: dict[tuple, dict[str, list]] = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in rows:
        if r.mode != "agg" or not r.published_client or r.concurrency > max_conc:
            continue
        twin = (twin_ms or {}).get(r.line)
        cells[setting(r) + (fixed_of(r),)][vary_of(r)].append((r.ttft_ms, r.tpot_ms, twin))
    out: dict[tuple, list[tuple]] = collections.defaultdict(list)
    for key, sides in cells.items():
        names = sorted(sides)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                ta, tb = _means(sides[a]), _means(sides[b])
                dtwin = None if ta[2] is None or tb[2] is None else ta[2] - tb[2]
                out[(key[0], key[1], key[-1], f"{a} vs {b}")].append((key[:-1], ta[0] - tb[0], ta[1] - tb[1], dtwin))
    return dict(out)


def _means(side: list[tuple]) -> tuple:
    twins = [w for _, _, w in side]
    return (statistics.fmean(t for t, _, _ in side), statistics.fmean(p for _, p, _ in side),
            None if None in twins else statistics.fmean(twins))


def summary(items: list[tuple]) -> dict:
    """Median dTTFT (ms) over all pairs, by prompt length and by TP; median dTPOT; the dTTFT spread; where every
    pair has the twin's difference, the median of (measured - twin) difference, overall and by prompt length and TP
    (what the twin's prompt steps miss between the two sides)."""
    if not items:
        raise ValueError("summary: no pairs")
    by_isl, by_tp = collections.defaultdict(list), collections.defaultdict(list)
    miss_isl, miss_tp = collections.defaultdict(list), collections.defaultdict(list)
    have_twin = all(w is not None for *_, w in items)
    for s, dt, _, w in items:
        by_isl[s[5]].append(dt)
        by_tp[s[2]].append(dt)
        if have_twin:
            miss_isl[s[5]].append(dt - w)
            miss_tp[s[2]].append(dt - w)
    d = [dt for _, dt, _, _ in items]
    out = {"n": len(items), "dttft_ms": statistics.median(d), "min_ms": min(d), "max_ms": max(d),
           "dtpot_ms": statistics.median(p for _, _, p, _ in items),
           "by_isl": {k: statistics.median(v) for k, v in sorted(by_isl.items())},
           "by_tp": {k: statistics.median(v) for k, v in sorted(by_tp.items())}}
    if have_twin:
        out.update(missed_ms=statistics.median(dt - w for _, dt, _, w in items),
                   missed_by_isl={k: statistics.median(v) for k, v in sorted(miss_isl.items())},
                   missed_by_tp={k: statistics.median(v) for k, v in sorted(miss_tp.items())})
    return out


def twin_ttft_ms(rows, max_conc: int, ground_truth) -> dict[int, float]:
    """The twin's mean TTFT (ms) at the embedded defaults for every row that has a pair (both kinds), by line."""
    from twin.fitting.fit import simulate_cases
    from twin.fitting.joint import JOINT_NAMES, default_start
    from twin.fitting.silicon import silicon_cases
    lines = {r.line for vary in ("checkpoint", "release") for items in _paired_rows(rows, vary, max_conc)
             for r in items}
    cases = silicon_cases(ground_truth, rows=[r for r in rows if r.line in lines])[0]
    preds = simulate_cases(cases, default_start(JOINT_NAMES), max_sim_s=None)
    return {c.row.line: p.metrics["mean_ttft_ms"] for c, p in zip(cases, preds)}


def _paired_rows(rows, vary: str, max_conc: int) -> list[list]:
    fixed_of, vary_of = (release, checkpoint) if vary == "checkpoint" else (checkpoint, release)
    cells: dict[tuple, dict[str, list]] = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in rows:
        if r.mode == "agg" and r.published_client and r.concurrency <= max_conc:
            cells[setting(r) + (fixed_of(r),)][vary_of(r)].append(r)
    return [[r for side in sides.values() for r in side] for sides in cells.values() if len(sides) > 1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--max-conc", type=positive_int, default=8)
    ap.add_argument("--simulate", action="store_true", help="also the twin's difference (embedded defaults)")
    args = ap.parse_args()
    if args.max_conc < 1:
        raise SystemExit(f"--max-conc must be >= 1, got {args.max_conc}")
    rows = read_silicon(silicon_dir(args.ground_truth))
    twin = twin_ttft_ms(rows, args.max_conc, args.ground_truth) if args.simulate else None
    for vary in ("checkpoint", "release"):
        print(f"\n== rows that differ only in their {vary} (CONC <= {args.max_conc}); measured a - b, ms")
        print(f"{'GPU, family, same ' + ('release' if vary == 'checkpoint' else 'checkpoint'):<32} {'a vs b':<34} "
              f"{'n':>3} {'dTTFT':>7} {'range':>15} {'dTPOT':>6}  by prompt tokens | by TP")
        for (gpu, fam, fixed, ab), items in sorted(pairs(rows, vary, args.max_conc, twin).items()):
            s = summary(items)
            isl = ", ".join(f"{k}: {v:+.1f}" for k, v in s["by_isl"].items())
            tp = ", ".join(f"{k}: {v:+.1f}" for k, v in s["by_tp"].items())
            print(f"{gpu + ' ' + fam + ' ' + fixed:<32} {ab:<34} {s['n']:3d} {s['dttft_ms']:+7.1f} "
                  f"{s['min_ms']:+7.1f}..{s['max_ms']:+6.1f} {s['dtpot_ms']:+6.2f}  {isl} | {tp}")
            if "missed_ms" in s:
                isl = ", ".join(f"{k}: {v:+.1f}" for k, v in s["missed_by_isl"].items())
                tp = ", ".join(f"{k}: {v:+.1f}" for k, v in s["missed_by_tp"].items())
                print(f"{'':<32} {'  measured - twin difference':<34} {'':>3} {s['missed_ms']:+7.1f} "
                      f"{'':>15} {'':>6}  {isl} | {tp}")


if __name__ == "__main__":
    run_script(main)
