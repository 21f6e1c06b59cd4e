"""benchmarks/source_fold_terms.py and benchmarks/eager_host_prior.py (issue 33, round 10): the fold's values as its
simulations used them, the term groups, and the eager layer model's op count."""

from __future__ import annotations

import json

import torch
from benchmark_module import load_benchmark
from twin.fitting.joint import default_start
from twin.fitting.launch_prior import DENSE_LAYER_OPS


def _report(tmp_path, params: dict) -> object:
    path = tmp_path / "fold.json"
    folds = [{"held_out": "inference-perf", "params": {}}, {"held_out": "silicon", "params": params}]
    path.write_text(json.dumps({"folds": {"source": {"folds": folds}}}))
    return path


def test_fold_values_fall_back_to_the_unscoped_term(tmp_path):
    m = load_benchmark("source_fold_terms")
    params = {n.split("@")[0]: 0.5 for n in m.ALL} | {"eager_layer_host_s@blackwell": 0.0,
                                                       "memory_efficiency": 0.93}
    values = m.fold_values(_report(tmp_path, params))
    assert set(m.ALL) <= set(values)                                  # and every other value the fold carries
    assert values["eager_layer_host_s@blackwell"] == 0.0             # the fold's own scoped value
    assert values["memory_efficiency@blackwell"] == 0.93             # no scoped value: the unscoped one
    assert values["request_path_s@client_vllm_bench"] == params["request_path_s"]


def test_every_group_term_has_an_embedded_value_and_one_group():
    m = load_benchmark("source_fold_terms")
    assert len(m.ALL) == len(set(m.ALL))
    embedded = default_start(m.ALL)
    assert all(embedded.get(n) is not None for n in m.ALL)


def test_eager_layer_model_runs_the_counted_ops_once_each():
    m = load_benchmark("eager_host_prior")
    assert m.OPS_PER_LAYER == DENSE_LAYER_OPS
    layer = m.DenseLayer()
    ops = [mod for mod in layer.modules() if isinstance(mod, m.DispatchedOp)]
    assert len(ops) == DENSE_LAYER_OPS
    calls = []
    for op in ops:
        op.register_forward_hook(lambda mod, _a, _o: calls.append(mod))
    x = torch.ones(4, 8)
    layer(x, x)
    assert len(calls) == DENSE_LAYER_OPS and set(map(id, calls)) == set(map(id, ops))
    assert m.per_op_us(layers=2, repeats=2) > 0


def test_restoring_a_group_restores_the_paths_the_fold_carries_under_it():
    # round 14: the fold resets each expert path's MoE floor to 0; restoring the generation's floor must reach them
    m = load_benchmark("source_fold_terms")
    fold = {"eager_moe_layer_host_s@blackwell": 0.0, "eager_moe_layer_host_s@blackwell+experts_fp8": 0.0,
            "eager_layer_host_s@blackwell": 0.0, "layer_token_overhead_s@blackwell": 0.0, "step_overhead_s": 2e-3}
    embedded = {"eager_moe_layer_host_s@blackwell": 1.15e-3, "eager_layer_host_s@blackwell": 0.84e-3,
                "layer_token_overhead_s@blackwell": 0.2e-6}
    out = m.restored(fold, m.GROUPS["eager"], embedded)
    assert out["eager_moe_layer_host_s@blackwell+experts_fp8"] == 1.15e-3
    assert out["eager_moe_layer_host_s@blackwell"] == 1.15e-3 and out["eager_layer_host_s@blackwell"] == 0.84e-3
    assert out["layer_token_overhead_s@blackwell"] == 0.0 and out["step_overhead_s"] == 2e-3
    assert fold["eager_moe_layer_host_s@blackwell+experts_fp8"] == 0.0          # the fold itself untouched
