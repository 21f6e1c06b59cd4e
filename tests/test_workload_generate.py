"""Synthetic workloads: determinism, stream independence, lengths, class shares, prefix structure, sessions,
closed loop."""

import collections
import copy

import numpy as np
import pytest

from twin.errors import TwinInputError
from twin.core.request import output_segment_key
from twin.workload import ClosedLoopWorkload, RequestSpec, build_workload


def agent(share=1.0, **over):
    c = {"name": "agent", "share": share,
         "prompt": {"shared_prefix_tokens": 3000, "num_prefix_groups": 4,
                    "few_shot": {"num_templates": 3, "tokens": 1500},
                    "suffix_tokens": {"lognormal": {"median": 200, "sigma": 0.8}}},
         "output_tokens": {"lognormal": {"median": 150, "sigma": 0.6}}}
    c.update(over)
    return c


def chat(share=1.0, **over):
    c = {"name": "chat", "share": share, "priority": 1,
         "prompt": {"shared_prefix_tokens": 400, "suffix_tokens": {"uniform": [20, 80]}},
         "output_tokens": {"uniform": [50, 150]},
         "multi_turn": {"turns": {"uniform": [2, 5]}, "gap_s": {"exponential": {"mean": 15}}}}
    c.update(over)
    return c


def workload(**over):
    d = {"arrivals": {"process": "poisson", "rate_per_s": 8}, "duration_s": 300,
         "classes": [agent(0.7), chat(0.3)]}
    d.update(over)
    return d


def check_well_formed(specs):
    assert [s.request_id for s in specs] == list(range(len(specs)))
    arr = [s.arrival_s for s in specs]
    assert arr == sorted(arr)
    for s in specs:
        assert isinstance(s, RequestSpec)
        assert sum(n for _, n in s.prompt_segments) == s.num_prompt_tokens >= 1
        assert s.output_tokens >= 1
        assert all(n >= 1 for _, n in s.prompt_segments)
        hash(s.prompt_segments)


def test_same_seed_same_specs_and_different_seed_differs():
    a = build_workload(workload(), seed=7)
    b = build_workload(copy.deepcopy(workload()), seed=7)
    c = build_workload(workload(), seed=8)
    check_well_formed(a)
    assert a == b
    assert a != c


def test_changing_rate_keeps_classes_and_lengths():
    single = dict(classes=[agent(0.5), agent(0.5, name="other")], num_requests=400, duration_s=None)
    slow = build_workload(workload(**single), seed=1)
    fast = build_workload(workload(**single, arrivals={"process": "gamma", "rate_per_s": 30, "cv": 3}), seed=1)
    assert [s.arrival_s for s in slow] != [s.arrival_s for s in fast]
    strip = [(s.task_class, s.num_prompt_tokens, s.output_tokens, s.prompt_segments) for s in slow]
    assert strip == [(s.task_class, s.num_prompt_tokens, s.output_tokens, s.prompt_segments) for s in fast]


def test_changing_output_distribution_keeps_arrivals_and_prompts():
    a = build_workload(workload(), seed=2)
    b = build_workload(workload(classes=[agent(0.7, output_tokens={"fixed": 9}), chat(0.3)]), seed=2)
    assert [(s.arrival_s, s.prompt_segments) for s in a if s.task_class == "agent"] == \
        [(s.arrival_s, s.prompt_segments) for s in b if s.task_class == "agent"]
    assert {s.output_tokens for s in b if s.task_class == "agent"} == {9}


def test_adding_a_class_does_not_reshuffle_arrivals():
    a = build_workload(workload(classes=[agent(1.0)]), seed=4)
    b = build_workload(workload(classes=[agent(0.5), agent(0.5, name="b")]), seed=4)
    assert [s.arrival_s for s in a] == [s.arrival_s for s in b]


