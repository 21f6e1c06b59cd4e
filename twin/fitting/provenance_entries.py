"""The embedded values of the fitted terms as provenance ``Entry`` rows: each fit key's embedded value, its
stated prior (a number, or how a fold derives one: ``INHERIT``, ``POOLED``, ``HOST``) and the table it is embedded
in; its evidence comes from ``provenance_evidence`` (declared) or its scope. ``twin.fitting.provenance`` states the
rule and plans the folds from these entries."""

from __future__ import annotations

from dataclasses import dataclass

from twin.fitting.parameters import PARAMETERS_BY_NAME
from twin.fitting.provenance_evidence import DECLARED_EVIDENCE
from twin.fitting.scoped import EXPERT_PREFIX, in_scope, split

INHERIT = "inherit"          # a prior that is the fold's unscoped value of ``INHERITS_FROM[base]``
POOLED = "pooled"            # a prior pooled from the OTHER expert kernel paths' values (``expert_path_prior``)
HOST = "host"                # a prior pooled from the OTHER GPU generations' values of a host term (``host_prior``)
# an expert kernel path's efficiencies (fractions of the dense GEMMs' rate, twin.cost.moe_terms) whose held-out prior
# pools the other paths' embedded values. Not its fixed time per MoE layer (twin.cost.kernel_path): pooled too, the
# MiniMax family fold's TPOT went from 3.6 % to 6.3 % (its H100 rows then took Kimi INT4's 51.6 us per MoE layer,
# ~3.2 ms per step, against their own 16 us, read under PIECEWISE graphs); a fixed time follows a server's kernel
# count and graph mode, not a rate of the path (docs/fidelity.md "Round 7: Kimi-K2.5 and unseen expert kernel paths")
POOLED_TERMS = ("moe_expert_compute_efficiency", "moe_expert_efficiency")
INHERITS_FROM = {"memory_efficiency": "memory_efficiency", "compute_efficiency": "compute_efficiency",
                 "allreduce_latency_s": "allreduce_latency_s", "fused_allreduce_latency_s": "allreduce_latency_s",
                 # paged decode attention's KV read: stated prior, the weights' rate (twin.cost.kv_attention; round 8)
                 "kv_memory_efficiency": "memory_efficiency",
                 # an expert path's eager MoE floor (round 8b; none embedded): held out, the fold's generation value
                 # (twin.fitting.inherit_fitted), as before the path had its own; the @generation key's prior stays 0
                 "eager_moe_layer_host_s": "eager_moe_layer_host_s"}
PATH_INHERITS = ("eager_moe_layer_host_s",)     # INHERIT on an expert path's key only (generation+experts_<fmt>)
# HOST terms (issue 33, round 8): the CPU's time to launch an eager forward pass per decoder layer (twin.cost.
# eager_steps), the same host code whatever GPU it drives: a generation whose own evidence a fold holds out takes
# what the OTHER generations' rows show (``host_prior``; B200 0.89 ms, H100 0.92 ms; docs/fidelity.md "Round 8"),
# not 0. The MoE layers' extra follows the expert kernel path: its prior is that path's extra host-dispatched ops at
# the per-op time of the per-layer prior (round 9, twin.fitting.launch_prior; 0 where that prior is 0).
HOST_TERMS = ("eager_layer_host_s", "eager_moe_layer_host_s")


@dataclass(frozen=True)
class Entry:
    parameter: str                     # ``name`` or ``name@scope`` (twin.fitting.scoped)
    value: float                       # embedded, model units
    prior: float | str | None          # stated prior (model units), INHERIT, or None (none stated)
    table: str                         # where it is embedded

    @property
    def scope(self) -> str | None:
        return split(self.parameter)[1]

    @property
    def evidence(self) -> str:
        if self.parameter in DECLARED_EVIDENCE:
            return DECLARED_EVIDENCE[self.parameter][0]
        return f"every ground-truth row on {self.scope}" if self.scope else "every ground-truth row"

    def is_evidence(self, case, deployment) -> bool:
        if self.parameter in DECLARED_EVIDENCE:
            return DECLARED_EVIDENCE[self.parameter][1](case, deployment)
        return self.applies(deployment)

    def applies(self, deployment) -> bool:
        """Whether the value acts on ``deployment`` (unscoped: everywhere no scoped entry overrides it)."""
        return self.scope is None or in_scope(self.scope, deployment)


def _stated_prior(base: str, key: str, flat: dict) -> float | str | None:
    if base in INHERITS_FROM and key != base and (base not in PATH_INHERITS or "+" in (split(key)[1] or "")):
        return INHERIT
    if base in HOST_TERMS and key != base:
        return HOST
    if base in POOLED_TERMS and EXPERT_PREFIX in (split(key)[1] or ""):
        return POOLED
    if flat.get(base) is not None:
        return flat[base]
    p = PARAMETERS_BY_NAME.get(key) or PARAMETERS_BY_NAME.get(base)
    return None if p is None else p.to_model(p.prior)


