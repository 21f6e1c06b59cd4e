"""Acceptance from what people measure: a mean acceptance length per k, a server's per-position counters, a
named dataset class, or vLLM's synthetic rejection sampler knobs. Each is reduced to the per-position rates
``r_i = P(at least i drafts accepted)`` of ``twin.spec_decode.acceptance`` (a non-increasing sequence in
[0, 1]); every function raises ``ValueError`` with a one-line message naming the field, the value and what
is allowed (the config layer prefixes the path).

* **Mean acceptance length per k** (``mean_acceptance_length: {1: 1.72, 2: 2.21, 3: 2.50, 4: 2.66}``): the mean
  tokens a verification emits, counting the target's own token (vLLM's ``spec_decode_acceptance_length``), as
  measured with ``num_speculative_tokens = k``. With the drafter's proposals independent of k (a chain drafter
  proposes the same first k tokens whatever k is), AL(k) = 1 + r_1 + ... + r_k, so
  ``r_k = AL(k) - AL(k-1)`` (AL(0) = 1) is the share of verifications that reach position k. Needs every k from
  1 up to the largest given; the increments must lie in [0, 1] and must not increase.
* **Per-position counters** (``counters: {num_drafts: 1000, accepted_per_position: [620, 410, 260, 150]}``): a
  server's ``vllm:spec_decode_num_drafts`` and ``vllm:spec_decode_num_accepted_tokens_per_pos``:
  ``r_i = accepted_i / num_drafts``.
* **Dataset class** (``dataset: random_tokens``): see ``DATASET_CLASSES``.
* **vLLM's synthetic rejection sampler** (``rejection_sample_method: synthetic`` with
  ``synthetic_acceptance_rates`` or ``synthetic_acceptance_length``, vLLM's ``config/speculative.py``): the
  rates are unconditional per-position rates (entry i: the chance that the first i drafts are all accepted),
  one per draft, non-increasing; a length L in [1, k + 1] becomes vLLM's minimum-variance schedule: the first
  floor(L - 1) positions always accepted, the next with probability frac(L - 1), the rest never
  (L = 2.6, k = 3 -> [1, 0.6, 0]).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

# Named dataset classes: what a learned drafter meets in that kind of traffic, per drafting method group.
# Only classes whose acceptance follows from what the prompts are, not from a measurement, are named here:
# - random_tokens: prompts of tokens drawn uniformly from the vocabulary (vLLM bench's `random` dataset,
#   inference-perf's `random` and `shared_prefix` generators). A drafter trained on natural text (a draft model,
#   EAGLE/EAGLE-3 or MTP heads) has nothing to predict from: its guesses match the target's choice about as often
#   as two unrelated distributions agree, which is ~0 (the H100 run: EAGLE-3 was slower at every load, as
#   at zero acceptance). Prompt lookup (n-gram) finds no repeated n-gram in random text, so it proposes nothing.
# Natural-text classes (chat, code, summarisation) depend on the model pair and the data; give their measured
# mean acceptance length per k, or the server's per-position counters, instead.
DATASET_CLASSES: dict[str, dict[str, tuple[float, float]]] = {
    # name: {"model": (per-position rate at every position, proposal rate), "ngram": (...)}
    "random_tokens": {"model": (0.0, 1.0), "ngram": (0.0, 0.0)},
}
AL_TOLERANCE = 1e-9


def _finite(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name}: must be a finite number (got {value!r})")
    return float(value)


def rates_from_acceptance_lengths(lengths: Mapping[int, float]) -> list[float]:
    """r_1..r_m from AL(1)..AL(m) (see the module docstring)."""
    if not lengths:
        raise ValueError(".mean_acceptance_length: give AL(k) for k = 1, 2, ... (at least k = 1)")
    ks = sorted(lengths)
    if ks != list(range(1, len(ks) + 1)):
        missing = next(k for k in range(1, ks[-1] + 1) if k not in lengths) if ks[0] >= 1 else ks[0]
        raise ValueError(f".mean_acceptance_length: gives k = {', '.join(map(str, ks))}; needs every k from 1 to "
                         f"{ks[-1]} (k = {missing} is missing or not a positive integer)")
    rates: list[float] = []
    prev_len, prev_rate = 1.0, 1.0
    for k in ks:
        al = _finite(f".mean_acceptance_length.{k}", lengths[k])
        if not (1.0 - AL_TOLERANCE <= al <= k + 1 + AL_TOLERANCE):
            raise ValueError(f".mean_acceptance_length.{k}: must be in [1, {k + 1}] (the target's own token plus at "
                             f"most {k} accepted drafts; got {al:g})")
        r = al - prev_len
        if r < -AL_TOLERANCE or r > 1 + AL_TOLERANCE:
            raise ValueError(f".mean_acceptance_length.{k}: AL({k}) - AL({k - 1}) = {r:g} is the share of "
                             f"verifications reaching position {k} and must be in [0, 1] (got AL({k}) = {al:g})")
        if r > prev_rate + AL_TOLERANCE:
            raise ValueError(f".mean_acceptance_length.{k}: AL({k}) - AL({k - 1}) = {r:g} exceeds "
                             f"AL({k - 1}) - AL({k - 2}) = {prev_rate:g}; a later position cannot be reached "
                             f"more often than an earlier one (got AL({k}) = {al:g})")
        r = min(max(r, 0.0), prev_rate)       # only rounding noise within AL_TOLERANCE is absorbed
        rates.append(r)
        prev_len, prev_rate = al, r
    return rates


def rates_from_counters(num_drafts: float, accepted_per_position: Sequence[float]) -> list[float]:
    """r_i = accepted_i / num_drafts from a server's per-position counters."""
    n = _finite(".counters.num_drafts", num_drafts)
    if n <= 0:
        raise ValueError(f".counters.num_drafts: must be > 0 (verifications counted; got {num_drafts!r})")
    if not accepted_per_position:
        raise ValueError(".counters.accepted_per_position: give one count per draft position")
    rates, prev = [], n
    for i, a in enumerate(accepted_per_position, start=1):
        a = _finite(f".counters.accepted_per_position[{i - 1}]", a)
        if a < 0 or a > prev:
            raise ValueError(f".counters.accepted_per_position[{i - 1}]: must be in [0, {prev:g}] (no more than "
                             f"num_drafts, nor than the previous position's count; got {a:g})")
        rates.append(a / n)
        prev = a
    return rates


