"""Where each embedded default came from, so that a held-out fold does not start from (or keep) a value read
off the rows it holds out.

Every embedded value of a fitted term is an ``Entry``: the fit-parameter key that sets it (``name`` or
``name@scope``), its value, its stated prior and its EVIDENCE, the measured rows it was read off. The rule needs
nothing from whoever adds a table entry:

* an entry of ``twin.cost.default_terms`` (``GENERATION_TERMS``, ``FORMAT_QUANT_EFFICIENCY``,
  ``EXPERT_FORMAT_TERMS``), of ``twin.cost.generation_experts.GENERATION_EXPERT_TERMS`` or of ``twin.cost.generations.GENERATION_DEFAULTS`` has as evidence, unless
  ``DECLARED_EVIDENCE`` says otherwise, EVERY ground-truth row (either source) in its scope: its GPU generation,
  its weight format, its routed experts' format;
* the roofline's flat serving defaults (``twin.cost.roofline``: memory efficiency, step / sequence overheads,
  request path, all-reduce latency) were fitted on the inference-perf H100 runs, and the Blackwell eager host
  floors were read off named families' B200 rows (declared below);
* an entry equal to its stated prior carries no evidence (compute 0.6, the GEMM knee 0: see below).

In a fold whose held-out group contains any evidence row of an entry (judged on every ground-truth row, not on a
subsample), the entry is REFIT on the training rows when the fold fits its parameter (from its embedded value,
its weak prior pulling towards the stated prior), else RESET to its stated prior (``FoldPlan`` says which).
Stated priors: ``default_terms.FLAT_DEFAULTS``; for the flat serving terms and where that has none, the fit
parameter's prior (``twin.fitting.parameters``); a generation's efficiencies and all-reduce latency, and the fused
all-reduce, inherit (``INHERIT``): reset, they take the fold's unscoped (reference) value (the hierarchical
prior: a quantity physics says is shared across generations, a fraction of the datasheet rate, is predicted for
a held-out generation by the others' value); an expert kernel path's efficiencies (``POOLED_TERMS``, ``POOLED``)
take the other Marlin paths' values, else all other paths', pooled (``expert_path_prior``); a
generation's host time per decoder layer (``HOST_TERMS``, ``HOST``) takes the other generations' (``host_prior``).

What a NEW embedded term must declare (round 6), so that the folds keep it out of the groups it was read from:
(1) a ``twin.fitting.parameters`` FitParameter for its fit key (unit in the name, range, stated prior);
(2) its value in one of the tables above (then its evidence defaults to every row in its scope) or, if it lives
elsewhere, an ``Entry`` here; (3) a ``DECLARED_EVIDENCE`` line when the rows it was read off are narrower OR
wider than its scope (a value read off some rows GIVEN another term's value has that term's rows as evidence
too); (4) an ``INHERITS_FROM`` line only if physics says the quantity carries across generations and a held-out
test showed it (the eager host floors do not: round 6, docs/fidelity.md), or a ``HOST_TERMS`` one for a host
time that the other generations' rows predict (round 8: the per-layer floor, not the MoE layers' extra)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from twin.fitting import launch_prior
from twin.fitting.expert_path_prior import expert_path_prior, geometric_mean
from twin.fitting.link_prior import EVIDENCE as LINK_EVIDENCE
from twin.fitting.parameters import PARAMETERS_BY_NAME
from twin.fitting.routing_prior import TERM as ROUTING_TERM, WHAT as ROUTING_WHAT
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
INFERENCE_PERF = "the inference-perf H100 runs (twin.cost.roofline's serving fit)"


def _inference_perf(case, _deployment) -> bool:
    from twin.fitting.silicon import SiliconCase
    return not isinstance(case, SiliconCase)


def silicon_rows_of(system: str, *families: str) -> Callable:
    """The silicon rows of ``families`` on ``system`` (``b200_sxm``, ``h100_sxm``): an entry read off those only."""
    def rows(case, _deployment) -> bool:
        from twin.fitting.silicon import model_family
        row = getattr(case, "row", None)
        return row is not None and row.system == system and model_family(row.model_path) in families
    return rows


def _family(case) -> str:
    """The case's model family as the family folds name it (``twin.fitting.joint.family_of``)."""
    from twin.fitting.silicon import model_family
    return model_family(case.run.model or case.target.model)


