"""From a validated scenario body to a run: vLLM defaults resolved for the deployment, the KV pool sized,
the cost model and traffic built, replications simulated.

With a ``speculative_decoding:`` section the drafter is built once per deployment: its weights and KV shrink
the KV pool, model-based drafters reserve ``num_speculative_tokens`` lookahead slots per request (as vLLM's
scheduler does for EAGLE-style proposers), and every replica gets a ``twin.spec_decode.Speculator``. The run's
drafting totals land in ``result.config["spec_decode_stats"]``; each step's drafting time is in the step records
(``draft_s``), from which the metrics derive ``spec_decode_draft_time_s`` and ``spec_decode_draft_time_fraction``
(drafting's share of the busy time, within the measured window)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from pydantic import ValidationError

from twin.hardware.catalog import GpuSpec, ModelSpec, resolve_gpu, resolve_model
from twin.cost.base import CostModel
from twin.cost.factory import build_cost_model
from twin.errors import TwinInputError
from twin.hardware.kv_sizing import KvPoolBreakdown, kv_pool_breakdown
from twin.results.records import SimResult
from twin.scenario import ScenarioBody
from twin.core.scheduler_config import SchedulerConfig
from twin.core.schedulers import make_scheduler
from twin.sim.simulate import simulate
from twin.spec_decode import Drafter, SpecDecodeStats, Speculator, build_drafter, speculator_factory
from twin.workload.generate import build_workload

if TYPE_CHECKING:  # twin.sim.cluster imports this module
    from twin.sim.cluster import ClusterDeployment

GIB = 1 << 30


def vllm_default_limits(gpu: GpuSpec) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) that ``vllm serve`` picks for this GPU class."""
    big = gpu.memory_bytes >= 70 * GIB and "a100" not in gpu.name.lower()
    return (8192, 1024) if big else (2048, 256)


@dataclass
class Deployment:
    """Everything a replica needs, resolved."""

    model: ModelSpec
    gpu: GpuSpec
    scheduler_config: SchedulerConfig
    kv_pool: KvPoolBreakdown
    cost_model_factory: Callable[[], CostModel]
    drafter: Drafter | None = None

    @property
    def num_gpu_blocks(self) -> int:
        return self.kv_pool.num_gpu_blocks


def resolve_scheduler_config(body: ScenarioBody, model: ModelSpec, gpu: GpuSpec) -> SchedulerConfig:
    server = body.server
    default_tokens, default_seqs = vllm_default_limits(gpu)
    max_model_len = server.max_model_len or model.max_position_embeddings
    max_num_seqs = server.max_num_seqs or default_seqs
    whole_prompts = server.scheduler == "prefill_first" or not server.enable_chunked_prefill
    if server.max_num_batched_tokens is not None:
        max_tokens = server.max_num_batched_tokens
    else:
        # vLLM's clamps on its own defaults: never above max_num_seqs * max_model_len, and without chunked
        # prefill at least max_model_len (a whole prompt must fit one step)
        max_tokens = min(default_tokens, max_num_seqs * max_model_len)
        if whole_prompts:
            max_tokens = max(max_tokens, max_model_len)
        max_tokens = max(max_tokens, max_num_seqs)
    fields = server.model_dump(exclude={"gpu_memory_utilization", "num_gpu_blocks_override"})
    fields.update(max_model_len=max_model_len, max_num_seqs=max_num_seqs, max_num_batched_tokens=max_tokens)
    spec = body.speculative_decoding
    if spec is not None and spec.uses_lookahead_slots:
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
    if body.deployment.groups is not None:
        raise TwinInputError(f"{where + ': ' if where else ''}deployment.groups: {what} needs one deployment, not "
                             f"replica groups; leave groups out (twin run and twin compare run mixed clusters)")


def resolve_deployment(body: ScenarioBody, base_dir: Path | None = None) -> Deployment:
    """The one deployment of ``body``; a mixed cluster is an error (see ``resolve_for_run``)."""
    require_single_deployment(body, "this step")
    dep = body.deployment
    model = resolve_model(_relative(dep.model, base_dir))
    gpu = resolve_gpu(_relative(dep.gpu, base_dir))
    model.check_tensor_parallel(dep.tensor_parallel_size)
    sched = resolve_scheduler_config(body, model, gpu)
    cm = body.cost_model
    drafter = None
    if body.speculative_decoding is not None:
        drafter = build_drafter(body.speculative_decoding, model, gpu, dep.tensor_parallel_size, dep.weight_dtype,
                                dep.kv_dtype, cm.params if cm.kind == "roofline" else None, base_dir)
    pool = kv_pool_breakdown(
        model, gpu, dep.tensor_parallel_size, sched.block_size, body.server.gpu_memory_utilization,
        dep.weight_dtype, dep.kv_dtype, sched.max_num_batched_tokens, body.server.num_gpu_blocks_override,
        max_num_seqs=sched.max_num_seqs, max_model_len=sched.max_model_len,
        draft_weight_bytes=drafter.weight_bytes if drafter else 0,
        draft_kv_bytes_per_token=drafter.kv_bytes_per_token if drafter else 0)
    params: dict[str, Any] = dict(cm.params)
    if cm.kind == "profile":
        params["path"] = str(_relative(cm.profile, base_dir))

    def cost_model_factory() -> CostModel:
        return build_cost_model(cm.kind, model, gpu, dep.tensor_parallel_size,
                                {"weight_dtype": dep.weight_dtype, "kv_dtype": dep.kv_dtype}, params)

    cost_model_factory()  # fail on bad parameters before any run
    return Deployment(model, gpu, sched, pool, cost_model_factory, drafter)


