"""The harness's arrival draw for inference-perf stages (round 20, issue 33).

inference-perf's ``constant`` load (its ConstantLoadTimer) draws int(rate x duration) exponential gaps and scales
them to sum to the stage's duration, so a stage sends its count over exactly its span (the files here: send
durations 599.2-599.99 s of 600, 1199.5-1199.95 s of 1200); ``vllm bench serve`` draws unscaled gaps at the rate.
``MeasuredRun.scaled_sends`` says which draw a run's client made; ``with_sends`` rewrites the inference-perf runs
of a case list to one draw or the other (the harness's ``--inference-perf-sends`` option)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

SENDS = ("as-read", "scaled", "unscaled")


def scalable(run) -> bool:
    """A run whose sends inference-perf's constant load could have scaled: an inference-perf open loop at a
    finite rate with Poisson gaps."""
    rate = run.rate_per_s
    return run.source == "inference-perf" and rate is not None and math.isfinite(rate) and run.burstiness == 1.0 \
        and run.max_concurrency is None


def with_sends(cases: Sequence, sends: str) -> list:
    """``cases`` with every scalable inference-perf run's draw set to ``sends`` (``as-read``: unchanged)."""
    if sends not in SENDS:
        raise ValueError(f"sends = {sends!r}: allowed {', '.join(SENDS)}")
    if sends == "as-read":
        return list(cases)
    scaled = sends == "scaled"
    return [dataclasses.replace(c, run=dataclasses.replace(c.run, scaled_sends=scaled)) if scalable(c.run) else c
            for c in cases]
