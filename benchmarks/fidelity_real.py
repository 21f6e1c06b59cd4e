"""The twin against real vLLM measurements (../shared/ground-truth): held-out figures by source, GPU and model
family (``twin.fitting.joint``), judged against the issue's targets (``twin.fitting.targets``).

Sources: the inference-perf runs on one H100 and the vLLM silicon rows (H100/B200) the twin can run today
(the others are counted with their reasons). For each fold kind (leave-one-source-out, leave-one-GPU-out,
leave-one-model-family-out) it holds out one group at a time and predicts it from the others; it prints, per
held-out group, pooled over every held-out case, and for dense and MoE models, the median |error| and the median
signed error of TTFT mean / p50, TPOT, E2E mean and throughput, beside the embedded defaults' errors on the same
cases, then one line per column against the targets (met / NOT met) and the whole report as markdown tables, ending
with each pooled median's bootstrap and measured-again intervals and which target misses lie outside both
(``benchmarks/heldout_intervals.py``; the report's ``intervals`` key).

No embedded value read off a held-out group is used in its fold (``twin.fitting.provenance``): each is refit on
the training rows when the fold fits it, else reset to its stated prior, and each fold says which.

    python benchmarks/fidelity_real.py            # the report: per fold, the serving terms and the Blackwell
                                                  # terms (FOLD_TERMS) refit on the training rows (every 16th
                                                  # silicon row, all 21 inference-perf runs, 30 s fit windows)
    python benchmarks/fidelity_real.py --no-refit # the embedded defaults held out, nothing fitted (leaked
                                                  # values reset to their stated priors; every 3rd silicon row)
    python benchmarks/fidelity_real.py --terms layer_token_overhead_s@blackwell   # fit these terms per fold
    python benchmarks/fidelity_real.py --joint    # fit JOINT_NAMES per fold (hours at --silicon-every 1)
        [--workers 1] [--silicon-every 3] [--silicon-max-requests N] [--fit-sim-s 60] [--eval-sim-s whole]
        [--outer 1] [--folds source,GPU,family] [--allow-leak NAME,...] [--markdown out.md] [--json out.json]
    python benchmarks/fidelity_real.py --defaults-only ...   # no folds: the embedded defaults, in-sample

Each refitted value is printed with its standard error and whether the training rows identify it
(``twin.fitting.identify``); one they do not identify is held at its prior (the stated prior where its evidence
is held out, else its embedded value), the others fitted again, and the report says so.

``--terms`` fits those parameters (every other one at its embedded default); ``--add-terms`` / ``--drop-terms``
without ``--terms`` add to / drop from ``JOINT_NAMES`` (as before). ``--silicon-every N`` keeps every N-th
runnable silicon row (a bounded subset; the provenance rule still judges on every row); ``--silicon-max-requests``
caps the requests simulated per silicon row (never under 3 x its concurrency); inference-perf runs simulate their
first ``--fit-sim-s`` seconds in the fit and ``--eval-sim-s`` in the predictions (default: whole stages, the span
their measured means cover; docs/fidelity.md "Round 19: the prediction window"). ``--allow-leak`` lets named
embedded values through unchanged (the report then no longer holds those out; it says so).
The ``--json`` / ``--markdown`` files are rewritten after each finished fold, atomically: a partial report
(``complete: false``, ``folds_done``) survives an interruption (``benchmarks/report_writer.py``), and
``--resume FILE`` (the same options; ``--workers`` may differ) keeps its finished folds, runs the others and writes
the report one uninterrupted run writes (``benchmarks/report_resume.py``). A trial script's harness switches
(``twin.fitting.switches``) reach every worker process and are recorded in the report's ``args``.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import (check_out_path, nonneg_int, positive_float, positive_int,  # noqa: E402
                                    seconds_or_whole)
from benchmarks.fidelity_defaults_only import cells as _cells, defaults_only as _defaults_only  # noqa: E402
from benchmarks.fidelity_defaults_only import header as _header  # noqa: E402
from benchmarks.heldout_intervals import add_intervals  # noqa: E402  (round 19, 33m)
from benchmarks.report_resume import Resumed, load_resumed  # noqa: E402  (round 23, 33zD)
from benchmarks.report_writer import ReportWriter  # noqa: E402  (round 22, 33zB)
from twin.fitting.case_weights import DEFAULT_WEIGHTING, WEIGHTINGS  # noqa: E402
from twin.fitting.fit import check_draws_option, simulate_cases  # noqa: E402  (round 23, 33zC: --fit-draws)
from twin.fitting.fit_window import fold_first, open_loop_fold_window_s  # noqa: E402
from twin.fitting.held_out_scope import read_default_indices, restricted  # noqa: E402  (round 23, 33zI)
from twin.fitting.joint import (FOLDS, JOINT_NAMES, all_cases, default_start, errors,  # noqa: E402
                                parameter_table, run_fold, summarize, summarize_errors, with_deployments)
from twin.fitting.parameters import PARAMETERS_BY_NAME  # noqa: E402
from twin.fitting.provenance import embedded_entries  # noqa: E402
from twin.fitting.robust import LOSSES, ROBUST_SCALE_LOG  # noqa: E402
from twin.fitting.scaled_sends import SENDS, with_sends  # noqa: E402
from twin.fitting.scoped import check_scoped_name  # noqa: E402
from twin.fitting.silicon import silicon_cases  # noqa: E402
from twin.fitting.switches import report_args  # noqa: E402
from twin.fitting.targets import markdown, target_lines, verdict_markdown  # noqa: E402
from twin.hardware.catalog import resolve_model  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402

DEFAULT_SILICON_EVERY = 3          # --no-refit / --defaults-only: every 3rd runnable silicon row
REFIT_SILICON_EVERY = 16           # the default report (a fit per fold): every 16th (bounded time on 2 cores)
REFIT_FIT_SIM_S = 30.0             # ... and 30 s of each inference-perf run simulated in the fits
# round 19 (33s): held-out inference-perf stages are predicted whole (--eval-sim-s whole), the span their measured
# means cover; round 21 (33zf): a fold trained on those runs alone fits them whole too (None; round 11-20: their
# first 60 s, one burst pattern the fit read: docs/fidelity.md "Round 21: a seed-robust source-fold fit"),
# --alone-fit-sim-s (the default as text, which argparse parses as a given value)
OPEN_LOOP_FOLD_FIT_S = None
ALONE_FIT_DEFAULT = "whole"
# the terms the default report refits per fold: the serving terms (read off the inference-perf H100 runs), the
# silicon rows' own request path (the vllm-bench client's, so a fold does not carry one source's per-request time
# into another's: docs/fidelity.md "Round 6: the request path and the client"), the sync servers' per-sequence
# time (twin.cost.sync_host; without it a fold that fits per_seq_overhead_s drops the Qwen3 rows' 45 us) and the
# Blackwell terms (read off B200 rows): every embedded value a fold may have to hold out, in the embedded defaults'
# own scopes, so each is learnt from the training rows or, where they cannot identify it, held at its prior.
# Round 7 (issue 33, "Round 7: terms by GPU generation"): decode bandwidth by generation (``memory_efficiency@blackwell``
# beside the unscoped one, which then holds on Hopper only: H100 rows teach H100, B200 rows B200) and the per-token
# per-layer cost fitted on Hopper too (unscoped, beside Blackwell's own): a fold without Blackwell rows predicts
# them with the value the other generation's rows show (the held Blackwell entry falls back to it) instead of 0.
FOLD_TERMS = ("memory_efficiency", "step_overhead_s", "per_seq_overhead_s", "request_path_s", "allreduce_latency_s",
              "request_path_s@client_vllm_bench", "per_seq_overhead_s@sync", "memory_efficiency@blackwell",
              "layer_token_overhead_s", "layer_token_overhead_s@blackwell",
              "eager_layer_host_s@blackwell", "eager_moe_layer_host_s@blackwell")


def _names(args) -> tuple[str, ...]:
    """The parameters each fold fits: ``--terms``; else ``JOINT_NAMES`` with ``--joint``, ``--add-terms`` or
    ``--drop-terms`` (as before this report); else none with ``--no-refit`` or ``--defaults-only``, else
    ``FOLD_TERMS``."""
    drop = {t.strip() for t in args.drop_terms.split(",") if t.strip()}
    add = tuple(t.strip() for t in args.add_terms.split(",") if t.strip())
    base = tuple(t.strip() for t in args.terms.split(",") if t.strip())
    if not base and (args.joint or add or drop):
        base = JOINT_NAMES
    elif not base and not (args.no_refit or args.defaults_only):
        base = FOLD_TERMS
    names = tuple(n for n in base if n not in drop) + tuple(t for t in add if t not in base)
    for n in names + tuple(drop):       # round 20 (33za): a scope that covers nothing, named as such
        check_scoped_name(n, "--terms/--add-terms/--drop-terms")
    unknown = [n for n in names + tuple(drop) if n not in PARAMETERS_BY_NAME]
    if unknown:
        raise SystemExit(f"--terms/--add-terms/--drop-terms: unknown parameter {unknown[0]!r}; allowed: "
                         + ", ".join(PARAMETERS_BY_NAME))
    if args.client_path_rows != "all" and "request_path_s@client_vllm_bench" not in names:   # round 18 (33f)
        raise SystemExit(f"--client-path-rows {args.client_path_rows}: the folds do not fit "
                         "request_path_s@client_vllm_bench here")
    if args.case_weights != DEFAULT_WEIGHTING and not names:     # round 19 (33l)
        raise SystemExit(f"--case-weights {args.case_weights}: the folds fit nothing here (--no-refit, "
                         "--defaults-only), so no case is weighed")
    return names


def allowed_leaks(text: str) -> tuple[str, ...]:
    """``--allow-leak``'s names, each an embedded parameter a fold plan can reset (``embedded_entries``); else a
    one-line error (round 20, 33za: an unknown name let nothing leak without a word)."""
    allow = tuple(t.strip() for t in text.split(",") if t.strip())
    known = list(dict.fromkeys(e.parameter for e in embedded_entries()))
    for name in allow:
        check_scoped_name(name, "--allow-leak")
        if name not in known:
            raise TwinInputError(f"--allow-leak {name}: not an embedded parameter a fold resets; allowed: "
                                 + ", ".join(known))
    return allow


def parameter_markdown(rows) -> str:
    """The fitted terms per fold as a markdown table: value (fit units), one standard error, identification."""
    out = ["| fold | held out | term | value | +/- | identified? |", "|---|---|---|---|---|---|"]
    out += [f"| {k} | {g} | `{n}` | {v} | {sd} | {st} |" for k, g, n, v, sd, st in rows]
    return "\n".join(out)


def _is_moe(case) -> bool:
    return resolve_model(case.target.model).is_moe


def _planned(kinds: list[str], cases, only: set[str]) -> dict[str, list[str] | None]:
    """{fold kind: the held-out groups to run (those of ``--groups``), None where the data hold one group only}."""
    out: dict[str, list[str] | None] = {}
    for kind in kinds:
        groups = list(dict.fromkeys(FOLDS[kind](c) for c in cases))
        out[kind] = None if len(groups) < 2 else [g for g in groups if not only or g in only]
    return out


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--workers", type=positive_int, default=1)
    ap.add_argument("--silicon-every", type=positive_int, default=None,
                    help=f"every N-th runnable silicon row (default {REFIT_SILICON_EVERY} when the folds fit, else "
                         f"{DEFAULT_SILICON_EVERY})")
    ap.add_argument("--silicon-max-requests", type=positive_int, default=None)
    ap.add_argument("--fit-sim-s", type=positive_float, default=None,
                    help=f"seconds of each inference-perf run simulated in the fits (default {REFIT_FIT_SIM_S:g} for "
                         "the default report, else 60)")
    ap.add_argument("--alone-fit-sim-s", type=seconds_or_whole, default=ALONE_FIT_DEFAULT,
                    help="seconds of each inference-perf stage simulated in the fit of a fold trained on those "
                         "stages alone (the silicon-held-out source fold) when the stages are predicted whole, or "
                         "'whole' (default %(default)s; --eval-sim-s N makes it N)")
    ap.add_argument("--no-refit", action="store_true", help="fit nothing per fold: the embedded defaults held out "
                    "(each leaked value reset to its stated prior)")
    ap.add_argument("--eval-sim-s", type=seconds_or_whole, default=None,
                    help="seconds of each inference-perf stage the predictions simulate, or 'whole' (default: "
                         "whole, the span the measured means cover; round 18 and before: 60)")
    ap.add_argument("--outer", type=positive_int, default=1, help="fit rounds (simulate, fit on the surrogate)")
    ap.add_argument("--folds", default="source,GPU,family")
    ap.add_argument("--groups", default="", help="comma-separated held-out groups to run (e.g. kimi,qwen3); "
                    "default every group of each fold kind (the pooled lines then cover these groups only)")
    ap.add_argument("--defaults-only", action="store_true",
                    help="no folds: the embedded defaults' errors by source, GPU and family (all in-sample for "
                         "the inference-perf runs, which they were fitted on)")
    ap.add_argument("--add-terms", default="", help="comma-separated parameters to fit besides JOINT_NAMES "
                    "(e.g. per_token_overhead_s)")
    ap.add_argument("--drop-terms", default="", help="comma-separated JOINT_NAMES to hold at their defaults")
    ap.add_argument("--terms", default="", help="comma-separated parameters to fit, instead of JOINT_NAMES "
                    "(every other one held at its embedded default), e.g. the scoped terms only")
    ap.add_argument("--joint", action="store_true", help="fit JOINT_NAMES in each fold")
    ap.add_argument("--allow-leak", default="", help="comma-separated embedded parameters used unchanged even "
                    "in folds that hold out their evidence (the figures then no longer hold them out)")
    ap.add_argument("--fold-loss", default="linear", choices=LOSSES,
                    help="the fold fits' loss on each run's log ratios (twin.fitting.robust; default least squares)")
    ap.add_argument("--fold-loss-scale", type=positive_float, default=ROBUST_SCALE_LOG,
                    help="the robust loss's scale, in log-ratio units (default %(default)s)")
    ap.add_argument("--keep-gap-rows", action="store_true", help="fit the rows twin.fitting.unseen_bandwidth."
                    "unexplained_decode_gap names too (by default they are left out of every fold's fit)")
    # round 18 (33f), opt-in: which training rows identify the bench client's path
    ap.add_argument("--client-path-rows", default="all", choices=("all", "light", "light-fit"),
                    help="training rows that identify the bench client's path: all (the folds' rule), or the "
                         "light-load bench rows alone (twin.fitting.client_path_rows) at the fold's start (light) or "
                         "at its fitted terms (light-fit)")
    # round 19 (33l), opt-in: how the fold fits weigh their training rows
    ap.add_argument("--case-weights", default=DEFAULT_WEIGHTING, choices=WEIGHTINGS,
                    help="the fold fits' case weights (twin.fitting.case_weights): each source's total by sqrt(count) "
                         "(source, the default), or shared among its (family, GPU) cells by sqrt(count) (cell; silicon-cell: "
                         "inside the silicon source only)")
    # round 20 (33z): the arrival draw of the inference-perf stages and the draws' seed
    ap.add_argument("--inference-perf-sends", default="as-read", choices=SENDS,
                    help="the inference-perf stages' arrival draw (twin.fitting.scaled_sends): as the reader says "
                         "(as-read, the default: a constant load's gaps scaled to the stage's span, as inference-perf "
                         "draws them, since round 20), scaled, or unscaled exponential gaps (round 19 and before)")
    ap.add_argument("--seed", type=nonneg_int, default=0,
                    help="the seed of every simulation's draws (arrivals, lengths, request path; default 0)")
    ap.add_argument("--fit-draws", type=positive_int, default=1, help="draws per stage in the fold fits (mean fitted)")
    ap.add_argument("--markdown", type=Path, default=None, help="also write the markdown summary here")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--resume", type=Path, default=None, help="the partial --json report an interrupted run of these "
                    "options left: its finished folds are kept, the others run (--json defaults to this file)")
    return ap


def main() -> None:
    args = parser().parse_args()
    if args.resume is not None and args.defaults_only:
        raise TwinInputError("--resume: --defaults-only runs no folds (nothing to resume)")
    args.json = args.json or args.resume          # round 23 (33zD): --resume FILE rewrites FILE unless --json says
    check_out_path(args.markdown, "--markdown")
    check_out_path(args.json, "--json")
    if args.defaults_only and args.markdown is not None:
        raise TwinInputError("--markdown: --defaults-only writes no markdown (it prints its table; --json keeps it)")
    unknown = [k.strip() for k in args.folds.split(",") if k.strip() and k.strip() not in FOLDS]
    if unknown:
        raise TwinInputError(f"--folds: unknown fold kind {unknown[0]!r}; allowed: {', '.join(FOLDS)}")
    t0 = time.perf_counter()
    names = _names(args)
    default_report = names == FOLD_TERMS and not args.terms
    if args.silicon_every is None:
        args.silicon_every = REFIT_SILICON_EVERY if names else DEFAULT_SILICON_EVERY
    if args.fit_sim_s is None:
        args.fit_sim_s = REFIT_FIT_SIM_S if default_report else 60.0
    allow = allowed_leaks(args.allow_leak)
    check_draws_option(args.fit_draws, "--fit-draws", fitting=bool(names))
    # the window a fold trained on open-loop runs alone fits (fit_window): the prediction window, or
    # --alone-fit-sim-s where the stages are predicted whole
    if args.eval_sim_s is not None and args.alone_fit_sim_s != seconds_or_whole(ALONE_FIT_DEFAULT):
        raise TwinInputError("--alone-fit-sim-s: applies where the stages are predicted whole; with --eval-sim-s N "
                             "a fold trained on them alone fits their first N s")
    fold_fit_eval_s = args.alone_fit_sim_s if args.eval_sim_s is None else args.eval_sim_s
    eval_text = "whole" if args.eval_sim_s is None else f"' first {args.eval_sim_s:g} s"
    runnable, skipped = silicon_cases(args.ground_truth, max_requests=args.silicon_max_requests)
    cases = all_cases(args.ground_truth, silicon_max_requests=args.silicon_max_requests,
                      silicon_every=args.silicon_every, weighting=args.case_weights)
    cases = with_sends(cases, args.inference_perf_sends)
    only = {g.strip() for g in args.groups.split(",") if g.strip()}
    known = {FOLDS[k.strip()](c) for k in args.folds.split(",") if k.strip() for c in cases}
    if only - known:
        raise SystemExit(f"--groups: unknown group {sorted(only - known)[0]!r}; allowed: {', '.join(sorted(known))}")
    planned = _planned([k.strip() for k in args.folds.split(",") if k.strip()], cases, only)
    run_args = {k: v for k, v in vars(args).items() if k != "resume"} | {"ground_truth": str(args.ground_truth)} \
        | report_args()       # round 23 (33zD): the harness's switches where they are not the embedded ones
    resumed = Resumed() if args.resume is None else load_resumed(
        args.resume, run_args, names, {k: g for k, g in planned.items() if g}, cases, FOLDS)
    reasons = collections.Counter(r.split(" (")[0] for _, r in skipped)
    print(f"{len(cases)} cases: " + ", ".join(f"{k} {v}" for k, v in collections.Counter(
        FOLDS['source'](c) for c in cases).items()) + f" (silicon every {args.silicon_every}); silicon rows the "
          f"twin cannot run: {len(skipped)} (" + ", ".join(f"{k} {v}" for k, v in reasons.items()) + ")")
    print("fitted per fold: " + (", ".join(names) if names else "nothing (the embedded defaults, held out)"))
    if names:
        alone_s = open_loop_fold_window_s(args.fit_sim_s, fold_fit_eval_s)
        print(f"  on the fold's training rows: silicon every {args.silicon_every}, inference-perf runs' first "
              f"{args.fit_sim_s:g} s (a fold trained on them alone: "
              f"{'whole' if alone_s is None else f'{alone_s:g} s'}, fit_window), {args.outer} outer "
              "round(s) (simulate, fit on the surrogate); held-out "
              f"predictions: silicon rows whole, inference-perf runs {eval_text}; a term the "
              "training rows do not identify is held at its prior" + (" (the default report; --no-refit: none "
                                                                       "fitted)" if default_report else ""))
    start = default_start(names)
    print("simulating every case at the embedded defaults ...", flush=True)
    # a closed loop (a silicon row) is simulated whole either way: its fit simulation is its prediction
    open_loop = [i for i, c in enumerate(cases) if not c.run.closed_loop]
    first = simulate_cases(cases, start, max_sim_s=args.fit_sim_s, workers=args.workers, seed=args.seed,
                           draws=args.fit_draws) if names else None
    default_pred: list = [r.metrics for r in first] if first else [None] * len(cases)
    # a closed loop's fit simulation is its defaults' prediction, unless a pooled (unscoped) fitted term starts at
    # another value than the scoped entry embedded for its deployment (layer_token_overhead_s: 0 vs Blackwell's)
    scoped = [e for e in embedded_entries() if e.scope and e.parameter.split("@")[0] in names]
    moved = {i for i, (_, d) in enumerate(with_deployments(cases)) if any(e.applies(d) for e in scoped)} \
        if first and scoped else set()
    again = restricted(sorted(set(open_loop) | moved) if first else range(len(cases)),   # 33zI: the defaults it reads
                       None if args.defaults_only else read_default_indices(cases, args.folds, only, FOLDS))
    for i, r in zip(again, simulate_cases([cases[i] for i in again], default_start(()),
                                          max_sim_s=args.eval_sim_s, workers=args.workers, seed=args.seed)):
        default_pred[i] = r.metrics
    default_by_name = {c.run.name: p for c, p in zip(cases, default_pred)}
    print(f"  ({time.perf_counter() - t0:.0f} s)", flush=True)

    report: dict = {"args": run_args, "names": list(names), "folds": {}}
    writer = ReportWriter(args.json, args.markdown)     # round 22 (33zB): partial reports, atomic writes
    if args.defaults_only:
        _defaults_only(cases, default_pred, report, args, t0)
        return writer.final(report, None)
    # the provenance rule judges on every ground-truth row, whatever the subsample
    evidence = with_deployments(cases if args.silicon_every == 1 and args.silicon_max_requests is None else
                                all_cases(args.ground_truth))
    print("embedded values and their evidence: " + "; ".join(
        f"{e.parameter} ({e.table}; {e.evidence})" for e in embedded_entries()))
    print("\nmedian |error| and median signed error (predicted / measured - 1) on held-out cases; "
          "'defaults' = the embedded defaults, unchanged, on the same cases")
    md_rows, verdicts, cache, param_rows, windows = [], [], {}, [], {}
    for kind, groups in planned.items():
        if groups is None:
            print(f"\nleave-one-{kind}-out: only one {kind} in the data; skipped")
            continue
        group_of = FOLDS[kind]
        print(f"\n== leave-one-{kind}-out")
        print(_header("held out"))
        pooled, pooled_default, fold_docs, group_summaries = [], [], [], []
        for g in groups:
            if (done := resumed.fold(kind, g, cases, group_of)) is not None:     # --resume: finished before
                fold_cases, fold_errors, doc, rows = done
                plan_lines = doc["plan"]
            else:
                fit_s, fold_sims = fold_first(cases, g, group_of, first, args.fit_sim_s, fold_fit_eval_s,
                                              lambda cs, s: simulate_cases(cs, start, max_sim_s=s, workers=args.workers,
                                                                           seed=args.seed,
                                                                           draws=args.fit_draws), windows)
                fold = run_fold(kind, g, cases, group_of, fold_sims, names=names, outer_iterations=args.outer,
                                fit_sim_s=fit_s, eval_sim_s=args.eval_sim_s, workers=args.workers, seed=args.seed,
                                evidence=evidence, defaults=default_pred, allow=allow, cache=cache,
                                loss=args.fold_loss, loss_scale=args.fold_loss_scale,
                                exclude_gap=not args.keep_gap_rows, client_path_rows=args.client_path_rows,
                                fit_draws=args.fit_draws)
                pairs = list(zip(fold.cases, fold.predicted))
                fold_cases, fold_errors, doc = fold.cases, [errors(c, p) for c, p in pairs], None
                plan_lines, rows = fold.plan.lines(), [(kind, g, *r) for r in parameter_table(fold)]
            dpairs = [(c, default_by_name[c.run.name]) for c in fold_cases]
            pooled += zip(fold_cases, fold_errors)
            pooled_default += dpairs
            group_summaries.append(summarize(pairs) if doc is None else doc["summary"])
            md_rows.append((kind, g, len(fold_cases), group_summaries[-1]))
            print(f"{g[:34]:<34} {len(fold_cases):4d} | {_cells(group_summaries[-1])}"
                  + ("" if doc is None else f"  (finished before: --resume {args.resume})"))
            print(f"{'  defaults':<34} {'':4} | {_cells(summarize(dpairs))}", flush=True)
            for line in plan_lines or ["no embedded value has evidence in this group"]:
                print(f"      {line}")
            fold_docs.append(doc or {"held_out": g, "params": fold.params, "std": fold.std,
                                     "identification": fold.identification, "plan": plan_lines,
                                     "summary": group_summaries[-1], "default_summary": summarize(dpairs),
                                     "errors": {c.run.name: e for c, e in zip(fold_cases, fold_errors)}})
            param_rows += rows
            writer.fold_done(report, kind, fold_docs, md_rows, param_rows)
            for _, _, name, value, sd, status in rows:
                print(f"      {name:30s} {value:>34s} +/- {sd:<8s} {status}")
        total = summarize_errors([e for _, e in pooled])
        print(f"{'all held out':<34} {len(pooled):4d} | {_cells(total)}")
        print(f"{'  defaults':<34} {'':4} | {_cells(summarize(pooled_default))}")
        md_rows.append((kind, "**all held out**", len(pooled), total))
        split = {}
        for label, moe in (("dense models", False), ("MoE models", True)):
            part = [e for c, e in pooled if _is_moe(c) == moe]
            split[moe] = summarize_errors(part)
            print(f"{label:<34} {len(part):4d} | {_cells(split[moe])}")
            md_rows.append((kind, label, len(part), split[moe]))
            report.setdefault("moe_vs_dense", {}).setdefault(kind, {})[label] = split[moe]
        print(f"  targets, leave-one-{kind}-out:")
        for line in target_lines(total, group_summaries, split[False], split[True]):
            print(f"    {line}")
        verdicts.append((kind, total, group_summaries, split[False], split[True]))
        report["folds"][kind] = {"pooled": total, "pooled_default": summarize(pooled_default), "folds": fold_docs}
    # round 19 (33m): bootstrap and measured-again intervals of the pooled medians (a new "intervals" key)
    intervals = ("\n" + add_intervals(report, cases, args.ground_truth, runnable) + "\n") if report["folds"] else ""
    elapsed = time.perf_counter() - t0
    text = (f"{len(cases)} cases (silicon every {args.silicon_every}); fitted per fold: "
            f"{', '.join(names) or 'nothing (the embedded defaults held out)'}"
            + (f"; let leak: {', '.join(allow)}" if allow else "") + f"; {elapsed:.0f} s\n\n"
            + markdown(md_rows) + "\n\n" + verdict_markdown(verdicts) + "\n"
            + (("\n" + parameter_markdown(param_rows) + "\n") if param_rows else "") + intervals)
    print("\n" + text)
    report["markdown"] = text
    writer.final(report, text)


if __name__ == "__main__":
    run_script(main)
