"""The what-if band under ``twin compare`` (twin/results/whatif_view.py; issue 33, round 22): which knobs a variant
changes, the exact printed block on a hand-built table, the packaged table through the CLI and its ``--json`` key,
and ``twin run`` (several variants) printing none of it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from twin.cli.main import main
from twin.results.whatif_bands import check_whatif
from twin.results.whatif_view import changed_knobs, knob_of, whatif_doc
from twin.scenario import Scenario

BASE = {"name": "w", "deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b", "tensor_parallel_size": 1},
        "workload": {"arrivals": {"process": "closed_loop", "concurrency": 8}, "num_requests": 16,
                     "classes": [{"name": "c", "share": 1.0, "prompt": {"suffix_tokens": 256}, "output_tokens": 32}]}}
VARIANTS = {"tp2": {"deployment": {"tensor_parallel_size": 2}},
            "c32": {"workload": {"arrivals": {"concurrency": 32}}},
            "seqs4": {"server": {"max_num_seqs": 4}}}


def _cell(n: int, size: float, signed: float, right: float | None) -> dict:
    return {"n": n, "ratio_abs_median": size, "ratio_signed_median": signed, "abs_error_median": 0.1,
            "direction_judged": 0 if right is None else n, "direction_right": right}


def _table() -> dict:
    layout = {"mean_ttft_ms": _cell(200, 0.081, 0.059, 0.84), "mean_tpot_ms": _cell(207, 0.029, 0.0, 0.865),
              "mean_e2el_ms": _cell(200, 0.031, 0.012, 0.9), "request_throughput": _cell(200, 0.03, -0.012, 0.9)}
    conc = {m: _cell(10, 0.05, -0.02, None) for m in layout}
    doc = {"schema": "twin.whatif_bands/1", "report": {"commit": "abc1234", "date": "2026-12-06", "command": "x"},
           "errors": "ratio error", "min_pairs": 3,
           "kinds": {"GPU": {"layout": layout, "concurrency": conc}, "family": {"layout": copy.deepcopy(layout)}}}
    return check_whatif(doc)


def _runs(variants: dict) -> dict:
    sc = Scenario({**BASE, "variants": variants}, source="w.yaml")
    return {name: {"body": sc.body(name), "deployment": None} for name in sc.names()}


def test_the_knobs_a_variant_changes():
    runs = _runs({**VARIANTS, "both": {"deployment": {"tensor_parallel_size": 2, "kv_dtype": "fp8"}},
                  "same": {"seed": 3, "name": "other", "slo": {"ttft_ms": 100}, "workload": {"num_requests": 64}},
                  "isl": {"workload": {"classes": [{"name": "c", "share": 1.0, "prompt": {"suffix_tokens": 1024},
                                                    "output_tokens": 32}]}},
                  "v": {"server": {"vllm_version": "0.15.1"}}, "w": {"deployment": {"weight_dtype": "fp8"}}})
    ref = runs["baseline"]["body"]
    assert [changed_knobs(ref, runs[n]["body"]) for n in ("tp2", "c32", "seqs4", "both", "same", "isl", "v", "w")] \
        == [["layout"], ["concurrency"], ["max_num_seqs"], ["layout", "kv"], [], ["lengths"], ["release"],
            ["weights"]]
    assert knob_of(("workload", "arrivals", "rate_per_s")) == "rate"
    assert knob_of(("deployment", "gpu")) == "gpu"
    assert knob_of(("speculative_decoding", "method")) == "speculative_decoding"
    assert knob_of(("workload", "classes", 0, "prompt", "shared_prefix_tokens")) == "workload.classes"


def test_the_exact_block_for_tp_concurrency_and_max_num_seqs():
    view = whatif_doc(_runs({**VARIANTS, "tp2-c32": {**VARIANTS["tp2"], **VARIANTS["c32"]}}), _table())
    assert view["lines"] == [
        "What-if band: the twin's error on the predicted change from baseline, held out",
        "  change    pairs  TTFT mean   TPOT        E2E mean    throughput  right way",
        "  TP / EP layout: tp2, tp2-c32",
        "    GPU     207    8.1 (+5.9)  2.9 (0.0)   3.1 (+1.2)  3.0 (-1.2)  84, 86%",
        "    family  207    8.1 (+5.9)  2.9 (0.0)   3.1 (+1.2)  3.0 (-1.2)  84, 86%",
        "  concurrency: c32, tp2-c32",
        "    GPU     10     5.0 (-2.0)  5.0 (-2.0)  5.0 (-2.0)  5.0 (-2.0)  -",
        "  seqs4: no held-out evidence for a change of max_num_seqs",
        "  tp2-c32 changes 2 knobs (TP / EP layout, concurrency): the errors may add",
        "  median |error of the predicted change| (signed), %; GPU / family held out;",
        "  right way: pairs with the measured direction (TTFT, TPOT); report abc1234"]
    assert [(k["knob"], k["variants"], k["evidence"] and list(k["evidence"])) for k in view["knobs"]] == [
        ("layout", ["tp2", "tp2-c32"], ["GPU", "family"]), ("concurrency", ["c32", "tp2-c32"], ["GPU"]),
        ("max_num_seqs", ["seqs4"], None)]
    assert view["several_knobs"] == {"tp2-c32": ["layout", "concurrency"]} and view["no_band"] is None


def test_a_table_knob_without_pairs_many_variants_and_no_change():
    table = _table()
    runs = _runs({f"kv{i}": {"deployment": {"kv_dtype": "fp8"}, "seed": i} for i in range(5)})
    assert whatif_doc(runs, table)["lines"][1:] == [
        "  kv0, kv1, kv2 +2 more: no held-out evidence for a change of KV format (under 3",
        "    pairs)"]                                                     # wrapped at 80 columns
    assert whatif_doc(_runs({"again": {"seed": 5}}), table)["lines"] == []     # no knob changed: no block


def test_another_cost_model_gets_no_band():
    runs = _runs({"prof": {"cost_model": {"kind": "constant", "params": {"step_s": 0.01}}}})
    assert whatif_doc(runs, _table())["lines"] == [
        "No what-if band: the held-out evidence is of the twin's roofline cost model;",
        "  prof uses a constant step time"]


def test_compare_prints_the_band_and_writes_the_json_key_run_does_not(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump({**BASE, "variants": VARIANTS}, sort_keys=False))
    out = tmp_path / "out.json"
    r = CliRunner().invoke(main, ["compare", str(path), "-q", "--json", str(out)])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    start = lines.index("What-if band: the twin's error on the predicted change from baseline, held out")
    assert lines[start + 2] == "  TP / EP layout: tp2"
    assert "  seqs4: no held-out evidence for a change of max_num_seqs" in lines[start:]
    doc = json.loads(out.read_text())
    assert sorted(doc) == ["variants", "whatif"]
    assert doc["whatif"]["lines"] == lines[start:start + len(doc["whatif"]["lines"])]
    assert [k["knob"] for k in doc["whatif"]["knobs"]] == ["layout", "concurrency", "max_num_seqs"]
    r = CliRunner().invoke(main, ["run", str(path), "-q", "--all-variants"])
    assert r.exit_code == 0 and "What-if band" not in r.stdout


def test_the_dashboard_shows_the_band_for_its_what_if():
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=90)
    at.session_state["s:bundled"] = "concurrency_cap_trap"
    at = at.run()

    def widget(kind: str, prefix: str, name: str):
        found = [w for w in getattr(at, kind) if w.key and w.key.startswith(prefix) and w.key.endswith(":" + name)]
        assert len(found) == 1
        return found[0]

    def band() -> list[str]:
        assert not at.exception and not at.error
        return [m.value for m in at.markdown if "held-out evidence" in m.value or "What-if band" in m.value]

    assert band() == ["No held-out evidence for a change of max_num_seqs"]      # the variant vllm-default
    at = widget("selectbox", "e:", "start").set_value("baseline").run()
    assert band() == []                                                          # no change: no band
    widget("number_input", "w:", "concurrency").set_value(32)
    at = widget("number_input", "w:", "tensor_parallel_size").set_value(2).run()
    text, = band()
    assert text.startswith("**What-if band**: the twin's error on the predicted change from baseline, held out")
    assert "| TP / EP layout | GPU | 223 | 8.1 (+5.9) |" in text and "| concurrency | family | 707 | 7.7 (-3.4) |" in text
    assert text.endswith("The what-if changes 2 knobs (TP / EP layout, concurrency): the errors may add")