def test_lognormal_median_and_clipping():
    c = agent(output_tokens={"lognormal": {"median": 150, "sigma": 0.6, "max": 400}})
    specs = build_workload(workload(classes=[c], num_requests=20000, duration_s=None), seed=0)
    out = np.array([s.output_tokens for s in specs])
    # sample median: standard error about 1.25 * sigma * median / sqrt(n) = 0.8 tokens; tolerance 3%
    assert np.median(out) == pytest.approx(150, rel=0.03)
    assert out.max() == 400 and out.min() >= 1
    suffix = np.array([s.num_prompt_tokens - 4500 for s in specs])
    assert np.median(suffix) == pytest.approx(200, rel=0.03)


def test_uniform_and_normal_lengths():
    c = agent(output_tokens={"normal": {"mean": 300, "std": 50, "min": 100}},
              prompt={"suffix_tokens": {"uniform": [5, 9]}})
    specs = build_workload(workload(classes=[c], num_requests=5000, duration_s=None), seed=0)
    out = np.array([s.output_tokens for s in specs])
    assert out.mean() == pytest.approx(300, rel=0.02) and out.min() >= 100
    assert {s.num_prompt_tokens for s in specs} == {5, 6, 7, 8, 9}


def test_class_shares():
    classes = [agent(0.6), agent(0.3, name="b"), agent(0.1, name="c")]
    specs = build_workload(workload(classes=classes, num_requests=10000, duration_s=None), seed=5)
    counts = collections.Counter(s.task_class for s in specs)
    # binomial sd at n=10000 is at most 0.005; tolerance 0.02
    for name, share in [("agent", 0.6), ("b", 0.3), ("c", 0.1)]:
        assert counts[name] / 10000 == pytest.approx(share, abs=0.02)


def test_prefix_groups_share_system_prompt():
    specs = build_workload(workload(classes=[agent()]), seed=0)
    by_group = collections.defaultdict(list)
    for s in specs:
        key, n = s.prompt_segments[0]
        assert key[:2] == ("sys", "agent") and n == 3000
        by_group[key].append(s)
        fkey, fn = s.prompt_segments[1]
        assert fkey[:2] == ("fewshot", "agent") and fkey[2] in range(3) and fn == 1500
        assert s.prompt_segments[-1][0] == ("u", s.request_id)
    assert set(by_group) == {("sys", "agent", g) for g in range(4)}
    # a real Request shares block identities within the group's system prompt and not beyond
    a, b = by_group[("sys", "agent", 0)][:2]
    ra, rb = a.make_request(), b.make_request()
    bs = 16
    for end in range(bs, 3000 - 3000 % bs + 1, bs):
        assert ra.prefix_identity(end, bs, None) == rb.prefix_identity(end, bs, None)
    other = by_group[("sys", "agent", 1)][0].make_request()
    assert ra.prefix_identity(bs, bs, None) != other.prefix_identity(bs, bs, None)


def test_zipf_group_popularity():
    c = agent(prompt={"shared_prefix_tokens": 100, "num_prefix_groups": 10, "group_zipf_s": 1.5,
                      "suffix_tokens": 10})
    specs = build_workload(workload(classes=[c], num_requests=5000, duration_s=None), seed=0)
    counts = collections.Counter(s.prompt_segments[0][0][2] for s in specs)
    w = 1 / np.arange(1, 11) ** 1.5
    assert counts[0] / 5000 == pytest.approx(w[0] / w.sum(), abs=0.03)
    assert counts[0] > counts[1] > counts[5]


def test_timestamp_header_first_and_unique():
    specs = build_workload(workload(prefix_header="timestamp", header_tokens=32), seed=0)
    check_well_formed(specs)
    heads = [s.prompt_segments[0] for s in specs]
    assert all(k == ("ts", s.request_id) and n == 32 for (k, n), s in zip(heads, specs))
    assert len({k for k, _ in heads}) == len(specs)
    assert all(sum(1 for k, _ in s.prompt_segments if k[0] == "ts") == 1 for s in specs)
    plain = build_workload(workload(), seed=0)
    assert [s.num_prompt_tokens + 32 for s in plain] == [s.num_prompt_tokens for s in specs]
    # no block can be shared: the very first block already differs
    a, b = specs[0].make_request(), specs[1].make_request()
    assert a.prefix_identity(16, 16, None) != b.prefix_identity(16, 16, None)


