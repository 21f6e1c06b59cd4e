"""benchmarks/repeat_scatter.py: the spread of repeated measurements of one configuration (issue 33, round 19)."""

from __future__ import annotations

import math

import pytest

from tests.benchmark_module import load_benchmark
from twin.errors import TwinInputError

rs = load_benchmark("repeat_scatter")
TTFT, TPOT = "mean_ttft_ms", "mean_tpot_ms"


def m(ttft: float, tpot: float) -> dict[str, float]:
    return {TTFT: ttft, TPOT: tpot}


def test_groups_drop_copies_and_singletons():
    items = [("k1", "kimi", m(100.0, 8.0)), ("k1", "kimi", m(100.04, 8.001)),      # one run listed twice
             ("k1", "kimi", m(110.0, 8.2)), ("k2", "kimi", m(50.0, 5.0)),          # k2: a single run
             ("k3", "minimax", m(20.0, 4.0)), ("k3", "minimax", m(20.0, 4.0))]     # k3: copies only
    groups = rs.repeat_groups(items)
    assert list(groups) == [("kimi", "k1")]
    assert groups[("kimi", "k1")] == [m(100.0, 8.0), m(110.0, 8.2)]


def test_pairs_and_scatter_by_hand():
    groups = {("f", "a"): [m(100.0, 8.0), m(110.0, 8.0)], ("f", "b"): [m(200.0, 4.0), m(180.0, 4.0), {TPOT: 4.4}]}
    ratios = rs.pair_log_ratios(groups, TTFT)
    assert ratios == pytest.approx([math.log(100 / 110), math.log(200 / 180)])
    assert len(rs.pair_log_ratios(groups, TPOT)) == 1 + 3          # the third run of b has TPOT only
    s = rs.scatter([math.log(1.1)])
    assert s["pairs"] == 1
    assert s["median_rel_diff"] == pytest.approx(10.0 / 105.0)     # |a - b| / mean(a, b) of 110 and 100
    assert s["half"] == pytest.approx(5.0 / 105.0)
    assert s["one_measurement"] == pytest.approx(math.exp(math.log(1.1) / math.sqrt(2.0)) - 1.0)
    assert rs.scatter([]) is None
    # the median over pairs: 1, 4 and 9 % apart in log -> the 4 % pair's
    assert rs.scatter([0.01, -0.04, 0.09])["median_rel_diff"] == pytest.approx(2 * math.tanh(0.02))


@pytest.mark.parametrize("bad", [0.0, -3.0, math.nan, math.inf])
def test_a_non_positive_or_non_finite_value_is_one_line(bad):
    with pytest.raises(TwinInputError) as exc:
        rs.pair_log_ratios({("kimi", ("Kimi", "b200")): [m(100.0, 8.0), m(bad, 8.0)]}, TTFT)
    assert "not a positive number" in str(exc.value) and "\n" not in str(exc.value)


def test_unknown_key_is_one_line():
    with pytest.raises(TwinInputError, match="key 'bogus': allowed: twin, config"):
        rs.measurements(None, "bogus")


def test_the_ground_truth_repeats_only_where_the_twin_sees_one_configuration():
    """The shipped ground truth: every twin-key group is inside one config-key group (the twin key only adds
    settings), and a twin-key group's runs share the twin's server settings (its predictions are one)."""
    try:
        twin_items = rs.measurements(None, "twin")
    except TwinInputError:
        pytest.skip("no ground truth here")
    config_items = rs.measurements(None, "config")
    twin_groups, config_groups = rs.repeat_groups(twin_items), rs.repeat_groups(config_items)
    assert twin_groups and config_groups
    config_of = {}
    for (tk, fam, mt), (ck, _, _) in zip(twin_items, config_items):
        config_of.setdefault((fam, tk), ck)
        assert tk[:len(ck)] == ck                       # the twin key extends the config key
    assert len(twin_groups) >= 1 and all(k in config_of for k in twin_groups)
