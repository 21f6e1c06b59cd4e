"""The bench-path pull reading (benchmarks/bench_path_pull.py) and the client timing's pure helpers
(benchmarks/bench_client_path.py): exact logic on synthetic rows, no timing."""

import json
import sys
from pathlib import Path

import pytest

from twin.errors import TwinInputError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_client_path as bcp  # noqa: E402
import bench_path_pull as bpp  # noqa: E402


def _row(gpu, family, measured, predicted, conc=4, isl=1024, client=True, source="silicon"):
    return {"source": source, "client": client, "gpu": gpu, "family": family, "conc": conc, "isl": isl, "tp": 4,
            "moe_quant": None, "gemm_quant": "fp8", "version": "0.15.1",
            "measured": {"mean_ttft_ms": measured}, "predicted": {"mean_ttft_ms": predicted},
            "errors": {"mean_ttft_ms": predicted / measured - 1}}


def test_best_shift_recovers_a_constant_offset():
    rows = [_row("B200", "a", p + 5.0, p) for p in (20.0, 50.0, 200.0)]
    assert bpp.best_shift_ms(rows) == pytest.approx(5.0, abs=1e-9)
    assert bpp.log_loss(rows, 5.0) == pytest.approx(0.0, abs=1e-20)


def test_best_shift_hits_the_grid_end_when_rows_want_more():
    rows = [_row("B200", "a", 500.0, 10.0)]
    assert bpp.best_shift_ms(rows) == pytest.approx(bpp.SHIFT_HIGH_MS, abs=1e-9)


def test_best_shift_rejects_no_rows():
    with pytest.raises(ValueError):
        bpp.best_shift_ms([])


def test_fold_shifts_use_only_the_training_rows():
    rows = [_row("B200", "a", 30.0, 20.0), _row("B200", "a", 60.0, 50.0),
            _row("H100-SXM", "b", 22.0, 20.0), _row("H100-SXM", "b", 52.0, 50.0)]
    got = {(k, g): (n, s) for k, g, n, s in bpp.fold_shifts(rows)}
    assert got[("GPU", "B200")] == (2, pytest.approx(2.0, abs=1e-9))       # trained on the H100 rows
    assert got[("GPU", "H100-SXM")] == (2, pytest.approx(10.0, abs=1e-9))
    assert got[("family", "a")][1] == pytest.approx(2.0, abs=1e-9)


def test_bench_rows_keep_published_client_silicon_rows_with_both_ttfts():
    data = {"cases": [_row("B200", "a", 30.0, 20.0), _row("B200", "a", 30.0, 20.0, client=False),
                      _row("H100-SXM", "b", 30.0, 20.0, source="inference-perf"),
                      {**_row("B200", "a", 30.0, 20.0), "predicted": {"mean_ttft_ms": None}}]}
    assert len(bpp.bench_rows(data)) == 1


def test_table_groups_and_gaps():
    rows = [_row("B200", "a", 30.0, 20.0), _row("B200", "a", 40.0, 20.0), _row("H100-SXM", "b", 19.0, 20.0)]
    out = {k: (n, g) for k, n, g, *_ in bpp.table(rows, bpp.KEYS["gpu"])}
    assert out[("B200",)] == (2, 15.0)
    assert out[("H100-SXM",)] == (1, -1.0)


def test_load_band():
    assert [bpp.load_band(c) for c in (1, 8, 16, 64, 128)] == ["C<=8", "C<=8", "C16-64", "C16-64", "C>64"]


def test_main_rejects_an_unreadable_file(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("not json")
    with pytest.raises(TwinInputError, match="not valid JSON"):
        bpp.main([str(bad)])
    bad.write_text(json.dumps({"cases": [_row("B200", "a", 30.0, 20.0, client=False) | {"name": "r", "ep": 0}]}))
    with pytest.raises(TwinInputError, match="no silicon rows"):
        bpp.main([str(bad)])


def test_client_stub_chunk_is_a_completions_sse_message():
    token = bcp.sse_chunk(" tok")
    assert token.startswith(b"data: ") and token.endswith(b"\n\n")
    body = json.loads(token[len(b"data: "):].decode())
    assert body["choices"][0]["text"] == " tok" and body["usage"] is None
    usage = json.loads(bcp.sse_chunk(None, {"completion_tokens": 3})[len(b"data: "):].decode())
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 3


def test_client_int_lists():
    assert bcp.parse_int_list("1, 16,64", "--conc") == [1, 16, 64]
    for bad in ("", "0", "a,2", "-1"):
        with pytest.raises(SystemExit):
            bcp.parse_int_list(bad, "--conc")
