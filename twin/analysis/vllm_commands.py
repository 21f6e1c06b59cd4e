"""The command lines that measure a configuration on a real server: ``vllm serve`` with the deployment's knobs,
``vllm bench serve`` with traffic shaped like the scenario's, and the ``twin validate`` line that puts the
measurement beside the twin's prediction.

Synthetic traffic maps onto vLLM's datasets: one shared system prompt -> ``--dataset-name random
--random-prefix-len``; several prefix groups -> ``--dataset-name prefix_repetition``. A length distribution
becomes vLLM's uniform ``[len x (1 - r), len x (1 + r)]`` with the distribution's mean and a ratio spanning its
10th to 90th percentile, an approximation the notes say. Closed-loop streams are ``--request-rate inf
--max-concurrency C``; Poisson arrivals ``--request-rate R``; gamma arrivals add ``--burstiness``. A scenario with
several task classes gets one bench command per class, at the class's share of the load, to run side by side.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from twin.scenario import ScenarioBody

EAGLE_DRAFTS = {  # public EAGLE heads for catalogued targets (vLLM's examples use these)
    "llama-3.1-8b": "yuhuili/EAGLE-LLaMA3.1-Instruct-8B",
    "llama-3.1-70b": "yuhuili/EAGLE-LLaMA3.1-Instruct-70B",
}
EAGLE3_DRAFTS = {
    "llama-3.1-8b": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
}


def model_id(body: ScenarioBody, deployment: Any) -> str:
    return getattr(deployment.model, "hf_id", None) or body.deployment.model


def serve_command(body: ScenarioBody, deployment: Any) -> str:
    """``vllm serve`` with every knob the twin models set as in ``body`` (resolved defaults spelled out)."""
    sc = deployment.scheduler_config
    dep = body.deployment
    parts = ["vllm", "serve", model_id(body, deployment)]
    if dep.tensor_parallel_size > 1:
        parts += ["--tensor-parallel-size", str(dep.tensor_parallel_size)]
    if dep.pipeline_parallel_size > 1:
        parts += ["--pipeline-parallel-size", str(dep.pipeline_parallel_size)]
    if dep.data_parallel_size > 1:
        parts += ["--data-parallel-size", str(dep.data_parallel_size)]
    if dep.enable_expert_parallel:
        parts.append("--enable-expert-parallel")
    parts += ["--max-num-seqs", str(sc.max_num_seqs), "--max-num-batched-tokens", str(sc.max_num_batched_tokens)]
    if body.server.max_model_len is not None:
        parts += ["--max-model-len", str(sc.max_model_len)]
    parts.append("--enable-prefix-caching" if sc.enable_prefix_caching else "--no-enable-prefix-caching")
    parts.append("--enable-chunked-prefill" if sc.enable_chunked_prefill else "--no-enable-chunked-prefill")
    if sc.block_size != 16:
        parts += ["--block-size", str(sc.block_size)]
    parts += ["--gpu-memory-utilization", f"{body.server.gpu_memory_utilization:g}"]
    if body.server.num_gpu_blocks_override is not None:
        parts += ["--num-gpu-blocks-override", str(body.server.num_gpu_blocks_override)]
    if sc.long_prefill_token_threshold:
        parts += ["--long-prefill-token-threshold", str(sc.long_prefill_token_threshold)]
    if sc.policy == "priority":
        parts += ["--scheduling-policy", "priority"]
    if dep.weight_dtype == "fp8":
        parts += ["--quantization", "fp8"]
    if dep.kv_dtype == "fp8":
        parts += ["--kv-cache-dtype", "fp8"]
    spec = body.speculative_decoding
    if spec is not None:
        parts += ["--speculative-config", json.dumps(speculative_config(body), separators=(", ", ": "))]
    if dep.replicas > 1:
        parts = [f"# on each of {dep.replicas} replicas behind a {dep.router} router:"] + parts
    return _join(parts)


def speculative_config(body: ScenarioBody) -> dict[str, Any]:
    spec = body.speculative_decoding
    cfg: dict[str, Any] = {"method": spec.method, "num_speculative_tokens": spec.num_speculative_tokens}
    name = body.deployment.model
    if spec.method == "draft_model":
        cfg = {"model": spec.draft_model, "num_speculative_tokens": spec.num_speculative_tokens}
    elif spec.method == "eagle":
        cfg["model"] = EAGLE_DRAFTS.get(name, f"<EAGLE head trained for {name}>")
    elif spec.method == "eagle3":
        cfg["model"] = EAGLE3_DRAFTS.get(name, f"<EAGLE-3 head trained for {name}>")
    elif spec.method == "ngram":
        cfg["prompt_lookup_max"] = 4
    return cfg


def _join(parts: list[str]) -> str:
    if parts and parts[0].startswith("#"):
        return parts[0] + "\n" + " ".join(shlex.quote(p) for p in parts[1:])
    return " ".join(shlex.quote(p) for p in parts)


def _length_band(dist: Any, base_dir: Path | None) -> tuple[int, float]:
    """(mean, range ratio) of a length distribution as vLLM's uniform band."""
    from twin.workload.lengths import LengthSampler

    if dist.fixed is not None:
        return int(dist.fixed), 0.0
    sampler = LengthSampler(dist, field="length", base_dir=base_dir)
    v = np.asarray(sampler.sample(np.random.default_rng(0), 20000), float)
    mean = max(1.0, float(v.mean()))
    p10, p90 = np.percentile(v, [10, 90])
    ratio = (p90 - p10) / (p90 + p10) if p90 + p10 > 0 else 0.0
    return int(round(mean)), round(min(0.95, float(ratio)), 2)


