"""benchmarks/fold_cost_models.py's cost lines (issue 33, round 17): the step times at its fixed shapes, exact."""

import pytest
from benchmark_module import load_benchmark

from twin.cost.roofline import RooflineCostModel


def test_cost_lines_are_the_models_step_times_at_the_shapes_then_a_decode_run_then_the_path():
    bench = load_benchmark("fold_cost_models")
    model = RooflineCostModel("llama-3.1-70b", "H100-SXM", 4, "fp8", "fp8", request_path_s=0.005)
    lines = bench.cost_lines(model)
    shapes = [model.step_time_from_sums(*s) for s in bench.SHAPES]
    assert lines == [repr(t) for t in shapes + model.decode_step_times_s(*bench.DECODE_RUN)] + ["0.005"]
    assert len(lines) == len(bench.SHAPES) + bench.DECODE_RUN[2] + 1


def test_a_bad_silicon_every_is_one_line():
    with pytest.raises(SystemExit):
        load_benchmark("fold_cost_models").main(["--silicon-every", "0"])
