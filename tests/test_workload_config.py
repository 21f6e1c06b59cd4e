"""Workload config validation: pydantic models and one-line error messages."""

import pytest
import yaml
from pydantic import ValidationError

from twin.errors import TwinInputError
from twin.workload import WorkloadConfig, format_validation_error, load_workload_config
from twin.workload.arrival_config import GammaArrivals
from twin.workload.distribution_config import LengthDist, TimeDist

CLASS = {"name": "agent", "share": 1.0,
         "prompt": {"shared_prefix_tokens": 3000, "suffix_tokens": {"lognormal": {"median": 200, "sigma": 0.8}}},
         "output_tokens": {"lognormal": {"median": 150, "sigma": 0.6}}}


def base(**over):
    d = {"arrivals": {"process": "poisson", "rate_per_s": 8}, "duration_s": 600, "classes": [CLASS]}
    d.update(over)
    return d


def error_of(data) -> str:
    with pytest.raises(TwinInputError) as info:
        load_workload_config(data)
    msg = str(info.value)
    assert "\n" not in msg
    return msg


EXAMPLE = """
workload:
  arrivals: {process: poisson, rate_per_s: 8}
  duration_s: 600
  prefix_header: none
  classes:
    - name: agent
      share: 0.75
      prompt:
        shared_prefix_tokens: 3000
        num_prefix_groups: 4
        group_zipf_s: 1.1
        few_shot: {num_templates: 4, tokens: 1500}
        suffix_tokens: {lognormal: {median: 200, sigma: 0.8, max: 4000}}
      output_tokens: {lognormal: {median: 150, sigma: 0.6}}
    - name: chat
      share: 0.25
      priority: 1
      prompt: {shared_prefix_tokens: 500, suffix_tokens: {uniform: [20, 200]}}
      output_tokens: {normal: {mean: 300, std: 100}}
      multi_turn: {turns: {uniform: [2, 6]}, gap_s: {exponential: {mean: 20}}}
"""


def test_example_yaml_validates():
    cfg = load_workload_config(yaml.safe_load(EXAMPLE)["workload"])
    assert cfg.classes[1].multi_turn.turns.uniform == (2, 6)
    assert cfg.classes[0].prompt.suffix_tokens.kind == "lognormal"
    assert cfg.arrivals.rate_per_s == 8
    assert not cfg.closed_loop


def test_shorthands():
    assert LengthDist.model_validate(150).fixed == 150
    assert TimeDist.model_validate(2.5).fixed == 2.5
    cfg = load_workload_config(base(classes=[dict(CLASS, output_tokens=64)]))
    assert cfg.classes[0].output_tokens.lower_bound() == 64


def test_gamma_cv_or_vllm_burstiness():
    assert GammaArrivals(process="gamma", rate_per_s=1, cv=2.0).effective_cv == 2.0
    assert GammaArrivals(process="gamma", rate_per_s=1, burstiness=0.25).effective_cv == pytest.approx(2.0)
    msg = error_of(base(arrivals={"process": "gamma", "rate_per_s": 1, "cv": 2, "burstiness": 1}))
    assert msg.startswith("workload.arrivals: give exactly one of cv, burstiness")


