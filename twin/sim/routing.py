"""Routers: which replica of a cluster gets a request.

A router has one method, ``route(request, replicas) -> index`` (``twin.sim.replica.Router``); it is called once
per arriving request, in arrival order, and may read the replicas' live state (requests outstanding, KV-pool
usage, waiting queue, prefix-cache contents). Routers are deterministic: ties break on the replica index and
every hash is a stable digest (never Python's per-process ``hash()``), so a run gives the same routing in any
process.

* ``round_robin``: 0, 1, 2, ... (smooth weighted round robin when replicas have weights).
* ``least_outstanding``: fewest requests in flight (waiting + running), divided by the replica's weight.
* ``least_kv_usage``: least KV load: blocks in use plus the blocks the waiting queue's prompts will need, as a
  fraction of the pool (a replica's pool fills only when it schedules, so the queue must count too).
* ``prefix_affinity``: consistent hashing with bounded loads (Mirrokni, Thorup and Zadimoghaddam, 2018) on
  the identity of the prompt's first ``affinity_tokens`` tokens: requests that share that prefix (a tenant's
  system prompt, a conversation's earlier turns, a Mooncake first block) go to the same replica, so its prefix
  cache holds them, unless that replica carries more than ``load_factor`` x its share of the requests in
  flight; then the next replica clockwise on the ring takes it. Adding a replica moves ~1/N of the prefixes.
* ``kv_cache_aware``: looks up the request's block hashes in every replica's prefix cache (what a KV-event
  aware router such as llm-d's precise prefix-cache scorer or Dynamo's KV router knows) and routes to the
  longest cached prefix, ties to the least loaded; when the cluster is imbalanced (in-flight counts differ by
  more than ``balance_abs`` and by a factor ``balance_rel``) it routes to the least loaded instead; a prefix
  cached nowhere falls back to ``prefix_affinity``'s ring so that the first requests of a new prefix stick.
"""

from __future__ import annotations

import bisect
import hashlib
import math
from collections.abc import Hashable, Sequence
from typing import Any

from twin.sim.replica import Replica
from twin.errors import TwinInputError
from twin.core.request import Request

ROUTERS = ("round_robin", "least_outstanding", "least_kv_usage", "prefix_affinity", "kv_cache_aware")


def stable_digest(value: Any) -> int:
    """A 64-bit digest of ``repr(value)`` that is the same in every process (unlike ``hash``)."""
    return int.from_bytes(hashlib.blake2b(repr(value).encode(), digest_size=8).digest(), "big")


def prefix_key(request: Request, num_tokens: int) -> tuple:
    """What names the content of the request's first ``num_tokens`` prompt tokens (capped at the prompt):
    the prompt segments covering them (the last one cut), or the token ids themselves."""
    n = max(1, min(num_tokens, request.num_prompt_tokens))
    segments = getattr(request, "segments", None)
    if segments is None:
        ids = request.prompt_token_ids
        return ("ids", tuple(ids[:n])) if ids is not None else ("req", request.request_id)
    out: list[tuple[Hashable, int]] = []
    covered = 0
    for key, size in segments:
        take = min(size, n - covered)
        out.append((key, take))
        covered += take
        if covered >= n:
            break
    return tuple(out)


def _check_weights(weights: Sequence[float] | None) -> list[float] | None:
    if weights is None:
        return None
    ws = [float(w) for w in weights]
    if not ws or any(not math.isfinite(w) or w <= 0 for w in ws):
        raise TwinInputError(f"router weights: {list(weights)!r}: each must be a number > 0")
    return ws


def _weight(weights: list[float] | None, i: int) -> float:
    return 1.0 if weights is None else weights[i]


def _require(weights: list[float] | None, replicas: Sequence[Replica]) -> None:
    if weights is not None and len(weights) != len(replicas):
        raise TwinInputError(f"router weights: {len(weights)} weights for {len(replicas)} replicas")


class RoundRobinRouter:
    """Replicas in turn; with weights, smooth weighted round robin (nginx): each pick adds every replica's
    weight to its credit and takes the largest credit, minus the total weight."""

    name = "round_robin"
    reads_replica_state = False   # routes the same whenever it is asked (see simulate's one-event arrivals)

    def __init__(self, weights: Sequence[float] | None = None) -> None:
        self.weights = _check_weights(weights)
        self._next = 0
        self._credit: list[float] | None = None

    def route(self, request: Request, replicas: Sequence[Replica]) -> int:
        if self.weights is None:
            i = self._next % len(replicas)
            self._next += 1
            return i
        _require(self.weights, replicas)
        if self._credit is None:
            self._credit = [0.0] * len(replicas)
        credit = self._credit
        for j, w in enumerate(self.weights):
            credit[j] += w
        i = max(range(len(replicas)), key=lambda j: (credit[j], -j))
        credit[i] -= sum(self.weights)
        return i


