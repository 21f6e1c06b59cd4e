import gc

import pytest

from twin.sim.gc_pacing import paced_gc


@pytest.fixture
def restore_thresholds():
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)


def test_the_young_threshold_is_raised_within_the_block_and_restored_after(restore_thresholds):
    gc.set_threshold(700, 10, 10)
    with paced_gc(50_000):
        assert gc.get_threshold() == (50_000, 10, 10)
    assert gc.get_threshold() == (700, 10, 10)


def test_a_slower_pace_or_collection_off_is_kept_and_restored_after_an_error(restore_thresholds):
    for caller in ((200_000, 5, 5), (0, 10, 10)):
        gc.set_threshold(*caller)
        with pytest.raises(RuntimeError), paced_gc(50_000):
            assert gc.get_threshold() == caller
            raise RuntimeError("the run failed")
        assert gc.get_threshold() == caller
