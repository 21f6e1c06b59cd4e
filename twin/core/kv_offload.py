"""KV offload tiers under the GPU prefix cache, with vLLM's offloading-connector semantics.

What vLLM's native offloading (``--kv-offloading-size``, the ``OffloadingConnector`` with its LRU manager,
``vllm/v1/kv_offload``) does, and the twin with it:

* **what is stored, when**: every full block a step computes, when that step is scheduled ("store on
  compute", not on GPU eviction): the connector's scheduler side hands each scheduled request's newly filled
  blocks to the manager's ``prepare_store``, which skips blocks already stored;
* **eviction**: least recently used first; a store that cannot free room enough is dropped whole (vLLM's
  ``prepare_store`` returns nothing then). With a lower tier the host tier's evictions move down to it
  (LMCache-style local disk); the lowest tier's evictions are gone;
* **lookup**: after the GPU prefix hit, the request's next blocks are looked up tier by tier, consecutively,
  stopping at the first block no tier holds (``lookup`` counts consecutive hits); hits are touched (most
  recently used);
* **load**: the hit blocks are copied into fresh GPU blocks when the request is admitted; the twin charges
  their load time (blocks x a tier's seconds per block) to the step that admits it (vLLM loads
  asynchronously and the request waits for it; the step is the twin's stand-in).

The tiers' counters: blocks stored, evicted, and loaded (hits); query tokens are the GPU prefix cache's.
Only an engine with ``SchedulerConfig.kv_offload_tiers`` set builds this manager: without offloading no
per-step work is added.
"""

from __future__ import annotations

from collections import OrderedDict

from twin.core.free_block_queue import KVCacheBlock
from twin.core.kv_cache_manager import KVCacheManager
from twin.core.request import Request


class OffloadTier:
    """One tier: an LRU of block hashes with a capacity in blocks."""

    __slots__ = ("capacity_blocks", "load_s_per_block", "blocks", "num_stored_blocks", "num_evicted_blocks",
                 "num_loaded_blocks", "num_dropped_stores")

    def __init__(self, capacity_blocks: int, load_s_per_block: float) -> None:
        if capacity_blocks < 1:
            raise ValueError(f"an offload tier needs at least 1 block, got {capacity_blocks}")
        self.capacity_blocks = capacity_blocks
        self.load_s_per_block = load_s_per_block
        self.blocks: OrderedDict[int, None] = OrderedDict()
        self.num_stored_blocks = 0
        self.num_evicted_blocks = 0
        self.num_loaded_blocks = 0
        self.num_dropped_stores = 0

    def store(self, hashes: list[int]) -> list[int]:
        """Store the blocks not held yet (LRU eviction for room); returns the evicted hashes. A store larger
        than the whole tier is dropped."""
        blocks = self.blocks
        new = [h for h in dict.fromkeys(hashes) if h not in blocks]
        if not new:
            return []
        if len(new) > self.capacity_blocks:
            self.num_dropped_stores += 1
            return []
        evicted = []
        over = len(blocks) + len(new) - self.capacity_blocks
        while over > 0:
            evicted.append(blocks.popitem(last=False)[0])
            over -= 1
        for h in new:
            blocks[h] = None
        self.num_stored_blocks += len(new)
        self.num_evicted_blocks += len(evicted)
        return evicted


class OffloadTiers:
    """The tiers, top (host memory) first."""

    def __init__(self, tiers: tuple[tuple[int, float], ...]) -> None:
        self.tiers = [OffloadTier(n, s) for n, s in tiers]

    def store(self, hashes: list[int]) -> None:
        """Store on compute into the top tier; each tier's evictions move down one tier."""
        for tier in self.tiers:
            hashes = tier.store(hashes)
            if not hashes:
                return

    def lookup(self, hashes: list[int], start: int, end: int) -> list[int]:
        """Which tier holds each of blocks ``start, start + 1, ..`` (consecutive, stopping at the first block no
        tier holds, before ``end``); hits are touched."""
        found: list[int] = []
        tiers = self.tiers
        for i in range(start, end):
            h = hashes[i]
            for t, tier in enumerate(tiers):
                if h in tier.blocks:
                    tier.blocks.move_to_end(h)
                    found.append(t)
                    break
            else:
                break
        return found


