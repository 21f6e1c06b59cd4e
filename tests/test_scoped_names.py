"""A scoped term's scope must be able to cover a deployment (issue 33, round 20, 33za): ``in_scope`` matches nothing
on an unknown scope (``compute_efficiency@nvfp4``: ``nvfp4`` is an expert scope only) or on two of one exclusive
kind (``hopper+blackwell``), so such a value was silently ignored. ``twin.fitting.scoped.check_scoped_name`` makes
it one line naming the term and the scopes it accepts, wherever scoped terms are read: the scripts' ``--set``
reader (``parse_scoped_set_options``), ``b200_moe_transfer.known_names``, fidelity_real's ``--terms`` /
``--add-terms`` / ``--drop-terms`` / ``--allow-leak``, and ``params_for`` (where every scoped value is applied)."""

from __future__ import annotations

import argparse
from types import SimpleNamespace

import pytest

from tests.benchmark_module import load_benchmark
from twin.errors import TwinInputError
from twin.fitting.joint import JOINT_NAMES
from twin.fitting.parameters import PARAMETERS_BY_NAME
from twin.fitting.provenance import embedded_entries
from twin.fitting.scoped import SCOPES, check_scoped_name, params_for, parse_scoped_set_options

ACCEPTS = "compute_efficiency takes @SCOPE, SCOPE one of " + ", ".join(SCOPES) + \
    " or a '+' of several (e.g. hopper+experts_fp8)"


def test_valid_names_pass_unchanged():
    for name in ("compute_efficiency", "memory_efficiency@blackwell", "moe_layer_overhead_s@hopper+experts_fp8",
                 "eager_moe_layer_host_s@blackwell+gqa+experts_nvfp4", "request_path_s@client_vllm_bench+vllm_0.10",
                 "kv_memory_efficiency@hopper+kv_fp8", "quant_weight_efficiency@fp8+int4"):
        assert check_scoped_name(name) == name


def test_every_name_the_twin_itself_uses_passes():
    """The fit's parameters, the joint fit's names and every embedded entry: no valid input changes."""
    fidelity_real = load_benchmark("fidelity_real")
    names = set(PARAMETERS_BY_NAME) | set(JOINT_NAMES) | set(fidelity_real.FOLD_TERMS) | {
        e.parameter for e in embedded_entries()}
    for name in sorted(names):
        assert check_scoped_name(name) == name


def test_unknown_scope_is_one_line_naming_the_term_and_its_scopes():
    with pytest.raises(TwinInputError) as err:
        check_scoped_name("compute_efficiency@nvfp4")
    assert str(err.value) == ("--set compute_efficiency@nvfp4: unknown scope 'nvfp4' (did you mean "
                              f"'experts_nvfp4'?); {ACCEPTS}")
    assert "\n" not in str(err.value)
    with pytest.raises(TwinInputError, match=r"^--with compute_efficiency@hoper: unknown scope 'hoper' \(did you "
                                             r"mean 'hopper'\?\); compute_efficiency takes @SCOPE"):
        check_scoped_name("compute_efficiency@hoper", "--with")
    with pytest.raises(TwinInputError, match=r"unknown scope 'zzz'; compute_efficiency takes"):
        check_scoped_name("compute_efficiency@zzz")


@pytest.mark.parametrize("name, message", [
    ("compute_efficiency@hopper+blackwell", "--set compute_efficiency@hopper+blackwell: hopper and blackwell cover "
                                            "no deployment together (one GPU generation each); "),
    ("compute_efficiency@mla+gqa", "--set compute_efficiency@mla+gqa: mla and gqa cover no deployment together "
                                   "(one attention architecture each); "),
    ("compute_efficiency@experts_fp8+experts_int4", "--set compute_efficiency@experts_fp8+experts_int4: experts_fp8 "
     "and experts_int4 cover no deployment together (one routed experts' format each); "),
    ("compute_efficiency@hopper+hopper", "--set compute_efficiency@hopper+hopper: a scope part given twice; "),
    ("compute_efficiency@", "--set compute_efficiency@: unknown scope ''; "),
    ("compute_efficiency@hopper+", "--set compute_efficiency@hopper+: unknown scope ''; "),
])
def test_a_scope_that_covers_nothing_is_an_error(name, message):
    with pytest.raises(TwinInputError) as err:
        check_scoped_name(name)
    assert str(err.value) == message + ACCEPTS


