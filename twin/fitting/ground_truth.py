"""The real vLLM measurements shipped beside the project (``../shared/ground-truth/``, or ``TWIN_GROUND_TRUTH``):
inference-perf runs on one H100 SXM, read as fit cases.

Runs whose clients timed out on a large share of requests (the saturated ``reasoning`` experiments) are set
aside: the twin serves every request the scheduler admits, while that client gave up after ~300 s, so their
latencies measure the client's patience rather than the server."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from twin.errors import TwinInputError
from twin.fitting.fit import Case
from twin.fitting.measured_run import MeasuredRun
from twin.fitting.readers.inference_perf import STAGE_FILE, read_inference_perf
from twin.fitting.replay import Target
from twin.hardware.catalog import resolve_model

GROUND_TRUTH_ENV = "TWIN_GROUND_TRUTH"
H100_FOLDER = "h100-vllm-inference-perf"
MAX_FAILED_SHARE = 0.01
# the runs date from February 2026, when vLLM 0.14-0.16 were current: the 0.14 semantics (async scheduling on)
VLLM_VERSION = "0.14"


def ground_truth_dir() -> Path:
    env = os.environ.get(GROUND_TRUTH_ENV)
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2].parent / "shared" / "ground-truth"


def timed_out(run: MeasuredRun) -> bool:
    failed = run.metrics.get("failed", 0)
    return failed > MAX_FAILED_SHARE * run.num_requests


def _holds_an_experiment(folder: Path) -> bool:
    """A folder with an ``exp-config.yaml`` (the server's settings); stage files without one are an error (their
    server would be fitted at the twin's defaults)."""
    config = folder / "exp-config.yaml"
    if config.exists() or config.is_symlink():
        return True
    if any(STAGE_FILE.search(p.name) for p in folder.iterdir()):
        raise TwinInputError(f"{folder}: inference-perf stage files without an exp-config.yaml (the server's "
                             f"settings)")
    return False


def h100_cases(folder: Path | None = None, gpu: str = "H100-SXM") -> tuple[list[Case], list[MeasuredRun]]:
    """(cases to fit and check, runs set aside for client timeouts) from the H100 inference-perf experiments."""
    root = (folder or ground_truth_dir()) / H100_FOLDER
    if not root.is_dir():
        raise TwinInputError(f"{root}: no such folder (the inference-perf runs; --ground-truth names their parent)")
    experiments = sorted(p for p in root.iterdir() if p.is_dir() and _holds_an_experiment(p))
    if not experiments:
        raise TwinInputError(f"{root}: no inference-perf experiment (a folder with an exp-config.yaml) in it")
    cases, aside = [], []
    for exp in experiments:
        for run in read_inference_perf(exp):
            if timed_out(run):
                aside.append(run)
                continue
            run = dataclasses.replace(run, server={"vllm_version": VLLM_VERSION, **run.server})
            model = resolve_model(run.model).name
            cases.append(Case(run, Target(model, gpu, run.tensor_parallel_size or 1)))
    return cases, aside
