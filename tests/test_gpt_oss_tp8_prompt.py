"""The reading of gpt-oss's held-out H100 prompt step (benchmarks/gpt_oss_tp8_prompt.py; issue 33 round 22): its
exact helpers on made-up values."""

from __future__ import annotations

import pytest
from benchmark_module import load_benchmark

from twin.errors import TwinInputError

script = load_benchmark("gpt_oss_tp8_prompt")


def test_tp_split_is_the_least_squares_line_over_one_over_tp():
    a, b = script.tp_split([(2, 10.0 + 100.0 / 2), (4, 10.0 + 100.0 / 4), (8, 10.0 + 100.0 / 8)])
    assert (a, b) == pytest.approx((10.0, 100.0))
    a, b = script.tp_split([(2, 60.0), (8, 30.0)])                   # two points: the line through them
    assert (a, b) == pytest.approx((20.0, 80.0))
    with pytest.raises(TwinInputError, match="need >= 2 distinct TP sizes"):
        script.tp_split([(8, 1.0), (8, 2.0)])


def test_part_rows_order_by_the_difference_and_keep_the_total_last():
    base = {"allreduce_s": 0.010, "overhead_s": 0.002, "total_s": 0.012}
    other = {"allreduce_s": 0.011, "overhead_s": 0.005, "layer_token_overhead_s": 0.0005, "total_s": 0.0165}
    rows = script.part_rows(base, other)
    assert [r[0] for r in rows] == ["overhead_s", "allreduce_s", "layer_token_overhead_s", "total_s"]
    assert rows[0][1:] == pytest.approx((2.0, 5.0, 3.0)) and rows[-1][1:] == pytest.approx((12.0, 16.5, 4.5))


def test_parse_folds():
    assert script.parse_folds("GPU:H100-SXM,family:gpt-oss") == [("GPU", "H100-SXM"), ("family", "gpt-oss")]
    for bad in ("GPU", "GPU:", ":x", ","):
        with pytest.raises(TwinInputError, match="--folds"):
            script.parse_folds(bad)


def test_a_lone_prompt_is_its_request_path_and_one_step():
    class Cost:
        request_path_s = 0.005

        def step_time_s(self, step):
            return 1e-5 * step.num_new_tokens[0]

    assert script.lone_prompt_ms(Cost(), 1000) == pytest.approx(15.0)
