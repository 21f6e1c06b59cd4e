"""The calibration pipeline on the real (tiny, CPU) engine: the serve-steps loop makes the twin's batches,
the profiler's sweeps and budget, ``twin calibrate`` end to end through click, and (marked ``cuda``) the GPU
run on a GPU (its dry run on the CPU is tests/test_gpu_run.py)."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from click.testing import CliRunner  # noqa: E402

from calibration.engine import ModelRunner  # noqa: E402
from calibration.model import ModelShape  # noqa: E402
from calibration.profiler import profile_engine  # noqa: E402
from calibration.sweep_plan import Point, SweepPlan, apply_overrides, default_plan, plan_points  # noqa: E402
from calibration.serve_steps import serve  # noqa: E402
from twin.cli.main import main  # noqa: E402
from twin.cost.constant import ConstantCostModel  # noqa: E402
from twin.cost.profile import ProfileCostModel  # noqa: E402
from twin.results.records import STEP_COLUMN_NAMES  # noqa: E402
from twin.core.scheduler_config import SchedulerConfig  # noqa: E402
from twin.core.schedulers import make_scheduler  # noqa: E402
from twin.sim.simulate import simulate  # noqa: E402
from twin.workload.spec import RequestSpec  # noqa: E402

TINY = ModelShape.tiny()
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

SMALL_PLAN = {
    "prefill_chunks": [8, 32, 96], "prefill_contexts": [0, 48], "decode_batches": [1, 4, 8],
    "decode_contexts": [1, 40, 160], "mixed": [[4, 40, 24, 0]], "num_random": 6, "random_max_batch": 8,
    "random_max_context": 160, "random_max_chunk": 48, "warmup": 1, "repeats": 2, "interleave": 4,
    "replay_requests": 5, "replay_prompt": [8, 48], "replay_output": [2, 5], "replay_shared_prefix": 16,
    "replay_max_num_seqs": 4, "replay_max_batched_tokens": 48, "replay_repeats": 1, "min_points": 18,
    "fill_budget": False,
}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """One torch thread: steadier and much faster than two on a shared two-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def specs(n: int = 10) -> list[RequestSpec]:
    """Requests arriving together, half sharing a 32-token system prompt (prefix-cache hits)."""
    out = []
    for i in range(n):
        segs = ((("sys", 0), 32),) if i % 2 == 0 else ()
        suffix = 5 + (i * 7) % 40
        segs = segs + ((("p", i), suffix),)
        out.append(RequestSpec(i, 0.0, sum(k for _, k in segs), 12 + 3 * (i % 5), segs))
    return out


CONFIG = SchedulerConfig(max_num_seqs=4, max_num_batched_tokens=48, max_model_len=256, block_size=16)
NUM_BLOCKS = 12   # small enough that the running set preempts


def twin_batches(requests, config, num_blocks):
    """The scheduler driven the twin's way: no engine, one token per finished chunk."""
    sched = make_scheduler(config, num_blocks)
    for spec in requests:
        sched.add_request(spec.make_request())
    batches = []
    while sched.has_unfinished_requests():
        out = sched.schedule(0.0)
        batches.append([(r.request_id, n, c) for r, n, c in zip(out.requests, out.num_new_tokens,
                                                                 out.num_computed_before)])
        sched.update_from_output(out)
    return batches, sched.num_preemptions


def test_serve_steps_makes_the_twins_batches():
    runner = ModelRunner(TINY, "cpu", torch.float32, num_blocks=NUM_BLOCKS, block_size=16, seed=0)
    res = serve(runner, specs(), CONFIG, honor_arrivals=False)
    want, preemptions = twin_batches(specs(), CONFIG, NUM_BLOCKS)
    assert res.batches == want
    assert preemptions > 0 and res.num_preemptions == preemptions       # the case exercises preemption
    assert res.prefix_cache_hit_tokens > 0
    assert all(r.status == "finished" for r in res.requests)
    assert {r.request_id: r.num_output_tokens for r in res.requests} == {s.request_id: s.output_tokens
                                                                         for s in specs()}
    # one sample per step, with the step's full shape and a measured time
    assert len(res.samples) == len(res.steps) == len(want)
    for sample, batch in zip(res.samples, want):
        assert sample.num_new_tokens == [n for _, n, _ in batch]
        assert sample.num_computed_before == [c for _, _, c in batch]
        assert sample.median_s > 0
    # the timeline is the measured one
    durations = res.steps.column("duration_s")
    assert res.end_s == pytest.approx(durations.sum())


