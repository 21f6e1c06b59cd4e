"""The API front end of one vLLM server with data parallelism: it sends each request to the DP rank (engine
core) with the lowest load score, waiting x 4 + running (vLLM's DP load balancer, ``DPLBAsyncMPClient``, scores
engines by their waiting and running request counts, a waiting request counting four times); ties go to the
lowest rank."""

from __future__ import annotations

from typing import Any, Sequence

WAITING_WEIGHT = 4


def dp_load_score(replica: Any) -> int:
    waiting = len(replica.scheduler.waiting) + len(getattr(replica, "_deferred", ()))
    running = replica.num_outstanding - waiting
    return WAITING_WEIGHT * waiting + running


class DataParallelRouter:
    """Least loaded DP rank by vLLM's score (see the module docstring)."""

    name = "dp_least_loaded"
    reads_replica_state = True

    def route(self, request: Any, replicas: Sequence[Any]) -> int:
        return min(range(len(replicas)), key=lambda i: (dp_load_score(replicas[i]), i))
