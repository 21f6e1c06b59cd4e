"""Which cost parameters a set of measured runs can pin down, and how well a fit pinned them.

Before the fit (``held_at_prior``): a parameter no run is sensitive to is held at its prior, with the reason:
a generation's efficiencies need runs on that generation (its compute efficiency, long prompts not served
from a prefix cache, else GEMMs never leave the weight-read bound), the MoE expert efficiency a MoE model, the
KV-read efficiency long contexts, the all-reduce latency tensor parallelism, the ``@sync`` overheads a server
without async scheduling, the eager host floors runs whose prompt steps no captured CUDA graph covers (and, to
split the per-layer host time from the per-MoE-layer one, such runs of a dense model). After the fit
(``identification``): a parameter whose standard error spans more than ``WEAK_SHARE`` of its plausible range, or
whose precision the runs give less than ``MIN_DATA_SHARE`` of (its weak prior the rest), is not identified
(``not_identified``; the standard errors: ``twin.fitting.fit._standard_errors``); a held-out fold then holds it
at its prior and fits the others again (``twin.fitting.joint.run_fold``), and the report says so (``settled``)."""

from __future__ import annotations

from collections.abc import Sequence

from twin.fitting import path_layers
from twin.fitting.parameters import PARAMETERS_BY_NAME
from twin.fitting.scoped import in_scope, split

PREFILL_HEAVY_TOKENS = 1024
LONG_CONTEXT_TOKENS = 2048
WEAK_SHARE = 0.25
MIN_DATA_SHARE = 0.5      # of a term's precision the runs must give (not its weak prior) for it to be identified
HELD = "not identified, held at prior"
SETTLED = "not identified by the fit"
EAGER_TERMS = ("eager_layer_host_s", "eager_moe_layer_host_s")


def _deployments(cases):
    from twin.fitting.replay import deployment_for
    return [deployment_for(c.run, c.target) for c in cases]


PROMPT_LENGTH_RATIO = 2.0     # a per-token cost needs uncached prompts at least this far apart in mean length


def _prompt_lengths_vary(cases) -> bool:
    lengths = [c.run.prompt_tokens.mean for c in cases if c.run.prompt_pool is None]
    return bool(lengths) and max(lengths) >= PROMPT_LENGTH_RATIO * min(lengths) > 0


def eager_prompt_steps(case, deployment) -> bool:
    """Whether the run's prompt steps exceed the largest CUDA graph its server captured for steps with a prompt
    (``Deployment.cudagraph_tokens``; None: every step graphed), so that an eager host floor can bind on them."""
    limits = getattr(deployment, "cudagraph_tokens", None)
    return limits is not None and case.run.prompt_tokens.mean > limits[1]


def _eager_reason(base: str, where: str, mine, names: Sequence[str]) -> str | None:
    eager = [(c, d) for c, d in mine if eager_prompt_steps(c, d)]
    if not eager:
        return f"no run{where} has prompt steps beyond its captured CUDA graphs (the host floor never binds)"
    if base == "eager_moe_layer_host_s" and not any(d.model.is_moe for _, d in eager):
        return f"no run{where} with eager prompt steps serves a MoE model"
    if base == "eager_layer_host_s" and all(d.model.is_moe for _, d in eager) and any(
            split(n)[0] == "eager_moe_layer_host_s" for n in names):
        return (f"every run{where} with eager prompt steps serves a MoE model (the host time per decoder layer is "
                "not split from the one per MoE layer)")
    return None


