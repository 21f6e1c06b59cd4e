"""Writing small inference-perf result folders for the fitting tests: a run's metrics as that client reports
them (seconds, percentile objects), with its configuration and the server's settings beside them."""

from __future__ import annotations

import json
from pathlib import Path

import yaml


def _dist(mean: float, median: float, p90: float, p99: float, lo: float | None = None,
          hi: float | None = None) -> dict:
    lo = min(median, mean) * 0.8 if lo is None else lo
    hi = p99 * 1.1 if hi is None else hi
    return {"mean": mean, "min": lo, "p10": (lo + median) / 2, "median": median, "p90": p90, "p99": p99,
            "max": hi}


def write_stage(folder: Path, stage: int, *, rate: float, duration_s: float, metrics: dict, prompt_tokens: int,
                output_tokens: int, failed: int = 0, timeout_s: float = 300.0) -> Path:
    """``metrics`` in `vllm bench serve` keys (ms): mean/median/p90/p99 TTFT, mean/median/p99 E2E, completed."""
    count = int(round(rate * duration_s))
    ok = int(metrics.get("completed", count - failed))
    ttft = _dist(*(metrics[k] / 1e3 for k in ("mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms", "p99_ttft_ms")))
    e2e = _dist(*(metrics[k] / 1e3 for k in ("mean_e2el_ms", "median_e2el_ms", "p99_e2el_ms", "p99_e2el_ms")))
    doc = {
        "load_summary": {"count": count, "send_duration": duration_s, "requested_rate": rate,
                         "achieved_rate": rate},
        "successes": {
            "count": ok,
            "latency": {"request_latency": e2e, "time_to_first_token": ttft,
                        "time_per_output_token": _dist(0.001, 0.001, 0.001, 0.001)},
            "throughput": {"requests_per_sec": ok / duration_s, "output_tokens_per_sec": 0.0},
            "prompt_len": _dist(prompt_tokens, prompt_tokens, prompt_tokens, prompt_tokens, prompt_tokens,
                                prompt_tokens),
            "output_len": _dist(output_tokens * 0.8, output_tokens * 0.8, output_tokens, output_tokens, 0,
                                output_tokens),
        },
        "failures": {"count": failed,
                     "request_latency": _dist(timeout_s + 0.5, timeout_s + 0.5, timeout_s + 0.9, timeout_s + 0.99,
                                              timeout_s, timeout_s + 1.0) if failed else {}},
    }
    path = folder / f"results_stage_{stage}_lifecycle_metrics.json"
    path.write_text(json.dumps(doc))
    return path


def write_config(folder: Path, *, model: str, tp: int, groups: int, per_group: int, system_tokens: int,
                 question_tokens: int, output_tokens: int, stages: list[tuple[float, float]],
                 server: dict | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    client = {"data": {"type": "shared_prefix",
                       "shared_prefix": {"num_groups": groups, "num_prompts_per_group": per_group,
                                         "system_prompt_len": system_tokens, "question_len": question_tokens,
                                         "output_len": output_tokens}},
              "load": {"type": "constant", "stages": [{"rate": r, "duration": d} for r, d in stages]},
              "server": {"type": "vllm", "model_name": model, "ignore_eos": True}}
    (folder / "results_config.yaml").write_text(yaml.safe_dump(client))
    (folder / "exp-config.yaml").write_text(yaml.safe_dump({"model": model, "tensor_parallelism": tp,
                                                            **(server or {})}))


def provenance_entry(parameter: str, value: float):
    """A ``twin.fitting.provenance.Entry`` for ``parameter`` at ``value`` with its stated prior, read off 'test'."""
    from twin.fitting import provenance as pv
    return pv.Entry(parameter, value, pv._stated_prior(parameter.split("@")[0], parameter, {}), "test")


def one_hopper_host_reading(monkeypatch, value_s: float) -> None:
    """``provenance.HOST_READINGS`` reduced to one per-layer reading on Hopper, ``value_s``, off the rows 'h100'."""
    from twin.fitting import provenance as pv
    monkeypatch.setattr(pv, "HOST_READINGS", {"eager_layer_host_s@hopper": (value_s, "test rows",
                                                                             lambda c, d: c == "h100")})


def fake_fold_fit(monkeypatch, value: float, *, held: dict | None = None, result=None) -> tuple[list, list]:
    """``twin.fitting.joint.run_fold`` without simulation: (fit calls, simulated parameters). Each fit call's
    keywords are recorded, with ``fitted_on`` (its training runs' names) added; it returns ``result(calls, kw)`` when
    given, else every fitted term at ``value``, identified. ``held``: what the identification holds at its prior
    (default nothing); each simulation's parameters are recorded and every case gets 1 ms TTFT and TPOT."""
    from types import SimpleNamespace

    from twin.fitting import joint
    calls: list = []
    simulated: list = []

    def fit(cases, **kw):
        calls.append(kw)
        kw["fitted_on"] = [c.run.name for c in cases]
        if result is not None:
            return result(calls, kw)
        return SimpleNamespace(params={**kw["fixed"], **{n: value for n in kw["names"]}},
                               std={n: 1e-9 for n in kw["names"]}, data_share={n: 1.0 for n in kw["names"]})

    def simulate(cases, params, **kw):
        simulated.append(dict(params))
        return [SimpleNamespace(metrics={"mean_ttft_ms": 1.0, "mean_tpot_ms": 1.0}) for _ in cases]
    monkeypatch.setattr(joint, "fit", fit)
    monkeypatch.setattr(joint, "held_at_prior", lambda cases, names: dict(held or {}))
    monkeypatch.setattr(joint, "simulate_cases", simulate)
    return calls, simulated


def silicon_row(name: str, model: str, gpu: str, tp: int, version: str, weight_dtype: str | None = None,
                fuse: bool = False):
    """A ``twin.fitting.silicon.SiliconCase`` of one small closed-loop run (C = 4, 512 in / 32 out) on ``model`` /
    ``gpu`` at TP ``tp`` and vLLM ``version``; ``fuse``: the server fuses all-reduce with RMSNorm."""
    import dataclasses
    from twin.fitting.fit import Case
    from twin.fitting.measured_run import LengthSample, MeasuredRun
    from twin.fitting.replay import Target
    from twin.fitting.silicon import SiliconCase
    server = {"enable_prefix_caching": False, "vllm_version": version, **({"fuse_allreduce_rms": True} if fuse else {})}
    run = MeasuredRun(name=name, source="test", num_requests=12, rate_per_s=float("inf"), max_concurrency=4,
                      prompt_tokens=LengthSample.constant(512), output_tokens=LengthSample.constant(32),
                      metrics={"completed": 1.0, "mean_ttft_ms": 50.0, "mean_tpot_ms": 10.0}, server=server,
                      experiment=name)
    case = Case(run, Target(model, gpu, tp, **({"weight_dtype": weight_dtype} if weight_dtype else {})))
    obj = object.__new__(SiliconCase)           # typed as a silicon row (the serving defaults' evidence is not)
    for f in dataclasses.fields(SiliconCase):
        object.__setattr__(obj, f.name, getattr(case, f.name, f.default if f.default is not dataclasses.MISSING
                                                else None))
    return obj