# parameter key -> (what the evidence is, which rows): overrides the in-scope rule
DECLARED_EVIDENCE: dict[str, tuple[str, Callable]] = {**launch_prior.EVIDENCE,     # round 14: the GQA path counts
    **{n: (INFERENCE_PERF, _inference_perf) for n in (
        "memory_efficiency", "step_overhead_s", "per_seq_overhead_s", "request_path_s", "request_path_jitter_s",
        "allreduce_latency_s")},
    # the eager host floors (twin.cost.eager_steps, docs/fidelity.md "Round 5: the per-request TTFT intercept"):
    # per decoder layer off the B200 Llama-3.1-70B rows; per MoE layer off the March B200 Kimi-K2.5 / MiniMax-M2.5
    # rows GIVEN the per-layer value (least squares of the MoE rows' floor less 0.84 ms x layers), so the Llama
    # rows are its evidence too (round 6: declared; round 5 had Kimi / MiniMax only, a leak in the Llama fold)
    "eager_layer_host_s@blackwell": ("the B200 Llama rows", silicon_rows_of("b200_sxm", "llama")),
    "eager_moe_layer_host_s@blackwell": ("the B200 Kimi-K2.5 and MiniMax-M2.5 rows, given the B200 Llama rows' "
                                         "per-layer value", silicon_rows_of("b200_sxm", "kimi", "minimax", "llama")),
    # the Hopper Marlin MXFP4 path (twin.cost.marlin_mxfp4): picked on the gpt-oss-120b H100 rows, folds by TP / ISL /
    # load (docs/fidelity.md "Round 6: gpt-oss-120b and Llama prompt steps")
    **{f"{n}@hopper+experts_mxfp4": ("the H100 gpt-oss-120b rows", silicon_rows_of("h100_sxm", "gpt-oss"))
       for n in ("moe_expert_compute_efficiency", "layer_token_overhead_s", "fused_allreduce_latency_s")},
    # the sync servers' per-sequence time (twin.cost.sync_host): its 45 us read off the Qwen3-32B H100 rows (vLLM
    # 0.12) GIVEN the async servers' 18.7 us (the inference-perf runs), which the embedded 63.7 us includes
    "per_seq_overhead_s@sync": ("the Qwen3-32B H100 rows (its 45 us), given the inference-perf H100 runs' "
                                "per_seq_overhead_s (its 18.7 us)",
                                lambda case, d: _family(case) == "qwen3" or _inference_perf(case, d)),
    # FP8 KV decode attention on Hopper (twin.cost.kv_attention): picked on the Llama-3.1-70B H100 rows, folds by TP /
    # ISL-OSL / load (docs/fidelity.md "Round 7: Llama decode and gpt-oss held out")
    "kv_memory_efficiency@hopper+kv_fp8": ("the H100 Llama-3.1-70B rows", silicon_rows_of("h100_sxm", "llama")),
    # MiniMax-M2.5 FP8's B200 pair (twin.cost.generation_experts, round 8): fitted on the B200 MiniMax FP8 rows
    **{f"{n}@blackwell+experts_fp8": ("the B200 MiniMax-M2.5 FP8 rows", silicon_rows_of("b200_sxm", "minimax"))
       for n in ("moe_prompt_stream_efficiency", "layer_token_decode_share")},
    # ... and its eager floor per MoE layer (round 8b, tried, not embedded: docs/fidelity.md "Round 8: the Blackwell
    # MoE eager floor by expert path"): read off its light-load 1k rows GIVEN the B200 Llama rows' per-layer value
    "eager_moe_layer_host_s@blackwell+experts_fp8": ("the B200 MiniMax-M2.5 FP8 rows, given the B200 Llama rows' per-"
                                                     "layer value", silicon_rows_of("b200_sxm", "minimax", "llama")),
    # the Blackwell link part of an all-reduce (round 10, twin.fitting.link_prior): B200 gpt-oss / MiniMax NVFP4 rows
    **LINK_EVIDENCE, ROUTING_TERM: (ROUTING_WHAT, silicon_rows_of("b200_sxm", "gpt-oss")),    # round 12, routing_prior
    # the knee fitted to 0 +/- 300 tokens on those runs: not identified; 0 is the pure roofline's value
    "gemm_half_tokens": ("none (fitted to 0 +/- 300 tokens: not identified; the pure roofline)", lambda *_: False),
}


