"""benchmarks/llama_b200_tp_residual.py (issue 33, round 16): the a + b / TP split of the twin's error is exact on
exact data, and the stream fraction is bytes over time and bandwidth."""

import pytest

from benchmarks.llama_b200_tp_residual import fixed_and_per_tp, stream_fraction


def test_fixed_and_per_tp_recovers_both_parts_exactly():
    a, b, rms = fixed_and_per_tp([(tp, -1.3 + 3.25 / tp) for tp in (1, 2, 4, 8) for _ in range(2)])
    assert (a, b) == pytest.approx((-1.3, 3.25), abs=1e-12) and rms < 1e-12


def test_fixed_and_per_tp_needs_two_tp_sizes():
    with pytest.raises(ValueError, match="two TP sizes"):
        fixed_and_per_tp([(1, 2.0), (1, 2.1)])


def test_stream_fraction():
    assert stream_fraction(70.56e9, 11.31e-3, 8e12) == pytest.approx(70.56e9 / (11.31e-3 * 8e12), rel=1e-12)
    with pytest.raises(ValueError):
        stream_fraction(1e9, 0.0, 8e12)


def test_set_values_takes_fit_keys_in_model_units_and_rejects_the_rest():
    from benchmarks.llama_b200_tp_residual import set_values
    assert set_values(["allreduce_latency_s@blackwell=19e-6", "memory_efficiency@blackwell=0.785"]) == {
        "allreduce_latency_s@blackwell": pytest.approx(19e-6), "memory_efficiency@blackwell": 0.785}
    assert set_values(["unsharded_allreduce_link_s@blackwell=0"]) == {"unsharded_allreduce_link_s@blackwell": 0.0}
    with pytest.raises(SystemExit, match="neither a fit key"):
        set_values(["no_such_term=1"])
    from twin.errors import TwinInputError
    with pytest.raises(TwinInputError, match="expected a finite number"):
        set_values(["memory_efficiency@blackwell=fast"])


def test_load_rows_reads_what_simulate_writes_and_rejects_a_broken_file_in_one_line(tmp_path):
    import json
    from twin.errors import TwinInputError
    from benchmarks import llama_b200_tp_residual as r
    row = {"tp": 2, "fmt": "fp8", "isl": 1024, "osl": 1024, "conc": 4, "mtpot": 12.5, "ptpot": 11.0}
    good = tmp_path / "rows.json"
    good.write_text(json.dumps([row]))
    assert r.load_rows(good) == [row]
    for bad, message in (([], "not a non-empty list"), ([{**row, "extra": 1}], "row 0 must be an object"),
                         ([{**row, "tp": 0}], "row 0 tp = 0, expected a positive int"),
                         ([{**row, "tp": 1.5}], "row 0 tp = 1.5, expected a positive int"),
                         ([{**row, "fmt": ""}], "row 0 fmt = '', expected a positive format name")):
        f = tmp_path / "bad.json"
        f.write_text(json.dumps(bad))
        with pytest.raises(TwinInputError, match=message):
            r.load_rows(f)
    with pytest.raises(TwinInputError, match="no such file"):
        r.load_rows(tmp_path / "absent.json")
