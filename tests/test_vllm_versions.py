"""vLLM's semantics by release (twin.core.vllm_versions): each version-dependent behaviour, exactly and in both
settings, on vLLM's small test pool (block_size 16, 11 blocks = null block + 10 usable); and the releases'
defaults as a scenario resolves them."""

from __future__ import annotations

import pytest

from core_helpers import block_ids, free_ids, ids, make_sched, req, step
from twin.core.request import RequestStatus
from twin.core.vllm_versions import (BEHAVIOURS, NEWEST_VLLM_VERSION, VERSIONED_KNOBS, VLLM_RELEASES,
                                     default_block_size, default_limits, has_behaviour, parse_vllm_version,
                                     vllm_release)
from twin.errors import TwinInputError
from twin.scenario import Scenario
from twin.sim.deployment import resolve_scheduler_config
from twin.hardware.catalog import resolve_gpu, resolve_model
from twin.spec_decode import AcceptanceModel, NgramDrafter, Speculator


# ---- admission: the whole prompt must fit the free blocks (scheduler_reserve_full_isl) -------------------
def _long_prompt_behind_short(reserve_full_isl: bool):
    s = make_sched(max_num_batched_tokens=40, max_model_len=200, scheduler_reserve_full_isl=reserve_full_isl)
    s.add_request(req("a", 32, out=50))
    s.add_request(req("b", 150, out=5))  # 10 blocks: more than the 8 free once a holds 2
    return s


def test_first_chunk_admission_takes_a_prompt_that_cannot_fit_whole():
    s = _long_prompt_behind_short(False)
    out, _ = step(s)
    assert ids(out.requests) == ["a", "b"] and out.num_new_tokens == [32, 8]
    assert block_ids(s, "a") == [1, 2] and block_ids(s, "b") == [3]
    assert free_ids(s) == [4, 5, 6, 7, 8, 9, 10]
    out, _ = step(s)
    assert ids(out.requests) == ["a", "b"] and out.num_new_tokens == [1, 39]
    assert block_ids(s, "a") == [1, 2, 4] and block_ids(s, "b") == [3, 5, 6]


def test_full_isl_admission_waits_until_the_whole_prompt_fits():
    s = _long_prompt_behind_short(True)
    out, _ = step(s)
    assert ids(out.requests) == ["a"] and out.num_new_tokens == [32]
    assert ids(s.waiting) == ["b"] and s.waiting.peek().status == RequestStatus.WAITING
    assert block_ids(s, "a") == [1, 2] and block_ids(s, "b") == []
    assert free_ids(s) == [3, 4, 5, 6, 7, 8, 9, 10]
    out, _ = step(s)
    assert ids(out.requests) == ["a"] and out.num_new_tokens == [1]
    assert block_ids(s, "a") == [1, 2, 3] and free_ids(s) == [4, 5, 6, 7, 8, 9, 10]


def test_full_isl_admission_still_allocates_only_the_chunk():
    s = make_sched(max_num_batched_tokens=40, max_model_len=200, scheduler_reserve_full_isl=True)
    s.add_request(req("a", 32, out=50))
    s.add_request(req("b", 100, out=5))  # 7 blocks fit the 8 free
    out, _ = step(s)
    assert ids(out.requests) == ["a", "b"] and out.num_new_tokens == [32, 8]
    assert block_ids(s, "b") == [3]
    assert free_ids(s) == [4, 5, 6, 7, 8, 9, 10]


# ---- free-queue order of freed blocks (free_unhashed_blocks_to_head) --------------------------------------
@pytest.mark.parametrize("to_head, after_free, next_blocks", [
    # blocks 1 and 2 are full and hashed, 3 holds 40 - 32 = 8 tokens and no hash; released last first (3 2 1)
    (False, [4, 5, 6, 7, 8, 9, 10, 3, 2, 1], [4, 5, 6]),
    (True, [3, 4, 5, 6, 7, 8, 9, 10, 2, 1], [3, 4, 5]),
])
def test_freed_blocks_order_with_caching(to_head, after_free, next_blocks):
    s = make_sched(free_unhashed_blocks_to_head=to_head)
    s.add_request(req("a", 40, out=1))
    _, res = step(s)
    assert ids(res.finished) == ["a"]
    assert free_ids(s) == after_free
    s.add_request(req("b", 40, out=5))
    step(s)
    assert block_ids(s, "b") == next_blocks


