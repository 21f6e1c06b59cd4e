"""The held-out folds use no embedded value read off the group they hold out (twin.fitting.provenance): each
such value is refit on the training rows or reset to its stated prior, and the fold says which."""

from __future__ import annotations

import dataclasses

import pytest

from twin.cost import default_terms, generation_experts
from twin.fitting import provenance as pv
from twin.fitting.expert_path_prior import pooled_path_prior
from twin.fitting.fit import Case
from twin.fitting.joint import FOLDS, WeightedCase, default_start, run_fold, with_deployments
from twin.fitting.measured_run import LengthSample, MeasuredRun
from twin.fitting.replay import Target, replay
from twin.fitting.silicon import SiliconCase

BASE_RESET = {"memory_efficiency": 0.8, "step_overhead_s": 1e-3, "per_seq_overhead_s": 10e-6,
              "request_path_s": 5e-3, "request_path_jitter_s": 2e-3, "allreduce_latency_s": 8e-6}


def _run(name: str, conc: int = 4) -> MeasuredRun:
    return MeasuredRun(name=name, source="test", num_requests=3 * conc, rate_per_s=float("inf"),
                       max_concurrency=conc, prompt_tokens=LengthSample.constant(512),
                       output_tokens=LengthSample.constant(32), metrics={"completed": 1.0, "mean_ttft_ms": 50.0,
                                                                         "mean_tpot_ms": 10.0},
                       server={"enable_prefix_caching": False, "vllm_version": "0.14"}, experiment=name)


def _as_silicon(case: Case):
    """A plain case typed as a silicon row (the provenance rule tells the sources apart by type)."""
    obj = object.__new__(SiliconCase)
    for f in dataclasses.fields(SiliconCase):
        object.__setattr__(obj, f.name, getattr(case, f.name, f.default if f.default is not dataclasses.MISSING
                                                else None))
    return obj


@pytest.fixture(autouse=True)
def tables_of_round_4(monkeypatch):
    """The embedded tables as round 4 left them (one Blackwell entry), so the plans below are exact whatever
    later rounds embed."""
    monkeypatch.setattr(default_terms, "GENERATION_TERMS", {"blackwell": {"layer_token_overhead_s": 0.2e-6}})
    monkeypatch.setattr(default_terms, "EXPERT_FORMAT_TERMS", {})
    monkeypatch.setattr(generation_experts, "GENERATION_EXPERT_TERMS", {})
    monkeypatch.setattr(default_terms, "SYNC_HOST_TERMS", {"sync_seq_host_s": 0.0})    # round 6 (twin.cost.sync_host)


@pytest.fixture()
def rows():
    """An inference-perf run on H100, silicon rows on H100 and B200 (the llama family), and a B200 MoE row."""
    ip = Case(_run("ip-h100"), Target("llama-2-7b", "H100-SXM", 1))
    h100 = _as_silicon(Case(_run("si-h100"), Target("llama-2-7b", "H100-SXM", 1)))
    b200 = _as_silicon(Case(_run("si-b200"), Target("llama-2-7b", "B200", 1)))
    moe = _as_silicon(Case(_run("si-moe"), Target("mixtral-8x7b", "B200", 2)))
    return [ip, h100, b200, moe]


def test_the_embedded_entries_and_their_stated_priors():
    entries = {e.parameter: e for e in pv.embedded_entries()}
    e = entries["layer_token_overhead_s@blackwell"]
    assert (e.value, e.prior, e.table) == (0.2e-6, 0.0, "GENERATION_TERMS")
    assert e.evidence == "every ground-truth row on blackwell"
    assert entries["memory_efficiency"].value == 0.978 and entries["memory_efficiency"].prior == 0.8
    assert entries["memory_efficiency"].evidence == pv.INFERENCE_PERF
    assert "compute_efficiency" not in entries          # 0.6 is its prior: no evidence to leak


