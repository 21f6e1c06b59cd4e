"""Steps that no CUDA graph covers: the host's time to launch an eager forward pass, a floor under the step.

vLLM captures CUDA graphs for batches of up to ``max_cudagraph_capture_size`` scheduled tokens (vLLM
``VllmConfig._set_cudagraph_sizes``, 0.10-0.19: when the flag is not given, ``min(max_num_seqs x (1 + draft
tokens) x 2, 512)``, then capped at ``max_num_batched_tokens``); its dispatcher runs a larger batch without a graph
(``CUDAGraphMode.NONE`` for ``num_tokens`` above the largest size). ``cudagraph_mode`` decides which batches a graph
may cover at all: ``full_and_piecewise`` (the default from 0.11), ``piecewise`` (0.10's default) and ``full`` cover
prefill / mixed batches and pure decodes; ``full_decode_only`` covers pure decodes only, so every step with a
prompt in it runs eagerly; ``none`` (``--enforce-eager``) covers nothing.

An eager step launches every kernel of every layer from the host (Python, the dispatcher, cudaLaunchKernel), while
a graph replays them in one launch. The GPU runs the kernels as they arrive, so the step takes the longer of its
GPU time and its host time: ``max(GPU step, eager host time)``, with ``eager host time = eager_layer_host_s x
decoder layers + eager_moe_layer_host_s x MoE layers`` (seconds; the MoE layers' routing, token permutation and
grouped GEMMs launch more kernels than a dense MLP). On a slow GPU or a long prompt the GPU time hides it; on a
fast GPU with a short prompt it sets the step.

Priors 0 (graphs hide every launch: the pure roofline). Why it exists (issue 33, docs/fidelity.md 'Round 5: the
per-request TTFT intercept'): on B200 the light-load TTFT of the rows whose prompt step exceeds the captured size
sits on a floor that does not move with TP (Llama-3.1-70B FP8/FP4 1k prompts under ``cudagraph_mode:
FULL_DECODE_ONLY``: twin prefill step + gap = 62-75 ms at TP 1-8), and the same Kimi-K2.5 NVFP4 configuration is
~90 ms slower per 1k request when its capture size was ``2 x max_num_seqs = 2 x CONC`` (March 2026 scripts) than
with ``--max-cudagraph-capture-size 2048`` (April), while its 8k rows (eager in both) agree.

A fold that holds out a generation's readings (issue 33, rounds 8-9) takes the other generations' per-layer host
time (``twin.fitting.provenance.host_prior``) and, for the MoE layers' extra, each expert path's host-dispatched
ops beyond a dense layer's at that per-op time (``twin.fitting.launch_prior``).
"""

from __future__ import annotations

from typing import Literal, get_args

from twin.cost.param_checks import check_nonneg
from twin.errors import TwinInputError

CudagraphMode = Literal["full_and_piecewise", "piecewise", "full", "full_decode_only", "none"]
CUDAGRAPH_MODES: tuple[str, ...] = get_args(CudagraphMode)
DEFAULT_CAPTURE_CAP_TOKENS = 512      # vLLM's default largest capture size (min(2 x max_num_seqs, 512))
ALL_GRAPHED = (2**62, 2**62)          # (decode, mixed) token limits when the server's graphs are not known
# How an eager step's host time meets its GPU time (issue 33, round 18; docs/fidelity.md "Round 18: the eager
# step's structure"): "max" (the embedded one) overlaps all of it with the GPU; "additive" serialises all of it (a
# host that waits for the GPU inside every layer and then works while the GPU idles); "moe_additive" overlaps the
# per-decoder-layer launches and serialises the MoE layers' extra (a device-to-host sync per MoE layer). A
# per-layer max (sum over layers of max(host, GPU)) equals "max" wherever every layer has the same shares, so it is
# not a structure of its own here. A cost model takes one as its ``eager_structure`` keyword (None: the embedded
# ``EMBEDDED_STRUCTURE``); the others are a trial, not embedded (benchmarks/eager_structure_trial.py).
EAGER_STRUCTURES: tuple[str, ...] = ("max", "additive", "moe_additive")
EMBEDDED_STRUCTURE = "max"


def check_structure(name: object) -> str:
    """``name`` if it is one of ``EAGER_STRUCTURES``, else a one-line error naming the allowed ones."""
    if name not in EAGER_STRUCTURES:
        raise TwinInputError(f"eager_structure = {name!r}: allowed: {', '.join(EAGER_STRUCTURES)}")
    return name           # type: ignore[return-value]


