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


def test_a_missing_ground_truth_is_one_line(tmp_path, capsys):
    bench = load_benchmark("fold_cost_models")
    with pytest.raises(SystemExit) as exc:
        bench.run_script(lambda: bench.main(["--ground-truth", str(tmp_path / "none")]))
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip() == (f"error: {tmp_path / 'none' / 'h100-vllm-inference-perf'}: no such "
                                               "folder (the inference-perf runs; --ground-truth names their parent)")


def test_simulation_options_are_checked_by_name():
    from twin.errors import TwinInputError
    from twin.fitting.fit import check_simulation_options, simulate_cases
    check_simulation_options(None, 1)
    check_simulation_options(60.0, 4)
    for sim_s, workers, message in ((0.0, 1, "--sim-s 0.0: must be a positive"), (float("nan"), 1, "--sim-s nan"),
                                    (float("inf"), 1, "--sim-s inf"), (True, 1, "--sim-s True"),
                                    (60.0, 0, "--workers 0: must be a whole"),
                                    (60.0, True, "--workers True"), (60.0, 1.5, "--workers 1.5")):
        with pytest.raises(TwinInputError, match=message):
            check_simulation_options(sim_s, workers)
    with pytest.raises(TwinInputError, match="max_sim_s -1: must be a positive finite number of seconds"):
        simulate_cases([], {}, max_sim_s=-1)
