"""Acceptance models and the Monte-Carlo check of the expected tokens per verification step.

Tolerances: simulated means are compared with their exact expectation within 4 standard errors, the standard
error computed from the exact distribution and the number of verifications (runs are seeded, so the check is
deterministic; 4 SE would fail by chance about once in 16,000 seeds)."""

from __future__ import annotations

import math

import pytest

from spec_decode_helpers import simulate_direct, specs
from twin.errors import TwinInputError
from twin.core.scheduler_config import SchedulerConfig
from twin.spec_decode import AcceptanceModel, iid_expected_tokens


def test_iid_rates_and_formula():
    m = AcceptanceModel.iid(0.6, 4)
    assert m.rates == pytest.approx([0.6, 0.36, 0.216, 0.1296])
    assert m.expected_tokens_per_step(4) == pytest.approx((1 - 0.6 ** 5) / (1 - 0.6))
    assert iid_expected_tokens(0.6, 4) == pytest.approx(m.expected_tokens_per_step(4))
    assert iid_expected_tokens(1.0, 3) == 4.0 and iid_expected_tokens(0.0, 3) == 1.0
    assert sum(m.accepted_length_pmf(4)) == pytest.approx(1.0)
    assert m.position_rates(6)[4:] == [0.0, 0.0]


def test_accepted_length_form_is_the_tail_of_the_histogram():
    m = AcceptanceModel.accepted_length([40, 30, 20, 10])   # counts of accepting exactly 0, 1, 2, 3
    assert m.rates == pytest.approx([0.6, 0.3, 0.1])
    assert m.accepted_length_pmf(3) == pytest.approx([0.4, 0.3, 0.2, 0.1])
    assert m.expected_tokens_per_step(3) == pytest.approx(1 + 0.3 + 0.4 + 0.3)
    assert m.accepted_length_pmf(2) == pytest.approx([0.4, 0.3, 0.3])   # with 2 drafts, 2 or more -> 2


def test_inverse_cdf_sampling_is_exact():
    m = AcceptanceModel.per_position([0.9, 0.5, 0.2])
    n = 10_000
    counts = [0] * 4
    for j in range(n):
        counts[m.accepted((j + 0.5) / n, 3)] += 1
    assert [c / n for c in counts] == pytest.approx(m.accepted_length_pmf(3), abs=1 / n)
    # verifying a prefix of the drafts (the budget cut them) caps the same draw
    assert m.accepted(0.1, 1) == 1 and m.accepted(0.1, 3) == 3 and m.accepted(0.95, 3) == 0


@pytest.mark.parametrize("bad", [[0.5, 0.6], [1.2], [-0.1]])
def test_bad_curves_are_refused(bad):
    with pytest.raises(TwinInputError):
        AcceptanceModel.per_position(bad)


@pytest.mark.parametrize("a,k", [(0.3, 2), (0.6, 3), (0.8, 4), (0.9, 6), (0.5, 1)])
def test_mean_tokens_per_verification_matches_formula(a, k):
    """Through the whole engine (scheduler, speculator, update_from_output, records, metrics)."""
    cfg = SchedulerConfig(max_num_batched_tokens=8192, max_num_seqs=64, block_size=16, max_model_len=4096)
    result = simulate_direct(specs(64, 32, 300), cfg, 4000, a, k, seed=11)
    m = result.metrics()
    n = m["spec_decode_num_drafts"]
    model = AcceptanceModel.iid(a, k)
    pmf = model.accepted_length_pmf(k)
    mean = iid_expected_tokens(a, k)
    var = sum(p * (1 + j - mean) ** 2 for j, p in enumerate(pmf))
    se = math.sqrt(var / n)
    assert n > 3000
    assert m["spec_decode_draft_tokens"] == k * n                       # no draft was cut
    assert abs(m["spec_decode_acceptance_length"] - mean) < 4 * se, (m["spec_decode_acceptance_length"], mean, se)
    # vLLM's acceptance rate (a percentage) is accepted / drafted
    assert m["spec_decode_acceptance_rate"] == pytest.approx(100 * (m["spec_decode_acceptance_length"] - 1) / k)
    for i, rate in enumerate(m["spec_decode_per_position_acceptance_rates"], start=1):
        p = a ** i
        assert abs(rate - p) < 4 * math.sqrt(p * (1 - p) / n) + 1e-12, (i, rate, p)


def test_emitted_tokens_agree_with_acceptance():
    """Tokens emitted per verification step (from the per-request emission records) equal 1 + accepted,
    except where a request's last step was cut short by its length."""
    cfg = SchedulerConfig(max_num_batched_tokens=8192, max_num_seqs=32, block_size=16, max_model_len=4096)
    result = simulate_direct(specs(32, 32, 200), cfg, 2000, 0.7, 3, seed=5)
    for r in result.requests:
        counts = list(r.emit_counts) if r.emit_counts is not None else [1] * len(r.emit_times_s)
        assert counts[0] == 1                                            # the prefill's token
        assert sum(counts) == r.num_output_tokens == 200
        assert r.num_spec_drafts == len(counts) - 1                     # every later step verified 3 drafts
        truncated = r.num_spec_accepted_tokens + r.num_spec_drafts - (sum(counts) - 1)
        assert 0 <= truncated <= 3                                       # only the last step can be cut


def test_task_classes_get_their_own_acceptance():
    cfg = SchedulerConfig(max_num_batched_tokens=8192, max_num_seqs=64, block_size=16, max_model_len=4096)
    traffic = specs(20, 32, 200, task="code") + [
        s.__class__(s.request_id + 100, s.arrival_s, s.num_prompt_tokens, s.output_tokens, s.prompt_segments,
                    task_class="creative") for s in specs(20, 32, 200)]
    acceptance = {"code": AcceptanceModel.iid(0.9, 4), "creative": AcceptanceModel.iid(0.2, 4)}
    result = simulate_direct(traffic, cfg, 4000, acceptance, 4, seed=1)
    by = {}
    for r in result.requests:
        d = by.setdefault(r.task_class, [0, 0])
        d[0] += r.num_spec_accepted_tokens
        d[1] += r.num_spec_drafts
    assert 1 + by["code"][0] / by["code"][1] == pytest.approx(iid_expected_tokens(0.9, 4), rel=0.05)
    assert 1 + by["creative"][0] / by["creative"][1] == pytest.approx(iid_expected_tokens(0.2, 4), rel=0.05)


def test_ngram_proposal_rate_skips_steps():
    cfg = SchedulerConfig(max_num_batched_tokens=8192, max_num_seqs=64, block_size=16, max_model_len=4096)
    result = simulate_direct(specs(32, 32, 200), cfg, 4000, AcceptanceModel.iid(0.5, 4, proposal_rate=0.3), 4,
                             seed=2)
    drafts = sum(r.num_spec_drafts for r in result.requests)
    steps = sum(len(r.emit_times_s) - 1 for r in result.requests)      # decode steps after the prefill
    assert drafts / steps == pytest.approx(0.3, abs=0.03)
