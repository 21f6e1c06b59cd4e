"""When speculative decoding pays, on the roofline twin (llama-3.1-8b on one H100, llama-3.2-1b as draft model):
zero acceptance is strictly slower, at batch 1 the speedup rises with the acceptance and matches what the cost
model predicts, and at high concurrency (compute-bound) the gain shrinks and turns into a loss. Drafter costs
and memory come from the cost model and the shapes, not constants."""

from __future__ import annotations

import pytest

from twin.cost.roofline import DEFAULT_MEMORY_EFFICIENCY

from spec_decode_helpers import run_metrics, scenario_body, spec_section
from twin.sim.deployment import resolve_deployment
from twin.hardware.catalog import resolve_gpu, resolve_model
from twin.cost.roofline import RooflineCostModel
from twin.spec_decode import draft_model_drafter, head_drafter
from twin.spec_decode.drafters import PassShape


def _speedup(concurrency: int, spec: dict, **kw) -> tuple[float, float]:
    """(output-throughput speedup, TPOT speedup) of ``spec`` over no speculation, same traffic and seed."""
    base = run_metrics(scenario_body(concurrency, None, **kw))
    with_spec = run_metrics(scenario_body(concurrency, spec, **kw))
    return (with_spec["output_throughput"] / base["output_throughput"],
            base["mean_tpot_ms"] / with_spec["mean_tpot_ms"])


@pytest.mark.parametrize("concurrency", [1, 16])
def test_zero_acceptance_draft_model_is_strictly_slower(concurrency):
    tput, tpot = _speedup(concurrency, spec_section("draft_model", 0.0))
    assert tput < 0.9 and tpot < 0.9


def test_batch1_speedup_rises_with_acceptance():
    ups = [_speedup(1, spec_section("draft_model", a))[1] for a in (0.0, 0.3, 0.6, 0.8, 0.95)]
    assert all(x < y for x, y in zip(ups, ups[1:])), ups
    assert ups[0] < 1 < ups[2] and ups[-1] > 2


@pytest.mark.parametrize("method,a", [("draft_model", 0.6), ("eagle", 0.8)])
def test_batch1_speedup_is_what_the_cost_model_predicts(method, a):
    """At batch 1 a spec step costs the target's (1 + k)-token verification plus the drafter's k passes and
    emits the acceptance length: TPOT speedup = t(decode) x acceptance length / (t(verify) + t(draft)),
    averaged over the contexts the requests pass through. Within 3 % (what remains is each request's last
    step, cut short by its length)."""
    k, prompt, output = 4, 256, 512
    body = scenario_body(1, spec_section(method, a, k), prompt=prompt, output=output, num_requests=12)
    dep = resolve_deployment(body)
    cost = dep.cost_model_factory()
    ctxs = range(prompt, prompt + output)
    t_dec = sum(cost.step_time_s(PassShape([1], [c], [0])) for c in ctxs) / output
    t_spec = sum(cost.step_time_s(verify) + dep.drafter.draft_time_s(verify, k)
                 for verify in (PassShape([1 + k], [c], [k]) for c in ctxs)) / output
    base = run_metrics(scenario_body(1, None, prompt=prompt, output=output, num_requests=12))
    spec = run_metrics(body)
    predicted = t_dec * spec["spec_decode_acceptance_length"] / t_spec
    assert base["mean_tpot_ms"] / spec["mean_tpot_ms"] == pytest.approx(predicted, rel=0.03)


@pytest.mark.parametrize("method", ["draft_model", "eagle"])
def test_gain_shrinks_and_turns_into_a_loss_at_high_concurrency(method):
    """Short contexts (256-token prompts, 128-token outputs): the verified tokens turn a large batch
    compute-bound, so each extra token costs real FLOPs while a rejected one yields nothing."""
    ups = {c: _speedup(c, spec_section(method, 0.7))[0] for c in (1, 16, 64, 256)}
    assert ups[1] > ups[16] > ups[64] > ups[256], ups
    assert ups[1] > 1.3 and ups[256] < 1.0, ups
    low = {c: _speedup(c, spec_section(method, 0.4))[0] for c in (1, 256)}
    assert low[256] < low[1] and low[256] < 0.8, low


# ---- drafter costs and memory -----------------------------------------------------------------------------
def _shape(n_seqs: int, tokens: int = 1, ctx: int = 500) -> PassShape:
    return PassShape([tokens] * n_seqs, [ctx] * n_seqs, [0] * n_seqs)


