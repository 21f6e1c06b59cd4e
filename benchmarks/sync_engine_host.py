"""CPU time per sequence of vLLM's OWN engine-core decode step, the part a server without async scheduling runs
while the GPU idles (issue 33, round 13; docs/fidelity.md "Round 13: the sync server held out").

Round 9's ``benchmarks/sync_host_prior.py`` timed our own model of that work (2.9-3.5 us per sequence per step).
This times the installed vLLM release's code itself where it runs without a GPU: ``EngineCore.step()`` (vLLM 0.12,
``vllm/v1/engine/core.py``) calls, in series, ``Scheduler.schedule()``, the executor's ``execute_model`` (the worker;
with TP > 1 the plan crosses to each worker through a shared-memory queue that pickles it, ``shm_broadcast.py``),
``sample_tokens`` and ``Scheduler.update_from_output()``; with async scheduling (``step_with_batch_queue``) the next
step's ``schedule()`` and the worker's input preparation run while the GPU computes. Timed here, per decode step
of B running requests (prompt 1,000 tokens, 16-token blocks, prefix caching on, as round 9): ``schedule()``,
``update_from_output()`` given one sampled token per request, and the pickle round trip of the plan (the hand-off).
The worker's state update, input preparation and sampled-token book-keeping need vLLM's GPU model runner; for them
this takes round 9's model of the same phases (``sync_host_prior.HostStep.worker`` and its reply's pickle round
trip), so the sum is vLLM's own engine core plus a modelled worker: still a LOWER bound (the modelled phases ran
at about a third of vLLM's own time where both exist, the engine core's).

Needs a vLLM release importable (not a dependency of the twin: point PYTHONPATH at one). Prints microseconds per
sequence per step: (CPU time at --large - at --small) / (large - small), each the fastest of --repeats timings of
--steps steps, so per-step constants cancel.

    PYTHONPATH=VLLM_SRC:. python benchmarks/sync_engine_host.py [--small 32] [--large 256] [--steps 20]
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import positive_int  # noqa: E402
from benchmarks.sync_host_prior import HostStep  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402

PROMPT_TOKENS, MAX_OUTPUT_TOKENS, TOKENS_PER_BLOCK = 1000, 100_000, 16


def _vllm():
    try:
        import torch
        from vllm import __version__
        from vllm.sampling_params import SamplingParams
        from vllm.v1.core.sched.scheduler import Scheduler
        from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
        from vllm.v1.outputs import ModelRunnerOutput
        from vllm.v1.request import Request
    except ImportError as e:
        raise TwinInputError(f"vllm: not importable ({e}); put a vLLM release on PYTHONPATH") from None
    return SimpleNamespace(version=__version__, torch=torch, SamplingParams=SamplingParams, Scheduler=Scheduler,
                           FullAttentionSpec=FullAttentionSpec, KVCacheConfig=KVCacheConfig,
                           KVCacheGroupSpec=KVCacheGroupSpec, ModelRunnerOutput=ModelRunnerOutput, Request=Request)


def _scheduler(v, max_seqs: int):
    """vLLM's Scheduler on a configuration stub: the fields its constructor, schedule() and
    update_from_output() read (a decode-only, single-engine, no-connector server)."""
    blocks = max_seqs * (PROMPT_TOKENS // TOKENS_PER_BLOCK + 64) + 16
    cfg = SimpleNamespace(
        scheduler_config=SimpleNamespace(max_num_seqs=max_seqs, max_num_batched_tokens=8192, policy="fcfs",
                                         long_prefill_token_threshold=0, max_num_encoder_input_tokens=8192,
                                         encoder_cache_size=8192, enable_chunked_prefill=True,
                                         disable_hybrid_kv_cache_manager=False, async_scheduling=False),
        cache_config=SimpleNamespace(enable_prefix_caching=True, num_gpu_blocks=blocks, block_size=TOKENS_PER_BLOCK,
                                     prefix_caching_hash_algo="sha256", kv_sharing_fast_prefill=False),
        lora_config=None, kv_transfer_config=None, ec_transfer_config=None, speculative_config=None,
        kv_events_config=None,
        parallel_config=SimpleNamespace(data_parallel_rank=0, pipeline_parallel_size=1,
                                        decode_context_parallel_size=1, prefill_context_parallel_size=1),
        observability_config=SimpleNamespace(kv_cache_metrics=False, kv_cache_metrics_sample=0.0),
        model_config=SimpleNamespace(is_encoder_decoder=False, is_multimodal_model=False, max_model_len=PROMPT_TOKENS + MAX_OUTPUT_TOKENS + 16))
    spec = v.FullAttentionSpec(block_size=TOKENS_PER_BLOCK, num_kv_heads=8, head_size=128, dtype=v.torch.bfloat16)
    kv = v.KVCacheConfig(num_blocks=blocks, kv_cache_tensors=[],
                         kv_cache_groups=[v.KVCacheGroupSpec(layer_names=["layer.0"], kv_cache_spec=spec)])
    som = SimpleNamespace(should_advance=lambda request: False, grammar_bitmask=lambda *a, **k: None)
    return v.Scheduler(vllm_config=cfg, kv_cache_config=kv, structured_output_manager=som,
                       block_size=TOKENS_PER_BLOCK, include_finished_set=False, log_stats=False)


def _decode_server(v, batch: int):
    """A scheduler with ``batch`` requests past their prompts (every later step is a decode step)."""
    from vllm.utils.hashing import sha256           # the default prefix-caching hash ("sha256")
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    init_none_hash(sha256)
    hasher = get_request_block_hasher(TOKENS_PER_BLOCK, sha256)
    s = _scheduler(v, batch)
    for i in range(batch):
        sp = v.SamplingParams(max_tokens=MAX_OUTPUT_TOKENS, ignore_eos=True, temperature=0.6, top_k=20, top_p=0.95)
        s.add_request(v.Request(f"r{i}", [(7 * i + j) % 30_000 + 1 for j in range(PROMPT_TOKENS)], sp, None,
                                eos_token_id=2, block_hasher=hasher))
    while any(r.num_computed_tokens < r.num_prompt_tokens for r in s.running) or s.waiting:
        _step(v, s)
    return s


def _step(v, s) -> tuple[float, float, float]:
    """One step: (schedule, plan pickle round trip, update_from_output) CPU seconds."""
    t0 = time.process_time()
    so = s.schedule()
    t1 = time.process_time()
    pickle.loads(pickle.dumps(so, protocol=pickle.HIGHEST_PROTOCOL))
    t2 = time.process_time()
    ids = [r.request_id for r in s.running]
    mro = v.ModelRunnerOutput(req_ids=ids, req_id_to_index={r: k for k, r in enumerate(ids)},
                              sampled_token_ids=[[5 + k % 1000] for k in range(len(ids))], logprobs=None,
                              prompt_logprobs_dict={}, pooler_output=[])
    t3 = time.process_time()
    s.update_from_output(so, mro)
    t4 = time.process_time()
    return t1 - t0, t2 - t1, t4 - t3


def _model_worker_s(host: HostStep) -> float:
    """Round 9's modelled worker phases and its reply's pickle round trip, CPU seconds (the plan untimed)."""
    plan = host.plan()
    t0 = time.process_time()
    pickle.loads(pickle.dumps(host.worker(plan), protocol=pickle.HIGHEST_PROTOCOL))
    return time.process_time() - t0


def time_per_step(batch: int, steps: int, repeats: int) -> tuple[float, ...]:
    """Fastest of ``repeats`` mean CPU seconds per decode step at ``batch`` requests, by part."""
    v = _vllm()
    s, host = _decode_server(v, batch), HostStep(batch)
    best = None
    for _ in range(repeats):
        parts = [_step(v, s) + (_model_worker_s(host),) for _ in range(steps)]
        mean = tuple(sum(p[k] for p in parts) / steps for k in range(4))
        best = mean if best is None or sum(mean) < sum(best) else best
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", type=positive_int, default=32)
    ap.add_argument("--large", type=positive_int, default=256)
    ap.add_argument("--steps", type=positive_int, default=20)
    ap.add_argument("--repeats", type=positive_int, default=5)
    args = ap.parse_args()
    if not 1 <= args.small < args.large:
        raise TwinInputError(f"--small {args.small} / --large {args.large}: need 1 <= small < large")
    version = _vllm().version
    lo, hi = time_per_step(args.small, args.steps, args.repeats), time_per_step(args.large, args.steps, args.repeats)
    names = ("schedule()", "plan pickle round trip", "update_from_output()", "worker (round 9's model)")
    print(f"vLLM {version}: CPU us per sequence per step ((B {args.large} - B {args.small}) slope)")
    for k, name in enumerate(names):
        print(f"  {name:<24} {(hi[k] - lo[k]) / (args.large - args.small) * 1e6:6.2f} us "
              f"(per step at B {args.small}: {lo[k] * 1e6:.0f} us, at B {args.large}: {hi[k] * 1e6:.0f} us)")
    print(f"  {'sum':<24} {(sum(hi) - sum(lo)) / (args.large - args.small) * 1e6:6.2f} us")


if __name__ == "__main__":
    run_script(main)
