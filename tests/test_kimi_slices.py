"""benchmarks/kimi_slices.py and kimi_int4_fit.py: the slice tables and the held-out split (exact values)."""

import sys
from pathlib import Path

from benchmark_module import load_benchmark

_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(_ROOT))


ks = load_benchmark("kimi_slices")
fit = load_benchmark("kimi_int4_fit")


def _rec(slice_, conc, ttft, tpot, isl=1024, osl=1024):
    return {"slice": slice_, "conc": conc, "isl": isl, "osl": osl,
            "errors": {"mean_ttft_ms": ttft, "mean_tpot_ms": tpot, "mean_e2el_ms": tpot, "request_throughput": -tpot}}


def test_set_values_parse_in_model_units_and_the_tables_give_median_abs_and_signed_errors():
    assert ks.parse_set(["moe_layer_overhead_s@experts_int4=50e-6", "moe_expert_efficiency@experts_int4=0.5"]) == {
        "moe_layer_overhead_s@experts_int4": 50e-6, "moe_expert_efficiency@experts_int4": 0.5}
    recs = [_rec("INT4", 4, -0.5, -0.4), _rec("INT4", 8, -0.3, 0.2), _rec("INT4", 16, -0.1, -0.1)]
    (header, line) = ks.table(recs, lambda r: r["slice"])
    assert line.startswith("INT4") and "  3 |" in line
    # TTFT: median |e| 30 %, median signed -30 %; TPOT |0.4, 0.2, 0.1|: 20 %, signed -10 %; throughput +10 %
    assert [c.strip() for c in line.split(" | ")[1:]] == [
        "30.0% ( -30.0%)", "20.0% ( -10.0%)", "20.0% ( -10.0%)", "20.0% ( +10.0%)"]
    assert "TTFT mean" in header and "throughput" in header


def test_the_int4_fit_trains_on_1k_1k_and_the_8k_prompt_at_c4_and_holds_out_the_rest():
    assert fit.is_train({"isl": 1024, "osl": 1024, "conc": 64})
    assert fit.is_train({"isl": 8192, "osl": 1024, "conc": 4})
    assert not fit.is_train({"isl": 8192, "osl": 1024, "conc": 8})
    assert not fit.is_train({"isl": 1024, "osl": 8192, "conc": 4})
    assert fit.PRIORS == {"moe_layer_overhead_s@experts_int4": 0.0, "moe_expert_efficiency@experts_int4": 1.0,
                          "moe_expert_compute_efficiency@experts_int4": 1.0}
