"""vLLM V1's KV cache manager for one full-attention group: prefix lookup, slot allocation, block registration
and release, and the prefix-cache counters."""

from __future__ import annotations

from twin.core.block_pool import BlockPool
from twin.core.free_block_queue import KVCacheBlock
from twin.core.request import Request


class KVCacheManager:
    def __init__(self, num_gpu_blocks: int, block_size: int, *, enable_caching: bool = True,
                 max_model_len: int = 1 << 30, reserve_null_block: bool = True,
                 free_unhashed_to_head: bool = False) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        self.block_size = block_size
        self.enable_caching = enable_caching
        self.max_model_len = max_model_len
        self.block_pool = BlockPool(num_gpu_blocks, enable_caching, reserve_null_block=reserve_null_block,
                                    free_unhashed_to_head=free_unhashed_to_head)
        self.req_to_blocks: dict[object, list[KVCacheBlock]] = {}
        self.num_cached_blocks: dict[object, int] = {}
        # prefix-cache counters: every lookup, or (prefix_cache_stats_at_admission) once per admission; first
        # admissions and resumptions after preemption alike
        self.num_lookups = 0
        self.num_query_tokens = 0
        self.num_hit_tokens = 0

    @property
    def usage(self) -> float:
        return self.block_pool.get_usage()

    def get_block_ids(self, request_id: object) -> list[int]:
        return [b.block_id for b in self.req_to_blocks.get(request_id, ())]

    def get_blocks(self, request_id: object) -> list[KVCacheBlock]:
        return self.req_to_blocks.get(request_id, [])

    # ---- hashes ---------------------------------------------------------------------------------------
    def ensure_block_hashes(self, request: Request, num_blocks: int) -> list[int]:
        """Extend ``request.block_hashes`` to ``num_blocks`` full blocks (hashes are computed lazily)."""
        hashes = request.block_hashes
        n = len(hashes)
        if n < num_blocks:
            hashes += request.block_identities(n, num_blocks, self.block_size, hashes[-1] if hashes else None)
        return hashes

    # ---- lookup ---------------------------------------------------------------------------------------
    def get_computed_blocks(self, request: Request, record_stats: bool = True) -> tuple[list[KVCacheBlock], int]:
        """The longest cached block-aligned prefix, at most ``num_tokens - 1`` tokens (the last token is
        always recomputed to produce logits). ``record_stats=False`` leaves the counters to
        ``record_prefix_cache_stats`` (newer vLLM counts a request once, when it is admitted)."""
        if not self.enable_caching:
            return [], 0
        num_tokens = request.num_prompt_tokens + request.num_output_tokens
        max_hit_blocks = self.num_findable_blocks(request, (num_tokens - 1) // self.block_size)
        hashes = self.ensure_block_hashes(request, max_hit_blocks)
        lookup = self.block_pool.cached_block_hash_to_block.get
        hit: list[KVCacheBlock] = []
        for i in range(max_hit_blocks):
            block = lookup(hashes[i])
            if block is None:
                break
            hit.append(block)
        num_hit_tokens = len(hit) * self.block_size
        if record_stats:
            self.record_prefix_cache_stats(request, num_hit_tokens)
        return hit, num_hit_tokens

    def num_findable_blocks(self, request: Request, num_blocks: int) -> int:
        """How many of the first ``num_blocks`` blocks of ``request`` a lookup could find: a request never
        preempted cannot find its private blocks (only it names them, and it has not freed them yet)."""
        private_from = request.private_from_token
        if private_from is None or request.num_preemptions:
            return num_blocks
        return min(num_blocks, private_from // self.block_size)

    def record_prefix_cache_stats(self, request: Request, num_hit_tokens: int) -> None:
        """Count one prefix-cache query of ``request`` that hit ``num_hit_tokens`` tokens. With caching off
        nothing is queried, so nothing is counted (vLLM's lookup returns before it records stats)."""
        if not self.enable_caching:
            return
        self.num_lookups += 1
        self.num_query_tokens += request.num_prompt_tokens + request.num_output_tokens
        self.num_hit_tokens += num_hit_tokens

    # ---- allocation -----------------------------------------------------------------------------------
    def can_fit(self, num_tokens: int) -> bool:
        """Whether ``num_tokens`` tokens could ever be held by one request in this pool."""
        return -(-num_tokens // self.block_size) <= self.block_pool.num_usable_blocks

    def allocate_slots(self, request: Request, num_new_tokens: int, num_new_computed_tokens: int = 0,
                       new_computed_blocks: list[KVCacheBlock] | None = None,
                       num_lookahead_tokens: int = 0, reserve_blocks: int = 0,
                       full_sequence_must_fit: bool = False) -> list[KVCacheBlock] | None:
        """Slots for ``num_new_tokens`` more tokens (after ``num_new_computed_tokens`` prefix-hit tokens held
        in ``new_computed_blocks``). Returns the newly allocated blocks, or None, allocating nothing, when the
        free queue cannot cover them plus ``reserve_blocks`` (an admission watermark). With
        ``full_sequence_must_fit`` (vLLM's ``scheduler_reserve_full_isl`` at admission) the free queue must
        cover the request's whole sequence so far, though only this chunk's blocks are taken."""
        rid = request.request_id
        req_blocks = self.req_to_blocks.get(rid)
        bs = self.block_size
        if (req_blocks is not None and not num_new_computed_tokens and not new_computed_blocks
                and not reserve_blocks and not full_sequence_must_fit
                and request.num_computed_tokens + num_new_tokens + num_lookahead_tokens <= len(req_blocks) * bs):
            # the common case (a running request whose new tokens fit in the blocks it holds): nothing to
            # allocate, at most the blocks just filled to register
            self._register_computed(request, req_blocks, request.num_computed_tokens + num_new_tokens)
            return []
        pool = self.block_pool
        if req_blocks is None:
            req_blocks = self.req_to_blocks[rid] = []
            self.num_cached_blocks[rid] = 0
        num_computed = request.num_computed_tokens + num_new_computed_tokens
        num_need_slots = min(num_computed + num_new_tokens + num_lookahead_tokens, self.max_model_len)
        num_required = -(-num_need_slots // bs)
        num_hit = len(new_computed_blocks) if new_computed_blocks else 0
        num_new_blocks = num_required - len(req_blocks) - num_hit
        # hit blocks that are idle sit in the free queue: taking them uses free capacity too
        num_evictable_hits = 0
        if num_hit:
            for block in new_computed_blocks:
                if block.ref_cnt == 0 and not block.is_null:
                    num_evictable_hits += 1
        num_checked = num_new_blocks
        if full_sequence_must_fit:
            num_full = min(request.num_prompt_tokens + request.num_output_tokens, self.max_model_len)
            if num_full > num_need_slots:
                num_checked = -(-num_full // bs) - len(req_blocks) - num_hit
        if num_checked + num_evictable_hits + reserve_blocks > pool.free_block_queue.num_free_blocks:
            return None
        if num_hit:
            pool.touch(new_computed_blocks)
            req_blocks += new_computed_blocks
        new_blocks = pool.get_new_blocks(num_new_blocks) if num_new_blocks > 0 else []
        if new_blocks:
            req_blocks += new_blocks
        self._register_computed(request, req_blocks, num_computed + num_new_tokens)
        return new_blocks

    def _register_computed(self, request: Request, req_blocks: list[KVCacheBlock], num_computed: int) -> None:
        """Register the blocks that ``num_computed`` computed tokens fill (draft tokens are never cached: capped
        at the request's real tokens)."""
        if self.enable_caching:
            num_tokens = request.num_prompt_tokens + request.num_output_tokens
            self.cache_full_blocks(request, req_blocks, num_computed if num_computed < num_tokens else num_tokens)

    def cache_full_blocks(self, request: Request, req_blocks: list[KVCacheBlock], num_tokens: int) -> None:
        """Register the blocks of ``req_blocks`` that the first ``num_tokens`` tokens fill and that are not
        registered yet; private ones (see ``Request.private_from_token``) without hashing them: counted only,
        while the request was never preempted (``free`` knows them by position), else marked
        (``BlockPool.mark_private``: a resumed request may hold hit blocks among them)."""
        rid = request.request_id
        num_full = num_tokens // self.block_size
        num_cached = self.num_cached_blocks[rid]
        if num_full <= num_cached:
            return
        num_shared = num_full
        if request.private_from_token is not None:
            num_shared = min(num_full, max(num_cached, request.private_from_token // self.block_size))
            if request.num_preemptions:
                self.block_pool.mark_private(req_blocks[num_shared:num_full])
        if num_shared > num_cached:
            hashes = self.ensure_block_hashes(request, num_shared)
            self.block_pool.cache_blocks(req_blocks[num_cached:num_shared], hashes[num_cached:num_shared])
        self.num_cached_blocks[rid] = num_full

    def free(self, request: Request) -> None:
        """Release a finished or preempted request's blocks, last block first (evicted first later). A
        preempted request will look its blocks up again: its private blocks get their real hashes first. A
        finished one never preempted frees its private blocks, counted but never marked, as one private run."""
        blocks = self.req_to_blocks.pop(request.request_id, None)
        num_cached = self.num_cached_blocks.pop(request.request_id, 0)
        if not blocks:
            return
        if request.private_from_token is not None and num_cached:
            first = min(num_cached, request.private_from_token // self.block_size)
            if not request.is_finished:
                hashes = self.ensure_block_hashes(request, num_cached)
                self.block_pool.cache_blocks(blocks[first:num_cached], hashes[first:num_cached])
            elif not request.num_preemptions and first < num_cached:
                private = blocks[first:num_cached]
                private.reverse()
                self.block_pool.free_blocks(reversed(blocks[num_cached:]), private, reversed(blocks[:first]))
                return
        self.block_pool.free_blocks(reversed(blocks))

    @property
    def hit_rate(self) -> float:
        return self.num_hit_tokens / self.num_query_tokens if self.num_query_tokens else 0.0