def capture_size_tokens(max_num_seqs: int, max_num_batched_tokens: int, max_cudagraph_capture_size: int | None = None,
                        num_speculative_tokens: int = 0) -> int:
    """vLLM's largest CUDA-graph batch in tokens: the flag, else ``min(max_num_seqs x (1 + k) x 2, 512)``; never
    above ``max_num_batched_tokens`` (vLLM ``VllmConfig._set_cudagraph_sizes``)."""
    if max_cudagraph_capture_size is None:
        max_cudagraph_capture_size = min(max_num_seqs * (1 + num_speculative_tokens) * 2, DEFAULT_CAPTURE_CAP_TOKENS)
    return min(int(max_cudagraph_capture_size), int(max_num_batched_tokens))


def graph_limits(mode: str | None, capture_tokens: int) -> tuple[int, int]:
    """(largest pure-decode step, largest step with a prompt in it) that a CUDA graph covers, in scheduled tokens,
    for vLLM's ``cudagraph_mode`` (lower case; None: the default, which covers both)."""
    mode = "full_and_piecewise" if mode is None else str(mode).lower()
    if mode not in CUDAGRAPH_MODES:
        raise TwinInputError(f"server.cudagraph_mode = {mode!r}: allowed: {', '.join(CUDAGRAPH_MODES)}")
    if mode == "none":
        return 0, 0
    return capture_tokens, (0 if mode == "full_decode_only" else capture_tokens)


def check_limits(limits: object) -> tuple[int, int]:
    """The (decode, mixed) token limits as two non-negative ints, or a one-line error naming the field."""
    try:
        d, m = (int(x) for x in limits)          # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise TwinInputError(f"cudagraph_tokens = {limits!r}: must be two token counts (decode, mixed)") from None
    if d < 0 or m < 0:
        raise TwinInputError(f"cudagraph_tokens = {limits!r}: token counts must be >= 0")
    return d, m


def eager_host_s(model, eager_layer_host_s: float, eager_moe_layer_host_s: float) -> float:
    """The host time to launch one eager forward pass of ``model`` (s): per decoder layer plus per MoE layer;
    one-line errors for a negative, infinite or non-numeric value."""
    per_layer = check_nonneg("eager_layer_host_s", eager_layer_host_s)
    per_moe = check_nonneg("eager_moe_layer_host_s", eager_moe_layer_host_s)
    moe_layers = model.moe_layers if getattr(model, "is_moe", False) else 0
    return per_layer * model.num_hidden_layers + per_moe * moe_layers


def host_split_s(model, eager_layer_host_s: float, eager_moe_layer_host_s: float,
                 name: str | None = None) -> tuple[float, float]:
    """(host time the GPU overlaps, host time added to the GPU's) of one eager forward pass (s) under the
    structure ``name`` (None: ``EMBEDDED_STRUCTURE``); their sum is ``eager_host_s``."""
    name = check_structure(EMBEDDED_STRUCTURE if name is None else name)
    total = eager_host_s(model, eager_layer_host_s, eager_moe_layer_host_s)
    if name == "max":
        return total, 0.0
    if name == "additive":
        return 0.0, total
    moe = eager_host_s(model, 0.0, eager_moe_layer_host_s)
    return total - moe, moe


def floored_array(t, tokens, seqs, limits: tuple[int, int], floor_s: tuple[float, float], gpu_extra=None):
    """Numpy arrays of steps (GPU times, scheduled tokens, sequences) with each step that no graph covers
    raised to at least the overlapped host time and then given the serial one (``floor_s`` = (overlapped,
    serial), ``host_split_s``); a pure decode is a step with as many tokens as sequences. ``gpu_extra``
    (tokens, seqs -> seconds per step, or None): more GPU time of each step, added before the floor (the GPU
    runs it while the host launches: ``twin.cost.marlin_blocks``' padded rows)."""
    import numpy as np

    if gpu_extra is not None:
        t = t + gpu_extra(tokens, seqs)
    host_s, serial_s = floor_s
    if not host_s and not serial_s:
        return t
    tokens = np.asarray(tokens)
    limit = np.where(tokens == np.asarray(seqs), limits[0], limits[1])
    return np.where(tokens > limit, np.maximum(t, host_s) + serial_s, t)


