"""vLLM's own option names that the scenario spells differently or keeps in another section.

A user who runs vLLM writes its names (``quantization: fp8`` under ``server:``, ``kv_cache_dtype``,
``tensor_parallel_size`` beside ``max_num_seqs``); ``vllm_name_hint`` points such an unknown key at the scenario's
field, as a full path from the top of the scenario (the section the key was met in may not be where it belongs)."""

from __future__ import annotations

from twin.errors import suggestion

# `vllm serve` / `vllm bench serve` option (flag without dashes, as its Python name) -> the scenario's key
VLLM_OPTION_KEYS: dict[str, str] = {
    "quantization": "deployment.weight_dtype",
    "kv_cache_dtype": "deployment.kv_dtype",
    "tensor_parallel_size": "deployment.tensor_parallel_size",
    "tp": "deployment.tensor_parallel_size",
    "pipeline_parallel_size": "deployment.pipeline_parallel_size",
    "pp": "deployment.pipeline_parallel_size",
    "data_parallel_size": "deployment.data_parallel_size",
    "dp": "deployment.data_parallel_size",
    "enable_expert_parallel": "deployment.enable_expert_parallel",
    "model": "deployment.model",
    "gpu": "deployment.gpu",
    "speculative_config": "speculative_decoding",
    "request_rate": "workload.arrivals.rate_per_s",
    "num_prompts": "workload.num_requests",
    "max_concurrency": "workload.arrivals.max_concurrency",
    "concurrency": ("workload.arrivals.max_concurrency", "workload.arrivals.concurrency"),   # closed_loop: users
}

# a benchmark's length names inside a task class (``workload.classes[i]``), said relative to the class: a close
# spelling would point at the wrong field (input_tokens -> min_tokens or output_tokens)
CLASS_LENGTH_KEYS: dict[str, str] = {
    **dict.fromkeys(("input_tokens", "prompt_tokens", "input_len", "prompt_len", "isl", "random_input_len",
                     "input_length", "prompt_length"), "prompt.suffix_tokens"),
    **dict.fromkeys(("output_len", "osl", "random_output_len", "output_length", "completion_tokens"),
                    "output_tokens"),
}


def _plain(key: object) -> str | None:
    return key.replace("-", "_").lower() if isinstance(key, str) else None


def vllm_name_hint(key: object) -> str:
    """``"; did you mean 'deployment.weight_dtype'?"`` for a vLLM option name the scenario keeps elsewhere
    (``quantization``); ``""`` for any other key."""
    target = VLLM_OPTION_KEYS.get(_plain(key) or "")
    return suggestion([target] if isinstance(target, str) else list(target)) if target else ""


def class_length_hint(fields: "list[str]", key: object) -> str:
    """``"; did you mean 'prompt.suffix_tokens'?"`` for a benchmark's length name (``input_tokens``, ``isl``) in a
    task class (a section with ``prompt`` and ``output_tokens``); ``""`` elsewhere."""
    target = CLASS_LENGTH_KEYS.get(_plain(key) or "")
    return suggestion([target]) if target and {"prompt", "output_tokens"} <= set(fields) else ""
