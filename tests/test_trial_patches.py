"""The trial scripts' table patches reach every simulation worker (twin.fitting.carried_patches; issue 33, round 23).

A patch made with ``carried`` is recorded and applied by ``map_jobs`` in a worker that does not hold it (spawn,
forkserver), never twice where it is held (fork, this process). Each trial script that changes a cost-model table
for a ``fidelity_real.py`` run is run with its expensive part stubbed by a tiny task through the same pool under
spawn: the worker's tables equal the parent's, which differ from the embedded ones (no real fold)."""

from __future__ import annotations

import copy
import importlib
import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor
from unittest import mock

import pytest
from benchmark_module import load_benchmark

from twin.errors import TwinInputError
from twin.fitting import carried_patches
from twin.fitting.carried_patches import Patch, carried, reapplied
from twin.fitting.switches import map_jobs

# every table a trial script carries (module, attribute)
TABLES = [("twin.cost.eager_steps", "EMBEDDED_STRUCTURE"), ("twin.fitting.launch_prior", "PATH_LAYER_OPS"),
          ("twin.cost.eager_path_floors", "EXPERT_PATH_LAYER_OPS"), ("twin.cost.marlin_moe", "MARLIN_W4A16_MOE_TERMS"),
          ("twin.cost.block_fp8_chain", "CHAIN_PATHS"), ("twin.cost.qk_norm_allreduce", "QK_EXCHANGE_PATHS"),
          ("twin.fitting.silicon_layout", "MINIMAX_NVFP4_GROUPS"),
          ("twin.cost.generation_experts", "GENERATION_EXPERT_TERMS"), ("twin.cost.mla_request", "MLA_EXPERT_REQUEST_S"),
          ("twin.cost.default_terms", "EXPERT_FORMAT_TERMS"), ("twin.cost.mxfp4_path", "MXFP4_BLACKWELL_RATE")]
METHODS = [m for m in ("fork", "spawn", "forkserver") if m in multiprocessing.get_all_start_methods()]


def tables(tag: int = 0) -> tuple[int, dict[str, object], int]:
    """The task a worker runs: every carried table as this process has it, and how many patches it holds."""
    return tag, {f"{m}.{a}": copy.deepcopy(getattr(importlib.import_module(m), a)) for m, a in TABLES}, \
        len(carried_patches.current())


EMBEDDED = tables()[1]
STRUCTURE = Patch("twin.cost.eager_steps", "EMBEDDED_STRUCTURE", "additive")
CHAIN = Patch("twin.cost.block_fp8_chain", "CHAIN_PATHS", {("blackwell", "fp8"): 5}, "dict")


def changed(view: dict[str, object]) -> set[str]:
    return {k for k, v in view.items() if v != EMBEDDED[k]}


def test_carried_sets_a_block_records_it_and_puts_back_even_on_error():
    from twin.cost import block_fp8_chain, eager_steps
    chain_before = block_fp8_chain.CHAIN_PATHS
    with pytest.raises(RuntimeError):
        with carried(STRUCTURE, CHAIN) as now:
            assert now == carried_patches.current() == (STRUCTURE, CHAIN)
            assert eager_steps.EMBEDDED_STRUCTURE == "additive"
            assert block_fp8_chain.CHAIN_PATHS[("blackwell", "fp8")] == 5
            assert block_fp8_chain.CHAIN_PATHS is chain_before          # a dict patch edits the table in place
            raise RuntimeError("the run failed")
    assert carried_patches.current() == () and tables()[1] == EMBEDDED
    assert block_fp8_chain.CHAIN_PATHS is chain_before


