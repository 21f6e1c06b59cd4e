"""Which training rows should identify the bench client's path, held out (issue 33, round 18).

A fold fits ``request_path_s@client_vllm_bench`` (one constant per request) on ALL its training bench rows; it comes
out at 11-19 ms against the 4.8 ms embedded, because the loaded rows and a few deployments park time the twin's
steps lack on it (round 17). The hypothesis read here: the path is a property of the client and the server's front
end, so a fold should identify it only from rows whose step model is trusted, and predict the held-out rows with it.

Per fold (family gpt-oss / kimi / minimax / llama; GPU H100-SXM / B200), each RULE picks the training rows the
constant is fitted on (``request_path_structure.fit``: the fold fits' loss, the summed squared log ratio of mean
TTFT, the shift added to the twin's mean TTFT); every held-out bench row (all loads) is scored with it. The other
terms stay at the embedded defaults (in-sample for the held-out rows): a screen for a fold run, not a held-out figure.

    python benchmarks/fidelity_real.py --defaults-only --silicon-every 3 --eval-sim-s 60 --json D.json
    python benchmarks/client_fit_screen.py D.json [--light-conc 8] [--path-share 0.1]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import bounded, positive_int  # noqa: E402
from benchmarks.request_path_structure import fit, load, score  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402

EMBEDDED_PATH_MS = 4.8 + 3.2      # what the twin already charges a bench request (path + jitter mean)
FOLDS = (("family", "family", "gpt-oss"), ("family", "family", "kimi"), ("family", "family", "minimax"),
         ("family", "family", "llama"), ("GPU", "gpu", "H100-SXM"), ("GPU", "gpu", "B200"))


def rules(light_conc: int, path_share: float) -> dict:
    """Rule name -> predicate on a training bench row."""
    return {
        "all (the folds' rule)": lambda c: True,
        f"light (CONC <= {light_conc})": lambda c: c["conc"] <= light_conc,
        "dense": lambda c: not c.get("moe"),
        f"dense, light": lambda c: not c.get("moe") and c["conc"] <= light_conc,
        f"path-dominated (path >= {path_share:.0%} of twin TTFT)":
            lambda c: EMBEDDED_PATH_MS / c["predicted"]["mean_ttft_ms"] >= path_share,
        "H100 rows only": lambda c: c["gpu"] == "H100-SXM",
        f"H100, light": lambda c: c["gpu"] == "H100-SXM" and c["conc"] <= light_conc,
    }


def screen(cases: list[dict], light_conc: int, path_share: float) -> list[tuple]:
    """(fold label, rule, training rows, fitted shift ms, held |error|, held signed) per fold and rule; a rule that
    keeps no training row of a fold gives shift None."""
    bench = [c for c in cases if c.get("source") == "silicon" and c.get("client")]
    for c in bench:
        if c.get("conc") is None or c.get("gpu") is None or c.get("family") is None:
            raise TwinInputError(f"{c['name']}: a bench-client row without its conc, gpu or family")
    out = []
    for kind, field, group in FOLDS:
        train = [c for c in bench if c[field] != group]
        held = [c for c in bench if c[field] == group]
        if not held:
            continue
        a, s = score(held, None, ())
        out.append((f"{kind} {group}", "embedded path", len(train), 0.0, a, s))
        for name, keep in rules(light_conc, path_share).items():
            rows = [c for c in train if keep(c)]
            if not rows:
                out.append((f"{kind} {group}", name, 0, None, None, None))
                continue
            coef = fit(rows, ("one",))
            a, s = score(held, ("one",), coef)
            out.append((f"{kind} {group}", name, len(rows), float(coef[0]), a, s))
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("defaults_json")
    ap.add_argument("--light-conc", type=positive_int, default=8, help="light load: CONC <= this (default 8)")
    ap.add_argument("--path-share", type=bounded(False, 0.0, low_open=True, high=1.0), default=0.1,
                    help="path-dominated: the embedded path's share of the twin's mean TTFT >= this (default 0.1)")
    args = ap.parse_args(argv)
    rows = screen(load(Path(args.defaults_json)), args.light_conc, args.path_share)
    print("fold, rule: training rows, fitted shift over the embedded path (ms), held-out |error| (signed) mean TTFT")
    last = None
    for label, rule, n, shift, a, s in rows:
        if label != last:
            print(f"\n{label}")
            last = label
        if shift is None:
            print(f"  {rule:44s} no training row")
        else:
            print(f"  {rule:44s} {n:4d} {shift:+7.1f} ms  {100 * a:5.1f} % ({100 * s:+6.1f} %)")


if __name__ == "__main__":
    run_script(main)
