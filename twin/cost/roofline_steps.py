"""The roofline's step time, the simulation's hot path: a step's seconds from its sums over its sequences, with the
per-GPU constants ``RooflineCostModel``'s constructor resolved once (``twin.cost.roofline``; the terms and their
physics are described there).

``RooflineSteps`` holds only the methods the engine calls per step or per decode run (``step_time_s``,
``step_time_from_sums``, ``decode_step_times_s`` and its per-batch cache ``_decode_terms_of``) and the fit's batched
form (``step_times_s``, numpy arrays over recorded steps). They read the constructor's attributes: ``_k_linear``,
``_t_gemm_knee``, ``_k_lm_head``, ``_t_weights``, ``_moe_weights_s``, ``_k_attn``, ``_k_attn_mixed``, ``_k_kv``,
``_k_kv_write``, ``_window``, ``_attention``, ``_t_allreduce``, ``_k_allreduce``, ``_t_step``, ``_k_seq``, ``_k_tok``,
``_decode_terms`` and (``step_times_s`` only) the eager floor's ``cudagraph_tokens``, ``eager_floor_s`` and
``marlin_padding_array``. The per-step methods do the arithmetic of one step on these attributes and nothing more
(besides ``step_time_s``' sums over the step's lists, their only call is the MoE weight stream's cache). Modules that change a step's time for one
deployment (``eager_steps``, ``marlin_blocks``, ``prompt_experts``, the windowed layers'
``deployment_terms.windowed_step_time``) replace these methods on the instance, so the plain path stays as it is
here.
"""

from __future__ import annotations

from operator import mul

from twin.cost.base import StepShape
from twin.cost.eager_steps import floored_array


