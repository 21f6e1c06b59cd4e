"""benchmarks/gptoss_slices.py: the held-out choice of a variant (picked on the other groups, judged on the one
held out), on hand-made errors."""

from __future__ import annotations

from types import SimpleNamespace

from benchmark_module import load_benchmark


def _case(isl: int, tp: int, system: str = "b200_sxm"):
    return SimpleNamespace(row=SimpleNamespace(isl=isl, osl=1024, tp=tp, system=system, published_client=True))


def test_held_out_choice_picks_on_the_other_groups(capsys):
    g = load_benchmark("gptoss_slices")
    cases = [_case(1024, 2), _case(1024, 4), _case(8192, 2), _case(8192, 4), _case(1024, 1)]
    # TPOT errors per variant and case: "10" is right on 1k rows, "12" on 8k rows
    errs = {"defaults": [{"mean_tpot_ms": e} for e in (0.3, 0.3, 0.3, 0.3, 0.0)],
            "10": [{"mean_tpot_ms": e} for e in (0.0, 0.0, -0.1, -0.1, 0.0)],
            "12": [{"mean_tpot_ms": e} for e in (0.1, 0.1, 0.0, 0.0, 0.0)]}
    g.held_out_choice(cases, errs, ["10", "12"], g.config, "mean_tpot_ms", lambda c: c.row.tp > 1)
    out = capsys.readouterr().out
    # 1k/1k held out: picked on the 8k rows -> "12", judged on the 1k rows (+10 %); the TP1 row is not admitted
    assert "| 1024/1024 | 2 | 12 | +30.0% (abs 30.0%) | +10.0% (abs 10.0%) |" in out
    assert "| 8192/1024 | 2 | 10 | +30.0% (abs 30.0%) | -10.0% (abs 10.0%) |" in out
    assert g.config(cases[2]) == "8192/1024" and g.tp(cases[4]) == "TP1" and g.prompt(cases[0]) == "ISL 1024"
