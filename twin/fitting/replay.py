"""Rebuild a measured run's traffic and simulate it on a deployment with given cost parameters.

Traffic: the run's arrival process (a constant-rate open loop with exponential or gamma gaps, optionally capped
at ``max_concurrency``; or a closed loop), its prompt and output lengths, and its prompt pool (a finite set of
prompts cycled in order, each sharing its group's system prompt) or unique prompts. The simulation records every
step's shape (``StepLog``) so that the fit can re-cost the same steps under other parameters without simulating.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from twin.core.schedulers import make_scheduler
from twin.cost.roofline import DEFAULT_REQUEST_PATH_S, RooflineCostModel
from pydantic import ValidationError

from twin.errors import TwinInputError
from twin.fitting.cold_start import ColdStart, cold_added, compiles_for, with_cold_start
from twin.fitting.measured_run import MeasuredRun
from twin.fitting.run_span import over_run_span
from twin.fitting.path_layers import layer_path_s, split_kwargs
from twin.fitting.scoped import params_for
from twin.scenario import ScenarioBody
from twin.sim.deployment import Deployment, resolve_deployment
from twin.sim.dp_router import DataParallelRouter
from twin.sim.simulate import simulate
from twin.workload.arrivals import scaled_exponential_sends
from twin.workload.capped_open_loop import CappedOpenLoop
from twin.workload.rng import stream
from twin.workload.spec import RequestSpec
from twin.workload.validation_errors import format_validation_error


@dataclass(frozen=True)
class Target:
    """The deployment a run was measured on: catalog (or config.json) model, GPU, TP and dtypes; per-group
    weight formats and the data/pipeline/expert layout where the run had them, expert parallelism's exchange
    (``all2all_backend``) included (``twin.hardware.parallel``)."""

    model: str
    gpu: str
    tensor_parallel_size: int = 1
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    weight_formats: dict[str, str] | None = None
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    enable_expert_parallel: bool = False
    all2all_backend: str = "allgather_reducescatter"


def deployment_for(run: MeasuredRun, target: Target) -> Deployment:
    """The run's server (its known vLLM settings over vLLM's defaults) on ``target``; a setting out of range, or
    a request longer than the server's context (vLLM refuses those before serving them), is a one-line error."""
    data = {
        "name": run.name,
        "deployment": {"gpu": target.gpu, "model": target.model, "tensor_parallel_size": target.tensor_parallel_size,
                       "weight_dtype": target.weight_dtype, "kv_dtype": target.kv_dtype,
                       "weight_formats": target.weight_formats,
                       "pipeline_parallel_size": target.pipeline_parallel_size,
                       "data_parallel_size": target.data_parallel_size,
                       "enable_expert_parallel": target.enable_expert_parallel,
                       "all2all_backend": target.all2all_backend},
        "server": dict(run.server),
        "workload": {"arrivals": {"process": "poisson", "rate_per_s": 1.0}, "num_requests": 1,
                     "classes": [{"name": "x", "share": 1.0, "prompt": {"suffix_tokens": 1}, "output_tokens": 1}]},
    }
    try:
        body = ScenarioBody.model_validate(data)
    except ValidationError as exc:
        raise TwinInputError(f"{run.name}: the server settings the result file gives: "
                             f"{format_validation_error(exc)}") from None
    dep = resolve_deployment(body)
    check_context(run, dep.scheduler_config.max_model_len)
    if run.client is not None:        # the client's scope (request_path_s@client_<name>, twin.fitting.scoped)
        dep.client = run.client
    dep.release = getattr(run, "release", None)     # the release's scope (``@vllm_0.10``, twin.fitting.release_scope)
    return dep


def _longest(sample) -> int:
    return int(max(sample.values)) if sample.values is not None else int(math.ceil(sample.quantiles[-1][1]))


def check_context(run: MeasuredRun, max_model_len: int) -> None:
    """vLLM refuses a request whose prompt plus output exceeds ``max_model_len``, so a measured run that
    completed one was served with a longer context than the twin would give it: an error, not a silent cap."""
    prompt, output = _longest(run.prompt_tokens), _longest(run.output_tokens)
    pool = run.prompt_pool
    if pool is not None:
        prompt = max(prompt, pool.system_prompt_tokens + 1)
    if prompt + output > max_model_len:
        raise TwinInputError(f"{run.name}: a request of {prompt:,} prompt + {output:,} output tokens exceeds "
                             f"max_model_len = {max_model_len:,}; give the server's max_model_len (--metadata "
                             f"max_model_len=N) or check the token counts")


