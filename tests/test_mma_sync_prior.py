"""A Marlin expert path held out with no other Marlin path kept takes the mma.sync ceiling (Hopper 2/3 of the dense
rate, Blackwell 1/3) instead of the flat prior 1 (twin.fitting.mma_sync_prior; issue 33, round 17)."""

from __future__ import annotations

import pytest

from twin.fitting import provenance as pv
from twin.fitting.expert_path_prior import MARLIN_PATHS, expert_path_prior
from twin.fitting.mma_sync_prior import HOPPER_MMA_SYNC_SHARE, mma_sync_ceiling

from tests.test_marlin_prior import FP8_H, INT4, MXFP4_H, _entries as _marlin_entries


def _entries():
    """The three expert paths' entries with gpt-oss's Hopper Marlin path at its embedded 0.35."""
    return _marlin_entries(mxfp4=0.35)


def test_the_ceiling_is_hoppers_published_share_carried_to_blackwell():
    assert HOPPER_MMA_SYNC_SHARE == pytest.approx(2 / 3, rel=1e-12)
    assert mma_sync_ceiling(MARLIN_PATHS[MXFP4_H]) == pytest.approx(2 / 3, rel=1e-12)
    # Blackwell: the same mma.sync FLOPs per SM clock against twice the dense MMA width (round 8's assumption)
    assert mma_sync_ceiling(MARLIN_PATHS[INT4]) == pytest.approx(1 / 3, rel=1e-12)
    assert mma_sync_ceiling("ampere") is None               # no stated MMA width
    assert FP8_H not in MARLIN_PATHS                        # block FP8 runs wgmma kernels: not a Marlin path
    assert mma_sync_ceiling(None) is None


def test_the_ceiling_stands_in_only_where_no_other_marlin_path_is_kept():
    es = _entries()
    # another Marlin path kept: its value carried between generations, as before (0.2 x 8192 / 4096)
    assert expert_path_prior(MXFP4_H, es, {MXFP4_H}) == pytest.approx(0.4, rel=1e-12)
    # both Marlin paths held out: the ceiling, ahead of the pooled wgmma path
    assert expert_path_prior(MXFP4_H, es, {MXFP4_H, INT4}) == pytest.approx(2 / 3, rel=1e-12)
    # Blackwell's Marlin path: its carried ceiling, ahead of the pooled fallback (here the block-FP8 path's 0.18)
    assert expert_path_prior(INT4, es, {MXFP4_H, INT4}) == pytest.approx(1 / 3, rel=1e-12)
    # a non-Marlin path is untouched
    assert expert_path_prior(FP8_H, es, {FP8_H}) == pytest.approx((0.2 * 0.35) ** 0.5, rel=1e-12)


def test_a_fold_holding_every_expert_path_out_resets_both_marlin_paths_to_their_ceilings(monkeypatch):
    for key in (INT4, MXFP4_H, FP8_H):
        monkeypatch.setitem(pv.DECLARED_EVIDENCE, key, ("silicon", lambda c, _d: c == "silicon"))
    plan = pv.fold_plan("silicon", lambda c: c, [("silicon", None), ("inference-perf", None)], (), entries=_entries())
    assert plan.fixed == pytest.approx({MXFP4_H: 2 / 3, INT4: 1 / 3, FP8_H: 1.0}, rel=1e-12)
    assert all(plan.actions[k][1] == pv.RESET for k in (INT4, MXFP4_H, FP8_H))