@pytest.mark.parametrize("bad, message", [
    (lambda: carried({"module": "x"}), r"carried patches: \{'module': 'x'\} is not a Patch"),
    (lambda: carried(Patch("twin.cost.eager_steps", "EMBEDDED_STRUCTURE", "max", "set")),
     "carried patches: twin.cost.eager_steps.EMBEDDED_STRUCTURE: kind 'set'; allowed: object, dict"),
    (lambda: carried(Patch("twin.no_such_module", "X", 1)),
     "carried patches: twin.no_such_module.X: module 'twin.no_such_module' does not import"),
    (lambda: carried(Patch("twin.cost.eager_steps", "NO_SUCH_TABLE", 1)),
     "carried patches: twin.cost.eager_steps.NO_SUCH_TABLE: module twin.cost.eager_steps has no 'NO_SUCH_TABLE'"),
    (lambda: carried(Patch("twin.cost.eager_steps", "EMBEDDED_STRUCTURE", {"a": 1}, "dict")),
     "carried patches: twin.cost.eager_steps.EMBEDDED_STRUCTURE: a dict patch needs a dict attribute and a dict"),
    (lambda: carried(Patch("twin.cost.block_fp8_chain", "CHAIN_PATHS", [1], "dict")),
     "carried patches: twin.cost.block_fp8_chain.CHAIN_PATHS: a dict patch needs a dict attribute and a dict"),
    (lambda: carried(Patch("twin.cost.eager_steps", "EMBEDDED_STRUCTURE", lambda: "max")),
     "carried patches: twin.cost.eager_steps.EMBEDDED_STRUCTURE: its value cannot travel to a worker process "
     r"\((PicklingError|AttributeError)\); carry a table or a number, or keep the patch in this process and run "
     "with --workers 1$"),
])
def test_a_patch_that_cannot_travel_is_one_line(bad, message):
    with pytest.raises(TwinInputError, match=f"^{message}"):
        bad()
    assert carried_patches.current() == ()


def test_in_process_jobs_apply_nothing_twice():
    with carried(STRUCTURE, CHAIN):
        parent = tables()
        assert list(map_jobs(tables, [1, 2])) == [(1, parent[1], 2), (2, parent[1], 2)]
    assert changed(parent[1]) == {"twin.cost.eager_steps.EMBEDDED_STRUCTURE", "twin.cost.block_fp8_chain.CHAIN_PATHS"}


@pytest.mark.parametrize("method", METHODS)
def test_a_worker_of_every_start_method_sees_the_parents_patches(method):
    """Under spawn / forkserver the worker imports the tables afresh and applies the two patches around each job;
    a forked worker holds them already (2 held, not 4). A bare pool of the same start method sees the embedded
    tables under spawn / forkserver (the defect)."""
    ctx = multiprocessing.get_context(method)
    with carried(STRUCTURE, CHAIN):
        parent = tables()[1]
        seen = list(map_jobs(tables, [1, 2, 3], workers=2, mp_context=ctx))
        with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as bare:
            unpatched = bare.submit(tables, 0).result()[1]
    assert seen == [(k, parent, 2) for k in (1, 2, 3)]
    assert unpatched == (parent if method == "fork" else EMBEDDED)
    # after the block the workers (a fresh pool) are back at the embedded tables
    assert list(map_jobs(tables, [4, 5], workers=2, mp_context=ctx)) == [(4, EMBEDDED, 0), (5, EMBEDDED, 0)]


def test_a_jobs_patches_are_the_parents_at_the_call():
    """``map_jobs`` takes the patches when it is called: a pool first iterated after the block still applies them."""
    with carried(STRUCTURE):
        jobs = map_jobs(tables, [1, 2], workers=2, mp_context=multiprocessing.get_context("fork"))
    assert [v["twin.cost.eager_steps.EMBEDDED_STRUCTURE"] for _, v, _ in jobs] == ["additive", "additive"]


def test_a_worker_holding_other_patches_is_one_line():
    with carried(CHAIN):
        with pytest.raises(TwinInputError, match="^carried patches: this worker holds twin.cost.block_fp8_chain."
                                                 "CHAIN_PATHS, not the parent's; start its pool afresh$"):
            reapplied((STRUCTURE,))


class Stop(Exception):
    """Ends a script's run at its stub."""


