"""A request as vLLM's V1 engine tracks it, plus the identity of its tokens for the prefix cache.

Token identity comes in one of two forms:

* real token ids (``prompt_token_ids``), as the calibration engine uses; blocks hash their token tuples;
* synthetic *segments*: the prompt is a sequence of ``(segment_key, num_tokens)`` pieces whose content is
  identified by the key alone (a tenant's system prompt, a Mooncake ``hash_id``, a previous turn's output).
  Two prompts share a block-aligned prefix exactly when they share the segments covering it, so traces
  without tokens still drive the prefix cache.

Output tokens are identified by ``output_segment_key(request_id)``, so a multi-turn workload can build the
next turn's prompt as ``previous prompt segments + (output_segment_key(prev_id), prev_output_tokens) + new``.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Sequence
from typing import Any

NONE_HASH = hash(("twin-none-hash",))


class RequestStatus(enum.IntEnum):
    # P/D decode side: blocks allocated, the prompt's KV being pulled from the prefill engine (vLLM's
    # WAITING_FOR_REMOTE_KVS); negative so that ``is_finished`` stays one comparison
    WAITING_FOR_REMOTE_KVS = -1
    WAITING = 0
    RUNNING = 1
    PREEMPTED = 2
    FINISHED_STOPPED = 3
    FINISHED_LENGTH_CAPPED = 4
    FINISHED_ABORTED = 5
    FINISHED_REJECTED = 6

    @property
    def is_finished(self) -> bool:
        return self >= RequestStatus.FINISHED_STOPPED


def output_segment_key(request_id: Hashable) -> tuple:
    """The segment key of a request's generated tokens."""
    return ("out", request_id)


