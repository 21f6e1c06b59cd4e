"""A P/D scenario resolved: each pool's scenario body and ``Deployment`` (the engine core, its KV pool and
cost model, as any replica has), the engines each pool runs and the KV link between them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from twin.disaggregation import DisaggregationConfig, PoolConfig
from twin.errors import TwinInputError
from twin.hardware.kv_link import KvLink, kv_transfer_bytes_per_token, resolve_link
from twin.scenario import ScenarioBody, deep_merge
from twin.sim.deployment import Deployment, resolve_deployment
from twin.workload.validation_errors import format_validation_error

POOLS = ("prefill", "decode")


@dataclass
class PdDeployment:
    """Both pools resolved. Engines are numbered prefill first: ``0 .. num_prefill - 1`` prefill,
    ``num_prefill ..`` decode; a data-parallel server counts each DP rank as an engine."""

    config: DisaggregationConfig
    bodies: dict[str, ScenarioBody]
    deployments: dict[str, Deployment]
    engines: dict[str, int]
    link: KvLink
    kv_bytes_per_token: int

    @property
    def num_prefill(self) -> int:
        return self.engines["prefill"]

    @property
    def num_engines(self) -> int:
        return self.engines["prefill"] + self.engines["decode"]

    def pool_of(self, engine: int) -> str:
        return "prefill" if engine < self.num_prefill else "decode"

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"link": self.link.as_dict(), "kv_bytes_per_token": self.kv_bytes_per_token,
                               "abort_request_timeout_s": self.config.abort_request_timeout_s}
        start = 0
        for name in POOLS:
            pool: PoolConfig = getattr(self.config, name)
            b, d, n = self.bodies[name], self.deployments[name], self.engines[name]
            out[name] = {
                "engines": list(range(start, start + n)), "gpu": b.deployment.gpu,
                "tensor_parallel_size": b.deployment.tensor_parallel_size,
                "data_parallel_size": b.deployment.data_parallel_size, "replicas": pool.replicas,
                "gpus": n * b.deployment.tensor_parallel_size * b.deployment.pipeline_parallel_size,
                "router": pool.router, "kv_transfer_config": pool.kv_transfer_config.model_dump(),
                "server": d.scheduler_config.model_dump(), "num_gpu_blocks": d.num_gpu_blocks,
            }
            start += n
        return out


def pool_body(body: ScenarioBody, name: str) -> ScenarioBody:
    """The scenario body one pool's engines run: the pool's deployment fields and server knobs merged over
    the scenario's, the ``disaggregation`` section left out."""
    pool: PoolConfig = getattr(body.disaggregation, name)
    data = body.model_dump(mode="python", exclude_none=True)
    data.pop("disaggregation", None)
    data = deep_merge(data, {"deployment": pool.deployment_overrides(), "server": dict(pool.server)})
    try:
        return ScenarioBody.model_validate(data)
    except ValidationError as exc:
        raise TwinInputError(f"disaggregation.{name}: {format_validation_error(exc)}") from None


def resolve_pd(body: ScenarioBody, base_dir: Path | None = None) -> PdDeployment:
    """Resolve both pools of a P/D body and the link between them; a problem names the pool."""
    cfg = body.disaggregation
    if cfg is None:
        raise TwinInputError("disaggregation: this scenario has no disaggregation section")
    bodies, deps, engines = {}, {}, {}
    for name in POOLS:
        b = pool_body(body, name)
        try:
            d = resolve_deployment(b, base_dir)
        except TwinInputError as exc:
            raise TwinInputError(f"disaggregation.{name}: {exc}") from None
        if d.scheduler_config.scheduler != "continuous":
            raise TwinInputError(f"disaggregation.{name}.server.scheduler: {d.scheduler_config.scheduler!r}: P/D "
                                 f"engines run vLLM's continuous scheduler")
        bodies[name], deps[name] = b, d
        engines[name] = b.deployment.replicas * d.engines_per_replica
    p, d = bodies["prefill"].deployment, bodies["decode"].deployment
    gpus = sum(engines[n] * bodies[n].deployment.tensor_parallel_size * bodies[n].deployment.pipeline_parallel_size
               for n in POOLS)
    lk = cfg.link
    link = resolve_link(lk.kind, deps["prefill"].gpu, deps["decode"].gpu, deps["prefill"].model,
                        p.tensor_parallel_size, d.tensor_parallel_size, gpus, lk.bandwidth_gb_s, lk.latency_us,
                        lk.layerwise)
    return PdDeployment(cfg, bodies, deps, engines, link,
                        kv_transfer_bytes_per_token(deps["prefill"].model, p.kv_dtype))
