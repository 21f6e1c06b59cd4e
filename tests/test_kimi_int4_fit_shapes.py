"""benchmarks/kimi_int4_fit.py --decode-on: several ISL/OSL shapes read jointly (issue 33, round 16)."""

import pytest
from benchmark_module import load_benchmark

from twin.errors import TwinInputError

fit = load_benchmark("kimi_int4_fit")


def test_the_shapes_parse_and_both_train(monkeypatch):
    assert fit.parse_shapes("1024/1024, 1024/8192") == [(1024, 1024), (1024, 8192)]
    monkeypatch.setattr(fit, "DECODE_SHAPES", [(1024, 1024), (1024, 8192)])
    assert fit.is_train({"isl": 1024, "osl": 8192, "conc": 64}) and fit.is_train({"isl": 1024, "osl": 1024, "conc": 8})
    assert fit.is_train({"isl": 8192, "osl": 1024, "conc": 4}) and not fit.is_train({"isl": 8192, "osl": 1024, "conc": 8})


@pytest.mark.parametrize("text", ["", "1024", "1024/x", "1024x8192"])
def test_a_malformed_shape_is_a_one_line_error(text):
    with pytest.raises(TwinInputError, match="--decode-on"):
        fit.parse_shapes(text)