class Request:
    """One request's scheduling state. Counters carry vLLM's names and meanings."""

    __slots__ = (
        "request_id", "arrival_time_s", "num_prompt_tokens", "target_output_tokens", "max_tokens", "stop_at_tokens",
        "task_class", "priority", "num_output_tokens", "num_computed_tokens", "num_cached_tokens",
        "num_preemptions", "status", "spec_token_ids", "num_spec_tokens", "block_hashes",
        "prompt_token_ids", "output_token_ids", "_segments", "_segment_ends", "_segment_bases",
        "reject_reason", "client_data", "admitted_seq", "finish_step_emitted", "private_from_token",
        "load_kv_async",
    )

    def __init__(
        self,
        request_id: Hashable,
        arrival_time_s: float,
        num_prompt_tokens: int,
        target_output_tokens: int,
        *,
        prompt_segments: Sequence[tuple[Hashable, int]] | None = None,
        prompt_token_ids: Sequence[int] | None = None,
        max_tokens: int | None = None,
        task_class: str = "default",
        priority: int = 0,
        client_data: Any = None,
        private_from_token: int | None = None,
    ) -> None:
        if num_prompt_tokens < 1:
            raise ValueError(f"request {request_id}: num_prompt_tokens must be >= 1, got {num_prompt_tokens}")
        if target_output_tokens < 1:
            raise ValueError(f"request {request_id}: target_output_tokens must be >= 1, got {target_output_tokens}")
        self.request_id = request_id
        self.arrival_time_s = float(arrival_time_s)
        self.num_prompt_tokens = int(num_prompt_tokens)
        self.target_output_tokens = int(target_output_tokens)
        self.max_tokens = int(max_tokens) if max_tokens is not None else self.target_output_tokens
        # output tokens at which the request stops: its target, or max_tokens when that is smaller
        self.stop_at_tokens = min(self.target_output_tokens, self.max_tokens)
        self.task_class = task_class
        self.priority = priority
        self.client_data = client_data
        # tokens from here on are this request's alone (no other request's prompt names them): their blocks can
        # only ever be found again by this request, after a preemption (twin.workload.sharing); None: unknown
        self.private_from_token = private_from_token
        # P/D decode side: the prompt's KV is to be pulled from a prefill engine into blocks allocated when the
        # scheduler first takes the request (vLLM's NixlConnector: get_num_new_matched_tokens -> load async)
        self.load_kv_async = False
        self.num_output_tokens = 0
        self.num_computed_tokens = 0
        self.num_cached_tokens = -1  # -1 until the first admission records the prefix hit
        self.num_preemptions = 0
        self.status = RequestStatus.WAITING
        self.num_spec_tokens = 0
        self.spec_token_ids: list[int] = []
        self.block_hashes: list[int] = []
        self.reject_reason: str | None = None
        self.admitted_seq = -1
        self.finish_step_emitted = 0
        self.output_token_ids: list[int] | None = None
        if prompt_token_ids is not None:
            if len(prompt_token_ids) != num_prompt_tokens:
                raise ValueError(f"request {request_id}: {len(prompt_token_ids)} prompt token ids "
                                 f"for num_prompt_tokens={num_prompt_tokens}")
            self.prompt_token_ids = list(prompt_token_ids)
            self.output_token_ids = []
            self._segments = None
        else:
            self.prompt_token_ids = None
            segments = list(prompt_segments) if prompt_segments else [(("prompt", request_id), num_prompt_tokens)]
            total = sum(n for _, n in segments)
            if total != num_prompt_tokens:
                raise ValueError(f"request {request_id}: prompt segments cover {total} tokens, "
                                 f"num_prompt_tokens={num_prompt_tokens}")
            segments.append((output_segment_key(request_id), 1 << 62))
            self._segments = segments
            self._index_segments()

    # ---- counters -------------------------------------------------------------------------------------
    @property
    def num_tokens(self) -> int:
        return self.num_prompt_tokens + self.num_output_tokens

    @property
    def num_tokens_with_spec(self) -> int:
        return self.num_prompt_tokens + self.num_output_tokens + self.num_spec_tokens

    @property
    def is_finished(self) -> bool:
        return self.status >= RequestStatus.FINISHED_STOPPED

    def append_output_tokens(self, count: int, token_ids: Sequence[int] | None = None) -> None:
        self.num_output_tokens += count
        if self.output_token_ids is not None:
            if token_ids is None or len(token_ids) != count:
                raise ValueError(f"request {self.request_id}: real-token request needs {count} token ids")
            self.output_token_ids.extend(token_ids)

    # ---- the finishing rule (the step-by-step path and the fast path both finish requests by it) ---------
    def output_tokens_left(self, max_model_len: int) -> int:
        """Output tokens this request may still emit: up to ``stop_at_tokens`` outputs or ``max_model_len``
        tokens in all, whichever comes first. The step whose emission brings this to 0 finishes the request."""
        by_stop = self.stop_at_tokens - self.num_output_tokens
        by_len = max_model_len - self.num_prompt_tokens - self.num_output_tokens
        return by_stop if by_stop < by_len else by_len

    def finish_status(self) -> RequestStatus:
        """The status of a request that emitted its last token: STOPPED when its output reached its target
        (vLLM: EOS/stop), LENGTH_CAPPED when ``max_tokens`` or ``max_model_len`` cut it first."""
        if self.num_output_tokens >= self.target_output_tokens:
            return RequestStatus.FINISHED_STOPPED
        return RequestStatus.FINISHED_LENGTH_CAPPED

    @property
    def segments(self) -> list[tuple[Hashable, int]] | None:
        """The prompt's ``(segment_key, num_tokens)`` pieces followed by the open-ended output segment (read
        only); None for a real-token request (its content is ``prompt_token_ids``)."""
        return self._segments

    # ---- token identity -------------------------------------------------------------------------------
    def _index_segments(self) -> None:
        # Prefix identity at a segment start: chained over the segments before it, so that
        # identity(T) = (identity at the covering segment's start, segment key, T - start) names the first
        # T tokens exactly (equal content up to T <=> equal segments up to T).
        ends, bases = [], []
        pos, base = 0, NONE_HASH
        for key, n in self._segments:
            bases.append(base)
            pos += n
            ends.append(pos)
            base = hash((base, key, n))
        self._segment_ends = ends
        self._segment_bases = bases

    def prefix_identity(self, num_tokens: int, block_size: int, parent_hash: int | None) -> int:
        """Hash of the block ending at token ``num_tokens`` (a multiple of ``block_size``), chained."""
        return self._block_identities(num_tokens, num_tokens, block_size, parent_hash)[0]

    def block_identities(self, first_block: int, end_block: int, block_size: int,
                         parent_hash: int | None) -> list[int]:
        """``prefix_identity`` of blocks ``first_block .. end_block - 1`` in one call, chained from
        ``parent_hash`` (the hash of block ``first_block - 1``; None before block 0)."""
        return self._block_identities((first_block + 1) * block_size, end_block * block_size, block_size,
                                      parent_hash)

    def _block_identities(self, first_end: int, last_end: int, block_size: int,
                          parent_hash: int | None) -> list[int]:
        """The hashes of the blocks ending at tokens ``first_end, first_end + block_size, .. <= last_end``."""
        out: list[int] = []
        if first_end > last_end:
            return out
        if self._segments is None:
            ids = self.prompt_token_ids
            if last_end > self.num_prompt_tokens:
                ids = ids + self.output_token_ids
            parent = parent_hash if parent_hash is not None else NONE_HASH
            for end in range(first_end, last_end + 1, block_size):
                parent = hash((parent, tuple(ids[end - block_size:end])))
                out.append(parent)
            return out
        # a block's identity depends only on the segment covering its end token: walk the segments once,
        # naming each one's blocks in one comprehension
        ends = self._segment_ends
        i = 0
        while first_end <= last_end:
            # segments are few (typically 1-4): a linear scan beats bisect here
            while ends[i] < first_end:
                i += 1
            seg_end = ends[i]
            key, seg_len = self._segments[i]
            base, seg_start = self._segment_bases[i], seg_end - seg_len
            stop = last_end if last_end < seg_end else seg_end
            if stop - first_end < block_size:
                out.append(hash((base, key, first_end - seg_start)))
                first_end += block_size
            else:
                out += [hash((base, key, end - seg_start)) for end in range(first_end, stop + 1, block_size)]
                first_end += ((stop - first_end) // block_size + 1) * block_size
        return out

    def __repr__(self) -> str:
        return (f"Request({self.request_id!r}, status={self.status.name}, prompt={self.num_prompt_tokens}, "
                f"out={self.num_output_tokens}/{self.target_output_tokens}, computed={self.num_computed_tokens})")
