"""benchmarks/layer_token_owner.py's partition test (issue 33, round 16): a serving-stack property owns the per-token
prompt cost only if the values it takes on the groups that carry the cost and on those that do not are disjoint."""

from __future__ import annotations

import pytest

from tests.benchmark_module import load_benchmark
from twin.errors import TwinInputError

lo = load_benchmark("layer_token_owner")


def _facts(**groups):
    return {name: (a_us, props) for name, (a_us, props) in groups.items()}


def test_a_property_that_separates_the_groups_owns_the_term():
    facts = _facts(b=(0.2, {"attention": "FLASHINFER"}), c=(0.19, {"attention": "FLASHINFER_MLA / FLASHINFER"}),
                   h=(0.016, {"attention": "FLASH_ATTN"}))
    owns, high, low = lo.partitions(facts, "attention")
    assert owns and high == {"FLASHINFER", "FLASHINFER_MLA"} and low == {"FLASH_ATTN"}


def test_a_value_on_both_sides_refutes_it():
    facts = _facts(b=(0.2, {"kv": "fp8"}), g=(0.195, {"kv": "auto"}), h=(0.016, {"kv": "fp8"}))
    owns, high, low = lo.partitions(facts, "kv")
    assert not owns and high & low == {"fp8"}


def test_one_sided_groups_own_nothing_and_missing_facts_are_errors():
    assert not lo.partitions(_facts(b=(0.2, {"kv": "fp8"})), "kv")[0]                # no low group
    assert not lo.partitions(_facts(b=(0.2, {"kv": "fp8"})), "kv", high_us=0.3)[0]   # no high group
    with pytest.raises(TwinInputError):
        lo.partitions(_facts(b=(0.2, {"kv": "fp8"})), "attention")
    with pytest.raises(TwinInputError):
        lo.partitions({}, "kv")


def test_the_stated_facts_name_no_single_owner():
    # every candidate of the brief (attention backend, KV dtype, CUDA-graph coverage, fused all-reduce, release,
    # dense / MoE, activation format, generation) leaves a value on both sides
    props = next(iter(lo.OWNER_FACTS.values()))[1]
    assert all(set(p) == set(props) for _, p in lo.OWNER_FACTS.values())
    assert not any(lo.partitions(lo.OWNER_FACTS, prop)[0] for prop in props)
    # the fact that refutes the attention backend: H100 gpt-oss runs FLASH_ATTN (FA3 takes its sinks), as H100 Llama
    a_gptoss, gptoss = lo.OWNER_FACTS["H100 gpt-oss-120b MXFP4 Marlin (0.18)"]
    a_llama, llama = lo.OWNER_FACTS["H100 Llama-3.1-70B FP8 (0.10.2)"]
    assert a_gptoss > lo.HIGH_US > a_llama and gptoss["attention"] == llama["attention"] == "FLASH_ATTN"