@pytest.mark.parametrize("to_head, after_free, next_blocks", [
    (False, [4, 5, 6, 7, 8, 9, 10, 3, 2, 1], [4, 5, 6]),
    # caching off: no block has a hash, so the whole release (3 2 1) goes to the head, in that order
    (True, [3, 2, 1, 4, 5, 6, 7, 8, 9, 10], [3, 2, 1]),
])
def test_freed_blocks_order_without_caching(to_head, after_free, next_blocks):
    s = make_sched(enable_prefix_caching=False, free_unhashed_blocks_to_head=to_head)
    s.add_request(req("a", 40, out=1))
    step(s)
    assert free_ids(s) == after_free
    s.add_request(req("b", 40, out=5))
    step(s)
    assert block_ids(s, "b") == next_blocks


# ---- prefix-cache counters: every lookup vs once at admission (prefix_cache_stats_at_admission) ------------
@pytest.mark.parametrize("at_admission, lookups, queries, hits", [
    # a (150 tokens, no hit) then b's lookup at steps 1, 2 (no free block: retried) and 3 (admitted), 32 hit each
    (False, [2, 3, 4], [190, 230, 270], [32, 64, 96]),
    (True, [1, 1, 2], [150, 150, 190], [0, 0, 32]),
])
def test_prefix_cache_counters(at_admission, lookups, queries, hits):
    s = make_sched(max_num_batched_tokens=160, max_model_len=200, prefix_cache_stats_at_admission=at_admission)
    s.add_request(req("a", 150, out=2, prefix=("sys", 32)))
    s.add_request(req("b", 40, out=1, prefix=("sys", 32)))
    kv = s.kv_cache_manager
    seen = []
    for _ in range(3):
        out, _ = step(s)
        seen.append((ids(out.requests), kv.num_lookups, kv.num_query_tokens, kv.num_hit_tokens))
    assert [r for r, *_ in seen] == [["a"], ["a"], ["b"]]
    assert [x[1] for x in seen] == lookups
    assert [x[2] for x in seen] == queries
    assert [x[3] for x in seen] == hits


# ---- the release table and the scenario's resolution -----------------------------------------------------
def test_release_lookup_and_patch_levels():
    assert vllm_release("0.19.1") is VLLM_RELEASES["0.19"]
    assert vllm_release("v0.28.0") is VLLM_RELEASES["0.28"]
    for bad in ("0.7.3", "latest", "0.19.x", "0.2", "nightly build"):
        with pytest.raises(ValueError, match="not a modelled vLLM release"):
            vllm_release(bad)


@pytest.mark.parametrize("version, row", [
    ("0.10.2", "0.11"), ("0.9", "0.11"), ("0.13.0", "0.11"), ("0.15.1", "0.14"), ("0.16.0", "0.14"),
    ("0.17.0", "0.14"), ("0.18.0", "0.14"), ("v0.19.0-cu130", "0.19"), ("0.19.0", "0.19"), ("0.20.1rc1", "0.19"),
    ("0.27.2", "0.19"), ("0.28.1", "0.28"), ("nightly", "0.28"), ("nightly-5b8c30d62b754b57", "0.28"),
])
def test_any_release_string_takes_every_behaviour_of_its_release(version, row):
    assert vllm_release(version) == VLLM_RELEASES[row]
    key = parse_vllm_version(version)
    for behaviour, since in BEHAVIOURS.items():
        assert has_behaviour(version, behaviour) is (key >= since)


