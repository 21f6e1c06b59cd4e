"""gpt-oss-120b's H100 prompt step held out, part by part (issue 33, round 22; docs/fidelity.md "Round 22:
gpt-oss-120b's H100 TP 8 prompts held out"). No fit, no simulation: a reading.

    python benchmarks/gpt_oss_tp8_prompt.py REPORT.json [--folds GPU:H100-SXM,family:gpt-oss] [--ground-truth DIR]

For every held-out H100 gpt-oss case of the named folds of a ``fidelity_real.py --json`` report (the report's own
signed TTFT error beside it), the cost model's ``explain()`` of the case's whole prompt (one sequence of its prompt
length) at the embedded values and at the fold's (``gptoss_ttft_terms.fold_values``: what the fold simulates), part
by part in ms with the fold's excess, and the request path; then the prompt's all-reduce: message size, the route
vLLM sends it on (``twin.cost.allreduce_routes.route_of``) and the twin's time per all-reduce (the ring's bytes, and
the multimem route's where it applies). Last, how the light-load (concurrency 4) TTFT splits over TP into a part TP
does not divide (A) and one it does (B / TP), measured and the twin's lone prompt (request path + prompt step): which
of the two a fold's excess sits in.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gptoss_b200_ttft_structure import tp_split  # noqa: E402  (A + B / tp, least squares)
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.fitting.switches import switched  # noqa: E402

FAMILY, GPU = "gpt-oss", "H100-SXM"
LIGHT_CONCURRENCY = 4


def part_rows(base: dict[str, float], other: dict[str, float]) -> list[tuple[str, float, float, float]]:
    """(part, base ms, other ms, other - base ms) for every part of two ``explain()`` dicts (seconds) either has,
    ``total_s`` last, the rest by the size of the difference (largest first)."""
    names = sorted((set(base) | set(other)) - {"total_s"},
                   key=lambda n: (-abs(other.get(n, 0.0) - base.get(n, 0.0)), n))
    rows = []
    for n in names + ["total_s"]:
        a, b = 1e3 * base.get(n, 0.0), 1e3 * other.get(n, 0.0)
        rows.append((n, a, b, b - a))
    return rows


def prompt_step(tokens: int) -> SimpleNamespace:
    """One sequence's whole prompt of ``tokens`` in one step, nothing cached."""
    return SimpleNamespace(num_new_tokens=[tokens], num_computed_before=[0], num_spec_tokens=[0])


def lone_prompt_ms(cost, tokens: int) -> float:
    """A request alone on the server: its request path plus its whole prompt in one step, ms."""
    return 1e3 * (cost.request_path_s + cost.step_time_s(prompt_step(tokens)))


def own_steps_ms(cost, prompt: int, output: int, concurrency: int, budget: int) -> float:
    """A request's own path through a server of ``concurrency`` busy decoders: its request path, the step that
    runs its first chunk (``budget`` tokens less one per other decoder, beside them at half their output's
    context) and, where the prompt did not fit, the step that finishes it beside them; ms. What its TTFT holds
    beyond this is waiting (for steps in flight and the prompts ahead)."""
    others = concurrency - 1
    chunk = min(prompt, budget - others)
    context = prompt + output // 2
    steps = [[chunk] + [1] * others]
    if chunk < prompt:
        steps.append([prompt - chunk] + [1] * others)
    total = cost.request_path_s
    for i, nn in enumerate(steps):
        done = [0 if i == 0 else chunk] + [context] * others
        total += cost.step_time_s(SimpleNamespace(num_new_tokens=nn, num_computed_before=done,
                                                  num_spec_tokens=[0] * len(nn)))
    return 1e3 * total


def parse_folds(text: str) -> list[tuple[str, str]]:
    """``KIND:GROUP,...`` as (kind, group) pairs; a malformed item is one line."""
    out = []
    for item in (x for x in text.split(",") if x):
        kind, sep, group = item.partition(":")
        if not sep or not kind or not group:
            raise TwinInputError(f"--folds: {item!r} is not KIND:GROUP (e.g. GPU:H100-SXM)")
        out.append((kind, group))
    if not out:
        raise TwinInputError("--folds: empty; give KIND:GROUP,... (e.g. GPU:H100-SXM,family:gpt-oss)")
    return out


def allreduce_lines(cost, tokens: int) -> list[str]:
    """The prompt step's all-reduce: message, route, and the twin's time per all-reduce (ring; multimem)."""
    from twin.cost import allreduce_routes as ar
    from twin.hardware.catalog import DTYPE_BYTES
    tp, gpu, model = cost.tensor_parallel_size, cost.gpu, cost.model
    if tp < 2:
        return ["    all-reduce: none (TP 1)"]
    message = tokens * model.hidden_size * DTYPE_BYTES["bf16"]
    link = gpu.interconnect_bytes_per_s / 2.0 * cost.interconnect_efficiency
    per_ring = ar.ring_factor(tp) * message / link
    per_mm = ar.multimem_factor(tp) * message / link
    n = 2 * model.num_hidden_layers
    route = ar.route_of(gpu, tp, message)
    line = (f"    all-reduce: {n} per step of {message / 2 ** 20:.1f} MiB, vLLM route {route}; twin per all-reduce "
            f"{1e6 * cost.allreduce_latency_s:.1f} us latency + {1e6 * per_ring:.1f} us of ring bytes "
            f"(x{ar.ring_factor(tp):.3f} the message): {1e3 * n * per_ring:.2f} ms a step")
    if route == "multimem":
        line += f"; multimem bytes (x{ar.multimem_factor(tp):.3f}): {1e3 * n * per_mm:.2f} ms"
    return [line]


