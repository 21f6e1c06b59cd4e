"""The MLA layer's mixed-step ops (twin.fitting.mla_mixed_step) and the trial script that puts them in the
held-out count table (benchmarks/kimi_eager_mla_count.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from twin.fitting import launch_prior
from twin.fitting.mla_mixed_step import MLA_MIXED_STEP_OPS, MLA_PATHS, mla_path_ops, with_mixed_step

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import kimi_eager_mla_count as trial  # noqa: E402


def test_count_is_seven_ops_beyond_the_prompt_only_count():
    assert MLA_MIXED_STEP_OPS == 7
    assert mla_path_ops(24) == 31 and mla_path_ops(26) == 33
    with pytest.raises(ValueError):
        mla_path_ops(-1)


def test_only_the_named_mla_paths_change():
    table = with_mixed_step(launch_prior.PATH_LAYER_OPS)
    for key, (ops, _) in launch_prior.PATH_LAYER_OPS.items():
        assert table[key][0] == (ops + 7 if key in MLA_PATHS else ops)
    only = with_mixed_step(launch_prior.PATH_LAYER_OPS, (("blackwell", "nvfp4"),))
    assert only[("blackwell", "nvfp4")][0] == 31 and only[("blackwell", "int4")][0] == 26
    assert launch_prior.PATH_LAYER_OPS[("blackwell", "nvfp4")][0] == 24      # the input is not changed
    with pytest.raises(ValueError, match="no counted path"):
        with_mixed_step(launch_prior.PATH_LAYER_OPS, (("hopper", "nvfp4"),))


def test_the_b200_fold_prior_at_the_mixed_step_count():
    """The B200 fold's per-op time is Hopper's 0.92 ms / 16: NVFP4 31 ops -> 15 x 57.5 us, INT4 33 -> 17 x."""
    table = with_mixed_step(launch_prior.PATH_LAYER_OPS)
    assert launch_prior.moe_extra_s(0.92e-3, table[("blackwell", "nvfp4")][0]) == pytest.approx(0.8625e-3)
    assert launch_prior.moe_extra_s(0.92e-3, table[("blackwell", "int4")][0]) == pytest.approx(0.9775e-3)


def test_parse_paths():
    assert trial.parse_paths("nvfp4,int4") == (("blackwell", "nvfp4"), ("blackwell", "int4"))
    for bad in ("fp8", "nvfp4,nvfp4", ""):
        with pytest.raises(Exception):
            trial.parse_paths(bad)


def _row(month: str, ttft: float, *, tp=4, isl=1024, conc=4, precision="fp4", model="moonshotai/Kimi-K2.5"):
    return SimpleNamespace(model_path=model, precision=precision, ttft_ms=ttft, tp=tp, isl=isl, osl=1024,
                           concurrency=conc, measured=f"{month}-20" if month else None, month=month,
                           image="vllm/vllm-openai:v0.17.0", vllm_version="0.17.0", system="b200_sxm")


def test_pairs_match_layouts_measured_in_both_series(monkeypatch):
    import twin.fitting.silicon as silicon
    monkeypatch.setattr(silicon, "kimi_april_fp4", lambda row: row.month == "2026-04")
    rows = [_row("2026-03", 170.0), _row("2026-03", 174.0), _row("2026-04", 82.0),
            _row("2026-03", 160.0, tp=8), _row("", 150.0), _row("2026-04", 90.0, conc=8),
            _row("2026-03", 100.0, precision="int4"), _row("2026-03", float("nan"), conc=8),
            _row("2026-03", 250.0, isl=8192), _row("2026-04", 240.0, isl=8192)]      # 8k: eager in both series
    assert trial.paired_differences(rows) == [((4, 1024, 1024, 4), 172.0, 82.0)]


def test_wrong_invocations_are_one_line():
    script = ROOT / "benchmarks" / "kimi_eager_mla_count.py"
    for args in (["--paths", "fp8", "--", "--folds", "GPU"], ["--pairs"], ["--paths", "int4"],
                 ["--pairs", "--ground-truth", "x", "--paths", "int4"]):
        out = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, cwd=ROOT,
                             env={"PYTHONPATH": str(ROOT), "PATH": ""})
        assert out.returncode != 0
        assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
