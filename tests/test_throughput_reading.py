"""benchmarks/throughput_reading.py: Little's-law identities and the pooled-median reading (issue 33, round 17)."""

from __future__ import annotations

import json
import math
import statistics
import sys

import pytest

from tests.benchmark_module import load_benchmark
from twin.errors import TwinInputError

tr = load_benchmark("throughput_reading")


def silicon_errors(ttft: float, tpot: float, w: float) -> dict[str, float]:
    """A silicon case's errors as both sides derive them: E2E from its parts, throughput mirrored from E2E."""
    e2e = w * ttft + (1.0 - w) * tpot
    return {tr.TTFT: ttft, tr.TPOT: tpot, tr.E2E: e2e, tr.THR: 1.0 / (1.0 + e2e) - 1.0}


def test_mirrored_is_littles_law_at_fixed_concurrency():
    assert tr.mirrored(0.0) == 0.0
    assert tr.mirrored(0.25) == pytest.approx(-0.2, abs=1e-15)      # E2E 1.25 x: 0.8 x the requests per second
    assert tr.mirrored(-0.5) == pytest.approx(1.0, abs=1e-15)
    for bad in (-1.0, -2.0, math.nan):
        with pytest.raises(TwinInputError):
            tr.mirrored(bad)


def test_ttft_share_recovers_the_weight_exactly():
    for w in (0.001, 0.012, 0.5):
        e = silicon_errors(-0.4, -0.03, w)
        assert tr.ttft_share(e) == pytest.approx(w, rel=1e-12)
    assert tr.ttft_share(silicon_errors(0.05, 0.05, 0.3)) is None      # equal parts: every w fits
    assert tr.ttft_share({tr.TPOT: 0.1}) is None                      # a TPOT-only (gap-analysis) case


def test_median_rank_matches_statistics_median():
    assert tr.median_rank(67) == 34
    assert tr.median_rank(1) == 1 and tr.median_rank(4) == 3
    for n in (1, 2, 5, 8, 67):
        vals = list(range(1, n + 1))
        assert statistics.median(vals) <= vals[tr.median_rank(n) - 1]
    with pytest.raises(TwinInputError):
        tr.median_rank(0)


def cases():
    sil = [("B200", f"s{i}", silicon_errors(-0.2, tpot, 0.01))
           for i, tpot in enumerate((0.01, -0.02, 0.025, -0.04, 0.05, -0.06))]
    sil.append(("B200", "gap", {tr.TPOT: 0.3}))                       # no throughput: not counted
    ip = [("H100", f"ip{i}/stage0", {tr.TPOT: 0.05, tr.E2E: 0.04, tr.THR: t})
          for i, t in enumerate((0.0, 0.001, 0.002, 0.09))]
    return sil + ip, {f"s{i}" for i in range(6)} | {"gap"}


def test_kind_reading_counts_and_counterfactuals():
    allc, ids = cases()
    r = tr.kind_reading(allc, ids, 0.03, near=1)
    assert (r["cases"], r["silicon"], r["other"]) == (10, 6, 4)
    assert r["identity_max_deviation"] < 1e-15
    thr = sorted(abs(e[tr.THR]) for _, _, e in allc if tr.THR in e)
    assert r["pooled_abs"] == statistics.median(thr)
    assert r["median_rank"] == 6
    assert r["other_within_target"] == 3 and [n for n, _ in r["other_outside"]] == ["ip3/stage0"]
    assert r["silicon_within_target"] == 3 and r["silicon_needed"] == 3
    # TPOT exact: each silicon case keeps its TTFT part only, 0.01 x -0.2 = -0.002 E2E
    tpot_exact = sorted([abs(tr.mirrored(0.01 * -0.2))] * 6 + [0.0, 0.001, 0.002, 0.09])
    assert r["pooled_if_tpot_exact"] == pytest.approx(statistics.median(tpot_exact), abs=1e-15)
    ttft_exact = sorted([abs(tr.mirrored(0.99 * t)) for t in (0.01, -0.02, 0.025, -0.04, 0.05, -0.06)]
                        + [0.0, 0.001, 0.002, 0.09])
    assert r["pooled_if_ttft_exact"] == pytest.approx(statistics.median(ttft_exact), abs=1e-15)
    # by |throughput|: s0 0.78, s2 2.22, s1 2.23, s3 4.34 %: ranks 2-4 around the deciding 3rd
    assert [(c["rank"], c["case"]) for c in r["near_target"]] == [(2, "s2"), (3, "s1"), (4, "s3")]
    assert r["ttft_share"][1] == pytest.approx(0.01, rel=1e-9)


def test_kind_reading_without_throughput_is_one_error():
    with pytest.raises(TwinInputError):
        tr.kind_reading([("g", "gap", {tr.TPOT: 0.1})], {"gap"}, 0.03, 2)


def test_tail_ratio_arithmetic():
    m = {tr.TTFT: 100.0, tr.TPOT: 10.0, tr.THR: 0.9, tr.E2E: 10_000.0}
    r = tr.tail_ratio(m, 10, 991.0)                                 # E2E derived 100 + 990 x 10 = 10 s
    assert r["derived_rps"] == pytest.approx(1.0) and r["ratio"] == pytest.approx(0.9)
    assert r["e2e_ratio"] == pytest.approx(1.0)
    with pytest.raises(TwinInputError):
        tr.tail_ratio({tr.TTFT: 100.0, tr.TPOT: 10.0}, 10, 991.0)
    with pytest.raises(TwinInputError):
        tr.tail_ratio(m, 0, 991.0)


def test_bare_name_strips_a_capped_runs_suffix():
    assert tr.bare_name("row_1 [160/640]") == "row_1" and tr.bare_name("row_1") == "row_1"


