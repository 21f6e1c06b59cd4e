"""A generation without rows takes the kept generation's fixed time per MoE layer on the same expert format,
unscaled (issue 33, round 17; twin.fitting.moe_layer_transfer): only other generations' readings of the same
format, never where the generation is fitted or has its own entry, nothing where the reading's evidence is held."""

from __future__ import annotations

import math

import pytest

from twin.fitting import moe_token_prior
from twin.fitting import provenance as pv
from twin.fitting.moe_layer_transfer import fold_moe_layer_transfer, kept_layer_readings, moe_layer_transfer

GATE = ("layer_token_overhead_s@blackwell",)


def _entry(parameter: str, value: float) -> pv.Entry:
    return pv.Entry(parameter, value, 0.0, "test")


ENTRIES = [_entry("moe_layer_overhead_s@hopper+experts_fp8", 16e-6),          # the reading carried
           _entry("moe_layer_overhead_s@experts_int4", 38.2e-6),              # no generation: not a reading
           _entry("moe_layer_overhead_s@hopper+gqa+experts_nvfp4", 5e-6),     # a compound path: not carried
           _entry("moe_expert_compute_efficiency@hopper+experts_fp8", 0.18),  # another term
           _entry("layer_token_overhead_s@blackwell", 0.2e-6)]


def test_only_generation_and_format_scoped_readings_count():
    assert kept_layer_readings(ENTRIES, ()) == {("hopper", "fp8"): 16e-6}
    assert kept_layer_readings(ENTRIES, ("moe_layer_overhead_s@hopper+experts_fp8",)) == {}


def test_carried_unscaled_to_the_same_format_only_when_the_generation_is_not_fitted():
    assert moe_layer_transfer("blackwell", GATE, ENTRIES, ()) == {"moe_layer_overhead_s@blackwell+experts_fp8": 16e-6}
    # fitted here (the fold has rows of the generation): nothing
    assert moe_layer_transfer("blackwell", (), ENTRIES, ()) == {}
    # the reading's evidence held out: nothing
    assert moe_layer_transfer("blackwell", GATE, ENTRIES, ("moe_layer_overhead_s@hopper+experts_fp8",)) == {}
    # never a generation's own reading to itself
    assert moe_layer_transfer("hopper", ("layer_token_overhead_s@hopper",), ENTRIES, ()) == {}
    # the generation's own entry of the format is not replaced; several others: the geometric mean
    own = ENTRIES + [_entry("moe_layer_overhead_s@blackwell+experts_fp8", 20e-6)]
    assert moe_layer_transfer("blackwell", GATE, own, ()) == {}
    more = ENTRIES + [_entry("moe_layer_overhead_s@ampere+experts_fp8", 25e-6)]
    got = moe_layer_transfer("blackwell", GATE, more, ())
    assert got["moe_layer_overhead_s@blackwell+experts_fp8"] == pytest.approx(math.sqrt(16e-6 * 25e-6), rel=1e-12)


def test_the_fold_sets_it_where_the_generation_is_held_or_reset(monkeypatch):
    monkeypatch.setattr(moe_token_prior, "embedded_entries", lambda: ENTRIES)   # the fold loop's table
    names = ("layer_token_overhead_s", "layer_token_overhead_s@blackwell")
    empty = pv.FoldPlan({}, {}, {}, {})
    held = fold_moe_layer_transfer(names, {"layer_token_overhead_s@blackwell": "no run"}, empty)
    assert held == {"moe_layer_overhead_s@blackwell+experts_fp8": 16e-6}
    reset = pv.FoldPlan({"layer_token_overhead_s@blackwell": (ENTRIES[-1], pv.RESET)}, {}, {}, {})
    assert fold_moe_layer_transfer(names, {}, reset) == held
    assert fold_moe_layer_transfer(names, {}, empty) == {}
    hopper_out = pv.FoldPlan({"moe_layer_overhead_s@hopper+experts_fp8": (ENTRIES[0], pv.RESET)}, {}, {}, {})
    assert fold_moe_layer_transfer(names, {"layer_token_overhead_s@blackwell": "no run"}, hopper_out) == {}
    assert fold_moe_layer_transfer(("layer_token_overhead_s",), {"layer_token_overhead_s": "no run"}, empty) == {}


def test_the_embedded_table_carries_hoppers_block_fp8_reading():
    # the one non-Marlin path with a reading: Hopper's block-FP8 experts (MiniMax-M2.5 H100), 16 us
    got = moe_layer_transfer("blackwell", GATE, pv.embedded_entries(), ())
    assert got == {"moe_layer_overhead_s@blackwell+experts_fp8": 16e-6}
