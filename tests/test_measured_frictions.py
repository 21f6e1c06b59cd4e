"""Measured results, the last frictions (docs/first-hour.md "Bringing your own measurements"): `twin diagnose
--run NAME` picks one run of a file of several; the twin's own ``--json`` carries the server it ran so `twin
calibrate --from-results` reads it back with no other option; a server profile fitted on another model says so;
`twin protocol`'s baseline verdict and the engine calibration's table words."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tests.test_diagnose_formats import REQS, _bench, _table_rows
from twin.analysis.measured import load_measured
from twin.cli.main import main
from twin.errors import TwinInputError


def _sweep(tmp_path, suffix=".jsonl"):
    """The six requests twice: once at concurrency 1, once at 2 (runs sweep/c1 and sweep/c2)."""
    rows = [{**row, "concurrency": c} for c in (1, 2) for row in _table_rows()]
    path = tmp_path / f"sweep{suffix}"
    if suffix == ".csv":
        cols = list(rows[0])
        path.write_text(",".join(cols) + "\n" + "".join(
            ",".join("" if row[c] is None else repr(row[c]) for c in cols) + "\n" for row in rows))
    else:
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_run_picks_one_run_of_a_sweep(tmp_path, suffix):
    path = _sweep(tmp_path, suffix)
    with pytest.raises(TwinInputError) as exc:
        load_measured(path)
    assert str(exc.value) == (f"{path}: holds 2 runs (sweep/c1, sweep/c2); twin diagnose reads one run: pick one "
                              f"with --run NAME (twin calibrate --from-results reads them all)")
    m1, m2 = load_measured(path, "sweep/c1"), load_measured(path, "sweep/c2")
    ok = sum(r.ok for r in REQS)
    assert (len(m1), len(m2)) == (ok, ok)
    assert (m1.max_concurrency, m2.max_concurrency) == (1, 2)


def test_a_wrong_run_name_lists_the_names_and_suggests_one(tmp_path):
    path = _sweep(tmp_path)
    with pytest.raises(TwinInputError) as exc:
        load_measured(path, "Sweep/C2")
    assert str(exc.value) == (f"--run Sweep/C2: not a run in {path} (it holds sweep/c1, sweep/c2); did you mean "
                              f"'sweep/c2' or 'sweep/c1'?")
    with pytest.raises(TwinInputError) as exc:
        load_measured(path, "zzz")
    assert str(exc.value) == f"--run zzz: not a run in {path} (it holds sweep/c1, sweep/c2)"


def test_run_on_a_file_of_one_run(tmp_path):
    bench = _bench(tmp_path / "bench.json")
    with pytest.raises(TwinInputError) as exc:
        load_measured(bench, "other")
    assert str(exc.value) == f"--run other: {bench} holds one run, bench; leave --run out (or give that name)"
    assert len(load_measured(bench, "bench")) == len(load_measured(bench))
    table = tmp_path / "requests.jsonl"
    table.write_text("".join(json.dumps(row) + "\n" for row in _table_rows()))
    with pytest.raises(TwinInputError) as exc:
        load_measured(table, "c2")
    assert str(exc.value) == f"--run c2: {table} holds one run, requests; leave --run out (or give that name)"


def test_diagnose_run_option_on_the_cli(tmp_path):
    path = _sweep(tmp_path)
    res = CliRunner().invoke(main, ["diagnose", str(path), "--run", "sweep/c2"])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[0] == f"{path.name}: {sum(r.ok for r in REQS)} completed requests"
    res = CliRunner().invoke(main, ["diagnose", str(path), "--run", "swep/c1"])
    assert res.exit_code == 2
    assert "--run swep/c1: not a run in" in res.output and "did you mean 'sweep/c1' or 'sweep/c2'?" in res.output