def _arrival_flags(arrivals: Any, share: float) -> tuple[list[str], list[str]]:
    notes: list[str] = []
    if arrivals is None:
        return [], ["the trace's own arrival times have no vllm bench serve equivalent; --request-rate gives "
                    "its mean rate"]
    p = arrivals.process
    if p == "closed_loop":
        c = max(1, int(round(arrivals.concurrency * share)))
        if arrivals.think_time_s.fixed not in (0, 0.0, None):
            notes.append("vllm bench serve has no think time: its streams resend at once")
        return ["--request-rate", "inf", "--max-concurrency", str(c)], notes
    cap = [] if arrivals.max_concurrency is None else [
        "--max-concurrency", str(max(1, int(round(arrivals.max_concurrency * share))))]
    if p == "piecewise":
        pieces = arrivals.schedule
        rate = max(x.rate_per_s for x in pieces) * share
        notes.append("piecewise rates: run one bench per piece (the command uses the peak rate)")
        return ["--request-rate", f"{rate:g}", *cap], notes
    if p == "ramp_up":
        return ["--ramp-up-strategy", arrivals.strategy, "--ramp-up-start-rps", f"{arrivals.start_rps * share:g}",
                "--ramp-up-end-rps", f"{arrivals.end_rps * share:g}", "--burstiness", f"{arrivals.burstiness:g}",
                *cap], notes
    rate = arrivals.rate_per_s * share
    flags = ["--request-rate", "inf" if math.isinf(rate) else f"{rate:g}"]
    if p == "gamma":
        flags += ["--burstiness", f"{1.0 / arrivals.effective_cv ** 2:g}"]
    elif p == "constant":
        flags += ["--burstiness", "1000"]
        notes.append("constant arrivals: a large --burstiness makes vLLM's gamma gaps nearly constant")
    return flags + cap, notes


