"""Which tokens of an open-loop workload no other request can share (twin.workload.sharing)."""

from __future__ import annotations

from twin.core.request import output_segment_key
from twin.workload.sharing import SegmentSharing
from twin.workload.spec import RequestSpec


def _spec(rid: int, segments) -> RequestSpec:
    return RequestSpec(rid, 0.0, sum(n for _, n in segments), 10, tuple(segments))


def test_private_from_the_first_segment_only_one_request_names():
    specs = [
        _spec(0, [(("sys",), 100), (("u", 0), 30)]),
        _spec(1, [(("sys",), 100), (("u", 1), 20)]),
        # turn 2 of request 1's session quotes its prompt and output
        _spec(2, [(("sys",), 100), (("u", 1), 20), (output_segment_key(1), 10), (("u", 2), 5)]),
        _spec(3, [(("alone",), 64)]),
    ]
    sharing = SegmentSharing(specs)
    assert [sharing.private_from_token(s) for s in specs] == [100, None, 130, 0]


def test_every_segment_shared_gives_none():
    a = _spec(0, [(("sys",), 16), (("q",), 8)])
    b = _spec(1, [(("sys",), 16), (("q",), 8), (output_segment_key(0), 10)])
    sharing = SegmentSharing([a, b])
    assert sharing.private_from_token(a) is None       # its output is quoted by b
    assert sharing.private_from_token(b) == 34         # b's own output is named by b alone
