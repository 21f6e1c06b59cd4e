"""A user's ``twin run`` of an inference-perf stage states the throughput the harness predicts for it.

inference-perf reports ``requests_per_sec`` as successes over the stage's first send to its last completion,
and its ``constant`` load spaces int(rate x duration) sends over exactly the stage's duration (exponential gaps
scaled to sum to it); the harness states N / (send duration + the simulated drain) (twin.fitting.run_span). The
twin's throughput is first arrival to last completion as well, so the arrivals must span the stage as the
client's did: ``scale_to_duration: true`` (what ``benchmarks/user_path_rows.py`` writes). An unscaled Poisson
draw of the same count spans (N - 1) / rate give or take duration / sqrt(N): seeded, the same stage read
+0.75 % (and +0.7..+1.4 % on the four stages that script writes)."""

from __future__ import annotations

import math

import pytest

from benchmarks.user_path_rows import STAGES, stage_scenario
from twin.fitting.ground_truth import H100_FOLDER, ground_truth_dir, h100_cases
from twin.fitting.replay import replay
from twin.scenario import ScenarioBody
from twin.sim.run import metrics_of, run_body


def _user_and_harness(key: str, scaled: bool = True) -> tuple[float, float]:
    exp, stage, deployment = STAGES[key]
    scenario = stage_scenario(ground_truth_dir() / H100_FOLDER / exp, stage, deployment)
    if not scaled:      # the same stage as round 19 wrote it: a Poisson draw of the stage's count
        wl = scenario["workload"]
        wl["arrivals"] = {"process": "poisson", "rate_per_s": wl["arrivals"]["rate_per_s"]}
        wl["num_requests"] = int(wl["arrivals"]["rate_per_s"] * wl.pop("duration_s"))
    case = next(c for c in h100_cases()[0] if c.run.name == f"{exp}/stage{stage}")
    harness = replay(case.run, case.target, {}, seed=0, max_sim_s=60.0).metrics
    body = ScenarioBody.model_validate(scenario)
    return metrics_of(run_body(body), body)["request_throughput"], harness["request_throughput"]


@pytest.mark.parametrize("key", ["llama-2-7b-codegen-stage0", "llama-2-7b-codegen-stage1"])
def test_a_stage_reads_the_harness_throughput(key):
    """Seeded; what is left is the drain after the last send (a second in 600) and the first gap."""
    user, harness = _user_and_harness(key)
    assert math.isclose(user, harness, rel_tol=0.002), (user, harness)


def test_an_unscaled_draw_reads_its_own_span():
    user, harness = _user_and_harness("llama-2-7b-codegen-stage0", scaled=False)
    assert user / harness - 1 > 0.005, (user, harness)