# a host term's value READ on a generation whose embedded value is another (Hopper's eager floor stays 0 in
# GENERATION_TERMS: round 7 found the calibrate workflow's synthetic H100 runs made without it), by fit key: (value,
# what it was read off, which rows). Only another generation's evidence in ``host_prior``; never simulated itself.
HOST_READINGS: dict[str, tuple[float, str, Callable]] = {
    # the median of the 8 light-load (C <= 8) 1k rows of H100 Llama-3.1-70B FP8 (TP2 / TP8) and MiniMax-M2.5 FP8
    # (TP4) whose prompt steps exceed the captured graphs: (twin GPU step + the TTFT the embedded defaults miss) /
    # decoder layers, 0.60-1.06 ms (benchmarks/eager_floor_by_generation.py on main 510fba8's defaults, no
    # simulation; an upper bound where the missed time is something else). Given the embedded request path, so
    # the inference-perf runs are its evidence too
    "eager_layer_host_s@hopper": (0.92e-3, "the H100 Llama-3.1-70B / MiniMax-M2.5 rows' light-load 1k prompt steps, "
                                  "given the inference-perf runs' request path",
                                  lambda c, d: silicon_rows_of("h100_sxm", "llama", "minimax")(c, d)
                                  or _inference_perf(c, d)),
}


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


def host_prior(base: str, generation: str, entries: Sequence[Entry], held: Iterable[str], held_rows) -> float:
    """The stated prior of a host term ``base`` (``HOST_TERMS``) on ``generation`` whose evidence a fold holds
    out (issue 33, round 8): the geometric mean of what the OTHER generations' rows show, their embedded entries
    (``entries`` not in ``held``) and ``HOST_READINGS``, each only where the fold keeps every row it was read
    off (``held_rows``: the held-out (case, deployment) pairs); none left: the flat prior 0
    (``default_terms.FLAT_DEFAULTS``).

    Why: it is the CPU's launch time (twin.cost.eager_steps), and the generations measured agree (B200 0.89 ms,
    H100 0.92 ms per layer on light-load 1k prompt steps outside the graphs; docs/fidelity.md "Round 8")."""
    from twin.cost.default_terms import FLAT_DEFAULTS
    if base == launch_prior.MOE_FLOOR:      # round 9: the extra ops of a MoE layer at the per-layer prior's per-op time
        return launch_prior.moe_floor_prior_s(host_prior(launch_prior.PER_LAYER, generation, entries, held, held_rows))
    held = set(held)
    values = [e.value for e in entries if split(e.parameter)[0] == base and e.parameter not in held
              and e.scope not in (None, generation) and "+" not in e.scope and e.value > 0]
    values += [v for key, (v, _, rows) in HOST_READINGS.items() if split(key)[0] == base
               and split(key)[1] != generation and not any(rows(c, d) for c, d in held_rows)]
    return geometric_mean(values) if values else FLAT_DEFAULTS[base]


REFIT, RESET, KEPT = "refit on the training rows", "reset to its stated prior", "kept: no stated prior (leaks)"


@dataclass
class FoldPlan:
    """What a fold does with the embedded entries its held-out group gave evidence to."""
    actions: dict[str, tuple[Entry, str]]       # parameter -> (entry, REFIT / RESET / KEPT)
    fixed: dict[str, float]                     # parameter -> value the fold holds (resets and what they protect)
    start: dict[str, float]                     # parameter -> start of a refit one (its embedded value)
    prior: dict[str, float]                     # parameter -> what a refit one's weak prior pulls towards

    def affects(self, deployment) -> bool:
        """Whether a case on ``deployment`` is costed differently from the embedded defaults in this fold."""
        return any(e.applies(deployment) for e, a in self.actions.values() if a != KEPT)

    via: dict[str, str] = field(default_factory=dict)   # parameter -> the unscoped term that refits it
    how: dict[str, str] = field(default_factory=dict)   # parameter -> what prices a reset one after the fit

    def lines(self) -> list[str]:
        return [f"{p}: {a}{f' as {self.via[p]} (held itself: its unscoped term replaces it)' if p in self.via else ''}"
                f"{f', {self.fixed[p]:.4g} ({self.how.get(p, e.prior)})' if a == RESET and isinstance(e.prior, str) else ''}"
                f" ({e.table}; evidence: {e.evidence})" for p, (e, a) in self.actions.items()]


