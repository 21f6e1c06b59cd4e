"""Acceptance from measurements (twin.spec_decode.acceptance_input): AL(k) per k, per-position counters, a
dataset class, vLLM's synthetic knobs; exact conversions, what a run reproduces, and one-line errors."""

from __future__ import annotations

import pytest

from spec_decode_helpers import run_metrics
from twin.errors import TwinInputError
from twin.scenario import Scenario
from twin.spec_decode.acceptance_input import (rates_from_acceptance_lengths, rates_from_counters,
                                               synthetic_rates)

AL = {1: 1.72, 2: 2.21, 3: 2.5, 4: 2.66}


def _body(spec: dict, *, requests: int = 96, output: int = 512, task: str = "chat"):
    """A constant-cost run (time does not matter here, only the token accounting), 16 closed-loop streams."""
    return Scenario({
        "deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b"},
        "cost_model": {"kind": "constant", "params": {"step_s": 0.01}},
        "workload": {"arrivals": {"process": "closed_loop", "concurrency": 16}, "num_requests": requests,
                     "classes": [{"name": task, "share": 1.0, "prompt": {"suffix_tokens": 64},
                                  "output_tokens": output}]},
        "speculative_decoding": spec,
        "seed": 7,
    }).body()


def test_al_per_k_gives_the_increments_as_position_rates():
    assert rates_from_acceptance_lengths(AL) == pytest.approx([0.72, 0.49, 0.29, 0.16], abs=1e-12)
    assert rates_from_acceptance_lengths({1: 1.0, 2: 1.0}) == [0.0, 0.0]
    assert rates_from_counters(1000, [620, 410, 260]) == [0.62, 0.41, 0.26]


def test_synthetic_length_is_vllms_minimum_variance_schedule():
    assert synthetic_rates(3, None, 2.6) == pytest.approx([1.0, 0.6, 0.0])
    assert synthetic_rates(4, None, 3.5) == pytest.approx([1.0, 1.0, 0.5, 0.0])
    assert synthetic_rates(3, None, 1.0) == [0.0, 0.0, 0.0]
    assert synthetic_rates(3, None, 4.0) == [1.0, 1.0, 1.0]
    assert synthetic_rates(2, [0.7, 0.4], None) == [0.7, 0.4]


@pytest.mark.parametrize("k", [2, 4])
def test_al_k_input_reproduces_al_k_output_within_1_percent(k):
    """Seed 7, 96 requests x 512 tokens (about 20,000 verifications at k = 4): the measured mean acceptance
    length (vLLM's definition) is AL(k) of the input table within 1 % (its standard error is ~0.3 %)."""
    m = run_metrics(_body({"method": "eagle3", "num_speculative_tokens": k,
                           "acceptance": {"mean_acceptance_length": AL}}))
    assert m["spec_decode_num_drafts"] > 10_000
    assert m["spec_decode_acceptance_length"] == pytest.approx(AL[k], rel=0.01)


def test_counters_and_synthetic_length_reproduce_their_acceptance():
    m = run_metrics(_body({"method": "eagle", "num_speculative_tokens": 3,
                           "acceptance": {"counters": {"num_drafts": 1000, "accepted_per_position": [620, 410, 260]}}}))
    rates = m["spec_decode_per_position_acceptance_rates"]
    assert rates == pytest.approx([0.62, 0.41, 0.26], abs=0.01)
    m = run_metrics(_body({"method": "mtp", "num_speculative_tokens": 3, "rejection_sample_method": "synthetic",
                           "synthetic_acceptance_length": 2.6}))
    assert m["spec_decode_acceptance_length"] == pytest.approx(2.6, rel=0.01)
    assert m["spec_decode_per_position_acceptance_rates"][0] == 1.0
    assert m["spec_decode_per_position_acceptance_rates"][2] == 0.0


def test_random_tokens_defeat_a_learned_drafter_and_give_ngram_nothing_to_match():
    m = run_metrics(_body({"method": "eagle3", "num_speculative_tokens": 4, "acceptance": {"dataset": "random_tokens"}},
                          requests=16, output=64))
    assert m["spec_decode_acceptance_length"] == 1.0 and m["spec_decode_num_drafts"] > 0
    m = run_metrics(_body({"method": "ngram", "num_speculative_tokens": 4, "acceptance": {"dataset": "random_tokens"}},
                          requests=16, output=64))
    assert not m.get("spec_decode_num_drafts")


@pytest.mark.parametrize("spec,where,what", [
    ({"acceptance": {"mean_acceptance_length": {1: 1.7, 2: 2.2, 4: 2.6}}}, "mean_acceptance_length", "k = 3"),
    ({"acceptance": {"mean_acceptance_length": {1: 1.7, 2: 2.2, 3: 2.8, 4: 2.9}}}, "mean_acceptance_length[3]",
     "exceeds"),
    ({"acceptance": {"mean_acceptance_length": {1: 2.5, 2: 3, 3: 3.5, 4: 4}}}, "mean_acceptance_length[1]",
     "[1, 2]"),
    ({"acceptance": {"mean_acceptance_length": {1: 1.7, 2: 2.2}}}, "mean_acceptance_length", "at least 4"),
    ({"acceptance": {"counters": {"num_drafts": 10, "accepted_per_position": [5, 7, 1, 0]}}},
     "accepted_per_position[1]", "got 7"),
    ({"acceptance": {"dataset": "sharegpt"}}, "dataset", "random_tokens"),
    ({"rejection_sample_method": "synthetic"}, "rejection_sample_method", "exactly one"),
    ({"rejection_sample_method": "synthetic", "synthetic_acceptance_length": 5.5}, "synthetic_acceptance_length",
     "got 5.5"),
    ({"rejection_sample_method": "synthetic", "synthetic_acceptance_rates": [0.5, 0.6, 0.1, 0]},
     "synthetic_acceptance_rates[1]", "got 0.6"),
    ({"rejection_sample_method": "synthetic", "synthetic_acceptance_rates": [0.5]}, "synthetic_acceptance_rates",
     "one per draft"),
    ({"rejection_sample_method": "synthetic", "synthetic_acceptance_length": 2, "acceptance": 0.5}, "acceptance",
     "leave acceptance out"),
    ({"synthetic_acceptance_length": 2, "acceptance": 0.5}, "synthetic_acceptance", "only with"),
    ({"acceptance": 0.5, "sampling": "nucleus"}, "sampling", "top_k_top_p"),
    ({}, "acceptance", "is required"),
])
def test_acceptance_input_errors_are_one_line_and_name_the_field(spec, where, what):
    full = {"method": "eagle3", "num_speculative_tokens": 4, **spec}
    with pytest.raises(TwinInputError) as err:
        _body(full)
    msg = str(err.value)
    assert "\n" not in msg and "speculative_decoding." in msg
    assert where in msg and what in msg, msg
