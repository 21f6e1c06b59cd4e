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


def test_mooncake_figures_skip_with_one_line_without_the_traces_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TWIN_TRACES_DIR", str(tmp_path))
    assert _sim_speed().mooncake(1) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out == [f"mooncake       skipped: trace {tmp_path / 'mooncake_arxiv_trace_first1000.jsonl'} not found "
                   f"(set TWIN_TRACES_DIR to the traces folder)"]


def test_mooncake_figures_per_request_token_and_step(capsys):
    from twin.workload.paths import traces_dir
    if not (traces_dir() / "mooncake_arxiv_trace_first1000.jsonl").is_file():
        import pytest
        pytest.skip("traces folder absent")
    assert _sim_speed().mooncake(1) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("mooncake       1,000 requests of mooncake_arxiv_trace_first1000.jsonl on "
                               "llama-3.1-8b on H100-SXM: 1,000 completed, ")
    assert " us per request, " in lines[1] and " us per output token, " in lines[1] and " us per engine step" in lines[1]
