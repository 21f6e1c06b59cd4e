"""A Llama-shaped decoder in plain torch, for measuring real step times.

Per layer: RMSNorm -> attention (RoPE, grouped-query) -> residual -> RMSNorm -> SwiGLU MLP -> residual; then a
final RMSNorm and the LM head. The projections are fused as production engines fuse them (one QKV GEMM, one
gate/up GEMM), and every token of a step goes through them as one flattened ``[total_tokens, hidden]`` batch.

The model knows nothing of paging: :meth:`LlamaDecoder.forward_hidden` takes an *attention callback*
``attn(layer_index, q, k, v) -> out`` that the engine supplies (paged attention over the KV cache) and the dense
reference supplies (plain causal attention over one whole sequence, :meth:`LlamaDecoder.reference_logits`).

Weights are random (seeded, scaled so activations stay O(1) at any depth) unless a local checkpoint in
Hugging Face's Llama naming is given (``.safetensors`` if the ``safetensors`` package is installed, or a
``torch.save``'d state dict; a directory of shards is read whole).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

AttentionFn = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]

# Other spellings a model catalog might use for the Hugging Face config.json fields.
_ALIASES: dict[str, tuple[str, ...]] = {
    "hidden_size": ("d_model", "n_embd"),
    "num_hidden_layers": ("num_layers", "n_layers", "n_layer"),
    "num_attention_heads": ("num_heads", "n_heads", "n_head"),
    "num_key_value_heads": ("num_kv_heads", "n_kv_heads"),
    "intermediate_size": ("ffn_hidden_size", "ffn_dim"),
    "max_position_embeddings": ("max_model_len", "max_seq_len"),
}


@dataclasses.dataclass(frozen=True)
class ModelShape:
    """The shape of a Llama-style decoder, with Hugging Face ``config.json`` field names."""

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    vocab_size: int
    head_dim: int | None = None            # None: hidden_size // num_attention_heads
    max_position_embeddings: int = 4096
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    tie_word_embeddings: bool = False

    def __post_init__(self) -> None:
        for name in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                     "intermediate_size", "vocab_size", "max_position_embeddings"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"model shape: {name} must be a positive integer, got {value!r}")
        if self.head_dim is None:
            if self.hidden_size % self.num_attention_heads:
                raise ValueError(f"model shape: hidden_size={self.hidden_size} is not divisible by "
                                 f"num_attention_heads={self.num_attention_heads}; give head_dim")
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_attention_heads)
        if not isinstance(self.head_dim, int) or self.head_dim < 2 or self.head_dim % 2:
            raise ValueError(f"model shape: head_dim must be a positive even integer, got {self.head_dim!r}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"model shape: num_attention_heads={self.num_attention_heads} must be a multiple of "
                             f"num_key_value_heads={self.num_key_value_heads}")
        if not self.rope_theta > 0 or not self.rms_norm_eps > 0:
            raise ValueError(f"model shape: rope_theta and rms_norm_eps must be > 0, got "
                             f"{self.rope_theta!r} and {self.rms_norm_eps!r}")

    # ---- derived sizes --------------------------------------------------------------------------------
    @property
    def q_size(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_key_value_heads * self.head_dim

    @property
    def num_queries_per_kv(self) -> int:
        return self.num_attention_heads // self.num_key_value_heads

    @property
    def num_params(self) -> int:
        h, i, v = self.hidden_size, self.intermediate_size, self.vocab_size
        per_layer = h * (self.q_size + 2 * self.kv_size) + self.q_size * h + 3 * h * i + 2 * h
        head = 0 if self.tie_word_embeddings else v * h
        return v * h + self.num_hidden_layers * per_layer + h + head

    # ---- construction ---------------------------------------------------------------------------------
    @classmethod
    def from_any(cls, obj: Any) -> ModelShape:
        """From a ``ModelShape``, a mapping or any object (e.g. a catalog ``ModelSpec``) carrying the Hugging
        Face field names (a few common aliases are accepted too)."""
        if isinstance(obj, ModelShape):
            return obj
        if isinstance(obj, (str, Path)):
            return cls.from_hf_config(obj)

        def get(name: str) -> Any:
            for key in (name, *_ALIASES.get(name, ())):
                if isinstance(obj, Mapping):
                    if key in obj and obj[key] is not None:
                        return obj[key]
                elif getattr(obj, key, None) is not None:
                    return getattr(obj, key)
            return None

        kwargs: dict[str, Any] = {}
        missing = []
        for f in dataclasses.fields(cls):
            value = get(f.name)
            if value is None:
                if f.default is dataclasses.MISSING:
                    missing.append(f.name)
                continue
            kwargs[f.name] = value
        if "num_key_value_heads" in missing and get("num_attention_heads") is not None:
            kwargs["num_key_value_heads"] = get("num_attention_heads")   # HF default: multi-head attention
            missing.remove("num_key_value_heads")
        if missing:
            raise ValueError(f"model shape: missing field(s) {', '.join(missing)} in {type(obj).__name__}")
        for name in ("rope_theta", "rms_norm_eps"):
            if name in kwargs:
                kwargs[name] = float(kwargs[name])
        for name in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                     "intermediate_size", "vocab_size", "head_dim", "max_position_embeddings"):
            if name in kwargs and isinstance(kwargs[name], float) and kwargs[name].is_integer():
                kwargs[name] = int(kwargs[name])
        return cls(**kwargs)

    @classmethod
    def from_hf_config(cls, path: str | Path) -> ModelShape:
        """From a Hugging Face ``config.json`` (or the directory holding it)."""
        p = Path(path)
        if p.is_dir():
            p = p / "config.json"
        try:
            config = json.loads(p.read_text())
        except FileNotFoundError:
            raise ValueError(f"model config: no such file {p}") from None
        except json.JSONDecodeError as e:
            raise ValueError(f"model config: {p} is not valid JSON ({e})") from None
        if "text_config" in config and "hidden_size" not in config:   # multimodal wrappers
            config = config["text_config"]
        return cls.from_any(config)

    @classmethod
    def tiny(cls) -> ModelShape:
        """The project's tiny CPU model (about 7.1 M parameters)."""
        return cls(hidden_size=256, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4,
                   intermediate_size=704, vocab_size=8192, max_position_embeddings=4096)