class RooflineSteps:
    """The roofline's per-step arithmetic (a base of ``twin.cost.roofline.RooflineCostModel``, which sets the
    attributes these methods read)."""

    def step_time_s(self, step: StepShape) -> float:
        nn = step.num_new_tokens
        n_seqs = len(nn)
        if not n_seqs:
            return 0.0                                   # nothing scheduled: no forward pass
        cc = step.num_computed_before
        if nn.count(1) == n_seqs:                        # pure decode: n = 1 everywhere
            return self.step_time_from_sums(n_seqs, n_seqs, sum(cc), 0, n_seqs, sum(step.num_spec_tokens))
        return self.step_time_from_sums(n_seqs, sum(nn), sum(cc), sum(map(mul, nn, cc)), sum(map(mul, nn, nn)),
                                        sum(step.num_spec_tokens))

    def step_time_from_sums(self, n_seqs: int, tokens: int, context: int, new_x_context: int, new_squared: int,
                            spec_tokens: int) -> float:
        """``step_time_s`` from the step's integer sums over its sequences: new tokens n, context c computed
        before, n x c, n x n, draft tokens (``new_x_context`` is ignored for a pure decode, n = 1 everywhere).
        Bit-identical to ``step_time_s``; the engine's decode fast path keeps these sums without a list."""
        if not n_seqs:
            return 0.0
        if tokens == n_seqs == new_squared:              # pure decode
            pairs = context + tokens                     # sum(c + 1)
            attention = self._k_attn * pairs
        else:
            pairs = new_x_context + 0.5 * (new_squared + tokens)
            attention = self._k_attn_mixed * pairs       # MLA: the expanded (prefill) form
        linear = self._k_linear * tokens + self._t_gemm_knee + self._k_lm_head * (n_seqs + spec_tokens)
        t_weights = self._t_weights if self._moe_weights_s is None else self._moe_weights_s(tokens)
        if linear < t_weights:
            linear = t_weights
        kv_read = self._k_kv * (context + tokens)
        if attention < kv_read:
            attention = kv_read
        return (linear + attention + self._k_kv_write * tokens + (self._t_allreduce + self._k_allreduce * tokens)
                + (self._t_step + self._k_seq * n_seqs + self._k_tok * tokens))

    def decode_step_times_s(self, n_seqs: int, context: int, num_steps: int) -> list[float]:
        """``step_time_from_sums`` of ``num_steps`` pure-decode steps of ``n_seqs`` sequences (one new token each, no
        drafts), the first after ``context`` computed tokens, each adding ``n_seqs``: bit-identical, the step-invariant
        terms computed once (the larger of attention and KV read has the larger coefficient: rounding is monotone)."""
        if not n_seqs:
            return [0.0] * num_steps
        if self._window:      # the windowed layers' work stops growing with the context: step by step
            return [self.step_time_from_sums(n_seqs, n_seqs, context + i * n_seqs, 0, n_seqs, 0)
                    for i in range(num_steps)]
        linear, k_pairs, kv_write, allreduce, overhead = (self._decode_terms.get(n_seqs)
                                                          or self._decode_terms_of(n_seqs))
        first = context + n_seqs
        return [linear + k_pairs * pairs + kv_write + allreduce + overhead
                for pairs in range(first, first + n_seqs * num_steps, n_seqs)]

    def _decode_terms_of(self, n_seqs: int) -> tuple[float, float, float, float, float]:
        """The terms of a pure-decode step of ``n_seqs`` sequences that do not depend on its context (linear,
        seconds per attention pair, KV write, all-reduce, overhead), kept for the next step of as many."""
        linear = self._k_linear * n_seqs + self._t_gemm_knee + self._k_lm_head * n_seqs
        t_weights = self._t_weights if self._moe_weights_s is None else self._moe_weights_s(n_seqs)
        if linear < t_weights:
            linear = t_weights
        k_pairs = self._k_attn if self._k_attn > self._k_kv else self._k_kv   # per (context + new) token
        terms = self._decode_terms[n_seqs] = (linear, k_pairs, self._k_kv_write * n_seqs,
                                              self._t_allreduce + self._k_allreduce * n_seqs,
                                              self._t_step + self._k_seq * n_seqs + self._k_tok * n_seqs)
        return terms

    def step_times_s(self, tokens, seqs, logits, context, pairs):
        """``step_time_s`` for many steps at once, from their aggregates (numpy arrays, one entry per step):
        scheduled tokens, sequences, logit positions (sequences + draft tokens), context tokens computed before
        the step, and attention (query, key) pairs. Bit-identical to ``step_time_from_sums`` step by step (the
        same operations in the same order); the fit re-costs recorded steps under new parameters with it."""
        import numpy as np

        tokens = np.asarray(tokens, dtype=float)
        if self._moe_weights_s is None:
            t_weights = self._t_weights
        else:
            unique, inverse = np.unique(tokens.astype(np.int64), return_inverse=True)
            t_weights = np.array([self._moe_weights_s(int(t)) for t in unique])[inverse]
        linear = np.maximum(self._k_linear * tokens + self._t_gemm_knee + self._k_lm_head * np.asarray(logits),
                            t_weights)
        seqs_a, pairs_a, kv_tokens = np.asarray(seqs), np.asarray(pairs), np.asarray(context) + tokens
        k_attn = np.where(tokens > seqs_a, self._k_attn_mixed, self._k_attn)
        if self._window:
            at, w = self._attention, self._window
            k_full = np.where(tokens > seqs_a, at.k_attn_mixed, at.k_attn_decode)
            attn_c = (k_full * pairs_a + at.k_attn_win * np.minimum(tokens * w, pairs_a) + at.k_index * pairs_a)
            kv_r = at.k_kv_full * kv_tokens + at.k_kv_win * np.minimum(seqs_a * w + tokens, kv_tokens)
            attention = np.maximum(attn_c, kv_r)
        else:
            attention = np.maximum(k_attn * pairs_a, self._k_kv * kv_tokens)
        return floored_array(linear + attention + self._k_kv_write * tokens + (self._t_allreduce + self._k_allreduce
                             * tokens) + (self._t_step + self._k_seq * np.asarray(seqs) + self._k_tok * tokens),
                             tokens, seqs, self.cudagraph_tokens, self.eager_floor_s, self.marlin_padding_array)
