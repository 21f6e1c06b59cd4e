"""Measured steps: what the profiler records and the fit reads (no torch here).

A sample is one step's shape (each sequence's new tokens ``n`` and tokens already computed ``c``) with every
timed run of it (warm-up runs are not kept). Samples are saved as JSON together with the environment they were
measured in, so a profile can always be refitted or audited from its raw data::

    {"format": "twin-calibration-samples", "version": 1, "environment": {...}, "plan": {...},
     "samples": [{"kind": "decode", "n": [1, 1], "c": [256, 256], "times_s": [...], "device_times_s": null}],
     "replay": {...}}
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SAMPLES_FORMAT = "twin-calibration-samples"
SAMPLES_VERSION = 1
KINDS = ("prefill", "decode", "mixed", "random", "replay")


@dataclass
class StepSample:
    """One measured step. ``times_s``: synchronised wall time of each timed run (input preparation, forward,
    sampling); ``device_times_s``: CUDA-event time of the device work of each run (None on the CPU)."""

    kind: str
    num_new_tokens: list[int]
    num_computed_before: list[int]
    times_s: list[float]
    device_times_s: list[float] | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.num_new_tokens) != len(self.num_computed_before):
            raise ValueError("a sample's num_new_tokens and num_computed_before differ in length")
        if not self.times_s:
            raise ValueError("a sample needs at least one timed run")

    @property
    def median_s(self) -> float:
        return statistics.median(self.times_s)

    @property
    def device_median_s(self) -> float | None:
        return statistics.median(self.device_times_s) if self.device_times_s else None

    def target_s(self, target: str = "wall") -> float:
        """The figure fitted: the median wall time (``"wall"``) or the median device time (``"device"``)."""
        if target == "device":
            d = self.device_median_s
            if d is None:
                raise ValueError("target 'device' needs CUDA-event times (samples measured on a GPU)")
            return d
        if target != "wall":
            raise ValueError(f"target must be 'wall' or 'device', got {target!r}")
        return self.median_s

    @property
    def spread(self) -> float:
        """Relative interquartile range of the timed runs (0 with fewer than 4 runs): the timing noise."""
        if len(self.times_s) < 4:
            return 0.0
        q = statistics.quantiles(self.times_s, n=4)
        return (q[2] - q[0]) / self.median_s if self.median_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "n": list(self.num_new_tokens), "c": list(self.num_computed_before),
                             "times_s": [float(t) for t in self.times_s],
                             "device_times_s": None if self.device_times_s is None
                             else [float(t) for t in self.device_times_s]}
        if self.meta:
            d["meta"] = self.meta
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StepSample:
        return cls(str(d["kind"]), [int(x) for x in d["n"]], [int(x) for x in d["c"]],
                   [float(t) for t in d["times_s"]],
                   None if d.get("device_times_s") is None else [float(t) for t in d["device_times_s"]],
                   dict(d.get("meta") or {}))


def save_samples(path: str | Path, samples: Sequence[StepSample], environment: dict[str, Any],
                 plan: dict[str, Any] | None = None, replay: dict[str, Any] | None = None) -> Path:
    p = Path(path)
    doc = {"format": SAMPLES_FORMAT, "version": SAMPLES_VERSION, "environment": environment, "plan": plan or {},
           "samples": [s.to_dict() for s in samples]}
    if replay is not None:
        doc["replay"] = replay
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(doc, separators=(",", ":")) + "\n", encoding="utf-8")
    return p


def load_samples(path: str | Path) -> tuple[list[StepSample], dict[str, Any]]:
    """(samples, the whole document) from a samples file."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise ValueError(f"samples {p}: cannot read file ({e.strerror or e})") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"samples {p} line {e.lineno}: not valid JSON ({e.msg})") from None
    if not isinstance(doc, dict) or doc.get("format") != SAMPLES_FORMAT:
        raise ValueError(f"samples {p}: field 'format' must be {SAMPLES_FORMAT!r}")
    if doc.get("version") != SAMPLES_VERSION:
        raise ValueError(f"samples {p}: field 'version' = {doc.get('version')!r}: supported: {SAMPLES_VERSION}")
    try:
        samples = [StepSample.from_dict(d) for d in doc.get("samples", [])]
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"samples {p}: a sample is malformed ({e})") from None
    return samples, doc


def timing_noise(samples: Iterable[StepSample]) -> float | None:
    """Median relative interquartile range over samples with at least 4 runs (None if there are none)."""
    spreads = [s.spread for s in samples if len(s.times_s) >= 4]
    return statistics.median(spreads) if spreads else None
