"""How much of a traffic's prompts a prefix cache could serve, and what in the prompts defeats it.

The *attainable* hit rate is an oracle: requests in arrival order, an unbounded cache that keeps every full block
ever computed (prompt and output, so a multi-turn session's next turn hits its history), and vLLM's lookup rule
(walk the block-aligned prefix, stop at the first miss, at most ``num_tokens - 1`` tokens). It ignores eviction
and timing, so it bounds what a real server achieves; the gap between the two is eviction (too little KV) or
requests racing ahead of the one that would have filled the cache.

A prompt *defeats* the cache when its first segment is unique to it (a timestamp or request id in front) while
content behind it is shared with other requests: chained block hashes make everything after a differing first
block a miss. The analysis counts those requests and recomputes the oracle with the unique head moved to the
end of the prompt, which is what fixing the prompt template would give.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from twin.workload.spec import RequestSpec

MAX_REQUESTS = 5000  # the oracle looks at the first requests only (prefix structure repeats)


@dataclass(frozen=True)
class PrefixAnalysis:
    num_requests: int
    prompt_tokens: int
    attainable_hit_tokens: int
    block_size: int
    unique_head_requests: int          # requests whose first segment is theirs alone, with shared content behind
    attainable_without_head_tokens: int | None  # the oracle with those unique heads moved to the prompt's end
    head_kind: str | None              # what the unique head is, from its segment key (e.g. 'ts': a timestamp)

    @property
    def attainable_hit_rate(self) -> float:
        return self.attainable_hit_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def unique_head_share(self) -> float:
        return self.unique_head_requests / self.num_requests if self.num_requests else 0.0

    @property
    def attainable_without_head_rate(self) -> float | None:
        if self.attainable_without_head_tokens is None or not self.prompt_tokens:
            return None
        return self.attainable_without_head_tokens / self.prompt_tokens

    @property
    def defeated(self) -> bool:
        """Most requests put a unique block in front of shared content, and removing it would gain hits."""
        gain = (self.attainable_without_head_rate or 0.0) - self.attainable_hit_rate
        return self.unique_head_share >= 0.5 and gain >= 0.05

    def as_dict(self) -> dict[str, Any]:
        return {"num_requests": self.num_requests, "prompt_tokens": self.prompt_tokens,
                "attainable_hit_rate": self.attainable_hit_rate, "block_size": self.block_size,
                "unique_head_share": self.unique_head_share, "head_kind": self.head_kind,
                "attainable_without_head_rate": self.attainable_without_head_rate, "defeated": self.defeated}


def oracle_hit_tokens(specs: Iterable[RequestSpec], block_size: int) -> tuple[int, int]:
    """(hit tokens, prompt tokens) with an unbounded cache, requests in the given order."""
    seen: set[int] = set()
    hit = query = 0
    for spec in specs:
        req = spec.make_request()
        p = spec.num_prompt_tokens
        query += p
        limit = (p - 1) // block_size           # the last prompt token is always recomputed
        k = 0
        while k < limit and req.prefix_identity((k + 1) * block_size, block_size, None) in seen:
            k += 1
        hit += k * block_size
        # every full block the request computes: prompt and all but the last output token
        for j in range(k, (p + spec.output_tokens - 1) // block_size):
            seen.add(req.prefix_identity((j + 1) * block_size, block_size, None))
    return hit, query


def _head_kind(key: Any) -> str:
    if isinstance(key, tuple) and key and isinstance(key[0], str):
        return {"ts": "a per-request timestamp header", "u": "the request's own text",
                "prompt": "a unique prompt"}.get(key[0], f"a unique {key[0]!r} segment")
    return "a unique first segment"


def analyze_prefixes(specs: Sequence[RequestSpec], block_size: int) -> PrefixAnalysis:
    """The oracle hit rate of ``specs`` (sorted by arrival) and whether unique prompt heads defeat it."""
    specs = list(specs)[:MAX_REQUESTS]
    hit, query = oracle_hit_tokens(specs, block_size)
    firsts = Counter(s.prompt_segments[0][0] for s in specs if s.prompt_segments)
    later: Counter = Counter()
    for s in specs:
        for key in {k for k, _ in s.prompt_segments[1:]}:
            later[key] += 1
    unique = [s for s in specs if len(s.prompt_segments) > 1 and firsts[s.prompt_segments[0][0]] == 1
              and later[s.prompt_segments[0][0]] == 0
              and any(later[k] > 1 or firsts[k] > 1 for k, _ in s.prompt_segments[1:])]
    without = None
    kind = None
    if unique:
        kind = _head_kind(unique[0].prompt_segments[0][0])
        ids = {id(s) for s in unique}
        moved = [RequestSpec(s.request_id, s.arrival_s, s.num_prompt_tokens, s.output_tokens,
                             s.prompt_segments[1:] + s.prompt_segments[:1], s.task_class)
                 if id(s) in ids else s for s in specs]
        without, _ = oracle_hit_tokens(moved, block_size)
    return PrefixAnalysis(len(specs), query, hit, block_size, len(unique), without, kind)


def workload_specs(workload: Any, seed: int, base_dir: Path | None = None,
                   limit: int = MAX_REQUESTS) -> list[RequestSpec]:
    """The requests a ``workload:`` config produces, in order: an open-loop list as built; a closed-loop one
    handed out to its users in turn (timing aside, the prompts are the same)."""
    from twin.workload.generate import build_workload

    traffic = build_workload(workload, seed, base_dir=base_dir)
    if isinstance(traffic, list):
        return traffic[:limit]
    out: list[RequestSpec] = []
    users = traffic.concurrency
    idle = 0
    u = 0
    while len(out) < limit and idle < users:
        spec = traffic.next_request(u, 0.0)
        if spec is None:
            idle += 1
        else:
            idle = 0
            out.append(spec)
        u = (u + 1) % users
    return out


__all__ = ["PrefixAnalysis", "analyze_prefixes", "oracle_hit_tokens", "workload_specs"]
