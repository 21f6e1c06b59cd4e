"""Scenario files: a deployment, its server settings, its traffic and the what-if variants to compare.

A scenario is YAML; every section is validated with pydantic and every problem is reported as one line that
names the field, e.g. ``server.max_num_seqs: must be >= 1 (got 0)``. A variant is a partial scenario merged
over the baseline (mappings merge key by key, anything else replaces), then validated as a whole.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from twin.errors import TwinInputError, did_you_mean
from twin.core.scheduler_config import SchedulerKnobs
from twin.core.vllm_versions import NEWEST_VLLM_VERSION, vllm_release
from twin.cost.eager_steps import CudagraphMode
from twin.hardware.quant import normalize_weight_dtype
from twin.hardware.kv_offload_sizing import KvOffloadingKnobs
from twin.hardware.weight_formats import WeightFormats
from twin.disaggregation import DisaggregationConfig
from twin.slo_section import relative_to_section, slo_section  # one SLO reader for every path (issue 33)
from twin.yaml_input import deep_merge, parse_set_options, parse_yaml, read_text  # noqa: F401 (re-exported)
from twin.spec_decode.config import SpeculativeDecodingConfig, check_task_classes
from twin.workload.config import WorkloadConfig
from twin.workload.strict_model import StrictModel
from twin.workload.validation_errors import format_validation_error

BASELINE = "baseline"


# the routers that take per-replica weights (twin.sim.routing)
WEIGHTED_ROUTERS = ("round_robin", "least_outstanding", "prefix_affinity", "kv_cache_aware")
MAX_REPLICAS = 4096
MAX_SIM_TIME_S = 1e9      # simulated seconds in one run (31 years): a longer horizon is a typo, not a study
# the block sizes vLLM's --block-size accepts (vllm/config/cache.py, BlockSize); the scheduler itself takes any
VLLM_BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)
ROUTERS = ("round_robin", "least_outstanding", "least_kv_usage", "prefix_affinity", "kv_cache_aware")


class ReplicaGroup(StrictModel):
    """Replicas that share a GPU type, tensor parallelism and server settings (``None``: the scenario's).

    In a scenario file it is an entry of ``deployment.groups``; ``twin.sim.cluster.run_cluster`` also takes groups
    directly (there ``replicas`` defaults to 1)."""

    name: str | None = None
    gpu: str | None = None
    tensor_parallel_size: int | None = Field(None, ge=1, le=64)
    replicas: int = Field(1, ge=1, le=MAX_REPLICAS)
    server: dict[str, Any] = Field(default_factory=dict)
    weight: float = Field(1.0, gt=0, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _shared_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in ("model", "router", "weight_dtype", "kv_dtype", "groups", "weight_formats",
                        "data_parallel_size", "pipeline_parallel_size", "enable_expert_parallel"):
                if key in data:
                    raise ValueError(f".{key}: every group shares deployment.{key}; a group sets only "
                                     f"{', '.join(cls.model_fields)}")
        return data


class DeploymentConfig(StrictModel):
    """One deployment, or with ``groups`` a mixed cluster behind one router.

    With ``groups``, ``gpu``, ``tensor_parallel_size`` and ``replicas`` are the defaults of the groups that
    leave them out; once validated every group is complete and ``replicas`` is the cluster's total. When
    every group gives its own ``replicas``, a ``deployment.replicas`` given too must equal their total."""

    gpu: str = "H100-SXM"
    model: str = "llama-3.1-8b"
    tensor_parallel_size: int = Field(1, ge=1, le=64)
    replicas: int = Field(1, ge=1, le=MAX_REPLICAS)
    # "auto": the checkpoint's formats (the model's quantization_config), bf16 for a plain checkpoint; a format
    # name puts every decoder linear layer in it; weight_formats then overrides single layer groups
    weight_dtype: str = "auto"
    weight_formats: dict[str, str] | None = None
    kv_dtype: Literal["bf16", "fp16", "fp8", "fp32"] = "bf16"
    # vLLM's parallel layout per server (twin.hardware.parallel): GPUs per replica = tp x pp x dp
    pipeline_parallel_size: int = Field(1, ge=1, le=64)
    data_parallel_size: int = Field(1, ge=1, le=1024)
    enable_expert_parallel: bool = False
    all2all_backend: Literal["allgather_reducescatter", "naive", "deepep"] = "allgather_reducescatter"
    router: Literal["round_robin", "least_outstanding", "least_kv_usage", "prefix_affinity",
                    "kv_cache_aware"] = "round_robin"
    groups: list[ReplicaGroup] | None = None

    @model_validator(mode="before")
    @classmethod
    def _fill_groups(cls, data: Any) -> Any:
        """Complete every group from the deployment-level defaults and make ``replicas`` the total."""
        if not isinstance(data, dict) or not isinstance(data.get("groups"), list):
            return data
        if not data["groups"]:
            raise ValueError(".groups: give at least one replica group (or leave groups out)")
        items = [g.model_dump(exclude_unset=True) if isinstance(g, ReplicaGroup) else g for g in data["groups"]]
        if not all(isinstance(g, dict) for g in items):
            return data  # the field's own validation names the bad entry
        fields = cls.model_fields
        defaults = {k: data.get(k, fields[k].default) for k in ("gpu", "tensor_parallel_size", "replicas")}
        filled = [{**{k: v for k, v in defaults.items() if g.get(k) is None}, **{k: v for k, v in g.items()
                                                                               if v is not None}}
                  for g in items]
        counts = [g.get("replicas") for g in filled]
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in counts):
            return {**data, "groups": filled}  # the group's replicas field reports it
        total = sum(counts)
        if "replicas" in data and all("replicas" in g for g in items) and data["replicas"] != total:
            raise ValueError(f".replicas: {data['replicas']!r} contradicts deployment.groups "
                             f"({' + '.join(map(str, counts))} = {total} replicas); leave it out or make it the total")
        if total > MAX_REPLICAS:
            raise ValueError(f".groups: {total} replicas in all; at most {MAX_REPLICAS}")
        return {**data, "groups": filled, "replicas": total}

    @field_validator("weight_dtype", mode="before")
    @classmethod
    def _weight_dtype(cls, value: Any) -> str:
        if str(value).strip().lower() == "auto":
            return "auto"
        try:
            return normalize_weight_dtype(value, "weight_dtype")
        except TwinInputError as exc:
            raise ValueError(str(exc).split(": ", 1)[1]) from None

    @field_validator("weight_formats", mode="before")
    @classmethod
    def _weight_formats(cls, value: Any) -> Any:
        if isinstance(value, dict):
            try:
                WeightFormats().with_groups(value, "weight_formats")
            except TwinInputError as exc:
                raise ValueError(str(exc).split("weight_formats", 1)[1]) from None
        return value

    @model_validator(mode="after")
    def _check_groups(self) -> "DeploymentConfig":
        names: dict[str, int] = {}
        for i, g in enumerate(self.groups or []):
            if g.name is not None:
                if g.name in names:
                    raise ValueError(f".groups[{i}].name: {g.name!r} is also the name of groups[{names[g.name]}]")
                names[g.name] = i
            if g.weight != 1.0 and self.router not in WEIGHTED_ROUTERS:
                raise ValueError(f".groups[{i}].weight: the {self.router} router does not use weights (routers "
                                 f"that do: {', '.join(WEIGHTED_ROUTERS)})")
        return self


class ServerConfig(StrictModel, SchedulerKnobs, KvOffloadingKnobs):
    """vLLM's serving knobs. ``None`` means vLLM's default for the deployment (resolved in twin.sim.deployment)."""

    max_num_seqs: int | None = Field(None, ge=1)
    max_num_batched_tokens: int | None = Field(None, ge=1)
    max_model_len: int | None = Field(None, ge=2)
    gpu_memory_utilization: float = Field(0.9, gt=0.0, le=1.0)
    num_gpu_blocks_override: int | None = Field(None, ge=2, le=2**31 - 1)   # block ids are int32 in vLLM
    # None: vLLM's default for the release, model and GPU (16; MLA backends force 64 or 128)
    block_size: int | None = Field(None, ge=1, le=1024)
    # the vLLM release whose behaviours and defaults to model (twin.core.vllm_versions); the knobs below left
    # None take that release's default
    vllm_version: str = NEWEST_VLLM_VERSION
    entrypoint: Literal["serve", "llm"] = "serve"   # `vllm serve` or the offline LLM class: their default limits
    async_scheduling: bool | None = None
    # compilation_config.pass_config.fuse_allreduce_rms: TP all-reduce fused with RMSNorm (twin.cost.kernel_path);
    # None: the release's default (on from 0.18 on Hopper / Blackwell with TP > 1)
    fuse_allreduce_rms: bool | None = None
    # CUDA graphs (twin.cost.eager_steps): --max-cudagraph-capture-size (None: vLLM's min(2 x max_num_seqs, 512))
    # and compilation_config.cudagraph_mode (None: the default, graphs for prefill and decode batches alike)
    max_cudagraph_capture_size: int | None = Field(None, ge=1)
    cudagraph_mode: CudagraphMode | None = None
    # VLLM_FLOAT32_MATMUL_PRECISION (torch.set_float32_matmul_precision): how FP32 GEMMs run, the MoE router's
    # where the model keeps it in FP32 (twin.cost.router_gemm); None: vLLM's default, "highest"
    float32_matmul_precision: Literal["highest", "high", "medium"] | None = None
    scheduler_reserve_full_isl: bool | None = None
    free_unhashed_blocks_to_head: bool | None = None
    prefix_cache_stats_at_admission: bool | None = None
    pad_spec_decode_first_step: bool | None = None

    @field_validator("block_size")
    @classmethod
    def _vllm_block_size(cls, value: int | None) -> int | None:
        if value is not None and value not in VLLM_BLOCK_SIZES:     # None: vLLM's default for the backend
            raise ValueError(f"must be one of vLLM's block sizes {', '.join(map(str, VLLM_BLOCK_SIZES))} "
                             f"(got {value})")
        return value

    @field_validator("vllm_version", mode="before")
    @classmethod
    def _modelled_release(cls, value: Any) -> str:
        value = str(value)  # YAML reads 0.19 as a number
        try:
            vllm_release(value)
        except ValueError as exc:
            raise ValueError(str(exc)) from None
        return value


class CostModelConfig(StrictModel):
    kind: Literal["roofline", "constant", "profile"] = "roofline"
    profile: str | None = None
    params: dict[str, float] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _profile_path(self) -> "CostModelConfig":
        if self.kind == "profile" and not self.profile:
            raise ValueError(".profile: is required when kind is 'profile' (a calibrated profile JSON path)")
        return self


class SLOConfig(StrictModel):
    """Latency objectives in ms. A number is a per-request threshold (goodput, as ``vllm bench serve
    --goodput``); a mapping like ``{p99: 1000}`` is a percentile objective (met or not). vLLM's names (``ttft``)
    and form (``"ttft:500 tpot:50"``) are read too, by ``twin.slo_section`` as on every other SLO path."""

    ttft_ms: float | dict[str, float] | None = None
    tpot_ms: float | dict[str, float] | None = None
    itl_ms: float | dict[str, float] | None = None
    e2el_ms: float | dict[str, float] | None = None

    @model_validator(mode="before")
    @classmethod
    def _one_reader(cls, value: Any) -> Any:
        """Every spelling and check of ``twin.slo_section``, the reader ``--slo``, plan files and ``parse_slo``
        share: vLLM's names and ``"ttft:500"`` form are read, and a refusal is worded as on every other path."""
        try:
            return slo_section(value)
        except TwinInputError as exc:
            raise ValueError(relative_to_section(exc)) from None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


class RecordsConfig(StrictModel):
    """What a run keeps. ``token_times: summary`` keeps each request's first and last token times and one
    run-wide ITL summary instead of every token's time (``twin.results.token_summary``): for runs of millions
    of requests; per-request ITL lists are then unavailable and ITL percentiles are within 0.05 %.
    ``steps: aggregate`` keeps per-replica, per-second sums instead of one row per engine step
    (``twin.results.step_summary``): the step-based metrics answer for the whole run only."""

    steps: Literal["full", "aggregate"] = "full"
    token_times: Literal["full", "summary"] = "full"


class ScenarioBody(StrictModel):
    """One fully specified configuration (the baseline, or a variant merged over it)."""

    name: str = "scenario"
    description: str = ""
    deployment: DeploymentConfig = Field(default_factory=DeploymentConfig)
    server: ServerConfig = Field(default_factory=ServerConfig)
    cost_model: CostModelConfig = Field(default_factory=CostModelConfig)
    speculative_decoding: SpeculativeDecodingConfig | None = None
    workload: WorkloadConfig
    slo: SLOConfig = Field(default_factory=SLOConfig)
    seed: int = Field(0, ge=0)
    replications: int = Field(1, ge=1, le=1000)
    warmup_s: float = Field(0.0, ge=0.0, allow_inf_nan=False)
    max_sim_time_s: float | None = Field(None, gt=0, le=MAX_SIM_TIME_S)
    records: RecordsConfig = Field(default_factory=RecordsConfig)
    # prefill/decode disaggregation (twin.disaggregation; run by twin.deploy)
    disaggregation: DisaggregationConfig | None = None
    # "cold": every replica a freshly started server, paying the one-off work start-up missed (twin.sim.cold_server)
    server_start: Literal["warm", "cold"] = "warm"

    @model_validator(mode="after")
    def _spec_classes(self) -> "ScenarioBody":
        spec = self.speculative_decoding
        if spec is not None:
            wl = self.workload
            names = [c.name for c in wl.classes] if wl.classes else [wl.trace.task_class]
            check_task_classes(spec, names)
        return self

    @model_validator(mode="after")
    def _group_servers(self) -> "ScenarioBody":
        """Each group's server overrides, merged over ``server``, must make a valid server section."""
        base = self.server.model_dump()
        pd = self.disaggregation
        servers = [(f"deployment.groups[{i}].server", g.server) for i, g in enumerate(self.deployment.groups or [])]
        servers += [(f"disaggregation.{k}.server", getattr(pd, k).server) for k in ("prefill", "decode")] if pd else []
        for where, server in servers:
            if not server:
                continue
            try:
                ServerConfig.model_validate(deep_merge(base, server))
            except ValidationError as exc:
                raise ValueError(f".{format_validation_error(exc, where)}") from None
        if pd is not None and (self.deployment.groups is not None or self.speculative_decoding is not None):
            other = "deployment.groups" if self.deployment.groups is not None else "speculative_decoding"
            raise ValueError(f".disaggregation: with {other} is not modelled; the pools are the replica groups")
        if pd is not None and self.server_start != "warm":
            raise ValueError(".server_start: 'cold' with disaggregation is not modelled (only 'warm')")
        return self

    @property
    def is_cluster(self) -> bool:
        """True when ``deployment.groups`` makes this a mixed cluster (one deployment per group)."""
        return self.deployment.groups is not None


class Scenario:
    """A loaded scenario file: the raw baseline mapping and its variants (validated on load)."""

    def __init__(self, data: dict[str, Any], source: str = "<scenario>", base_dir: Path | None = None) -> None:
        if not isinstance(data, dict):
            raise TwinInputError(f"{source}: a scenario must be a mapping of sections (got {type(data).__name__})")
        data = copy.deepcopy(data)
        variants = data.pop("variants", None) or {}
        if not isinstance(variants, dict):
            raise TwinInputError(f"{source}: variants: must be a mapping of name -> overrides")
        self.source = source
        self.base_dir = base_dir
        self.baseline_data = data
        self.variant_data: dict[str, dict[str, Any]] = {}
        for name, overrides in variants.items():
            if name == BASELINE:
                raise TwinInputError(f"{source}: variants.{name}: the name 'baseline' is reserved")
            if not isinstance(overrides, dict):
                raise TwinInputError(f"{source}: variants.{name}: must be a mapping of overrides")
            self.variant_data[str(name)] = overrides
        # validate everything up front so a bad variant fails before any run
        for name in self.names():
            self.body(name)

    @property
    def name(self) -> str:
        return str(self.baseline_data.get("name", "scenario"))

    def names(self) -> list[str]:
        return [BASELINE, *self.variant_data]

    def raw(self, variant: str = BASELINE, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
        if variant != BASELINE and variant not in self.variant_data:
            raise TwinInputError(f"{self.source}: no variant {variant!r}{did_you_mean(variant, self.names())} "
                                 f"(variants: {', '.join(self.names())})")
        data = copy.deepcopy(self.baseline_data)
        if variant != BASELINE:
            data = deep_merge(data, self.variant_data[variant])
        if overrides:
            data = deep_merge(data, overrides)
        return data

    def body(self, variant: str = BASELINE, overrides: dict[str, Any] | None = None) -> ScenarioBody:
        data = self.raw(variant, overrides)
        where = self.source if variant == BASELINE else f"{self.source} [variant {variant}]"
        try:
            return ScenarioBody.model_validate(data)
        except ValidationError as exc:
            raise TwinInputError(f"{where}: {format_validation_error(exc)}") from None


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; a bare name looks in the bundled ``scenarios/`` folder."""
    p = resolve_scenario_path(path)
    return Scenario(parse_yaml(read_text(p, "scenario"), str(p)), source=str(p), base_dir=p.parent)


def scenarios_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "scenarios"


def list_scenarios() -> list[Path]:
    d = scenarios_dir()
    return sorted(d.glob("*.yaml")) if d.is_dir() else []


def resolve_scenario_path(path: str | Path) -> Path:
    p = Path(path)
    if p.exists():
        return p
    for candidate in (scenarios_dir() / p, scenarios_dir() / f"{p}.yaml"):
        if candidate.exists():
            return candidate
    hint = did_you_mean(p.stem, names := [s.stem for s in list_scenarios()])
    if hint:   # one suggestion rather than every name
        raise TwinInputError(f"{path}: no such scenario file or bundled scenario{hint} (twin list scenarios lists "
                             f"all {len(names)})")
    raise TwinInputError(f"{path}: no such scenario file (bundled scenarios: {', '.join(names) or 'none'})")
