"""The calibration engine: paged attention equals a dense forward pass however a sequence is split across steps,
batched or prefix-shared; sampling; the null block; timing; the SchedulerOutput adapter.

Tolerance: fp32 on the CPU, logits within atol = rtol = 1e-4 of the dense reference (logits are O(1); the
observed differences, from summation order alone, are about 1e-6).
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from calibration.bench_decode import benchmark_decode  # noqa: E402
from calibration.engine import ModelRunner, SeqInput  # noqa: E402
from calibration.model import ModelShape  # noqa: E402
from calibration.timing import StepTimer, TimingStats, measure  # noqa: E402
from calibration.token_ids import (  # noqa: E402
    request_token_ids, segment_seed, segment_token_ids, synthetic_token_ids,
)
from twin.core.request import Request, output_segment_key  # noqa: E402
from twin.core.scheduler_output import SchedulerOutput  # noqa: E402

TOL = dict(atol=1e-4, rtol=1e-4)
BS = 16
TINY = ModelShape.tiny()


def make_runner(**kw) -> ModelRunner:
    kw.setdefault("num_blocks", 64)
    return ModelRunner(TINY, "cpu", torch.float32, block_size=BS, seed=0, **kw)


@pytest.fixture(scope="module")
def reference():
    """Dense logits of any token sequence (the model weights are the same for every seed-0 runner)."""
    model = make_runner(num_blocks=2).model
    cache = {}

    def ref(ids):
        key = tuple(ids)
        if key not in cache:
            cache[key] = model.reference_logits(ids)
        return cache[key]
    return ref


def tokens(n: int, key="seq") -> list[int]:
    return segment_token_ids(key, 0, n, TINY.vocab_size).tolist()


def table(first: int, n_tokens: int) -> list[int]:
    return list(range(first, first + math.ceil(n_tokens / BS)))


# ---- one sequence, split every way ------------------------------------------------------------------------

@pytest.mark.parametrize("n, causal_min", [(45, 32), (45, 10**9), (20, 32), (1, 32), (48, 32)])
def test_full_prefill_matches_dense(reference, n, causal_min):
    runner = make_runner(causal_min_tokens=causal_min)
    ids = tokens(n)
    out = runner.execute_batch([SeqInput(ids, 0, table(1, n))], return_logits=True)
    torch.testing.assert_close(out.logits[0], reference(ids), **TOL)
    assert out.sampled_token_ids == [[int(reference(ids)[-1].argmax())]]


def test_chunked_prefill_matches_dense(reference):
    runner = make_runner()
    ids, bt = tokens(61), table(3, 61)
    chunks, got, start = [16, 7, 13, 25], [], 0
    for n in chunks:
        last = start + n == len(ids)
        out = runner.execute_batch([SeqInput(ids[start:start + n], start, bt, 1 if last else 0)],
                                   return_logits=True)
        assert out.sampled_token_ids == [[int(reference(ids)[-1].argmax())]] if last else [[]]
        got.append(out.logits[0])
        start += n
    torch.testing.assert_close(torch.cat(got), reference(ids), **TOL)


def test_prefill_then_decode_matches_dense(reference):
    runner = make_runner()
    ids, bt = tokens(40), table(1, 40)
    out = runner.execute_batch([SeqInput(ids[:22], 0, bt)], return_logits=True)
    got = [out.logits[0]]
    for p in range(22, 40):
        out = runner.execute_batch([SeqInput([ids[p]], p, bt)], return_logits=True)
        got.append(out.logits[0])
        assert out.sampled_token_ids == [[int(reference(ids)[p].argmax())]]
    torch.testing.assert_close(torch.cat(got), reference(ids), **TOL)


def test_prefix_cache_hit_computes_only_the_suffix(reference):
    runner = make_runner()
    a = tokens(40, "A")
    b = a[:32] + tokens(19, "B")                  # shares two full blocks with A
    runner.execute_batch([SeqInput(a, 0, [4, 9, 2])])
    shared = runner.kv_cache.kv[:, [4, 9]].clone()
    out = runner.execute_batch([SeqInput(b[32:], 32, [4, 9, 11, 12])], return_logits=True)
    assert out.num_tokens == 19
    torch.testing.assert_close(out.logits[0], reference(b)[32:], **TOL)
    assert torch.equal(runner.kv_cache.kv[:, [4, 9]], shared)        # the shared blocks were only read


# ---- batches ------------------------------------------------------------------------------------------------

def _mixed_history():
    """(history steps, final mixed step) for five sequences: a fresh long prefill, a decode, a middle prefill
    chunk, a 3-draft verification and a short fresh prefill, each with its own blocks."""
    s = {k: tokens(n, k) for k, n in [("p", 40), ("d", 31), ("c", 50), ("v", 29), ("f", 5)]}
    bt = {"p": table(1, 40), "d": table(4, 31), "c": table(6, 50), "v": table(10, 29), "f": table(13, 5)}
    history = [SeqInput(s["d"][:30], 0, bt["d"]), SeqInput(s["c"][:16], 0, bt["c"], 0),
               SeqInput(s["v"][:25], 0, bt["v"])]
    final = [SeqInput(s["p"], 0, bt["p"]), SeqInput(s["d"][30:], 30, bt["d"]),
             SeqInput(s["c"][16:28], 16, bt["c"], 0), SeqInput(s["v"][25:], 25, bt["v"], 4),
             SeqInput(s["f"], 0, bt["f"])]
    return s, history, final


@pytest.mark.parametrize("padding_factor, slack", [(2.0, 1 << 16), (1.0, 0), (1e9, 0)])
def test_mixed_step_equals_each_sequence_alone(reference, padding_factor, slack):
    s, history, final = _mixed_history()
    batched = make_runner(group_padding_factor=padding_factor, group_slack=slack)
    for h in history:
        batched.execute_batch([h])
    out = batched.execute_batch(final, return_logits=True)
    assert out.num_tokens == 40 + 1 + 12 + 4 + 5
    alone = make_runner()
    for h in history:
        alone.execute_batch([h])
    for i, (key, x) in enumerate(zip("pdcvf", final)):
        single = alone.execute_batch([x], return_logits=True)
        torch.testing.assert_close(out.logits[i], single.logits[0], **TOL)
        torch.testing.assert_close(out.logits[i], reference(s[key])[x.start_pos:x.end_pos], **TOL)
        assert out.sampled_token_ids[i] == single.sampled_token_ids[0]
    assert [len(t) for t in out.sampled_token_ids] == [1, 1, 0, 4, 1]
    # the verification returns the target's token at each of the k + 1 positions
    assert out.sampled_token_ids[3] == reference(s["v"])[25:29].argmax(-1).tolist()


def test_grouping_bounds_padding():
    runner = make_runner(group_padding_factor=2.0, group_slack=0)
    # decodes with similar contexts share a group; a far longer one and a prefill chunk do not
    groups = runner._group_sequences(lens=[1, 1, 1, 1, 20], starts=[100, 110, 105, 1000, 40])
    assert sorted(map(sorted, groups)) == [[0, 1, 2], [3], [4]]
    assert runner._group_sequences(lens=[64, 1], starts=[0, 10]) == [[0], [1]]   # long fresh prefill: causal


# ---- sampling -----------------------------------------------------------------------------------------------

def test_greedy_decoding_is_deterministic():
    def run():
        runner = make_runner()
        ids, bt, out = tokens(20), table(1, 40), []
        nxt = runner.execute_batch([SeqInput(ids, 0, bt)]).sampled_token_ids[0]
        for p in range(20, 35):
            out += nxt
            nxt = runner.execute_batch([SeqInput(nxt, p, bt)]).sampled_token_ids[0]
        return out
    assert run() == run()


def test_greedy_decoding_equals_a_plain_reference_loop(reference):
    """Greedy generation through the paged engine (prefill, then one token a step) gives exactly the tokens of a
    plain loop that re-runs the dense model over the whole sequence and takes the argmax each time."""
    runner = make_runner()
    prompt, bt = tokens(20, "greedy"), table(1, 40)
    engine_out = []
    nxt = runner.execute_batch([SeqInput(prompt, 0, bt)]).sampled_token_ids[0]
    for p in range(20, 32):
        engine_out += nxt
        nxt = runner.execute_batch([SeqInput(nxt, p, bt)]).sampled_token_ids[0]
    seq, ref_out = list(prompt), []
    for _ in range(12):
        tok = int(reference(seq)[-1].argmax())
        ref_out.append(tok)
        seq.append(tok)
    assert engine_out == ref_out


def test_seeded_sampling_is_reproducible():
    steps = [SeqInput(tokens(12, i), 0, table(1 + 2 * i, 12), temperature=1.0) for i in range(6)]

    def run(seed):
        runner = ModelRunner(TINY, "cpu", torch.float32, num_blocks=32, block_size=BS, seed=0)
        runner.reseed(seed)
        return [runner.execute_batch(steps).sampled_token_ids for _ in range(4)]
    a, b, c = run(1), run(1), run(2)
    assert a == b and a != c
    assert len({tuple(map(tuple, step)) for step in a}) > 1         # temperature 1 actually samples


def test_temperature_zero_overrides_runner_default():
    runner = make_runner(temperature=1.0)
    ids = tokens(12)
    greedy = make_runner().execute_batch([SeqInput(ids, 0, [1])]).sampled_token_ids
    assert runner.execute_batch([SeqInput(ids, 0, [1], temperature=0.0)]).sampled_token_ids == greedy


# ---- the null block and bad inputs ------------------------------------------------------------------------

def test_block_zero_is_never_written():
    runner = make_runner()
    _, history, final = _mixed_history()
    for h in history:
        runner.execute_batch([h])
    runner.execute_batch(final)
    assert not runner.kv_cache.kv[:, 0].any()
    assert runner.kv_cache.kv[:, 1].any()


def test_bad_inputs_are_rejected():
    runner = make_runner()
    with pytest.raises(ValueError, match="null block"):
        runner.execute_batch([SeqInput(tokens(20), 0, [1, 0])])
    with pytest.raises(ValueError, match="need 2"):
        runner.execute_batch([SeqInput(tokens(20), 0, [1])])
    with pytest.raises(ValueError, match="num_sampled"):
        runner.execute_batch([SeqInput(tokens(3), 0, [1], 4)])
    with pytest.raises(ValueError, match="token ids"):
        runner.execute_batch([SeqInput([TINY.vocab_size], 0, [1])])
    assert not runner.kv_cache.kv.any()                                 # nothing was written


# ---- timing -------------------------------------------------------------------------------------------------

def test_measure_discards_warmup_and_reports_the_median():
    ticks = iter([0.0, 1.0, 10.0, 13.0, 20.0, 22.0])              # three timed runs: 1, 3, 2 seconds
    calls = []
    stats = measure(lambda: calls.append(1), warmup=2, repeats=3, clock=lambda: next(ticks))
    assert len(calls) == 5 and stats.samples_s == (1.0, 3.0, 2.0)
    assert stats.median_s == 2.0 and stats.min_s == 1.0 and stats.max_s == 3.0 and stats.num_warmup == 2
    assert isinstance(stats, TimingStats) and stats.as_dict()["repeats"] == 3
    with pytest.raises(ValueError, match="repeats"):
        measure(lambda: None, repeats=0)


def test_step_times_are_positive_and_finite():
    with StepTimer("cpu") as t:
        sum(range(1000))
    assert t.elapsed_s > 0 and t.device_s is None
    out = make_runner().execute_batch([SeqInput(tokens(20), 0, [1, 2])])
    assert 0 < out.elapsed_s < 60 and out.device_s is None
    rows = benchmark_decode((1, 2), context_len=20, warmup=1, repeats=2)
    assert [r["batch_size"] for r in rows] == [1, 2]
    assert all(0 < r["median_s"] < 60 and math.isfinite(r["tokens_per_s"]) for r in rows)


# ---- synthetic token identity and the SchedulerOutput adapter ---------------------------------------------

def test_synthetic_tokens_are_stable_and_shared_by_segment():
    # golden values: blake2b + SplitMix64, independent of PYTHONHASHSEED and of the process
    assert segment_seed(("sys", 0)) == segment_seed(("sys", 0)) != segment_seed(("sys", 1))
    assert segment_token_ids(("sys", 0), 0, 5, 8192).tolist() == GOLDEN_SYS0
    whole = segment_token_ids("k", 0, 100, 1000)
    assert whole[37:61].tolist() == segment_token_ids("k", 37, 61, 1000).tolist()
    assert ((whole >= 0) & (whole < 1000)).all()
    a = synthetic_token_ids([("sys", 30), ("a", 10)], 0, 40, 8192)
    b = synthetic_token_ids([("sys", 30), ("b", 10)], 0, 40, 8192)
    assert a[:30] == b[:30] and a[30:] != b[30:]
    assert synthetic_token_ids([("sys", 30), ("a", 10)], 25, 35, 8192) == a[25:35]
    with pytest.raises(ValueError, match="fewer than"):
        synthetic_token_ids([("sys", 30)], 0, 31, 8192)


GOLDEN_SYS0 = [1530, 6042, 270, 5927, 2787]


def test_request_token_ids():
    seg = Request("r1", 0.0, 40, 5, prompt_segments=[(("sys", 0), 32), ("q1", 8)])
    ids = request_token_ids(seg, 0, 45, TINY.vocab_size)
    assert ids[:32] == segment_token_ids(("sys", 0), 0, 32, TINY.vocab_size).tolist()
    assert ids[40:] == segment_token_ids(output_segment_key("r1"), 0, 5, TINY.vocab_size).tolist()
    real = Request("r2", 0.0, 4, 5, prompt_token_ids=[7, 8, 9, 10])
    real.append_output_tokens(2, [11, 12])
    real.spec_token_ids = [13]
    real.num_spec_tokens = 2                                    # one draft not named: synthetic fill
    got = request_token_ids(real, 1, 9, TINY.vocab_size)
    assert got[:6] == [8, 9, 10, 11, 12, 13]
    assert got[6:] == segment_token_ids(output_segment_key("r2"), 3, 5, TINY.vocab_size).tolist()


class _FakeKVManager:
    def __init__(self, tables):
        self.tables = tables

    def get_block_ids(self, request_id):
        return self.tables[request_id]


def test_scheduler_output_adapter(reference):
    runner = make_runner()
    prompt = tokens(40, "P")
    shared = Request("a", 0.0, 40, 8, prompt_token_ids=prompt)
    seg = Request("b", 0.0, 20, 4, prompt_segments=[("S", 20)])
    kv = _FakeKVManager({"a": [1, 2, 3], "b": [5, 6]})
    # step 1: a partial chunk of a, all of b
    so = SchedulerOutput(0, requests=[shared, seg], num_new_tokens=[24, 20], num_computed_before=[0, 0],
                         num_spec_tokens=[0, 0])
    out = runner.execute(so, kv_cache_manager=kv, return_logits=True)
    assert out.sampled_token_ids[0] == [] and len(out.sampled_token_ids[1]) == 1
    b_ids = synthetic_token_ids([("S", 20)], 0, 20, TINY.vocab_size)
    torch.testing.assert_close(out.logits[1], reference(b_ids), **TOL)
    # step 2: the rest of a
    so = SchedulerOutput(1, requests=[shared], num_new_tokens=[16], num_computed_before=[24], num_spec_tokens=[0])
    out = runner.execute(so, [[1, 2, 3]], return_logits=True)
    first = out.sampled_token_ids[0]
    assert first == [int(reference(prompt)[-1].argmax())]
    shared.append_output_tokens(1, first)
    # step 3: decode with two drafts -> three target tokens, one per verified position
    shared.spec_token_ids = [int(reference(prompt + first)[-1].argmax()), 17]
    shared.num_spec_tokens = 2
    seq = prompt + first + shared.spec_token_ids
    so = SchedulerOutput(2, requests=[shared], num_new_tokens=[3], num_computed_before=[40], num_spec_tokens=[2])
    out = runner.execute(so, kv_cache_manager=_FakeKVManager({"a": [1, 2, 3, 4]}))
    assert out.sampled_token_ids == [reference(seq)[40:43].argmax(-1).tolist()]
    with pytest.raises(ValueError, match="block tables"):
        runner.execute(so, [[1], [2]])


def test_bf16_on_cpu_matches_dense():
    """bf16 weights, KV and activations: logits within 0.1 of the dense bf16 reference (observed about 0.03)."""
    s, history, final = _mixed_history()
    runner = ModelRunner(TINY, "cpu", torch.bfloat16, num_blocks=64, block_size=BS, seed=0)
    for h in history:
        runner.execute_batch([h])
    out = runner.execute_batch(final, return_logits=True)
    for i, (key, x) in enumerate(zip("pdcvf", final)):
        ref = runner.model.reference_logits(s[key])[x.start_pos:x.end_pos]
        torch.testing.assert_close(out.logits[i], ref, atol=0.1, rtol=0.1)


# ---- CUDA ---------------------------------------------------------------------------------------------------

@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype, tol", [(torch.float32, 2e-3), (torch.bfloat16, 0.15)])
def test_cuda_engine_matches_dense(dtype, tol):
    """On CUDA (TF32 may be on for fp32 GEMMs; bf16 logits agree to about 0.1): the mixed step and chunked
    prefill equal the dense reference on the same device; timing uses CUDA events."""
    s, history, final = _mixed_history()
    runner = ModelRunner(TINY, "cuda", dtype, num_blocks=64, block_size=BS, seed=0)
    for h in history:
        runner.execute_batch([h])
    out = runner.execute_batch(final, return_logits=True)
    assert out.device_s is not None and 0 < out.device_s <= out.elapsed_s * 1.5
    for i, (key, x) in enumerate(zip("pdcvf", final)):
        ref = runner.model.reference_logits(s[key])[x.start_pos:x.end_pos]
        torch.testing.assert_close(out.logits[i], ref, atol=tol, rtol=tol)
    assert not runner.kv_cache.kv[:, 0].any()
    rows = benchmark_decode((1, 16), context_len=128, device="cuda", dtype=dtype, warmup=2, repeats=5)
    assert all(r["median_s"] > 0 for r in rows)


def test_cudnn_attention_switch_returns_the_previous_setting_and_restores():
    from calibration.paged_attention import set_cudnn_attention

    if not hasattr(torch.backends.cuda, "enable_cudnn_sdp"):
        pytest.skip("this PyTorch has no cuDNN attention switch")
    before = torch.backends.cuda.cudnn_sdp_enabled()
    try:
        assert set_cudnn_attention(False) is before
        assert torch.backends.cuda.cudnn_sdp_enabled() is False
        assert set_cudnn_attention(True) is False
        assert torch.backends.cuda.cudnn_sdp_enabled() is True
    finally:
        torch.backends.cuda.enable_cudnn_sdp(before)
