"""The trial scripts' patches are scoped (issue 33, round 19): each script that switches a trial on by editing a
module's table or function does it for its own run only, so a test that runs one in this pytest process leaves
nothing behind for a later test.

Each test runs a script's entry function with the expensive part stubbed (the function called inside the patch
records what it sees), checks the trial was on during the run, then that every table and function the scripts
patch is back: the same object with the same content, also when the run ends in an error. The last test reads
benchmarks/ and twin/ (their source) for a new write to another module's state outside a scoped patch."""

from __future__ import annotations

import ast
import copy
import sys
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import pytest
from benchmark_module import load_benchmark

import benchmarks.fidelity_real as fidelity_real
import twin.cost.roofline as roofline
from twin.cost import default_terms, eager_path_floors, generation_experts, marlin_blocks, mla_request, mxfp4_path
from twin.cost.marlin_moe import MARLIN_W4A16_MOE_TERMS
from twin.fitting import fit, joint, launch_prior, provenance_evidence

ROOT = Path(__file__).resolve().parents[1]

# (owner, attribute) of every table and function a trial script patches
PATCHED = [(marlin_blocks, "MARLIN_PATHS"), (launch_prior, "PATH_LAYER_OPS"),
           (eager_path_floors, "EXPERT_PATH_LAYER_OPS"), (provenance_evidence, "DECLARED_EVIDENCE"),
           (sys.modules["twin.cost.marlin_moe"], "MARLIN_W4A16_MOE_TERMS"), (mla_request, "MLA_EXPERT_REQUEST_S"),
           (default_terms, "EXPERT_FORMAT_TERMS"), (generation_experts, "GENERATION_EXPERT_TERMS"),
           (mxfp4_path, "MXFP4_BLACKWELL_RATE"), (roofline, "step_fixed_parts"), (roofline, "attention_terms"),
           (joint, "simulate_cases"),
           (joint, "unexplained_decode_gap"), (joint, "unseen_reference"), (sys, "argv")]


class Stop(Exception):
    """Raised by a stub to end a run early (the patches must come off on an error too)."""


def snapshot() -> dict[str, tuple[object, object]]:
    return {f"{owner.__name__}.{name}": (getattr(owner, name), copy.deepcopy(getattr(owner, name)))
            for owner, name in PATCHED}


def assert_restored(before: dict[str, tuple[object, object]]) -> None:
    now = snapshot()
    moved = [k for k, (obj, content) in before.items() if now[k][0] is not obj or now[k][1] != content]
    assert not moved, f"left patched after the run: {moved}"


@pytest.fixture
def untouched():
    """The state before the test; the test calls it to check that state is back."""
    before = snapshot()
    return lambda: assert_restored(before)


def run_main(mod, argv: list[str]) -> None:
    """``mod.main()`` with ``argv`` (for this call only); a stub's ``Stop`` ends it."""
    with mock.patch.object(sys, "argv", argv):
        try:
            mod.main()
        except Stop:
            pass


@pytest.mark.parametrize("error", [False, True])
def test_gptoss_h100_prefill_turns_marlin_padding_off_for_its_run_only(monkeypatch, untouched, error):
    mod = load_benchmark("gptoss_h100_prefill")
    seen = []

    def report(args):
        seen.append(set(marlin_blocks.MARLIN_PATHS))
        if error:
            raise Stop

    monkeypatch.setattr(mod, "report", report)
    run_main(mod, ["gptoss_h100_prefill.py", "--no-padding"])
    assert seen == [set()]
    untouched()


@pytest.mark.parametrize("error", [False, True])
def test_kimi_eager_mla_count_counts_the_mixed_step_for_its_run_only(monkeypatch, untouched, error):
    mod = load_benchmark("kimi_eager_mla_count")
    seen = []

    def run(rest):
        seen.append((rest, launch_prior.PATH_LAYER_OPS[("blackwell", "nvfp4")][0],
                     launch_prior.PATH_LAYER_OPS[("blackwell", "int4")][0]))
        if error:
            raise Stop

    monkeypatch.setattr(mod, "run_fidelity_real", run)
    run_main(mod, ["k.py", "--paths", "nvfp4,int4", "--", "--folds", "GPU"])
    assert seen == [(["--folds", "GPU"], 24 + 7, 26 + 7)]
    untouched()