def test_serve_steps_step_records_equal_the_simulated_ones():
    """Same requests through the SimPy twin (a constant cost model, arrivals at 0): every StepRecords column
    but the times is identical, because both drive the same scheduler (the twin's decode fast path too)."""
    runner = ModelRunner(TINY, "cpu", torch.float32, num_blocks=NUM_BLOCKS, block_size=16, seed=0)
    res = serve(runner, specs(), CONFIG, honor_arrivals=False)
    sim = simulate(specs(), lambda i: make_scheduler(CONFIG, NUM_BLOCKS), lambda i: ConstantCostModel(0.01))
    for name in STEP_COLUMN_NAMES:
        if name in ("start_s", "duration_s"):
            continue
        assert res.steps.column(name).tolist() == sim.steps.column(name).tolist(), name
    sim_req = {r.request_id: (r.num_output_tokens, r.num_cached_tokens, r.num_preemptions) for r in sim.requests}
    assert {r.request_id: (r.num_output_tokens, r.num_cached_tokens, r.num_preemptions)
            for r in res.requests} == sim_req
    metrics = res.to_sim_result().metrics()
    assert metrics["completed"] == len(specs())


def test_serve_steps_honours_arrivals_on_the_measured_clock():
    runner = ModelRunner(TINY, "cpu", torch.float32, num_blocks=64, block_size=16, seed=0)
    late = [RequestSpec(0, 0.0, 20, 3, ((("a", 0), 20),)), RequestSpec(1, 50.0, 20, 3, ((("b", 1), 20),))]
    res = serve(runner, late, CONFIG)
    starts = res.steps.column("start_s")
    assert starts[0] == 0.0 and 50.0 in starts.tolist()       # idle until the second arrival
    r1 = next(r for r in res.requests if r.request_id == 1)
    assert r1.first_token_s > 50.0 and r1.status == "finished"


def test_plan_points_are_coarse_to_fine_and_fit_the_pool():
    plan = default_plan("cpu", quick=True)
    pts = plan_points(plan)
    decode = [p for p in pts if p.kind == "decode"]
    # the first decode points are the grid's corners
    corners = {(len(p.n), p.c[0]) for p in decode[:4]}
    assert corners == {(1, 1), (1, 1024), (48, 1), (48, 1024)}
    assert {p.kind for p in pts[:4]} == {"decode", "prefill", "mixed", "random"}
    small = apply_overrides(plan, {"max_pool_tokens": 4096})
    assert all(p.blocks(16) * 16 <= 4096 for p in plan_points(small))
    with pytest.raises(ValueError, match="unknown field 'colour'"):
        apply_overrides(plan, {"colour": 1})


def test_profile_engine_respects_the_budget_and_records_everything():
    plan = apply_overrides(default_plan("cpu", quick=True), dict(SMALL_PLAN, min_points=6))
    runner = ModelRunner(TINY, "cpu", torch.float32, num_blocks=200, block_size=16, seed=0)
    run = profile_engine(runner, plan, budget_s=0.05, replay=False)   # spent by the warm-up alone
    assert 6 <= run.points_measured < run.points_planned
    assert any("sweep points" in n for n in run.notes)
    env = run.environment
    for key in ("device_name", "torch", "dtype", "threads", "model_shape", "cuda", "catalog_device"):
        assert key in env
    assert env["dtype"] == "fp32" and env["catalog_device"] == "CPU"
    assert all(len(s.times_s) >= 1 and s.median_s > 0 for s in run.samples)


