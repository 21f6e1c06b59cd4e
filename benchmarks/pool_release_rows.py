"""The silicon rows whose KV pool moves with the profile's sampler reserve by release, and what the move does.

The embedded rule (round 13) gives every release the sort path's sampler reserve (24 bytes per logit at bf16);
vLLM's dummy sampler sorts only in 0.11.1 - 0.16 (``twin.hardware.pool_release``, applied through
``kv_pool_breakdown(sampler_release=...)``, not the default). Four rules, each a pool per row:

* ``r13``: the embedded rule, the sort everywhere at 22 bytes per logit beyond the logits;
* ``rep``: the path of the release the twin's run names (``server.vllm_version``, the representative release
  ``twin.fitting.silicon_scripts.modelled_release`` maps a row onto: 0.11, 0.14, 0.19), at this module's bytes;
* ``exact22``: the path of the release the row's server ran (``row_release``), round 13's sort bytes;
* ``exact``: the same at this module's sort bytes (36: the sort's transients);
* ``exact_cuda``: ``exact`` with the budget from the device total CUDA reports (``twin.hardware.pool_memory``);
* ``exact_cuda_moe``: ``exact_cuda`` with the fused-MoE workspaces bounding the forward phase;
* ``exact_cuda_rt``: ``exact_cuda`` with the non-torch reserve the ground truth's one vLLM pool figure implies
  (``pool_memory.NON_TORCH_RESERVE_BYTES``, 0.25 GiB) in place of the 1 GiB runtime reserve.

Prints every runnable row whose pool differs between the rules and whose closed loop's peak demand exceeds the
smallest of its pools (``kv_pool_rows.demand``); ``--simulate`` runs those rows whole at the embedded defaults
(``default_start(())``, as ``fidelity_real.py --defaults-only``) under each rule and prints TTFT / TPOT errors:

    python benchmarks/pool_release_rows.py [--match minimax] [--simulate] [--rules r13,exact] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_out_path  # noqa: E402
from benchmarks.kv_pool_rows import demand  # noqa: E402
from twin.core.vllm_versions import NEWEST_VLLM_VERSION  # noqa: E402
from twin.errors import run_script  # noqa: E402
from twin.fitting.fit import simulate_cases  # noqa: E402
from twin.fitting.joint import default_start  # noqa: E402
from twin.fitting.replay import deployment_for  # noqa: E402
from twin.fitting.silicon import read_silicon, silicon_cases, silicon_dir  # noqa: E402
from twin.hardware import kv_sizing, pool_release  # noqa: E402
from twin.hardware.pool_memory import NON_TORCH_RESERVE_BYTES  # noqa: E402
from twin.sim import deployment  # noqa: E402

ROUND13_SORT_BYTES = 4 + 4 + 8 + 4 + 1 + 1     # round 13's count: fp32 logits, sorted, indices, softmax, masks
RULES = ("r13", "rep", "exact22", "exact", "exact_cuda", "exact_cuda_moe", "exact_cuda_rt")
# an InferenceX nightly of April 2026 (MiniMax NVFP4 rows): after v0.18, before PR #40376 reached a release
NIGHTLY_RELEASE = "0.18.0"


def row_release(row) -> str:
    """The vLLM release the row's server ran: its ``backend_version``; a nightly as ``NIGHTLY_RELEASE``; a blank
    2025 gpt-oss row by its script's image (InferenceX: v0.10.2 until 2025-11-04, v0.11.0 until 2025-12-05,
    v0.11.2 from then; ``twin.fitting.silicon_scripts.modelled_release``'s docstring); a blank one of 2026 or of
    no date as the newest modelled release, as ``modelled_release`` does."""
    version = row.vllm_version or ""
    if version.startswith("nightly"):
        return NIGHTLY_RELEASE
    if version:
        return version
    measured = row.measured or ""
    if not measured or measured >= "2026":
        return NEWEST_VLLM_VERSION          # as modelled_release: a blank release of 2026 or of no date
    return "0.10.2" if measured < "2025-11-04" else "0.11.0" if measured < "2025-12-05" else "0.11.2"


@contextlib.contextmanager
def release_pools(sort_bytes: int | None = None, cuda_total: bool = False, moe_workspace: bool = False,
                  runtime_reserve_bytes: int | None = None):
    """Size every deployment's pool by the dummy-sampler path of the release its scenario names
    (``kv_pool_breakdown(sampler_release=server.vllm_version)``), optionally with the sort at ``sort_bytes``.
    ``twin.sim.deployment.resolve_deployment`` resolves the scheduler configuration just before it sizes the pool,
    so the release is taken there (module globals, looked up at call time; this process only)."""
    current: dict[str, str] = {}
    resolve_scheduler_config = deployment.resolve_scheduler_config

    def scheduler_config(body, model, gpu):
        current["release"] = body.server.vllm_version
        return resolve_scheduler_config(body, model, gpu)

    def pool(*args, **kwargs):
        if runtime_reserve_bytes is not None and kwargs.get("runtime_reserve_bytes") is None:
            kwargs["runtime_reserve_bytes"] = runtime_reserve_bytes
        return kv_sizing.kv_pool_breakdown(*args, sampler_release=current["release"], cuda_total=cuda_total,
                                           moe_workspace=moe_workspace, **kwargs)

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(deployment, "resolve_scheduler_config", scheduler_config))
        stack.enter_context(mock.patch.object(deployment, "kv_pool_breakdown", pool))
        if sort_bytes is not None:
            stack.enter_context(mock.patch.object(pool_release, "SORT_BYTES_PER_LOGIT", sort_bytes))
        yield


@contextlib.contextmanager
def rule_context(rule: str):
    """Patch the pool sizing to ``rule`` (module docstring) for the duration; ``r13`` is the embedded rule."""
    if rule == "r13":
        yield
        return
    with release_pools(ROUND13_SORT_BYTES if rule == "exact22" else None,
                       cuda_total=rule.startswith("exact_cuda"), moe_workspace=rule == "exact_cuda_moe",
                       runtime_reserve_bytes=NON_TORCH_RESERVE_BYTES if rule == "exact_cuda_rt" else None):
        yield


def rule_case(case, rule: str):
    """The case as the rule runs it: the ``exact`` rules name the row's own release."""
    if not rule.startswith("exact"):
        return case
    run = dataclasses.replace(case.run, server={**case.run.server, "vllm_version": row_release(case.row)})
    return dataclasses.replace(case, run=run)