@pytest.mark.parametrize("error", [False, True])
def test_kimi_int4_floor_counts_and_refits_for_its_run_only(monkeypatch, untouched, error):
    mod = load_benchmark("kimi_int4_floor")
    seen = []

    def run(rest):
        seen.append((eager_path_floors.EXPERT_PATH_LAYER_OPS.get(("blackwell", "int4")),
                     provenance_evidence.DECLARED_EVIDENCE.get(mod.KEY),
                     MARLIN_W4A16_MOE_TERMS["moe_expert_efficiency"]))
        if error:
            raise Stop

    monkeypatch.setattr(mod, "run_fidelity_real", run)
    run_main(mod, ["k.py", "--count", "--refit", "--", "--folds", "family"])
    assert seen == [(eager_path_floors.MARLIN_INT4_LAYER_OPS, launch_prior.COUNT_EVIDENCE, 0.497)]
    untouched()


@pytest.mark.parametrize("error", [False, True])
def test_transfer_terms_embeds_the_readings_for_its_run_only(monkeypatch, untouched, error):
    mod = load_benchmark("transfer_terms")
    seen = []

    def run(args):
        seen.append((dict(mla_request.MLA_EXPERT_REQUEST_S), default_terms.EXPERT_FORMAT_TERMS["mxfp4"]))
        if error:
            raise Stop

    monkeypatch.setattr(mod, "run", run)
    run_main(mod, ["t.py", "base.json", "other.json", "--embed"])
    assert seen == [(mla_request.READINGS, {"moe_active_expert_share": 0.75})]
    untouched()


@pytest.mark.parametrize("error", [False, True])
def test_eager_family_floor_counts_minimax_fp8_for_its_run_only(monkeypatch, untouched, error):
    mod = load_benchmark("eager_family_floor")
    seen = []

    def run(rest):
        seen.append((generation_experts.GENERATION_EXPERT_TERMS[("blackwell", "fp8")]["eager_moe_layer_host_s"],
                     provenance_evidence.DECLARED_EVIDENCE[mod.FP8_KEY][0]))
        if error:
            raise Stop

    monkeypatch.setattr(mod, "run_fidelity_real", run)
    run_main(mod, ["e.py", "--fp8-count", "--", "--folds", "family"])
    assert seen == [(pytest.approx(mod.fp8_count_s(), rel=1e-12), mod.LLAMA_COUNT)]
    untouched()


@pytest.mark.parametrize("error", [False, True])
def test_fold_cost_models_costs_instead_of_simulating_for_its_folds_only(monkeypatch, untouched, error):
    mod = load_benchmark("fold_cost_models")
    seen = []

    def run_fold(kind, group, *args, **kwargs):
        seen.append(joint.simulate_cases.__qualname__)
        if error:
            raise Stop
        return SimpleNamespace(cases=[], predicted=[], params={})

    monkeypatch.setattr(joint, "all_cases", lambda *args, **kwargs: [])
    monkeypatch.setattr(joint, "with_deployments", lambda cases: [])
    monkeypatch.setattr(joint, "run_fold", run_fold)
    try:
        mod.print_fold_costs(None, 16)
    except Stop:
        pass
    assert seen and set(seen) == {"print_fold_costs.<locals>.costed"}
    untouched()


@pytest.mark.parametrize("error", [False, True])
def test_unseen_bandwidth_check_replaces_the_gap_rows_and_the_carry_for_its_run_only(monkeypatch, untouched, error):
    mod = load_benchmark("unseen_bandwidth_check")
    seen = []

    def run(args):
        seen.append((joint.unexplained_decode_gap("any case"), joint.unseen_reference("plan", {})))
        if error:
            raise Stop

    monkeypatch.setattr(mod, "run", run)
    run_main(mod, ["u.py", "--with-gap-rows", "--no-carry"])
    assert seen == [(None, {})]
    untouched()


