"""A scenario body resolved into what one replica needs: vLLM's defaults for the GPU, the scheduler
configuration, the KV pool sized from memory, the cost model and (with ``speculative_decoding:``) the drafter,
whose weights and KV shrink the pool and whose lookahead slots the scheduler reserves."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from pydantic import ValidationError

from twin.cost.base import CostModel
from twin.cost.eager_steps import capture_size_tokens, graph_limits
from twin.cost.factory import build_cost_model
from twin.cost.generations import gpu_generation
from twin.cost.kernel_path import fusion_default
from twin.errors import TwinInputError
from twin.hardware.catalog import GpuSpec, ModelSpec, resolve_gpu, resolve_model
from twin.hardware.kv_offload_sizing import OFFLOAD_KNOBS, offload_tiers
from twin.hardware.kv_sizing import KvPoolBreakdown, kv_pool_breakdown
from twin.hardware.parallel import ParallelLayout
from twin.hardware.weight_formats import WeightFormats, resolve_formats
from twin.scenario import ScenarioBody
from twin.core.scheduler_config import SchedulerConfig
from twin.core.vllm_versions import (NEWEST_VLLM_VERSION, VERSIONED_KNOBS, Entrypoint, default_block_size,
                                     default_limits, parse_vllm_version, vllm_release)
from twin.sim.routing import make_router as make_named_router
from twin.spec_decode import Drafter, build_drafter

GIB = 1 << 30
# speculative methods async scheduling supports by default (the others run synchronously unless set)
ASYNC_SPEC_METHODS = ("eagle", "eagle3", "mtp")


def vllm_default_limits(gpu: GpuSpec, vllm_version: str = NEWEST_VLLM_VERSION,
                        entrypoint: Entrypoint = "serve") -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) that vLLM ``vllm_version`` picks for this GPU class when started
    as ``entrypoint`` (``vllm serve`` or the offline ``LLM`` class)."""
    large = gpu.memory_bytes >= 70 * GIB and "a100" not in gpu.name.lower()
    return default_limits(vllm_version, large, entrypoint)


@dataclass
class Deployment:
    """Everything a replica needs, resolved."""

    model: ModelSpec
    gpu: GpuSpec
    scheduler_config: SchedulerConfig
    kv_pool: KvPoolBreakdown
    cost_model_factory: Callable[[], CostModel]
    drafter: Drafter | None = None
    layout: ParallelLayout | None = None
    weight_formats: WeightFormats | None = None
    allreduce_fusion: bool = False      # the server fuses TP all-reduces with RMSNorm (twin.cost.kernel_path)
    cudagraph_tokens: tuple[int, int] | None = None   # largest graphed (decode, mixed) steps (twin.cost.eager_steps)
    float32_matmul_precision: str | None = None       # server.float32_matmul_precision (twin.cost.router_gemm)
    client: str | None = None           # the measuring client of a replayed run (twin.workload.clients); fit scopes only
    release: str | None = None          # the vLLM release of a replayed run (twin.fitting.scoped); fit scopes only
    cost_model_notes: tuple[str, ...] = ()   # what the run should say about its cost model (a profile's models)

    @property
    def engines_per_replica(self) -> int:
        """Engine cores one server runs: its data-parallel ranks (each its own scheduler and KV pool)."""
        return self.layout.dp if self.layout is not None else 1

    @property
    def num_gpu_blocks(self) -> int:
        return self.kv_pool.num_gpu_blocks


