"""The calibration decoder (shape handling, weights, dense reference) and the paged KV cache tensor."""

from __future__ import annotations

import dataclasses
import json

import pytest

torch = pytest.importorskip("torch")

from calibration.model import LlamaDecoder, ModelShape, apply_rope, from_hf_config, rope_cos_sin  # noqa: E402
from calibration.paged_kv import PagedKVCache  # noqa: E402

TINY = dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4,
            intermediate_size=704, vocab_size=8192, max_position_embeddings=4096)
SMALL = ModelShape(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                   intermediate_size=128, vocab_size=512, max_position_embeddings=256)


# ---- shapes -----------------------------------------------------------------------------------------------

def test_shape_from_dict_and_defaults():
    s = ModelShape.from_any(TINY)
    assert s == ModelShape.tiny()
    assert s.head_dim == 32 and s.q_size == 256 and s.kv_size == 128 and s.num_queries_per_kv == 2
    assert s.rope_theta == 10000.0 and s.rms_norm_eps == 1e-5
    # 2 * 8192 * 256 embeddings/head + 4 layers * (256*512 qkv + 256*256 o + 3*256*704 mlp + 2*256 norms) + 256
    assert s.num_params == 2 * 8192 * 256 + 4 * (256 * 512 + 256 * 256 + 3 * 256 * 704 + 512) + 256


def test_shape_from_dataclass_with_aliases():
    @dataclasses.dataclass
    class Spec:                       # what a catalog ModelSpec might look like
        hidden_size: int = 4096
        num_layers: int = 32
        num_attention_heads: int = 32
        num_key_value_heads: int = 8
        intermediate_size: int = 14336
        vocab_size: int = 128256
        head_dim: int | None = None
        rope_theta: float = 500000.0

    s = ModelShape.from_any(Spec())
    assert (s.num_hidden_layers, s.head_dim, s.kv_size, s.rope_theta) == (32, 128, 1024, 500000.0)