def pools(case, rules) -> dict[str, tuple[int, str]]:
    """Per rule: (pool tokens per DP rank, sampler path)."""
    out = {}
    for rule in rules:
        with rule_context(rule):
            c = rule_case(case, rule)
            pool = deployment_for(c.run, c.target).kv_pool
        out[rule] = (pool.capacity_tokens, pool.sampler_path)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--match", default="", help="only rows whose id contains this")
    ap.add_argument("--rules", default=",".join(RULES))
    ap.add_argument("--simulate", action="store_true", help="simulate the listed rows under each rule")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    check_out_path(args.json, "--json")
    rules = [r for r in args.rules.split(",") if r]
    unknown = [r for r in rules if r not in RULES]
    if unknown:
        raise SystemExit(f"--rules: unknown {unknown} (known: {', '.join(RULES)})")
    rows = [r for r in read_silicon(silicon_dir(args.ground_truth)) if args.match in r.id]
    cases, _ = silicon_cases(args.ground_truth, max_requests=None, rows=rows)
    listed, out, seen = [], [], set()
    print(f"{'row':<60} {'ran':>7} {'run as':>6} " + " ".join(f"{r + ' tok':>13}" for r in rules) + "  peak/min")
    for c in cases:
        r = c.row
        key = (r.model_path, r.system, r.precision, r.isl, r.osl, r.concurrency, r.tp, round(r.ttft_ms),
               r.published_client)
        if key in seen:
            continue
        seen.add(key)
        p = pools(c, rules)
        sizes = {v[0] for v in p.values()}
        dp = c.target.data_parallel_size or 1
        _, peak = demand(r, dp)
        if len(sizes) < 2 or peak <= min(sizes):
            continue
        rec = {"id": r.id, "ran": row_release(r), "run_as": c.run.server.get("vllm_version"),
               "pools": {k: v[0] for k, v in p.items()}, "paths": {k: v[1] for k, v in p.items()},
               "measured_ttft_ms": r.ttft_ms, "measured_tpot_ms": r.tpot_ms, "peak_over_min": peak / min(sizes)}
        out.append(rec)
        listed.append(c)
        print(f"{r.id[:60]:<60} {rec['ran']:>7} {str(rec['run_as']):>6} "
              + " ".join(f"{v[0]:>8d} {v[1][:4]:>4}" for v in p.values()) + f"  {rec['peak_over_min']:7.2f}",
              flush=True)
    print(f"\n{len(out)} rows move under some rule and are pressured")
    if args.simulate and listed:
        params = default_start(())
        for rule in rules:
            with rule_context(rule):
                results = simulate_cases([rule_case(c, rule) for c in listed], params, max_sim_s=None)
            for rec, res in zip(out, results):
                m = res.metrics
                rec.setdefault("twin", {})[rule] = {k: m.get(k) for k in ("mean_ttft_ms", "mean_tpot_ms",
                                                                         "num_preemptions")}
        print(f"\n{'row':<60} " + " ".join(f"{r + ' TTFT':>11} {'TPOT':>6}" for r in rules))
        for rec in out:
            cells = []
            for rule in rules:
                t = rec["twin"][rule]
                cells.append(f"{t['mean_ttft_ms'] / rec['measured_ttft_ms'] - 1:+11.1%} "
                             f"{t['mean_tpot_ms'] / rec['measured_tpot_ms'] - 1:+6.1%}")
            print(f"{rec['id'][:60]:<60} " + " ".join(cells), flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    run_script(main)
