"""One run's result: its request and step records, its configuration and the engine's own counters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from twin.results.metrics import compute_metrics
from twin.results.records import REJECTED, RequestRecord, StepRecords, requests_to_frame

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


@dataclass
class SimResult:
    """Everything one run produced.

    ``config`` is a JSON-able summary of the run's configuration; ``sim_start_s``/``sim_end_s`` the simulated
    horizon. The counters are the engine's own totals for the whole run (``None``: derive from the records);
    vLLM counts a prefix-cache query each time a request is scheduled from the waiting queue (again after a
    preemption), which per-request records cannot reproduce, so the engine's counters win when the whole
    run is measured. ``metrics(window=...)`` always derives them from the requests in the window.
    """

    requests: list[RequestRecord] = field(default_factory=list)
    steps: StepRecords = field(default_factory=StepRecords)
    config: dict = field(default_factory=dict)
    sim_start_s: float = 0.0
    sim_end_s: float | None = None
    prefix_cache_hit_tokens: int | None = None
    prefix_cache_query_tokens: int | None = None
    num_preemptions: int | None = None
    num_replicas: int | None = None
    wall_time_s: float | None = None

    @property
    def num_rejected(self) -> int:
        return sum(1 for r in self.requests if r.status == REJECTED)

    def metrics(self, slo: Any = None, window: tuple[float | None, float | None] | None = None,
                **kwargs: Any) -> dict:
        """`vllm bench serve` metrics plus the twin's own keys; see `twin.results.metrics.compute_metrics`."""
        whole = window is None
        return compute_metrics(
            self.requests, self.steps, slo=slo, window=window, num_replicas=self.num_replicas,
            prefix_cache_hit_tokens=self.prefix_cache_hit_tokens if whole else None,
            prefix_cache_query_tokens=self.prefix_cache_query_tokens if whole else None,
            num_preemptions=self.num_preemptions if whole else None,
            **kwargs,
        )

    def requests_frame(self) -> pd.DataFrame:
        return requests_to_frame(self.requests)

    def steps_frame(self) -> pd.DataFrame:
        return self.steps.to_frame()
