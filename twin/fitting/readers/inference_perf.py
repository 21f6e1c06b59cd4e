"""inference-perf results: one ``stage_<N>_lifecycle_metrics.json`` per stage (and ``summary_lifecycle_metrics.json``),
each name behind the run's ``storage.*.report_file_prefix`` (older setups used ``results_``, giving
``results_stage_<N>_lifecycle_metrics.json``; current releases write no prefix: kubernetes-sigs/inference-perf,
``inference_perf/reportgen/base.py`` and ``client/filestorage/local.py``). Per-adapter stage files
(``adapter_<A>_stage_<N>_...``) and session reports (``stage_<N>_session_lifecycle_metrics.json``) are not runs.
Beside them, where present: the configuration inference-perf ran with (``config.yaml`` in current releases, the
config report; ``results_config.yaml`` or the input ``profile.yaml`` in older setups) and an ``exp-config.yaml``
of server settings (model, tensor_parallelism, max_num_seqs, ..., vllm_version, and the layout:
``twin.fitting.readers.layout_fields``; see docs/result-formats.md).

Each stage becomes one ``MeasuredRun``: a constant-rate open loop at the stage's requested rate, or for a
``concurrent`` stage (``load_summary.concurrency``) that many users in a closed loop. Prompt lengths
are the client's measured quantiles; output lengths are the configured ``output_len`` when the client sent
``ignore_eos`` (the server then generates exactly that many), else the measured quantiles. inference-perf
versions that stamp several stream messages per token make its TPOT and ITL fields unreliable, so TPOT is
derived as (mean E2E - mean TTFT) / (output tokens - 1). Requests that failed with latencies clustered at one
value were cut by a client timeout; that value becomes ``timeout_s``. The profile's stages run in order against
one server, so stage 0 is the first traffic that server sees: ``cold_start`` (``twin.fitting.measured_run``).
A rate stage of a ``constant`` load drew its sends as inference-perf's ConstantLoadTimer does, exponential gaps
scaled to sum to the stage's duration (``scaled_sends``; round 20: the files here send their count in 599.2-599.99 s
of 600); a ``poisson`` load's gaps are unscaled."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from twin.errors import TwinInputError
from twin.fitting.measured_run import LengthSample, MeasuredRun, PromptPool
from twin.fitting.readers.fields import get, load_json, number, try_json
from twin.fitting.readers.layout_fields import layout_fields
from twin.fitting.readers.server_fields import exp_config_server
from twin.results.server_keys import SERVER_KNOBS
from twin.workload.clients import INFERENCE_PERF
from twin.yaml_input import not_a_file, parse_yaml, read_text

# any report_file_prefix (none, "results_", ...), but not a per-adapter stage file
STAGE_FILE = re.compile(r"^(?!.*adapter_).*?stage_(\d+)_lifecycle_metrics\.json$")
QUANTILE_KEYS = (("min", 0.0), ("p0.1", 0.001), ("p1", 0.01), ("p5", 0.05), ("p10", 0.1), ("p25", 0.25),
                 ("median", 0.5), ("p75", 0.75), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99), ("p99.9", 0.999),
                 ("max", 1.0))
# inference-perf echoes the configuration it actually ran with (its defaults filled in) as results_config.yaml;
# prefer it to the input file, whose keys an older client may have ignored
CONFIG_NAMES = ("results_config.yaml", "config.yaml", "profile.yaml", "inference-perf.yaml")


def _is_stage_doc(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("load_summary"), dict) and "successes" in doc


def _stage_files(folder: Path) -> list[Path]:
    try:
        named = [p for p in folder.iterdir() if STAGE_FILE.search(p.name)]
    except OSError:
        return []
    for p in named:     # a stage left out silently would fit on fewer stages than the folder holds
        _require_file(p, "an inference-perf stage file")
    return named


def _require_file(path: Path, what: str) -> None:
    if not path.is_file():
        raise TwinInputError(f"{path}: {not_a_file(path) or 'a broken link'}; {what} must be a file")


def is_inference_perf(path: Path) -> bool:
    """A folder holding stage files, a file named as one, or any JSON file with a stage report's content."""
    if path.is_dir():
        return bool(_stage_files(path))
    if STAGE_FILE.search(path.name) or (path.name.endswith("_lifecycle_metrics.json")
                                        and "per_request" not in path.name):
        return True
    return path.suffix.lower() == ".json" and _is_stage_doc(try_json(path))


