"""The API front end of one vLLM server with data parallelism: it sends each request to the DP rank (engine
core) with the lowest load score, waiting x 4 + running (vLLM's DP load balancer, ``DPLBAsyncMPClient``, scores
engines by their waiting and running request counts, a waiting request counting four times); ties go to the
lowest rank. Like vLLM's front end, which counts a request against its engine as soon as it sends it, a request
still on its way down the request path counts as waiting on the rank it was sent to."""

from __future__ import annotations

from typing import Any, Sequence

WAITING_WEIGHT = 4


def dp_load_score(replica: Any, en_route: int = 0) -> int:
    waiting = len(replica.scheduler.waiting) + len(getattr(replica, "deferred", ()))
    running = replica.num_outstanding - waiting
    return WAITING_WEIGHT * (waiting + en_route) + running


class DataParallelRouter:
    """Least loaded DP rank by vLLM's score (see the module docstring)."""

    name = "dp_least_loaded"
    reads_replica_state = True

    def __init__(self) -> None:
        self.routed: list[int] = []

    def route(self, request: Any, replicas: Sequence[Any]) -> int:
        if len(self.routed) != len(replicas):
            self.routed = [0] * len(replicas)
        routed = self.routed
        i = min(range(len(replicas)), key=lambda j: (
            dp_load_score(replicas[j], routed[j] - getattr(replicas[j], "num_submitted", routed[j])), j))
        routed[i] += 1
        return i