def test_an_entry_added_by_anyone_gets_its_scope_as_evidence_and_a_stated_prior(monkeypatch):
    monkeypatch.setitem(default_terms.GENERATION_TERMS, "hopper", {"per_token_overhead_s": 3e-6})
    monkeypatch.setitem(default_terms.FORMAT_QUANT_EFFICIENCY, "int4", 0.5)
    monkeypatch.setitem(default_terms.EXPERT_FORMAT_TERMS, "nvfp4", {"moe_layer_overhead_s": 2e-5})
    entries = {e.parameter: e for e in pv.embedded_entries()}
    assert entries["per_token_overhead_s@hopper"].prior == 0.0
    assert entries["quant_weight_efficiency@int4"].prior == 1.0
    assert entries["moe_layer_overhead_s@experts_nvfp4"].prior == 0.0       # a fixed time does not pool (round 7)
    assert entries["moe_layer_overhead_s@experts_nvfp4"].evidence == "every ground-truth row on experts_nvfp4"


def test_a_fold_resets_what_its_held_out_group_gave_evidence_to(rows):
    ev = with_deployments(rows)
    b200 = pv.fold_plan("B200", FOLDS["GPU"], ev, ())
    assert b200.fixed == {"layer_token_overhead_s@blackwell": 0.0}
    assert {p: a for p, (_, a) in b200.actions.items()} == {"layer_token_overhead_s@blackwell": pv.RESET}
    assert [b200.affects(d) for _, d in ev] == [False, False, True, True]
    # H100 held out: the serving defaults were fitted on the inference-perf H100 runs
    assert pv.fold_plan("H100-SXM", FOLDS["GPU"], ev, ()).fixed == pytest.approx(BASE_RESET, rel=1e-12)
    # the silicon source held out: the Blackwell entry; the inference-perf source: the serving defaults
    assert pv.fold_plan("silicon", FOLDS["source"], ev, ()).fixed == {"layer_token_overhead_s@blackwell": 0.0}
    assert pv.fold_plan("inference-perf", FOLDS["source"], ev, ()).fixed == pytest.approx(BASE_RESET, rel=1e-12)
    # a family with no evidence row anywhere: nothing changes
    assert pv.fold_plan("qwen3", FOLDS["family"], ev, ()).actions == {}


def test_a_fitted_entry_is_refit_from_its_prior_and_a_let_through_one_is_kept(rows):
    ev = with_deployments(rows)
    plan = pv.fold_plan("B200", FOLDS["GPU"], ev, ("layer_token_overhead_s@blackwell",))
    assert plan.fixed == {} and plan.start == {"layer_token_overhead_s@blackwell": 0.2e-6}   # its embedded value
    assert plan.prior == {"layer_token_overhead_s@blackwell": 0.0}                          # pulled towards
    assert plan.actions["layer_token_overhead_s@blackwell"][1] == pv.REFIT
    unscoped = pv.fold_plan("B200", FOLDS["GPU"], ev, ("layer_token_overhead_s",))   # replaces it everywhere
    assert unscoped.actions["layer_token_overhead_s@blackwell"][1] == pv.REFIT and unscoped.fixed == {}
    assert pv.fold_plan("B200", FOLDS["GPU"], ev, (), allow=("layer_token_overhead_s@blackwell",)).actions == {}


def test_an_unscoped_reset_keeps_the_other_generations_entries_and_inherited_priors(rows, monkeypatch):
    monkeypatch.setitem(default_terms.GENERATION_TERMS, "blackwell", {
        "layer_token_overhead_s": 0.2e-6, "allreduce_latency_s": 12e-6, "fused_allreduce_latency_s": 10e-6})
    ev = with_deployments(rows)
    h100 = pv.fold_plan("H100-SXM", FOLDS["GPU"], ev, ())
    # the Hopper all-reduce latency goes to its prior; Blackwell's own value (B200 rows, not held out) stays
    assert h100.fixed["allreduce_latency_s"] == 8e-6 and h100.fixed["allreduce_latency_s@blackwell"] == 12e-6
    b200 = pv.fold_plan("B200", FOLDS["GPU"], ev, ())
    # Blackwell's all-reduce latencies inherit the unscoped (Hopper) value, 24.7 us, when reset
    assert b200.fixed == {"layer_token_overhead_s@blackwell": 0.0, "allreduce_latency_s@blackwell": 24.7e-6,
                          "fused_allreduce_latency_s@blackwell": 24.7e-6}


