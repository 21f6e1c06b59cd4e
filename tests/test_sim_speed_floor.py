"""The per-request floor that ``benchmarks/sim_speed.py --per-request`` prints against the 50x target."""

import importlib.util
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "sim_speed.py"


def _sim_speed():
    spec = importlib.util.spec_from_file_location("_twin_bench_sim_speed", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_floor_times_three_pieces_on_requests_the_scheduler_admitted_whole():
    floor = _sim_speed().per_request_floor(200)   # raises unless every prompt was admitted whole
    assert list(floor) == ["request and record", "one clock event", "admission and release"]
    assert all(us > 0 for us in floor.values())