def test_default_block_size_by_backend():
    # 16 unless an MLA backend forces its own: FlashMLA (Hopper) 64; Blackwell CUTLASS MLA 128, FlashInfer MLA 64
    assert default_block_size("0.19", False, False, True) == 16
    assert default_block_size("0.19", True, False, False) == 64
    assert default_block_size("0.11.2", True, False, True) == 128
    assert default_block_size("0.12.0", True, False, True) == 64
    assert default_block_size("0.11.0", True, True, True) == 64       # sparse MLA (DeepSeek-V3.2)


@pytest.mark.parametrize("version, large, entrypoint, limits", [
    ("0.19", True, "serve", (8192, 1024)), ("0.28", True, "serve", (16384, 1024)),
    ("0.19", True, "llm", (16384, 1024)), ("0.28", True, "llm", (16384, 1024)),
    ("0.28", False, "serve", (2048, 256)), ("0.11", False, "llm", (8192, 256)),
])
def test_default_limits(version, large, entrypoint, limits):
    assert default_limits(version, large, entrypoint) == limits


def _sched_config(server: dict, gpu: str = "H100-SXM", spec: dict | None = None):
    data = {"name": "v", "deployment": {"gpu": gpu, "model": "llama-3.1-8b"}, "server": server,
            "workload": {"arrivals": {"process": "poisson", "rate_per_s": 1}, "duration_s": 10,
                         "classes": [{"name": "c", "share": 1.0, "prompt": {"suffix_tokens": {"fixed": 100}},
                                      "output_tokens": {"fixed": 10}}]}}
    if spec is not None:
        data["speculative_decoding"] = spec
    body = Scenario(data).body()
    return resolve_scheduler_config(body, resolve_model("llama-3.1-8b"), resolve_gpu(gpu))


def test_explicit_512_token_budget_on_h100_clamps_max_num_seqs():
    sc = _sched_config({"max_num_batched_tokens": 512})
    assert (sc.max_num_batched_tokens, sc.max_num_seqs) == (512, 512)
    sc = _sched_config({"max_num_batched_tokens": 512}, gpu="A100-SXM-80GB")
    assert (sc.max_num_batched_tokens, sc.max_num_seqs) == (512, 256)
    with pytest.raises(TwinInputError, match="max_num_batched_tokens \\(512\\) must be >= max_num_seqs \\(1024\\)"):
        _sched_config({"max_num_batched_tokens": 512, "max_num_seqs": 1024})


def test_scenario_limits_follow_version_and_entrypoint():
    assert _sched_config({}).max_num_batched_tokens == 16384
    assert _sched_config({"vllm_version": "0.19"}).max_num_batched_tokens == 8192
    assert _sched_config({"vllm_version": 0.19, "entrypoint": "llm"}).max_num_batched_tokens == 16384
    assert _sched_config({"vllm_version": "0.28"}, gpu="A100-SXM-80GB").max_num_batched_tokens == 2048


@pytest.mark.parametrize("version", sorted(VLLM_RELEASES))
def test_versioned_knobs_resolve_from_the_release_and_yield_to_explicit_ones(version):
    release = VLLM_RELEASES[version]
    sc = _sched_config({"vllm_version": version})
    assert all(getattr(sc, k) == getattr(release, k) for k in VERSIONED_KNOBS)
    flipped = {k: not getattr(release, k) for k in VERSIONED_KNOBS}
    sc = _sched_config({"vllm_version": version, **flipped})
    assert all(getattr(sc, k) == v for k, v in flipped.items())


def test_release_table_changes_in_order():
    assert NEWEST_VLLM_VERSION == max(VLLM_RELEASES, key=lambda v: tuple(map(int, v.split("."))))
    old, new = VLLM_RELEASES["0.11"], VLLM_RELEASES[NEWEST_VLLM_VERSION]
    assert not any(getattr(old, k) for k in VERSIONED_KNOBS)
    assert all(getattr(new, k) for k in VERSIONED_KNOBS)


def test_async_default_skips_unsupported_speculative_methods():
    eagle = {"method": "eagle", "num_speculative_tokens": 3, "acceptance": {"c": {"rate": 0.7}}}
    ngram = {"method": "ngram", "num_speculative_tokens": 3, "acceptance": {"c": {"rate": 0.7}}}
    assert _sched_config({}, spec=eagle).async_scheduling is True
    assert _sched_config({}, spec=ngram).async_scheduling is False
    assert _sched_config({"async_scheduling": True}, spec=ngram).async_scheduling is True
    assert _sched_config({"vllm_version": "0.11"}, spec=eagle).async_scheduling is False


