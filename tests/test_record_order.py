from types import SimpleNamespace

from twin.sim.simulate import sort_by_arrival


def _records(pairs):
    return [SimpleNamespace(arrival_s=a, request_id=i) for a, i in pairs]


def _order(records):
    return [(r.arrival_s, r.request_id) for r in records]


def test_records_come_out_by_arrival_then_request_id_as_text():
    strictly_increasing = _records([(0.0, 9), (0.5, 2), (1.5, 10)])
    sort_by_arrival(strictly_increasing)
    assert _order(strictly_increasing) == [(0.0, 9), (0.5, 2), (1.5, 10)]

    tied = _records([(0.0, 9), (1.0, 2), (1.0, 10), (2.0, "a")])   # "10" < "2" as text
    sort_by_arrival(tied)
    assert _order(tied) == [(0.0, 9), (1.0, 10), (1.0, 2), (2.0, "a")]

    shuffled = _records([(2.0, 1), (0.5, 3), (1.0, 2)])
    sort_by_arrival(shuffled)
    assert _order(shuffled) == [(0.5, 3), (1.0, 2), (2.0, 1)]

    for empty_or_one in ([], _records([(3.0, 1)])):
        sort_by_arrival(empty_or_one)
