"""The weight bytes a MoE step streams, cached across cost models.

``ModelSpec.weight_read_bytes`` by the step's tokens (the routed experts it touches) is exact integer arithmetic
over every layer group's format (``twin.hardware.quant``, fractions of a byte per weight) and costs ~0.4 ms a
call. It depends on the model, its formats and the layout only, never on a cost parameter, yet every
``RooflineCostModel`` had its own cache: the fit's surrogate (``twin.fitting.surrogate``) builds one cost model
per parameter set it tries, so each of its evaluations recomputed these bytes for every distinct step size
(issue 33, round 7: ~90 % of a held-out fold's fit time). One cache per process, keyed by what the bytes depend
on, gives the same integers."""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=1 << 16)
def moe_weight_read_bytes(model, formats, tensor_parallel_size: int, moe_shards: int, dp: int, tokens: int,
                          active_share: float = 1.0) -> int:
    """``model.weight_read_bytes(formats, tensor_parallel_size, tokens, moe_shards, moe_tokens=tokens x dp,
    active_share)``."""
    return model.weight_read_bytes(formats, tensor_parallel_size, tokens, moe_shards=moe_shards,
                                   moe_tokens=tokens * dp, active_share=active_share)