@pytest.mark.parametrize("value", ["0.7", "0.2", "latest"])
def test_unknown_version_is_one_line_naming_the_field(value):
    with pytest.raises(TwinInputError) as err:
        _sched_config({"vllm_version": value})
    msg = str(err.value)
    assert "\n" not in msg and "server.vllm_version" in msg and "releases from 0.8" in msg and "nightly" in msg


# ---- a fully cached prompt's first step padded to 1 + k (pad_spec_decode_first_step) ----------------------
def _decoding_a_then_cached_b(pad: bool, **overrides):
    cfg = dict(num_speculative_tokens=3, pad_spec_decode_first_step=pad)
    cfg.update(overrides)
    s = make_sched(**cfg)
    s.add_request(req("a", 40, out=10, prefix=("sys", 32)))
    a = s.waiting.peek()
    while a.num_output_tokens == 0:
        step(s)
    a.num_spec_tokens = 3  # the drafter proposed 3 tokens for a's next step
    s.add_request(req("b", 33, out=10, prefix=("sys", 32)))  # all but its last token cached
    return s


@pytest.mark.parametrize("pad, new_tokens, spec_tokens, placeholders", [
    (False, [4, 1], [3, 0], []),
    (True, [4, 4], [3, 3], [1]),
])
def test_fully_cached_prompt_first_step(pad, new_tokens, spec_tokens, placeholders):
    s = _decoding_a_then_cached_b(pad)
    out = s.schedule()
    assert ids(out.requests) == ["a", "b"]
    assert out.num_new_tokens == new_tokens and out.num_spec_tokens == spec_tokens
    assert out.num_computed_before == [40, 32] and out.spec_placeholders == placeholders
    assert block_ids(s, "b") == [1, 2, 4]
    res = s.update_from_output(out, [3, 1])  # a: 2 of 3 drafts accepted; b: its padding is never accepted
    assert res.num_emitted == [3, 1] and res.num_accepted_spec == [2, 0]
    b = out.requests[1]
    assert (b.num_computed_tokens, b.num_output_tokens, b.num_spec_tokens) == (33, 1, 0)


def test_no_padding_beside_a_prefill_chunk():
    s = make_sched(num_speculative_tokens=3, pad_spec_decode_first_step=True, max_num_batched_tokens=60)
    s.add_request(req("p", 90, out=5))
    step(s)  # p prefills 60 of its 90 tokens: its next step is still a prefill chunk
    s.add_request(req("q", 33, out=5, segments=[(("prompt", "p"), 32), (("own", "q"), 1)]))
    out = s.schedule()
    assert ids(out.requests) == ["p", "q"] and out.num_new_tokens == [30, 1]
    assert out.num_computed_before == [60, 32] and out.spec_placeholders == []


@pytest.mark.parametrize("pad, scheduled, new_tokens", [(True, ["a"], [4]), (False, ["a", "b"], [4, 1])])
def test_padding_that_does_not_fit_the_budget_waits(pad, scheduled, new_tokens):
    s = _decoding_a_then_cached_b(pad, max_num_seqs=2, max_num_batched_tokens=7)  # 3 tokens left after a's 4
    out = s.schedule()
    assert ids(out.requests) == scheduled and out.num_new_tokens == new_tokens


def test_speculator_never_accepts_nor_counts_padding_drafts():
    sp = Speculator(3, AcceptanceModel.iid(1.0, 3), NgramDrafter(0.0), seed=0)  # every real draft accepted
    s = _decoding_a_then_cached_b(True)
    out = s.schedule()
    assert out.spec_placeholders == [1]
    assert sp.num_generated(out) == [4, 1]
    assert (sp.stats.num_verifications, sp.stats.num_draft_tokens, sp.stats.num_accepted_tokens) == (1, 3, 3)
