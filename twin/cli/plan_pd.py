"""``twin plan`` on a prefill/decode scenario: the P:D grid's verdicts, the cheapest point and the frontier
(``twin.plan.pd_plan``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from twin.cli.console import console
from twin.cli.plan_words import STEP_TIME, STEP_TIME_NOTE, human_reason, limit_words
from twin.results.numbers import counted
from twin.errors import TwinInputError
from twin.results import numbers
from twin.results.report import label
from twin.results.slo_words import slo_words


def _ms(v: Any) -> str:
    return "-" if v is None else numbers.duration_ms(v)


def print_pd_plan(out: dict[str, Any]) -> None:
    metric = out["latency_metric"]
    console.print(f"P/D plan at {numbers.with_unit(out['target_rate_per_s'], 'req/s')} "
                  f"(the scenario offers {numbers.with_unit(out['base_rate_per_s'], 'req/s')}), "
                  f"{counted(out['replications'], 'replication')}, SLO {slo_words(out['criteria']['slo'])}",
                  highlight=False)
    extra = [k for k in out["rows"][0] if "." in k] if out["rows"] else []
    header = ["config", *extra, "GPUs", "$/h", "TTFT p99", "TPOT p99", "output tok/s", "$/M output tok", "verdict",
              "limit"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in out["rows"]:
        cells = [r["config"], *(str(r[k]) for k in extra), str(r["gpus"]),
                 "-" if r["usd_per_hour"] is None else f"{r['usd_per_hour']:.2f}", _ms(r["p99_ttft_ms"]),
                 _ms(r["p99_tpot_ms"]), "-" if r["output_throughput"] is None else numbers.number(r["output_throughput"]),
                 "-" if r["usd_per_million_output_tokens"] is None else f"{r['usd_per_million_output_tokens']:.3f}",
                 "meets" if r["passed"] else "misses: " + "; ".join(map(human_reason, r["reasons"][:2])),
                 limit_words(r.get("limit"), r["passed"]) or "-"]
        lines.append("| " + " | ".join(cells) + " |")
    console.print("\n".join(lines), highlight=False, soft_wrap=True)
    if any(limit_words(r.get("limit"), r["passed"]) == STEP_TIME for r in out["rows"]):
        console.print(STEP_TIME_NOTE, highlight=False)
    best = out["cheapest"]
    if best is None:
        console.print("no point of the grid meets the SLOs at this rate", highlight=False)
    else:
        console.print(f"cheapest: {best['config']}"
                      + "".join(f", {k}={best[k]}" for k in extra)
                      + f": {counted(best['gpus'], 'GPU')}, ${best['usd_per_hour']:.2f}/h, "
                        f"{label(metric)} {_ms(best[metric])}",
                      highlight=False)
    if out["frontier"]:
        console.print(f"frontier ($/h -> {label(metric)}): " + ", ".join(
            f"{r['config']} ${r['usd_per_hour']:.2f} {_ms(r[metric])}" for r in out["frontier"]), highlight=False)
    bands = out["heldout_bands"]                 # issue 33: how far off the twin was on servers of this kind
    margin = (bands.get("recommended") or {}).get("margin")
    for line in ([f"cheapest {bands['recommended']['configuration']}: {margin}"] if margin else []) + bands["note"]:
        console.print(line, highlight=False, markup=False)


REPLICA_PLAN_OPTIONS = ("router", "rel_tol", "confidence", "max_replicas", "frontier_extra", "no_prune",
                        "verify_all", "csv_path", "deployments_csv", "plot_path")
REPLICA_PLAN_FIELDS = ("candidates", "router", "rel_tol", "confidence", "max_replicas", "frontier_extra_replicas",
                       "prune", "verify_all")


def refuse_replica_plan_settings(plan_file: dict[str, Any], source: str) -> None:
    """The P:D grid simulates every point at the target rate: no bisection, no replica sizing, no router, no
    candidate tables. An option or plan-file field of that replica plan is one line, not silently unused."""
    from twin.cli.option_types import refuse_outside_mode

    mode = "a plan of replicas, not a P:D grid (the scenario has disaggregation:)"
    refuse_outside_mode(mode, False, REPLICA_PLAN_OPTIONS)
    for name in REPLICA_PLAN_FIELDS:
        if name in plan_file:
            raise TwinInputError(f"{source}: {name}: applies only with {mode}")


def run_pd_plan(data: dict[str, Any], base_dir: str | None, criteria: Any, prices: Any, target_rate: float | None,
                space: list, replications: int, latency_metric: str, executor: Any, json_path: str | None) -> None:
    from twin.plan.executor import Runner
    from twin.plan.pd_plan import plan_pd

    out = plan_pd(data, base_dir=base_dir, criteria=criteria, prices=prices, target_rate=target_rate, space=space,
                  replications=replications, runner=Runner(executor), latency_metric=latency_metric)
    print_pd_plan(out)
    if json_path:
        from twin.results.export import dumps

        p = Path(json_path)
        if not p.parent.exists():
            raise TwinInputError(f"--json {json_path}: folder {p.parent} does not exist")
        p.write_text(dumps(out) + "\n", encoding="utf-8")
        console.print(f"wrote {json_path}", highlight=False)
