"""An Optuna (TPE) search over a sweep's grid, run as a search of waves like the grid sweep (optional: needs
the ``optuna`` package)."""

from __future__ import annotations

import json
from typing import Any

from twin.errors import TwinInputError
from twin.plan.evaluate import check_metric
from twin.plan.executor import Search, gather
from twin.plan.grid import RATE_KEYS
from twin.plan.overrides import label
from twin.plan.sweep import SweepSpec, all_pass, config_search, sweep_rows


def optuna_search(spec: SweepSpec, *, trials: int, objective: str = "output_throughput",
                  direction: str = "maximize", batch: int = 4, seed: int = 0) -> Search:
    """Optuna's TPE sampler over the grid's values (each axis a categorical choice), ``batch`` trials per
    wave; a trial's value is ``objective`` averaged over replications; a trial that misses the SLOs scores the
    worst possible value. Deterministic for a seed and batch size (not for the number of workers: it does not
    depend on it). Returns the rows of every distinct configuration tried, in trial order."""
    try:
        import optuna
    except ImportError:
        raise TwinInputError("search optuna: the optuna package is not installed (pip install optuna), "
                             "or use the grid search") from None
    check_metric(objective, "objective")
    if direction not in ("maximize", "minimize"):
        raise TwinInputError(f"direction: {direction!r}: allowed: maximize, minimize")
    if trials < 1 or batch < 1:
        raise TwinInputError("trials and batch must be >= 1")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction=direction, sampler=optuna.samplers.TPESampler(seed=seed))
    worst = -1e300 if direction == "maximize" else 1e300
    axes = spec.grid
    labels = {k: [label(v) for v in values] for k, values in axes}
    tried: dict[str, tuple[int, dict[str, Any], Any]] = {}
    order: list[str] = []
    done = 0
    while done < trials:
        n = min(batch, trials - done)
        asked = [study.ask() for _ in range(n)]
        points = []
        for t in asked:
            point = {}
            for k, values in axes:
                choice = t.suggest_categorical(k, labels[k])
                point[k] = values[labels[k].index(choice)]
            points.append(point)
        searches = []
        for point in points:
            config = {k: v for k, v in point.items() if k not in RATE_KEYS}
            sub = SweepSpec(spec.data, [(k, [v]) for k, v in point.items()], spec.base_dir, spec.replications,
                            spec.criteria, "none", spec.prices, spec.per_replica, spec.offered_cache)
            searches.append(config_search(sub, 0, config))
        answers = yield from gather(searches)
        for t, point, ans in zip(asked, points, answers):
            key = json.dumps(point, sort_keys=True, default=repr)
            value = worst
            if ans["error"] is None:
                res = ans["results"][0]
                ok = all_pass(res)
                vals = [r["metrics"].get(objective) for r in res if r.get("ok")]
                if (ok or ok is None) and vals and all(v is not None for v in vals):
                    value = float(sum(vals) / len(vals))
            study.tell(t, value)
            if key not in tried:
                tried[key] = (len(order), point, ans)
                order.append(key)
        done += n
    rows = []
    for key in order:
        idx, point, ans = tried[key]
        config = {k: v for k, v in point.items() if k not in RATE_KEYS}
        sub = SweepSpec(spec.data, [(k, [v]) for k, v in point.items()], spec.base_dir, spec.replications,
                        spec.criteria, "none", spec.prices, spec.per_replica, spec.offered_cache)
        rows.extend(sweep_rows(sub, idx, config, ans))
    return rows