def resolve_scheduler_config(body: ScenarioBody, model: ModelSpec, gpu: GpuSpec) -> SchedulerConfig:
    server = body.server
    release = vllm_release(server.vllm_version)
    default_tokens, default_seqs = vllm_default_limits(gpu, server.vllm_version, server.entrypoint)
    max_model_len = server.max_model_len or model.max_position_embeddings
    max_num_seqs = server.max_num_seqs or default_seqs
    whole_prompts = server.scheduler == "prefill_first" or not server.enable_chunked_prefill
    if server.max_num_batched_tokens is not None:
        max_tokens = server.max_num_batched_tokens
        if server.max_num_seqs is None:
            # vLLM's default max_num_seqs never exceeds a budget the user gave (512 tokens -> 512 sequences)
            max_num_seqs = min(default_seqs, max_tokens)
    else:
        # vLLM's clamps on its own defaults: never above max_num_seqs * max_model_len, and without chunked
        # prefill at least max_model_len (a whole prompt must fit one step)
        max_tokens = min(default_tokens, max_num_seqs * max_model_len)
        if whole_prompts:
            max_tokens = max(max_tokens, max_model_len)
        max_tokens = max(max_tokens, max_num_seqs)
    fields = server.model_dump(exclude={"gpu_memory_utilization", "num_gpu_blocks_override", "vllm_version",
                                        "entrypoint", "fuse_allreduce_rms", "max_cudagraph_capture_size",
                                        "cudagraph_mode", "float32_matmul_precision", *OFFLOAD_KNOBS})
    if fields["block_size"] is None:
        # vLLM's default: 16, or what the MLA attention backend forces (FP4 tensor cores: a datacenter Blackwell)
        fields["block_size"] = default_block_size(server.vllm_version, model.is_mla, bool(model.index_topk),
                                                  "fp4" in gpu.peak_flops)
    fields.update(max_model_len=max_model_len, max_num_seqs=max_num_seqs, max_num_batched_tokens=max_tokens,
                  reject_over_context=server.entrypoint == "serve")
    spec = body.speculative_decoding
    for knob in VERSIONED_KNOBS:
        if fields[knob] is None:
            fields[knob] = getattr(release, knob)
    if server.async_scheduling is None:
        # the release's default covers the continuous scheduler only, and of the speculative methods only
        # EAGLE and MTP (v0.14.0 release notes)
        fields["async_scheduling"] = release.async_scheduling and server.scheduler == "continuous" and (
            spec is None or spec.method in ASYNC_SPEC_METHODS)
    if spec is not None:
        fields["num_speculative_tokens"] = spec.num_speculative_tokens
        if spec.uses_lookahead_slots:
            fields["num_lookahead_tokens"] = spec.num_speculative_tokens
    try:
        return SchedulerConfig(**fields)
    except ValidationError as exc:
        msg = exc.errors(include_url=False)[0].get("ctx", {}).get("error") or exc.errors()[0]["msg"]
        raise TwinInputError(f"server: {msg}") from None


def require_single_deployment(body: ScenarioBody, what: str, where: str | None = None) -> None:
    """A one-line error when ``body`` is a mixed cluster (``deployment.groups``) and ``what`` needs one
    deployment (e.g. ``"twin validate (the calibration engine serves one replica)"``); ``where`` (the scenario
    file) leads the line."""
    if getattr(body, "disaggregation", None) is not None:
        raise TwinInputError(f"{where + ': ' if where else ''}disaggregation: {what} needs one deployment, not "
                             f"prefill/decode pools (twin run and twin compare run them)")
    if body.deployment.groups is not None:
        raise TwinInputError(f"{where + ': ' if where else ''}deployment.groups: {what} needs one deployment, not "
                             f"replica groups; leave groups out (twin run and twin compare run mixed clusters)")


def resolve_weight_formats(body: ScenarioBody, model: ModelSpec) -> WeightFormats:
    """The deployment's weight format per layer group: ``weight_dtype`` ("auto": the checkpoint's formats, bf16
    for a plain checkpoint) with ``weight_formats`` overriding single groups."""
    dep = body.deployment
    if dep.weight_dtype == "auto":
        formats = model.checkpoint_formats or WeightFormats()
    else:
        formats = resolve_formats(dep.weight_dtype)
    if dep.weight_formats:
        formats = formats.with_groups(dep.weight_formats, "deployment.weight_formats")
    return formats


def resolve_layout(body: ScenarioBody, model: ModelSpec) -> ParallelLayout:
    dep = body.deployment
    layout = ParallelLayout(dep.tensor_parallel_size, dep.pipeline_parallel_size, dep.data_parallel_size,
                            dep.enable_expert_parallel, dep.all2all_backend)
    layout.check(model)
    return layout


