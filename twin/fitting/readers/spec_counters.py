"""Speculative decoding acceptance as a server measured it, read into per-position acceptance rates
(``r_i`` = P(at least i drafts accepted), ``twin.spec_decode.acceptance_input``) for a scenario's
``speculative_decoding.acceptance``.

Two sources:

* vLLM's Prometheus ``/metrics`` text (``curl -s SERVER/metrics > after.txt``): the counters
  ``vllm:spec_decode_num_drafts_total`` and ``vllm:spec_decode_num_accepted_tokens_per_pos_total{position="i"}``
  (vLLM v1's spec-decode metrics), summed over their other labels (engines, models). The counters run from the
  server's start, so a dump taken before the benchmark (``before``) is subtracted when given.
* `vllm bench serve` results of a speculative server: ``spec_decode_num_drafts`` and
  ``spec_decode_per_position_acceptance_rates`` (accepted at position i / drafts, measured over the run), or
  without the rates, ``spec_decode_acceptance_length`` (a mean only: read as vLLM's minimum-variance schedule
  needs ``num_speculative_tokens``, so it is refused here; give the counters).

Every problem is one ``TwinInputError`` line naming the file, the counter or field and what is allowed."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from twin.errors import TwinInputError
from twin.fitting.readers.fields import JsonLines, load_json, number, read_text
from twin.spec_decode.acceptance_input import rates_from_counters
from twin.yaml_input import not_a_file

DRAFTS = "vllm:spec_decode_num_drafts"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
# a sample line of the text exposition format: name{labels} value [timestamp]
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)(\s+\S+)?\s*$")
POSITION = re.compile(r'position="(\d+)"')
MAX_POSITIONS = 64


@dataclass(frozen=True)
class MeasuredAcceptance:
    num_drafts: float
    accepted_per_position: tuple[float, ...]
    rates: tuple[float, ...]          # r_1..r_k
    source: str

    @property
    def mean_acceptance_length(self) -> float:
        """Tokens per verification, the target's own included: 1 + sum of r_i."""
        return 1.0 + sum(self.rates)

    def scenario_entry(self) -> dict:
        """The ``speculative_decoding.acceptance`` entry for a scenario."""
        return {"counters": {"num_drafts": self.num_drafts,
                             "accepted_per_position": list(self.accepted_per_position)}}


def _metrics_counters(path: Path) -> tuple[float, dict[int, float]]:
    drafts, per_pos, seen = 0.0, {}, False
    for i, line in enumerate(read_text(path).splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            continue
        name, labels, raw = m.group(1), m.group(2) or "", m.group(3)
        base = name[:-len("_total")] if name.endswith("_total") else name
        if base not in (DRAFTS, PER_POS) or name.endswith("_created"):
            continue
        try:
            value = float(raw)
        except ValueError:
            raise TwinInputError(f"{path}, line {i}: {name} = {raw!r}: not a number") from None
        if not math.isfinite(value) or value < 0:
            raise TwinInputError(f"{path}, line {i}: {name} = {raw}: a counter is a finite number >= 0")
        seen = True
        if base == DRAFTS:
            drafts += value
        else:
            pos = POSITION.search(labels)
            if not pos:
                raise TwinInputError(f"{path}, line {i}: {name} has no position label")
            k = int(pos.group(1))
            if k >= MAX_POSITIONS:
                raise TwinInputError(f"{path}, line {i}: position {k}: at most {MAX_POSITIONS} draft positions")
            per_pos[k] = per_pos.get(k, 0.0) + value
    if not seen:
        raise TwinInputError(f"{path}: no {DRAFTS}_total or {PER_POS}_total counter: a /metrics dump of a server "
                             f"running speculative decoding has them")
    return drafts, per_pos


def _positions(per_pos: dict[int, float], where: str) -> list[float]:
    if not per_pos:
        raise TwinInputError(f"{where}: no {PER_POS}_total counter (one per draft position)")
    k = max(per_pos) + 1
    missing = [i for i in range(k) if i not in per_pos]
    if missing:
        raise TwinInputError(f"{where}: {PER_POS}_total has no position=\"{missing[0]}\" (positions must run "
                             f"0..{k - 1})")
    return [per_pos[i] for i in range(k)]


def _rates(drafts: float, accepted: list[float], where: str) -> tuple[float, ...]:
    try:
        return tuple(rates_from_counters(drafts, accepted))
    except ValueError as exc:      # the acceptance module names the counter; the file goes first
        raise TwinInputError(f"{where}: {str(exc).lstrip('.')}") from None


def from_metrics_dump(path: Path, before: Path | None = None) -> MeasuredAcceptance:
    drafts, per_pos = _metrics_counters(path)
    where = str(path)
    if before is not None:
        d0, p0 = _metrics_counters(before)
        where = f"{path} - {before}"
        if d0 > drafts or any(p0.get(k, 0.0) > v for k, v in per_pos.items()):
            raise TwinInputError(f"{where}: a counter went down between the dumps (server restarted?); give "
                                 f"dumps of one server run, the earlier as --acceptance-before")
        drafts -= d0
        per_pos = {k: v - p0.get(k, 0.0) for k, v in per_pos.items()}
    accepted = _positions(per_pos, where)
    return MeasuredAcceptance(drafts, tuple(accepted), _rates(drafts, accepted, where), where)


def from_bench(doc: dict, where: str) -> MeasuredAcceptance:
    rates = doc.get("spec_decode_per_position_acceptance_rates")
    if rates is None:
        raise TwinInputError(f"{where}: missing field spec_decode_per_position_acceptance_rates (the result of a "
                             f"server without speculative decoding, or an older vLLM; give a /metrics dump)")
    if not isinstance(rates, list) or not rates or len(rates) > MAX_POSITIONS:
        raise TwinInputError(f"{where}: spec_decode_per_position_acceptance_rates must be a list of 1 to "
                             f"{MAX_POSITIONS} rates")
    rates = [number(r, f"spec_decode_per_position_acceptance_rates[{i}]", where) for i, r in enumerate(rates)]
    drafts = doc.get("spec_decode_num_drafts")
    drafts = 1.0 if drafts is None else number(drafts, "spec_decode_num_drafts", where)
    accepted = [r * drafts for r in rates]
    return MeasuredAcceptance(drafts, tuple(accepted), _rates(drafts, accepted, where), where)


def read_acceptance(path: str | Path, before: str | Path | None = None) -> MeasuredAcceptance:
    """Per-position acceptance from a /metrics text dump or a `vllm bench serve` result (the last line of an
    ``--append-result`` file)."""
    p = Path(path)
    if not p.is_file():
        raise TwinInputError(f"--acceptance {p}: {not_a_file(p) or 'no such file'}; give the file itself")
    text = read_text(p).lstrip()
    if text[:1] in ("{", "["):
        if before is not None:
            raise TwinInputError(f"--acceptance-before {before}: only with a /metrics dump (a vllm bench serve "
                                 f"result measures its own run)")
        doc = load_json(p)
        if isinstance(doc, JsonLines):
            doc = doc[-1]
        if not isinstance(doc, dict):
            raise TwinInputError(f"{p}: expected a vllm bench serve result (a JSON object)")
        return from_bench(doc, str(p))
    return from_metrics_dump(p, None if before is None else Path(before))
