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
elsewhere, an ``Entry`` in ``embedded_entries``; (3) a ``DECLARED_EVIDENCE`` line when the rows it was read off are
narrower OR wider than its scope (a value read off some rows GIVEN another term's value has that term's rows as
evidence too); (4) an ``INHERITS_FROM`` line only if physics says the quantity carries across generations and a
held-out test showed it (the eager host floors do not: round 6, docs/fidelity.md), or a ``HOST_TERMS`` one for a
host time that the other generations' rows predict (round 8: the per-layer floor, not the MoE layers' extra).

Where each part lives: the evidence tables (``DECLARED_EVIDENCE``, ``HOST_READINGS``) in
``twin.fitting.provenance_evidence``; the Entry list (``Entry``, the stated-prior kinds, ``embedded_entries``) in
``twin.fitting.provenance_entries``; here, what a fold does with them (``fold_plan``, ``host_prior``,
``embedded_start``). Every name stays importable from this module."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from twin.fitting import launch_prior
from twin.fitting.expert_path_prior import expert_path_prior, geometric_mean
from twin.fitting.parameters import PARAMETERS_BY_NAME
# the Entry list and the evidence tables live in their own modules; their names stay importable from here
from twin.fitting.provenance_entries import (HOST, HOST_TERMS, INHERIT, INHERITS_FROM, PATH_INHERITS, POOLED,
                                             POOLED_TERMS, Entry, _kv_path_values, _stated_prior, _sync_per_seq_s,
                                             embedded_entries)
from twin.fitting.provenance_evidence import (DECLARED_EVIDENCE, HOST_READINGS, INFERENCE_PERF, _family,
                                              _inference_perf, silicon_rows_of)
from twin.fitting.scoped import split

__all__ = ["DECLARED_EVIDENCE", "HOST", "HOST_READINGS", "HOST_TERMS", "INFERENCE_PERF", "INHERIT", "INHERITS_FROM",
           "KEPT", "PATH_INHERITS", "POOLED", "POOLED_TERMS", "REFIT", "RESET", "Entry", "FoldPlan", "_family",
           "_inference_perf", "_stated_prior", "embedded_entries", "embedded_start", "fold_plan", "host_prior",
           "silicon_rows_of"]


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
