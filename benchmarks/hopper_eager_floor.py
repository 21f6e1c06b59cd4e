"""Hopper's eager floor (issue 33, round 14; docs/fidelity.md "Round 14: Hopper's eager floor"). No fit: every
H100 case (the silicon rows, every ``--silicon-every``-th as the defaults report takes them, and the 21
inference-perf runs' first ``--sim-s`` seconds) simulated at the embedded defaults and with a Hopper eager host
floor (``twin.cost.eager_steps``) given as scoped parameters:

    python benchmarks/hopper_eager_floor.py [--ground-truth DIR] [--silicon-every 3] [--sim-s 60] [--workers 1]
        [--variant NAME=LAYER_MS/MOE_MS ...] [--json OUT.json]

Default variants: ``blackwell`` (the embedded Blackwell values carried as a prior: 0.84 ms per decoder layer,
1.15 ms more per MoE layer) and ``reading`` (``provenance.HOST_READINGS``' 0.92 ms per decoder layer, no MoE extra:
it was read per decoder layer off MiniMax rows too). Prints, per variant, the median |error| and signed error of
TTFT / TPOT / E2E by source and family, and every case whose TTFT moved by more than 1 point.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_out_path, positive_float, positive_int  # noqa: E402
from twin.errors import run_script  # noqa: E402

DEFAULT_VARIANTS = ("blackwell=0.84/1.15", "reading=0.92/0")
KEYS = ("mean_ttft_ms", "mean_tpot_ms", "mean_e2el_ms")


def parse_variant(text: str) -> tuple[str, float, float]:
    """``NAME=LAYER_MS/MOE_MS`` -> (name, seconds per decoder layer, seconds more per MoE layer); one-line errors."""
    name, sep, rest = text.partition("=")
    layer, sep2, moe = rest.partition("/")
    try:
        if not (sep and sep2 and name.strip()):
            raise ValueError
        layer_s, moe_s = float(layer) * 1e-3, float(moe) * 1e-3
    except ValueError:
        raise SystemExit(f"--variant {text!r}: expected NAME=LAYER_MS/MOE_MS, e.g. blackwell=0.84/1.15") from None
    if not (0 <= layer_s < 0.1 and 0 <= moe_s < 0.1):
        raise SystemExit(f"--variant {text!r}: host times must be 0 <= ms < 100")
    return name.strip(), layer_s, moe_s


def hopper_params(base: dict[str, float], layer_s: float, moe_s: float) -> dict[str, float]:
    """The embedded defaults with the Hopper eager floor set (scoped, so no other generation moves)."""
    return base | {"eager_layer_host_s@hopper": layer_s, "eager_moe_layer_host_s@hopper": moe_s}


def summary(rows: list[dict], key: str) -> str:
    xs = [r[key] for r in rows if r.get(key) is not None]
    if not xs:
        return "-"
    return f"{100 * statistics.median(map(abs, xs)):5.1f}% ({100 * statistics.median(xs):+6.1f}%)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ground-truth", type=Path,
                    default=Path(__file__).resolve().parents[2] / "shared" / "ground-truth")
    ap.add_argument("--silicon-every", type=positive_int, default=3)
    ap.add_argument("--sim-s", type=positive_float, default=60.0)
    ap.add_argument("--workers", type=positive_int, default=1)
    ap.add_argument("--variant", action="append", default=None)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    check_out_path(a.json, "--json")
    variants = [parse_variant(v) for v in (a.variant or DEFAULT_VARIANTS)]

    from twin.fitting.fit import simulate_cases
    from twin.fitting.joint import FOLDS, all_cases, default_start, errors
    cases = [c for c in all_cases(a.ground_truth, silicon_every=a.silicon_every) if FOLDS["GPU"](c) == "H100-SXM"]
    base = default_start(())
    runs = [("defaults", base)] + [(n, hopper_params(base, l, m)) for n, l, m in variants]
    out: dict[str, list[dict]] = {}
    for label, params in runs:
        res = simulate_cases(cases, params, max_sim_s=a.sim_s, workers=a.workers)
        out[label] = [{"name": c.run.name, "source": FOLDS["source"](c), "family": FOLDS["family"](c),
                       **{k: e.get(k) for k in KEYS}} for c, e in ((c, errors(c, r.metrics)) for c, r in zip(cases, res))]
        print(f"done {label}", flush=True)
    groups = [("all", lambda r: True)] + [(s, lambda r, s=s: r["source"] == s) for s in ("inference-perf", "silicon")] \
        + [(f, lambda r, f=f: r["family"] == f) for f in sorted({r["family"] for r in out["defaults"]})]
    for label, rows in out.items():
        for g, keep in groups:
            part = [r for r in rows if keep(r)]
            print(f"{label:>10} {g:15s} n={len(part):3d} " + "  ".join(f"{k[5:-3]} {summary(part, k)}" for k in KEYS))
    for label, rows in out.items():
        if label == "defaults":
            continue
        for r0, r in zip(out["defaults"], rows):
            d0, d1 = r0["mean_ttft_ms"], r["mean_ttft_ms"]
            if d0 is not None and d1 is not None and abs(d1 - d0) > 0.01:
                print(f"{label:>10} moved {r['name'][:70]:70s} TTFT {100 * d0:+7.1f}% -> {100 * d1:+7.1f}%  "
                      f"TPOT {100 * (r0['mean_tpot_ms'] or 0):+6.1f}% -> {100 * (r['mean_tpot_ms'] or 0):+6.1f}%")
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    run_script(main)
