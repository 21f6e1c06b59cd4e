"""Which tokens of an open-loop workload's requests no other request can share.

A block's identity is chained over the prompt segments up to the segment covering its last token
(``twin.core.request``), so a block can be found by another request only if that request names the same
segment key. A key named by one request alone (a unique user message, an output no later turn quotes) makes
every block from its segment's start on private to that request: the prefix cache need not hash or index them
(``KVCacheManager`` counts them; freed, they pass through the free queue as one ``PrivateRun``), which is most
of its work on workloads without shared prefixes.

Keys are compared by their Python hash; two keys with equal hashes count as shared (safe: shared is the
exact, slower path).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from twin.core.request import output_segment_key
from twin.workload.spec import RequestSpec


class SegmentSharing:
    """The segment keys of ``specs`` (prompt segments and each request's own output) named more than once."""

    def __init__(self, specs: Sequence[RequestSpec]) -> None:
        named = np.fromiter(self._key_hashes(specs), dtype=np.int64)
        unique, counts = np.unique(named, return_counts=True)
        self._shared = set(unique[counts > 1].tolist())

    @staticmethod
    def _key_hashes(specs: Sequence[RequestSpec]):
        for spec in specs:
            for key, _ in spec.prompt_segments:
                yield hash(key)
            yield hash(output_segment_key(spec.request_id))

    def private_from_token(self, spec: RequestSpec) -> int | None:
        """The first token of ``spec``'s first private segment (its output counts as a segment after the
        prompt); None when every segment is shared."""
        shared = self._shared
        start = 0
        for key, num_tokens in spec.prompt_segments:
            if hash(key) not in shared:
                return start
            start += num_tokens
        if hash(output_segment_key(spec.request_id)) not in shared:
            return start
        return None
