"""From a validated ``speculative_decoding:`` section and a resolved deployment to drafters and speculators."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from twin.hardware.catalog import GpuSpec, ModelSpec, resolve_model
from twin.errors import TwinInputError
from twin.spec_decode.config import HEAD_METHODS, SpeculativeDecodingConfig
from twin.cost.generations import default_efficiencies
from twin.hardware.catalog import normalize_dtype
from twin.spec_decode.drafters import Drafter, NgramDrafter, draft_model_drafter, head_drafter
from twin.spec_decode.speculator import Speculator
from twin.spec_decode.step_cost import SpecStepCost


def build_drafter(cfg: SpeculativeDecodingConfig, target: ModelSpec, gpu: GpuSpec, tp: int = 1,
                  weight_dtype: str = "bf16", kv_dtype: str = "bf16",
                  target_cost_params: Mapping[str, Any] | None = None, base_dir: Path | None = None,
                  async_scheduling: bool = False) -> SpecStepCost:
    """What speculation ``cfg`` adds to a step (``SpecStepCost``: the drafter costed on ``gpu`` with the target's
    roofline efficiencies, from ``target_cost_params``, a roofline cost model's parameters, other kinds leaving
    the defaults; the host's share as the release runs it, ``async_scheduling``; the rejection sampler)."""
    params = dict(target_cost_params or {})
    drafter = _model_or_ngram(cfg, target, gpu, tp, weight_dtype, kv_dtype, params, base_dir)
    memory_efficiency = params.get("memory_efficiency")
    if memory_efficiency is None:
        memory_efficiency = default_efficiencies(gpu)[0]     # the GPU generation's, as the target's roofline takes
    bandwidth = gpu.memory_bandwidth_bytes_per_s * float(memory_efficiency)
    return SpecStepCost(drafter, vocab_size=target.vocab_size, memory_bandwidth_bytes_per_s=bandwidth,
                        target_kv_bytes_per_token=target.kv_bytes_per_token(normalize_dtype(kv_dtype, "kv_dtype"), tp),
                        async_scheduling=async_scheduling, sampling=cfg.sampling,
                        draft_pass_overhead_s=cfg.draft_pass_overhead_s,
                        spec_step_overhead_s=cfg.spec_step_overhead_s,
                        spec_seq_overhead_s=cfg.spec_seq_overhead_s)


def _model_or_ngram(cfg: SpeculativeDecodingConfig, target: ModelSpec, gpu: GpuSpec, tp: int, weight_dtype: str,
                    kv_dtype: str, params: dict, base_dir: Path | None) -> Drafter:
    if cfg.method == "ngram":
        return NgramDrafter(cfg.ngram_lookup_s_per_seq)
    if cfg.method == "draft_model":
        name = cfg.draft_model
        if base_dir is not None and ("/" in name or name.endswith(".json")) and not Path(name).is_absolute():
            candidate = Path(base_dir) / name
            if candidate.exists():
                name = str(candidate)
        try:
            draft = resolve_model(name)
        except TwinInputError as exc:
            raise TwinInputError(f"speculative_decoding.draft_model: {exc}") from None
        return draft_model_drafter(target, draft, gpu, tp, weight_dtype, kv_dtype, params)
    if cfg.method in HEAD_METHODS:
        return head_drafter(target, cfg.method, gpu, tp, weight_dtype, kv_dtype, params,
                            draft_layers=cfg.draft_layers or 1, draft_vocab_size=cfg.draft_vocab_size)
    raise TwinInputError(f"speculative_decoding.method: unknown method {cfg.method!r}")  # pragma: no cover


def speculator_factory(cfg: SpeculativeDecodingConfig, drafter: Drafter, seed: int) -> Callable[[int], Speculator]:
    """``make_speculator`` for ``twin.sim.simulate.simulate``: one speculator per replica, sharing the drafter.
    Draws are per request, so every replica uses the same seed."""
    models = cfg.acceptance_models()

    def make(replica: int) -> Speculator:
        return Speculator(cfg.num_speculative_tokens, models, drafter, seed=seed)

    return make
