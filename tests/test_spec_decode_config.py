"""The ``speculative_decoding:`` scenario section: forms, one-line errors, wiring through twin.sim.deployment (KV pool,
lookahead slots, speculators, metrics) and the bundled scenarios."""

from __future__ import annotations

import pytest

from spec_decode_helpers import run_metrics, scenario_body, spec_section
from twin.sim.deployment import resolve_deployment
from twin.sim.run import run_body
from twin.errors import TwinInputError
from twin.results.metric_keys import SPEC_DECODE_KEYS
from twin.scenario import Scenario, load_scenario


def _body(spec, classes=("task",), trace=False):
    wl = {"arrivals": {"process": "closed_loop", "concurrency": 1}, "num_requests": 4,
          "classes": [{"name": c, "share": 1 / len(classes), "prompt": {"suffix_tokens": 64}, "output_tokens": 16}
                      for c in classes]}
    return Scenario({"workload": wl, "speculative_decoding": spec}).body()


def test_forms_and_shorthands():
    b = _body({"method": "eagle", "num_speculative_tokens": 3, "acceptance": 0.7})
    models = b.speculative_decoding.acceptance_models()
    assert list(models) == ["default"] and models["default"].rates == pytest.approx([0.7, 0.49, 0.343])
    b = _body({"method": "eagle", "num_speculative_tokens": 2, "acceptance": {"per_position": [0.8, 0.5]}})
    assert b.speculative_decoding.acceptance_models()["default"].rates == [0.8, 0.5]
    b = _body({"method": "ngram", "num_speculative_tokens": 3,
               "acceptance": {"a": {"accepted_length": [5, 3, 2]}, "b": {"rate": 0.4, "proposal_rate": 0.3}}},
              classes=("a", "b"))
    models = b.speculative_decoding.acceptance_models()
    assert models["a"].rates == pytest.approx([0.5, 0.2]) and models["b"].proposal_rate == 0.3
    # an entry for a class this traffic lacks is fine (one table serves several variants)
    _body({"method": "eagle", "num_speculative_tokens": 2, "acceptance": {"task": 0.5, "other": 0.9}})


@pytest.mark.parametrize("spec,message", [
    ({"method": "medusa", "num_speculative_tokens": 2, "acceptance": 0.5},
     "speculative_decoding.method: must be one of"),
    ({"method": "eagle", "num_speculative_tokens": 0, "acceptance": 0.5},
     "speculative_decoding.num_speculative_tokens: must be >= 1"),
    ({"method": "draft_model", "num_speculative_tokens": 2, "acceptance": 0.5},
     "speculative_decoding.draft_model: is required for method draft_model"),
    ({"method": "eagle", "num_speculative_tokens": 2, "draft_model": "llama-3.2-1b", "acceptance": 0.5},
     "speculative_decoding.draft_model: only for method draft_model"),
    ({"method": "eagle", "num_speculative_tokens": 2, "acceptance": 1.5},
     "speculative_decoding.acceptance.default.rate: must be <= 1"),
    ({"method": "eagle", "num_speculative_tokens": 3, "acceptance": {"task": {"per_position": [0.9, 0.5]}}},
     "speculative_decoding.acceptance.task.per_position: gives 2 positions, num_speculative_tokens is 3"),
    ({"method": "eagle", "num_speculative_tokens": 2, "acceptance": {"task": {"per_position": [0.5, 0.9]}}},
     "speculative_decoding.acceptance.task.per_position: rates must not increase"),
    ({"method": "eagle", "num_speculative_tokens": 2, "acceptance": {"task": {"rate": 0.5, "per_position": [0.5]}}},
     "speculative_decoding.acceptance.task: give exactly one of rate, per_position, accepted_length"),
    ({"method": "eagle", "num_speculative_tokens": 2, "acceptance": {"other": 0.5}},
     "speculative_decoding.acceptance: task class 'task' has no acceptance"),
    ({"method": "eagle", "num_speculative_tokens": 2, "acceptance": {"task": {"rate": 0.5, "proposal_rate": 0.5}}},
     "speculative_decoding.acceptance.task.proposal_rate: only for method ngram"),
    ({"method": "eagle", "num_speculative_tokens": 2, "acceptance": 0.5, "speculative_tokens": 3},
     "speculative_decoding: unknown field 'speculative_tokens'"),
    ({"method": "ngram", "num_speculative_tokens": 2, "acceptance": 0.5, "draft_layers": 2},
     "speculative_decoding.draft_layers: only for methods eagle, eagle3, mtp"),
    ({"method": "eagle3", "num_speculative_tokens": 2, "acceptance": 0.5, "spec_seq_overhead_s": -1e-6},
     "speculative_decoding.spec_seq_overhead_s"),
])
def test_errors_are_one_line_and_name_the_field(spec, message):
    with pytest.raises(TwinInputError) as err:
        _body(spec)
    text = str(err.value)
    assert message in text, text
    assert "\n" not in text


