"""Commands work as printed and leave the checkout alone.

* Every ``twin`` line that ``twin calibrate --plan`` prints runs as printed (in bash, with the plan's own
  variable lines) on result files made like the ``vllm bench serve`` runs it asks for.
* Every command in the README's ``bash`` blocks (and the inline ones listed in `INLINE`) either runs, from the
  repository root, with exit status 0 and ``git status --porcelain`` unchanged, or is skipped here with the
  reason (it needs a GPU, installs packages, serves a page, or takes minutes and has its own test). A README
  command this file does not know fails the test, so a new one gets classified.

Placeholders (``SCENARIO``, ``NAME``, ``result.json``, ``results/``, output files) are replaced by a small
bundled scenario and by paths in the test's temporary folder. ``twin`` is this tree's CLI (a wrapper on PATH
runs ``python -m twin.cli.main`` with this interpreter).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SCENARIO = "concurrency_cap_trap"            # 64 requests: about a second a run
RATE_SCENARIO = "bench_random"               # an open-loop (gamma) scenario, for the rate settings

# README commands -> the command run here ({tmp}: the test's folder), or None and why not
SKIP = "skip"
RUN: dict[str, str | tuple[str, str]] = {
    "python3 -m venv .venv": (SKIP, "creates a virtualenv (CI's set-up)"),
    ". .venv/bin/activate": (SKIP, "set-up"),
    "pip install -e .": (SKIP, "installs packages (CI's set-up)"),
    "pip install -e '.[dev,calibration,dashboard,plan]'": (SKIP, "installs packages (CI's set-up)"),
    "python -m pytest -q": (SKIP, "the test suite itself"),
    "twin run concurrency_cap_trap --all-variants": "twin run concurrency_cap_trap --all-variants",
    "twin list": "twin list",
    "twin run SCENARIO": f"twin run {SCENARIO}",
    "twin run SCENARIO --variant NAME": f"twin run {SCENARIO} --variant vllm-default",
    "twin compare SCENARIO": f"twin compare {SCENARIO}",
    "twin compare SCENARIO --reference NAME": f"twin compare {SCENARIO} --reference vllm-default",
    "twin run SCENARIO --set server.max_num_seqs=64 --set workload.arrivals.rate_per_s=12":
        f"twin run {RATE_SCENARIO} --set server.max_num_seqs=64 --set workload.arrivals.rate_per_s=12",
    "twin run SCENARIO --seed 3 --replications 5": f"twin run {SCENARIO} --seed 3 --replications 5",
    "twin run SCENARIO --json out.json --requests-out requests.csv --steps-out steps.csv":
        f"twin run {SCENARIO} --json {{tmp}}/out.json --requests-out {{tmp}}/requests.csv "
        "--steps-out {tmp}/steps.csv",
    "twin calibrate --plan --model meta-llama/Llama-3.1-8B-Instruct":
        "twin calibrate --plan --model meta-llama/Llama-3.1-8B-Instruct",
    "twin calibrate --from-results results/ --gpu H100-SXM -o my-server.json":
        "twin calibrate --from-results {tmp}/results/ --gpu H100-SXM -o {tmp}/my-server.json",
    "twin run SCENARIO --set cost_model.kind=profile --set cost_model.profile=my-server.json":
        f"twin run {SCENARIO} --set cost_model.kind=profile --set cost_model.profile={{tmp}}/my-server.json",
    "twin calibrate --quick --device cpu --threads 1 -o my-profile.json":
        (SKIP, "about a minute of engine measurement; tests/test_calibrate_cli.py runs a shorter one"),
    "twin validate validate_tiny_cpu":
        (SKIP, "serves the engine for real (~25 s); tests/test_validation.py covers it"),
    "twin validate SCENARIO --bench-json result.json": f"twin validate {SCENARIO} --bench-json {{tmp}}/result.json",
    "twin diagnose result.json --scenario SCENARIO": f"twin diagnose {{tmp}}/result.json --scenario {SCENARIO}",
    "twin protocol SCENARIO --out report/": f"twin protocol {SCENARIO} --out {{tmp}}/report/",
    "twin plan examples/plan_azure_conv_200rps.yaml":
        (SKIP, "about a minute on 2 cores (README); tests/test_planner.py plans smaller grids"),
    "twin sweep SCENARIO --grid server.max_num_seqs=16,64,256 --grid rate=5,10,20":
        f"twin sweep {RATE_SCENARIO} --grid server.max_num_seqs=16,64,256 --grid rate=5,10,20",
    "streamlit run app.py": (SKIP, "a server; tests/test_app_browser.py serves and drives it"),
    "python -m calibration.gpu_run": (SKIP, "needs a CUDA GPU"),
    "python -m calibration.gpu_run --device cpu --tiny --out-dir /tmp/x":
        (SKIP, "its dry run is tests/test_gpu_run.py"),
    "python -m calibration.revalidate calibration/profiles/h200-sxm-8b-run2":
        "python -m calibration.revalidate calibration/profiles/h200-sxm-8b-run2",
    "python benchmarks/sim_speed.py": (SKIP, "a speed benchmark (seconds to minutes); tests/test_sim_speed_floor.py"),
    "python benchmarks/sim_speed.py --per-request": (SKIP, "a speed benchmark"),
    "python benchmarks/sim_speed.py --all": (SKIP, "a speed benchmark of minutes"),
    "python benchmarks/sim_speed.py --mooncake": (SKIP, "a speed benchmark; tests/test_sim_speed_floor.py"),
    "python benchmarks/scheduler_speed.py": (SKIP, "a speed benchmark"),
    "python benchmarks/cost_model_speed.py": (SKIP, "a speed benchmark"),
    "python benchmarks/spec_crossover.py": (SKIP, "a benchmark of minutes"),
    "python benchmarks/sweep_speed.py": (SKIP, "a benchmark of minutes"),
    "python benchmarks/fidelity.py": (SKIP, "serves the engine for real, minutes"),
    "python benchmarks/startup.py": (SKIP, "a speed benchmark"),
    # inline in the README's prose (INLINE)
    "python benchmarks/sim_speed.py --records-check N": (SKIP, "a memory benchmark"),
    "TWIN_FUZZ_EXAMPLES=2000 TWIN_HYPOTHESIS_RANDOM=1 python -m pytest tests/fuzz": (SKIP, "the fuzz tests"),
    "python -m compileall -q twin": "python -m compileall -q twin",
}
INLINE = ("python benchmarks/sim_speed.py --records-check N",
          "TWIN_FUZZ_EXAMPLES=2000 TWIN_HYPOTHESIS_RANDOM=1 python -m pytest tests/fuzz",
          "python -m compileall -q twin")


def readme_commands() -> list[str]:
    """Each command of the README's ``bash`` blocks (continuations joined, comments and ``&&`` split off)."""
    text = README.read_text(encoding="utf-8")
    out: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.split(r"\s#\s|^\s*#", line)[0].strip()
            for part in filter(None, (p.strip() for p in line.split("&&"))):
                out.append(" ".join(part.split()))
    for command in INLINE:
        assert f"`{command}`" in text, command   # still in the README
        out.append(command)
    return list(dict.fromkeys(out))


