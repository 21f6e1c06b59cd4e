"""benchmarks/hopper_eager_floor.py: the variant syntax and the scoped parameters it simulates (issue 33, round 14)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import hopper_eager_floor as hef  # noqa: E402

from twin.fitting.scoped import params_for  # noqa: E402


def test_parse_variant_in_seconds():
    assert hef.parse_variant("blackwell=0.84/1.15") == ("blackwell", pytest.approx(0.84e-3), pytest.approx(1.15e-3))
    assert hef.parse_variant(" reading =0.92/0") == ("reading", pytest.approx(0.92e-3), 0.0)


@pytest.mark.parametrize("bad", ["0.84/1.15", "x=0.84", "x=a/1", "=0.8/0", "x=-1/0", "x=0.5/200"])
def test_parse_variant_rejects_bad_text_in_one_line(bad):
    with pytest.raises(SystemExit, match="--variant"):
        hef.parse_variant(bad)


def test_hopper_params_move_hopper_only():
    base = {"eager_layer_host_s@blackwell": 0.84e-3, "memory_efficiency": 0.9}
    params = hef.hopper_params(base, 0.5e-3, 0.2e-3)
    assert base == {"eager_layer_host_s@blackwell": 0.84e-3, "memory_efficiency": 0.9}      # not mutated

    class Dep:
        def __init__(self, gpu):
            self.gpu = gpu
    h100 = params_for(params, Dep("H100-SXM"))
    b200 = params_for(params, Dep("B200"))
    assert (h100["eager_layer_host_s"], h100["eager_moe_layer_host_s"]) == (0.5e-3, 0.2e-3)
    assert b200["eager_layer_host_s"] == 0.84e-3 and "eager_moe_layer_host_s" not in b200
