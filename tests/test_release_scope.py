"""The fit scope by vLLM release (issue 33, round 16: ``@vllm_0.10``, twin.fitting.release_scope)."""

from __future__ import annotations

import pytest

from twin.fitting.fit import Case
from twin.fitting.identify import held_at_prior
from twin.fitting.measured_run import LengthSample, MeasuredRun
from twin.fitting.parameters import PARAMETERS_BY_NAME
from twin.fitting.release_scope import SCOPES, in_release_scope, release_line
from twin.fitting.replay import Target, cost_model_for, deployment_for
from twin.fitting.scoped import SCOPES as ALL_SCOPES, in_scope, params_for
from twin.fitting.silicon import row_run
from twin.fitting.silicon_rows import read_silicon

TARGET = Target("llama-2-7b", "H100-SXM", 1)
TERM = "request_path_s@client_vllm_bench+vllm_0.10"


def _run(name: str, client: str | None, release: str | None) -> MeasuredRun:
    return MeasuredRun(name=name, source="test", num_requests=12, rate_per_s=float("inf"), max_concurrency=4,
                       prompt_tokens=LengthSample.constant(256), output_tokens=LengthSample.constant(32),
                       metrics={"completed": 1.0}, server={"enable_prefix_caching": False, "vllm_version": "0.14"},
                       experiment=name, client=client, release=release)


def test_release_lines():
    assert release_line("0.10.2") == "0.10" and release_line("v0.10.1-cu128") == "0.10"
    assert release_line("0.15.1") == "0.15" and release_line("1.0") == "1.0"
    assert release_line(None) is None and release_line("") is None and release_line("nightly-5b8c30d") is None
    assert SCOPES == ("vllm_0.10",) and "vllm_0.10" in ALL_SCOPES


def test_a_release_that_is_not_a_string_is_a_one_line_error():
    with pytest.raises(ValueError) as exc:
        _run("r1", "vllm-bench", 0.1)
    assert str(exc.value) == "r1: release must be a vLLM release string or None, got 0.1"


def test_the_release_scope_covers_that_release_lines_runs_only():
    old, new, blank = (deployment_for(_run(n, "vllm-bench", r), TARGET) for n, r in
                       (("a", "0.10.2"), ("b", "0.15.1"), ("c", None)))
    assert old.release == "0.10.2" and new.release == "0.15.1" and blank.release is None
    assert in_release_scope("vllm_0.10", old) and in_scope("vllm_0.10", old)
    assert not in_scope("vllm_0.10", new) and not in_scope("vllm_0.10", blank)
    iperf = deployment_for(_run("d", "inference-perf", "0.10.2"), TARGET)
    params = {"request_path_s": 4.8e-3, "request_path_s@client_vllm_bench": 6e-3, TERM: 20e-3}
    # the compound (narrower) scope wins on the bench rows of 0.10.x, the bench path elsewhere
    assert params_for(params, old) == {"request_path_s": 20e-3}
    assert params_for(params, new) == {"request_path_s": 6e-3}
    assert params_for(params, blank) == {"request_path_s": 6e-3}
    assert params_for(params, iperf) == {"request_path_s": 4.8e-3}
    assert cost_model_for(old, TARGET, params).request_path_s == 20e-3


def test_without_a_run_of_the_release_the_term_is_held_and_left_out():
    names = ["request_path_s@client_vllm_bench", TERM]
    held = held_at_prior([Case(_run("b", "vllm-bench", "0.15.1"), TARGET)], names)
    assert held == {TERM: "no run (client_vllm_bench+vllm_0.10) in the data"}
    assert held_at_prior([Case(_run("a", "vllm-bench", "0.10.2"), TARGET)], names) == {}


def test_the_term_has_a_stated_prior_in_ms_per_request():
    p = PARAMETERS_BY_NAME[TERM]
    assert (p.unit, p.scale, p.prior) == ("ms per request", 1e-3, 4.8)


def test_silicon_rows_carry_their_release():
    rows = read_silicon()
    llama = next(r for r in rows if r.vllm_version == "0.10.2")
    assert row_run(llama).release == "0.10.2"
    other = next(r for r in rows if r.vllm_version and not r.vllm_version.startswith("0.10"))
    assert row_run(other).release == other.vllm_version


def test_a_held_compound_term_is_reported_at_the_fitted_part_it_falls_back_to():
    """The Llama-held-out family fold has no 0.10.x run: the term is left out and its rows are simulated at the
    fold's bench path (``scoped.params_for``), which the parameter table names, not the unscoped path."""
    from twin.fitting.joint import FoldResult, simulated_value
    params = {"request_path_s": 7.5e-3, "request_path_s@client_vllm_bench": 18.7e-3}
    fold = FoldResult("family", "llama", params, {}, {TERM: "not identified, held at prior: no run"}, [], [])
    assert simulated_value(fold, TERM) == (18.7e-3, "held: simulated at the fold's request_path_s@client_vllm_bench")
    old = deployment_for(_run("a", "vllm-bench", "0.10.2"), TARGET)
    assert cost_model_for(old, TARGET, params).request_path_s == 18.7e-3
