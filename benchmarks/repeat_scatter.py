"""How far two measurements of one configuration disagree: the silicon ground truth's noise floor (issue 33, round 19).

The silicon file measures many configurations more than once (other dates, other dumps, other scripts' runs). Rows
that repeat one configuration are grouped; copies of one measurement (the same run listed in several files: equal
TTFT to 0.1 ms and TPOT to 0.01 ms) count once; each pair of distinct measurements in a group gives, per metric, the
log ratio ``r = ln(a / b)`` of their values (the metrics the folds score: ``twin.fitting.silicon.derived_metrics``).

Two groupings (``KEYS``):

* ``config``: the same model, GPU, weight formats, layout (TP, PP, DP, expert parallelism, as the twin reads the
  row), ISL / OSL, concurrency, vLLM release and client (a published bench client or a gap-analysis row);
* ``twin``: ``config`` and the same KV dtype and server settings the twin is given (``silicon_scripts.row_server``:
  a script that changed between dates, e.g. MiniMax's and Kimi NVFP4's March and April flags, splits a ``config``
  group). A deterministic
  predictor gives every member of a ``twin`` group one prediction, so their scatter is a floor no term can beat.

Per metric it prints the pairs, the median relative difference ``|a - b| / mean(a, b)``, its half (each
measurement's distance from the pair's mean) and one measurement's median distance from the configuration's
expected value, ``median |r| / sqrt(2)`` (the difference of two independent measurements has sqrt(2) times one's
spread): the median |error| a prediction exactly at the expected value would show against one measurement.

    python benchmarks/repeat_scatter.py [--ground-truth DIR] [--key twin|config] [--by-family]   # seconds
"""

from __future__ import annotations

import argparse
import collections
import itertools
import math
import statistics
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from twin.errors import TwinInputError, run_script  # noqa: E402

KEYS = ("twin", "config")
REPEAT_METRICS = (("mean_ttft_ms", "TTFT mean"), ("mean_tpot_ms", "TPOT"), ("mean_e2el_ms", "E2E mean"),
                  ("request_throughput", "throughput"))
COPY_DIGITS = {"mean_ttft_ms": 1, "mean_tpot_ms": 2}     # equal to these decimals: one measurement listed twice


def config_key(row) -> tuple:
    """One configuration (see the module docstring); the layout as the twin reads it
    (``silicon_layout.row_layout``: some rows list an attention DP or expert EP their server did not run)."""
    from twin.fitting.silicon_layout import row_layout
    return (row.model_path, row.system, (row.precision or "").lower(), row.gemm_quant, row.moe_quant, row.mode,
            row.isl, row.osl, row.concurrency, tuple(sorted(row_layout(row).items())), row.vllm_version or "",
            row.published_client)


def twin_key(row, target=None) -> tuple:
    """``config_key`` and the rest of what the twin is given for the row: its target (KV dtype, per-layer weight
    formats; ``target``: the row's ``silicon.row_target``, where the caller has it) and server settings
    (``silicon_scripts.row_server``)."""
    from twin.fitting.silicon import row_target
    from twin.fitting.silicon_scripts import row_server
    t = target if target is not None else row_target(row)
    return config_key(row) + (t.kv_dtype, repr(t.weight_formats),
                              tuple(sorted((k, repr(v)) for k, v in row_server(row).items())))


def measurements(ground_truth: Path | None = None, key: str = "twin",
                 cases=None) -> list[tuple[tuple, str, dict[str, float]]]:
    """(group key, model family, derived metrics) of every silicon row the twin can run (``cases``: those rows'
    ``silicon.silicon_cases``, where the caller has them already)."""
    if key not in KEYS:
        raise TwinInputError(f"key {key!r}: allowed: {', '.join(KEYS)}")
    from twin.fitting.silicon import silicon_cases
    from twin.fitting.silicon_rows import model_family
    cases = silicon_cases(ground_truth)[0] if cases is None else cases
    return [(twin_key(c.row, c.target) if key == "twin" else config_key(c.row), model_family(c.row.model_path),
             dict(c.run.metrics)) for c in cases]