def _load_yaml(path: Path) -> dict[str, Any]:
    # size, encoding, syntax and alias expansion checked as for every user YAML
    data = parse_yaml(read_text(path, "inference-perf config"), str(path))
    if not isinstance(data, dict):    # (an empty file too: its settings would be left out silently)
        got = "an empty file" if data is None else type(data).__name__
        raise TwinInputError(f"{path}: expected a mapping of settings, got {got}")
    return data


def _quantiles(dist: Any, field: str, where: str) -> tuple[tuple[float, float], ...]:
    if not isinstance(dist, dict):
        raise TwinInputError(f"{where}: {field}: expected an object of percentiles (min, median, p99, max, ...)")
    pts = [(q, number(dist[k], f"{field}.{k}", where)) for k, q in QUANTILE_KEYS if k in dist]
    if len(pts) < 2:
        raise TwinInputError(f"{where}: {field}: needs at least two of {', '.join(k for k, _ in QUANTILE_KEYS)}")
    vals = [v for _, v in pts]
    if any(b < a for a, b in zip(vals, vals[1:])):
        raise TwinInputError(f"{where}: {field}: percentiles must not decrease")
    return tuple(pts)


def _config_beside(folder: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(inference-perf config, server settings) found next to the result files (empty when absent)."""
    client: dict[str, Any] = {}
    for name in CONFIG_NAMES:
        if _present(folder / name):
            client = _load_yaml(folder / name)
            break
    server = _load_yaml(folder / "exp-config.yaml") if _present(folder / "exp-config.yaml") else {}
    return client, server


def _present(path: Path) -> bool:
    """``path`` is there (a folder, a pipe or a broken link in a config's place is an error, not absent)."""
    if not (path.exists() or path.is_symlink()):
        return False
    _require_file(path, "an inference-perf config")
    return True


def _prompt_pool(client: dict[str, Any], where: str) -> PromptPool | None:
    if get(client, "data.type", where, required=False) != "shared_prefix":
        return None
    sp = get(client, "data.shared_prefix", where)
    groups = sp.get("num_groups", sp.get("num_unique_system_prompts"))
    per = sp.get("num_prompts_per_group", sp.get("num_users_per_system_prompt"))
    sys_len = sp.get("system_prompt_len")
    for name, v in (("num_groups", groups), ("num_prompts_per_group", per), ("system_prompt_len", sys_len)):
        if isinstance(v, bool) or not isinstance(v, int) or v < (0 if name == "system_prompt_len" else 1):
            raise TwinInputError(f"{where}: data.shared_prefix.{name} = {v!r}: must be a whole number "
                                 f"{'>= 0' if name == 'system_prompt_len' else '>= 1'}")
    return PromptPool(groups, per, sys_len)


def read_stage(path: Path, client: dict[str, Any] | None = None, server: dict[str, Any] | None = None,
               experiment: str | None = None) -> MeasuredRun:
    """One stage's lifecycle JSON (with the run's client config and server settings, if known)."""
    client, server = client or {}, server or {}
    where = str(path)
    data = load_json(path)
    if not isinstance(data, dict):
        raise TwinInputError(f"{where}: expected a JSON object at the top")

    def field_of(dotted: str) -> Any:
        return get(data, dotted, where)

    ok = field_of("successes")
    if not isinstance(ok, dict):
        raise TwinInputError(f"{where}: successes: expected an object")
    summary = field_of("load_summary")
    if not isinstance(summary, dict):
        raise TwinInputError(f"{where}: load_summary: expected an object")
    count = int(number(field_of("load_summary.count"), "load_summary.count", where, low=1))
    users = summary.get("concurrency")
    if users is not None:       # a concurrent stage: that many users in a closed loop
        users = int(number(users, "load_summary.concurrency", where, low=1))
        rate = None
    elif "requested_rate" not in summary:
        raise TwinInputError(f"{where}: missing field load_summary.requested_rate (a summary of every stage "
                             f"reads as no run: give the stage files or their folder)")
    else:
        rate = number(summary["requested_rate"], "load_summary.requested_rate", where)
        if rate <= 0:
            raise TwinInputError(f"{where}: load_summary.requested_rate = {rate!r}: must be > 0")
    duration = summary.get("send_duration")
    duration = None if duration is None else number(duration, "load_summary.send_duration", where)
    completed = int(number(field_of("successes.count"), "successes.count", where))
    failures = data.get("failures") or {}
    if not isinstance(failures, dict):
        raise TwinInputError(f"{where}: failures: expected an object")
    failed = int(number(failures.get("count", 0), "failures.count", where))

    # older releases: successes.prompt_len; current ones: successes.prompt_tokens (total, cached, uncached and the
    # per-request distribution)
    prompt_field = "successes.prompt_len" if "prompt_len" in ok else "successes.prompt_tokens"
    prompt = LengthSample(quantiles=_quantiles(field_of(prompt_field), prompt_field, where))
    cfg_out = get(client, "data.shared_prefix.output_len", where, required=False)
    ignore_eos = bool(get(client, "server.ignore_eos", where, required=False))
    if ignore_eos and isinstance(cfg_out, int) and cfg_out >= 1:
        output = LengthSample.constant(cfg_out)
    else:
        output = LengthSample(quantiles=_quantiles(field_of("successes.output_len"), "successes.output_len", where))

    ttft = field_of("successes.latency.time_to_first_token")
    e2e = field_of("successes.latency.request_latency")
    metrics: dict[str, float] = {"completed": completed, "failed": failed}
    for field, dist, prefix in (("time_to_first_token", ttft, "ttft"), ("request_latency", e2e, "e2el")):
        if not isinstance(dist, dict):
            raise TwinInputError(f"{where}: successes.latency.{field}: expected an object of percentiles")
        for stat, name in (("mean", "mean"), ("median", "median"), ("p90", "p90"), ("p99", "p99")):
            if stat in dist:
                metrics[f"{name}_{prefix}_ms"] = 1e3 * number(dist[stat], f"successes.latency.{field}.{stat}",
                                                               where)
    metrics.pop("p90_e2el_ms", None)
    out_mean = output.mean
    if completed and out_mean > 1 and "mean_e2el_ms" in metrics and "mean_ttft_ms" in metrics:
        metrics["mean_tpot_ms"] = (metrics["mean_e2el_ms"] - metrics["mean_ttft_ms"]) / (out_mean - 1)
    thr = ok.get("throughput") or {}
    if not isinstance(thr, dict):
        raise TwinInputError(f"{where}: successes.throughput: expected an object (requests_per_sec, ...)")
    if "requests_per_sec" in thr:
        metrics["request_throughput"] = number(thr["requests_per_sec"], "successes.throughput.requests_per_sec",
                                               where)
        metrics["output_throughput"] = metrics["request_throughput"] * out_mean

    timeout = None
    f_lat = failures.get("request_latency") if isinstance(failures, dict) else None
    if failed and isinstance(f_lat, dict) and "min" in f_lat and "max" in f_lat:
        lo, hi = number(f_lat["min"], "failures.request_latency.min", where), \
            number(f_lat["max"], "failures.request_latency.max", where)
        if lo > 0 and hi - lo <= 0.02 * lo:
            timeout = lo

    stage = STAGE_FILE.search(path.name)
    name = f"{experiment or path.parent.name}/stage{stage.group(1)}" if stage else f"{path.parent.name}/{path.stem}"
    tp = server.get("tensor_parallel_size")        # exp_config_server's (tensor_parallelism in the file)
    return MeasuredRun(
        name=name, source="inference-perf", num_requests=count, prompt_tokens=prompt, output_tokens=output,
        metrics=metrics, rate_per_s=rate, max_concurrency=users, duration_s=duration,
        prompt_pool=_prompt_pool(client, where),
        timeout_s=timeout, model=server.get("model") or get(client, "server.model_name", where, required=False),
        tensor_parallel_size=tp if isinstance(tp, int) and not isinstance(tp, bool) else None,
        server={k: server[k] for k in SERVER_KNOBS if k in server}, layout=dict(server.get("layout") or {}),
        experiment=experiment, client=INFERENCE_PERF,
        cold_start=bool(stage) and int(stage.group(1)) == 0,
        scaled_sends=rate is not None and get(client, "load.type", where, required=False) == "constant")


def read_inference_perf(path: Path) -> list[MeasuredRun]:
    """Every stage of an inference-perf results folder (or one stage file), in stage order."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    client, server = _config_beside(folder)
    if server:
        where = str(folder / "exp-config.yaml")
        server, layout = exp_config_server(server, where), layout_fields(server, where)
        if layout:          # the layout the file states (read_stage: the run's layout)
            server["layout"] = layout
    files = sorted(_stage_files(folder), key=lambda p: (int(STAGE_FILE.search(p.name).group(1)), p.name)) \
        if path.is_dir() else [path]
    if not files:
        raise TwinInputError(f"{path}: no stage_<N>_lifecycle_metrics.json files")
    return [read_stage(f, client, server, experiment=folder.name) for f in files]
