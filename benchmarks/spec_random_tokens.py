"""The issue's H100 run, twin against server: EAGLE-3 (k = 4) on Llama-3.1-8B-Instruct, vLLM 0.11, random-token
prompts (scenarios/speculative_random_tokens.yaml). Prints the twin's TPOT and capacity with and without
speculation, their ratios, the measured figures beside them, and the speculative terms of one verification step
at the batch the twin runs at 52 req/s (``explain()``):

    python benchmarks/spec_random_tokens.py [--gemm-half-tokens 150] [--host-op-us 20]

The options are sensitivities, not fits: ``--gemm-half-tokens`` sets the target roofline's GEMM knee (fitted to
0 +/- 300 tokens, docs/fidelity.md) for both runs; ``--host-op-us`` prices the host priors of
twin.spec_decode.step_cost at another cost per eager operation (the prior is 10 us).

The measured figures are the issue's (the judge, never an input): TPOT 10.7 vs 7.1 ms at 1 req/s (0.67x), 0.41x
at 52 req/s, capacity 68 vs 170 req/s. Ratios separate speculation's price from the target's own cost model:
the no-speculation capacity (twin ~253 req/s against 170) is the baseline's gap (issue 33), not speculation's.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import nonneg_float  # noqa: E402
from twin.errors import run_script  # noqa: E402
from twin.scenario import load_scenario  # noqa: E402
from twin.sim.deployment import resolve_deployment  # noqa: E402
from twin.sim.run import metrics_of, run_body  # noqa: E402
from twin.spec_decode.drafters import PassShape  # noqa: E402
from twin.spec_decode.step_cost import (  # noqa: E402
    DRAFT_ATTN_OPS_PER_LAYER, DRAFT_PASS_HOST_OPS, SPEC_STEP_HOST_OPS)

MEASURED = {"tpot_1": (10.7, 7.1), "ratio_1": 0.67, "ratio_52": 0.41, "capacity": (68.0, 170.0)}
PAIRS = (("baseline", "nospec", "1 req/s"), ("rate52", "rate52-nospec", "52 req/s"), ("sat", "sat-nospec", "sat"))


def overrides(gemm_half_tokens: float | None, host_op_us: float | None, spec: bool) -> dict:
    out: dict = {}
    if gemm_half_tokens is not None:
        out["cost_model"] = {"kind": "roofline", "params": {"gemm_half_tokens": gemm_half_tokens}}
    if host_op_us is not None and spec:
        op = host_op_us * 1e-6
        out["speculative_decoding"] = {"draft_pass_overhead_s": (DRAFT_PASS_HOST_OPS + DRAFT_ATTN_OPS_PER_LAYER) * op,
                                       "spec_step_overhead_s": SPEC_STEP_HOST_OPS * op}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gemm-half-tokens", type=nonneg_float, default=None)
    ap.add_argument("--host-op-us", type=nonneg_float, default=None)
    a = ap.parse_args()
    t0 = time.perf_counter()
    sc = load_scenario("speculative_random_tokens")
    m, bodies = {}, {}
    for spec_v, none_v, _ in PAIRS:
        for v, spec in ((spec_v, True), (none_v, False)):
            bodies[v] = sc.body(v, overrides(a.gemm_half_tokens, a.host_op_us, spec))
            m[v] = metrics_of(run_body(bodies[v]), bodies[v])
    print("EAGLE-3 k=4, Llama-3.1-8B, H100, vLLM 0.11, random tokens"
          + (f", gemm_half_tokens {a.gemm_half_tokens:g}" if a.gemm_half_tokens is not None else "")
          + (f", host {a.host_op_us:g} us/op" if a.host_op_us is not None else ""))
    for spec_v, none_v, label in PAIRS[:2]:
        s, n = m[spec_v]["mean_tpot_ms"], m[none_v]["mean_tpot_ms"]
        meas = MEASURED["ratio_1" if label == "1 req/s" else "ratio_52"]
        print(f"  TPOT at {label:<8}: spec {s:6.2f} ms, none {n:5.2f} ms, speed {n / s:.2f}x (measured {meas:.2f}x, "
              f"twin/measured {n / s / meas:.2f}); TTFT +{m[spec_v]['mean_ttft_ms'] - m[none_v]['mean_ttft_ms']:.1f} ms")
    cs, cn = m["sat"]["request_throughput"], m["sat-nospec"]["request_throughput"]
    ms, mn = MEASURED["capacity"]
    print(f"  capacity      : spec {cs:.1f} req/s, none {cn:.1f} req/s, ratio {cs / cn:.2f} (measured {ms:g} vs {mn:g},"
          f" ratio {ms / mn:.2f}); spec absolute twin/measured {cs / ms:.2f}, none {cn / mn:.2f}")
    # one pure verification step at the batch the twin holds at 52 req/s, term by term
    dep = resolve_deployment(bodies["rate52"])
    n_seqs = max(1, round(m["rate52"]["mean_tpot_ms"] * 1e-3 * 52 * 63))
    step = PassShape([5] * n_seqs, [224] * n_seqs, [4] * n_seqs)
    e = dep.drafter.explain(step, 4, dep.cost_model_factory())
    print(f"  a verification step of {n_seqs} sequences (~Little's law at 52 req/s): "
          + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in e.items() if k.endswith("_s") and v))
    print(f"({time.perf_counter() - t0:.1f} s wall)")


if __name__ == "__main__":
    run_script(main)
