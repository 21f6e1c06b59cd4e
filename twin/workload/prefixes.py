"""Prompt structure of a synthetic class as segments (see ``twin.core.request``).

A first-turn prompt is, in order:

* ``("ts", request_id)`` x ``header_tokens`` when ``prefix_header: timestamp`` (unique, first: nothing after
  it can hit the prefix cache);
* the group's shared system prompt ``("sys", class, group)`` x ``shared_prefix_tokens``; with
  ``prefix_header: shuffled_sections`` it is split into ``sections`` near-equal pieces
  ``("sys", class, group, section)`` whose order is drawn per request;
* one few-shot template ``("fewshot", class, template)`` x ``few_shot.tokens``;
* the unique user text ``("u", request_id)`` x suffix tokens (left out when 0); with a prompt ``pool`` the
  entry's question ``("q", class, group, question)`` instead (no few-shot block, no shuffled sections).

Turn k+1 of a session is turn k's prompt (without turn k's timestamp header) + turn k's output
``(output_segment_key(k's id), its output tokens)`` + a new user message ``("u", request_id)``, behind a new
timestamp header when that mode is on.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from twin.core.request import output_segment_key
from twin.workload.config import ClassConfig
from twin.workload.lengths import Buffered, LengthSampler, TimeSampler
from twin.workload.rng import stream

Segments = tuple[tuple[tuple, int], ...]


def _section_sizes(total: int, sections: int) -> list[int]:
    base, extra = divmod(total, sections)
    return [base + (1 if i < extra else 0) for i in range(sections)]


class ClassSource:
    """Draws one class's requests: lengths, prefix choices, session turns and gaps, each from its own stream
    ``stream(seed, "class", name, quantity)``."""

    def __init__(self, cfg: ClassConfig, seed: int, *, prefix_header: str, header_tokens: int,
                 index: int, base_dir: str | Path | None = None) -> None:
        self.cfg = cfg
        self.name = cfg.name
        where = f"workload.classes[{index}]"
        p = cfg.prompt
        self._header_tokens = header_tokens if prefix_header == "timestamp" else 0

        def s(q: str) -> np.random.Generator:
            return stream(seed, "class", cfg.name, q)

        alone = p.shared_prefix_tokens == 0 and p.few_shot is None  # the suffix is the whole prompt
        suffix = LengthSampler(p.suffix_tokens, field=f"{where}.prompt.suffix_tokens", min_value=int(alone),
                               base_dir=base_dir)
        self._suffix = Buffered(suffix.sample, s("suffix"))
        self._output = self._max_tokens = None
        if cfg.output_tokens is not None:
            output = LengthSampler(cfg.output_tokens, field=f"{where}.output_tokens", min_value=1,
                                   base_dir=base_dir)
            self._output = Buffered(output.sample, s("output"))
        if cfg.max_tokens is not None:
            cap = LengthSampler(cfg.max_tokens, field=f"{where}.max_tokens", min_value=max(1, cfg.min_tokens),
                                base_dir=base_dir)
            self._max_tokens = Buffered(cap.sample, s("max_tokens"))
        self._pool = None
        if p.pool is not None:
            self._build_pool(p, s("pool"))

        g = p.num_prefix_groups
        if g > 1 and p.group_zipf_s is not None:
            w = 1.0 / np.arange(1, g + 1) ** p.group_zipf_s
            probs = w / w.sum()
            self._group = Buffered(lambda r, n: r.choice(g, size=n, p=probs), s("group"))
        elif g > 1:
            self._group = Buffered(lambda r, n: r.integers(0, g, size=n), s("group"))
        else:
            self._group = None
        fs = p.few_shot
        self._template = (Buffered(lambda r, n: r.integers(0, fs.num_templates, size=n), s("template"))
                          if fs is not None and fs.num_templates > 1 else None)

        self._sections: list[int] | None = None
        if prefix_header == "shuffled_sections" and p.shared_prefix_tokens > 0 and p.sections > 1:
            k = p.sections
            self._sections = _section_sizes(p.shared_prefix_tokens, k)
            self._order = Buffered(lambda r, n: np.argsort(r.random((n, k)), axis=1), s("sections"), chunk=256)

        mt = cfg.multi_turn
        self.multi_turn = mt is not None
        if mt is not None:
            turns = LengthSampler(mt.turns, field=f"{where}.multi_turn.turns", min_value=1, base_dir=base_dir)
            self._turns = Buffered(turns.sample, s("turns"))
            gap = TimeSampler(mt.gap_s)
            self._gap = Buffered(gap.sample, s("gap"))
            if mt.message_tokens is not None:
                msg = LengthSampler(mt.message_tokens, field=f"{where}.multi_turn.message_tokens",
                                    base_dir=base_dir)
                self._message = Buffered(msg.sample, s("message"))
            else:
                self._message = Buffered(suffix.sample, s("message"))

    # ---- per-request draws ------------------------------------------------------------------------------
    def draw_turns(self) -> int:
        return int(self._turns.take()) if self.multi_turn else 1

    def draw_gap(self) -> float:
        return float(self._gap.take())

    def draw_lengths(self) -> tuple[int, int | None]:
        """(the length the model would generate, after ``min_tokens``; the client's ``max_tokens`` or None).
        Under ``ignore_eos`` the model runs to ``max_tokens``."""
        cap = int(self._max_tokens.take()) if self._max_tokens is not None else None
        if self.cfg.ignore_eos:
            return cap, cap
        return max(int(self._output.take()), self.cfg.min_tokens), cap

    # ---- a finite prompt pool, cycled -----------------------------------------------------------------------
    def _build_pool(self, p, rng: np.random.Generator) -> None:
        entries = [(g, q) for g in range(p.num_prefix_groups) for q in range(p.pool.prompts_per_group)]
        lengths = [int(self._suffix.take()) for _ in entries]
        order = rng.permutation(len(entries)).tolist() if p.pool.shuffle else list(range(len(entries)))
        self._pool = [(entries[i][0], entries[i][1], lengths[i]) for i in order]
        self._pool_next = 0
        self._pool_history: dict[int, tuple[Segments, int, int, int]] = {}
        self._pool_entry = -1

    def _pool_turn(self, request_id: int) -> tuple[Segments, int]:
        p = self.cfg.prompt
        k = self._pool_next % len(self._pool)
        self._pool_next += 1
        self._pool_entry = k
        group, question, n = self._pool[k]
        ask = (("q", self.name, group, question), n)
        history = self._pool_history.get(k)
        segs = self._header(request_id)
        if history is None:
            if p.shared_prefix_tokens > 0:
                segs.append((("sys", self.name, group), p.shared_prefix_tokens))
            segs.append(ask)
            return tuple(segs), self._header_tokens + p.shared_prefix_tokens + n
        prev_segs, prev_tokens, prev_id, prev_output = history
        segs.extend(prev_segs[1:] if self._header_tokens else prev_segs)
        segs.extend(((output_segment_key(prev_id), prev_output), ask))
        return tuple(segs), prev_tokens + prev_output + n

    def after_request(self, request_id: int, segments: Segments, num_tokens: int, generated: int) -> None:
        """Remember a multi-turn pool entry's conversation (its prompt and the tokens generated for it)."""
        if self._pool is not None and self.cfg.prompt.pool.multi_turn:
            self._pool_history[self._pool_entry] = (segments, num_tokens, request_id, generated)

    def _header(self, request_id: int) -> list:
        return [(("ts", request_id), self._header_tokens)] if self._header_tokens else []

    def first_turn(self, request_id: int) -> tuple[Segments, int]:
        """A new session's (or single request's) prompt segments and their token count."""
        if self._pool is not None:
            return self._pool_turn(request_id)
        p = self.cfg.prompt
        segs = self._header(request_id)
        total = self._header_tokens + p.shared_prefix_tokens
        if p.shared_prefix_tokens > 0:
            group = int(self._group.take()) if self._group is not None else 0
            if self._sections is not None:
                order = self._order.take()
                segs.extend((("sys", self.name, group, int(i)), self._sections[i]) for i in order)
            else:
                segs.append((("sys", self.name, group), p.shared_prefix_tokens))
        if p.few_shot is not None:
            t = int(self._template.take()) if self._template is not None else 0
            segs.append((("fewshot", self.name, t), p.few_shot.tokens))
            total += p.few_shot.tokens
        n = int(self._suffix.take())
        if n > 0:
            segs.append((("u", request_id), n))
        return tuple(segs), total + n

    def next_turn(self, request_id: int, prev_segments: Segments, prev_tokens: int, prev_id: int,
                  prev_output: int) -> tuple[Segments, int]:
        """The next turn's prompt (previous prompt + its output + a new message) and its token count."""
        history = prev_segments[1:] if self._header_tokens else prev_segments
        segs = self._header(request_id)
        segs.extend(history)
        segs.append((output_segment_key(prev_id), prev_output))
        n = int(self._message.take())
        if n > 0:
            segs.append((("u", request_id), n))
        return tuple(segs), prev_tokens + prev_output + n