def _sync_per_seq_s() -> float:
    """The embedded ``per_seq_overhead_s@sync``: the async servers' per-sequence time plus the host time a server
    without async scheduling exposes (``twin.cost.sync_host``)."""
    from twin.cost import roofline as r
    from twin.cost.default_terms import SYNC_HOST_TERMS
    return r.DEFAULT_PER_SEQ_OVERHEAD_S + SYNC_HOST_TERMS["sync_seq_host_s"]


def _kv_path_values() -> dict[str, float]:
    """The KV cache formats' embedded decode-attention terms by fit key (``name@generation+kv_format``,
    ``twin.cost.kv_attention``)."""
    from twin.cost.default_terms import KV_FORMAT_TERMS
    return {f"{n}@{gen}+kv_{kv}": v for (gen, kv), terms in KV_FORMAT_TERMS.items() for n, v in terms.items()}


def embedded_entries() -> list[Entry]:
    """Every embedded value of a fitted term that differs from its stated prior, in table order."""
    from twin.cost import eager_path_floors as epf, roofline as r
    from twin.cost.default_terms import (EXPERT_FORMAT_TERMS, FLAT_DEFAULTS, FORMAT_QUANT_EFFICIENCY,
                                         GENERATION_TERMS)
    from twin.cost.generation_experts import scoped_values
    from twin.cost.generations import GENERATION_DEFAULTS, REFERENCE_GENERATION
    mem, comp = GENERATION_DEFAULTS[REFERENCE_GENERATION]
    out = [Entry(n, v, _stated_prior(n, n, {}), "twin.cost.roofline") for n, v in (
        ("memory_efficiency", mem), ("compute_efficiency", comp), ("gemm_half_tokens", r.DEFAULT_GEMM_HALF_TOKENS),
        ("step_overhead_s", r.DEFAULT_STEP_OVERHEAD_S), ("per_seq_overhead_s", r.DEFAULT_PER_SEQ_OVERHEAD_S),
        ("request_path_s", r.DEFAULT_REQUEST_PATH_S), ("request_path_jitter_s", r.DEFAULT_REQUEST_PATH_JITTER_S),
        ("allreduce_latency_s", r.ALLREDUCE_LATENCY_FAST_S))]
    out.append(Entry("per_seq_overhead_s@sync", _sync_per_seq_s(),
                     _stated_prior("per_seq_overhead_s", "per_seq_overhead_s@sync", {}), "SYNC_HOST_TERMS"))
    out += [Entry(k, v, _stated_prior(split(k)[0], k, {}), "KV_FORMAT_TERMS") for k, v in _kv_path_values().items()]
    for gen, (g_mem, g_comp) in GENERATION_DEFAULTS.items():
        if gen != REFERENCE_GENERATION:
            out += [Entry(f"{n}@{gen}", v, INHERIT, "twin.cost.generations.GENERATION_DEFAULTS")
                    for n, v in (("memory_efficiency", g_mem), ("compute_efficiency", g_comp))]
    for gen, terms in GENERATION_TERMS.items():
        out += [Entry(f"{n}@{gen}", v, _stated_prior(n, f"{n}@{gen}", FLAT_DEFAULTS), "GENERATION_TERMS")
                for n, v in terms.items()]
    out += [Entry(f"quant_weight_efficiency@{fmt}", v, 1.0, "FORMAT_QUANT_EFFICIENCY")
            for fmt, v in FORMAT_QUANT_EFFICIENCY.items()]
    for fmt, terms in EXPERT_FORMAT_TERMS.items():
        key = f"{EXPERT_PREFIX}{fmt}"
        out += [Entry(f"{n}@{key}", v, _stated_prior(n, f"{n}@{key}", FLAT_DEFAULTS), "EXPERT_FORMAT_TERMS")
                for n, v in terms.items()]
    out += [Entry(key, v, _stated_prior(split(key)[0], key, FLAT_DEFAULTS), "GENERATION_EXPERT_TERMS")
            for key, v in scoped_values().items()]
    out += [Entry(k, v, HOST, "twin.cost.eager_path_floors") for k, v in epf.embedded_values(GENERATION_TERMS).items()]
    from twin.cost.mla_request import mla_scoped_values    # MLA models' (rounds 8, 12): evidence their rows in scope
    out += [Entry(k, v, _stated_prior(split(k)[0], k, FLAT_DEFAULTS), t) for k, (v, t) in mla_scoped_values().items()]
    return [e for e in out if not (isinstance(e.prior, float) and abs(e.value - e.prior) <= 1e-12 * max(
        1.0, abs(e.prior)))]
