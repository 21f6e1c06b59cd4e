"""fidelity_real.py's report survives an interruption (issue 33, round 22, 33zB): a partial report after each
finished fold, written atomically (benchmarks/report_writer.py), refused by the readers that pool or pair cases
(benchmarks/fold_report.py). No real fold runs here: the fold runner and the simulator are fakes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmarks import fidelity_real as fr
from benchmarks import fold_report
from benchmarks import report_writer as rw
from twin.errors import TwinInputError
from twin.fitting.joint import METRICS

ROOT = Path(__file__).resolve().parents[1]
GROUPS = {"family": ("llama", "mixtral", "qwen"), "GPU": ("h100", "b200")}


def _case(i: int):
    return SimpleNamespace(name=f"c{i}", family=GROUPS["family"][i % 3], gpu=GROUPS["GPU"][i % 2],
                           run=SimpleNamespace(name=f"c{i}", closed_loop=True, metrics={}),
                           target=SimpleNamespace(model="m"))


def _intervals(report, *_) -> str:
    report["intervals"] = {}            # as heldout_intervals.add_intervals adds its key
    return "intervals"


def _summary(pairs) -> dict:
    return {key: {"n": len(pairs), "abs": 0.01 * len(pairs), "signed": -0.001 * len(pairs)} for key, _ in METRICS}


class FakeFolds:
    """The fold runner: records every partial report on disk as each fold finishes; ``stop_after`` folds, then
    raises KeyboardInterrupt (an interrupted run)."""

    def __init__(self, out: Path, stop_after: int | None = None) -> None:
        self.out, self.stop_after, self.seen = out, stop_after, []

    def __call__(self, kind, g, cases, group_of, fold_sims, **_):
        if self.out.exists():
            self.seen.append(json.loads(self.out.read_text()))
        if self.stop_after is not None and len(self.seen) >= self.stop_after:
            raise KeyboardInterrupt
        held = [c for c in cases if group_of(c) == g]
        return SimpleNamespace(cases=held, predicted=[{"p": 1.0}] * len(held), params={"x": 1.5},
                               std={"x": 0.1}, identification={"x": "identified"},
                               plan=SimpleNamespace(lines=lambda: [f"plan {g}"]))


@pytest.fixture
def fake_run(monkeypatch, tmp_path):
    cases = [_case(i) for i in range(6)]
    folds = {"family": lambda c: c.family, "GPU": lambda c: c.gpu, "source": lambda c: "s"}
    for name, value in {
            "FOLDS": folds, "silicon_cases": lambda *a, **k: ([], []), "all_cases": lambda *a, **k: cases,
            "with_sends": lambda cs, _: cs, "default_start": lambda names=(): {},
            "simulate_cases": lambda cs, *a, **k: [SimpleNamespace(metrics={"p": 1.0}) for _ in cs],
            "embedded_entries": lambda: [], "with_deployments": lambda cs: list(cs),
            "fold_first": lambda *a: (None, None), "summarize": _summary,
            "errors": lambda c, p: {"mean_ttft_ms": 0.1}, "parameter_table": lambda fold: [],
            "_is_moe": lambda c: c.family == "mixtral", "add_intervals": _intervals}.items():
        monkeypatch.setattr(fr, name, value)

    def run(*extra: str, stop_after: int | None = None, markdown: bool = True) -> FakeFolds:
        runner = FakeFolds(tmp_path / "r.json", stop_after)
        monkeypatch.setattr(fr, "run_fold", runner)
        md = ["--markdown", str(tmp_path / "r.md")] if markdown else []
        monkeypatch.setattr(sys, "argv", ["fidelity_real.py", "--no-refit", "--ground-truth", str(tmp_path),
                                          "--json", str(tmp_path / "r.json"), *md, *extra])
        fr.main()
        return runner
    return run


def test_partial_report_after_each_fold_and_complete_at_the_end(fake_run, tmp_path):
    runner = fake_run("--folds", "family,GPU")
    # the runner sees the file as it was before each fold after the first: one partial write per finished fold
    assert [r["complete"] for r in runner.seen] == [False] * 4
    assert [r["folds_done"] for r in runner.seen] == [
        {"family": ["llama"]}, {"family": ["llama", "mixtral"]}, {"family": ["llama", "mixtral", "qwen"]},
        {"family": ["llama", "mixtral", "qwen"], "GPU": ["h100"]}]
    second = runner.seen[1]
    assert [f["held_out"] for f in second["folds"]["family"]["folds"]] == ["llama", "mixtral"]
    assert "pooled" not in second["folds"]["family"] and "markdown" not in second and "intervals" not in second
    assert second["folds"]["family"]["folds"][1]["params"] == {"x": 1.5}
    assert second["folds"]["family"]["folds"][1]["errors"] == {"c1": {"mean_ttft_ms": 0.1}, "c4": {"mean_ttft_ms": 0.1}}
    final = json.loads((tmp_path / "r.json").read_text())
    assert final["complete"] is True
    assert final["folds_done"] == {"family": ["llama", "mixtral", "qwen"], "GPU": ["h100", "b200"]}
    # the new keys come last; every other key as before this round
    assert list(final)[-2:] == ["complete", "folds_done"]
    assert list(final)[:-2] == ["args", "names", "folds", "moe_vs_dense", "intervals", "markdown"]
    assert (tmp_path / "r.md").read_text() == final["markdown"]
    assert not list(tmp_path.glob(".*.tmp"))


def test_an_interrupted_run_leaves_its_finished_folds(fake_run, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        fake_run("--folds", "family,GPU", stop_after=4)
    left = json.loads((tmp_path / "r.json").read_text())
    assert left["complete"] is False
    assert left["folds_done"] == {"family": ["llama", "mixtral", "qwen"], "GPU": ["h100"]}
    assert left["folds"]["family"]["pooled"]["mean_ttft_ms"]["n"] == 6       # the finished kind: pooled
    assert [f["held_out"] for f in left["folds"]["GPU"]["folds"]] == ["h100"]
    md = (tmp_path / "r.md").read_text()
    assert md.startswith("PARTIAL report (fidelity_real.py has not finished; folds done: family: llama, mixtral, "
                         "qwen; GPU: h100)")
    assert "| GPU | h100 | 3 |" in md and "| family | **all held out** | 6 |" in md and "b200" not in md
    # the readers that pool or pair cases refuse it in one line; one fold's parameters are read
    with pytest.raises(TwinInputError, match=r"r\.json: a partial report \(fidelity_real\.py had finished only "
                                             r"the folds family: llama, mixtral, qwen; GPU: h100\): let the run "
                                             r"finish, or rerun it$"):
        fold_report.load_report(tmp_path / "r.json")
    assert fold_report.fold_params(tmp_path / "r.json", "GPU", "h100") == {"x": 1.5}
    assert fold_report.load_report(tmp_path / "r.json", partial_ok=True).kinds() == ["family", "GPU"]


def test_defaults_only_writes_complete_and_refuses_markdown(fake_run, tmp_path, monkeypatch):
    monkeypatch.setattr(fr, "_defaults_only", lambda cases, pred, report, args, t0: report.update(cases=[]))
    with pytest.raises(TwinInputError, match=r"^--markdown: --defaults-only writes no markdown"):
        fake_run("--defaults-only")                 # it was accepted and silently not written
    fake_run("--defaults-only", markdown=False)
    final = json.loads((tmp_path / "r.json").read_text())
    assert final["complete"] is True and final["folds_done"] == {} and final["cases"] == []
    assert not (tmp_path / "r.md").exists()


@pytest.mark.parametrize("value, ok", [(True, True), (False, False), ("false", None), (0, None), (None, None)])
def test_reader_complete_key(value, ok):
    data = {"complete": value, "folds_done": {"GPU": ["h100"]},
            "folds": {"GPU": {"folds": [{"held_out": "h100", "params": {"x": 1.0}}]}}}
    if ok:
        assert fold_report.FoldReport(data, "x.json").kinds() == ["GPU"]
    elif ok is False:
        with pytest.raises(TwinInputError, match=r"^x\.json: a partial report .*folds GPU: h100\)"):
            fold_report.FoldReport(data, "x.json")
    else:
        with pytest.raises(TwinInputError, match=rf"^x\.json: complete is {value!r}, not true or false$"):
            fold_report.FoldReport(data, "x.json", partial_ok=True)


def test_report_without_complete_key_is_whole():
    """A report made before round 22 has no ``complete`` key: read as whole."""
    data = {"folds": {"GPU": {"folds": [{"held_out": "h100"}]}}}
    assert fold_report.FoldReport(data, "old.json").kinds() == ["GPU"]


def test_write_atomic_replaces_and_keeps_a_plain_files_mode(tmp_path):
    path = tmp_path / "r.json"
    rw.write_atomic(path, "old")
    rw.write_atomic(path, "new ü")
    assert path.read_text(encoding="utf-8") == "new ü"
    plain = tmp_path / "plain"
    plain.write_text("x")
    assert path.stat().st_mode == plain.stat().st_mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain", "r.json"]


def test_write_atomic_failure_leaves_the_old_file_and_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    rw.write_atomic(path, '{"old": 1}')

    def fail(fd):
        raise OSError("disk full")
    monkeypatch.setattr(rw.os, "fsync", fail)
    with pytest.raises(OSError, match="disk full"):
        rw.write_atomic(path, '{"new": 2}')
    assert path.read_text() == '{"old": 1}'
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_a_kill_mid_write_leaves_the_previous_report_whole(tmp_path):
    """A process SIGKILLed after writing the new report's bytes to its temporary file and before the rename:
    the report file is the previous version, whole; the stray temp file is r.json.HOST-PID.tmp (round 23: visible,
    named for the killed process), and the next write removes it."""
    path = tmp_path / "r.json"
    old = rw.report_json({"complete": False, "folds_done": {"GPU": ["h100"]}})
    child = textwrap.dedent(f"""
        import os, sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from benchmarks import report_writer as rw
        path = {str(path)!r}
        rw.write_atomic(path, {old!r})
        def stall(fd):
            print("mid", flush=True)
            time.sleep(60)
        rw.os.fsync = stall
        rw.write_atomic(path, rw.report_json({{"big": "x" * 5_000_000, "complete": True}}))
    """)
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "mid"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    assert json.loads(path.read_text()) == {"complete": False, "folds_done": {"GPU": ["h100"]}}
    stray = [p.name for p in tmp_path.iterdir() if p.name != "r.json"]
    assert stray == [rw.temp_path(path, proc.pid).name] == [f"r.json.{rw.HOST}-{proc.pid}.tmp"]
    rw.write_atomic(path, "next")
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]