def _refits(entry: Entry, fitted: Sequence[str]) -> bool:
    """The fold fits this entry's parameter, or the unscoped one that replaces it everywhere."""
    base = split(entry.parameter)[0]
    return entry.parameter in fitted or (base in fitted and not any(split(n) == (base, entry.scope)
                                                                       for n in fitted if n != base))


def fold_plan(group: str, group_of: Callable, evidence: Iterable[tuple], fitted: Sequence[str],
              entries: Sequence[Entry] | None = None, allow: Sequence[str] = ()) -> FoldPlan:
    """The plan for the fold holding out ``group``: ``evidence`` is (case, deployment) for EVERY ground-truth row
    (not a subsample), ``fitted`` the parameters this fold fits, ``allow`` parameters a user lets leak."""
    entries = embedded_entries() if entries is None else list(entries)
    held_rows = [(c, d) for c, d in evidence if group_of(c) == group]
    by_key = {e.parameter: e for e in entries}
    actions: dict[str, tuple[Entry, str]] = {}
    for e in entries:
        if e.parameter in allow or not any(e.is_evidence(c, d) for c, d in held_rows):
            continue
        if _refits(e, fitted):
            actions[e.parameter] = (e, REFIT)
        else:
            actions[e.parameter] = (e, KEPT if e.prior is None else RESET)

    def prior_value(e: Entry) -> float:
        if e.prior == POOLED:
            return expert_path_prior(e.parameter, entries, actions)
        if e.prior == HOST:
            return host_prior(split(e.parameter)[0], e.scope, entries, actions, held_rows)
        if e.prior != INHERIT:
            return e.prior
        src = INHERITS_FROM[split(e.parameter)[0]]
        scoped = f"{src}@{e.scope}"         # the fused all-reduce: its generation's unfused latency first
        if scoped != e.parameter and scoped in by_key and scoped not in actions:
            return by_key[scoped].value
        ref = by_key.get(src)
        if ref is not None and src in actions and actions[src][1] == RESET:
            return ref.prior
        return embedded_start((src,)).get(src, ref.value if ref else PARAMETERS_BY_NAME[src].to_model(
            PARAMETERS_BY_NAME[src].prior))

    fixed = {p: prior_value(e) for p, (e, a) in actions.items() if a == RESET}
    fixed |= launch_prior.path_floor_priors(fixed, lambda g: host_prior("eager_layer_host_s", g, entries, actions, held_rows))
    prior = {p: prior_value(e) for p, (e, a) in actions.items() if a == REFIT and p in fitted}
    # a refit starts where the embedded value is (a floor such as twin.cost.eager_steps' has no slope at its
    # prior 0), and its weak prior pulls towards the stated prior: a term the training rows do not identify ends
    # there, and the fold's table says so
    start = {p: actions[p][0].value for p in prior}
    # an unscoped reset would override the embedded scoped entries of the same term: hold those at their values
    for p in list(fixed):
        if split(p)[1] is None:
            fixed |= {e.parameter: e.value for e in entries if split(e.parameter) == (p, e.scope) and e.scope
                      and e.parameter not in actions and e.parameter not in fitted}
    via = {p: split(p)[0] for p, (_, a) in actions.items() if a == REFIT and p not in fitted}
    return FoldPlan(actions, fixed, start, prior, via)