def test_shuffled_sections():
    c = agent(prompt={"shared_prefix_tokens": 1003, "sections": 4, "suffix_tokens": 10})
    specs = build_workload(workload(classes=[c], prefix_header="shuffled_sections", num_requests=200,
                                    duration_s=None), seed=0)
    orders = set()
    for s in specs:
        secs = s.prompt_segments[:4]
        assert sorted(k[3] for k, _ in secs) == [0, 1, 2, 3]
        assert sum(n for _, n in secs) == 1003
        assert dict((k[3], n) for k, n in secs) == {0: 251, 1: 251, 2: 251, 3: 250}
        orders.add(tuple(k[3] for k, _ in secs))
    assert len(orders) > 12  # of 24 permutations


def test_multi_turn_sessions_open_loop():
    specs = build_workload(workload(classes=[chat()], duration_s=600), seed=3)
    check_well_formed(specs)
    sessions = collections.defaultdict(list)
    for s in specs:
        assert s.session_id is not None and s.priority == 1
        sessions[s.session_id].append(s)
    assert sorted(sessions) == list(range(len(sessions)))
    multi = 0
    for turns in sessions.values():
        assert [t.turn for t in turns] == list(range(len(turns)))
        assert len(turns) <= 5  # uniform [2, 5] is inclusive
        for prev, cur in zip(turns, turns[1:]):
            multi += 1
            n = len(prev.prompt_segments)
            assert cur.prompt_segments[:n] == prev.prompt_segments
            assert cur.prompt_segments[n] == (output_segment_key(prev.request_id), prev.output_tokens)
            assert cur.prompt_segments[n + 1][0] == ("u", cur.request_id)
            assert cur.arrival_s >= prev.arrival_s
    assert multi > 100
    # mean turns of uniform[2, 5] is 3.5 minus sessions cut by the duration
    assert 2.5 < len(specs) / len(sessions) <= 3.5


def test_multi_turn_with_timestamp_header_replaces_header():
    specs = build_workload(workload(classes=[chat()], prefix_header="timestamp"), seed=3)
    by_session = collections.defaultdict(list)
    for s in specs:
        by_session[s.session_id].append(s)
    prev, cur = next(v for v in by_session.values() if len(v) > 1)[:2]
    assert cur.prompt_segments[0][0] == ("ts", cur.request_id)
    assert cur.prompt_segments[1:len(prev.prompt_segments)] == prev.prompt_segments[1:]


def test_multi_turn_num_requests_is_exact_prefix():
    small = build_workload(workload(classes=[agent(0.5), chat(0.5)], duration_s=None, num_requests=300), seed=9)
    large = build_workload(workload(classes=[agent(0.5), chat(0.5)], duration_s=None, num_requests=600), seed=9)
    check_well_formed(small)
    assert len(small) == 300
    assert small == large[:300]


@pytest.mark.parametrize("arrivals", [{"process": "poisson", "rate_per_s": 8},
                                      {"process": "poisson", "rate_per_s": "inf"}])
def test_single_turn_num_requests_is_exact_prefix(arrivals):
    """Single-turn requests stop being drawn at num_requests (no chunk's worth of extra draws): the first ones
    of a longer workload, whatever the count, and across an arrival chunk's end."""
    classes = [agent(0.7), agent(0.3, name="other")]
    large = build_workload(workload(classes=classes, arrivals=arrivals, duration_s=None, num_requests=5000), seed=3)
    for n in (1, 7, 4096, 4097):
        small = build_workload(workload(classes=classes, arrivals=arrivals, duration_s=None, num_requests=n), seed=3)
        check_well_formed(small)
        assert small == large[:n], n


