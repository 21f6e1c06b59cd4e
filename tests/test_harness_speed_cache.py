"""A restricted held-out report simulates at the embedded defaults only the cases it reads
(twin.fitting.held_out_scope; issue 33, round 23): exact tests of which cases those are."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from twin.errors import TwinInputError
from twin.fitting.held_out_scope import read_default_indices, restricted

# a case is (source, GPU, family); the folds read one field each, as twin.fitting.joint.FOLDS does
CASES = [SimpleNamespace(source="inference-perf", gpu="H100-SXM", family="llama"),
         SimpleNamespace(source="silicon", gpu="B200", family="llama"),
         SimpleNamespace(source="silicon", gpu="H100-SXM", family="mixtral"),
         SimpleNamespace(source="silicon", gpu="B200", family="kimi")]
FOLDS = {"source": lambda c: c.source, "GPU": lambda c: c.gpu, "family": lambda c: c.family}


def test_no_groups_reads_every_case():
    assert read_default_indices(CASES, "source,GPU,family", set(), FOLDS) is None
    assert restricted([3, 0, 2], None) == [3, 0, 2]


def test_a_family_group_reads_its_cases_alone():
    assert read_default_indices(CASES, "family", {"mixtral"}, FOLDS) == {2}
    assert read_default_indices(CASES, "family", {"llama", "kimi"}, FOLDS) == {0, 1, 3}


def test_a_group_is_read_under_every_requested_fold_kind():
    # "B200" is a GPU group: under --folds family alone no case is read; with GPU its cases are
    assert read_default_indices(CASES, "family", {"B200"}, FOLDS) == set()
    assert read_default_indices(CASES, " GPU , family ", {"B200", "mixtral"}, FOLDS) == {1, 2, 3}


def test_restricted_keeps_the_order_and_drops_unread_cases():
    assert restricted([0, 1, 2, 3], {3, 1}) == [1, 3]
    assert restricted(range(4), {2}) == [2]
    assert restricted([0, 1], set()) == []


def test_an_unknown_fold_kind_is_one_line():
    with pytest.raises(TwinInputError, match=r"^--folds: unknown fold kind 'model'; allowed: source, GPU, family$"):
        read_default_indices(CASES, "family,model", {"llama"}, FOLDS)