def test_the_evidence_is_judged_on_every_row_not_on_the_subsample(rows):
    """The fold's cases lack the B200 llama row (a subsample), the evidence has it: the reset still happens."""
    ev = with_deployments(rows)
    plan = pv.fold_plan("llama", FOLDS["family"], ev, ())
    assert plan.fixed == pytest.approx({**BASE_RESET, "layer_token_overhead_s@blackwell": 0.0}, rel=1e-12)
    fewer = pv.fold_plan("llama", FOLDS["family"], ev[:2], ())
    assert "layer_token_overhead_s@blackwell" not in fewer.fixed


def test_run_fold_predicts_a_held_out_group_without_its_leaked_values(rows):
    cases = [WeightedCase(c.run, c.target) if not isinstance(c, SiliconCase) else c for c in rows]
    sentinel = [{"case": i} for i in range(len(cases))]
    fold = run_fold("GPU", "B200", cases, FOLDS["GPU"], None, names=(), defaults=sentinel)
    assert fold.params == {"layer_token_overhead_s@blackwell": 0.0}
    expect = [replay(c.run, c.target, fold.params).metrics for c in fold.cases]
    assert fold.predicted == expect
    at_defaults = replay(fold.cases[0].run, fold.cases[0].target, default_start(())).metrics
    assert expect[0]["mean_ttft_ms"] < at_defaults["mean_ttft_ms"]     # the 0.2 us/token/layer is gone
    # let through, the same fold costs every case as the defaults do and reuses their predictions
    let = run_fold("GPU", "B200", cases, FOLDS["GPU"], None, names=(), defaults=sentinel,
                   allow=("layer_token_overhead_s@blackwell",))
    assert let.predicted == [{"case": 2}, {"case": 3}] and let.plan.lines() == []


def test_a_refit_entry_starts_from_its_value_pulled_towards_its_prior(rows, monkeypatch):
    """The fold fits the leaked term: the fit starts from the embedded value (a floor has no slope at its prior)
    and its weak prior pulls towards the stated prior; the training rows that term acts on are simulated at the
    start."""
    from twin.fitting import joint
    seen = {}

    def fake_fit(cases, **kw):
        seen.update(kw, cases=cases)
        return type("R", (), {"params": {**kw["fixed"], "layer_token_overhead_s@blackwell": 0.3e-6},
                              "std": {"layer_token_overhead_s@blackwell": 0.01e-6},
                                  "data_share": {"layer_token_overhead_s@blackwell": 1.0}})()

    monkeypatch.setattr(joint, "fit", fake_fit)
    monkeypatch.setattr(joint, "held_at_prior", lambda cases, names: {})
    name = "layer_token_overhead_s@blackwell"
    first = [type("F", (), {"metrics": {"i": i}})() for i in range(len(rows))]
    fold = run_fold("family", "mixtral", rows, FOLDS["family"], first, names=(name,), outer_iterations=1)
    assert fold.plan.actions[name][1] == pv.REFIT
    assert seen["start"][name] == 0.2e-6 and seen["priors"][name] == 0.0 and seen["fixed"] == {}
    # the start is the embedded value, where ``first`` was simulated: every row keeps its first run (round 7: a
    # row the plan costs at the same keywords is not simulated again; tests/test_fitting_fold_stats.py)
    assert seen["first"] == first[:3]        # the fourth row (mixtral) is held out
    assert fold.params[name] == 0.3e-6


