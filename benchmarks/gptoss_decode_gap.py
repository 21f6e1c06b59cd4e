"""Where a loaded decode step's excess sits: the twin's pure-decode step against the measured TPOT of the OSL-8k
rows (a 1k prompt per 8k outputs: the prompts add ~1 / 8 of a token per sequence per step, so TPOT is nearly the
decode step's), split between the routed experts' weight stream and the per-sequence time (issue 33, round 12;
docs/fidelity.md "Round 12: gpt-oss's loaded B200 rows").

No simulation. Per row (ISL 1k, OSL 8k, no EP / DP): the twin's step of CONC decodes at the mid-output context, at
the embedded defaults with the uniform routing rule (``moe_active_expert_share`` 1, its prior; ``explain()``), the
measured TPOT, and two parts of the step:

* ``experts``: the routed experts' weight stream (s), the weight-read part above a one-token step scaled to the
  share of experts the step touches (``twin.hardware.moe``'s uniform rule);
* ``per-seq``: what the step pays per sequence whatever TP is (the per-sequence time and the decode tokens' share
  of the per-token-per-layer time).

Least squares of gap = twin - measured on ``a x experts`` (a wrong count of the experts a step touches, or their
stream's rate), on ``b x per-seq`` (a wrong per-sequence time), and on both; the rms left says which fits. A term
that is routing physics (the experts a step touches under real, skewed routing) is the model's and the workload's,
so it should read the same ``a`` on every GPU and TP. ``--active-share S``: also the signed TPOT error by
concurrency band if a layer's routing drew uniformly from only S of its experts (``touched_share``).

    python benchmarks/gptoss_decode_gap.py [--gpu b200] [--family gpt-oss] [--rows] [--active-share 0.8]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import finite_float, positive_int  # noqa: E402
from twin.cost.roofline import DEFAULT_PER_SEQ_OVERHEAD_S  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.hardware.moe import touched_fraction  # noqa: E402

SYNC_FREE_PER_SEQ_S = DEFAULT_PER_SEQ_OVERHEAD_S     # the embedded per_seq_overhead_s (async servers)
UNIFORM = {"moe_active_expert_share": 1.0}    # the twin's uniform routing rule (its prior; nothing embedded)


# the library's rule (twin.hardware.moe), under the name the reading's callers use
touched_share = touched_fraction


def split_gap(gap: list[float], experts: list[float], per_seq: list[float]) -> dict[str, tuple[list[float], float]]:
    """Least squares of ``gap`` on each part alone and on both: name -> (coefficients, rms of what is left)."""
    g = np.asarray(gap, float)
    cols = np.c_[np.asarray(experts, float), np.asarray(per_seq, float)]
    out = {}
    for name, idx in (("experts", [0]), ("per-seq", [1]), ("both", [0, 1])):
        coef, *_ = np.linalg.lstsq(cols[:, idx], g, rcond=None)
        out[name] = ([float(c) for c in coef], float(np.sqrt(np.mean((cols[:, idx] @ coef - g) ** 2))))
    return out


def decode_rows(gpu: str, family: str, osl: int = 8192) -> list[dict]:
    """One record per ISL-1k row of ``family`` on ``gpu`` (no EP, no attention DP, CONC <= 256)."""
    from twin.fitting.replay import cost_model_for, deployment_for
    from twin.fitting.silicon import lengths, model_family, silicon_cases
    out = []
    for c in silicon_cases()[0]:
        r = c.row
        if (not r.system.startswith(gpu) or model_family(r.model_path) != family or r.isl != 1024 or r.osl != osl
                or r.attention_dp > 1 or r.moe_ep > 1 or r.concurrency > 256):
            continue
        cost = cost_model_for(deployment_for(c.run, c.target), c.target, UNIFORM)
        if not cost.model.is_moe:
            continue
        prompt, output = lengths(r)
        ctx = int(prompt.mean + output.mean / 2)

        def step(n: int) -> dict[str, float]:
            return cost.explain(SimpleNamespace(num_new_tokens=[1] * n, num_computed_before=[ctx] * n,
                                                num_spec_tokens=[0] * n))

        def stream(e: dict[str, float]) -> float:
            return e.get("weight_read_s", 0.0) + e.get("linear_compute_s", 0.0)

        n, m = r.concurrency, cost.model
        e, one = step(n), step(1)
        per_expert_s = (stream(e) - stream(one)) / (touched_fraction(m.num_experts, m.num_experts_per_tok, n)
                                                    - touched_fraction(m.num_experts, m.num_experts_per_tok, 1))
        out.append({"tp": r.tp, "conc": n, "version": r.vllm_version or "-", "twin_s": e["total_s"],
                    "meas_s": r.tpot_ms / 1e3, "all_experts_s": per_expert_s, "experts_s": per_expert_s
                    * touched_fraction(m.num_experts, m.num_experts_per_tok, n),
                    "per_seq_s": e.get("layer_token_overhead_s", 0.0) + n * SYNC_FREE_PER_SEQ_S,
                    "num_experts": m.num_experts, "top_k": m.num_experts_per_tok})
    return sorted(out, key=lambda d: (d["tp"], d["conc"]))


def implied_per_seq_s(d: dict) -> float:
    """What each sequence would cost per step (s) if everything but the per-sequence part were right."""
    return (d["meas_s"] - (d["twin_s"] - d["per_seq_s"])) / d["conc"]


def with_active_share(d: dict, share: float) -> float:
    """The row's twin step (s) if its experts' routing drew from only ``share`` of them."""
    uniform = touched_fraction(d["num_experts"], d["top_k"], d["conc"])
    return d["twin_s"] - d["all_experts_s"] * (uniform - touched_share(d["num_experts"], d["top_k"], d["conc"],
                                                                      share))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", default="b200")
    ap.add_argument("--family", default="gpt-oss")
    ap.add_argument("--osl", type=positive_int, default=8192)
    ap.add_argument("--rows", action="store_true")
    ap.add_argument("--active-share", type=finite_float, default=None)
    args = ap.parse_args()
    if args.active_share is not None and not 0.0 < args.active_share <= 1.0:
        raise TwinInputError(f"--active-share = {args.active_share}: must be in (0, 1]")
    rows = decode_rows(args.gpu, args.family, args.osl)
    if not rows:
        raise TwinInputError(f"--gpu {args.gpu} --family {args.family}: no ISL-1k OSL-{args.osl} MoE rows")
    if args.rows:
        print("| TP | CONC | release | twin ms | measured ms | gap ms | experts ms | per-seq ms | implied per-seq us |\n"
              "|---|---|---|---|---|---|---|---|---|")
        for d in rows:
            print(f"| {d['tp']} | {d['conc']} | {d['version']} | {d['twin_s'] * 1e3:.2f} | {d['meas_s'] * 1e3:.2f} | "
                  f"{(d['twin_s'] - d['meas_s']) * 1e3:+.2f} | {d['experts_s'] * 1e3:.2f} | {d['per_seq_s'] * 1e3:.2f} | "
                  f"{implied_per_seq_s(d) * 1e6:.1f} |")
    gap = [d["twin_s"] - d["meas_s"] for d in rows]
    fits = split_gap(gap, [d["experts_s"] for d in rows], [d["per_seq_s"] for d in rows])
    print(f"{args.family} {args.gpu} OSL {args.osl}: {len(rows)} rows, rms gap {np.sqrt(np.mean(np.square(gap))) * 1e3:.3f}"
          " ms; " + "; ".join(f"{k}: coef {', '.join(f'{c:+.3f}' for c in v[0])}, rms {v[1] * 1e3:.3f} ms"
                             for k, v in fits.items()))
    for tp in sorted({d["tp"] for d in rows}):
        sel = [d for d in rows if d["tp"] == tp and d["conc"] >= 32]
        if sel:
            print(f"  TP {tp}, CONC >= 32: twin / measured - 1, median {statistics.median(d['twin_s'] / d['meas_s'] - 1 for d in sel):+.1%} ({len(sel)} rows)")
    if args.active_share is not None:
        groups = [(f"CONC {lo}-{hi}", [d for d in rows if lo <= d["conc"] <= hi]) for lo, hi in ((1, 16), (32, 256))]
        groups += [(f"TP {tp}, CONC >= 32", [d for d in rows if d["tp"] == tp and d["conc"] >= 32])
                   for tp in sorted({d["tp"] for d in rows})]
        for name, sel in groups:
            if sel:
                errs = [with_active_share(d, args.active_share) / d["meas_s"] - 1 for d in sel]
                print(f"  active share {args.active_share}: {name} median {statistics.median(errs):+.1%}")


if __name__ == "__main__":
    run_script(main)
