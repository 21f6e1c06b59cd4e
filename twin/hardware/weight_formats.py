"""Weight formats per layer group: a checkpoint may store its attention, dense MLPs, routed experts, shared
experts, router and LM head in different formats (Kimi-K2.5: INT4 group-32 routed experts, bf16 elsewhere;
gpt-oss: MXFP4 experts, bf16 attention). `WeightFormats` names one format per group; `group_params` and
`group_tensors` say how many weights and weight tensors each group of a model has, so the bytes of a layout are
the sum over groups (exact fractions, rounded up once per shard).

The embedding table always stays in the activation dtype (it is gathered, never multiplied). A single weight
dtype (``WeightFormats.uniform("fp8")``) is every decoder linear layer in that format, the router included, with
the LM head in the activation dtype: the twin's long-standing meaning of ``weight_dtype``. Formats read from a
checkpoint's ``quantization_config`` (`twin.hardware.hf_quant`) keep the router in the activation dtype, as
every vLLM quantization method does (the gate is built without a quant config).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from fractions import Fraction
from typing import Any, Mapping

from twin.errors import TwinInputError
from twin.hardware.quant import activation_dtype, compute_dtype, exact_weight_bytes, normalize_weight_dtype

GROUPS = ("attention", "dense_mlp", "routed_experts", "shared_experts", "router", "lm_head")
LINEAR_GROUPS = GROUPS[:4]          # the decoder's GEMM groups


def format_family(weight_dtype: str) -> str:
    """A weight format's family, without its group size or symmetry (``int4-g32-sym`` -> ``int4``)."""
    return str(weight_dtype).split("-")[0]


@dataclass(frozen=True)
class WeightFormats:
    """One weight format per layer group, and the activation dtype the rest (embedding, norms, biases) is in."""

    attention: str = "bf16"
    dense_mlp: str = "bf16"
    routed_experts: str = "bf16"
    shared_experts: str = "bf16"
    router: str = "bf16"
    lm_head: str = "bf16"
    activation: str = "bf16"

    @classmethod
    def uniform(cls, weight_dtype: str) -> "WeightFormats":
        """Every decoder linear layer (router included) in ``weight_dtype``; LM head in the activation dtype."""
        wd = normalize_weight_dtype(weight_dtype)
        act = activation_dtype(wd)
        return cls(wd, wd, wd, wd, wd, act, act)

    def with_groups(self, groups: Mapping[str, Any], where: str = "weight_formats") -> "WeightFormats":
        """These formats with some groups replaced (a scenario's explicit ``deployment.weight_formats``)."""
        out: dict[str, str] = {}
        for key, value in groups.items():
            if key not in GROUPS:
                raise TwinInputError(f"{where}.{key}: unknown layer group; allowed: {', '.join(GROUPS)}")
            out[key] = normalize_weight_dtype(value, f"{where}.{key}")
        return replace(self, **out)

    def as_dict(self) -> dict[str, str]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def is_uniform(self) -> bool:
        return len({self.attention, self.dense_mlp, self.routed_experts, self.shared_experts, self.router}) == 1

    @property
    def is_quantized(self) -> bool:
        """Any decoder layer group stored in a format other than the activation dtype."""
        return any(getattr(self, g) != self.activation for g in LINEAR_GROUPS)

    @property
    def linear_families(self) -> set[str]:
        """The format families of the decoder's GEMM groups (``format_family``)."""
        return {format_family(getattr(self, g)) for g in LINEAR_GROUPS}

    @property
    def label(self) -> str:
        """A short name: the one format of a uniform layout, else ``group=format`` for the quantized groups."""
        if self.is_uniform and self.lm_head == self.activation:
            return self.attention
        parts = [f"{g}={getattr(self, g)}" for g in GROUPS if getattr(self, g) != self.activation]
        return ",".join(parts) or self.activation

    def compute_dtype(self, group: str) -> str:
        """The tensor-core path a group's matmuls take (before the GPU's fallback, see `GpuSpec.flops`)."""
        return compute_dtype(getattr(self, group))


def resolve_formats(weight_dtype: "str | WeightFormats") -> WeightFormats:
    return weight_dtype if isinstance(weight_dtype, WeightFormats) else WeightFormats.uniform(weight_dtype)


def group_params(model: Any) -> dict[str, int]:
    """Stored weights of each layer group of `model` (a ModelSpec), all layers and all experts."""
    m = model
    return {
        "attention": m.num_hidden_layers * m.attention_weight_params_per_layer,
        "dense_mlp": m.dense_layers * m.mlp_params_per_layer,
        "routed_experts": m.routed_expert_params,
        "shared_experts": m.moe_layers * 3 * m.hidden_size * m.shared_expert_width,
        "router": m.moe_layers * m.hidden_size * m.num_experts,
        "lm_head": m.lm_head_params,
    }


def group_tensors(model: Any) -> dict[str, int]:
    """Weight tensors of each group (for per-tensor scales): q, k, v, o (MLA: q_a, q_b, kv_a, kv_b, o),
    gate/up/down per MLP or expert, one router and one LM head."""
    m = model
    attn = (5 if m.q_lora_rank else 4) if m.is_mla else 4
    return {
        "attention": m.num_hidden_layers * attn,
        "dense_mlp": m.dense_layers * 3,
        "routed_experts": m.moe_layers * m.num_experts * 3,
        "shared_experts": m.moe_layers * 3 if m.shared_expert_width else 0,
        "router": m.moe_layers,
        "lm_head": 1 if m.lm_head_params else 0,
    }


def group_bytes(model: Any, formats: WeightFormats) -> dict[str, Fraction]:
    """Exact bytes of each layer group in `formats`."""
    params, tensors = group_params(model), group_tensors(model)
    return {g: exact_weight_bytes(params[g], getattr(formats, g), tensors[g]) if params[g] else Fraction(0)
            for g in GROUPS}


def ceil_div(x: Fraction | int, n: int) -> int:
    x = Fraction(x) / n
    return -(-x.numerator // x.denominator)