def test_the_eager_floors_are_evidence_of_their_named_families_b200_rows_only(rows, monkeypatch):
    from types import SimpleNamespace
    monkeypatch.setitem(default_terms.GENERATION_TERMS, "blackwell", {
        "eager_layer_host_s": 0.84e-3, "eager_moe_layer_host_s": 1.15e-3})
    entries = {e.parameter: e for e in pv.embedded_entries()}
    assert entries["eager_layer_host_s@blackwell"].evidence == "the B200 Llama rows"
    llama_b200, kimi_b200, llama_h100 = rows[2], rows[3], rows[1]
    for case, model, system in ((llama_b200, "meta-llama/Llama-3.1-70B-Instruct", "b200_sxm"),
                                (kimi_b200, "moonshotai/Kimi-K2.5", "b200_sxm"),
                                (llama_h100, "meta-llama/Llama-3.1-70B-Instruct", "h100_sxm")):
        object.__setattr__(case, "row", SimpleNamespace(system=system, model_path=model))
    ev = with_deployments(rows)
    # the per-MoE-layer value was read off the MoE rows GIVEN the Llama rows' per-layer one: both are Llama's
    llama = pv.fold_plan("llama", lambda c: "llama" if c is not kimi_b200 else "kimi", ev, ())
    assert llama.fixed["eager_layer_host_s@blackwell"] == 0.0 and llama.fixed["eager_moe_layer_host_s@blackwell"] == 0.0
    kimi = pv.fold_plan("kimi", lambda c: "llama" if c is not kimi_b200 else "kimi", ev, ())
    # reset to its stated prior (round 9, twin.fitting.launch_prior): the extra ops of a MoE layer at the per-op
    # time of the Hopper per-layer reading, whose rows this fold keeps; each counted expert path its own
    from twin.fitting import launch_prior
    per_layer = pv.HOST_READINGS["eager_layer_host_s@hopper"][0]
    assert kimi.fixed == pytest.approx({"eager_moe_layer_host_s@blackwell": launch_prior.moe_floor_prior_s(per_layer),
                                        **{f"eager_moe_layer_host_s@blackwell+experts_{fmt}": launch_prior.moe_extra_s(
                                            per_layer, ops) for (gen, fmt), (ops, _) in
                                           launch_prior.PATH_LAYER_OPS.items() if gen == "blackwell"}}, rel=1e-12)
    # the H100 Llama row is evidence of neither
    h100 = pv.fold_plan("h100", lambda c: "h100" if c is llama_h100 else "other", ev, ())
    assert "eager_layer_host_s@blackwell" not in h100.actions and "eager_moe_layer_host_s@blackwell" not in h100.actions


def test_an_unseen_expert_kernel_path_is_predicted_from_the_other_paths_values(rows, monkeypatch):
    """Round 7: a held-out expert path's efficiencies take the geometric mean of the other paths' embedded values,
    an efficiency no other path has its flat prior; the other paths keep theirs, and a term outside the pooled
    set (the fixed time, ``layer_token_overhead_s``) keeps its own stated prior."""
    monkeypatch.setitem(default_terms.EXPERT_FORMAT_TERMS, "bf16", {
        "moe_expert_compute_efficiency": 0.5, "moe_layer_overhead_s": 30e-6, "moe_expert_efficiency": 0.8})
    monkeypatch.setattr(generation_experts, "GENERATION_EXPERT_TERMS", {
        ("hopper", "fp8"): {"moe_expert_compute_efficiency": 0.2, "moe_layer_overhead_s": 10e-6},
        ("hopper", "mxfp4"): {"moe_expert_compute_efficiency": 0.45, "layer_token_overhead_s": 0.1e-6}})
    entries = {e.parameter: e for e in pv.embedded_entries()}
    assert {k: e.prior for k, e in entries.items() if "experts_" in k} == {
        "moe_expert_compute_efficiency@experts_bf16": pv.POOLED, "moe_layer_overhead_s@experts_bf16": 0.0,
        "moe_expert_efficiency@experts_bf16": pv.POOLED, "moe_expert_compute_efficiency@hopper+experts_fp8": pv.POOLED,
        "moe_layer_overhead_s@hopper+experts_fp8": 0.0,
        "moe_expert_compute_efficiency@hopper+experts_mxfp4": pv.POOLED,
        "layer_token_overhead_s@hopper+experts_mxfp4": 0.0}
    # the B200 Mixtral row (bf16 experts) held out with its family
    plan = pv.fold_plan("mixtral", FOLDS["family"], with_deployments(rows), ())
    assert plan.fixed == pytest.approx({"layer_token_overhead_s@blackwell": 0.0,
                                        "moe_expert_compute_efficiency@experts_bf16": (0.2 * 0.45) ** 0.5,
                                        "moe_layer_overhead_s@experts_bf16": 0.0,
                                        "moe_expert_efficiency@experts_bf16": 1.0}, rel=1e-12)
    assert all(a == pv.RESET for _, a in plan.actions.values())
    # by hand: no other value, the flat prior; only the paths not held out pool
    es = list(entries.values())
    assert pooled_path_prior("moe_expert_efficiency", es, {"moe_expert_efficiency@experts_bf16"}) == 1.0
    assert pooled_path_prior("moe_expert_compute_efficiency", es, ()) == pytest.approx(
        (0.5 * 0.2 * 0.45) ** (1 / 3), rel=1e-12)


