"""The scenario's ``disaggregation:`` section: prefill/decode (P/D) disaggregation, validated.

    disaggregation:
      prefill: {replicas: 2, gpu: A100-SXM-80GB, tensor_parallel_size: 1,
                server: {max_num_batched_tokens: 8192},
                kv_transfer_config: {kv_connector: NixlConnector, kv_role: kv_producer}}
      decode:  {replicas: 1, kv_transfer_config: {kv_connector: NixlConnector, kv_role: kv_consumer}}
      link: {kind: infiniband, bandwidth_gb_s: 25, latency_us: 20, layerwise: false}

Each pool is a replica group: its GPU, tensor/data parallelism and server knobs override the scenario's
``deployment``/``server`` (``None``: the scenario's). ``kv_transfer_config`` carries vLLM's
``--kv-transfer-config`` keys by name: ``kv_connector`` (the P/D connectors), ``kv_role`` (a prefill engine
produces, ``kv_producer`` or ``kv_both``; a decode engine consumes, ``kv_consumer`` or ``kv_both``),
``kv_buffer_device`` and ``kv_connector_extra_config`` (recorded, not modelled). The run is in
``twin.deploy``; the link's physics in ``twin.hardware.kv_link``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from twin.hardware.kv_link import LINK_KINDS
from twin.workload.strict_model import StrictModel

# vLLM's connectors that move KV from a prefill instance to a decode instance (vllm/distributed/kv_transfer)
PD_CONNECTORS = ("NixlConnector", "P2pNcclConnector", "MooncakeConnector", "LMCacheConnectorV1")
POOL_ROUTERS = ("round_robin", "least_outstanding", "least_kv_usage")
MAX_POOL_REPLICAS = 1024


class KvTransferConfig(StrictModel):
    """vLLM's ``--kv-transfer-config`` for one pool's engines."""

    kv_connector: Literal["NixlConnector", "P2pNcclConnector", "MooncakeConnector",
                          "LMCacheConnectorV1"] = "NixlConnector"
    kv_role: Literal["kv_producer", "kv_consumer", "kv_both"] = "kv_both"
    kv_buffer_device: Literal["cuda", "cpu"] = "cuda"
    kv_connector_extra_config: dict[str, Any] = Field(default_factory=dict)


class PoolConfig(StrictModel):
    """One pool's engines: a replica group with its own GPU, parallelism and server knobs."""

    replicas: int = Field(1, ge=1, le=MAX_POOL_REPLICAS)
    gpu: str | None = None
    tensor_parallel_size: int | None = Field(None, ge=1, le=64)
    data_parallel_size: int | None = Field(None, ge=1, le=1024)
    enable_expert_parallel: bool | None = None
    server: dict[str, Any] = Field(default_factory=dict)
    router: Literal["round_robin", "least_outstanding", "least_kv_usage"] = "round_robin"
    kv_transfer_config: KvTransferConfig = Field(default_factory=KvTransferConfig)

    def deployment_overrides(self) -> dict[str, Any]:
        """The scenario ``deployment`` fields this pool overrides."""
        out: dict[str, Any] = {"replicas": self.replicas}
        for key in ("gpu", "tensor_parallel_size", "data_parallel_size", "enable_expert_parallel"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


class KvLinkConfig(StrictModel):
    """The link the KV crosses (see ``twin.hardware.kv_link`` for each kind's stated defaults)."""

    kind: Literal["nvlink", "nvswitch", "infiniband", "roce", "pcie"] = "infiniband"
    bandwidth_gb_s: float | None = Field(None, gt=0, le=1e5, allow_inf_nan=False)   # one direction, per GPU
    latency_us: float | None = Field(None, ge=0, le=1e7, allow_inf_nan=False)
    layerwise: bool = False


class DisaggregationConfig(StrictModel):
    prefill: PoolConfig = Field(default_factory=PoolConfig)
    decode: PoolConfig = Field(default_factory=PoolConfig)
    link: KvLinkConfig = Field(default_factory=KvLinkConfig)
    # seconds a prefill engine holds a finished request's blocks for a decode engine that has not read them
    # (vLLM's VLLM_NIXL_ABORT_REQUEST_TIMEOUT, default 480 s); then it frees them
    abort_request_timeout_s: float = Field(480.0, gt=0, le=1e7, allow_inf_nan=False)

    @model_validator(mode="after")
    def _roles(self) -> "DisaggregationConfig":
        p, d = self.prefill.kv_transfer_config, self.decode.kv_transfer_config
        if p.kv_role == "kv_consumer":
            raise ValueError(".prefill.kv_transfer_config.kv_role: 'kv_consumer' cannot produce KV "
                             "(allowed: kv_producer, kv_both)")
        if d.kv_role == "kv_producer":
            raise ValueError(".decode.kv_transfer_config.kv_role: 'kv_producer' cannot receive KV "
                             "(allowed: kv_consumer, kv_both)")
        if p.kv_connector != d.kv_connector:
            raise ValueError(f".decode.kv_transfer_config.kv_connector: {d.kv_connector!r} differs from the "
                             f"prefill pool's {p.kv_connector!r}; both ends use one connector")
        return self


assert set(LINK_KINDS) == set(KvLinkConfig.model_fields["kind"].annotation.__args__)