def from_hf_config(path: str | Path) -> ModelShape:
    return ModelShape.from_hf_config(path)


def default_dtype(device: str | torch.device) -> torch.dtype:
    """bf16 on CUDA, fp32 on CPU."""
    return torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32


# ---- building blocks ----------------------------------------------------------------------------------

def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm computed in fp32 and cast back, as Hugging Face's Llama does."""
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * xf.to(x.dtype)


def rope_cos_sin(head_dim: int, max_positions: int, theta: float,
                 device: torch.device | str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables ``[max_positions, head_dim]`` (fp32) for the rotate-half RoPE convention."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64, device=device) / head_dim))
    t = torch.arange(max_positions, dtype=torch.float64, device=device)
    freqs = torch.outer(t, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().float(), emb.sin().float()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: ``[tokens, heads, head_dim]``; cos, sin: ``[tokens, head_dim]`` (already gathered by position)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    rotated = torch.cat((-x2, x1), dim=-1)
    return x * cos[:, None, :] + rotated * sin[:, None, :]


class DecoderLayer(nn.Module):
    def __init__(self, shape: ModelShape, dtype: torch.dtype, device: torch.device) -> None:
        super().__init__()
        h, i = shape.hidden_size, shape.intermediate_size

        def p(*size: int) -> nn.Parameter:
            return nn.Parameter(torch.empty(*size, dtype=dtype, device=device), requires_grad=False)

        self.input_norm = p(h)
        self.qkv_proj = p(shape.q_size + 2 * shape.kv_size, h)     # fused q, k, v
        self.o_proj = p(h, shape.q_size)
        self.post_attn_norm = p(h)
        self.gate_up_proj = p(2 * i, h)                             # fused gate, up
        self.down_proj = p(h, i)


class LlamaDecoder(nn.Module):
    """The decoder. ``forward_hidden`` runs the flattened token batch; ``compute_logits`` the LM head."""

    def __init__(self, shape: Any, *, dtype: torch.dtype | None = None, device: str | torch.device = "cpu",
                 seed: int = 0, checkpoint: str | Path | None = None) -> None:
        super().__init__()
        self.shape = shape = ModelShape.from_any(shape)
        device = torch.device(device)
        dtype = dtype or default_dtype(device)
        self.dtype, self.device = dtype, device
        h = shape.hidden_size
        self.embed_tokens = nn.Parameter(torch.empty(shape.vocab_size, h, dtype=dtype, device=device),
                                         requires_grad=False)
        self.layers = nn.ModuleList(DecoderLayer(shape, dtype, device) for _ in range(shape.num_hidden_layers))
        self.norm = nn.Parameter(torch.empty(h, dtype=dtype, device=device), requires_grad=False)
        if shape.tie_word_embeddings:
            self.lm_head = self.embed_tokens
        else:
            self.lm_head = nn.Parameter(torch.empty(shape.vocab_size, h, dtype=dtype, device=device),
                                        requires_grad=False)
        cos, sin = rope_cos_sin(shape.head_dim, shape.max_position_embeddings, shape.rope_theta, device)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        if checkpoint is None:
            self.init_random(seed)
        else:
            self.load_checkpoint(checkpoint)

    # ---- weights --------------------------------------------------------------------------------------
    @torch.no_grad()
    def init_random(self, seed: int) -> None:
        """Seeded Gaussian weights: embeddings N(0, 1); projections N(0, 1/fan_in); the projections that feed
        the residual stream (o_proj, down_proj) further scaled by 1/sqrt(2 * layers) so the stream stays O(1)
        at any depth; norms 1. Drawn in fp32 on the model's device, then cast."""
        s = self.shape
        gen = torch.Generator(device=self.device).manual_seed(int(seed))
        depth_scale = 1.0 / math.sqrt(2 * s.num_hidden_layers)

        def fill(t: torch.Tensor, std: float) -> None:
            t.copy_(torch.randn(t.shape, generator=gen, device=self.device, dtype=torch.float32) * std)

        fill(self.embed_tokens, 1.0)
        for layer in self.layers:
            layer.input_norm.fill_(1.0)
            layer.post_attn_norm.fill_(1.0)
            fill(layer.qkv_proj, 1.0 / math.sqrt(s.hidden_size))
            fill(layer.o_proj, depth_scale / math.sqrt(s.q_size))
            fill(layer.gate_up_proj, 1.0 / math.sqrt(s.hidden_size))
            fill(layer.down_proj, depth_scale / math.sqrt(s.intermediate_size))
        self.norm.fill_(1.0)
        if not s.tie_word_embeddings:
            fill(self.lm_head, 1.0 / math.sqrt(s.hidden_size))

    def to_hf_state_dict(self) -> dict[str, torch.Tensor]:
        """The weights under Hugging Face Llama names (q/k/v and gate/up split again)."""
        s = self.shape
        out = {"model.embed_tokens.weight": self.embed_tokens.detach().clone(),
               "model.norm.weight": self.norm.detach().clone()}
        if not s.tie_word_embeddings:
            out["lm_head.weight"] = self.lm_head.detach().clone()
        for n, layer in enumerate(self.layers):
            pre = f"model.layers.{n}."
            q, k, v = layer.qkv_proj.detach().split([s.q_size, s.kv_size, s.kv_size])
            gate, up = layer.gate_up_proj.detach().split([s.intermediate_size, s.intermediate_size])
            out.update({
                pre + "input_layernorm.weight": layer.input_norm.detach().clone(),
                pre + "post_attention_layernorm.weight": layer.post_attn_norm.detach().clone(),
                pre + "self_attn.q_proj.weight": q.clone(), pre + "self_attn.k_proj.weight": k.clone(),
                pre + "self_attn.v_proj.weight": v.clone(),
                pre + "self_attn.o_proj.weight": layer.o_proj.detach().clone(),
                pre + "mlp.gate_proj.weight": gate.clone(), pre + "mlp.up_proj.weight": up.clone(),
                pre + "mlp.down_proj.weight": layer.down_proj.detach().clone(),
            })
        return out

    @torch.no_grad()
    def load_checkpoint(self, path: str | Path) -> None:
        """Load Hugging Face Llama-named weights from a ``.safetensors`` / ``.pt`` / ``.bin`` file or a directory
        of them. Every tensor the model needs must be present, with the right shape."""
        self.load_hf_state_dict(_read_state_dict(Path(path)))

    @torch.no_grad()
    def load_hf_state_dict(self, sd: Mapping[str, torch.Tensor]) -> None:
        s = self.shape

        def take(name: str, like: torch.Tensor) -> torch.Tensor:
            if name not in sd:
                raise ValueError(f"checkpoint: tensor {name!r} is missing")
            t = sd[name]
            if tuple(t.shape) != tuple(like.shape):
                raise ValueError(f"checkpoint: tensor {name!r} has shape {tuple(t.shape)}, "
                                 f"the model shape needs {tuple(like.shape)}")
            return t

        self.embed_tokens.copy_(take("model.embed_tokens.weight", self.embed_tokens))
        self.norm.copy_(take("model.norm.weight", self.norm))
        if not s.tie_word_embeddings:
            self.lm_head.copy_(take("lm_head.weight", self.lm_head) if "lm_head.weight" in sd
                               else take("model.embed_tokens.weight", self.lm_head))
        for n, layer in enumerate(self.layers):
            pre = f"model.layers.{n}."
            qs, ks, vs = layer.qkv_proj.split([s.q_size, s.kv_size, s.kv_size])
            gs, us = layer.gate_up_proj.split([s.intermediate_size, s.intermediate_size])
            layer.input_norm.copy_(take(pre + "input_layernorm.weight", layer.input_norm))
            layer.post_attn_norm.copy_(take(pre + "post_attention_layernorm.weight", layer.post_attn_norm))
            qs.copy_(take(pre + "self_attn.q_proj.weight", qs))
            ks.copy_(take(pre + "self_attn.k_proj.weight", ks))
            vs.copy_(take(pre + "self_attn.v_proj.weight", vs))
            layer.o_proj.copy_(take(pre + "self_attn.o_proj.weight", layer.o_proj))
            gs.copy_(take(pre + "mlp.gate_proj.weight", gs))
            us.copy_(take(pre + "mlp.up_proj.weight", us))
            layer.down_proj.copy_(take(pre + "mlp.down_proj.weight", layer.down_proj))

    # ---- forward --------------------------------------------------------------------------------------
    def forward_hidden(self, input_ids: torch.Tensor, positions: torch.Tensor, attn: AttentionFn) -> torch.Tensor:
        """input_ids, positions: ``[T]`` (all of a step's new tokens, flattened). ``attn(layer, q, k, v)`` gets
        q ``[T, heads, head_dim]`` and k, v ``[T, kv_heads, head_dim]`` (RoPE applied) and returns
        ``[T, heads * head_dim]``. Returns the final-normed hidden states ``[T, hidden]``."""
        s = self.shape
        cos = self.rope_cos[positions].to(self.dtype)
        sin = self.rope_sin[positions].to(self.dtype)
        x = F.embedding(input_ids, self.embed_tokens)
        t = x.shape[0]
        heads, kv_heads = s.num_attention_heads, s.num_key_value_heads
        for n, layer in enumerate(self.layers):
            h = rms_norm(x, layer.input_norm, s.rms_norm_eps)
            qkv = F.linear(h, layer.qkv_proj)
            # RoPE on q and k at once: half the kernels (decode is launch-bound), the same arithmetic
            qk = apply_rope(qkv[:, :s.q_size + s.kv_size].view(t, heads + kv_heads, s.head_dim), cos, sin)
            q, k = qk[:, :heads], qk[:, heads:]
            v = qkv[:, s.q_size + s.kv_size:].view(t, kv_heads, s.head_dim)
            x = x + F.linear(attn(n, q, k, v), layer.o_proj)
            h = rms_norm(x, layer.post_attn_norm, s.rms_norm_eps)
            gate, up = F.linear(h, layer.gate_up_proj).chunk(2, dim=-1)
            x = x + F.linear(F.silu(gate) * up, layer.down_proj)
        return rms_norm(x, self.norm, s.rms_norm_eps)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """fp32 logits ``[N, vocab]`` for the given final hidden states."""
        return F.linear(hidden, self.lm_head).float()

    @torch.inference_mode()
    def reference_logits(self, token_ids: Any) -> torch.Tensor:
        """Dense reference: one whole sequence, no cache, plain causal attention written out (GQA by repeating
        the KV heads, softmax in fp32). Returns fp32 logits ``[T, vocab]`` on the CPU."""
        ids = torch.as_tensor(list(token_ids), dtype=torch.long, device=self.device)
        t = ids.shape[0]
        g = self.shape.num_queries_per_kv
        causal = torch.ones(t, t, dtype=torch.bool, device=self.device).tril()
        scale = 1.0 / math.sqrt(self.shape.head_dim)

        def dense_attn(_layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            k = k.repeat_interleave(g, dim=1)
            v = v.repeat_interleave(g, dim=1)
            scores = torch.einsum("qhd,khd->hqk", q.float(), k.float()) * scale
            probs = scores.masked_fill(~causal, float("-inf")).softmax(-1)
            return torch.einsum("hqk,khd->qhd", probs, v.float()).to(q.dtype).reshape(t, -1)

        positions = torch.arange(t, device=self.device)
        return self.compute_logits(self.forward_hidden(ids, positions, dense_attn)).cpu()


def _read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    if path.is_dir():
        files = sorted(path.glob("*.safetensors")) or sorted(path.glob("*.bin")) or sorted(path.glob("*.pt"))
        if not files:
            raise ValueError(f"checkpoint: no .safetensors, .bin or .pt files in {path}")
    elif path.exists():
        files = [path]
    else:
        raise ValueError(f"checkpoint: no such file or directory {path}")
    sd: dict[str, torch.Tensor] = {}
    for f in files:
        if f.suffix == ".safetensors":
            try:
                from safetensors.torch import load_file
            except ImportError:
                raise ValueError(f"checkpoint: {f} needs the 'safetensors' package (pip install safetensors)") \
                    from None
            sd.update(load_file(str(f)))
        else:
            loaded = torch.load(f, map_location="cpu", weights_only=True)
            if not isinstance(loaded, Mapping):
                raise ValueError(f"checkpoint: {f} does not hold a state dict")
            sd.update(loaded)
    return sd
