"""A robust loss for the fit's data residuals (issue 33, round 9; docs/fidelity.md "Round 9: a robust fold fit").

The fit minimises squared log ratios (predicted / measured) of whole-run metrics. A row whose behaviour the cost
model cannot express at all (e.g. the Llama-3.1-70B B200 TP1 rows of vLLM 0.10.2: ~5 ms per decode step no term
explains, TPOT -30 %) weighs (0.36 / 0.05)^2 ~ 50 times a row the model meets to its usual 5 %, and drags shared
terms to absorb it. A robust loss keeps the quadratic cost for residuals within a stated scale of the model's own
error and lets larger ones count less, without naming any row.

Each data residual z (a weighted log ratio's unweighted part) is replaced by ``transformed(z, loss, scale)``: the
signed square root of ``scale^2 * rho((z / scale)^2)``, so that a plain (linear-loss) least-squares on the
transformed residuals minimises exactly sum_i w_i^2 scale^2 rho(z_i^2 / scale^2), with rho scipy's own
(``least_squares`` ``loss=``; "soft_l1": rho(s) = 2 (sqrt(1 + s) - 1); "huber": rho(s) = s for s <= 1, else
2 sqrt(s) - 1; "cauchy": rho(s) = ln(1 + s), whose pull falls back towards 0 beyond the scale). Done on the
residuals, not through scipy's ``loss=``, for two reasons: the scale is per log ratio, whatever the row's weight
(scipy's ``f_scale`` would act on the weighted residual), and the weak priors' rows stay quadratic; and the fit's
standard errors (``fit._standard_errors``, which re-evaluate the residual function) then read the robust-weighted
residuals and Jacobian (a down-weighted row adds less to s^2 and to J^T J), the Gauss-Newton covariance of the
M-estimate, as scipy's own rescaling gives it (not Huber's sandwich correction).

Tried in place of the fold fits' named exclusion (``unseen_bandwidth.unexplained_decode_gap``) and NOT adopted: the
fold fits keep least squares (``fit(loss="linear")``, the default). A convex loss (soft_l1; huber not run) at 0.10
leaves the pull as it was (Blackwell's fraction 0.78 with the rows in; at that fraction the rows are only 6-18 %
off, no further than many others); Cauchy at 0.05 finds the fraction the rows' exclusion gives (0.94) but changes
the folds without those rows too, and the held-out figures are worse on B200 held out (docs/fidelity.md "Round 9:
a robust fold fit")."""

from __future__ import annotations

import math

from twin.errors import TwinInputError

LOSSES = ("linear", "soft_l1", "huber", "cauchy")

# The scale, in log-ratio units (a whole run's ln(predicted / measured)): 0.10, i.e. ~10 %. What it stands for:
# the embedded defaults meet the H100 source to 3-4 % (TTFT p50 3.9 %, TPOT 3.2 %), the held-out folds their rows to
# a median |error| of 5-8 % (TPOT), and the same configuration measured twice agrees within ~6 % (the MiniMax H100
# pairs at 1k prompts, docs/fidelity.md); so ~0.05 is one standard deviation of the model's whole-run error and of
# the measurement's own, and 0.10 two. A row within two of them is fitted as least
# squares would; a row further off (a behaviour no term expresses) counts ~linearly, with a pull of ~scale / |z|.
ROBUST_SCALE_LOG = 0.10


def transformed(z: float, loss: str, scale: float = ROBUST_SCALE_LOG) -> float:
    """``z`` as the residual whose square is ``scale^2 * rho((z / scale)^2)`` (same sign; ``z`` itself for
    ``linear``)."""
    if loss == "linear":
        return z
    if not scale > 0.0:
        raise TwinInputError(f"robust loss scale: {scale!r} is not a positive log ratio")
    u2 = (z / scale) ** 2
    if loss == "soft_l1":
        cost = 2.0 * u2 / (math.sqrt(1.0 + u2) + 1.0)          # 2 (sqrt(1 + u2) - 1), without cancellation
    elif loss == "huber":
        cost = u2 if u2 <= 1.0 else 2.0 * math.sqrt(u2) - 1.0
    elif loss == "cauchy":
        cost = math.log1p(u2)
    else:
        raise TwinInputError(f"fit loss: {loss!r} is not one of {', '.join(LOSSES)}")
    return math.copysign(scale * math.sqrt(cost), z)