def embedded_start(names: Sequence[str]) -> dict[str, float]:
    """The embedded defaults (``twin.cost.roofline``, ``twin.cost.generations``) as values of ``names``, in model
    units: where the fit starts, and what a held parameter keeps. (The all-reduce latency is the NVLink one:
    every GPU in the data is NVLink-connected.)"""
    from twin.cost import eager_path_floors as epf, roofline as r
    from twin.cost.default_terms import (EXPERT_FORMAT_TERMS, FLAT_DEFAULTS, FORMAT_QUANT_EFFICIENCY,
                                         GENERATION_TERMS, generation_term)
    from twin.cost.generation_experts import scoped_values
    from twin.cost.generations import default_efficiencies
    from twin.cost.moe_terms import DEFAULT_MOE_EXPERT_COMPUTE_EFFICIENCY, DEFAULT_MOE_EXPERT_EFFICIENCY
    from twin.hardware.catalog import resolve_gpu
    mem, comp = default_efficiencies("H100-SXM")
    bw_mem, bw_comp = default_efficiencies("B200")
    hopper, blackwell = resolve_gpu("H100-SXM"), resolve_gpu("B200")
    values = {"memory_efficiency": mem, "compute_efficiency": comp, "gemm_half_tokens": r.DEFAULT_GEMM_HALF_TOKENS,
              "step_overhead_s": r.DEFAULT_STEP_OVERHEAD_S, "per_seq_overhead_s": r.DEFAULT_PER_SEQ_OVERHEAD_S,
              "request_path_s": r.DEFAULT_REQUEST_PATH_S, "request_path_jitter_s": r.DEFAULT_REQUEST_PATH_JITTER_S,
              "allreduce_latency_s": r.default_allreduce_latency_s(hopper), "memory_efficiency@blackwell": bw_mem,
              "compute_efficiency@blackwell": bw_comp, "moe_expert_efficiency": DEFAULT_MOE_EXPERT_EFFICIENCY,
              "moe_expert_compute_efficiency": DEFAULT_MOE_EXPERT_COMPUTE_EFFICIENCY,
              "layer_overhead_s": generation_term(hopper, "layer_overhead_s", 0.0),
              "kv_memory_efficiency": mem, "request_path_s@blackwell": r.DEFAULT_REQUEST_PATH_S,
              # the request path as each client measures it (issue 33, round 6): none embedded, the one path
              **{f"request_path_s@client_{c}": r.DEFAULT_REQUEST_PATH_S for c in ("vllm_bench", "inference_perf")},
              "quant_weight_efficiency@fp8": FORMAT_QUANT_EFFICIENCY.get("fp8", 1.0),
              "quant_weight_efficiency@int4": FORMAT_QUANT_EFFICIENCY.get("int4", 1.0),
              "step_overhead_s@sync": r.DEFAULT_STEP_OVERHEAD_S,
              "per_seq_overhead_s@sync": _sync_per_seq_s(),
              "per_token_overhead_s": generation_term(hopper, "per_token_overhead_s", r.DEFAULT_PER_TOKEN_OVERHEAD_S),
              "per_token_overhead_s@blackwell": generation_term(blackwell, "per_token_overhead_s",
                                                                r.DEFAULT_PER_TOKEN_OVERHEAD_S),
              "layer_overhead_s@blackwell": generation_term(blackwell, "layer_overhead_s", 0.0),
              "layer_token_overhead_s": generation_term(hopper, "layer_token_overhead_s", 0.0),
              "layer_token_overhead_s@blackwell": generation_term(blackwell, "layer_token_overhead_s", 0.0),
              "allreduce_latency_s@blackwell": r.default_allreduce_latency_s(blackwell)}
    # every other generation-scoped entry, and the flat defaults of the terms resolved per deployment (the eager
    # floors, ...), so that a fit of any of them starts from, and is pulled towards, what is embedded
    values |= {f"{n}@{gen}": v for gen, terms in GENERATION_TERMS.items() for n, v in terms.items()
               if f"{n}@{gen}" not in values}
    values |= {n: v for n, v in FLAT_DEFAULTS.items() if v is not None and n not in values}
    fused = generation_term(blackwell, "fused_allreduce_latency_s", None)
    if fused is not None:
        values["fused_allreduce_latency_s"] = fused
    # the expert kernel paths' embedded values, by format and by (generation, format) (twin.cost.generation_experts)
    paths = {f"{k}@experts_{fmt}": v for fmt, terms in EXPERT_FORMAT_TERMS.items() for k, v in terms.items()}
    paths |= scoped_values() | epf.embedded_values(GENERATION_TERMS)     # round 14: the GQA path counts
    # the KV cache format's decode attention rate by generation (twin.cost.kv_attention), held the same way
    paths |= _kv_path_values()
    from twin.cost.mla_decode import MLA_TERMS       # MLA models' fixed time per layer (issue 33, round 8)
    paths |= {f"{n}@mla": v for n, v in MLA_TERMS.items()}
    values |= paths
    # an expert path's embedded value holds beside its unscoped term, and a (generation, path) one beside its
    # generation's term (either would override it otherwise: eager_moe_layer_host_s@blackwell beside
    # ...@blackwell+experts_fp8, round 8b)
    out = {n: values[n] for n in names if n in values}
    def held_beside(key: str) -> bool:      # its base term, or its generation's scoped term, is fitted
        base, scope = split(key)
        return base in names or ("+" in scope and f"{base}@{scope.split('+')[0]}" in names)
    return out | {n: v for n, v in paths.items() if held_beside(n)}