class OffloadingKVCacheManager(KVCacheManager):
    """``KVCacheManager`` with offload tiers: stores every block computed, finds blocks past the GPU hit in the
    tiers, and keeps the load time of the admissions since the last ``take_load_s``."""

    def __init__(self, *args, offload_tiers: tuple[tuple[int, float], ...], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.offload = OffloadTiers(offload_tiers)
        self._pending: dict[object, list[int]] = {}   # request id -> tier of each block found past the GPU hit
        self._load_s = 0.0
        self._just_loaded: tuple[object, int] = (None, 0)   # (request, tokens) of the last load admitted
        self.num_offload_hit_tokens = [0] * len(self.offload.tiers)
        self.offload_load_s = 0.0

    def get_computed_blocks(self, request: Request, record_stats: bool = True) -> tuple[list[KVCacheBlock], int]:
        self._just_loaded = (None, 0)
        hit, num_hit = super().get_computed_blocks(request, record_stats)
        if not self.enable_caching:
            return hit, num_hit
        num_tokens = request.num_prompt_tokens + request.num_output_tokens
        end = self.num_findable_blocks(request, (num_tokens - 1) // self.block_size)
        start = len(hit)
        found = self.offload.lookup(self.ensure_block_hashes(request, end), start, end) if start < end else []
        if found:
            self._pending[request.request_id] = found
            return hit, (start + len(found)) * self.block_size
        self._pending.pop(request.request_id, None)
        return hit, num_hit

    def allocate_slots(self, request: Request, num_new_tokens: int, num_new_computed_tokens: int = 0,
                       new_computed_blocks: list[KVCacheBlock] | None = None, num_lookahead_tokens: int = 0,
                       reserve_blocks: int = 0, full_sequence_must_fit: bool = False) -> list[KVCacheBlock] | None:
        out = super().allocate_slots(request, num_new_tokens, num_new_computed_tokens, new_computed_blocks,
                                     num_lookahead_tokens, reserve_blocks, full_sequence_must_fit)
        if out is not None and num_new_computed_tokens:
            found = self._pending.pop(request.request_id, None)
            if found:   # admitted: the blocks are loaded into the fresh GPU blocks
                self._just_loaded = (request.request_id, len(found) * self.block_size)
                tiers = self.offload.tiers
                for t in found:
                    tier = tiers[t]
                    tier.num_loaded_blocks += 1
                    self._load_s += tier.load_s_per_block
                    self.num_offload_hit_tokens[t] += self.block_size
        return out

    def record_prefix_cache_stats(self, request: Request, num_hit_tokens: int) -> None:
        """The GPU prefix cache's counters count its own hits only (a load from a tier is the connector's)."""
        rid, loaded = self._just_loaded
        if rid == request.request_id:
            num_hit_tokens -= loaded
            self._just_loaded = (None, 0)
        super().record_prefix_cache_stats(request, num_hit_tokens)

    def cache_full_blocks(self, request: Request, req_blocks: list[KVCacheBlock], num_tokens: int) -> None:
        num_full = num_tokens // self.block_size
        num_cached = self.num_cached_blocks[request.request_id]
        if num_full > num_cached:      # store on compute: the blocks this step filled (hit blocks are held)
            self.offload.store(self.ensure_block_hashes(request, num_full)[num_cached:num_full])
        super().cache_full_blocks(request, req_blocks, num_tokens)

    def take_load_s(self) -> float:
        """Seconds of offload loads since the last call (the clock charges them to the step)."""
        s, self._load_s = self._load_s, 0.0
        self.offload_load_s += s
        return s

    def offload_stats(self) -> list[dict[str, float | int]]:
        """Per tier: capacity, blocks stored, evicted and loaded, hit tokens."""
        return [{"capacity_blocks": t.capacity_blocks, "stored_blocks": t.num_stored_blocks,
                 "evicted_blocks": t.num_evicted_blocks, "loaded_blocks": t.num_loaded_blocks,
                 "dropped_stores": t.num_dropped_stores, "hit_tokens": self.num_offload_hit_tokens[i]}
                for i, t in enumerate(self.offload.tiers)]
