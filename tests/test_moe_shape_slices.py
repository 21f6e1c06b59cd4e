"""benchmarks/moe_shape_slices.py: the expert shape per rank and the EP / TP-only pairing (exact values)."""

from benchmark_module import load_benchmark

from twin.hardware.catalog import resolve_model

mss = load_benchmark("moe_shape_slices")


def test_width_per_rank_splits_experts_over_tp_only_without_expert_parallelism():
    minimax, gpt_oss = resolve_model("MiniMaxAI/MiniMax-M2.5"), resolve_model("openai/gpt-oss-120b")
    assert mss.expert_width_per_rank(minimax, 4, False) == 384
    assert mss.expert_width_per_rank(minimax, 4, True) == 1536
    assert mss.expert_width_per_rank(gpt_oss, 8, False) == 360


def test_tokens_per_expert_is_tokens_times_top_k_over_experts():
    # gpt-oss 4 of 128, MiniMax 8 of 256: the same share, so the same tokens per expert
    assert mss.tokens_per_expert(resolve_model("openai/gpt-oss-120b"), 32) == 1.0
    assert mss.tokens_per_expert(resolve_model("MiniMaxAI/MiniMax-M2.5"), 32) == 1.0


def _row(ep, measured, conc=4, version="0.19.0"):
    return dict(family="minimax", gpu="B200", fmt="fp8", tp=2, dp=1, ep=ep, isl=1024, osl=1024, conc=conc,
                version=version, moe=True, width=1536 if ep else 768, measured_tpot_ms=measured,
                predicted_tpot_ms=5.0, tpot=5.0 / measured - 1, ttft=-0.5, layout="TP2 EP" if ep else "TP2",
                touched=0.125)


def test_ep_pairs_pairs_only_identical_settings_and_reports_the_measured_ratio():
    rows = [_row(True, 11.0), _row(False, 10.0), _row(False, 9.0, version="0.17.0"), _row(True, 20.0, conc=8)]
    lines = mss.ep_pairs(rows)
    assert len([ln for ln in lines if ln.startswith("| minimax")]) == 1
    assert lines[-1] == "1 settings: measured TPOT, EP / TP-only - 1: median +10.0%, range +10.0% .. +10.0%"


def test_decode_gap_table_needs_three_loads_and_reports_measured_minus_twin():
    rows = [_row(False, 6.0, conc=c) for c in (4, 8)]
    assert mss.decode_gap_by_load(rows)[3:] == []
    rows.append(_row(False, 7.5, conc=16))
    assert mss.decode_gap_by_load(rows)[3] == \
        "| minimax B200 fp8 TP2 0.19.0 | C4 +1.00 [0.12], C8 +1.00 [0.12], C16 +2.50 [0.12] |"
