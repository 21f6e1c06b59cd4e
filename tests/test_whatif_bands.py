"""twin/results/whatif_bands.py and benchmarks/whatif_export.py: the packaged per-knob what-if table (issue 33,
round 22): the exporter keeps the cells with enough pairs, the loader refuses a bad file in one line."""

from __future__ import annotations

import copy
import json

import pytest

from tests.benchmark_module import load_benchmark
from twin.errors import TwinInputError
from twin.results import whatif_bands as wb

we = load_benchmark("whatif_export")
wp = load_benchmark("whatif_pairs")
TTFT, TPOT = "mean_ttft_ms", "mean_tpot_ms"


def cell(n: int, size: float = 0.05, signed: float = -0.02, judged: int | None = None, right: float | None = 1.0):
    judged = n if judged is None else judged
    return {"n": n, "ratio_abs_median": size, "ratio_signed_median": signed, "abs_error_median": 0.1,
            "direction_judged": judged, "direction_right": right if judged else None, "cancels": 1, "compounds": 0}


TABLE = {"GPU": {"concurrency": {TTFT: cell(5), TPOT: cell(2)}, "layout": {TTFT: cell(1)}},
         "family": {"rate": {TTFT: cell(8, judged=0)}}, "source": {"rate": {TTFT: cell(9)}}}


def exported(**over) -> dict:
    return we.export(TABLE, commit="a781b6f", date="2026-12-06", command="python benchmarks/whatif_fidelity.py x",
                     **over)


def test_the_export_keeps_cells_with_enough_pairs_and_the_gpu_and_family_kinds():
    doc = exported()
    assert doc["schema"] == wb.SCHEMA and list(doc["kinds"]) == ["GPU", "family"]
    assert doc["kinds"]["GPU"] == {"concurrency": {TTFT: {k: cell(5)[k] for k in wb.CELL_KEYS}}}   # TPOT: 2 < 3
    assert doc["kinds"]["family"]["rate"][TTFT]["direction_right"] is None
    assert exported(min_pairs=1)["kinds"]["GPU"]["layout"][TTFT]["n"] == 1
    with pytest.raises(TwinInputError, match="no GPU pairs"):
        we.export({"family": {}}, commit="a781b6f", date="2026-12-06", command="c")


def test_the_packaged_knobs_are_the_pairs_knobs():
    assert wp.KNOBS == wb.KNOBS and tuple(k for k, _ in wp.METRICS) == wb.METRICS


@pytest.mark.parametrize("path, value, message", [
    (("schema",), "twin.whatif_bands/0", "schema is"),
    (("report", "commit"), "", "report.commit"),
    (("min_pairs",), 0, "min_pairs is 0"),
    (("kinds", "source"), {}, "not a fold kind"),
    (("kinds", "GPU", "tp"), {}, "not a knob"),
    (("kinds", "GPU", "concurrency", "p50"), cell(5), "not a metric"),
    (("kinds", "GPU", "concurrency", TTFT, "n"), 2, "not a whole number >= 3"),
    (("kinds", "GPU", "concurrency", TTFT, "ratio_signed_median"), 0.5, "above ratio_abs_median"),
    (("kinds", "GPU", "concurrency", TTFT, "ratio_abs_median"), float("nan"), "not a finite number"),
    (("kinds", "GPU", "concurrency", TTFT, "direction_judged"), 9, "above n"),
    (("kinds", "GPU", "concurrency", TTFT, "direction_right"), 1.5, "outside"),
    (("kinds", "GPU", "concurrency", TTFT, "extra"), 1, "unknown key"),
])
def test_a_bad_file_is_one_line_naming_the_field(path, value, message):
    doc = copy.deepcopy(exported())
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(TwinInputError, match=message):
        wb.check_whatif(doc, "f.json")


def test_a_missing_key_and_an_unjudged_direction():
    doc = copy.deepcopy(exported())
    del doc["kinds"]["GPU"]["concurrency"][TTFT]["abs_error_median"]
    with pytest.raises(TwinInputError, match="abs_error_median: missing key"):
        wb.check_whatif(doc)
    doc = copy.deepcopy(exported())
    doc["kinds"]["family"]["rate"][TTFT]["direction_right"] = 0.5
    with pytest.raises(TwinInputError, match="must be null"):
        wb.check_whatif(doc)


def test_load_round_trip_and_the_packaged_file(tmp_path):
    path = tmp_path / "w.json"
    path.write_text(json.dumps(exported()))
    assert wb.load_whatif(path) == exported()
    with pytest.raises(TwinInputError, match="no such file"):
        wb.load_whatif(tmp_path / "none.json")
    if wb.DATA_FILE.is_file():                   # the packaged table, once exported, is valid
        assert wb.load_whatif()["schema"] == wb.SCHEMA


restore_flags = load_benchmark("fold_report").restore_flags


def test_the_link_prior_the_json_stores_as_a_bare_number_gets_its_type_back():
    from twin.cost.unsharded_decode import EXCHANGE_PRIOR_LINK_S, ModelledLinkS
    name = "unsharded_allreduce_link_s@blackwell"
    value = float(EXCHANGE_PRIOR_LINK_S)
    fold = {"held_out": "B200", "plan": [f"{name}: reset to its stated prior (GENERATION_TERMS; evidence: ...)"]}
    out = restore_flags(fold, {name: value, "step_overhead_s": value})
    assert isinstance(out[name], ModelledLinkS) and out[name] == value
    assert type(out["step_overhead_s"]) is float                     # another term of the same value: untouched
    assert type(restore_flags({"held_out": "x", "plan": []}, {name: value})[name]) is float   # not reset: a reading
    assert type(restore_flags(fold, {name: 6e-6})[name]) is float                             # not the model's value
    assert type(restore_flags({"held_out": "B200", "plan": [3, None]}, {name: value})[name]) is float  # a hostile plan
