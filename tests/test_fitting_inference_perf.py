"""Reading inference-perf results into measured runs; broken files give one line naming the field."""

from __future__ import annotations

import json

import pytest

from tests.fitting_helpers import write_config, write_stage
from twin.errors import TwinInputError
from twin.fitting.readers import read_results
from twin.fitting.readers.inference_perf import read_inference_perf

METRICS = {"mean_ttft_ms": 30.0, "median_ttft_ms": 28.0, "p90_ttft_ms": 35.0, "p99_ttft_ms": 50.0,
           "mean_e2el_ms": 2030.0, "median_e2el_ms": 2000.0, "p99_e2el_ms": 2500.0}


@pytest.fixture
def folder(tmp_path):
    d = tmp_path / "exp-7b"
    write_config(d, model="meta-llama/Llama-2-7b-hf", tp=1, groups=3, per_group=4, system_tokens=100,
                 question_tokens=400, output_tokens=201, stages=[(5.0, 60.0), (10.0, 60.0)],
                 server={"max_num_seqs": 64, "max_num_batched_tokens": 2048})
    write_stage(d, 0, rate=5.0, duration_s=60.0, metrics=METRICS, prompt_tokens=520, output_tokens=201)
    write_stage(d, 1, rate=10.0, duration_s=60.0, metrics=METRICS, prompt_tokens=520, output_tokens=201, failed=9)
    return d


def test_every_stage_is_a_run_with_its_load_lengths_pool_and_metrics(folder):
    runs = read_results(folder)
    assert [r.name for r in runs] == ["exp-7b/stage0", "exp-7b/stage1"]
    r0, r1 = runs
    assert (r0.rate_per_s, r0.num_requests, r0.duration_s, r0.max_concurrency) == (5.0, 300, 60.0, None)
    assert r0.prompt_pool.num_groups == 3 and r0.prompt_pool.prompts_per_group == 4
    assert r0.prompt_pool.system_prompt_tokens == 100
    assert r0.output_tokens.mean == 201.0                  # ignore_eos: the configured length, exactly
    assert r0.prompt_tokens.mean == pytest.approx(520.0)
    assert r0.model == "meta-llama/Llama-2-7b-hf" and r0.tensor_parallel_size == 1
    assert r0.server == {"max_num_seqs": 64, "max_num_batched_tokens": 2048}
    assert r0.metrics["median_ttft_ms"] == pytest.approx(28.0)
    # TPOT derived from the means, not read from the client's per-message fields
    assert r0.metrics["mean_tpot_ms"] == pytest.approx((2030.0 - 30.0) / 200)
    assert r0.timeout_s is None and r1.timeout_s == pytest.approx(300.0)
    assert r1.metrics["failed"] == 9 and r1.experiment == "exp-7b"


def test_one_stage_file_reads_alone(folder):
    runs = read_inference_perf(folder / "results_stage_1_lifecycle_metrics.json")
    assert len(runs) == 1 and runs[0].rate_per_s == 10.0


@pytest.mark.parametrize("mutate,field", [
    (lambda d: d["load_summary"].pop("requested_rate"), "load_summary.requested_rate"),
    (lambda d: d["load_summary"].update(requested_rate=-1), "requested_rate"),
    (lambda d: d["successes"]["latency"].pop("time_to_first_token"), "time_to_first_token"),
    (lambda d: d["successes"].update(prompt_len={"median": 5}), "successes.prompt_len"),
    (lambda d: d["successes"]["prompt_len"].update(max=-3), "successes.prompt_len"),
    (lambda d: d.update(successes=[1, 2]), "successes"),
])
def test_broken_stage_files_name_the_field(folder, mutate, field):
    path = folder / "results_stage_0_lifecycle_metrics.json"
    doc = json.loads(path.read_text())
    mutate(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(TwinInputError) as e:
        read_results(folder)
    msg = str(e.value)
    assert field in msg and "\n" not in msg


def test_unreadable_and_unknown_files(tmp_path, folder):
    (folder / "results_stage_0_lifecycle_metrics.json").write_bytes(b"{\xff\xfe")   # (at the start: a UTF-16 mark)
    with pytest.raises(TwinInputError, match="not UTF-8"):
        read_results(folder)
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    with pytest.raises(TwinInputError, match="not a result format"):
        read_results(other)
    with pytest.raises(TwinInputError, match="no such file"):
        read_results(tmp_path / "missing")