def _relative(value: str, base_dir: Path | None) -> str:
    """A path-looking value relative to the scenario's folder; names pass through."""
    if base_dir is not None and (value.endswith((".yaml", ".yml", ".json")) or "/" in value):
        p = Path(value)
        if not p.is_absolute() and (base_dir / p).exists():
            return str(base_dir / p)
    return value


def make_router(name: str, **params: Any):
    """A fresh router by name; see ``twin.sim.routing``."""
    from twin.sim.routing import make_router as _make_router

    return _make_router(name, **params)


def resolve_for_run(body: ScenarioBody, base_dir: Path | None = None) -> "Deployment | ClusterDeployment":
    """What ``run_body`` needs resolved: the ``Deployment``, or for a mixed cluster (``deployment.groups``)
    the ``twin.sim.cluster.ClusterDeployment``. Resolve once and pass it to every replication."""
    if body.deployment.groups is not None:
        from twin.sim.cluster import resolve_cluster

        return resolve_cluster(body, base_dir=base_dir)
    return resolve_deployment(body, base_dir)


def run_body(body: ScenarioBody, base_dir: Path | None = None, *, replication: int = 0,
             progress: Callable[[float], None] | None = None,
             deployment: "Deployment | ClusterDeployment | None" = None) -> SimResult:
    """One simulation of a scenario body; replication r uses seed ``body.seed + r``. ``deployment`` is what
    ``resolve_for_run`` gives (resolved here when ``None``); a mixed cluster runs on ``twin.sim.cluster``."""
    if body.deployment.groups is not None:
        from twin.sim.cluster import ClusterDeployment, run_cluster

        if deployment is not None and not isinstance(deployment, ClusterDeployment):
            raise TypeError("run_body: a body with deployment.groups takes a ClusterDeployment (resolve_for_run)")
        return run_cluster(body, base_dir=base_dir, replication=replication, progress=progress,
                           cluster=deployment)
    dep = deployment or resolve_deployment(body, base_dir)
    seed = body.seed + replication
    summary = {
        "name": body.name, "seed": seed, "replication": replication,
        "deployment": body.deployment.model_dump(),
        "server": dep.scheduler_config.model_dump(),
        "num_gpu_blocks": dep.num_gpu_blocks,
        "kv_capacity_tokens": dep.kv_pool.capacity_tokens,
        "cost_model": body.cost_model.model_dump(),
    }
    if body.speculative_decoding is not None:
        summary["speculative_decoding"] = body.speculative_decoding.model_dump()
    return simulate_replicas(body, [body], [dep], [0] * body.deployment.replicas,
                             make_router(body.deployment.router), seed=seed, base_dir=base_dir,
                             summary=summary, progress=progress)


def simulate_replicas(body: ScenarioBody, bodies: list[ScenarioBody], deps: list[Deployment], owner: list[int],
                      router: Any, *, seed: int, base_dir: Path | None, summary: dict[str, Any],
                      progress: Callable[[float], None] | None = None) -> SimResult:
    """Simulate ``body``'s traffic on ``len(owner)`` replicas, replica i served as ``deps[owner[i]]`` (with
    ``bodies[owner[i]]``'s speculative decoding) behind ``router``."""
    traffic = build_workload(body.workload, seed, base_dir=base_dir)
    speculators: list[Speculator] = []
    make_speculator = None
    if body.speculative_decoding is not None:
        factories = [speculator_factory(b.speculative_decoding, d.drafter, seed) if d.drafter is not None else None
                     for b, d in zip(bodies, deps)]

        def make_speculator(i: int) -> Speculator:
            factory = factories[owner[i]]
            if factory is None:
                raise TwinInputError("speculative_decoding: a replica group has no drafter")
            speculators.append(factory(i))
            return speculators[-1]

    result = simulate(
        traffic,
        lambda i: make_scheduler(deps[owner[i]].scheduler_config, deps[owner[i]].num_gpu_blocks),
        lambda i: deps[owner[i]].cost_model_factory(),
        num_replicas=len(owner),
        router=router,
        make_speculator=make_speculator,
        max_time_s=body.max_sim_time_s,
        progress=progress,
        config_summary=summary,
    )
    if speculators:
        total = SpecDecodeStats()
        for s in speculators:
            total = total.merge(s.stats)
        result.config["spec_decode_stats"] = asdict(total)
    return result


def metrics_of(result: SimResult, body: ScenarioBody) -> dict[str, Any]:
    window = (body.warmup_s, None) if body.warmup_s > 0 else None
    return result.metrics(slo=body.slo.as_dict() or None, window=window)
