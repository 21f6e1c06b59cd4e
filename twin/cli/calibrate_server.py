"""The server a calibration's results were measured on: its deployment (GPU, model, TP, dtypes, layout) and its
vLLM settings (release and serving knobs), merged from where the user can say them, and shown before the fit.

Precedence, highest first: ``--set server.KNOB=VALUE`` / ``--set deployment.FIELD=VALUE`` (and ``--gpu``,
``--model``, ``--tp``), ``--vllm-version``, what the result files say (``exp-config.yaml``, ``--metadata``, the
twin's own ``--json``), the ``--scenario`` file's ``deployment`` and ``server`` blocks, and last vLLM's defaults
for the release (``twin.core.vllm_versions``), which are printed as assumed. A GPU, model or TP size on the
command line that contradicts a result file's is a one-line error naming both (``_refuse_contradiction``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from rich.table import Table

from twin.core.vllm_versions import NEWEST_VLLM_VERSION
from twin.cli.calibrate_layout import FILE_KEYS, TARGET_FIELDS, layout_target, refuse_unfittable
from twin.errors import TwinInputError
from twin.fitting.measured_run import MeasuredRun
from twin.fitting.replay import Target, deployment_for
from twin.hardware.catalog import resolve_gpu, resolve_model
from twin.results.numbers import counted
from twin.results.server_keys import KNOB_FIELDS
from twin.yaml_input import parse_set_options

SHOWN_KNOBS = ("vllm_version", "max_num_seqs", "max_num_batched_tokens", "max_model_len", "enable_prefix_caching",
               "enable_chunked_prefill", "block_size", "async_scheduling")


@dataclass
class ServerDescription:
    deployment: dict[str, Any] = field(default_factory=dict)      # gpu, model, tensor_parallel_size, TARGET_FIELDS
    server: dict[str, Any] = field(default_factory=dict)          # vLLM knobs given (ServerConfig names)
    source: dict[str, str] = field(default_factory=dict)          # "deployment.gpu" / "server.x" -> where from
    file_server: dict[str, Any] = field(default_factory=dict)     # lowest layer: the scenario's


def describe(*, scenario: str | None, sets: tuple[str, ...], vllm_version: str | None, gpu: str | None,
             model: str | None, tp: int | None) -> ServerDescription:
    """What the command line and the scenario say (the result files' own settings are merged per run)."""
    d = ServerDescription()
    if scenario is not None:
        from twin.scenario import load_scenario

        sc = load_scenario(scenario)
        sc.body()          # the scenario validates as a whole (one-line error naming the field otherwise)
        raw = sc.raw()
        dep = raw.get("deployment") or {}
        if not isinstance(dep, dict) or dep.get("groups"):
            raise TwinInputError(f"--scenario {scenario}: calibration fits one server; give a deployment without "
                                 f"groups")
        for k in ("gpu", "model", "tensor_parallel_size", *TARGET_FIELDS):
            if k in dep:
                d.deployment[k], d.source[f"deployment.{k}"] = dep[k], f"--scenario {scenario}"
        server = raw.get("server") or {}
        for k, v in server.items():
            if v is not None:
                d.file_server[k], d.source[f"server.{k}"] = v, f"--scenario {scenario}"
    if vllm_version is not None:
        d.server["vllm_version"], d.source["server.vllm_version"] = vllm_version, "--vllm-version"
    for key, value in parse_set_options(sets).items():
        if key not in ("server", "deployment") or not isinstance(value, dict):
            raise TwinInputError(f"--set {key}...: twin calibrate takes server.KNOB=VALUE or deployment.FIELD=VALUE")
        for k, v in value.items():
            if key == "server":
                d.server[k], d.source[f"server.{k}"] = v, "--set"
            else:
                if k not in ("gpu", "model", "tensor_parallel_size", *TARGET_FIELDS):
                    raise TwinInputError(f"--set deployment.{k}: not a field calibration uses (gpu, model, "
                                         f"tensor_parallel_size, {', '.join(TARGET_FIELDS)})")
                d.deployment[k], d.source[f"deployment.{k}"] = v, "--set"
    for k, v, flag in (("gpu", gpu, "--gpu"), ("model", model, "--model"), ("tensor_parallel_size", tp, "--tp")):
        if v is not None:
            d.deployment[k], d.source[f"deployment.{k}"] = v, flag
    return d


def apply(run: MeasuredRun, d: ServerDescription) -> tuple[MeasuredRun, Target]:
    """The run with its server settings merged (scenario < result file < command line) and its target."""
    # a layout calibration cannot replay, before anything else is asked of the file
    refuse_unfittable(run, {k for k in TARGET_FIELDS if _cli(d, f"deployment.{k}")})
    server = {**d.file_server, **run.server, **d.server}
    run = dataclasses.replace(run, server=server)
    dep = d.deployment
    _refuse_contradiction(run, d)
    name = dep.get("model") if _cli(d, "deployment.model") else (run.model or dep.get("model"))
    if not name:
        raise TwinInputError(f"{run.name}: the result does not name its model; give --model (or --scenario)")
    gpu = dep.get("gpu") if _cli(d, "deployment.gpu") else (run.gpu or dep.get("gpu"))
    if not gpu:
        raise TwinInputError(f"{run.name}: the result does not name its GPU; give --gpu (twin list gpus) or "
                             f"--scenario")
    tp = dep.get("tensor_parallel_size") if _cli(d, "deployment.tensor_parallel_size") else \
        (run.tensor_parallel_size or dep.get("tensor_parallel_size") or 1)
    m = _resolved(resolve_model, name, "model", run, d)
    g = _resolved(resolve_gpu, gpu, "gpu", run, d)
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise TwinInputError(f"deployment.tensor_parallel_size = {tp!r}: must be a whole number >= 1")
    try:
        m.check_tensor_parallel(tp)
    except TwinInputError as exc:
        if _cli(d, "deployment.tensor_parallel_size") or run.tensor_parallel_size is None:
            raise
        raise TwinInputError(f"{run.name}: the result file's {exc}") from None
    extra = layout_target(run, dep, lambda key: _cli(d, key))
    return run, Target(m.name, g.name, tp, **{"weight_dtype": "auto", **extra})


def _resolved(resolve: Any, value: Any, field: str, run: MeasuredRun, d: ServerDescription) -> Any:
    """The catalogued model or GPU ``value`` names; a refusal of a name the result file gave says so (the
    reader checked it is text)."""
    try:
        return resolve(str(value))
    except TwinInputError as exc:
        if _cli(d, f"deployment.{field}") or getattr(run, field) is None:
            raise
        raise TwinInputError(f"{run.name}: the result file's {exc}") from None


def _cut(value: Any, limit: int = 60) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _canonical(field: str, value: Any) -> Any:
    """A catalogued GPU's or model's name (None for one the catalogue does not know), or the TP size."""
    if field == "tensor_parallel_size":
        return value
    try:
        return (resolve_gpu if field == "gpu" else resolve_model)(str(value)).name
    except TwinInputError:
        return None


def _refuse_contradiction(run: MeasuredRun, d: ServerDescription) -> None:
    """A GPU, model or TP size given on the command line that contradicts the result file's (both catalogued and
    different): a one-line error naming both, not a silent override. A name the catalogue does not know (a
    fine-tuned model's id, a GPU's marketing name) is not judged: the command line names what it is."""
    for field, said in (("gpu", run.gpu), ("model", run.model), ("tensor_parallel_size", run.tensor_parallel_size)):
        key = f"deployment.{field}"
        if said is None or not _cli(d, key):
            continue
        given = d.deployment[field]
        a, b = _canonical(field, given), _canonical(field, said)
        if a is not None and b is not None and a != b:
            flag = d.source[key]
            flag = f"--set deployment.{field}=" if flag == "--set" else f"{flag} "
            raise TwinInputError(f"{flag}{_cut(given)}: the result file says {field} {_cut(said)} (run {run.name}); "
                                 f"leave {flag.strip().rstrip('=')} out or give the file's value")


def _cli(d: ServerDescription, key: str) -> bool:
    src = d.source.get(key, "")
    return src.startswith("--") and not src.startswith("--scenario")


def server_table(read: list[MeasuredRun], runs: list[MeasuredRun], targets: list[Target],
                 d: ServerDescription) -> tuple[Table, list[str]]:
    """What was read and what was assumed, for the first run's server (and a note per run that differs);
    ``read``: the runs as the files gave them, ``runs``: with the description merged (``apply``)."""
    run, target, file_run = runs[0], targets[0], read[0]
    dep = deployment_for(run, target)
    sched = dep.scheduler_config
    table = Table(title="Server the results were measured on")
    for col in ("setting", "value", "from"):
        table.add_column(col)
    for k, v in (("gpu", target.gpu), ("model", target.model), ("tensor_parallel_size", target.tensor_parallel_size)):
        src = d.source.get(f"deployment.{k}")
        from_file = {"gpu": file_run.gpu, "model": file_run.model,
                     "tensor_parallel_size": file_run.tensor_parallel_size}[k]
        table.add_row(k, str(v), src if src and (_cli(d, f"deployment.{k}") or from_file is None) else
                      ("result file" if from_file is not None else "default"))
    for k in TARGET_FIELDS:        # the layout, where the file or the description states it
        if k in file_run.layout or k in d.deployment:
            src = d.source[f"deployment.{k}"] if _cli(d, f"deployment.{k}") or k not in file_run.layout else \
                f"result file ({FILE_KEYS[k]})"
            table.add_row(k, str(getattr(target, k)), src)
    notes = []
    version = run.server.get("vllm_version")
    for k in SHOWN_KNOBS:
        if k == "vllm_version":
            value = version or NEWEST_VLLM_VERSION
        else:
            value = getattr(sched, k, None)
        if k in d.server:
            src = d.source[f"server.{k}"]
        elif k in file_run.server:
            src = "result file"
        elif k in d.file_server:
            src = d.source[f"server.{k}"]
        else:
            src = f"assumed: vLLM {version or NEWEST_VLLM_VERSION} default"
        table.add_row(k, str(value), src)
    for k in KNOB_FIELDS:          # the other knobs, where the file or the description states them
        if k in run.server:
            src = d.source[f"server.{k}"] if k in d.server or k not in file_run.server else \
                f"result file ({KNOB_FIELDS[k]})"
            table.add_row(k, str(run.server[k]), src)
    if not version:
        notes.append(f"no vLLM release given: assumed {NEWEST_VLLM_VERSION}, the newest the twin knows; give "
                     f"--vllm-version (an older server without async scheduling costs about a step more TTFT)")
    differ = sorted({r.name for r in runs[1:] if r.server != run.server})
    if differ:
        notes.append(f"{counted(len(differ), 'run')} on other server settings: " + ", ".join(differ[:4])
                     + (" ..." if len(differ) > 4 else ""))
    return table, notes
