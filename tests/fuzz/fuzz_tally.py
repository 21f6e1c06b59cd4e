"""What the fuzz cases did, per category, for the session's summary line."""

from __future__ import annotations

from collections import Counter, defaultdict

CASES: dict[str, Counter] = defaultdict(Counter)


def record(category: str, kind: str) -> None:
    """``kind``: refused (exit 2, one line), ran (exit 0), or a finding (traceback, hang, exit, lines, silent)."""
    CASES[category][kind] += 1


FINDINGS = ("traceback", "hang", "oom", "silent", "exit", "lines")


def summary() -> str | None:
    """One line per surface: cases, refused, ran, and the count of each finding (0 when none)."""
    if not CASES:
        return None
    lines = []
    totals = Counter()
    for cat, c in sorted(CASES.items()):
        totals.update(c)
        lines.append(f"  {cat}: {sum(c.values())} cases ({c['refused']} refused, {c['ran']} ran); "
                     + ", ".join(f"{k} {c[k]}" for k in FINDINGS))
    head = (f"fuzz: {sum(totals.values())} cases on {len(CASES)} surfaces; tracebacks {totals['traceback']}, "
            f"hangs {totals['hang']}, out-of-memory {totals['oom']}, silent acceptances {totals['silent']}, "
            f"bad exit {totals['exit']}, multi-line errors {totals['lines']}")
    return "\n".join([head, *lines])
