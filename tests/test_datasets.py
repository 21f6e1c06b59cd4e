"""Datasets as benchmark clients build them (``workload.dataset``): vLLM bench's random and sonnet,
ShareGPT-shaped lengths, inference-perf's shared_prefix prompt pool; and the bundled scenario of each."""

from __future__ import annotations

import math

import numpy as np
import pytest
from click.testing import CliRunner

from twin.cli.main import main
from twin.errors import TwinInputError
from twin.scenario import load_scenario
from twin.sim.run import metrics_of, run_body
from twin.workload.config import load_workload_config
from twin.workload.datasets import SHAREGPT_MEAN_INPUT_TOKENS, SHAREGPT_MEAN_OUTPUT_TOKENS
from twin.workload.generate import build_workload


def _specs(dataset: dict, n: int = 50, seed: int = 0):
    return build_workload({"arrivals": {"process": "poisson", "rate_per_s": 10}, "num_requests": n,
                           "dataset": dataset}, seed)


def test_random_lengths_follow_vllm_bench_bounds():
    specs = _specs({"kind": "random", "input_len": 100, "output_len": 21, "range_ratio": 0.3, "prefix_len": 32},
                   n=2000)
    unique = np.array([s.num_prompt_tokens - 32 for s in specs])
    caps = np.array([s.max_tokens for s in specs])
    # floor(100 * 0.7) .. ceil(100 * 1.3) and floor(21 * 0.7) .. ceil(21 * 1.3), every value reachable
    assert (unique.min(), unique.max()) == (70, 130) and (caps.min(), caps.max()) == (14, 28)
    assert all(s.output_tokens == s.max_tokens for s in specs)     # ignore_eos: runs to max_tokens
    # the prefix is one segment every request shares; the rest is the request's own
    assert {s.prompt_segments[0] for s in specs} == {(("sys", "random", 0), 32)}
    assert all(s.prompt_segments[1][0] == ("u", s.request_id) for s in specs)


def test_random_without_range_is_fixed_and_without_ignore_eos_is_capped():
    specs = _specs({"kind": "random", "input_len": 64, "output_len": 40, "ignore_eos": False,
                    "output_tokens": {"uniform": [1, 80]}}, n=200)
    assert {s.num_prompt_tokens for s in specs} == {64} and {s.max_tokens for s in specs} == {40}
    assert max(s.output_tokens for s in specs) > 40      # the model would run on; max_tokens stops it


def test_sonnet_shares_its_prefix_and_has_the_input_length():
    specs = _specs({"kind": "sonnet", "input_len": 550, "output_len": 150, "prefix_len": 200})
    assert {(s.num_prompt_tokens, s.max_tokens) for s in specs} == {(550, 150)}
    assert {s.prompt_segments[0] for s in specs} == {(("sys", "sonnet", 0), 200)}


def test_sharegpt_means_match_the_published_statistics():
    specs = _specs({"kind": "sharegpt"}, n=20000, seed=1)
    inp = np.array([s.num_prompt_tokens for s in specs])
    out = np.array([s.max_tokens for s in specs])
    assert inp.min() >= 4 and inp.max() <= 1024 and out.min() >= 4 and out.max() <= 1024
    # lognormal(sigma 1) clipped to [4, 1024]: the clip takes a few percent off the mean (sigma-1 tail past
    # 1024 tokens); 20,000 draws put the sample mean within 2% of its expectation
    for values, mean, hi in ((inp, SHAREGPT_MEAN_INPUT_TOKENS, 1024), (out, SHAREGPT_MEAN_OUTPUT_TOKENS, 1024)):
        rng = np.random.default_rng(9)
        clipped = np.clip(np.rint(rng.lognormal(math.log(mean) - 0.5, 1.0, 400_000)), 4, hi).mean()
        assert 0.85 * mean < clipped <= mean
        assert values.mean() == pytest.approx(clipped, rel=0.02)


def test_shared_prefix_pool_is_cycled_in_order():
    specs = _specs({"kind": "shared_prefix", "num_groups": 2, "num_prompts_per_group": 3, "system_prompt_len": 40,
                    "question_len": 8, "output_len": 5, "shuffle": False}, n=14)
    pool = [(g, q) for g in range(2) for q in range(3)]
    for i, s in enumerate(specs):     # request i sends pool entry i mod 6
        g, q = pool[i % 6]
        assert s.prompt_segments == ((("sys", "shared_prefix", g), 40), (("q", "shared_prefix", g, q), 8))
        assert (s.num_prompt_tokens, s.max_tokens) == (48, 5)
    shuffled = _specs({"kind": "shared_prefix", "num_groups": 2, "num_prompts_per_group": 3,
                       "system_prompt_len": 40, "question_len": 8, "output_len": 5}, n=12)
    first = [s.prompt_segments for s in shuffled[:6]]
    assert sorted(first) == sorted(s.prompt_segments for s in specs[:6])     # the same pool, once each
    assert [s.prompt_segments for s in shuffled[6:]] == first                 # then cycled in that order