def build_requests(run: MeasuredRun, seed: int, max_requests: int | None = None) -> list[RequestSpec]:
    """The run's requests in send order (at most ``max_requests``), with one random stream per quantity."""
    n = run.num_requests if max_requests is None else min(run.num_requests, max_requests)
    prompts = run.prompt_tokens.draw(n if run.prompt_pool is None else run.prompt_pool.size, stream(seed, "prompt"))
    outputs = run.output_tokens.draw(n, stream(seed, "output"))
    rate = run.rate_per_s
    if rate is None or math.isinf(rate):
        arrivals = np.zeros(n)
    elif run.scaled_sends:        # every send of the stage drawn, scaled to its span, the first n kept
        arrivals = scaled_exponential_sends(run.num_requests, run.num_requests / rate,
                                            stream(seed, "arrivals"))[:n]
    else:
        shape = run.burstiness
        gaps = stream(seed, "arrivals").gamma(shape, 1.0 / (rate * shape), size=n)
        arrivals = np.cumsum(gaps) - gaps[0]
    pool = run.prompt_pool
    specs = []
    for i in range(n):
        if pool is None:
            total = int(prompts[i])
            segments = ((("u", i), total),)
        else:
            j = i % pool.size
            total = int(max(prompts[j], pool.system_prompt_tokens + 1))
            sys_tokens = pool.system_prompt_tokens
            segments = ((("sys", j // pool.prompts_per_group), sys_tokens), (("q", j), total - sys_tokens)) \
                if sys_tokens else ((("q", j), total),)
        specs.append(RequestSpec(i, float(arrivals[i]), total, int(outputs[i]), segments))
    return specs


class StepLog:
    """A cost model wrapper that records every step's shape as it costs it: tokens, sequences, logit positions,
    context tokens read and attention pairs; ``decode_weights`` counts the tokens each step emitted to running
    decodes (the weights of TPOT)."""

    def __init__(self, inner: RooflineCostModel) -> None:
        self.inner = inner
        self.name = inner.name
        self.request_path_s = inner.request_path_s
        self.request_path_jitter_s = inner.request_path_jitter_s
        self.rows: list[tuple[int, int, int, int, float, int, float]] = []

    def step_time_s(self, step) -> float:
        nn, cc = step.num_new_tokens, step.num_computed_before
        dt = self.inner.step_time_s(step)
        if nn:
            tokens = sum(nn)
            pairs = sum(n * c + n * (n + 1) / 2 for n, c in zip(nn, cc))
            decodes = sum(1 for n, c in zip(nn, cc) if n == 1 and c > 0)
            self.rows.append((tokens, len(nn), len(nn) + sum(step.num_spec_tokens), sum(cc), pairs, decodes, dt))
        return dt

    def explain(self, step) -> dict[str, float]:
        return self.inner.explain(step)

    def arrays(self) -> dict[str, np.ndarray]:
        a = np.asarray(self.rows, dtype=float).reshape(-1, 7)
        names = ("tokens", "seqs", "logits", "context", "pairs", "decodes", "dt")
        return {k: a[:, i] for i, k in enumerate(names)}


@dataclass
class Replayed:
    """One simulated run: its metrics (``vllm bench serve`` keys), the shapes of its steps, and for the requests
    measured (finished, after the warm-up) their TTFT in seconds and dispatch index (``request_index``: the
    position of their request-path draw, ``twin.sim.request_path``).

    ``steps["end_s"]`` (when the step log lines up with the simulation's step records, else absent): each step's
    end time; steps are grouped by replica (``steps["replica"]``), in time order within one. ``arrival_s`` and
    ``replica``: the measured requests' client send times and replicas (what a request waited on: the steps of
    its replica that ended between its hand-over to the engine and its first token)."""

    metrics: dict[str, Any]
    steps: dict[str, np.ndarray]
    ttft_s: np.ndarray
    request_index: np.ndarray
    arrival_s: np.ndarray | None = None
    replica: np.ndarray | None = None
    cold_start: ColdStart | None = None     # a cold run's compile stalls and what they add (twin.fitting.cold_start)


def cost_model_for(dep: Deployment, target: Target, params: dict[str, float]) -> RooflineCostModel:
    """The roofline at ``params`` on ``dep``: scoped parameters (``name@scope``, ``twin.fitting.scoped``) apply
    where their scope covers the deployment; the server's all-reduce fusion is the deployment's."""
    kw = {"allreduce_fusion": getattr(dep, "allreduce_fusion", False),
          "cudagraph_tokens": getattr(dep, "cudagraph_tokens", None),
          "float32_matmul_precision": getattr(dep, "float32_matmul_precision", None),
          "async_scheduling": getattr(dep.scheduler_config, "async_scheduling", True)} | params_for(params, dep)
    kw, per_layer_s = split_kwargs(kw)        # a fit-only per-layer request path (twin.fitting.path_layers)
    cost = RooflineCostModel(dep.model, dep.gpu, tensor_parallel_size=target.tensor_parallel_size,
                             weight_dtype=dep.weight_formats or target.weight_dtype, kv_dtype=target.kv_dtype,
                             layout=dep.layout, **kw)
    if per_layer_s is not None:       # the path of a covered run, with what the expert path adds kept
        cost.request_path_s += layer_path_s(per_layer_s, cost.model) - kw.get("request_path_s", DEFAULT_REQUEST_PATH_S)
    return cost


def requests_to_simulate(run: MeasuredRun, max_sim_s: float | None) -> int | None:
    """How many of the run's requests to simulate: those sent in its first ``max_sim_s`` seconds (at least two
    passes over its prompt pool), or all when ``max_sim_s`` is None."""
    if max_sim_s is None:
        return None
    rate = run.rate_per_s
    if rate is None or math.isinf(rate):
        rate = (run.num_requests / run.duration_s) if run.duration_s else None
    # in floats, capped at the run's own count: a rate of 1e308 asks for no more than the run sent
    wanted = float(run.num_requests) if rate is None else min(float(rate) * max_sim_s, float(run.num_requests))
    n = math.ceil(wanted) if math.isfinite(wanted) else run.num_requests
    if run.prompt_pool is not None:
        n = max(n, 2 * run.prompt_pool.size)
    return max(1, n)


def warmup_cut(specs: list[RequestSpec], run: MeasuredRun) -> float:
    """Where steady state starts: after the first pass over the prompt pool (an empty prefix cache) and the
    first tenth of the requests (the queue filling up). Measured runs last long enough for this to be noise."""
    k = len(specs) // 10
    if run.prompt_pool is not None:
        k = max(k, run.prompt_pool.size)
    return specs[min(k, len(specs) - 1)].arrival_s if len(specs) > 20 else 0.0


def replay(run: MeasuredRun, target: Target, params: dict[str, float], *, seed: int = 0,
           max_sim_s: float | None = None, deployment: Deployment | None = None) -> Replayed:
    """Simulate ``run`` on ``target`` with roofline parameters ``params``: its first ``max_sim_s`` seconds of
    traffic (all of it when None), measured after the warm-up (``warmup_cut``)."""
    dep = deployment or deployment_for(run, target)
    specs = build_requests(run, seed, requests_to_simulate(run, max_sim_s))
    cost = cost_model_for(dep, target, params)
    dp = dep.engines_per_replica      # data parallelism: DP engine cores behind vLLM's DP load balancer

    def run_sim(cost_of):
        return simulate(CappedOpenLoop(specs, run.max_concurrency) if run.max_concurrency else specs,
                        lambda i: make_scheduler(dep.scheduler_config, dep.num_gpu_blocks), cost_of, seed=seed,
                        num_replicas=dp, **({"router": DataParallelRouter()} if dp > 1 else {}))
    logs = [StepLog(cost) for _ in range(dp)]      # one per engine core: each in its own step order
    result = run_sim(lambda i: logs[i])
    compiles = compiles_for(run, dep)              # a cold server's one-off compiles (twin.fitting.cold_start)
    cold = cold_added(run, result.requests, lambda wrap: run_sim(lambda i: wrap(cost)).requests,
                      compiles) if compiles is not None else None
    if not result.requests:
        raise TwinInputError(f"{run.name}: the replay simulated no request")
    cut = warmup_cut(specs, run)
    measured = [r for r in result.requests if r.arrival_s >= cut and r.first_token_s is not None]
    metrics = with_cold_start(result.metrics(window=(cut, None) if cut > 0 else None), cold)
    # a slice of the run, or (round 19) a whole open-loop run measured after the cut (its Poisson draw's span is
    # not the client's send duration): its throughput over the run's span
    if measured and (len(specs) < run.num_requests or (cut > 0 and not run.closed_loop and not run.queueing)):
        metrics = over_run_span(metrics, run, specs[-1].arrival_s, max(r.finish_s or 0.0 for r in measured))
    return Replayed(metrics, _step_arrays(logs, result.steps),
                    np.array([r.first_token_s - r.arrival_s for r in measured]),
                    np.array([r.request_id for r in measured], dtype=np.int64),
                    np.array([r.arrival_s for r in measured]), np.array([r.replica for r in measured], dtype=np.int64),
                    cold)


def _step_arrays(logs: list[StepLog], records) -> dict[str, np.ndarray]:
    """The step logs' rows, replica after replica, with their replica and, where the simulation's step records
    line up with them (same count and durations per replica), each step's end time."""
    parts = [log.arrays() for log in logs]
    out = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    out["replica"] = np.concatenate([np.full(len(p["dt"]), i, dtype=float) for i, p in enumerate(parts)])
    rec_replica, start, dur = records.column("replica"), records.column("start_s"), records.column("duration_s")
    ends = []
    for i, p in enumerate(parts):
        mine = rec_replica == i
        if int(mine.sum()) != len(p["dt"]) or not np.allclose(dur[mine], p["dt"], rtol=1e-9, atol=1e-12):
            return out
        ends.append(start[mine] + dur[mine])
    out["end_s"] = np.concatenate(ends) if ends else np.zeros(0)
    return out