def test_no_term_before_the_separator():
    with pytest.raises(TwinInputError, match=r"^--set @hopper: no term before '@'$"):
        check_scoped_name("@hopper")


def test_the_set_reader_checks_scopes():
    assert parse_scoped_set_options(["memory_efficiency@blackwell=0.9", "step_overhead_s=0.002"]) == {
        "memory_efficiency@blackwell": 0.9, "step_overhead_s": 0.002}
    with pytest.raises(TwinInputError, match=r"^--set compute_efficiency@nvfp4: unknown scope 'nvfp4'"):
        parse_scoped_set_options(["compute_efficiency@nvfp4=0.3"])
    with pytest.raises(TwinInputError, match=r"^--prior x: memory_efficiency@ampere\+hopper: ampere and hopper"):
        parse_scoped_set_options(["memory_efficiency@ampere+hopper=0.9"], flag="--prior x:")
    with pytest.raises(TwinInputError, match=r"^--set step_overhead_s: given twice$"):    # the numeric reader's own
        parse_scoped_set_options(["step_overhead_s=1", "step_overhead_s=2"])


def test_params_for_refuses_a_scope_that_covers_nothing_from_any_source():
    """The catch-all where every scoped value is applied (a fold report's values, a script's own tables)."""
    dep = SimpleNamespace(gpu="h100")
    assert params_for({"memory_efficiency": 0.9, "memory_efficiency@blackwell": 0.8}, dep) == {"memory_efficiency": 0.9}
    assert params_for({"memory_efficiency": 0.9, "memory_efficiency@hopper": 0.7}, dep) == {"memory_efficiency": 0.7}
    with pytest.raises(TwinInputError, match=r"^scoped parameter compute_efficiency@nvfp4: unknown scope 'nvfp4'"):
        params_for({"compute_efficiency": 0.6, "compute_efficiency@nvfp4": 0.3}, dep)


def test_known_names_uses_the_same_check():
    m = load_benchmark("b200_moe_transfer")
    with pytest.raises(TwinInputError, match=r"^--term layer_token_overhead_s@blackwell\+hopper: blackwell and "
                                             r"hopper cover no deployment"):
        m.known_names({"layer_token_overhead_s@blackwell+hopper": 0.0}, "--term")


def _args(**kw) -> argparse.Namespace:
    base = dict(terms="", add_terms="", drop_terms="", joint=False, no_refit=False, defaults_only=False,
                client_path_rows="all", case_weights="source")
    return argparse.Namespace(**(base | kw))


def test_fidelity_real_terms_and_leaks():
    fr = load_benchmark("fidelity_real")
    assert fr._names(_args(terms="memory_efficiency,memory_efficiency@blackwell")) == (
        "memory_efficiency", "memory_efficiency@blackwell")
    with pytest.raises(TwinInputError, match=r"^--terms/--add-terms/--drop-terms compute_efficiency@nvfp4: unknown "
                                             r"scope 'nvfp4' \(did you mean 'experts_nvfp4'\?\)"):
        fr._names(_args(terms="compute_efficiency@nvfp4"))
    with pytest.raises(TwinInputError, match=r"^--terms/--add-terms/--drop-terms memory_efficiency@blackwel:"):
        fr._names(_args(drop_terms="memory_efficiency@blackwel"))
    assert fr.allowed_leaks(" request_path_s , layer_overhead_s@mla") == ("request_path_s", "layer_overhead_s@mla")
    assert fr.allowed_leaks("") == ()
    with pytest.raises(TwinInputError, match=r"^--allow-leak layer_overhead_s@mal: unknown scope 'mal' \(did you "
                                             r"mean 'mla'\?\)"):
        fr.allowed_leaks("layer_overhead_s@mal")
    with pytest.raises(TwinInputError, match=r"^--allow-leak compute_efficiency@blackwell: not an embedded "
                                             r"parameter a fold resets; allowed: memory_efficiency, "):
        fr.allowed_leaks("compute_efficiency@blackwell")