def light_split_lines(cases, variants: dict[str, dict[str, float]]) -> list[str]:
    """A and B of the light-load TTFT per prompt length: measured (silicon rows' mean TTFT) and the twin's lone
    prompt (request path + prompt step) at each variant's values."""
    from twin.fitting.replay import cost_model_for, deployment_for
    lines = []
    for isl in sorted({c.row.isl for c in cases}):
        light = [c for c in cases if c.row.isl == isl and c.row.concurrency == LIGHT_CONCURRENCY]
        by_tp = {c.row.tp: c for c in light}
        if len(by_tp) < 2:
            continue
        a, b = tp_split([(tp, c.row.ttft_ms) for tp, c in by_tp.items()])
        lines.append(f"  {isl}-token prompts, C {LIGHT_CONCURRENCY}: measured A {a:.1f} ms + B {b:.0f} ms / TP ("
                     + ", ".join(f"TP {tp} {by_tp[tp].row.ttft_ms:.1f}" for tp in sorted(by_tp)) + ")")
        for label, params in variants.items():
            for multimem in (False, True):
                with switched(multimem_allreduce=multimem):
                    pts = [(tp, lone_prompt_ms(cost_model_for(deployment_for(c.run, c.target), c.target, params),
                                               isl)) for tp, c in by_tp.items()]
                ta, tb = tp_split(pts)
                lines.append(f"    twin lone prompt at {label}{' + multimem route' if multimem else ''}: A {ta:.1f} ms"
                             f" + B {tb:.0f} ms / TP ({', '.join(f'TP {tp} {t:.1f}' for tp, t in sorted(pts))})")
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", type=Path, help="a fidelity_real.py --json report")
    ap.add_argument("--folds", default="GPU:H100-SXM,family:gpt-oss", help="KIND:GROUP,... (default %(default)s)")
    ap.add_argument("--ground-truth", type=Path, default=None)
    args = ap.parse_args(argv)
    from benchmarks.fold_report import load_report
    from benchmarks.gptoss_ttft_terms import embedded_values, fold_values
    from twin.fitting.joint import all_cases, family_of, gpu_of
    from twin.fitting.replay import cost_model_for, deployment_for
    report = load_report(args.report)
    folds = {f"{kind} {group}": report.fold(kind, group) for kind, group in parse_folds(args.folds)}
    for fold in folds.values():         # round 23: params and errors checked (read raw below), one line if bad
        report.params(fold), report.errors(fold)
    cases = [c for c in all_cases(args.ground_truth) if family_of(c) == FAMILY and gpu_of(c) == GPU
             and getattr(c, "row", None) is not None]
    values = {label: fold_values(fold) for label, fold in folds.items()}
    emb = {"embedded": next(iter(values.values())) | embedded_values()}
    for label, fold in folds.items():
        print(f"== {label} fold: its held-out {FAMILY} {GPU} cases, one whole prompt (ms), embedded -> fold")
        for c in (c for c in cases if c.run.name in fold["errors"]):
            err = fold["errors"][c.run.name].get("mean_ttft_ms")
            dep = deployment_for(c.run, c.target)
            base = cost_model_for(dep, c.target, emb["embedded"])
            mine = cost_model_for(dep, c.target, values[label])
            step = prompt_step(c.row.isl)
            print(f"  {c.run.name}: TP {c.row.tp}, {c.row.isl} x {c.row.osl}, C {c.row.concurrency}, measured TTFT "
                  f"{c.row.ttft_ms:.1f} ms, fold error {'-' if err is None else f'{100 * err:+.1f} %'}")
            print(f"    request path {1e3 * base.request_path_s:.2f} -> {1e3 * mine.request_path_s:.2f} ms")
            for name, a, b, d in part_rows(base.explain(step), mine.explain(step)):
                if abs(a) > 1e-6 or abs(b) > 1e-6:
                    print(f"    {name[:-2] if name.endswith('_s') else name:<28} {a:8.2f} -> {b:8.2f}  ({d:+.2f})")
            print("\n".join(allreduce_lines(mine, c.row.isl)))
            if err is not None:
                budget = int(c.run.server.get("max_num_batched_tokens", 8192))
                own = own_steps_ms(mine, c.row.isl, c.row.osl, c.row.concurrency, budget)
                predicted = c.row.ttft_ms * (1 + err)
                print(f"    the fold's TTFT {predicted:.1f} ms = own path and steps {own:.1f} ms + waiting "
                      f"{predicted - own:.1f} ms; at the embedded values own "
                      f"{own_steps_ms(base, c.row.isl, c.row.osl, c.row.concurrency, budget):.1f} ms")
    print(f"== light-load TTFT over TP ({FAMILY} {GPU}): T = A + B / TP")
    print("\n".join(light_split_lines(cases, emb | values)))


if __name__ == "__main__":
    run_script(main)
