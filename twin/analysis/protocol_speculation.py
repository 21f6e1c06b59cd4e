"""Protocol step 4: speculative decoding, gain or loss per task class and concurrency.

Each task class runs alone as closed-loop streams at 1, at the operating concurrency (the scenario's streams, or
its mean running batch) and at any ``--spec-concurrency`` levels, with and without drafting; an output-throughput
ratio of at least ``SPEC_GAIN`` (interval above 1) is a gain, at most ``SPEC_LOSS`` (interval below 1) a loss. The
toggle is then predicted on the scenario's own traffic. Without a ``speculative_decoding:`` section an EAGLE
drafter with 3 draft tokens and per-class acceptance typical of EAGLE on an 8B model is assumed
(``assumed_spec_config``), and the report says so; with one, the step asks whether turning it off pays.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from twin.analysis.protocol_evaluation import Evaluation
from twin.analysis.protocol_verdicts import ADVISE_AGAINST, NO_CHANGE, RECOMMEND, compare, effect, ratio_summary
from twin.analysis.protocol_walk import ProtocolWalk, Step, offered_load
from twin.results.numbers import counted

SPEC_GAIN = 1.05           # throughput ratio (spec / no spec) counted as a gain ...
SPEC_LOSS = 0.97           # ... and as a loss

# EAGLE (1 layer) on an 8B target, 3 draft tokens: P(at least i drafts accepted), by task-class keyword.
# Typical of published EAGLE acceptance on Llama-3.1-8B-Instruct; an assumption the report states.
ASSUMED_ACCEPTANCE: tuple[tuple[tuple[str, ...], list[float]], ...] = (
    (("code", "coding", "program", "sql"), [0.80, 0.62, 0.48]),
    (("struct", "json", "extract", "tool", "function", "schema"), [0.85, 0.72, 0.61]),
    (("creative", "story", "writing", "poem", "fiction"), [0.55, 0.25, 0.11]),
    (("summar", "rag", "retriev", "qa"), [0.75, 0.55, 0.40]),
)
ASSUMED_DEFAULT = [0.72, 0.50, 0.34]   # chat-like


def assumed_spec_config(class_names: list[str]) -> dict[str, Any]:
    """An EAGLE drafter with 3 draft tokens and an acceptance curve per task class (by its name)."""
    acceptance: dict[str, Any] = {}
    for name in class_names:
        low = name.lower()
        curve = next((c for keys, c in ASSUMED_ACCEPTANCE if any(k in low for k in keys)), ASSUMED_DEFAULT)
        acceptance[name] = {"per_position": list(curve)}
    acceptance["default"] = {"per_position": list(ASSUMED_DEFAULT)}
    return {"method": "eagle", "num_speculative_tokens": 3, "acceptance": acceptance}


def speculative_decoding_step(walk: ProtocolWalk, base: Evaluation) -> Step:
    body = base.body
    raw = walk.scenario.raw(walk.variant, walk.runner.base_overrides)
    wl = body.workload
    step = Step("speculative_decoding", "Speculative decoding",
                "Per task class and concurrency: does drafting gain or lose?")
    current = raw.get("speculative_decoding")
    classes = [c.name for c in wl.classes] if wl.classes else [wl.trace.task_class]
    if current is None:
        spec = assumed_spec_config(classes)
        acc = ", ".join(f"{n} {spec['acceptance'][n]['per_position']}" for n in classes)
        walk.assumptions.append(
            f"Speculative decoding: the scenario has none, so an EAGLE drafter with 3 draft tokens is assumed, "
            f"with per-position acceptance (P(at least i drafts accepted)) by task class: {acc}. Measure the "
            f"real acceptance (vLLM's spec_decode metrics) before trusting the gain.")
        step.details["assumed"] = True
    else:
        spec = current
        step.details["assumed"] = False
    step.details["config"] = spec
    _, closed_c = offered_load(body)
    if closed_c:
        operating = closed_c
    else:
        operating = max(1, int(math.ceil(base.mean("mean_running_batch") or 1.0)))
    levels = sorted({1, operating, *(walk.spec_concurrency or [])})
    step.details["operating_concurrency"] = operating
    raw_classes = (raw.get("workload") or {}).get("classes") or []
    grid = []
    for name in classes:
        for c in levels:
            wl_over: dict[str, Any] = {
                "arrivals": {"_replace": True, "process": "closed_loop", "concurrency": c},
                "num_requests": max(2 * c, 16), "duration_s": None}
            if raw_classes:
                cls = copy.deepcopy(next(x for x in raw_classes if x.get("name") == name))
                cls["share"] = 1.0
                wl_over["classes"] = [cls]
            on = walk.runner.evaluate(f"spec {name} c{c}", {"workload": wl_over, "speculative_decoding": spec})
            off = walk.runner.evaluate(f"no spec {name} c{c}", {"workload": wl_over,
                                                               "speculative_decoding": None})
            tp = ratio_summary(on, off, "output_throughput")
            tpot = ratio_summary(on, off, "median_tpot_ms")
            r = tp.get("mean") or 0.0
            hw = tp.get("half_width")
            if r >= SPEC_GAIN and (hw is None or tp["low"] > 1.0):
                verdict = "gain"
            elif r <= SPEC_LOSS and (hw is None or tp["high"] < 1.0):
                verdict = "loss"
            else:
                verdict = "neutral"
            grid.append({"task_class": name, "concurrency": c, "throughput_ratio": tp, "tpot_ratio": tpot,
                         "acceptance_length": on.mean("spec_decode_acceptance_length"),
                         "verdict": verdict, "operating": c == operating})
    step.details["grid"] = grid
    cap = base.deployment.scheduler_config.max_num_seqs * body.deployment.replicas
    if operating > cap:
        step.notes.append(f"at the current max_num_seqs the running batch holds at most {cap} of the {operating} "
                          f"streams, so the grid's {operating}-stream cells run at a batch of {cap}; the "
                          f"combination step shows speculation with the scheduler limits lifted")
    at_op = [g for g in grid if g["operating"]]
    losers = [g["task_class"] for g in at_op if g["verdict"] == "loss"]
    gainers = [g["task_class"] for g in at_op if g["verdict"] == "gain"]
    toggled = {"speculative_decoding": None if current is not None else spec}
    cand = walk.runner.evaluate("speculative decoding off" if current is not None else "speculative decoding",
                                toggled)
    deltas = compare(base, cand)
    step.candidate, step.deltas = cand.label, deltas
    overall_tp = effect(deltas, "output_throughput")
    overall_lat = effect(deltas, "median_tpot_ms")
    cells = "; ".join(f"{g['task_class']} at {counted(g['concurrency'], 'stream')}: "
                      f"{(g['throughput_ratio'].get('mean') or 0):.2f}x output throughput"
                      for g in grid)
    if current is None:
        better = overall_tp > 0 or overall_lat > 0
        worse = overall_tp < 0 or overall_lat < 0
        if losers or (worse and not better):
            step.verdict = ADVISE_AGAINST
            who = f" for {', '.join(losers)}" if losers else ""
            step.finding = (f"Speculative decoding loses at the operating concurrency ({operating}){who}: "
                            f"verification and drafting fill a batch that is no longer memory-bound. {cells}. "
                            f"On the scenario's traffic: {walk.headline_deltas(deltas)}. Leave it off"
                            f"{' (or serve ' + ', '.join(gainers) + ' on a separate pool with it)' if gainers else ''}.")
        elif better:
            step.verdict = RECOMMEND
            step.change = toggled
            step.change_label = f"speculative decoding ({spec['method']}, k={spec['num_speculative_tokens']})"
            step.finding = (f"Speculative decoding gains: {cells}. On the scenario's traffic: "
                            f"{walk.headline_deltas(deltas)}.")
        else:
            step.verdict = NO_CHANGE
            step.finding = f"Speculative decoding changes little: {cells}. On the scenario's traffic: " \
                           f"{walk.headline_deltas(deltas)}."
    else:
        # it is on now; the candidate turns it off: improvements mean speculation was costing
        off_better = overall_tp > 0 or overall_lat > 0
        off_worse = overall_tp < 0 or overall_lat < 0
        if losers or (off_better and not off_worse):
            step.verdict = ADVISE_AGAINST
            step.change = toggled
            step.change_label = "turn speculative decoding off"
            who = f" for {', '.join(losers)}" if losers else ""
            step.finding = (f"Speculative decoding (on now) loses at the operating concurrency ({operating})"
                            f"{who}: the batch is large enough that verifying drafts costs more compute than "
                            f"the accepted tokens save. {cells}. Turning it off predicts: "
                            f"{walk.headline_deltas(deltas)}.")
        elif off_worse:
            step.verdict = NO_CHANGE
            step.finding = (f"Speculative decoding (on now) pays: {cells}. Turning it off would give "
                            f"{walk.headline_deltas(deltas)}. Keep it.")
        else:
            step.verdict = NO_CHANGE
            step.finding = f"Speculative decoding (on now) changes little: {cells}."
    walk.add_commands(step, cand, "speculative-decoding")
    walk.steps.append(step)
    return step


__all__ = ["ASSUMED_ACCEPTANCE", "ASSUMED_DEFAULT", "SPEC_GAIN", "SPEC_LOSS", "assumed_spec_config",
           "speculative_decoding_step"]
