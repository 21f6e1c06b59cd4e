"""Decode steps padded to CUDA-graph buckets (on the CPU the same static step runs eagerly): exact buckets,
the same greedy tokens as the ordinary step however the batch and context are padded, the null block never
written, non-qualifying steps on the ordinary path, and the bad-input checks the ordinary path makes."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from calibration.decode_graphs import BATCH_BUCKETS, batch_bucket, blocks_bucket  # noqa: E402
from calibration.engine import ModelRunner, SeqInput  # noqa: E402
from calibration.model import ModelShape  # noqa: E402
from calibration.token_ids import segment_token_ids  # noqa: E402

TINY = ModelShape.tiny()
BS = 16


def test_buckets():
    assert [batch_bucket(b) for b in (1, 2, 3, 5, 17, 25, 256)] == [1, 2, 4, 8, 24, 32, 256]
    assert batch_bucket(257) is None and BATCH_BUCKETS[-1] == 256
    assert [blocks_bucket(n) for n in (0, 1, 2, 3, 5, 8, 9)] == [1, 1, 2, 4, 8, 8, 16]


def _serve(graphs: bool, lens=(5, 17, 40, 33, 64), steps: int = 6):
    """Prefill sequences of different lengths, then greedy decode steps; the tokens of every step."""
    runner = ModelRunner(TINY, "cpu", torch.float32, num_blocks=64, block_size=BS, seed=0, cuda_graphs=graphs)
    tables, nxt = [], 1
    for n in lens:
        k = -(-(n + steps + 1) // BS)
        tables.append(list(range(nxt, nxt + k)))
        nxt += k
    prompts = [segment_token_ids(("p", i), 0, n, TINY.vocab_size).tolist() for i, n in enumerate(lens)]
    out = runner.execute_batch([SeqInput(p, 0, t, 1) for p, t in zip(prompts, tables)])
    last = [o[0] for o in out.sampled_token_ids]
    pos, tokens, calls = list(lens), [last], []
    for _ in range(steps):
        o = runner.execute_batch([SeqInput([last[i]], pos[i], tables[i], 1) for i in range(len(lens))])
        calls.append(o.num_attention_calls)
        last = [x[0] for x in o.sampled_token_ids]
        pos = [p + 1 for p in pos]
        tokens.append(last)
    return tokens, runner, calls


def test_padded_decode_gives_the_ordinary_steps_tokens():
    eager, _, _ = _serve(False)
    padded, runner, calls = _serve(True)
    assert padded == eager
    # five sequences padded to a batch of 8; the longest context (64 + 6 tokens: 5 blocks) to 8 blocks
    assert list(runner.decode_graphs._buckets) == [(8, 8)]
    assert calls == [1] * 6 and runner.decode_graphs.num_captured == 0     # on the CPU: never captured
    assert bool((runner.kv_cache.kv[:, 0] == 0).all())                    # the null block untouched


def test_a_single_sequence_and_a_switch_off_agree():
    eager, _, _ = _serve(False, lens=(3,), steps=4)
    padded, runner, _ = _serve(True, lens=(3,), steps=4)
    assert padded == eager and list(runner.decode_graphs._buckets) == [(1, 1)]


def test_steps_that_do_not_qualify_take_the_ordinary_path():
    runner = ModelRunner(TINY, "cpu", torch.float32, num_blocks=16, block_size=BS, seed=0, cuda_graphs=True)
    ids = segment_token_ids("x", 0, 20, TINY.vocab_size).tolist()
    runner.execute_batch([SeqInput(ids[:19], 0, [1, 2], 1)])                              # a prefill
    runner.execute_batch([SeqInput(ids[19:], 19, [1, 2], 1, temperature=0.7)])           # sampled
    runner.execute_batch([SeqInput(ids[19:], 19, [1, 2], 1)], return_logits=True)        # logits asked for
    assert runner.decode_graphs._buckets == {}
    runner.use_graphs = False
    runner.execute_batch([SeqInput(ids[19:], 19, [1, 2], 1)])
    assert runner.decode_graphs._buckets == {}


@pytest.mark.parametrize("seq, needle", [
    (SeqInput([1], 20, [1], 1), "block table has 1 blocks"),
    (SeqInput([1], 5, [0], 1), "null block 0"),
    (SeqInput([TINY.vocab_size], 5, [1], 1), "token ids must be in"),
])
def test_the_padded_path_checks_its_inputs(seq, needle):
    runner = ModelRunner(TINY, "cpu", torch.float32, num_blocks=8, block_size=BS, seed=0, cuda_graphs=True)
    with pytest.raises(ValueError, match=needle):
        runner.execute_batch([seq])


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_graphs_capture_and_give_the_eager_tokens():
    def run(graphs):
        r = ModelRunner(TINY, "cuda", torch.float32, num_blocks=64, block_size=BS, seed=0, cuda_graphs=graphs)
        ids = segment_token_ids("g", 0, 30, TINY.vocab_size).tolist()
        last = r.execute_batch([SeqInput(ids, 0, [1, 2, 3], 1)]).sampled_token_ids[0]
        out = []
        for k in range(8):
            last = r.execute_batch([SeqInput(last, 30 + k, [1, 2, 3], 1)]).sampled_token_ids[0]
            out.append(last[0])
        return out, r
    eager, _ = run(False)
    graphed, r = run(True)
    assert graphed == eager and r.decode_graphs.num_captured == 1 and r.decode_graphs.error is None