def resolve_deployment(body: ScenarioBody, base_dir: Path | None = None) -> Deployment:
    """The one deployment of ``body``; a mixed cluster is an error (see ``resolve_for_run``)."""
    require_single_deployment(body, "this step")
    dep = body.deployment
    model = resolve_model(_relative(dep.model, base_dir))
    gpu = resolve_gpu(_relative(dep.gpu, base_dir))
    check_checkpoint_kv(body, model)
    layout = resolve_layout(body, model)
    formats = resolve_weight_formats(body, model)
    sched = resolve_scheduler_config(body, model, gpu)
    cm = body.cost_model
    drafter = None
    if body.speculative_decoding is not None:
        if not layout.is_trivial:
            raise TwinInputError("speculative_decoding: with data, pipeline or expert parallelism is not modelled; "
                                 "leave data_parallel_size, pipeline_parallel_size at 1 and enable_expert_parallel off")
        drafter = build_drafter(body.speculative_decoding, model, gpu, dep.tensor_parallel_size, formats.attention,
                                dep.kv_dtype, cm.params if cm.kind == "roofline" else None, base_dir,
                                async_scheduling=sched.async_scheduling)
    pool = kv_pool_breakdown(
        model, gpu, dep.tensor_parallel_size, sched.block_size, body.server.gpu_memory_utilization,
        formats, dep.kv_dtype, sched.max_num_batched_tokens, body.server.num_gpu_blocks_override,
        layout=layout, max_num_seqs=sched.max_num_seqs, max_model_len=sched.max_model_len,
        draft_weight_bytes=drafter.weight_bytes if drafter else 0,
        draft_kv_bytes_per_token=drafter.kv_bytes_per_token if drafter else 0)
    sched = _with_offload_tiers(body, sched, gpu, pool)
    params: dict[str, Any] = dict(cm.params)
    fusion = allreduce_fusion(body, gpu)
    graphs = graph_limits(body.server.cudagraph_mode, capture_size_tokens(
        sched.max_num_seqs, sched.max_num_batched_tokens, body.server.max_cudagraph_capture_size,
        sched.num_speculative_tokens))
    fp32 = body.server.float32_matmul_precision
    if cm.kind == "roofline":
        params = ({"allreduce_fusion": True} if fusion else {}) | {"cudagraph_tokens": graphs} | (
            {"float32_matmul_precision": fp32} if fp32 else {}) | {"async_scheduling": sched.async_scheduling} | params
    if cm.kind == "profile":
        params["path"] = str(_relative(cm.profile, base_dir))

    def cost_model_factory() -> CostModel:
        return build_cost_model(cm.kind, model, gpu, dep.tensor_parallel_size,
                                {"weight_dtype": formats, "kv_dtype": dep.kv_dtype}, params, layout=layout)

    first = cost_model_factory()  # fail on bad parameters before any run
    return Deployment(model, gpu, sched, pool, cost_model_factory, drafter, layout, formats, fusion, graphs, fp32,
                      cost_model_notes=tuple(getattr(first, "profile_notes", ())))


def check_checkpoint_kv(body: ScenarioBody, model: ModelSpec) -> None:
    """A one-line error when the checkpoint declares its KV cache format (``ModelSpec.checkpoint_kv_dtype``) and the
    scenario leaves ``deployment.kv_dtype`` out: vLLM's ``--kv-cache-dtype auto`` takes the checkpoint's from PR
    #29980 (December 2025) and the model's dtype before, so the twin's bf16 default would be a silent guess."""
    declared = model.checkpoint_kv_dtype
    if declared and "kv_dtype" not in body.deployment.model_fields_set:
        raise TwinInputError(f"deployment.kv_dtype: {model.hf_id or model.name} declares a {declared} KV cache, which "
                             f"vLLM uses under --kv-cache-dtype auto from PR #29980 (December 2025) and not before; "
                             f"give kv_dtype: {declared} (or bf16 for an older release)")


def allreduce_fusion(body: ScenarioBody, gpu: GpuSpec) -> bool:
    """Whether the server fuses its tensor-parallel all-reduces with RMSNorm: ``server.fuse_allreduce_rms``, or
    the release's default for the GPU and TP size (``twin.cost.kernel_path.fusion_default``)."""
    tp = body.deployment.tensor_parallel_size
    if body.server.fuse_allreduce_rms is not None:
        return body.server.fuse_allreduce_rms and tp > 1
    return fusion_default(parse_vllm_version(body.server.vllm_version), gpu_generation(gpu), tp)


def _with_offload_tiers(body: ScenarioBody, sched: SchedulerConfig, gpu: GpuSpec,
                        pool: KvPoolBreakdown) -> SchedulerConfig:
    """The scheduler configuration with the server's KV offload tiers resolved (twin.hardware.kv_offload_sizing)."""
    server = body.server
    if server.kv_offloading_size is None:
        if server.kv_offloading_lower is not None:
            raise TwinInputError("server.kv_offloading_lower: a lower tier sits under the host tier; set "
                                 "kv_offloading_size too")
        return sched
    if not sched.enable_prefix_caching:
        raise TwinInputError("server.kv_offloading_size: needs enable_prefix_caching (offloaded blocks are found "
                             "by their prefix hashes)")
    tiers = offload_tiers(server, gpu, pool.kv_bytes_per_block, body.deployment.tensor_parallel_size)
    for (blocks, _), name in zip(tiers, ("kv_offloading_size", "kv_offloading_lower.size_gib")):
        if blocks < 1:
            raise TwinInputError(f"server.{name}: holds no whole block of {pool.kv_bytes_per_block} bytes per GPU "
                                 f"x {body.deployment.tensor_parallel_size} GPUs; give more GiB")
    return sched.model_copy(update={"kv_offload_tiers": tiers})


def _relative(value: str, base_dir: Path | None) -> str:
    """A path-looking value relative to the scenario's folder; names pass through."""
    if base_dir is not None and (value.endswith((".yaml", ".yml", ".json")) or "/" in value):
        p = Path(value)
        if not p.is_absolute() and (base_dir / p).exists():
            return str(base_dir / p)
    return value


relative_to = _relative   # for the plan's up-front checks of grid values


def make_router(name: str, **params: Any):
    """A fresh router by name; see ``twin.sim.routing``."""
    return make_named_router(name, **params)