def test_draft_model_passes_are_costed_by_the_roofline_of_the_draft():
    target, draft, gpu = resolve_model("llama-3.1-8b"), resolve_model("llama-3.2-1b"), resolve_gpu("H100-SXM")
    d = draft_model_drafter(target, draft, gpu, pass_overhead_s=1e-4)
    ref = RooflineCostModel(draft, gpu, step_overhead_s=1e-4, per_seq_overhead_s=0.0)
    step = PassShape([5, 5, 300], [400, 600, 0], [4, 4, 0])
    times = d.pass_times_s(step, 4)
    assert len(times) == 4
    # plus each sequence's row of logits written and read back for the argmax (2 x 2 bytes x vocabulary)
    logits = 3 * 2 * 2 * draft.vocab_size / (gpu.memory_bandwidth_bytes_per_s * DEFAULT_MEMORY_EFFICIENCY)
    assert d.logits_bytes_per_seq == 4 * draft.vocab_size
    assert times[0] == pytest.approx(ref.step_time_s(PassShape([5, 5, 300], [400, 600, 0], [0, 0, 0])) + logits)
    assert times[1] == pytest.approx(ref.step_time_s(PassShape([1, 1, 1], [405, 605, 300], [0, 0, 0])) + logits)
    assert d.draft_time_s(step, 4) == pytest.approx(sum(times))
    # batch 1 reads the draft's weights once per pass: ~2.3 GiB at 80 % of 3.35 TB/s, + the pass overhead
    one = d.pass_times_s(_shape(1), 2)[1]
    assert one == pytest.approx(draft.weight_read_bytes() / (3.35e12 * DEFAULT_MEMORY_EFFICIENCY) + 1e-4, rel=0.05)
    # memory-bound at small batch, compute-bound at large: the pass time grows with the batch
    assert d.draft_time_s(_shape(8), 4) < 1.1 * d.draft_time_s(_shape(1), 4)
    assert d.draft_time_s(_shape(512, 5), 4) > 2 * d.draft_time_s(_shape(1), 4)
    assert d.weight_bytes == draft.weight_bytes() and d.kv_bytes_per_token == 32 * 1024


def test_head_drafters_derive_from_the_target_shape():
    target, gpu = resolve_model("llama-3.1-8b"), resolve_gpu("H100-SXM")
    eagle = head_drafter(target, "eagle", gpu)
    eagle3 = head_drafter(target, "eagle3", gpu)
    mtp2 = head_drafter(target, "mtp", gpu, draft_layers=2)
    h = target.hidden_size
    layer = target.attention_weight_params_per_layer + target.mlp_params_per_layer
    # one decoder layer + the 2h -> h fc; the LM head and embedding are the target's (not counted again)
    assert eagle.weight_bytes == pytest.approx(2 * (layer + 2 * h * h), rel=0.001)
    assert eagle.kv_bytes_per_token == target.kv_bytes_per_token() // target.num_hidden_layers
    # EAGLE-3: 3h -> h fc, a qkv projection reading [embedding, hidden] (2h wide) and its own 32K-vocabulary
    # LM head
    wide_qkv = h * (target.q_dim + 2 * target.kv_dim)
    assert eagle3.weight_bytes == pytest.approx(2 * (layer + 3 * h * h + wide_qkv + 32000 * h), rel=0.001)
    assert mtp2.kv_bytes_per_token == 2 * eagle.kv_bytes_per_token
    # EAGLE-3's 32K-token logits are scattered into a -inf row of the target's vocabulary for the argmax
    assert eagle3.logits_bytes_per_seq == 2 * (3 * 32000 + 2 * target.vocab_size)
    assert eagle.logits_bytes_per_seq == 2 * 2 * target.vocab_size
    # batch 1: a pass streams one layer, the fc and the full LM head (GPU time; the host's share is the
    # step cost's, tests/test_spec_decode_cost.py)
    one = eagle.pass_times_s(_shape(1), 2)[1]
    read = 2 * (layer + 2 * h * h + target.vocab_size * h)
    assert one == pytest.approx(read / (3.35e12 * DEFAULT_MEMORY_EFFICIENCY), rel=0.05)
    assert eagle3.pass_times_s(_shape(1), 2)[1] < one                   # smaller LM head
    draft = draft_model_drafter(target, resolve_model("llama-3.2-1b"), gpu)
    assert eagle.draft_time_s(_shape(1), 4) < draft.draft_time_s(_shape(1), 4)


def test_tensor_parallel_drafters_split_too():
    target, gpu = resolve_model("llama-3.1-70b"), resolve_gpu("H100-SXM")
    d1 = draft_model_drafter(target, resolve_model("llama-3.2-1b"), gpu, tp=4)
    assert d1.kv_bytes_per_token == 32 * 1024 // 4
    e = head_drafter(target, "eagle", gpu, tp=4)
    assert e.weight_bytes < head_drafter(target, "eagle", gpu, tp=1).weight_bytes / 3