def test_empirical_lengths(tmp_path):
    p = tmp_path / "lens.csv"
    p.write_text("a,b\n" + "".join(f"{v},{v * 2}\n" for v in (10, 20, 30)))
    c = agent(output_tokens={"empirical": {"path": str(p), "column": "b"}})
    specs = build_workload(workload(classes=[c], num_requests=300, duration_s=None), seed=0)
    assert {s.output_tokens for s in specs} == {20, 40, 60}
    p.write_text("a,b\n1,0\n")
    with pytest.raises(TwinInputError, match=r"lens.csv:2: column 'b' is 0, but workload.classes\[0\]"
                                             r".output_tokens must be >= 1"):
        build_workload(workload(classes=[c], num_requests=3, duration_s=None), seed=0)
    c = agent(output_tokens={"empirical": {"path": str(tmp_path / "nope.csv"), "column": "b"}})
    with pytest.raises(TwinInputError, match=r"workload.classes\[0\].output_tokens.empirical.path: file not found"):
        build_workload(workload(classes=[c], num_requests=3, duration_s=None), seed=0)


# ---- closed loop ---------------------------------------------------------------------------------------------
def closed(**over):
    d = {"arrivals": {"process": "closed_loop", "concurrency": 4, "think_time_s": {"fixed": 2.0}},
         "num_requests": 20, "classes": [agent()]}
    d.update(over)
    return d


def drive(w, finish_after=1.0):
    """A toy engine: every request takes ``finish_after`` seconds; users are served in time order."""
    import heapq
    out, heap = [], []
    for u in range(w.concurrency):
        s = w.next_request(u, 0.0)
        if s is not None:
            out.append(s)
            heapq.heappush(heap, (s.arrival_s + finish_after, s.request_id, u))
    while heap:
        t, _, u = heapq.heappop(heap)
        s = w.next_request(u, t)
        if s is not None:
            out.append(s)
            heapq.heappush(heap, (s.arrival_s + finish_after, s.request_id, u))
    return out


def test_closed_loop_basics():
    w = build_workload(closed(), seed=0)
    assert isinstance(w, ClosedLoopWorkload) and w.concurrency == 4
    specs = drive(w)
    assert len(specs) == 20 and [s.request_id for s in specs] == list(range(20))
    assert [s.arrival_s for s in specs[:4]] == [0.0] * 4
    assert specs[4].arrival_s == pytest.approx(3.0)  # finished at 1.0, thinks 2.0
    assert w.next_request(0, 100.0) is None
    w.reset()
    assert drive(w) == specs
    assert drive(build_workload(closed(), seed=0)) == specs
    with pytest.raises(ValueError):
        w.next_request(4, 0.0)


def test_closed_loop_duration_stop():
    specs = drive(build_workload(closed(num_requests=None, duration_s=10.0), seed=0))
    assert specs and all(s.arrival_s < 10.0 for s in specs)
    assert len(specs) == 4 * 4  # arrivals at 0, 3, 6, 9 for each user


def test_closed_loop_same_lengths_as_open_loop():
    opened = build_workload(workload(classes=[agent()], num_requests=20, duration_s=None), seed=0)
    shut = drive(build_workload(closed(), seed=0))
    assert [(s.num_prompt_tokens, s.output_tokens) for s in opened] == \
        [(s.num_prompt_tokens, s.output_tokens) for s in shut]


def test_closed_loop_multi_turn():
    w = build_workload(closed(classes=[chat()], num_requests=40,
                              arrivals={"process": "closed_loop", "concurrency": 2, "think_time_s": 0.5}), seed=1)
    specs = drive(w, finish_after=2.0)
    by_session = collections.defaultdict(list)
    for s in specs:
        by_session[s.session_id].append(s)
    for turns in by_session.values():
        assert [t.turn for t in turns] == list(range(len(turns)))
        for prev, cur in zip(turns, turns[1:]):
            n = len(prev.prompt_segments)
            assert cur.prompt_segments[:n] == prev.prompt_segments
            assert cur.prompt_segments[n] == (output_segment_key(prev.request_id), prev.output_tokens)
            assert cur.arrival_s > prev.arrival_s + 2.0  # finished, then the gap
    assert any(len(v) > 1 for v in by_session.values())
