"""An open loop with a concurrency cap, as ``vllm bench serve --request-rate R --max-concurrency C`` sends it:
requests become due at their arrival times, but at most C are in flight; a due request waits for a free slot and
is sent (its clock starts) when it gets one. With an infinite rate it is a closed loop of C users."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from twin.workload.spec import RequestSpec


class CappedOpenLoop:
    """Satisfies ``twin.sim.simulate.ClosedLoop``: ``concurrency`` users share one queue of due requests."""

    def __init__(self, specs: Sequence[RequestSpec], max_concurrency: int) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self.concurrency = max_concurrency
        self.max_users = len(specs)     # slots beyond the requests never send one (twin.sim.simulate starts fewer)
        self._specs = specs
        self._next = 0

    def next_request(self, user_index: int, now_s: float) -> RequestSpec | None:
        if self._next >= len(self._specs):
            return None
        spec = self._specs[self._next]
        self._next += 1
        return spec if spec.arrival_s >= now_s else replace(spec, arrival_s=now_s)