def test_shape_from_hf_config(tmp_path):
    cfg = {**TINY, "head_dim": 32, "rope_theta": 500000, "rms_norm_eps": 1e-6, "architectures": ["LlamaForCausalLM"],
           "rope_scaling": None, "torch_dtype": "bfloat16"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    s = from_hf_config(tmp_path)
    assert s.rope_theta == 500000.0 and s.rms_norm_eps == 1e-6 and s.num_key_value_heads == 4
    assert ModelShape.from_hf_config(tmp_path / "config.json") == s


def test_shape_errors_name_the_field(tmp_path):
    with pytest.raises(ValueError, match="intermediate_size"):
        ModelShape.from_any({k: v for k, v in TINY.items() if k != "intermediate_size"})
    with pytest.raises(ValueError, match="num_key_value_heads"):
        ModelShape.from_any({**TINY, "num_key_value_heads": 3})
    with pytest.raises(ValueError, match="hidden_size"):
        ModelShape.from_any({**TINY, "hidden_size": 0})
    with pytest.raises(ValueError, match="no such file"):
        ModelShape.from_hf_config(tmp_path / "missing.json")


# ---- weights and forward ----------------------------------------------------------------------------------

def test_random_weights_are_seeded():
    a, b, c = (LlamaDecoder(SMALL, seed=s) for s in (3, 3, 4))
    assert torch.equal(a.layers[1].qkv_proj, b.layers[1].qkv_proj)
    assert not torch.equal(a.layers[1].qkv_proj, c.layers[1].qkv_proj)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_activations_stay_finite_and_order_one_when_deep(dtype):
    deep = dataclasses.replace(SMALL, num_hidden_layers=24)
    model = LlamaDecoder(deep, dtype=dtype, seed=0)
    logits = model.reference_logits(range(1, 65))
    assert torch.isfinite(logits).all()
    assert 0.2 < float(logits.std()) < 5.0


def test_reference_is_causal():
    model = LlamaDecoder(SMALL, seed=1)
    full = model.reference_logits([5, 9, 2, 7, 7, 1, 30, 4])
    head = model.reference_logits([5, 9, 2, 7])
    torch.testing.assert_close(full[:4], head, atol=1e-5, rtol=1e-5)


def test_rope_is_a_rotation_and_relative():
    cos, sin = rope_cos_sin(16, 64, 10000.0)
    x = torch.randn(1, 2, 16)
    y = torch.randn(1, 2, 16)
    rot = lambda t, p: apply_rope(t, cos[p:p + 1], sin[p:p + 1])  # noqa: E731
    torch.testing.assert_close(rot(x, 7).norm(dim=-1), x.norm(dim=-1))
    # <R(p) x, R(q) y> depends on p - q only
    d1 = (rot(x, 10) * rot(y, 4)).sum(-1)
    d2 = (rot(x, 30) * rot(y, 24)).sum(-1)
    torch.testing.assert_close(d1, d2, atol=1e-5, rtol=1e-5)


def test_checkpoint_round_trip(tmp_path):
    src = LlamaDecoder(SMALL, seed=7)
    path = tmp_path / "model.pt"
    torch.save(src.to_hf_state_dict(), path)
    dst = LlamaDecoder(SMALL, checkpoint=path)
    ids = [3, 1, 4, 1, 5, 9, 2, 6]
    torch.testing.assert_close(dst.reference_logits(ids), src.reference_logits(ids), atol=0, rtol=0)
    # a directory of shards is read whole
    sd = src.to_hf_state_dict()
    keys = sorted(sd)
    (tmp_path / "shards").mkdir()
    torch.save({k: sd[k] for k in keys[::2]}, tmp_path / "shards" / "a.pt")
    torch.save({k: sd[k] for k in keys[1::2]}, tmp_path / "shards" / "b.pt")
    torch.testing.assert_close(LlamaDecoder(SMALL, checkpoint=tmp_path / "shards").reference_logits(ids),
                               src.reference_logits(ids), atol=0, rtol=0)


def test_checkpoint_errors_name_the_tensor(tmp_path):
    sd = LlamaDecoder(SMALL, seed=0).to_hf_state_dict()
    del sd["model.layers.1.mlp.up_proj.weight"]
    torch.save(sd, tmp_path / "m.pt")
    with pytest.raises(ValueError, match=r"model\.layers\.1\.mlp\.up_proj\.weight"):
        LlamaDecoder(SMALL, checkpoint=tmp_path / "m.pt")
    sd["model.layers.1.mlp.up_proj.weight"] = torch.zeros(3, 3)
    torch.save(sd, tmp_path / "m.pt")
    with pytest.raises(ValueError, match="shape"):
        LlamaDecoder(SMALL, checkpoint=tmp_path / "m.pt")


# ---- the paged KV cache -----------------------------------------------------------------------------------

def test_kv_write_and_gather_by_block_table():
    cache = PagedKVCache(num_layers=2, num_blocks=8, block_size=4, num_kv_heads=2, head_dim=3)
    tables = cache.block_table_tensor([[5, 2, 7], [3]])
    assert tables.tolist() == [[5, 2, 7], [3, 0, 0]]
    # sequence 0: positions 0..9, sequence 1: positions 1..2
    seq = torch.tensor([0] * 10 + [1] * 2)
    pos = torch.tensor(list(range(10)) + [1, 2])
    blocks, offs = cache.slot_mapping(tables, seq, pos)
    assert (blocks * 4 + offs).tolist() == [5 * 4 + p % 4 if p < 4 else (2 * 4 + p % 4 if p < 8 else 7 * 4 + p % 4)
                                            for p in range(10)] + [13, 14]
    k = torch.randn(12, 2, 3)
    v = torch.randn(12, 2, 3)
    cache.write(1, blocks, offs, k, v)
    kg, vg = cache.gather(1, tables)
    assert kg.shape == (2, 2, 12, 3)
    torch.testing.assert_close(kg[0, :, :10].transpose(0, 1), k[:10])
    torch.testing.assert_close(vg[1, :, 1:3].transpose(0, 1), v[10:])
    assert not cache.kv[0].any() and not cache.kv[:, 0].any()   # other layer and the null block untouched


def test_kv_rejects_null_block_and_bad_ids():
    cache = PagedKVCache(num_layers=1, num_blocks=4, block_size=4, num_kv_heads=1, head_dim=2)
    with pytest.raises(ValueError, match="null block"):
        cache.slot_mapping(cache.block_table_tensor([[1]], num_blocks=2), torch.tensor([0]), torch.tensor([5]))
    with pytest.raises(ValueError, match="too short"):
        cache.slot_mapping(cache.block_table_tensor([[1]]), torch.tensor([0]), torch.tensor([5]))
    with pytest.raises(ValueError, match="outside"):
        cache.block_table_tensor([[1, 4]])
    with pytest.raises(ValueError, match="num_blocks"):
        PagedKVCache(num_layers=1, num_blocks=1, block_size=4, num_kv_heads=1, head_dim=2)
    assert PagedKVCache.bytes_per_block(32, 16, 8, 128, torch.bfloat16) == 2 * 32 * 16 * 8 * 128 * 2