def _git_status() -> str | None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return None
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def shell(tmp_path_factory):
    """Runs a command line in bash from the repository root with this tree's ``twin`` first on PATH."""
    bindir = tmp_path_factory.mktemp("bin")
    twin = bindir / "twin"
    twin.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m twin.cli.main "$@"\n')
    twin.chmod(0o755)
    python = bindir / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(ROOT), "COLUMNS": "80"}

    def run(command: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=600)
    return run


BENCH_RESULTS = ("conc-1-in512", "conc-4-in512", "conc-16-in512", "conc-1-in2048", "rate-2-in512")


def _bench_results(shell, folder: Path, names=BENCH_RESULTS) -> None:
    """Result files as ``vllm bench serve --save-result --save-detailed`` writes them (the twin's own ``--json``
    schema, and the ``model_id`` vLLM records), small runs of the plan's shapes."""
    folder.mkdir(parents=True, exist_ok=True)
    scenario = folder.parent / "bench-gen.yaml"
    scenario.write_text("""name: bench-gen
deployment: {gpu: H100-SXM, model: llama-3.1-8b}
workload:
  arrivals: {process: poisson, rate_per_s: .inf, max_concurrency: 4}
  num_requests: 16
  dataset: {kind: random, input_len: 512, output_len: 64, range_ratio: 0.0}
""")
    for name in names:
        kind, load, length = name.split("-")
        sets = [f"workload.dataset.input_len={length.removeprefix('in')}"]
        if kind == "conc":
            sets.append(f"workload.arrivals.max_concurrency={load}")
        else:
            sets += ["workload.arrivals.max_concurrency=null", f"workload.arrivals.rate_per_s={load}"]
        out = folder / f"{name}.json"
        r = shell(f"twin run {scenario} -q --json {out} " + " ".join(f"--set {s}" for s in sets))
        assert r.returncode == 0, r.stderr
        doc = json.loads(out.read_text())
        doc["model_id"] = "meta-llama/Llama-3.1-8B-Instruct"
        out.write_text(json.dumps(doc))


