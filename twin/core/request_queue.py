"""The waiting queue: a deque under FCFS, a heap on (priority, arrival time) under the priority policy."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator

from twin.core.request import Request


class FCFSQueue(deque):
    """A deque of requests, first come first served (a subclass, so that ``len`` and truth, asked at every
    step, stay C calls)."""

    __slots__ = ()

    add = deque.append
    prepend = deque.appendleft
    pop = deque.popleft

    def peek(self) -> Request:
        return self[0]


class PriorityQueue:
    """Lower ``priority`` value first, then earlier arrival; a preempted request simply re-enters the heap."""

    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[int, float, int, Request]] = []
        self._seq = 0

    def add(self, request: Request) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (request.priority, request.arrival_time_s, self._seq, request))

    prepend = add

    def peek(self) -> Request:
        return self._heap[0][3]

    def pop(self) -> Request:
        return heapq.heappop(self._heap)[3]

    def remove(self, request: Request) -> None:
        i = next(i for i, entry in enumerate(self._heap) if entry[3] is request)
        self._heap[i] = self._heap[-1]
        self._heap.pop()
        heapq.heapify(self._heap)

    def __len__(self) -> int:
        return len(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)

    def __iter__(self) -> Iterator[Request]:
        return (entry[3] for entry in sorted(self._heap))


def make_queue(policy: str) -> FCFSQueue | PriorityQueue:
    if policy == "fcfs":
        return FCFSQueue()
    if policy == "priority":
        return PriorityQueue()
    raise ValueError(f"scheduling policy must be 'fcfs' or 'priority', got {policy!r}")