@pytest.mark.parametrize("error", [False, True])
def test_the_hand_over_sets_fidelity_reals_arguments_for_its_call_only(monkeypatch, untouched, error):
    from benchmarks.fidelity_passthrough import run_fidelity_real
    seen = []

    def main():
        seen.append(list(sys.argv))
        if error:
            raise Stop

    monkeypatch.setattr(fidelity_real, "main", main)
    try:
        run_fidelity_real(["--folds", "GPU"])
    except Stop:
        pass
    assert seen == [["fidelity_real.py", "--folds", "GPU"]]
    untouched()


@pytest.mark.parametrize("error", [False, True])
def test_fidelity_row_release_drops_its_own_flags_for_its_run_only(monkeypatch, untouched, error):
    mod = load_benchmark("fidelity_row_release")
    seen = []

    def main():
        seen.append(list(sys.argv))
        if error:
            raise Stop

    monkeypatch.setattr(fidelity_real, "main", main)
    run_main(mod, ["f.py", "--cuda-total", "--folds", "GPU"])
    assert seen == [["f.py", "--folds", "GPU"]]
    untouched()


def test_gptoss_slices_sets_the_mxfp4_rate_per_variant_and_restores_it(monkeypatch, untouched):
    mod = load_benchmark("gptoss_slices")
    seen = []

    def simulate(cases, params, **kwargs):
        seen.append(mxfp4_path.MXFP4_BLACKWELL_RATE)
        if len(seen) == 2:
            raise Stop          # inside the fp4 variant: the rate must come back on an error too
        return []

    monkeypatch.setattr(mod, "silicon_cases", lambda: ([], None))
    monkeypatch.setattr(mod, "simulate_cases", simulate)
    run_main(mod, ["g.py", "--fp4-rate"])
    assert seen == [mod.FP8_RATE, "fp4"]
    untouched()


def test_dense_stream_occupancy_adds_its_prior_for_the_prior_runs_only(monkeypatch, untouched):
    import twin.fitting.silicon as silicon
    mod = load_benchmark("dense_stream_occupancy")
    seen = []
    original = roofline.step_fixed_parts

    def simulate(cases, params, **kwargs):
        seen.append(roofline.step_fixed_parts is original)
        if len(seen) == 2:
            raise Stop
        return []

    monkeypatch.setattr(silicon, "silicon_cases", lambda: ([], None))
    monkeypatch.setattr(fit, "simulate_cases", simulate)
    run_main(mod, ["d.py", "rows"])
    assert seen == [True, False]            # the defaults, then the prior
    untouched()
    monkeypatch.setattr(mod, "run_fidelity_real", lambda rest: seen.append(roofline.step_fixed_parts is original))
    run_main(mod, ["d.py", "heldout", "--", "--folds", "GPU"])
    assert seen[-1] is False
    untouched()


@pytest.mark.parametrize("error", [False, True])
def test_kimi_int4_fit_reads_its_shapes_for_its_run_only(monkeypatch, untouched, error):
    mod = load_benchmark("kimi_int4_fit")
    shapes, seen = mod.DECODE_SHAPES, []

    def fit_stub(args):
        seen.append(list(mod.DECODE_SHAPES))
        if error:
            raise Stop

    monkeypatch.setattr(mod, "fit", fit_stub)
    run_main(mod, ["k.py", "--decode-on", "1024/1024,1024/8192"])
    assert seen == [[(1024, 1024), (1024, 8192)]]
    assert mod.DECODE_SHAPES is shapes and shapes == [(1024, 1024)]
    untouched()


def test_minimax_fp8_chain_counts_fp8_for_its_last_variant_only(monkeypatch, untouched):
    mod = load_benchmark("minimax_fp8_chain")
    seen = []

    def simulate(cases, params, **kwargs):
        seen.append(generation_experts.GENERATION_EXPERT_TERMS[("blackwell", "fp8")].get("eager_moe_layer_host_s"))
        return []

    monkeypatch.setattr(mod, "fp8_8k_out_cases", lambda: [])
    monkeypatch.setattr(fit, "simulate_cases", simulate)
    run_main(mod, ["m.py", "rows", "--fp8-count"])
    assert seen[0] is None and seen[1] == pytest.approx(11 * 0.84e-3 / 16, rel=1e-12)
    untouched()