def repeat_groups(items: Iterable[tuple[tuple, str, dict[str, float]]]) -> dict[tuple, list[dict[str, float]]]:
    """The metrics of each group's distinct measurements (copies dropped, ``COPY_DIGITS``), groups of two or more."""
    groups: dict[tuple, dict[tuple, dict[str, float]]] = collections.defaultdict(dict)
    for key, family, metrics in items:
        copy = tuple(round(metrics[m], d) if m in metrics else None for m, d in COPY_DIGITS.items())
        groups[(family, key)].setdefault(copy, metrics)
    return {k: list(v.values()) for k, v in groups.items() if len(v) >= 2}


def pair_log_ratios(groups: dict[tuple, list[dict[str, float]]], metric: str) -> list[float]:
    """``ln(a / b)`` of ``metric`` over every pair of measurements in each group that both have it (positive
    values; anything else is one line)."""
    out = []
    for key, runs in groups.items():
        values = [r[metric] for r in runs if metric in r]
        for v in values:
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise TwinInputError(f"repeat group {key[0]} {key[1][:3]}: {metric} = {v!r}, not a positive number")
        out += [math.log(a / b) for a, b in itertools.combinations(values, 2)]
    return out


def scatter(ratios: Sequence[float]) -> dict[str, float | int] | None:
    """Of the pairs' log ratios: their count, the median relative difference ``|a - b| / mean(a, b)``, its half, and
    one measurement's median |deviation| from the expected value (``median |r| / sqrt(2)``); None without pairs."""
    if not ratios:
        return None
    rel = [2.0 * abs(math.tanh(r / 2.0)) for r in ratios]     # |a - b| / ((a + b) / 2) for a / b = e^r
    return {"pairs": len(ratios), "median_rel_diff": statistics.median(rel),
            "half": statistics.median(rel) / 2.0,
            "one_measurement": math.expm1(statistics.median(abs(r) for r in ratios) / math.sqrt(2.0))}


def deviation_pool(ground_truth: Path | None = None, key: str = "twin", cases=None) -> dict[str, list[float]]:
    """Per metric, the pairs' log ratios (``twin`` groups by default; ``cases`` as ``measurements``): what
    ``heldout_intervals`` draws one measurement's deviation from (``r / sqrt(2)`` with a random sign)."""
    groups = repeat_groups(measurements(ground_truth, key, cases))
    return {m: pair_log_ratios(groups, m) for m, _ in REPEAT_METRICS}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def floor_lines(groups: dict[tuple, list[dict[str, float]]], label: str) -> list[str]:
    out = []
    for metric, title in REPEAT_METRICS:
        s = scatter(pair_log_ratios(groups, metric))
        if s is None:
            out.append(f"  {label:<10} {title:<11} no repeats")
            continue
        out.append(f"  {label:<10} {title:<11} pairs {s['pairs']:4d}  median |a - b| / mean "
                   f"{_pct(s['median_rel_diff']):>6}  half {_pct(s['half']):>6}  one measurement's median "
                   f"|deviation| {_pct(s['one_measurement']):>6}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--key", default="twin", choices=KEYS, help="what counts as one configuration (see the docstring)")
    ap.add_argument("--by-family", action="store_true", help="also the floor of each model family's groups")
    args = ap.parse_args()
    items = measurements(args.ground_truth, args.key)
    groups = repeat_groups(items)
    sizes = collections.Counter(len(v) for v in groups.values())
    print(f"{len(items)} runnable silicon rows; {len(groups)} configurations ({args.key} key) measured more than once "
          f"(" + ", ".join(f"{n} with {k}" for k, n in sorted(sizes.items())) + " distinct measurements)")
    print("\n".join(floor_lines(groups, "all")))
    if args.by_family:
        for fam in sorted({k[0] for k in groups}):
            print("\n".join(floor_lines({k: v for k, v in groups.items() if k[0] == fam}, fam)))


if __name__ == "__main__":
    run_script(main)
