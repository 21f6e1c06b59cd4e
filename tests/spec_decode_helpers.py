"""Shared builders for the speculative-decoding tests: scenario bodies, direct simulations, invariant checks."""

from __future__ import annotations

from typing import Any

from twin.sim.run import metrics_of, run_body
from twin.cost.constant import ConstantCostModel
from twin.results.sim_result import SimResult
from twin.scenario import Scenario
from twin.core.scheduler import Scheduler
from twin.core.scheduler_config import SchedulerConfig
from twin.core.scheduler_output import SchedulerOutput
from twin.core.schedulers import make_scheduler
from twin.sim.simulate import simulate
from twin.spec_decode import AcceptanceModel, NgramDrafter, Speculator
from twin.workload.spec import RequestSpec


def scenario_body(concurrency: int = 1, spec: dict | None = None, *, prompt: int = 256, output: int = 128,
                  num_requests: int | None = None, model: str = "llama-3.1-8b", gpu: str = "H100-SXM",
                  task: str = "task", server: dict | None = None, seed: int = 0):
    data: dict[str, Any] = {
        "deployment": {"gpu": gpu, "model": model},
        "workload": {
            "arrivals": {"process": "closed_loop", "concurrency": concurrency},
            "num_requests": num_requests or max(2 * concurrency, 8),
            "classes": [{"name": task, "share": 1.0, "prompt": {"suffix_tokens": prompt}, "output_tokens": output}],
        },
        "seed": seed,
    }
    if server:
        data["server"] = server
    if spec is not None:
        data["speculative_decoding"] = spec
    return Scenario(data).body()


def run_metrics(body) -> dict:
    return metrics_of(run_body(body), body)


def spec_section(method: str = "draft_model", rate: float = 0.7, k: int = 4, **extra) -> dict:
    cfg: dict[str, Any] = {"method": method, "num_speculative_tokens": k, "acceptance": rate}
    if method == "draft_model":
        cfg["draft_model"] = "llama-3.2-1b"
    cfg.update(extra)
    return cfg


def specs(n: int, prompt: int, output: int, *, gap_s: float = 0.0, task: str = "default",
          shared: int = 0) -> list[RequestSpec]:
    """``n`` open-loop requests; ``shared`` tokens of common prefix (prefix caching)."""
    out = []
    for i in range(n):
        segs = []
        if shared:
            segs.append((("shared",), shared))
        segs.append((("own", i), prompt - shared))
        out.append(RequestSpec(i, i * gap_s, prompt, output, tuple(segs), task_class=task))
    return out


def simulate_direct(traffic, config: SchedulerConfig, num_gpu_blocks: int, acceptance, k: int, *, seed: int = 0,
                    num_replicas: int = 1, scheduler_cls=None, step_s: float = 1e-3,
                    per_token_s: float = 0.0) -> SimResult:
    """A run with a constant cost model and a free drafter (the cost does not matter to the accounting)."""
    if isinstance(acceptance, (int, float)):
        acceptance = AcceptanceModel.iid(acceptance, k)

    def sched(i: int):
        if scheduler_cls is not None:
            return scheduler_cls(config, num_gpu_blocks)
        return make_scheduler(config, num_gpu_blocks)

    return simulate(traffic, sched, lambda i: ConstantCostModel(step_s, per_token_s), num_replicas=num_replicas,
                    make_speculator=lambda i: Speculator(k, acceptance, NgramDrafter(0.0), seed=seed))


class CheckedScheduler(Scheduler):
    """The V1 scheduler with speculative-decoding invariants checked around every step."""

    K = 4
    log: dict[str, int]

    def __init__(self, config: SchedulerConfig, num_gpu_blocks: int) -> None:
        super().__init__(config, num_gpu_blocks)
        self.log = {"steps": 0, "partial_prefills": 0, "verifications": 0, "cut_drafts": 0}

    def schedule(self, now_s: float | None = None) -> SchedulerOutput:
        pending = {id(r): r.num_spec_tokens for r in self.running}
        out = super().schedule(now_s)
        cfg = self.config
        assert sum(out.num_new_tokens) <= cfg.max_num_batched_tokens
        assert len(self.running) <= cfg.max_num_seqs
        kv = self.kv_cache_manager
        for i, req in enumerate(out.requests):
            k, n, before = out.num_spec_tokens[i], out.num_new_tokens[i], out.num_computed_before[i]
            num_tokens = req.num_prompt_tokens + req.num_output_tokens
            assert 0 <= k <= self.K
            if k < pending.get(id(req), 0):
                self.log["cut_drafts"] += 1      # the budget (or max_model_len) verified fewer drafts
            if k:
                # a verification: the last sampled token plus k drafts, appended after the real tokens
                assert before == num_tokens - 1 and n == 1 + k, (req, before, n, k)
                self.log["verifications"] += 1
            elif req.num_computed_tokens < num_tokens:
                self.log["partial_prefills"] += 1
            assert req.num_computed_tokens == before + n
            # slots for every scheduled token, drafts included, plus the lookahead
            need = min(req.num_computed_tokens + cfg.num_lookahead_tokens, cfg.max_model_len)
            assert len(kv.req_to_blocks[req.request_id]) * self.block_size >= need
            # draft tokens are never cached: cached blocks cover real tokens only
            assert kv.num_cached_blocks[req.request_id] * self.block_size <= num_tokens
        self.log["steps"] += 1
        return out

    def update_from_output(self, out, num_generated=None, sampled_token_ids=None):
        for i, req in enumerate(out.requests):
            if out.num_spec_tokens[i]:
                assert num_generated is not None and 1 <= num_generated[i] <= 1 + out.num_spec_tokens[i]
        result = super().update_from_output(out, num_generated, sampled_token_ids)
        kv = self.kv_cache_manager
        for req in self.running:
            num_tokens = req.num_prompt_tokens + req.num_output_tokens
            # rejected drafts rolled back: nothing beyond the real tokens counts as computed
            assert req.num_spec_tokens == 0
            assert req.num_computed_tokens <= num_tokens
            blocks = kv.req_to_blocks.get(req.request_id, [])
            assert len(blocks) * self.block_size >= req.num_computed_tokens
        for i, req in enumerate(out.requests):
            if out.num_spec_tokens[i] and not req.is_finished:
                assert req.num_computed_tokens == req.num_prompt_tokens + req.num_output_tokens - 1
        pool = kv.block_pool
        held = [b for blocks in kv.req_to_blocks.values() for b in blocks if not b.is_null]
        assert sum(b.ref_cnt for b in pool.blocks if not b.is_null) == len(held)
        assert pool.free_block_queue.num_free_blocks + len({b.block_id for b in held}) == pool.num_usable_blocks
        return result