# writes to another module's state that are scoped where they are (file, function): why
ALLOWED = {
    ("twin/cli/main.py", "invoke"): "warnings.showwarning inside warnings.catch_warnings()",
    ("twin/cost/factory.py", "register_cost_model"): "the cost-model registry's own API",
    ("twin/fitting/switches.py", "register"): "the harness switches' registry's own API (a module, at its import)",
    ("twin/dashboard/worker.py", "__init__"): "sys.modules['__main__'] swapped back in a finally",
    ("benchmarks/kimi_int4_fit.py", "decode_shapes"): "its own DECODE_SHAPES, restored in a finally",
}
MUTATORS = {"update", "clear", "setdefault", "pop", "popitem", "append", "extend", "insert", "add", "discard", "remove"}


def _root(node: ast.AST) -> ast.AST:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node


def unscoped_writes(rel: str, source: str) -> list[str]:
    """Each function's assignment to an attribute or item of an imported name (``mod.X = ...``, ``mod.T[k] = ...``,
    ``T[k] = ...``) or of the module's own upper-case table, and each mutating call on an upper-case table of either
    (``mod.TABLE.update(...)``), in the source ``source`` of the file ``rel``, less ``ALLOWED``."""
    tree = ast.parse(source)
    imported = {(a.asname or a.name).split(".")[0] for n in ast.walk(tree)
                if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    own = {t.id for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
           for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
           if isinstance(t, ast.Name) and t.id.isupper()}
    out = []
    for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        for node in ast.walk(fn):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            for t in targets:
                root = _root(t)
                if t is not root and isinstance(root, ast.Name) and (root.id in imported or root.id in own):
                    out.append((fn.name, node.lineno, ast.unparse(t)))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
                table, root = node.func.value, _root(node.func.value)
                name = table.attr if isinstance(table, ast.Attribute) else getattr(table, "id", "")
                if isinstance(root, ast.Name) and (root.id in imported or root.id in own) and name.isupper():
                    out.append((fn.name, node.lineno, ast.unparse(node.func)))
    return [f"{rel}:{line}: {what} (in {name})" for name, line, what in sorted(out, key=lambda w: w[1])
            if (rel, name) not in ALLOWED]


def test_no_function_writes_another_modules_state_outside_a_scoped_patch():
    files = sorted((ROOT / "benchmarks").glob("*.py")) + sorted((ROOT / "twin").rglob("*.py"))
    found = [w for f in files for w in unscoped_writes(f.relative_to(ROOT).as_posix(), f.read_text())]
    assert not found, "use mock.patch / patch.dict / patch.object in a with block:\n" + "\n".join(found)


def test_the_guard_finds_an_unscoped_write():
    source = ("from twin.cost import marlin_blocks\nfrom twin.cost.mla_request import MLA_EXPERT_REQUEST_S\n"
              "LOCAL = []\n\ndef f():\n    marlin_blocks.MARLIN_PATHS = set()\n    MLA_EXPERT_REQUEST_S['x'] = 1.0\n"
              "    marlin_blocks.MARLIN_FORMATS.add('fp8')\n    LOCAL[:] = [1]\n    x = {}\n    x['a'] = 1\n"
              "    with mock.patch.dict(MLA_EXPERT_REQUEST_S, {'x': 1.0}):\n        pass\n")
    assert unscoped_writes("probe.py", source) == [
        "probe.py:6: marlin_blocks.MARLIN_PATHS (in f)", "probe.py:7: MLA_EXPERT_REQUEST_S['x'] (in f)",
        "probe.py:8: marlin_blocks.MARLIN_FORMATS.add (in f)", "probe.py:9: LOCAL[:] (in f)"]


def test_the_engine_comparison_ignores_the_foreign_profile_warning_for_its_run_only(monkeypatch):
    import warnings
    mod = load_benchmark("fidelity")
    before = list(warnings.filters)

    def compare(args):
        warnings.simplefilter("ignore", UserWarning)      # as the run does for ForeignProfileWarning
        return 0

    monkeypatch.setattr(mod, "compare", compare)
    assert mod.main([]) == 0
    assert warnings.filters == before
