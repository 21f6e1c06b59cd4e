"""``twin plan``: capacity planning (the cheapest deployment that serves a rate within the SLOs) on a process
pool or a Ray cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from twin.cli.console import console
from twin.cli.option_types import FiniteFloatRange, OutputFile
from twin.cli.plan_options import (
    common_options,
    executor_options,
    prices_from_options,
    scenario_data,
    slo_from_options,
)
from twin.cli.plan_output import print_plan, write_table_file
from twin.cli.plan_progress import plan_progress
from twin.errors import TwinInputError
from twin.results.numbers import counted
from twin.slo_section import slo_section
from twin.yaml_input import load_yaml_file


def plan_file_slo(slo: Any, path: Path) -> dict[str, Any]:
    """A plan file's ``slo:`` read once, as the runs' ``slo:`` sections read it (vLLM's names and ``"ttft:500"``
    form included): a refusal names the file."""
    try:
        return slo_section(slo)
    except TwinInputError as exc:
        raise TwinInputError(f"{path}: {exc}") from None


@click.command()
@click.argument("target")
@common_options
@click.option("--target-rate", type=FiniteFloatRange(0, min_open=True),
              help="Requests per second to serve (default: the scenario's own rate).")
@click.option("--search", "search_items", multiple=True, metavar="KEY=V1,V2",
              help="A search axis, e.g. deployment.gpu=H100-SXM,H200-SXM or server.max_num_seqs=64,256 "
                   "(repeatable; replaces the plan file's search: and candidates: and the default space).")
@click.option("--router", type=click.Choice(["round_robin", "least_outstanding", "least_kv_usage",
                                             "prefix_affinity", "kv_cache_aware"]),
              help="Router in front of the replicas (default least_outstanding).")
@click.option("--rel-tol", type=FiniteFloatRange(0, 1, min_open=True, max_open=True),
              help="Bisection stops when failing/passing rate <= 1 + rel_tol (default 0.05).")
@click.option("--confidence", type=FiniteFloatRange(0, 1, min_open=True, max_open=True),
              help="Confidence level of the max-rate intervals (default 0.95).")
@click.option("--max-replicas", type=click.IntRange(1, 4096), help="Largest cluster to consider (default 256).")
@click.option("--frontier-extra", type=click.IntRange(0, 16),
              help="Extra replica counts per hardware option for the frontier (default 1).")
@click.option("--no-prune", is_flag=True, help="Measure every candidate's max rate fully.")
@click.option("--verify-all", is_flag=True, help="Size and simulate every measured candidate, not only the best "
                                                 "per hardware option.")
@click.option("--latency-metric", help="The frontier's latency axis (default p99_ttft_ms).")
@executor_options
@click.option("--json", "json_path", type=OutputFile(), help="Write the whole plan as JSON.")
@click.option("--csv", "csv_path", type=OutputFile(),
              help="Candidates table (.csv or .parquet).")
@click.option("--deployments-csv", type=OutputFile(),
              help="Deployments simulated at the target (.csv or .parquet).")
@click.option("--plot", "plot_path", type=OutputFile(), help="Cost-latency frontier (Plotly HTML).")
def plan(target: str, variant: str, sets, seed, replications, slo_items, goodput, price_items, prices_file,
         quiet, target_rate, search_items, router, rel_tol, confidence, max_replicas, frontier_extra, no_prune,
         verify_all, latency_metric, workers, backend, ray_address, json_path, csv_path, deployments_csv,
         plot_path) -> None:
    """Find the cheapest deployment that serves TARGET's traffic within the SLOs.

    TARGET is a plan file (YAML with a `scenario:` key, see examples/plan_*.yaml) or a scenario. Prints every
    candidate's maximum sustainable rate per replica (bisection, with confidence intervals over
    replications), the deployments simulated at the target rate, the cheapest one and the cost-latency
    frontier."""
    from twin.plan.evaluate import Criteria
    from twin.plan.executor import Runner, make_executor
    from twin.plan.grid import check_grid, parse_grid_options
    from twin.plan.plan_files import is_plan_file, read_plan_file
    from twin.plan.plan_spec import PlanSpec
    from twin.plan.planner import Planner
    from twin.plan.price_names import gpu_names_in
    from twin.scenario import resolve_scenario_path

    path = resolve_scenario_path(target)
    raw = load_yaml_file(path, "plan or scenario")
    pf: dict[str, Any] = {}
    if is_plan_file(raw):
        pf = read_plan_file(raw, str(path))
        scenario_ref = pf["scenario"]
        plan_dir = path.parent
        if not isinstance(scenario_ref, (str, dict)):
            raise TwinInputError(f"{path}: scenario: must be a path or an inline scenario mapping")
        source = click.get_current_context().get_parameter_source("variant")
        given = source is not None and source != click.core.ParameterSource.DEFAULT   # -v baseline wins too
        data, base_dir = scenario_data(scenario_ref, variant if given else pf.get("variant", variant),
                                        sets, seed, plan_dir, pf.get("overrides"))
        if isinstance(scenario_ref, dict):
            base_dir = str(plan_dir)
    else:
        data, base_dir = scenario_data(str(path), variant, sets, seed, None)
    slo = slo_from_options(slo_items) or plan_file_slo(pf.get("slo"), path) or slo_section(data.get("slo")) or None
    criteria = Criteria(slo, goodput if goodput is not None else pf.get("goodput"))
    space = parse_grid_options(search_items, "--search") if search_items else check_grid(
        [(str(k), list(v)) for k, v in (pf.get("search") or {}).items()])
    prices = prices_from_options(price_items, prices_file, pf.get("prices"), what="this plan", base_dir=base_dir,
                                 gpus=gpu_names_in(data, space, None if search_items else pf.get("candidates")))
    if data.get("disaggregation") is not None:    # prefill/decode pools: the P:D grid (twin.plan.pd_plan)
        from twin.cli.plan_pd import refuse_replica_plan_settings, run_pd_plan

        refuse_replica_plan_settings(pf, str(path))

        with make_executor(backend, workers, ray_address) as executor:
            run_pd_plan(data, base_dir, criteria, prices,
                        target_rate if target_rate is not None else pf.get("target_rate_per_s"), space,
                        replications or pf.get("replications", 2),
                        latency_metric or pf.get("latency_metric", "p99_ttft_ms"), executor, json_path)
        return
    spec = PlanSpec(
        data=data, criteria=criteria, base_dir=base_dir, prices=prices,
        target_rate=target_rate if target_rate is not None else pf.get("target_rate_per_s"),
        space=space, candidates=None if search_items else pf.get("candidates"),
        router=router or pf.get("router", "least_outstanding"),
        replications=replications or pf.get("replications", 2),
        rel_tol=rel_tol or pf.get("rel_tol", 0.05), confidence=confidence or pf.get("confidence", 0.95),
        max_replicas=max_replicas or pf.get("max_replicas", 256),
        frontier_extra=frontier_extra if frontier_extra is not None else pf.get("frontier_extra_replicas", 1),
        prune=not no_prune and pf.get("prune", True), verify_all=verify_all or pf.get("verify_all", False),
        latency_metric=latency_metric or pf.get("latency_metric", "p99_ttft_ms"),
    )
    planner = Planner(spec)
    feasible = sum(c.error is None for c in planner.candidates)
    from twin.results import numbers
    from twin.results.slo_words import slo_words

    console.print(f"target {numbers.with_unit(planner.target_rate, 'req/s')} = "
                  f"{numbers.number(planner.target_scale)} x the scenario's "
                  f"{numbers.with_unit(planner.base_rate, 'req/s')} | {counted(len(planner.candidates), 'candidate')} "
                  f"({feasible} feasible) | "
                  f"SLO {slo_words(criteria.as_dict()['slo'])}"
                  + (f", >= {criteria.effective_goodput * 100:g}% of requests within the SLO"
                     if criteria.effective_goodput else "")
                  + f" | router {spec.router} | {counted(planner.replications, 'replication')}",
                  highlight=False)
    with make_executor(backend, workers, ray_address) as executor, \
            plan_progress(quiet, "plan") as progress:
        task = progress.add_task("plan", total=None)
        runner = Runner(executor, on_done=lambda n: progress.advance(task, n))
        result = planner.run(runner)
    print_plan(result)
    if json_path:
        from twin.results.export import dumps

        p = Path(json_path)
        if not p.parent.exists():
            raise TwinInputError(f"--json {json_path}: folder {p.parent} does not exist")
        p.write_text(dumps(result.to_dict()) + "\n", encoding="utf-8")
        console.print(f"wrote {json_path}", highlight=False)
    if csv_path:
        write_table_file(result.candidates_frame(), csv_path)
    if deployments_csv:
        write_table_file(result.deployments_frame(), deployments_csv)
    if plot_path:
        from twin.plan.sweep_tables import write_html

        write_html(result.figure(), plot_path)
        console.print(f"wrote {plot_path}", highlight=False)