def test_bad_draft_models_are_refused_at_build():
    with pytest.raises(TwinInputError, match="speculative_decoding.draft_model: model: unknown model 'nope'"):
        resolve_deployment(scenario_body(1, spec_section("draft_model", draft_model="nope")))
    with pytest.raises(TwinInputError, match="must share the target's tokenizer"):
        resolve_deployment(scenario_body(1, spec_section("draft_model"), model="mistral-7b"))


def test_build_shrinks_the_kv_pool_and_reserves_lookahead_slots():
    plain = resolve_deployment(scenario_body(1, None))
    draft = resolve_deployment(scenario_body(1, spec_section("draft_model", k=5)))
    eagle = resolve_deployment(scenario_body(1, spec_section("eagle", k=3)))
    ngram = resolve_deployment(scenario_body(1, spec_section("ngram", k=3)))
    assert draft.scheduler_config.num_lookahead_tokens == 5
    assert eagle.scheduler_config.num_lookahead_tokens == 3
    assert ngram.scheduler_config.num_lookahead_tokens == 0 == plain.scheduler_config.num_lookahead_tokens
    # draft model: its ~2.3 GiB of weights and 32 KiB of KV per token beside the target's 128 KiB
    pool = draft.kv_pool
    assert pool.draft_kv_bytes_per_token == 32 * 1024 and pool.kv_bytes_per_block == 16 * (128 + 32) * 1024
    assert pool.available_kv_bytes == plain.kv_pool.available_kv_bytes - pool.draft_weight_bytes
    assert pool.num_gpu_blocks == pool.available_kv_bytes // pool.kv_bytes_per_block
    assert ngram.num_gpu_blocks == plain.num_gpu_blocks > eagle.num_gpu_blocks > draft.num_gpu_blocks
    assert "draft weights" in pool.summary()


def test_run_reports_spec_metrics_and_draft_time():
    body = scenario_body(4, spec_section("eagle", 0.7, 3), output=64)
    result = run_body(body)
    assert result.config["speculative_decoding"]["method"] == "eagle"
    stats = result.config["spec_decode_stats"]
    assert stats["num_verifications"] > 0 and stats["draft_time_s"] > 0
    m = run_metrics(body)
    for key in SPEC_DECODE_KEYS:
        assert m[key] is not None
    assert 0.05 < m["spec_decode_draft_time_fraction"] < 0.6
    assert m["spec_decode_num_drafts"] == stats["num_verifications"]
    assert m["spec_decode_accepted_tokens"] == stats["num_accepted_tokens"]
    assert len(m["spec_decode_per_position_acceptance_rates"]) == 3
    plain = run_metrics(scenario_body(4, None, output=64))
    assert "spec_decode_num_drafts" not in plain and "spec_decode_draft_time_s" not in plain


@pytest.mark.parametrize("name", ["speculative_decoding", "spec_methods"])
def test_bundled_scenarios_validate_and_resolve(name):
    scenario = load_scenario(name)
    bodies = {v: scenario.body(v) for v in scenario.names()}
    assert len(bodies) >= 20
    with_spec = [b for b in bodies.values() if b.speculative_decoding is not None]
    assert with_spec and len(with_spec) < len(bodies)                     # each has no-speculation references
    concurrencies = {b.workload.arrivals.concurrency for b in bodies.values()}
    assert {1, 16, 64, 256} <= concurrencies
    for b in with_spec:
        dep = resolve_deployment(b, scenario.base_dir)
        assert dep.drafter is not None and dep.drafter.method == b.speculative_decoding.method


def test_bundled_scenario_small_variant_runs():
    scenario = load_scenario("speculative_decoding")
    on, off = scenario.body("creative-c4"), scenario.body("creative-c4-nospec")
    m_on, m_off = run_metrics(on), run_metrics(off)
    assert m_on["output_throughput"] > m_off["output_throughput"]
    assert 1.5 < m_on["spec_decode_acceptance_length"] < 2.5