def dataset_class_rates(name: str, method: str, num_positions: int) -> tuple[list[float], float]:
    """(r_1..r_k, proposal rate) of a named dataset class for a drafting method."""
    entry = DATASET_CLASSES.get(name)
    if entry is None:
        raise ValueError(f".dataset: {name!r} is not a known dataset class (known: {', '.join(DATASET_CLASSES)}); "
                         f"for natural text give mean_acceptance_length or counters as measured")
    rate, proposal = entry["ngram" if method == "ngram" else "model"]
    return [rate] * num_positions, proposal


def synthetic_rates(k: int, rates: Sequence[float] | None, length: float | None) -> list[float]:
    """vLLM's ``synthetic_acceptance_rates`` / ``synthetic_acceptance_length`` as per-position rates."""
    if (rates is None) == (length is None):
        raise ValueError(".rejection_sample_method: synthetic needs exactly one of synthetic_acceptance_rates and "
                         "synthetic_acceptance_length")
    if rates is not None:
        if len(rates) != k:
            raise ValueError(f".synthetic_acceptance_rates: gives {len(rates)} rates; needs one per draft "
                             f"(num_speculative_tokens = {k})")
        prev = 1.0
        for i, r in enumerate(rates):
            r = _finite(f".synthetic_acceptance_rates[{i}]", r)
            if not 0.0 <= r <= prev:
                raise ValueError(f".synthetic_acceptance_rates[{i}]: must be in [0, {prev:g}] (non-increasing rates in "
                                 f"[0, 1]; got {r:g})")
            prev = r
        return [float(r) for r in rates]
    length = _finite(".synthetic_acceptance_length", length)
    if not 1.0 <= length <= k + 1:
        raise ValueError(f".synthetic_acceptance_length: must be in [1, {k + 1}] (the target's own token plus at "
                         f"most num_speculative_tokens = {k} accepted drafts; got {length:g})")
    extra = length - 1.0
    full = int(math.floor(extra + 1e-12))
    out = [1.0] * min(full, k)
    if len(out) < k:
        out.append(max(0.0, extra - full))
    out.extend([0.0] * (k - len(out)))
    return out