SPAWN = multiprocessing.get_context("spawn")
# script, argv, the function stubbed, the tables its trial changes
SCRIPTS = [
    ("eager_structure_trial", ["t.py", "--structure", "moe_additive", "--", "--folds", "family"], "run_fidelity_real",
     {"twin.cost.eager_steps.EMBEDDED_STRUCTURE"}),
    ("kimi_eager_mla_count", ["t.py", "--paths", "nvfp4,int4", "--", "--folds", "GPU"], "run_fidelity_real",
     {"twin.fitting.launch_prior.PATH_LAYER_OPS"}),
    ("kimi_int4_floor", ["t.py", "--count", "--refit", "--", "--folds", "family"], "run_fidelity_real",
     {"twin.cost.eager_path_floors.EXPERT_PATH_LAYER_OPS", "twin.cost.marlin_moe.MARLIN_W4A16_MOE_TERMS",
      "twin.cost.default_terms.EXPERT_FORMAT_TERMS"}),       # its "int4" entry is the Marlin table itself
    ("minimax_fp8_chain", ["t.py", "heldout", "--extra-kernels", "7", "--", "--folds", "family"], "run_fidelity_real",
     {"twin.cost.block_fp8_chain.CHAIN_PATHS"}),
    ("nvfp4_decode_rows", ["t.py", "--facts", "no-qk,bf16-attention", "heldout", "--", "--folds", "GPU"],
     "run_fidelity_real", {"twin.cost.qk_norm_allreduce.QK_EXCHANGE_PATHS",
                           "twin.fitting.silicon_layout.MINIMAX_NVFP4_GROUPS"}),
    ("eager_family_floor", ["t.py", "--fp8-count", "--", "--folds", "family"], "run_fidelity_real",
     {"twin.cost.generation_experts.GENERATION_EXPERT_TERMS"}),
    ("transfer_terms", ["t.py", "base.json", "other.json", "--embed"], "run",
     {"twin.cost.mla_request.MLA_EXPERT_REQUEST_S", "twin.cost.default_terms.EXPERT_FORMAT_TERMS"}),
]


@pytest.mark.parametrize("script, argv, stub, trial", SCRIPTS, ids=[s[0] for s in SCRIPTS])
def test_each_trial_scripts_patch_reaches_a_spawned_worker(monkeypatch, script, argv, stub, trial):
    mod = load_benchmark(script)
    seen = []

    def run(*_args, **_kwargs):
        seen.append((tables()[1], list(map_jobs(tables, [1, 2], workers=2, mp_context=SPAWN))))
        raise Stop

    monkeypatch.setattr(mod, stub, run)
    with mock.patch.object(sys, "argv", argv), pytest.raises(Stop):
        mod.main()
    [(parent, workers)] = seen
    assert changed(parent) == trial
    assert [view for _, view, _ in workers] == [parent, parent]
    assert tables()[1] == EMBEDDED and carried_patches.current() == ()


def test_gptoss_slices_fp4_rate_reaches_a_spawned_worker(monkeypatch):
    mod = load_benchmark("gptoss_slices")
    seen = []

    def simulate(cases, params, **_kwargs):
        seen.append([view["twin.cost.mxfp4_path.MXFP4_BLACKWELL_RATE"]
                     for _, view, _ in map_jobs(tables, [1, 2], workers=2, mp_context=SPAWN)])
        if len(seen) == 2:
            raise Stop
        return []

    monkeypatch.setattr(mod, "silicon_cases", lambda: ([],))
    monkeypatch.setattr(mod, "simulate_cases", simulate)
    with mock.patch.object(sys, "argv", ["t.py", "--fp4-rate", "--workers", "2"]), pytest.raises(Stop):
        mod.main()
    assert seen == [[mod.FP8_RATE] * 2, ["fp4"] * 2]          # the defaults variant, then fp4rate
    assert tables()[1] == EMBEDDED


@pytest.mark.parametrize("args, given", [
    (["--folds", "GPU"], []), (["--workers", "2"], ["2"]), (["--workers=3"], ["3"]), (["--work", "4"], ["4"]),
    (["--w=5"], ["5"]), (["--workers"], [""]), (["--workers", "1", "--folds", "GPU"], ["1"]), (["--", "2"], []),
])
def test_workers_given_reads_every_spelling_argparse_accepts(args, given):
    from benchmarks.fidelity_passthrough import workers_given
    assert workers_given(args) == given


@pytest.mark.parametrize("args", [["--workers=2"], ["--work", "2"], ["--workers"]])
def test_the_scripts_whose_patch_is_a_function_refuse_workers_in_one_line(monkeypatch, args):
    """dense_stream_occupancy and fidelity_row_release replace functions (closures: they cannot travel to a worker),
    so they refuse any ``--workers`` but 1, however it is spelt."""
    dense = load_benchmark("dense_stream_occupancy")
    monkeypatch.setattr(dense, "run_fidelity_real", lambda rest: pytest.fail("ran"))
    with mock.patch.object(sys, "argv", ["d.py", "heldout", "--", *args]), pytest.raises(
            TwinInputError, match="^heldout: the trial patches this process only; run fidelity_real with --workers 1$"):
        dense.main()
    release = load_benchmark("fidelity_row_release")
    with mock.patch.object(sys, "argv", ["r.py", "--ground-truth", "x", *args]), pytest.raises(
            SystemExit, match=r"^--workers: must be 1 \(the replacement applies in this process only\)$"):
        release.main()