def test_profile_engine_with_replay_covers_every_kind():
    plan = apply_overrides(SweepPlan([], [], [], [], []), dict(SMALL_PLAN))
    runner = ModelRunner(TINY, "cpu", torch.float32, num_blocks=200, block_size=16, seed=0)
    run = profile_engine(runner, plan, budget_s=60.0)
    kinds = {s.kind for s in run.samples}
    assert kinds == {"prefill", "decode", "mixed", "random", "replay"}
    assert run.replay["num_steps"] > 0 and not run.replay["stopped_early"]
    assert set(run.replay["step_records"]) == set(STEP_COLUMN_NAMES)
    assert len(run.canary) >= 2


def test_left_over_budget_goes_to_more_runs_of_the_points():
    plan = apply_overrides(SweepPlan([], [], [], [], []), dict(SMALL_PLAN, num_random=0, mixed=[],
                                                                  prefill_chunks=[8], prefill_contexts=[0],
                                                                  decode_batches=[1], decode_contexts=[1, 40],
                                                                  replay_requests=3, fill_budget=True))
    runner = ModelRunner(TINY, "cpu", torch.float32, num_blocks=200, block_size=16, seed=0)
    run = profile_engine(runner, plan, budget_s=2.5)
    assert run.extra_passes >= 1 and run.replay["num_steps"] > 0
    sweeps = [s for s in run.samples if s.kind != "replay"]
    assert all(len(s.times_s) > plan.repeats for s in sweeps)
    # the replay's step shapes are re-timed too
    assert any(len(s.times_s) > plan.replay_repeats for s in run.samples if s.kind == "replay")


def test_twin_calibrate_quick_end_to_end(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(SMALL_PLAN))
    out = tmp_path / "tiny.json"
    result = CliRunner().invoke(main, ["calibrate", "--quick", "--budget", "1", "--device", "cpu", "--threads", "1",
                                       "--sweep-plan", str(plan), "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output
    assert "held-out MAPE" in result.output and "wrote" in result.output
    samples = tmp_path / "tiny.samples.json"
    assert out.exists() and samples.exists()
    doc = json.loads(out.read_text())
    assert doc["format"] == "twin-profile" and doc["version"] == 1
    assert doc["samples_file"] == "tiny.samples.json" and doc["calibration"]["quick"] is True
    assert doc["environment"]["threads"] == 1
    cm = ProfileCostModel(out)
    assert cm.step_time_s(type("S", (), {"num_new_tokens": [1, 1], "num_computed_before": [10, 20],
                                         "num_spec_tokens": [0, 0]})()) > 0


def test_twin_calibrate_bad_input_is_one_line(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"decode_bathces": [1]}))
    r = CliRunner().invoke(main, ["calibrate", "--device", "cpu", "--sweep-plan", str(plan), "-o", str(tmp_path / "x.json")])
    assert r.exit_code == 2 and "unknown field 'decode_bathces'" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(main, ["calibrate", "--device", "cpu", "-o", str(tmp_path / "nope" / "x.json")])
    assert r.exit_code == 2 and "does not exist" in r.output
    r = CliRunner().invoke(main, ["calibrate", "--device", "cpu", "--model", "no-such-model", "-o",
                                  str(tmp_path / "x.json")])
    assert r.exit_code == 2 and "unknown model" in r.output.lower()


@pytest.mark.cuda
@cuda
def test_calibration_on_cuda(tmp_path):
    from calibration.gpu_run import gpu_report

    report = gpu_report("tiny-llama", device="cuda", budget_s=2.0, validation_s=3.0, time_limit_s=60.0,
                        out_dir=tmp_path, quick=True, plan_overrides=dict(SMALL_PLAN), log=lambda *_: None)
    row = report["decode_check"]["rows"][0]
    assert row["device_median_s"] is not None and row["device_median_s"] > 0
    assert report["dtype"] == "bf16"
    assert ProfileCostModel(report["profile"]).profile["device"]["type"] == "cuda"


@pytest.mark.cuda
@cuda
def test_measure_point_uses_cuda_events():
    from calibration.measure import build_runner, measure_point

    runner = build_runner(TINY, "cuda", None, num_blocks=64)
    s = measure_point(runner, Point("decode", [1] * 4, [100] * 4), warmup=2, repeats=5)
    assert s.device_times_s and len(s.device_times_s) == 5
    assert all(d <= w * 1.5 for d, w in zip(s.device_times_s, s.times_s))