def test_shared_prefix_multi_turn_grows_each_users_conversation():
    specs = _specs({"kind": "shared_prefix", "num_groups": 1, "num_prompts_per_group": 2, "system_prompt_len": 40,
                    "question_len": 8, "output_len": 5, "shuffle": False, "multi_turn": True}, n=6)
    q0, q1 = (("q", "shared_prefix", 0, 0), 8), (("q", "shared_prefix", 0, 1), 8)
    sys = (("sys", "shared_prefix", 0), 40)
    assert specs[2].prompt_segments == (sys, q0, (("out", 0), 5), q0)
    assert specs[4].prompt_segments == (sys, q0, (("out", 0), 5), q0, (("out", 2), 5), q0)
    assert specs[5].prompt_segments == (sys, q1, (("out", 1), 5), q1, (("out", 3), 5), q1)
    assert [s.num_prompt_tokens for s in specs] == [48, 48, 61, 61, 74, 74]


@pytest.mark.parametrize("dataset, message", [
    ({"kind": "random", "range_ratio": 1.0}, "workload.dataset.range_ratio: must be < 1 (got 1.0; "
     "range_ratio_mode: lower_bound takes up to 1)"),
    ({"kind": "sonnet", "prefix_len": 600}, "workload.dataset.prefix_len: must be <= input_len 550 (got 600)"),
    ({"kind": "shared_prefix", "num_groups": 0}, "workload.dataset.num_groups: must be >= 1 (got 0)"),
    ({"kind": "sharegpt", "output_tokens": 5},
     "workload.dataset.output_tokens: means nothing with ignore_eos: true (every request runs to max_tokens); "
     "set ignore_eos: false to give the model's own lengths"),
    ({"kind": "random", "seed": 3}, "workload.dataset: unknown field 'seed' (allowed: ignore_eos, input_len, "
                                    "kind, output_len, output_tokens, prefix_len, range_ratio, "
                                    "range_ratio_mode)"),
])
def test_dataset_errors_are_one_line(dataset, message):
    with pytest.raises(TwinInputError) as exc:
        load_workload_config({"arrivals": {"process": "poisson", "rate_per_s": 1}, "num_requests": 3,
                              "dataset": dataset})
    assert str(exc.value) == message


def test_dataset_and_classes_are_exclusive():
    with pytest.raises(TwinInputError, match="give exactly one of classes, dataset"):
        load_workload_config({"arrivals": {"process": "poisson", "rate_per_s": 1}, "num_requests": 3,
                              "dataset": {"kind": "sonnet"},
                              "classes": [{"name": "c", "share": 1, "prompt": {"suffix_tokens": 3},
                                           "output_tokens": 3}]})


# ---- the bundled scenarios, one per dataset shape --------------------------------------------------------
@pytest.mark.parametrize("name", ["bench_random", "bench_sharegpt", "bench_sonnet", "inference_perf_shared_prefix"])
def test_twin_run_of_each_dataset_scenario(name):
    res = CliRunner().invoke(main, ["run", name, "--set", "workload.num_requests=60"])
    assert res.exit_code == 0, res.output
    assert "completed requests" in res.output


def test_shared_prefix_scenario_hits_are_exact():
    """8 system prompts (1000 tokens: 62 full blocks of 16 = 992 cached tokens) x 16 questions (100 tokens),
    a 128-prompt pool cycled over inference-perf's 400 sends (20 req/s x 20 s). First pass: each group's first
    request misses, the other 120 hit 992 tokens; later sends resend whole prompts, which hit all their full
    blocks but the last token's (1099 -> 68 blocks = 1088 tokens)."""
    sc = load_scenario("inference_perf_shared_prefix")
    body = sc.body("baseline")
    m = metrics_of(run_body(body, sc.base_dir), body)
    assert m["completed"] == 400
    assert m["prefix_cache_hit_tokens"] == 120 * 992 + 272 * 1088
    assert m["prefix_cache_query_tokens"] == 400 * 1100


def test_sonnet_scenario_hits_the_poem_prefix():
    sc = load_scenario("bench_sonnet")
    body = sc.body("baseline", {"workload": {"num_requests": 100}})
    m = metrics_of(run_body(body, sc.base_dir), body)
    # every request after the first hits the 200-token prefix's 12 full blocks (192 tokens)
    assert m["prefix_cache_hit_tokens"] == 99 * 192


def test_inference_perf_scenario_sends_as_its_constant_load_does():
    """inference-perf's constant load: int(rate x duration) sends, exponential gaps scaled to span the stage
    (the last send at duration_s less the first gap), no in-flight cap (its workers hold 800)."""
    from twin.workload.arrival_config import PoissonArrivals

    sc = load_scenario("inference_perf_shared_prefix")
    body = sc.body("baseline")
    arr = body.workload.arrivals
    assert isinstance(arr, PoissonArrivals) and arr.scale_to_duration and arr.max_concurrency is None
    assert (arr.rate_per_s, body.workload.duration_s, body.workload.num_requests) == (20, 20, None)
    m = metrics_of(run_body(body, sc.base_dir), body)
    assert m["completed"] == 400 and 19.0 < m["duration"] < 21.0
