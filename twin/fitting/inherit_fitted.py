"""An inheriting reset follows the fold's FITTED value of the term it inherits from (issue 33, round 8;
docs/fidelity.md "Round 8: Qwen3 and gpt-oss held out").

``twin.fitting.provenance`` resets a held-out entry whose stated prior is ``INHERIT`` (a generation's efficiencies
and all-reduce latency, a path's fused all-reduce) to "the fold's unscoped (reference) value". The plan is made
before the fold fits, so it can only read that value's EMBEDDED start: in the fold holding gpt-oss-120b out, both
MXFP4 paths' fused all-reduce + RMSNorm went to the embedded unfused 24.7 us while the same fold fitted the
unfused latency every training server is costed at to 20.3 us. Physically the prior says "an unseen fused path
saves nothing over the unfused all-reduce this fold measures", so after the fit the reset takes the fitted value:
the source term scoped to the entry's own scope, then to its generation, then unscoped, the first the fold fitted
(a source that is itself reset or held keeps the plan's value)."""

from __future__ import annotations

from twin.fitting.provenance import INHERIT, INHERITS_FROM, RESET, FoldPlan
from twin.fitting.scoped import split


def inherited_after_fit(plan: FoldPlan, params: dict[str, float]) -> dict[str, float]:
    """{reset parameter: the fold's fitted value it inherits} for the plan's ``INHERIT`` resets whose source the
    fold fitted (``params``: the fold's values, fixed ones included)."""
    out: dict[str, float] = {}
    for p, (entry, action) in plan.actions.items():
        if action != RESET or entry.prior != INHERIT or p not in plan.fixed:
            continue
        base, scope = split(p)
        src = INHERITS_FROM[base]
        generation = (scope or "").split("+")[0]
        for key in (f"{src}@{scope}", f"{src}@{generation}", src):
            if key != p and key in params and key not in plan.fixed:
                out[p] = params[key]
                break
    return out
