"""``fidelity_real.py --resume``: a run interrupted after some folds, resumed from its partial report, writes the same
report an uninterrupted run writes; a partial report of other options is refused in one line (issue 33, round 23,
benchmarks/report_resume.py). No real fold runs here: the fold runner and the simulator are fakes. Also the
temporary files a killed writer leaves: visible, and removed by the next write once their process is gone."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest
from test_report_checkpoint import GROUPS, _intervals

from benchmarks import fidelity_real as fr
from benchmarks import report_writer as rw
from twin.errors import TwinInputError
from twin.fitting import joint
from twin.fitting.switches import switched

KINDS = "family,GPU"


def _case(i: int):
    return SimpleNamespace(family=GROUPS["family"][i % 3], gpu=GROUPS["GPU"][i % 2],
                           run=SimpleNamespace(name=f"c{i}", closed_loop=True,
                                               metrics={"mean_ttft_ms": 100.0 + i, "mean_tpot_ms": 10.0 + 0.3 * i}),
                           target=SimpleNamespace(model="m"))


def _errors(case, predicted: dict) -> dict:
    return {k: p / case.run.metrics[k] - 1.0 for k, p in predicted.items() if k in case.run.metrics}


class Folds:
    """The fold runner: predictions and parameters a function of the fold and case alone; after ``stop_after``
    folds it raises KeyboardInterrupt (the run interrupted)."""

    def __init__(self, stop_after: int | None = None) -> None:
        self.stop_after, self.calls = stop_after, []

    def __call__(self, kind, g, cases, group_of, fold_sims, **_):
        if self.stop_after is not None and len(self.calls) >= self.stop_after:
            raise KeyboardInterrupt
        self.calls.append((kind, g))
        held = [c for c in cases if group_of(c) == g]
        shift = len(g) / 7 + (0.05 if kind == "GPU" else 0.0)
        predicted = [{k: v * (0.9 + 0.013 * i + 0.01 * shift) for k, v in c.run.metrics.items()}
                     for i, c in enumerate(held)]
        return SimpleNamespace(cases=held, predicted=predicted, params={"x": 1.0 + shift, "y@sync": 0.5 / len(g)},
                               std={"x": 0.1 * shift, "y@sync": None},
                               identification={"x": "identified", "y@sync": "held at its prior"},
                               plan=SimpleNamespace(lines=lambda: [f"plan {kind} {g}"]))


@pytest.fixture
def fake_run(monkeypatch, tmp_path):
    cases = [_case(i) for i in range(6)]
    folds = {"family": lambda c: c.family, "GPU": lambda c: c.gpu, "source": lambda c: "s"}
    for name, value in {
            "FOLDS": folds, "silicon_cases": lambda *a, **k: ([], []), "all_cases": lambda *a, **k: cases,
            "with_sends": lambda cs, _: cs, "default_start": lambda names=(): {},
            "simulate_cases": lambda cs, *a, **k: [SimpleNamespace(metrics=dict(c.run.metrics)) for c in cs],
            "embedded_entries": lambda: [], "with_deployments": lambda cs: list(cs),
            "fold_first": lambda *a: (None, None), "errors": _errors,
            "parameter_table": lambda fold: [(n, f"{v:.4g} s", "-" if fold.std[n] is None else f"{fold.std[n]:.2g}",
                                              fold.identification[n]) for n, v in fold.params.items()],
            "_is_moe": lambda c: c.family == "mixtral", "add_intervals": _intervals,
            "time": SimpleNamespace(perf_counter=lambda: 0.0)}.items():
        monkeypatch.setattr(fr, name, value)
    monkeypatch.setattr(joint, "errors", _errors)       # fidelity_real's summarize(pairs) reads them
    out = tmp_path / "r.json"

    def run(*extra: str, stop_after: int | None = None, json_out: bool = True) -> Folds:
        runner = Folds(stop_after)
        monkeypatch.setattr(fr, "run_fold", runner)
        monkeypatch.setattr(sys, "argv", ["fidelity_real.py", "--no-refit", "--ground-truth", str(tmp_path),
                                          "--folds", KINDS, "--markdown", str(tmp_path / "r.md"),
                                          *(["--json", str(out)] if json_out else []), *extra])
        fr.main()
        return runner
    return run


def _files(tmp_path) -> tuple[str, str]:
    return (tmp_path / "r.json").read_text(), (tmp_path / "r.md").read_text()


@pytest.mark.parametrize("stop_after", [1, 3, 4])
def test_a_resumed_run_writes_the_uninterrupted_report(fake_run, tmp_path, stop_after):
    all_folds = [("family", g) for g in GROUPS["family"]] + [("GPU", g) for g in GROUPS["GPU"]]
    assert fake_run().calls == all_folds
    whole = _files(tmp_path)
    (tmp_path / "r.json").unlink()
    with pytest.raises(KeyboardInterrupt):
        fake_run(stop_after=stop_after)
    partial = json.loads((tmp_path / "r.json").read_text())
    assert partial["complete"] is False
    assert [(k, g) for k, gs in partial["folds_done"].items() for g in gs] == all_folds[:stop_after]
    assert {tuple(r[:2]) for r in partial[rw.ROWS_KEY]} == set(all_folds[:stop_after])
    # resumed (its --json defaults to the file resumed): only the folds not done run
    assert fake_run("--resume", str(tmp_path / "r.json"), json_out=False).calls == all_folds[stop_after:]
    assert _files(tmp_path) == whole
    final = json.loads(whole[0])
    assert rw.ROWS_KEY not in final and "resume" not in final["args"] and "switches" not in final["args"]


def test_resume_may_change_the_workers_and_output_files(fake_run, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        fake_run(stop_after=2)
    (tmp_path / "keep.json").write_text((tmp_path / "r.json").read_text())
    fake_run("--resume", str(tmp_path / "keep.json"), "--workers", "3")
    final = json.loads((tmp_path / "r.json").read_text())
    assert final["complete"] is True and final["args"]["workers"] == 3
    assert json.loads((tmp_path / "keep.json").read_text())["complete"] is False      # read, not written


def _partial(fake_run, tmp_path) -> dict:
    with pytest.raises(KeyboardInterrupt):
        fake_run(stop_after=2)
    return json.loads((tmp_path / "r.json").read_text())


@pytest.mark.parametrize("extra, message", [
    (("--seed", "1"), r"made with seed = 0, this run 1 \(resume with the options of the run it finishes; only "
                      r"--workers, --json, --markdown may differ\)$"),
    (("--groups", "llama"), r"made with groups = '', this run 'llama' "),
    (("--silicon-every", "5"), r"made with silicon_every = 3, this run 5 "),
])
def test_a_partial_report_of_other_options_is_refused(fake_run, tmp_path, extra, message):
    _partial(fake_run, tmp_path)
    with pytest.raises(TwinInputError, match=rf"^--resume {tmp_path / 'r.json'}: {message}"):
        fake_run("--resume", str(tmp_path / "r.json"), *extra)


def test_a_partial_report_of_other_switches_is_refused(fake_run, tmp_path):
    with switched(multimem_allreduce=True), pytest.raises(KeyboardInterrupt):
        fake_run(stop_after=2)
    assert json.loads((tmp_path / "r.json").read_text())["args"]["switches"] == {"multimem_allreduce": True}
    with pytest.raises(TwinInputError, match=r"made with switches = \{'multimem_allreduce': True\}, this run nothing"):
        fake_run("--resume", str(tmp_path / "r.json"))
    with switched(multimem_allreduce=True):
        fake_run("--resume", str(tmp_path / "r.json"))
    assert json.loads((tmp_path / "r.json").read_text())["complete"] is True


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(complete=True), "a complete report, nothing to resume"),
    (lambda d: d.pop("complete"), "a complete report, nothing to resume"),
    (lambda d: d.pop(rw.ROWS_KEY), "no folds_done object or parameter_rows list of 6 strings each"),
    (lambda d: d[rw.ROWS_KEY][0].pop(), "no folds_done object or parameter_rows list of 6 strings each"),
    (lambda d: d[rw.ROWS_KEY].append(["GPU", "h100", "x", "1", "-", "identified"]),
     "parameter_rows has a row of GPU 'h100', not a finished fold"),
    (lambda d: d["folds_done"]["family"].append("gemma"), "folds_done has family 'gemma', which this run does not "
                                                          "hold out"),
    (lambda d: d["folds_done"]["family"].append("llama"), "folds_done has family 'llama', which this run does not "
                                                          "hold out \\(once\\)"),
    (lambda d: d["folds_done"].update(family="llama"), r"folds_done\['family'\] is not a list"),
    (lambda d: d["folds"]["family"]["folds"][0]["errors"].pop("c0"), "the family fold holding 'llama' out holds other "
                                                                      "cases out than this run"),
    (lambda d: d["folds"]["family"]["folds"][0]["errors"]["c0"].update(mean_ttft_ms="x"),
     "the fold holding 'llama' out: errors of 'c0' 'mean_ttft_ms' is 'x', not a finite number"),
    (lambda d: d["folds"]["family"]["folds"][0]["summary"].pop("mean_tpot_ms"),
     "the family fold holding 'llama' out: summary is not the per-metric n / abs / signed object"),
    (lambda d: d.update(names=["x"]), r"made fitting \['x'\], this run \[\]"),
    (lambda d: d.update(args=[]), "no args object"),
])
def test_a_bad_partial_report_is_one_line(fake_run, tmp_path, edit, message):
    data = _partial(fake_run, tmp_path)
    edit(data)
    (tmp_path / "r.json").write_text(json.dumps(data))
    with pytest.raises(TwinInputError, match=message):
        fake_run("--resume", str(tmp_path / "r.json"))


@pytest.mark.parametrize("content, message", [
    (None, "a directory, not a file"), (b"", ""), (b"\xff\xfe{", ""), (b"[1, 2]", "a JSON list, not an object"),
    (b"[" * 100_000, ""), (b'{"complete": false, "complete": false}', ""),
])
def test_a_hostile_resume_file_is_one_line(fake_run, tmp_path, content, message):
    bad = tmp_path / "bad.json"
    bad.mkdir() if content is None else bad.write_bytes(content)
    with pytest.raises(TwinInputError, match=rf"^{bad}:.*{message}") as error:
        fake_run("--resume", str(bad), "--json", str(tmp_path / "r.json"))
    assert "\n" not in str(error.value)


def test_resume_refuses_defaults_only_and_a_missing_file(fake_run, tmp_path):
    with pytest.raises(TwinInputError, match=r"^--resume: --defaults-only runs no folds \(nothing to resume\)$"):
        fake_run("--defaults-only", "--resume", str(tmp_path / "r.json"))
    with pytest.raises(TwinInputError, match=r"nope\.json: no such file$"):
        fake_run("--resume", str(tmp_path / "nope.json"))


def test_the_next_write_removes_a_gone_process_temp_file_only(tmp_path):
    path = tmp_path / "r.json"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        kept = [rw.temp_path(path, live.pid), tmp_path / f"r.json.elsewhere-{gone.pid}.tmp",
                tmp_path / "r.json.notes.tmp", tmp_path / f"q.json.{rw.HOST}-{gone.pid}.tmp"]
        for p in [rw.temp_path(path, gone.pid), *kept]:
            p.write_text("{")
        rw.write_atomic(path, "{}")
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["r.json", *(p.name for p in kept)])
    finally:
        live.kill()
        live.wait()