def test_an_expert_paths_eager_floor_holds_beside_the_generation_fit_and_inherits_it_held_out(rows, monkeypatch):
    """Round 8b: an (generation, expert format) value of the eager MoE floor (tried for MiniMax FP8 on B200, not
    embedded) is held beside the fitted ``@blackwell`` key (which would override it otherwise), and a fold that
    holds out its rows gives it the fold's fitted ``@blackwell`` value, not 0."""
    from types import SimpleNamespace

    from twin.fitting.inherit_fitted import inherited_after_fit
    monkeypatch.setitem(default_terms.GENERATION_TERMS, "blackwell", {
        "eager_layer_host_s": 0.84e-3, "eager_moe_layer_host_s": 1.15e-3})
    monkeypatch.setattr(generation_experts, "GENERATION_EXPERT_TERMS",
                        {("blackwell", "fp8"): {"eager_moe_layer_host_s": 0.39e-3}})
    path = "eager_moe_layer_host_s@blackwell+experts_fp8"
    entries = {e.parameter: e for e in pv.embedded_entries()}
    assert entries[path].prior == pv.INHERIT and entries["eager_moe_layer_host_s@blackwell"].prior == pv.HOST
    assert pv.embedded_start(("eager_moe_layer_host_s@blackwell",)) == pytest.approx({
        "eager_moe_layer_host_s@blackwell": 1.15e-3, path: 0.39e-3,
        "eager_moe_layer_host_s@blackwell+gqa+experts_nvfp4": 6 * 0.84e-3 / 16}, rel=1e-12)   # round 14's count
    assert pv.embedded_start(("memory_efficiency",)) == {"memory_efficiency": pv.embedded_start(
        ("memory_efficiency",))["memory_efficiency"]}            # other terms' starts carry no path value
    llama_b200, minimax_b200 = rows[2], rows[3]
    for case, model in ((llama_b200, "meta-llama/Llama-3.1-70B-Instruct"), (minimax_b200, "MiniMaxAI/MiniMax-M2.5")):
        object.__setattr__(case, "row", SimpleNamespace(system="b200_sxm", model_path=model))
    ev = with_deployments(rows)
    group = lambda c: "minimax" if c is minimax_b200 else "other"          # noqa: E731
    held = pv.fold_plan("minimax", group, ev, ("eager_moe_layer_host_s@blackwell",))
    assert held.actions[path][1] == pv.RESET and held.fixed[path] == 0.0
    assert inherited_after_fit(held, {"eager_moe_layer_host_s@blackwell": 1.3e-3}) == {path: 1.3e-3}
    kept = pv.fold_plan("other", lambda c: "other" if c is rows[0] else "minimax", ev,
                        ("eager_moe_layer_host_s@blackwell",))
    assert path not in kept.actions
