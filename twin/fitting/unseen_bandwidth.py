"""The decode weight streams' bandwidth of a GPU generation no training row comes from (issue 33, round 9;
docs/fidelity.md "Round 9: decode on a generation held out").

``memory_efficiency`` is the fraction of the datasheet HBM bandwidth the decode GEMMs' weight streams reach; the
folds fit it unscoped (the reference generation, Hopper) and ``@blackwell``. Held out by GPU, the fold with no H100
row reset Hopper's to the fit parameter's prior (0.8) and predicted the H100 rows' TPOT +8 % too slow, while its
own fit put Blackwell's at 0.78 (and round 8 found carrying that 0.78 to Hopper worse still).

What the rows say: the two generations' fractions AGREE once three training rows stop setting Blackwell's. The
Llama-3.1-70B B200 TP1 rows (vLLM 0.10.2, FP8 and NVFP4) miss ~5 ms per decode step that no term explains (round
7: +5.0 / +5.4 ms per step at FP8 / NVFP4, i.e. not weight bytes; not per sequence or per KV byte; the same launch
flags at every TP; the TP1 server runs vLLM's multiprocess executor like TP > 1: with async scheduling 0.10-0.11
default to it, ``arg_utils`` "Defaulting to mp-based distributed executor backend for async scheduling"), TPOT
-29..-34 % at the defaults. The fit's residuals are squared log errors, so three rows 30 % off outweigh thirty-six
5 % off: it slows every Blackwell weight stream (0.78) to slow them and lowers the per-sequence cost (1 us) to keep
the other B200 rows. Without them (the H100-held-out fold, same rows otherwise) Blackwell's fraction is 0.923
(+/- 0.024) against Hopper's 0.966 fitted with B200 held out, and the Llama-held-out family fold (no Llama row)
reads 0.933 / 0.973: one fraction within its standard errors.

So:
* ``unexplained_decode_gap``: a training row whose decode the cost model knowingly cannot express is left out of a
  fold's fit (it is still predicted, and scored, where it is held out); today the Llama B200 TP1 rows of vLLM
  0.10.2 only. The embedded defaults are not refitted here (nothing changes in-sample).
* ``unseen_reference``: a fold that resets the reference generation's fraction (no row of it in training) gives it
  the geometric mean of the OTHER generations' fractions the fold fitted, instead of the fit parameter's prior;
  the entries that inherit it (a reset KV read rate, ``provenance_entries.INHERITS_FROM``) follow. The stated prior is
  physical: the decode weight stream reaches the same fraction of the datasheet bandwidth on each generation's
  HBM (it agrees within the standard errors above), read in a fraction, which transfers; a datasheet rate is
  a fact for every catalog GPU."""

from __future__ import annotations

from twin.fitting.expert_path_prior import geometric_mean
from twin.fitting.provenance import INHERIT, INHERITS_FROM, RESET, FoldPlan
from twin.fitting.scoped import split
from twin.fitting.silicon import model_family
from twin.fitting.silicon_rows import LLAMA_DEFAULT_VERSION

# the fractions a held-out reference generation may take from the other generations' fitted values
CARRIED = ("memory_efficiency",)


def unexplained_decode_gap(case) -> str | None:
    """Why ``case``'s decode is one the cost model knowingly cannot express (a fold fits without it), else None:
    the Llama-3.1-70B B200 TP1 rows of vLLM 0.10.2 (~5 ms per step missing at FP8 and NVFP4; round 7). Round 10:
    ~3 ms of it is the per-layer floor a TP1 step pays (``twin.cost.unsharded_decode``); the ~2-3 ms left is the
    dense FP8 / NVFP4 weight stream of these rows at ~0.78 / ~0.62 of the datasheet (``benchmarks/tp1_decode.py``),
    which only these rows read; with the rows fitted, Blackwell's fraction still falls (0.92 -> 0.85), so they stay
    out."""
    row = getattr(case, "row", None)
    if row is None:
        return None
    if (model_family(row.model_path) == "llama" and row.system == "b200_sxm" and row.tp == 1
            and row.vllm_version == LLAMA_DEFAULT_VERSION):
        return "Llama-3.1-70B B200 TP1 (vLLM 0.10.2): ~2-3 ms per decode step beyond the unsharded floor"
    return None


def unseen_reference(plan: FoldPlan, params: dict[str, float]) -> dict[str, float]:
    """{parameter: value} for the reference generation's reset fractions (``CARRIED``) the fold's fit can speak
    for: the geometric mean of the generation-scoped values of the same name the fold FITTED (``params``, not
    ``plan.fixed``), and every reset ``INHERIT`` entry inheriting from it; {} where none was fitted."""
    out: dict[str, float] = {}
    for p, (entry, action) in plan.actions.items():
        if action != RESET or entry.scope is not None or p not in CARRIED:
            continue
        fitted = [v for n, v in params.items() if split(n)[0] == p and split(n)[1] and n not in plan.fixed]
        if not fitted:
            continue
        out[p] = geometric_mean(fitted)
        out |= {q: out[p] for q, (f, a) in plan.actions.items()
                if a == RESET and f.prior == INHERIT and INHERITS_FROM.get(split(q)[0]) == p and q != p}
    return out