def install(cost, model, eager_layer_host_s: float, eager_moe_layer_host_s: float, limits,
            structure: str | None = None) -> None:
    """Give a roofline ``cost`` its eager floor: ``eager_host_s_per_step`` and ``cudagraph_tokens`` (decode, mixed
    token limits; None: every step graphed) under the eager step's ``structure`` (None: ``EMBEDDED_STRUCTURE``), and,
    only when the floor can bind, step-time methods that apply it (so the hot path is untouched at the priors)."""
    cost.eager_structure = structure = check_structure(EMBEDDED_STRUCTURE if structure is None else structure)
    host, serial = cost.eager_floor_s = host_split_s(model, eager_layer_host_s, eager_moe_layer_host_s, structure)
    limits = ALL_GRAPHED if limits is None else check_limits(limits)
    cost.eager_layer_host_s, cost.eager_moe_layer_host_s = float(eager_layer_host_s), float(eager_moe_layer_host_s)
    cost.eager_host_s_per_step, cost.cudagraph_tokens = host + serial, limits
    if not (host or serial) or limits == ALL_GRAPHED:
        return
    if serial:
        install_serial(cost, host, serial, limits)
        return
    sums, decodes = cost.step_time_from_sums, cost.decode_step_times_s

    def step_time_from_sums(n_seqs: int, tokens: int, context: int, new_x_context: int, new_squared: int,
                            spec_tokens: int) -> float:
        t = sums(n_seqs, tokens, context, new_x_context, new_squared, spec_tokens)
        return host if t < host and tokens > limits[tokens != n_seqs] else t

    def decode_step_times_s(n_seqs: int, context: int, num_steps: int) -> list[float]:
        out = decodes(n_seqs, context, num_steps)
        return out if n_seqs <= limits[0] else [host if t < host else t for t in out]

    cost.step_time_from_sums, cost.decode_step_times_s = step_time_from_sums, decode_step_times_s


def install_serial(cost, host: float, serial: float, limits: tuple[int, int]) -> None:
    """``install``'s step-time methods where part of the host time is serial (``host_split_s``): an eager step
    takes max(GPU, overlapped host) + serial host."""
    sums, decodes = cost.step_time_from_sums, cost.decode_step_times_s

    def step_time_from_sums(n_seqs: int, tokens: int, context: int, new_x_context: int, new_squared: int,
                            spec_tokens: int) -> float:
        t = sums(n_seqs, tokens, context, new_x_context, new_squared, spec_tokens)
        return max(t, host) + serial if tokens > limits[tokens != n_seqs] else t

    def decode_step_times_s(n_seqs: int, context: int, num_steps: int) -> list[float]:
        out = decodes(n_seqs, context, num_steps)
        return out if n_seqs <= limits[0] else [max(t, host) + serial for t in out]

    cost.step_time_from_sums, cost.decode_step_times_s = step_time_from_sums, decode_step_times_s


def explain_floor(parts: dict[str, float]) -> None:
    """``explain()``'s own part for the floor: the step's total beyond the sum of its GPU parts (0 when graphed or
    when the GPU time is the longer), ``eager_host_floor_s``; only added when it binds."""
    extra = parts["total_s"] - sum(v for k, v in parts.items() if k != "total_s")
    if extra > 1e-12:
        parts["eager_host_floor_s"] = extra


def prompt_step_array(tokens, seqs, per_step_s):
    """Numpy array over steps (scheduled tokens, sequences): ``per_step_s(tokens)`` seconds for each step with a
    prompt in it, 0 for a pure decode (one call per distinct token count). The GPU terms that only prompt steps
    pay (``twin.cost.marlin_blocks``, ``twin.cost.prompt_experts``) add it to the fit's arrays."""
    import numpy as np

    tok = np.asarray(tokens).astype(np.int64)
    add = np.zeros(len(tok))
    mixed = tok != np.asarray(seqs)
    if mixed.any():
        unique, inverse = np.unique(tok[mixed], return_inverse=True)
        add[mixed] = np.array([per_step_s(int(x)) for x in unique])[inverse]
    return add


def name_floor_share(parts: dict[str, float], key: str, seconds: float) -> None:
    """Name ``seconds`` of a step's total beyond its GPU parts (``explain_floor``'s ``eager_host_floor_s``, which
    holds every time the parts do not name) as its own part ``key``; the floor keeps what is left."""
    parts[key] = seconds
    left = parts.pop("eager_host_floor_s", 0.0) - seconds
    if left > 1e-12:
        parts["eager_host_floor_s"] = left