@pytest.fixture(scope="module")
def bench_dir(shell, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("bench") / "made"
    _bench_results(shell, folder)
    return folder


def _copy(bench_dir: Path, folder: Path, names=BENCH_RESULTS) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy(bench_dir / f"{name}.json", folder / f"{name}.json")


def test_the_twin_lines_of_calibrate_plan_run_as_printed(shell, bench_dir, tmp_path):
    plan = shell("twin calibrate --plan --model meta-llama/Llama-3.1-8B-Instruct --gpu H100-SXM")
    assert plan.returncode == 0, plan.stderr
    lines = plan.stdout.splitlines()
    variables = [line for line in lines if re.match(r"^[A-Z]+=\S+", line)]
    twin_lines = [line for line in lines if line.startswith("twin ")]
    assert {v.split("=")[0] for v in variables} == {"MODEL", "GPU", "VLLM"} and twin_lines
    _copy(bench_dir, tmp_path)
    for line in twin_lines:
        r = shell("\n".join(variables + [line]), cwd=tmp_path)
        assert r.returncode == 0, (line, r.stdout[-2000:], r.stderr[-2000:])
        assert "fitted" in r.stdout
    assert json.loads((tmp_path / "my-server.json").read_text())["format"] == "twin-server-profile"


def test_from_results_takes_files_folders_and_globs_after_one_flag(shell, bench_dir, tmp_path):
    _copy(bench_dir, tmp_path / "results", BENCH_RESULTS[:3])
    (tmp_path / "results" / "notes.json").write_text('{"not": "a result"}')
    for args, n in (("results/conc-1-in512.json results/conc-4-in512.json", 2), ("results/", 3),
                    ("'results/conc-*.json'", 3), ("results/conc-1-in512.json --from-results 'results/conc-[4]*.json'", 2)):
        r = shell(f"twin calibrate --from-results {args} --gpu H100-SXM -o out.json --max-sim-s 10", cwd=tmp_path)
        assert r.returncode == 0, (args, r.stderr)
        assert len(json.loads((tmp_path / "out.json").read_text())["runs"]) == n, args
        assert ("left out 1 file no reader recognises: notes.json" in r.stderr) == (args == "results/")
    r = shell("twin calibrate --from-results 'nothing-*.json' --gpu H100-SXM", cwd=tmp_path)
    assert r.returncode == 2 and "matches no file" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = shell("twin calibrate stray.json", cwd=tmp_path)
    assert r.returncode == 2 and "after --from-results" in r.stderr


def test_every_readme_command_is_known_here():
    assert sorted(set(readme_commands()) - set(RUN)) == []


def test_readme_commands_run_and_leave_the_checkout_clean(shell, bench_dir, tmp_path):
    before = _git_status()
    _copy(bench_dir, tmp_path / "results", BENCH_RESULTS[:3])
    made = shell(f"twin run {SCENARIO} -q --json {tmp_path}/result.json")
    assert made.returncode == 0, made.stderr
    ran, timings = [], {}
    for command in readme_commands():
        what = RUN[command]
        if isinstance(what, tuple):
            continue
        t0 = time.monotonic()
        r = shell(what.format(tmp=tmp_path))
        timings[command] = time.monotonic() - t0
        assert r.returncode == 0, (command, r.stdout[-2000:], r.stderr[-2000:])
        assert not re.search(r"\d(\.\d+)?e\+\d", r.stdout), (command, re.search(r"\d(\.\d+)?e\+\d", r.stdout))
        if command.startswith(("twin run", "twin compare", "twin list")):   # a path written stays whole
            wide = [line for line in r.stdout.splitlines() if len(line) > 80 and not line.startswith("wrote ")]
            assert wide == [], (command, wide[:3])
        ran.append(command)
    print("\n".join(f"{s:6.1f} s  {c}" for c, s in timings.items()))
    assert len(ran) >= 15
    if before is not None:
        assert _git_status() == before   # nothing written into the checkout
