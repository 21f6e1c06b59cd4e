"""Hostile values in the new result layouts (AIPerf records and aggregate, inference-perf's current stage files)
and in /metrics dumps: a reader either reads the file or refuses it in one line naming the file; never a
traceback (any other exception fails the test)."""

from __future__ import annotations

import copy
import json
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.client_layouts import simulate_run, write_aiperf, write_inference_perf
from twin.errors import TwinInputError
from twin.fitting.readers import read_results
from twin.fitting.readers.spec_counters import read_acceptance

VALUES = [-1, 0, 1, 2.5, 10**30, 2**63, 1e308, math.inf, -math.inf, math.nan, "", "abc", "1e3", True, None, [],
          {}, [1, 2], {"a": 1}, "ÿ\u2028x"]
REQS = simulate_run(None, 4, 24, 64, 8)


def _paths(doc, prefix=()):
    """Every (path to a leaf or container) in ``doc``."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:3]):
            yield from _paths(v, prefix + (i,))


def _mutate(doc, path, value):
    doc = copy.deepcopy(doc)
    if not path:
        return value
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = copy.deepcopy(value)
    return doc


def _one_line_or_ok(fn, path) -> None:
    try:
        fn()
    except TwinInputError as exc:
        assert "\n" not in str(exc) and str(path.name) in str(exc), str(exc)


def _aiperf_folder(tmp):
    return write_aiperf(tmp, REQS, concurrency=4, rate=None)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_aiperf_records_and_aggregate(tmp_path_factory, data):
    folder = _aiperf_folder(tmp_path_factory.mktemp("a"))
    which = data.draw(st.sampled_from(["profile_export.jsonl", "profile_export_aiperf.json"]))
    path = folder / which
    if which.endswith(".jsonl"):
        lines = path.read_text().splitlines()
        doc = json.loads(lines[1])
        p = data.draw(st.sampled_from(list(_paths(doc))))
        lines[1] = json.dumps(_mutate(doc, p, data.draw(st.sampled_from(VALUES))))
        path.write_text("\n".join(lines))
    else:
        doc = json.loads(path.read_text())
        p = data.draw(st.sampled_from(list(_paths(doc))))
        path.write_text(json.dumps(_mutate(doc, p, data.draw(st.sampled_from(VALUES)))))
    _one_line_or_ok(lambda: read_results(path), path)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_current_inference_perf_stage(tmp_path_factory, data):
    folder = write_inference_perf(tmp_path_factory.mktemp("i"), [(4.0, REQS)], output_len=8)
    path = folder / "stage_0_lifecycle_metrics.json"
    doc = json.loads(path.read_text())
    p = data.draw(st.sampled_from(list(_paths(doc))))
    path.write_text(json.dumps(_mutate(doc, p, data.draw(st.sampled_from(VALUES)))))
    _one_line_or_ok(lambda: read_results(path), path)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(value=st.sampled_from(["1e3", "-1", "nan", "inf", "x", "", "1 2 3", "1e400", "0x10"]),
       label=st.sampled_from(['position="0"', 'position="-1"', 'position="99"', "", 'position="a"']),
       name=st.sampled_from(["vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_accepted_tokens_per_pos_total",
                             "vllm:spec_decode_num_drafts"]))
def test_metrics_dump_lines(tmp_path_factory, value, label, name):
    path = tmp_path_factory.mktemp("m") / "m.txt"
    path.write_text('vllm:spec_decode_num_drafts_total{engine="0"} 100\n'
                    'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 50\n'
                    f'{name}{{engine="1",{label}}} {value}\n')
    _one_line_or_ok(lambda: read_acceptance(path), path)
