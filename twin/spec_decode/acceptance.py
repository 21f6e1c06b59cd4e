"""How many draft tokens the target accepts: one model per task class, sampled with one uniform per step.

Every form is reduced to the per-position acceptance rates vLLM reports, ``r_i = P(at least i drafts
accepted)`` for i = 1..m, a non-increasing sequence:

* i.i.d. per-token rate ``a``: ``r_i = a^i``, so a verification of k drafts emits on average
  ``1 + sum_{i<=k} a^i = (1 - a^(k+1)) / (1 - a)`` tokens;
* a per-position curve (vLLM's ``spec_decode_per_position_acceptance_rates``): ``r_i`` as given;
* an empirical accepted-length distribution ``w_0..w_m`` (relative frequencies of accepting exactly j drafts,
  counts or probabilities): ``r_i = sum_{j>=i} w_j / sum_j w_j``.

Sampling inverts the distribution of the accepted length with one uniform ``u``: the step accepts
``#{i <= k : u < r_i}`` drafts. With fewer drafts scheduled than proposed (the token budget cut them) the
same ``u`` gives ``min(accepted length, k)``, as verifying a prefix of the drafts does.

``proposal_rate`` is the chance that the drafter proposes at all at a step (an n-gram drafter that finds no
match proposes nothing); model-based drafters always propose.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from twin.errors import TwinInputError


class AcceptanceModel:
    """Per-position acceptance rates ``r_1 >= r_2 >= ... >= r_m`` (r_i = P(at least i accepted))."""

    __slots__ = ("rates", "proposal_rate", "label")

    def __init__(self, position_rates: Sequence[float], proposal_rate: float = 1.0, label: str = "") -> None:
        rates = [float(r) for r in position_rates]
        prev = 1.0
        for i, r in enumerate(rates):
            if not (0.0 <= r <= 1.0) or math.isnan(r):
                raise TwinInputError(f"acceptance rate at position {i + 1} = {r!r}: must be in [0, 1]")
            if r > prev + 1e-12:
                raise TwinInputError(f"acceptance rate at position {i + 1} = {r:g} exceeds position {i}'s "
                                     f"{prev:g}: per-position rates must not increase")
            prev = r
        if not (0.0 <= proposal_rate <= 1.0):
            raise TwinInputError(f"proposal_rate = {proposal_rate!r}: must be in [0, 1]")
        self.rates = rates
        self.proposal_rate = float(proposal_rate)
        self.label = label

    # ---- the three forms --------------------------------------------------------------------------------
    @classmethod
    def iid(cls, rate: float, num_positions: int, proposal_rate: float = 1.0) -> AcceptanceModel:
        if not (0.0 <= rate <= 1.0):
            raise TwinInputError(f"acceptance rate = {rate!r}: must be in [0, 1]")
        return cls([rate ** i for i in range(1, num_positions + 1)], proposal_rate, f"iid a={rate:g}")

    @classmethod
    def per_position(cls, rates: Sequence[float], proposal_rate: float = 1.0) -> AcceptanceModel:
        return cls(rates, proposal_rate, "per-position " + ", ".join(f"{r:g}" for r in rates))

    @classmethod
    def accepted_length(cls, weights: Sequence[float], proposal_rate: float = 1.0) -> AcceptanceModel:
        """From relative frequencies of accepting exactly 0, 1, ..., m drafts."""
        w = [float(x) for x in weights]
        if not w or any(x < 0 or not math.isfinite(x) for x in w) or sum(w) <= 0:
            raise TwinInputError("accepted_length: must be non-negative frequencies of accepting exactly "
                                 "0, 1, ..., m drafts with a positive sum")
        total = math.fsum(w)
        tail = [math.fsum(w[i:]) / total for i in range(1, len(w))]
        return cls([min(1.0, t) for t in tail], proposal_rate, "accepted-length " + ", ".join(f"{x:g}" for x in w))

    # ---- use ------------------------------------------------------------------------------------------------
    def accepted(self, u: float, k: int) -> int:
        """Drafts accepted out of ``k`` for the uniform draw ``u`` in [0, 1)."""
        n = 0
        rates = self.rates
        m = k if k < len(rates) else len(rates)
        while n < m and u < rates[n]:
            n += 1
        return n

    def position_rates(self, k: int) -> list[float]:
        """r_1..r_k (positions past the model's last one accept nothing)."""
        return [self.rates[i] if i < len(self.rates) else 0.0 for i in range(k)]

    def expected_accepted(self, k: int) -> float:
        """Mean drafts accepted per verification of k drafts: sum of r_1..r_k."""
        return math.fsum(self.position_rates(k))

    def expected_tokens_per_step(self, k: int) -> float:
        """Mean tokens one verification of k drafts emits (vLLM's mean acceptance length)."""
        return 1.0 + self.expected_accepted(k)

    def accepted_length_pmf(self, k: int) -> list[float]:
        """P(exactly j accepted), j = 0..k."""
        r = [1.0, *self.position_rates(k), 0.0]
        return [r[j] - r[j + 1] for j in range(k + 1)]

    def __repr__(self) -> str:
        extra = f", proposal_rate={self.proposal_rate:g}" if self.proposal_rate < 1 else ""
        return f"AcceptanceModel({self.label or self.rates}{extra})"


def iid_expected_tokens(rate: float, k: int) -> float:
    """(1 - a^(k+1)) / (1 - a): mean tokens per verification step for i.i.d. acceptance a and k drafts."""
    if rate >= 1.0:
        return float(k + 1)
    return (1.0 - rate ** (k + 1)) / (1.0 - rate)