def held_at_prior(cases: Sequence, names: Sequence[str], deployments: Sequence | None = None) -> dict[str, str]:
    """{name: why the runs cannot identify it} for those of ``names`` they cannot."""
    deps = list(deployments) if deployments is not None else _deployments(cases)
    held: dict[str, str] = {}
    scopes_of: dict[str, list[str]] = {}
    for n in names:
        base, scope = split(n)
        if scope is not None:
            scopes_of.setdefault(base, []).append(scope)

    def covered(case_dep, base, scope):
        if scope is None:      # an unscoped value holds where no scoped one of the same name overrides it
            return not any(in_scope(s, case_dep) for s in scopes_of.get(base, ())) and not (
                base == "request_path_s" and path_layers.covers(names, case_dep))   # nor a per-layer path
        return in_scope(scope, case_dep)

    for name in names:
        base, scope = split(name)
        mine = [(c, d) for c, d in zip(cases, deps) if covered(d, base, scope)]
        where = f" ({scope})" if scope else (f" (outside {', '.join(scopes_of[base])})" if base in scopes_of else "")
        if not mine:
            held[name] = f"no run{where} in the data"
        elif base == "compute_efficiency" and not any(
                c.run.prompt_pool is None and c.run.prompt_tokens.mean >= PREFILL_HEAVY_TOKENS for c, _ in mine):
            held[name] = f"no run{where} prefills long uncached prompts (GEMMs stay weight-read bound)"
        elif base == "allreduce_latency_s" and all(c.target.tensor_parallel_size == 1 for c, _ in mine):
            held[name] = "every run is on one GPU (no all-reduce)"
        elif base == "fused_allreduce_latency_s" and not any(getattr(d, "allreduce_fusion", False) for _, d in mine):
            held[name] = "no run fuses its all-reduces with RMSNorm (server.fuse_allreduce_rms)"
        elif base == "request_path_jitter_s" and not any(
                "median_ttft_ms" in c.run.metrics or "p90_ttft_ms" in c.run.metrics for c, _ in mine):
            held[name] = "no run measured a TTFT percentile (a mean alone does not split fixed from variable)"
        elif base.startswith("moe_expert") and not any(d.model.is_moe for _, d in mine):
            held[name] = "no run serves a MoE model"
        elif base == "per_token_overhead_s" and not _prompt_lengths_vary(c for c, _ in mine):
            held[name] = (f"no two runs{where} prefill uncached prompts of lengths {PROMPT_LENGTH_RATIO:g}x apart "
                          "(a cost per token is not split from the per-step and per-request ones)")
        elif base == "layer_overhead_s" and len({d.model.num_hidden_layers for _, d in mine}) < 2:
            held[name] = (f"every run{where} has the same number of decoder layers (a cost per layer is not split "
                          "from the per-step one)")
        elif base == "layer_token_overhead_s" and (not _prompt_lengths_vary(c for c, _ in mine)
                                                   or len({d.model.num_hidden_layers for _, d in mine}) < 2):
            held[name] = (f"runs{where} need uncached prompts {PROMPT_LENGTH_RATIO:g}x apart and two model depths "
                          "(a cost per token and layer is not split from the per-token and per-step ones)")
        elif base == "kv_memory_efficiency" and not any(
                c.run.prompt_tokens.mean + c.run.output_tokens.mean >= LONG_CONTEXT_TOKENS for c, _ in mine):
            held[name] = f"no run reaches {LONG_CONTEXT_TOKENS}-token contexts"
        elif base in EAGER_TERMS and (why := _eager_reason(base, where, mine, names)) is not None:
            held[name] = why
    return held


def range_share(name: str, std: dict[str, float]) -> float:
    """One standard error of ``name`` as a share of its plausible range (nan when none)."""
    p = PARAMETERS_BY_NAME[name]
    return p.from_model(std.get(name, float("nan"))) / (p.upper - p.lower)


def weakness(name: str, std: dict[str, float], data_share: dict[str, float] | None = None) -> str | None:
    """Why the fit did not identify ``name`` (None: it did): its standard error spans more than ``WEAK_SHARE`` of
    its range (or is unknown), or the runs give less than ``MIN_DATA_SHARE`` of its precision (the weak prior the
    rest: a standard error that small is the prior's and the residuals', not the runs' evidence)."""
    share = range_share(name, std)
    if not share <= WEAK_SHARE:
        return f"+/- {share:.0%} of its range"
    data = (data_share or {}).get(name)
    if data is not None and not data >= MIN_DATA_SHARE:
        return f"the runs give {data:.0%} of its precision, its prior the rest"
    return None


def not_identified(names: Sequence[str], std: dict[str, float],
                   data_share: dict[str, float] | None = None) -> tuple[str, ...]:
    """Those of ``names`` the fit did not identify (``weakness``)."""
    return tuple(n for n in names if weakness(n, std, data_share) is not None)


def identification(names: Sequence[str], std: dict[str, float], held: dict[str, str],
                   settled: dict[str, float | str] | None = None,
                   data_share: dict[str, float] | None = None) -> dict[str, str]:
    """Per parameter: ``identified``, ``weakly identified (why)`` or the held-at-prior reason; ``settled``:
    {name: its range share in the fit, or why it was not identified} of those a fold then held at their prior."""
    out = {}
    settled = settled or {}
    for name in list(names) + [n for n in list(settled) + list(held) if n not in names]:
        if name in held:
            out[name] = f"{HELD}: {held[name]}"
        elif name in settled:
            why = settled[name] if isinstance(settled[name], str) else f"+/- {settled[name]:.0%} of its range"
            out[name] = f"{SETTLED} ({why}), held at its prior"
        else:
            why = weakness(name, std, data_share)
            out[name] = "identified" if why is None else f"weakly identified ({why})"
    return out