class LeastOutstandingRouter:
    """Fewest requests in flight per unit of weight; ties to the lowest index."""

    name = "least_outstanding"

    def __init__(self, weights: Sequence[float] | None = None) -> None:
        self.weights = _check_weights(weights)

    def route(self, request: Request, replicas: Sequence[Replica]) -> int:
        _require(self.weights, replicas)
        w = self.weights
        return min(range(len(replicas)), key=lambda i: (replicas[i].num_outstanding / _weight(w, i), i))


def kv_load(replica: Replica) -> float:
    """Blocks in use plus those the waiting prompts still need, over the usable pool (may exceed 1)."""
    kv = replica.scheduler.kv_cache_manager
    pool = kv.block_pool
    bs = kv.block_size
    pending = 0
    for req in replica.scheduler.waiting:
        pending += -(-(req.num_prompt_tokens + req.num_output_tokens - req.num_computed_tokens) // bs)
    used = pool.num_usable_blocks - pool.get_num_free_blocks()
    return (used + pending) / pool.num_usable_blocks


class LeastKvUsageRouter:
    """Least KV load (``kv_load``); ties to fewer requests in flight, then the lowest index."""

    name = "least_kv_usage"

    def route(self, request: Request, replicas: Sequence[Replica]) -> int:
        return min(range(len(replicas)), key=lambda i: (kv_load(replicas[i]), replicas[i].num_outstanding, i))


class _Ring:
    """A consistent-hash ring: ``virtual_nodes`` points per replica (more for heavier replicas)."""

    def __init__(self, num_replicas: int, virtual_nodes: int, weights: list[float] | None) -> None:
        points: list[tuple[int, int]] = []
        top = max(weights) if weights else 1.0
        for i in range(num_replicas):
            count = max(1, round(virtual_nodes * _weight(weights, i) / top))
            points.extend((stable_digest(("replica", i, v)), i) for v in range(count))
        points.sort()
        self.points = [p for p, _ in points]
        self.owners = [i for _, i in points]

    def walk(self, digest: int):
        """Replicas in ring order from ``digest`` clockwise, each once."""
        seen: set[int] = set()
        n = len(self.points)
        start = bisect.bisect_left(self.points, digest)
        for k in range(n):
            i = self.owners[(start + k) % n]
            if i not in seen:
                seen.add(i)
                yield i


class PrefixAffinityRouter:
    """Consistent hashing with bounded loads on the first ``affinity_tokens`` tokens' identity.

    A replica may take the request only while its requests in flight stay within
    ``ceil(load_factor * (total in flight + 1) * weight share)``; the first replica clockwise from the prefix's
    point that has room takes it (one always has: the bound is above the average)."""

    name = "prefix_affinity"

    def __init__(self, affinity_tokens: int = 256, load_factor: float = 1.25, virtual_nodes: int = 64,
                 weights: Sequence[float] | None = None) -> None:
        if isinstance(affinity_tokens, bool) or not isinstance(affinity_tokens, int) or affinity_tokens < 1:
            raise TwinInputError(f"prefix_affinity.affinity_tokens: {affinity_tokens!r}: must be an integer >= 1")
        if not isinstance(load_factor, (int, float)) or not load_factor >= 1.0:
            raise TwinInputError(f"prefix_affinity.load_factor: {load_factor!r}: must be a number >= 1 "
                                 f"(1 = perfectly balanced, larger = more affinity)")
        if isinstance(virtual_nodes, bool) or not isinstance(virtual_nodes, int) or virtual_nodes < 1:
            raise TwinInputError(f"prefix_affinity.virtual_nodes: {virtual_nodes!r}: must be an integer >= 1")
        self.affinity_tokens = affinity_tokens
        self.load_factor = float(load_factor)
        self.virtual_nodes = virtual_nodes
        self.weights = _check_weights(weights)
        self._ring: _Ring | None = None
        self.num_spilled = 0  # requests the load bound sent past their prefix's home replica

    def home(self, request: Request, num_replicas: int) -> list[int]:
        if self._ring is None or len(set(self._ring.owners)) != num_replicas:
            self._ring = _Ring(num_replicas, self.virtual_nodes, self.weights)
        return list(self._ring.walk(stable_digest(prefix_key(request, self.affinity_tokens))))

    def route(self, request: Request, replicas: Sequence[Replica]) -> int:
        _require(self.weights, replicas)
        order = self.home(request, len(replicas))
        total = sum(r.num_outstanding for r in replicas) + 1
        wsum = sum(self.weights) if self.weights else float(len(replicas))
        for k, i in enumerate(order):
            bound = math.ceil(self.load_factor * total * _weight(self.weights, i) / wsum)
            if replicas[i].num_outstanding + 1 <= bound:
                if k:
                    self.num_spilled += 1
                return i
        return min(range(len(replicas)), key=lambda i: (replicas[i].num_outstanding / _weight(self.weights, i), i))


def cached_prefix_blocks(replica: Replica, request: Request) -> int:
    """Blocks of the request's prompt that the replica's prefix cache holds now (as its next lookup would
    find them: whole blocks, leaving the prompt's last token to be computed). Does not touch the cache."""
    kv = replica.scheduler.kv_cache_manager
    if not kv.enable_caching:
        return 0
    bs = kv.block_size
    n = kv.num_findable_blocks(request, (request.num_prompt_tokens - 1) // bs)
    if n <= 0:
        return 0
    # the same hashes the replica's own lookup computes (and caches on the request) when it admits it
    hashes = kv.ensure_block_hashes(request, n)
    lookup = kv.block_pool.cached_block_hash_to_block
    hit = 0
    for i in range(n):
        if hashes[i] not in lookup:
            break
        hit += 1
    return hit


class KvCacheAwareRouter:
    """Longest prefix actually cached, with a load guard; new prefixes follow ``PrefixAffinityRouter``."""

    name = "kv_cache_aware"

    def __init__(self, balance_abs: int = 16, balance_rel: float = 1.5, affinity_tokens: int = 256,
                 load_factor: float = 1.25, weights: Sequence[float] | None = None) -> None:
        if isinstance(balance_abs, bool) or not isinstance(balance_abs, int) or balance_abs < 0:
            raise TwinInputError(f"kv_cache_aware.balance_abs: {balance_abs!r}: must be an integer >= 0")
        if not isinstance(balance_rel, (int, float)) or not balance_rel >= 1.0:
            raise TwinInputError(f"kv_cache_aware.balance_rel: {balance_rel!r}: must be a number >= 1")
        self.balance_abs = balance_abs
        self.balance_rel = float(balance_rel)
        self.weights = _check_weights(weights)
        self.fallback = PrefixAffinityRouter(affinity_tokens, load_factor, weights=weights)

    def route(self, request: Request, replicas: Sequence[Replica]) -> int:
        _require(self.weights, replicas)
        w = self.weights
        loads = [r.num_outstanding / _weight(w, i) for i, r in enumerate(replicas)]
        lo, hi = min(loads), max(loads)
        if hi - lo > self.balance_abs and hi > self.balance_rel * lo:
            return min(range(len(replicas)), key=lambda i: (loads[i], i))
        block_sizes = {r.scheduler.kv_cache_manager.block_size for r in replicas}
        if len(block_sizes) > 1:  # hashes are per block size: only the fallback makes sense
            return self.fallback.route(request, replicas)
        hits = [cached_prefix_blocks(r, request) for r in replicas]
        best = max(hits)
        if best == 0:
            return self.fallback.route(request, replicas)
        return min(range(len(replicas)), key=lambda i: (-hits[i], loads[i], i))


_PARAMS: dict[str, tuple[str, ...]] = {
    "round_robin": ("weights",),
    "least_outstanding": ("weights",),
    "least_kv_usage": (),
    "prefix_affinity": ("affinity_tokens", "load_factor", "virtual_nodes", "weights"),
    "kv_cache_aware": ("balance_abs", "balance_rel", "affinity_tokens", "load_factor", "weights"),
}
_CLASSES = {
    "round_robin": RoundRobinRouter,
    "least_outstanding": LeastOutstandingRouter,
    "least_kv_usage": LeastKvUsageRouter,
    "prefix_affinity": PrefixAffinityRouter,
    "kv_cache_aware": KvCacheAwareRouter,
}


def make_router(name: str, **params: Any):
    """A fresh router by name (a router keeps state, so one per run). ``weights`` (one per replica) is
    dropped for routers that do not use it; other unknown parameters are an error."""
    if name not in _CLASSES:
        raise TwinInputError(f"router: {name!r} is not a router; allowed: {', '.join(ROUTERS)}")
    allowed = _PARAMS[name]
    if "weights" in params and "weights" not in allowed:
        params = {k: v for k, v in params.items() if k != "weights"}
    for key in params:
        if key not in allowed:
            raise TwinInputError(f"router {name}: unknown parameter {key!r}; allowed: "
                                 f"{', '.join(allowed) or 'none'}")
    if params.get("weights") is not None and len(set(params["weights"])) == 1:
        params = {k: v for k, v in params.items() if k != "weights"}  # equal weights: the plain policy
    return _CLASSES[name](**params)
