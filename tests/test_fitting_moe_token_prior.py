"""A generation without rows, on MoE models (issue 33, round 9): a fold that cannot fit
``layer_token_overhead_s@<gen>`` sets it on that generation's expert paths to the OTHER generations' MoE
expert-path readings of the term (twin.fitting.moe_token_prior), never its own, never a dense value, and nothing
where no reading's evidence is kept; round 10: with a decode share of 0 (prompt tokens pay it)."""

from __future__ import annotations

import math

import pytest

from twin.fitting import provenance as pv
from twin.fitting.moe_token_prior import fold_moe_token_prior, moe_token_prior, moe_token_readings
from twin.fitting.scoped import EXPERT_FORMATS


def _entry(parameter: str, value: float) -> pv.Entry:
    return pv.Entry(parameter, value, 0.0, "test")


ENTRIES = [_entry("layer_token_overhead_s@blackwell", 0.2e-6),                       # a generation's own: not a reading
           _entry("layer_token_overhead_s@hopper+experts_mxfp4", 0.15e-6),           # Hopper's MoE path: the reading
           _entry("layer_token_overhead_s@blackwell+experts_fp8", 0.3e-6),           # Blackwell's own path
           _entry("moe_expert_compute_efficiency@hopper+experts_fp8", 0.18)]         # another term


def test_only_the_other_generations_expert_path_readings_count():
    assert moe_token_readings("blackwell", ENTRIES, ()) == [0.15e-6]
    assert moe_token_readings("hopper", ENTRIES, ()) == [0.3e-6]
    # a reading whose evidence the fold holds out is left out
    assert moe_token_readings("blackwell", ENTRIES, ("layer_token_overhead_s@hopper+experts_mxfp4",)) == []
    # several: pooled by the geometric mean
    more = ENTRIES + [_entry("layer_token_overhead_s@ampere+experts_nvfp4", 0.24e-6)]
    prior = moe_token_prior("blackwell", ("layer_token_overhead_s@blackwell",), more, ())
    assert prior["layer_token_overhead_s@blackwell+experts_nvfp4"] == pytest.approx(math.sqrt(0.15e-6 * 0.24e-6),
                                                                                   rel=1e-12)


def test_the_prior_covers_every_expert_path_and_only_when_the_term_is_not_fitted():
    prior = moe_token_prior("blackwell", ("layer_token_overhead_s@blackwell",), ENTRIES, ())
    assert prior == ({f"layer_token_overhead_s@blackwell+experts_{f}": 0.15e-6 for f in EXPERT_FORMATS}
                     | {f"layer_token_decode_share@blackwell+experts_{f}": 0.0 for f in EXPERT_FORMATS})
    # fitted here (the fold has rows of the generation): nothing
    assert moe_token_prior("blackwell", (), ENTRIES, ()) == {}
    # no reading kept: nothing (the term falls back as before)
    assert moe_token_prior("blackwell", ("layer_token_overhead_s@blackwell",), ENTRIES,
                           ("layer_token_overhead_s@hopper+experts_mxfp4",)) == {}


def test_the_fold_sets_it_where_the_generation_is_held_or_reset(monkeypatch):
    monkeypatch.setattr(pv, "embedded_entries", lambda: ENTRIES)
    names = ("layer_token_overhead_s", "layer_token_overhead_s@blackwell")
    entry = ENTRIES[0]
    empty = pv.FoldPlan({}, {}, {}, {})
    # held: the training rows have no Blackwell row
    held = fold_moe_token_prior(names, {"layer_token_overhead_s@blackwell": "no run"}, empty)
    assert held["layer_token_overhead_s@blackwell+experts_int4"] == 0.15e-6
    # round 10: charged to prompt tokens only (the reading is a prompt-growth reading)
    assert held["layer_token_decode_share@blackwell+experts_int4"] == 0.0
    # reset by the plan (its evidence held out, not refit)
    reset = pv.FoldPlan({"layer_token_overhead_s@blackwell": (entry, pv.RESET)}, {}, {}, {})
    assert fold_moe_token_prior(names, {}, reset) == held
    # fitted on the training rows: nothing; the Hopper reading's evidence held out: nothing
    assert fold_moe_token_prior(names, {}, empty) == {}
    hopper_out = pv.FoldPlan({"layer_token_overhead_s@hopper+experts_mxfp4": (ENTRIES[1], pv.RESET)}, {}, {}, {})
    assert fold_moe_token_prior(names, {"layer_token_overhead_s@blackwell": "no run"}, hopper_out) == {}
    # the unscoped (reference) term is not a generation's: nothing for it
    assert fold_moe_token_prior(("layer_token_overhead_s",), {"layer_token_overhead_s": "no run"}, empty) == {}


def test_the_reading_closes_the_measured_growth_through_the_floor():
    from tests.benchmark_module import load_benchmark
    m = load_benchmark("layer_token_reading")
    # a graphed 1k step (10 ms GPU) and an eager 8k step (50 ms GPU under a 60 ms floor), no wait difference
    short, long = [(10e-3, 1000, 0.0)], [(50e-3, 8000, 60e-3)]
    # measured growth 98 ms: X n_8k - X n_1k = 98 - 40 ms of GPU growth -> X = 58 ms / 7,000 tokens
    assert m.implied_extra_per_token_s(short, long, 0.0, 98e-3) == pytest.approx(58e-3 / 7000, rel=1e-9)
    # under the floor: the long step stays 60 ms until 50 ms + X 8,000 passes it, so a 55 ms growth needs
    # 60 ms + ... : 50 + 8000 X - (10 + 1000 X) = 55 ms -> X = 15 ms / 7,000, with the step above the floor
    assert m.implied_extra_per_token_s(short, long, 0.0, 55e-3) == pytest.approx(15e-3 / 7000, rel=1e-9)
    # the floor alone grows more than measured: "below"
    assert m.implied_extra_per_token_s(short, long, 0.0, 45e-3) == float("-inf")
    # two TP sizes: k and U recovered exactly
    k, u, rms = m.tp_split([(50e-6, 0.5 * 50e-6 + 12e-6), (6e-6, 0.5 * 6e-6 + 12e-6)])
    assert (k, u, rms) == (pytest.approx(0.5), pytest.approx(12e-6), pytest.approx(0.0, abs=1e-15))
    assert m.tp_split([(6e-6, 1e-6)]) is None
