"""benchmarks/request_path_readings.py: the light-load intercepts by unit (exact values on hand-made rows)."""

import math

from tests.benchmark_module import load_benchmark

rp = load_benchmark("request_path_readings")


def _row(tp, gap, isl=1024, graphed=True, family="gpt-oss", gpu="B200"):
    return {"gpu": gpu, "family": family, "format": "nvfp4", "release": "0.15.1", "tp": tp, "isl": isl,
            "gap": gap, "graphed": graphed}


def test_the_tp_split_puts_work_tp_divides_in_c_and_the_tp_flat_rest_in_a():
    # gap = 2 + 16 / TP exactly: a = 2 ms, c = 16 ms
    a, c = rp.ac([_row(t, 2.0 + 16.0 / t) for t in (1, 2, 4, 8)])
    assert math.isclose(a, 2.0, abs_tol=1e-9) and math.isclose(c, 16.0, abs_tol=1e-9)
    assert rp.ac([_row(4, 1.0), _row(4, 3.0)]) is None          # one TP size: no split


def test_the_per_request_reading_keeps_graphed_1k_rows_at_tp_4_and_above_only():
    rows = [_row(4, 1.0), _row(8, 3.0), _row(2, 9.0), _row(8, 50.0, graphed=False), _row(8, 40.0, isl=8192),
            _row(4, 12.0, family="minimax")]
    got = rp.per_request(rows)
    assert got == {("B200", "gpt-oss", "nvfp4", "0.15.1"): [1.0, 3.0],
                   ("B200", "minimax", "nvfp4", "0.15.1"): [12.0]}


def test_the_prompt_token_slope_is_the_8k_minus_1k_gap_per_1000_extra_mean_tokens():
    rows = [_row(4, 2.0), _row(4, 4.0), _row(4, 3.0 + 6.4512, isl=8192), _row(8, 1.0)]
    got = rp.isl_slopes(rows)
    # median 1k gap 3 ms, 8k 9.4512 ms; extra mean tokens (8192 - 1024) x 0.9 = 6,451.2: 1 ms per 1k tokens
    assert list(got) == [("B200", "gpt-oss", "nvfp4", "0.15.1", 4)]
    g1, g8, slope = got[("B200", "gpt-oss", "nvfp4", "0.15.1", 4)]
    assert (g1, g8) == (3.0, 9.4512) and math.isclose(slope, 1.0, rel_tol=1e-12)