@pytest.mark.parametrize("data, expected", [
    (base(arrivals={"process": "poisson", "rate_per_s": -3}),
     "workload.arrivals.rate_per_s: must be > 0 (got -3)"),
    (base(arrivals={"process": "fluid", "rate_per_s": 3}),
     "workload.arrivals.process: must be one of poisson, gamma, constant, piecewise, ramp_up, closed_loop (got 'fluid')"),
    (base(arrivals={"process": "poisson", "rate": 3}),
     "workload.arrivals: unknown field 'rate'; did you mean 'rate_per_s'? "
     "(allowed: max_concurrency, process, rate_per_s, scale_to_duration)"),
    (base(classes=[dict(CLASS, share=0.6)]),
     "workload.classes: shares must sum to 1 (got 0.6)"),
    (base(classes=[dict(CLASS, output_tokens={"lognormal": {"median": 0, "sigma": 1}})]),
     "workload.classes[0].output_tokens.lognormal.median: must be > 0 (got 0)"),
    (base(classes=[dict(CLASS, output_tokens={"lognormal": {"median": -5, "sigma": 1}})]),
     "workload.classes[0].output_tokens.lognormal.median: must be > 0 (got -5)"),
    (base(classes=[dict(CLASS, output_tokens=0)]),
     "workload.classes[0].output_tokens: must be >= 1 token (its minimum is 0)"),
    (base(duration_s=-1), "workload.duration_s: must be > 0 (got -1)"),
    (base(duration_s="long"), "workload.duration_s: must be a number (got 'long')"),
    (base(prefix_header="ts"),
     "workload.prefix_header: must be one of 'none', 'timestamp' or 'shuffled_sections' (got 'ts')"),
    (base(arrivals={"process": "piecewise", "schedule": [{"until_s": 10, "rate_per_s": 1},
                                                        {"until_s": 5, "rate_per_s": 2}]}),
     "workload.arrivals.schedule[1].until_s: must be > the previous piece's until_s 10 (got 5)"),
    (base(arrivals={"process": "closed_loop", "concurrency": 0}),
     "workload.arrivals.concurrency: must be >= 1 (got 0)"),
    (base(classes=[dict(CLASS, output_tokens={"uniform": [10, 5]})]),
     "workload.classes[0].output_tokens.uniform: must be [lo, hi] with lo <= hi (got [10, 5])"),
])
def test_one_line_messages(data, expected):
    assert error_of(data) == expected


def test_other_rules():
    assert "give exactly one of classes" in error_of({"arrivals": {"process": "poisson", "rate_per_s": 1},
                                                      "duration_s": 1})
    assert error_of(base(duration_s=None)) == "workload: give a stop rule: duration_s and/or num_requests"
    assert "names must be unique" in error_of(base(classes=[dict(CLASS, share=0.5), dict(CLASS, share=0.5)]))
    assert error_of(base(arrivals=None)) == "workload.arrivals: is required for synthetic classes"
    empty = dict(CLASS, prompt={"suffix_tokens": {"uniform": [0, 10]}})
    assert error_of(base(classes=[empty])).startswith("workload.classes[0].prompt.suffix_tokens: can be 0")
    inf = base(arrivals={"process": "poisson", "rate_per_s": float("inf")})
    assert error_of(inf).startswith("workload.num_requests: is required when rate_per_s is .inf")
    closed = {"process": "piecewise", "schedule": [{"until_s": 10, "rate_per_s": 1}]}
    assert "last piece" in error_of(base(arrivals=closed, duration_s=None, num_requests=5))
    mt = dict(CLASS, multi_turn={"turns": 0, "gap_s": 1})
    assert error_of(base(classes=[mt])) == \
        "workload.classes[0].multi_turn.turns: must be >= 1 (its minimum is 0)"
    assert error_of({"trace": {"path": "x.csv", "format": "lengths"}}) == \
        "workload.arrivals: is required for a length-only trace (it has no timestamps)"
    assert error_of({"trace": {"path": "x.csv", "time_scale": 0}}) == \
        "workload.trace.time_scale: must be > 0 (got 0)"
    assert error_of({"trace": {"path": "x.csv", "format": "parquet"}}).startswith("workload.trace.format: must be")


def test_counts_further_problems_and_root():
    with pytest.raises(ValidationError) as info:
        WorkloadConfig.model_validate(base(duration_s=-1, num_requests=0))
    line = format_validation_error(info.value)
    assert line == "duration_s: must be > 0 (got -1) [and 1 more problem]"
    assert format_validation_error(info.value, root="scenario.workload").startswith("scenario.workload.duration_s")


def test_config_is_frozen_and_strict():
    cfg = load_workload_config(base())
    with pytest.raises(ValidationError):
        cfg.duration_s = 3
    assert error_of(base(extra_knob=1)).startswith("workload: unknown field 'extra_knob' (allowed: arrivals,")