def bench_commands(body: ScenarioBody, deployment: Any, *, num_prompts: int, result_name: str,
                   base_dir: Path | None = None, result_dir: str = "results",
                   mean_lengths: tuple[int, int] | None = None,
                   mean_rate: float | None = None) -> tuple[list[str], list[str]]:
    """``vllm bench serve`` command lines (one per task class) and notes on what they approximate.
    ``mean_lengths`` (prompt, output tokens) and ``mean_rate`` (req/s) stand in for a trace's."""
    wl = body.workload
    model = model_id(body, deployment)
    notes: list[str] = []
    cmds: list[str] = []
    common_tail = ["--ignore-eos", "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles",
                   "50,90,95,99", "--seed", str(body.seed), "--save-result", "--save-detailed",
                   "--result-dir", result_dir]
    goodput = [f"{k.removesuffix('_ms')}:{v:g}" for k, v in body.slo.as_dict().items() if not isinstance(v, dict)]
    if goodput:
        common_tail += ["--goodput", *goodput]
    if wl.trace is not None:
        flags, n = _arrival_flags(wl.arrivals, 1.0)
        if wl.arrivals is None:
            n = ["the trace's own arrival times have no vllm bench serve flag; --request-rate gives their mean "
                 "rate (Poisson)"]
            flags = ["--request-rate", f"{mean_rate:.3g}" if mean_rate else "<mean rate>"]
        notes += n
        notes.append(f"a trace ({wl.trace.path}) is replayed by the twin; the bench command draws random prompts "
                     f"of the trace's mean lengths (replay the trace itself, e.g. --dataset-name custom, for "
                     f"exact lengths and prefixes)")
        inp, out = mean_lengths or ("<mean input>", "<mean output>")
        cmds.append(_join(["vllm", "bench", "serve", "--backend", "vllm", "--model", model,
                           "--dataset-name", "random", "--random-input-len", str(inp),
                           "--random-output-len", str(out), *flags, "--num-prompts", str(num_prompts),
                           *common_tail, "--result-filename", f"{result_name}.json"]))
        return cmds, notes
    multi = len(wl.classes) > 1
    if multi:
        notes.append(f"{len(wl.classes)} task classes: run these {len(wl.classes)} bench commands at the same "
                     f"time (each is its class's share of the load)")
    if wl.prefix_header == "timestamp":
        notes.append("the scenario's per-request timestamp header has no vllm bench serve flag: prepend it in a "
                     "custom dataset to measure its effect")
    for c in wl.classes:
        p = c.prompt
        flags, n = _arrival_flags(wl.arrivals, c.share)
        notes += [x for x in n if x not in notes]
        suffix_len, suffix_r = _length_band(p.suffix_tokens, base_dir)
        # the bench runs with --ignore-eos: its output length is what the twin's requests generate
        out_len, out_r = _length_band(c.output_tokens if c.output_tokens is not None else c.max_tokens, base_dir)
        shared = p.shared_prefix_tokens + (p.few_shot.tokens if p.few_shot is not None else 0)
        ratio = max(suffix_r, out_r)
        if c.multi_turn is not None:
            notes.append(f"class {c.name}: multi-turn sessions are not expressible in vllm bench serve's random "
                         f"datasets (use --dataset-name sharegpt or a custom multi-turn client)")
        if p.num_prefix_groups > 1 and shared:
            data = ["--dataset-name", "prefix_repetition", "--prefix-repetition-prefix-len", str(shared),
                    "--prefix-repetition-suffix-len", str(suffix_len), "--prefix-repetition-num-prefixes",
                    str(p.num_prefix_groups), "--prefix-repetition-output-len", str(out_len)]
        else:
            data = ["--dataset-name", "random", "--random-input-len", str(suffix_len),
                    "--random-output-len", str(out_len)]
            if shared:
                data += ["--random-prefix-len", str(shared)]
            if ratio > 0:
                data += ["--random-range-ratio", f"{ratio:g}"]
        if ratio > 0:
            notes.append(f"class {c.name}: lengths approximated by vLLM's uniform band (mean {suffix_len} prompt "
                         f"+ {shared} shared, {out_len} output tokens; ratio {ratio:g})")
        k = max(1, int(round(num_prompts * c.share)))
        name = f"{result_name}-{c.name}" if multi else result_name
        cmds.append(_join(["vllm", "bench", "serve", "--backend", "vllm", "--model", model, *data, *flags,
                           "--num-prompts", str(k), *common_tail, "--result-filename", f"{name}.json"]))
    return cmds, notes


def set_options(overrides: Mapping[str, Any], prefix: str = "") -> list[str]:
    """A nested overrides mapping as ``--set key.path=value`` options (YAML flow values)."""
    import yaml

    out: list[str] = []
    for key, value in overrides.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value and "_replace" not in value and key != "speculative_decoding":
            out += set_options(value, path + ".")
        else:
            text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
            if text.endswith("\n..."):
                text = text[:-4].strip()
            text = text.removesuffix("...").strip()
            out.append(f"{path}={text}")
    return out


def validate_command(scenario: str, variant: str, overrides: Mapping[str, Any], bench_json: str) -> str:
    parts = ["twin", "validate", scenario]
    if variant != "baseline":
        parts += ["--variant", variant]
    for opt in set_options(overrides):
        parts += ["--set", opt]
    parts += ["--bench-json", bench_json]
    return _join(parts)


__all__ = ["bench_commands", "model_id", "serve_command", "set_options", "speculative_config", "validate_command"]
