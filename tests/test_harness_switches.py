"""The held-out harness's switches as one value carried with every simulation job (twin.fitting.switches; issue 33,
round 23): the embedded state, a flip for a block, and a worker process started by spawn / forkserver that sees its
parent's flip (a tiny task through the pool ``simulate_cases`` uses, not a real fold)."""

from __future__ import annotations

import multiprocessing
import types
from concurrent.futures import ProcessPoolExecutor

import pytest

from twin.cost import allreduce_routes
from twin.errors import TwinInputError
from twin.fitting import cold_start, fit, path_token_prior, switches
from twin.fitting.switches import EMBEDDED, Switches, applied, current, map_jobs, report_args, switched

FLIPPED = Switches(multimem_allreduce=True, cold_start=False, path_token_prior=False)


def worker_view(tag: int) -> tuple[int, Switches, tuple[bool, bool, bool]]:
    """The task a worker runs: its switches, and the three modules' own settings."""
    return tag, current(), (allreduce_routes.ENABLED, cold_start.ENABLED, path_token_prior.ENABLED)


def test_the_embedded_state_is_each_modules_own():
    assert EMBEDDED == Switches(multimem_allreduce=False, cold_start=True, path_token_prior=True)
    assert current() == EMBEDDED
    assert (allreduce_routes.ENABLED, cold_start.ENABLED, path_token_prior.ENABLED) == (False, True, True)
    assert EMBEDDED.changed() == {} and report_args() == {}


def test_switched_sets_a_block_and_puts_back_even_on_error():
    with pytest.raises(RuntimeError):
        with switched(multimem_allreduce=True, cold_start=False) as now:
            assert now == current() == Switches(True, False, True)
            assert allreduce_routes.ENABLED is True and cold_start.ENABLED is False
            assert report_args() == {"switches": {"multimem_allreduce": True, "cold_start": False}}
            with applied(EMBEDDED):
                assert current() == EMBEDDED
            assert current() == now
            raise RuntimeError("the run failed")
    assert current() == EMBEDDED and report_args() == {}


@pytest.mark.parametrize("bad, message", [
    (lambda: Switches(multimem_allreduce="yes"), "switches: multimem_allreduce is 'yes', not true or false"),
    (lambda: Switches(cold_start=1), "switches: cold_start is 1, not true or false"),
    (lambda: switched(multimem=True), "switches: unknown switch 'multimem'; allowed: multimem_allreduce, cold_start, "
                                      "path_token_prior"),
    (lambda: applied({"cold_start": False}).__enter__(), r"switches: \{'cold_start': False\} is not a Switches value"),
    (lambda: map_jobs(worker_view, [1], switches=True), "switches: True is not a Switches value"),
    (lambda: switches.register("other", types.ModuleType("m")), "switches: unknown switch 'other'"),
])
def test_bad_switches_are_one_line(bad, message):
    with pytest.raises(TwinInputError, match=f"^{message}"):
        bad()


def test_in_process_jobs_see_the_switches_given():
    assert [v for _, v, _ in map_jobs(worker_view, [1, 2])] == [EMBEDDED] * 2
    seen = list(map_jobs(worker_view, [1, 2], workers=1, switches=FLIPPED))
    assert seen == [(1, FLIPPED, (True, False, False)), (2, FLIPPED, (True, False, False))]
    assert current() == EMBEDDED


@pytest.mark.parametrize("method", [m for m in ("spawn", "forkserver") if m in multiprocessing.get_all_start_methods()])
def test_a_spawned_worker_sees_the_parents_flip(method):
    """The flip made in this process reaches a worker that imports the twin afresh (spawn, forkserver); the same
    task in a bare pool of that start method sees the embedded state (the defect: round 22)."""
    ctx = multiprocessing.get_context(method)
    with switched(multimem_allreduce=True, cold_start=False, path_token_prior=False):
        jobs = map_jobs(worker_view, [1, 2, 3], workers=2, mp_context=ctx)     # the switches taken here
        with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as bare:
            unswitched = bare.submit(worker_view, 0).result()
    assert list(jobs) == [(k, FLIPPED, (True, False, False)) for k in (1, 2, 3)]
    assert unswitched == (0, EMBEDDED, (False, True, True))
    # explicit switches, given where the parent's are the embedded ones
    assert list(map_jobs(worker_view, [4, 5], workers=2, switches=FLIPPED, mp_context=ctx)) == [
        (k, FLIPPED, (True, False, False)) for k in (4, 5)]


def test_a_module_registered_inside_a_block_takes_its_value(monkeypatch):
    """A switch's module imported inside an ``applied`` block (a worker that imports path_token_prior mid-job) takes
    the block's value; after the block, the value from before."""
    monkeypatch.setitem(switches.MODULES, "path_token_prior", path_token_prior)
    monkeypatch.setattr(path_token_prior, "ENABLED", True)       # the real module, put back after the test
    late = types.ModuleType("late")
    late.ENABLED = True
    with switched(path_token_prior=False):
        switches.register("path_token_prior", late)
        assert late.ENABLED is False
    assert late.ENABLED is True


def test_simulate_cases_hands_its_switches_to_the_pool(monkeypatch):
    seen = []

    def fake_map(fn, jobs, workers, given):
        seen.append((fn, len(jobs), workers, given))
        return iter([types.SimpleNamespace(metrics={})] * len(jobs))
    monkeypatch.setattr(fit, "map_jobs", fake_map)
    fit.simulate_cases(["a", "b"], {}, workers=2, switches=FLIPPED)
    fit.simulate_cases(["c"], {})
    assert seen == [(fit._replay_one, 2, 2, FLIPPED), (fit._replay_one, 1, 1, None)]

