"""``RooflineExplain.explain`` (``RooflineCostModel``'s): one step's time split into named parts that add up to
its total (linear compute and the weight read exposed beyond it, attention compute and the KV read beyond it, KV
write, all-reduce, the host's overheads, and each term module's own part), for people and for the checks, never on
the hot path.

Each ``max(compute, memory)`` of the step time (``twin.cost.roofline_steps``) is split into its compute time and the
*exposed* memory time beyond it; the MoE experts' time beyond the dense efficiencies, the MoE dispatch / combine,
the attention-sink logits and the term modules' parts (``kernel_path``, ``sync_host``, ``kv_attention``,
``unsharded_decode``, ``decode_tokens``) are named apart; the eager floor (``eager_steps.explain_floor``) names what
the step takes beyond its GPU parts.
"""

from __future__ import annotations

from operator import mul

from twin.cost.base import StepShape
from twin.cost.decode_tokens import explain_decode_share
from twin.cost.deployment_terms import windowed_attention
from twin.cost.eager_steps import explain_floor
from twin.cost.kernel_path import explain_overhead_parts
from twin.cost.kv_attention import explain_kv_path
from twin.cost.sync_host import explain_sync_host
from twin.cost.unsharded_decode import explain_layer_floors


class RooflineExplain:
    """``explain()`` of the roofline cost model (a base of ``RooflineCostModel``, beside ``RooflineSteps``): it reads
    the constants the constructor resolved, never on the hot path."""

    def explain(self, step: StepShape) -> dict[str, float]:
        """The parts of ``step``'s time, in seconds, with ``total_s``: they add up to ``step_time_s(step)``."""
        nn = list(step.num_new_tokens)
        cc = list(step.num_computed_before)
        n_seqs = len(nn)
        parts = dict.fromkeys(("linear_compute_s", "attention_compute_s", "weight_read_s", "kv_read_s",
                               "kv_write_s", "allreduce_s", "overhead_s", "moe_expert_compute_extra_s",
                               "moe_expert_read_extra_s"), 0.0)
        if n_seqs:
            tokens = sum(nn)
            pairs = sum(map(mul, nn, cc)) + 0.5 * (sum(map(mul, nn, nn)) + tokens)
            logits = n_seqs + sum(step.num_spec_tokens)
            lin_c = self._k_linear_dense_eff * tokens + self._k_linear_dense_eff * self.gemm_half_tokens \
                + self._k_lm_head * logits
            w1 = self._t_weights if self._moe_weights_s is None else self._moe_weights_dense_eff(tokens)
            if self._moe_any_extra:   # the expert GEMMs' time beyond dense efficiency, on the side that binds
                c_eff = self._k_linear * tokens + self._t_gemm_knee + self._k_lm_head * logits
                w_eff = self._moe_weights_s(tokens)
                extra = max(c_eff, w_eff) - max(lin_c, w1)
                parts["moe_expert_compute_extra_s" if c_eff >= w_eff else "moe_expert_read_extra_s"] = extra
            if self._window:
                attn_c, kv_r = windowed_attention(self._attention, n_seqs, tokens, sum(cc), pairs)
            else:
                attn_c = (self._k_attn if tokens == n_seqs else self._k_attn_mixed) * pairs
                kv_r = self._k_kv * (sum(cc) + tokens)
            parts.update(
                linear_compute_s=lin_c,
                weight_read_s=max(0.0, w1 - lin_c),
                attention_compute_s=attn_c,
                kv_read_s=max(0.0, kv_r - attn_c),
                kv_write_s=self._k_kv * tokens,
                allreduce_s=self._t_allreduce + self._k_allreduce * tokens,
                overhead_s=self._t_step + self._k_seq * n_seqs + self._k_tok * tokens,
            )
            if self._t_a2a or self._k_a2a:    # MoE dispatch + combine across DP ranks, apart from TP's all-reduce
                parts["moe_all2all_s"] = self._t_a2a + self._k_a2a * tokens
                parts["allreduce_s"] -= parts["moe_all2all_s"]
            explain_overhead_parts(parts, self.per_token_overhead_s, self._k_layer_tok, tokens, self._t_moe,
                                   self._k_fp32)
            explain_sync_host(parts, self.sync_seq_host_s, n_seqs)
            explain_kv_path(parts, self)   # KV's own rate
            explain_layer_floors(parts, self)
            explain_decode_share(parts, self._k_seq_off, n_seqs)
            if self._attention.k_sink:        # attention-sink logits, apart from the KV write
                parts["attention_sink_s"] = self._attention.k_sink * tokens
                parts["kv_write_s"] = self._k_kv * tokens
        elif self._t_a2a or self._k_a2a:
            parts["moe_all2all_s"] = 0.0
        parts["total_s"] = self.step_time_s(step)
        explain_floor(parts)
        return parts
