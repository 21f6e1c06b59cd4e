"""Issue 33 round 16: a fold that resets Blackwell's link part and keeps none of its evidence TP sets (the B200 GPU
fold, the silicon source fold) takes NCCL's small all-reduce over 2 NVLink GPUs as the link part, so its Blackwell
TP 1 steps pay 2 x layers x (L - 7.8 us) (twin.fitting.link_prior.EXCHANGE_PRIOR_S, twin.cost.unsharded_decode)."""

import pytest

from twin.cost.kernel_path import nccl_ll_allreduce_latency_s
from twin.cost.roofline import RooflineCostModel
from twin.fitting import provenance as pv
from twin.fitting.layer_fixed_prior import fold_link_s, kept_link_prior
from twin.fitting.link_prior import EXCHANGE_PRIOR_S, TERM


def test_the_exchange_prior_is_nccls_two_gpu_figure():
    assert EXCHANGE_PRIOR_S == nccl_ll_allreduce_latency_s(2) == pytest.approx(6.6e-6 + 2 * 0.6e-6, rel=1e-12)


def test_a_fold_keeping_no_evidence_set_takes_it_and_a_kept_entry_is_untouched():
    reset = pv.FoldPlan(actions={TERM: (None, pv.RESET)}, fixed={TERM: 1.0}, start={}, prior={})
    got = kept_link_prior(reset, [])
    assert got == {TERM: EXCHANGE_PRIOR_S}
    reset.fixed.update(got)
    assert fold_link_s(reset, "blackwell") == EXCHANGE_PRIOR_S
    assert kept_link_prior(pv.FoldPlan(actions={TERM: (None, pv.KEPT)}, fixed={}, start={}, prior={}), []) == {}


def test_a_blackwell_tp1_step_at_the_prior_pays_the_latency_less_the_exchange_per_allreduce_point():
    kw = dict(allreduce_latency_s=24e-6)
    at_prior = RooflineCostModel("llama-3.1-70b", "B200", 1, "fp8", "fp8", unsharded_allreduce_link_s=EXCHANGE_PRIOR_S,
                                 **kw)
    no_floor = RooflineCostModel("llama-3.1-70b", "B200", 1, "fp8", "fp8", unsharded_allreduce_link_s=1.0, **kw)
    assert no_floor.unsharded_floor_s == 0.0
    assert at_prior.unsharded_floor_s == pytest.approx(2 * 80 * (24e-6 - EXCHANGE_PRIOR_S), rel=1e-12)


def test_the_qk_norm_exchange_reads_the_prior_as_nccls_model_at_its_own_tp():
    from twin.cost.qk_norm_allreduce import qk_norm_allreduce_latency_s
    for tp in (2, 4, 8):
        got = qk_norm_allreduce_latency_s("B200", tp, 24e-6, EXCHANGE_PRIOR_S, "nvfp4")
        assert got == pytest.approx(nccl_ll_allreduce_latency_s(tp), rel=1e-12)
    assert qk_norm_allreduce_latency_s("B200", 4, 24e-6, 6e-6, "nvfp4") == pytest.approx(6e-6, rel=1e-12)


def test_the_prior_is_flagged_by_its_type_not_its_value():
    """A plain reading equal to 7.8 us stays a reading; the flag survives pickling, copies and the roofline's
    keywords (a fold's fixed terms reach the cost model unchanged)."""
    import copy
    import pickle

    from twin.cost.qk_norm_allreduce import qk_norm_allreduce_latency_s
    from twin.cost.unsharded_decode import ModelledLinkS
    plain = float(EXCHANGE_PRIOR_S)
    assert not isinstance(plain, ModelledLinkS) and plain == EXCHANGE_PRIOR_S
    for tp in (4, 8):
        assert qk_norm_allreduce_latency_s("B200", tp, 24e-6, plain, "nvfp4") == plain
        assert qk_norm_allreduce_latency_s("B200", tp, 24e-6, EXCHANGE_PRIOR_S, "nvfp4") == \
            nccl_ll_allreduce_latency_s(tp)
    assert isinstance(pickle.loads(pickle.dumps(EXCHANGE_PRIOR_S)), ModelledLinkS)
    assert isinstance(copy.deepcopy({TERM: EXCHANGE_PRIOR_S})[TERM], ModelledLinkS)
    kw = dict(tensor_parallel_size=4, weight_dtype="nvfp4", allreduce_latency_s=24e-6)
    modelled = RooflineCostModel("minimax-m2.5", "B200", unsharded_allreduce_link_s=EXCHANGE_PRIOR_S, **kw)
    read = RooflineCostModel("minimax-m2.5", "B200", unsharded_allreduce_link_s=plain, **kw)
    layers = modelled.model.num_hidden_layers
    assert modelled._t_allreduce - read._t_allreduce == pytest.approx(
        layers * (nccl_ll_allreduce_latency_s(4) - plain), rel=1e-9)