def test_cli_bad_report_is_one_line(tmp_path, monkeypatch, capsys):
    bad = tmp_path / "r.json"
    bad.write_text(json.dumps({"folds": {}}))
    monkeypatch.setattr(sys, "argv", ["throughput_reading.py", str(bad)])
    with pytest.raises(SystemExit) as exc:
        tr.run_script(tr.main)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no folds" in err[0]
    monkeypatch.setattr(sys, "argv", ["throughput_reading.py", str(bad), "--target", "0"])
    with pytest.raises(SystemExit):
        tr.run_script(tr.main)
    assert "--target" in capsys.readouterr().err


def test_sd_from_replicates_inverts_the_median_difference():
    s = tr.sd_from_replicates(0.009)
    # the median |x1 - x2| of two N(0, s) draws is 0.6745 x sqrt(2) x s
    assert statistics.NormalDist(0.0, math.sqrt(2.0) * s).inv_cdf(0.75) == pytest.approx(0.009, rel=1e-12)
    assert tr.sd_from_replicates(0.0) == 0.0


def test_replicate_band_without_scatter_is_the_pooled_median_and_seeded_otherwise():
    allc, ids = cases()
    r = tr.kind_reading(allc, ids, 0.03, near=0)
    still = tr.replicate_band(allc, ids, 0.03, ttft_sd=0.0, tpot_sd=0.0, draws=5)
    assert still["median"] == pytest.approx(r["pooled_abs"], abs=1e-15)
    assert still["p05"] == pytest.approx(still["p95"], abs=1e-15)
    assert still["within_target"] == (1.0 if r["pooled_abs"] <= 0.03 else 0.0)
    a = tr.replicate_band(allc, ids, 0.03, ttft_sd=0.04, tpot_sd=0.01, draws=2000, seed=3)
    assert a == tr.replicate_band(allc, ids, 0.03, ttft_sd=0.04, tpot_sd=0.01, draws=2000, seed=3)
    assert a["p05"] < r["pooled_abs"] < a["p95"]          # the scatter spreads the median both ways
    with pytest.raises(TwinInputError):
        tr.replicate_band(allc, ids, 0.03, ttft_sd=-0.1, tpot_sd=0.0)


def test_by_group_counts():
    allc, ids = cases()
    g = tr.kind_reading(allc, ids, 0.03, near=0)["by_group"]
    assert list(g) == ["B200"] and g["B200"]["n"] == 6 and g["B200"]["within_target"] == 3


def test_parse_replicates():
    assert tr.parse_replicates("0.046,0.009") == (0.046, 0.009)
    for bad in ("0.046", "a,b", "0.5,1.0", "-0.1,0.01", "nan,0.01"):
        with pytest.raises(TwinInputError):
            tr.parse_replicates(bad)


def test_parse_kinds_names_the_fold_kinds_once_each():
    kinds = ("source", "GPU", "family")
    assert tr.parse_kinds(None, kinds) is None
    assert tr.parse_kinds("GPU, family", kinds) == ["GPU", "family"]
    for text, message in ((",", "name at least one of source, GPU, family"), ("gpu", "'gpu': allowed: source, GPU"),
                          ("GPU,GPU", "'GPU': given twice")):
        with pytest.raises(TwinInputError, match=message):
            tr.parse_kinds(text, kinds)


def test_check_out_path_refuses_a_folder_and_a_missing_parent(tmp_path):
    tr.check_out_path(None)
    tr.check_out_path(tmp_path / "out.json")
    with pytest.raises(TwinInputError, match="a directory"):
        tr.check_out_path(tmp_path)
    with pytest.raises(TwinInputError, match="does not exist"):
        tr.check_out_path(tmp_path / "no" / "out.json")


def test_a_silicon_case_whose_errors_give_no_share_in_0_1_is_one_line():
    bad = {tr.TTFT: 0.1, tr.TPOT: 0.2, tr.E2E: 0.5, tr.THR: 0.1}          # w = (0.5 - 0.2) / (0.1 - 0.2) = -3
    with pytest.raises(TwinInputError, match="'s1': its errors give the measured TTFT a share -3 of E2E"):
        tr.kind_reading([("B200", "s1", bad)], {"s1"}, 0.03, 1)


def test_a_group_without_tpot_has_no_tpot_median():
    r = tr.kind_reading([("B200", "s1", {tr.THR: 0.01})], {"s1"}, 0.03, 1)
    assert r["by_group"]["B200"]["tpot_signed"] is None


@pytest.mark.parametrize("argv, message", [
    (["--target", "nan"], "--target nan: must be in (0, 1)"),
    (["--near", "-1"], "--near -1: must be >= 0"),
    (["--max-conc", "8"], "--max-conc applies to --simulate only"),
    (["--simulate", "--max-conc", "0"], "--max-conc 0: must be >= 1"),
    (["--kinds", "bogus"], "--kinds 'bogus': allowed: source, GPU, family"),
    (["--json", "{tmp}"], "--json {tmp}: a directory"),
    (["--json", "{tmp}/no/out.json"], "--json {tmp}/no/out.json: folder {tmp}/no does not exist")])
def test_cli_bad_options_are_one_line(tmp_path, monkeypatch, capsys, argv, message):
    argv = [a.format(tmp=tmp_path) for a in argv]
    monkeypatch.setattr(sys, "argv", ["throughput_reading.py", str(tmp_path / "r.json"), *argv])
    with pytest.raises(SystemExit) as exc:
        tr.run_script(tr.main)
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip() == f"error: {message.format(tmp=tmp_path)}"


def test_cli_a_folder_as_the_report_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["throughput_reading.py", str(tmp_path)])
    with pytest.raises(SystemExit) as exc:
        tr.run_script(tr.main)
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path}: a directory, not a file"
