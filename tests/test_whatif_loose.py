"""The what-if table's loose section (issue 33, round 22, 33zA): benchmarks/whatif_export.py --loose writes the loose
pairs' cells apart from the strict ones (schema 2), twin/results/whatif_bands.py validates them, and
twin/results/whatif_view.py shows them only for a knob with no strict cell, marked as loose."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmark_module import load_benchmark
from twin.errors import TwinInputError
from twin.results import whatif_bands as wb
from twin.results.whatif_view import whatif_doc, whatif_markdown
from twin.scenario import Scenario

we = load_benchmark("whatif_export")
ROOT = Path(__file__).resolve().parent.parent
METRICS = wb.METRICS


def cell(n: int, size: float = 0.05, signed: float = -0.02, right: float = 1.0) -> dict:
    return {"n": n, "ratio_abs_median": size, "ratio_signed_median": signed, "abs_error_median": 0.1,
            "direction_judged": n, "direction_right": right}


def cells(n: int, size: float = 0.05) -> dict:
    return {m: cell(n, size) for m in METRICS}


STRICT = {"GPU": {"weights": cells(15), "kv": cells(2)}, "family": {"weights": cells(15)}}
LOOSE = {"GPU": {"weights": cells(105, 0.1), "kv": cells(16, 0.2)},
         "family": {"weights": cells(105, 0.1), "kv": cells(16, 0.3), "gpu": cells(15, 0.15)}}


def exported(loose: dict | None = LOOSE, ignore: list | None = ["release", "server"]) -> dict:  # noqa: B006
    return we.export(STRICT, commit="cdbc430", date="2026-12-06", command="c", loose=loose, ignore=ignore)


def test_the_loose_cells_are_a_separate_section_and_the_strict_ones_unchanged():
    doc = exported()
    assert doc["schema"] == "twin.whatif_bands/2"
    assert doc["kinds"] == {"GPU": {"weights": cells(15)}, "family": {"weights": cells(15)}}   # kv: 2 < 3
    assert doc["loose"] == {"ignore": ["release", "server"], "kinds": LOOSE}
    assert doc["kinds"] == exported(None, None)["kinds"] and exported(None, None)["loose"] is None
    with pytest.raises(TwinInputError, match="needs the attributes"):
        exported(LOOSE, None)


@pytest.mark.parametrize("change, message", [
    (lambda d: d.pop("loose"), "loose: missing key"),
    (lambda d: d["loose"].pop("ignore"), "loose.ignore: missing key"),
    (lambda d: d["loose"].update(extra=1), "loose.extra: unknown key"),
    (lambda d: d["loose"].update(ignore=[]), r"loose.ignore is \[\], not a list of distinct release, server"),
    (lambda d: d["loose"].update(ignore=["release", "release"]), "loose.ignore is"),
    (lambda d: d["loose"].update(ignore=["model"]), "loose.ignore is"),
    (lambda d: d["loose"].update(ignore="release"), "loose.ignore is"),
    (lambda d: d["loose"].update(ignore=[["x"]]), "loose.ignore is"),
    (lambda d: d.update(loose=[]), "loose is list, not an object"),
    (lambda d: d["loose"]["kinds"].update(source={}), "loose.kinds.source: not a fold kind"),
    (lambda d: d["loose"]["kinds"]["GPU"].update(tp={}), "loose.kinds.GPU.tp: not a knob"),
    (lambda d: d["loose"]["kinds"]["GPU"]["kv"]["mean_tpot_ms"].update(n=2), r"loose.kinds.GPU.kv.mean_tpot_ms.n is 2"),
    (lambda d: d.update(schema="twin.whatif_bands/1"), "loose: not a key of schema 'twin.whatif_bands/1'"),
    (lambda d: d.update(schema="twin.whatif_bands/3"), "schema is 'twin.whatif_bands/3', not"),
])
def test_a_bad_loose_section_is_one_line_naming_the_field(change, message):
    doc = copy.deepcopy(exported())
    change(doc)
    with pytest.raises(TwinInputError, match=message):
        wb.check_whatif(doc, "f.json")


def test_a_schema_one_file_still_reads_and_the_packaged_file_is_schema_two():
    old = copy.deepcopy(exported(None, None))
    old["schema"] = "twin.whatif_bands/1"
    del old["loose"]
    assert wb.check_whatif(old) is old
    packaged = wb.load_whatif()
    assert packaged["schema"] == wb.SCHEMA and packaged["loose"]["ignore"] == ["release", "server"]
    assert {k: sorted(v) for k, v in packaged["loose"]["kinds"].items()} == {
        "GPU": ["concurrency", "kv", "layout", "lengths", "rate", "weights"],
        "family": ["concurrency", "gpu", "kv", "layout", "lengths", "rate", "weights"]}
    assert packaged["kinds"]["GPU"]["weights"]["mean_tpot_ms"]["n"] == 15       # the strict cells as they were
    assert packaged["loose"]["kinds"]["family"]["gpu"]["mean_tpot_ms"]["n"] == 15


BASE = {"name": "w", "deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b", "tensor_parallel_size": 1},
        "workload": {"arrivals": {"process": "closed_loop", "concurrency": 8}, "num_requests": 16,
                     "classes": [{"name": "c", "share": 1.0, "prompt": {"suffix_tokens": 256}, "output_tokens": 32}]}}
VARIANTS = {"fp8kv": {"deployment": {"kv_dtype": "fp8"}}, "b200": {"deployment": {"gpu": "B200"}},
            "fp8w": {"deployment": {"weight_dtype": "fp8"}}, "v": {"server": {"vllm_version": "0.15.1"}}}


def _runs() -> dict:
    sc = Scenario({**BASE, "variants": VARIANTS}, source="w.yaml")
    return {name: {"body": sc.body(name), "deployment": None} for name in sc.names()}


def test_a_knob_without_a_strict_cell_shows_the_loose_one_marked():
    view = whatif_doc(_runs(), exported())
    assert view["lines"] == [
        "What-if band: the twin's error on the predicted change from baseline, held out",
        "  change    pairs  TTFT mean    TPOT         E2E mean     throughput   right way",
        "  KV format: fp8kv (loose: vLLM release and server settings may differ too)",
        "    GPU     16     20.0 (-2.0)  20.0 (-2.0)  20.0 (-2.0)  20.0 (-2.0)  100, 100%",
        "    family  16     30.0 (-2.0)  30.0 (-2.0)  30.0 (-2.0)  30.0 (-2.0)  100, 100%",
        "  GPU: b200 (loose: vLLM release and server settings may differ too)",
        "    family  15     15.0 (-2.0)  15.0 (-2.0)  15.0 (-2.0)  15.0 (-2.0)  100, 100%",
        "  weight format: fp8w",                                    # a strict cell: never the loose 105 pairs
        "    GPU     15     5.0 (-2.0)   5.0 (-2.0)   5.0 (-2.0)   5.0 (-2.0)   100, 100%",
        "    family  15     5.0 (-2.0)   5.0 (-2.0)   5.0 (-2.0)   5.0 (-2.0)   100, 100%",
        "  v: no held-out evidence for a change of vLLM release (under 3 pairs)",
        "  median |error of the predicted change| (signed), %; GPU / family held out;",
        "  right way: pairs with the measured direction (TTFT, TPOT); report cdbc430"]
    assert [(k["knob"], k["pairing"], k["evidence"] and list(k["evidence"])) for k in view["knobs"]] == [
        ("kv", "loose", ["GPU", "family"]), ("gpu", "loose", ["family"]), ("weights", "strict", ["GPU", "family"]),
        ("release", None, None)]
    assert view["loose_ignore"] == ["release", "server"]
    md = whatif_markdown(view)
    assert "| KV format (loose: vLLM release and server settings may differ too) | GPU | 16 | 20.0 (-2.0) |" in md
    assert "| weight format | GPU | 15 | 5.0 (-2.0) |" in md


def test_without_a_loose_section_the_knob_has_no_band():
    view = whatif_doc(_runs(), exported(None, None))
    assert view["loose_ignore"] is None
    assert "  fp8kv: no held-out evidence for a change of KV format (under 3 pairs)" in view["lines"]
    assert "  b200: no held-out evidence for a change of GPU (under 3 pairs)" in view["lines"]


def _whatif_json(path: Path, ignore: list, summary: dict | None = None, **over) -> Path:
    doc = {"report": "wide.json", "floor_scale": 1.0, "kinds": ["source", "GPU", "family"], "ignore": ignore,
           "summary": summary if summary is not None else (LOOSE if ignore else STRICT), **over}
    path.write_text(json.dumps(doc))
    return path


def _export_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "benchmarks/whatif_export.py", *args, "--report-commit", "cdbc430",
                           "--report-date", "2026-12-06", "--command", "c", "--out", str(tmp_path / "out.json")],
                          cwd=ROOT, capture_output=True, text=True)


def test_the_exporter_cli_checks_which_table_is_which(tmp_path):
    strict = _whatif_json(tmp_path / "s.json", [])
    loose = _whatif_json(tmp_path / "l.json", ["release", "server"])
    r = _export_cli(tmp_path, str(strict), "--loose", str(loose))
    assert r.returncode == 0, r.stderr
    assert wb.load_whatif(tmp_path / "out.json") == exported()
    assert "loose family  weights (105 pairs), kv (16 pairs), gpu (15 pairs)" in r.stdout
    for args, message in [
            ((str(loose),), "made with --ignore release,server (loose pairs): give the strict table first"),
            ((str(strict), "--loose", str(strict)), "made without --ignore (strict pairs), not a loose table"),
            ((str(strict), "--loose", str(_whatif_json(tmp_path / "o.json", ["release"], floor_scale=2.0))),
             "its floor_scale is 2.0, the strict table's 1.0"),
            ((str(_whatif_json(tmp_path / "b.json", ["model"])),), "ignore is ['model'], not a list of release")]:
        r = _export_cli(tmp_path, *args)
        assert r.returncode != 0 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
