"""A freshly started server's one-off Triton fused-MoE compiles (twin.cost.cold_compile): which specialisation a
step of M tokens meets, which ones start-up compiled, and the stall a step pays the first time it meets one."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from twin.cost.cold_compile import (FUSED_MOE_CONFIGS, KERNELS_PER_SPECIALISATION, TRITON_COMPILE_S_PER_KERNEL,
                                    ColdCompiles, ColdStartClock, capture_sizes, cold_compiles_for, config_for,
                                    int_class)
from twin.hardware.catalog import resolve_model

TABLE = FUSED_MOE_CONFIGS[("H100-SXM", 8, 7168)]
MIXTRAL = resolve_model("mistralai/Mixtral-8x7B-v0.1")


def test_the_nearest_table_entry_is_taken_the_smaller_on_a_tie():
    cfg = dict(TABLE)
    assert config_for(1, TABLE) == cfg[1]
    assert config_for(384, TABLE) == cfg[256]        # |256 - 384| = |512 - 384|: the first (smaller)
    assert config_for(385, TABLE) == cfg[512]
    assert config_for(768, TABLE) == cfg[512]
    assert config_for(769, TABLE) == cfg[1024]
    assert config_for(9000, TABLE) == cfg[4096]


def test_the_step_dependent_ints_specialise_by_m_mod_8_for_top_2_of_8_experts():
    # num_valid_tokens = 2 M; EM = 2 M + 8 (BLOCK_SIZE_M - 1)
    assert int_class(8, 2, 8, 16) == (True, False)      # 16; 136
    assert int_class(4, 2, 8, 16) == (False, True)      # 8; 128
    assert int_class(3, 2, 8, 16) == (False, False)     # 6; 126
    assert int_class(1028, 2, 8, 128) == (False, True)  # 2056; 3072


def test_vllms_default_capture_sizes():
    assert capture_sizes(256) == [1, 2, 4] + list(range(8, 256, 8)) + [256]
    assert capture_sizes(300)[-4:] == [248, 256, 272, 288]
    assert capture_sizes(4) == [1, 2, 4]


def test_mixtral_tp2_on_h100_can_meet_13_specialisations_start_up_never_compiled():
    c = ColdCompiles(TABLE, top_k=2, num_experts=8, max_num_batched_tokens=2048, largest_graph_tokens=256)
    assert c.num_cold == 13
    assert c.key_of[:257] == [-1] * 257                # graphed: padded to a captured size
    assert c.key_of[264] == -1                          # 256's entry, M % 8 == 0: captured at 256
    assert c.key_of[2048] == -1 and c.key_of[2040] == -1   # the profile run's class at 2048's entry
    assert c.key_of[260] >= 0 and c.key_of[261] >= 0 and c.key_of[260] != c.key_of[261]
    assert c.key_of[261] == c.key_of[263]               # same entry, same class
    assert c.stall_s == pytest.approx(KERNELS_PER_SPECIALISATION * TRITON_COMPILE_S_PER_KERNEL)
    assert c.explain() == {"cold_compile_specialisations": 13.0,
                           "cold_compile_stall_s_per_specialisation": c.stall_s,
                           "cold_compile_largest_graph_tokens": 256.0}


def test_the_largest_graph_is_the_largest_captured_size():
    c = ColdCompiles(TABLE, 2, 8, 2048, 300)
    assert c.largest_graph_tokens == 288 and c.key_of[289] >= 0


def test_a_step_pays_the_compile_once_the_first_time_it_meets_a_specialisation():
    c = ColdCompiles(TABLE, 2, 8, 2048, 256, compile_s_per_kernel=0.5)
    inner = SimpleNamespace(step_time_s=lambda step: 0.01, explain=lambda step: {"x": 1.0}, request_path_s=0.004)
    clock = ColdStartClock(inner, c)
    step = lambda *n: SimpleNamespace(num_new_tokens=list(n))   # noqa: E731
    times = [clock.step_time_s(step(*n)) for n in ((100,), (200, 60), (200, 61), (259,), (2048,), (1, 260))]
    # 260 (M % 8 == 4) and 261 (odd) are two classes of 256's entry; 259 and 1 + 260 = 261 meet the odd one again
    assert times == pytest.approx([0.01, 1.01, 1.01, 0.01, 0.01, 0.01])
    assert clock.num_stalls == 2 and clock.request_path_s == 0.004
    assert clock.explain(step(1))["x"] == 1.0
    fresh = ColdStartClock(inner, c)                     # another server process: compiles again
    assert fresh.step_time_s(step(261)) == pytest.approx(1.01)


def test_only_unquantised_experts_with_a_known_table_are_priced():
    dense = resolve_model("meta-llama/Llama-2-7b-hf")
    assert cold_compiles_for(dense, "H100-SXM", 1, "bf16", 2048, 256) is None
    assert cold_compiles_for(MIXTRAL, "H100-SXM", 2, "fp8", 2048, 256) is None
    assert cold_compiles_for(MIXTRAL, "H100-SXM", 1, "bf16", 2048, 256) is None     # N=14336: no table here
    assert cold_compiles_for(MIXTRAL, "B200", 2, "bf16", 2048, 256) is None
    assert cold_compiles_for(MIXTRAL, "H100-SXM", 2, "bf16", 2048, 256).num_cold == 13


def test_the_decode_fast_path_pays_the_same_stall_as_the_step_by_step_path():
    c = ColdCompiles(TABLE, 2, 8, 2048, 256, compile_s_per_kernel=0.5)
    inner = SimpleNamespace(step_time_s=lambda step: 0.01, explain=lambda step: {},
                            step_time_from_sums=lambda n_seqs, tokens, *rest: 0.01,
                            decode_step_times_s=lambda n_seqs, context, num_steps: [0.01] * num_steps)
    clock = ColdStartClock(inner, c)
    assert clock.step_time_from_sums(200, 261, 0, 0, 0, 0) == pytest.approx(1.01)       # a mixed step: its tokens
    assert clock.step_time_from_sums(261, 261, 0, 0, 261, 0) == pytest.approx(0.01)     # met already
    assert clock.decode_step_times_s(100, 0, 3) == pytest.approx([0.01] * 3)           # under the graphs
    assert clock.decode_step_times_s(260, 0, 3) == pytest.approx([1.01, 0.01, 0.01])   # only the first pays
    assert clock.decode_step_times_s(260, 0, 2) == pytest.approx([0.01, 0.01])
    assert clock.decode_step_times_s(264, 0, 0) == [] and clock.num_stalls == 2          # no step: nothing met
    bare = ColdStartClock(SimpleNamespace(step_time_s=lambda step: 0.01), c)
    assert not hasattr(bare, "step_time_from_sums") and not hasattr(bare, "decode_step_times_s")
