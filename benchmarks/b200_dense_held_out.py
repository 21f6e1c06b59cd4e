"""Llama-3.1-70B on B200 held out, term by term (issue 33, round 20): which terms set a dense Blackwell step in a fold
that has seen no Blackwell row, and what each is there against the fit on everything.

No fit, no simulation (~10 s). For the Llama-3.1-70B B200 rows of the default report (every 16th silicon row), the
cost model of each row's deployment (``twin.fitting.replay.cost_model_for``) at three sets of values:

* ``B200 out``: the GPU fold holding B200 out (read from a ``fidelity_real.py --json`` report): no Blackwell row in
  training, every Blackwell term at its stated prior or carried from Hopper;
* ``llama out``: the family fold holding Llama out (it keeps the B200 MoE rows);
* ``in-sample``: the embedded defaults, fitted on every row (the value the data would give; a leak here).

It prints the values each set gives a dense Blackwell deployment for the terms that set its step (``STEP_TERMS``,
resolved through the scopes as the cost model resolves them), then per row ``explain()`` of two steps: the prompt
step (one prompt of ``min(ISL, max_num_batched_tokens)`` tokens) and a decode step (CONC sequences at ISL + OSL / 2
of context), each part in ms at the three sets and the held-out fold's difference from the in-sample value.

    python benchmarks/b200_dense_held_out.py --report report.json
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fold_report import fold_params  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402

# the terms that set a dense Blackwell step (the rest of the fold's values are MoE, MLA or Hopper-scoped)
STEP_TERMS = ("memory_efficiency", "compute_efficiency", "layer_token_overhead_s", "eager_layer_host_s",
              "step_overhead_s", "per_seq_overhead_s", "allreduce_latency_s", "unsharded_allreduce_link_s")
ROW = re.compile(r"_agg_(\d+)x(\d+)_c(\d+)_tp(\d+)_")


def row_shape(name: str) -> tuple[int, int, int]:
    """(ISL, OSL, CONC) of a silicon row's name (``..._agg_8192x1024_c64_tp1_...``); a one-line error otherwise."""
    m = ROW.search(name)
    if m is None:
        raise TwinInputError(f"{name!r}: not a silicon row name (no _agg_<ISL>x<OSL>_c<CONC>_tp<TP>_)")
    isl, osl, conc, _ = map(int, m.groups())
    return isl, osl, conc


def step_shapes(isl: int, osl: int, conc: int, chunk_tokens: int) -> dict[str, SimpleNamespace]:
    """The two steps read per row: one prompt chunk, and CONC decodes halfway through the output."""
    if min(isl, osl, conc, chunk_tokens) < 1:
        raise TwinInputError(f"ISL {isl}, OSL {osl}, CONC {conc}, chunk {chunk_tokens}: each must be >= 1")
    return {"prompt": SimpleNamespace(num_new_tokens=[min(isl, chunk_tokens)], num_computed_before=[0],
                                      num_spec_tokens=[0]),
            "decode": SimpleNamespace(num_new_tokens=[1] * conc, num_computed_before=[isl + osl // 2] * conc,
                                      num_spec_tokens=[0] * conc)}


def part_rows(explains: dict[str, dict[str, float]], held: str, ref: str) -> list[tuple[str, list[float], float]]:
    """(part, [seconds per set], held - ref in seconds) for each part non-zero in some set, ``total_s`` last."""
    labels = list(explains)
    parts = [k for k in dict.fromkeys(k for e in explains.values() for k in e)
             if k != "total_s" and any(abs(explains[x].get(k, 0.0)) > 0.0 for x in labels)]
    return [(k, [explains[x].get(k, 0.0) for x in labels], explains[held].get(k, 0.0) - explains[ref].get(k, 0.0))
            for k in parts + ["total_s"]]


def resolved_terms(params: dict[str, float], dep) -> dict[str, float]:
    """The values of ``STEP_TERMS`` a deployment sees at ``params``: the scoped and unscoped values of ``params``
    that cover it (``twin.fitting.scoped.params_for``, as the cost model reads them), else the embedded default
    (its Blackwell value where it has one)."""
    from twin.fitting.provenance import embedded_start
    from twin.fitting.scoped import params_for
    seen = params_for(params, dep)
    out = {}
    for t in STEP_TERMS:
        if t in seen:
            out[t] = seen[t]
        else:
            emb = embedded_start((t, f"{t}@blackwell"))
            if f"{t}@blackwell" in emb or t in emb:
                out[t] = emb.get(f"{t}@blackwell", emb.get(t))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", type=Path, required=True, help="a fidelity_real.py --json report with the GPU "
                    "fold holding B200 out and the family fold holding llama out")
    ap.add_argument("--ground-truth", type=Path, default=None)
    a = ap.parse_args(argv)
    from benchmarks.fidelity_real import REFIT_SILICON_EVERY
    from twin.fitting.joint import all_cases, family_of, gpu_of
    from twin.fitting.replay import cost_model_for, deployment_for
    sets = {"B200 out": fold_params(a.report, "GPU", "B200"), "llama out": fold_params(a.report, "family", "llama"),
            "in-sample": {}}
    cases = [c for c in all_cases(a.ground_truth, silicon_every=REFIT_SILICON_EVERY)
             if family_of(c) == "llama" and gpu_of(c).lower().startswith("b200")]
    if not cases:
        raise TwinInputError("no Llama B200 rows in the ground truth")
    shown: set[str] = set()
    print("sets: " + " / ".join(sets) + "; each step's parts in ms, in brackets B200 out - in-sample (parts that "
          "differ by >= 5 us)")
    for i, case in enumerate(cases):
        dep = deployment_for(case.run, case.target)
        if case.target.weight_dtype not in shown:
            shown.add(case.target.weight_dtype)
            for t in STEP_TERMS:
                vals = [resolved_terms(p, dep).get(t) for p in sets.values()]
                print(f"  {case.target.weight_dtype} {t}: " + " / ".join("-" if v is None else f"{v:.4g}" for v in vals))
        isl, osl, conc = row_shape(case.run.name)
        chunk = dep.scheduler_config.max_num_batched_tokens
        print(f"== {case.run.name.split('vllm_')[-1]} (TP {case.target.tensor_parallel_size}, chunk {chunk})")
        for step, shape in step_shapes(isl, osl, conc, chunk).items():
            ex = {k: cost_model_for(dep, case.target, p).explain(shape) for k, p in sets.items()}
            cells = [f"{k[:-2]} {' / '.join(f'{1e3 * v:.2f}' for v in vals)} ({1e3 * d:+.2f})"
                     for k, vals, d in part_rows(ex, "B200 out", "in-sample") if abs(d) >= 5e-6 or k == "total_s"]
            print(f"  {step}: " + "; ".join(cells))
    return 0


if __name__ == "__main__":
    run_script(main)
