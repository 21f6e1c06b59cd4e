"""What the fuzz cases did, per category, for the session's summary line."""

from __future__ import annotations

from collections import Counter, defaultdict

CASES: dict[str, Counter] = defaultdict(Counter)


def record(category: str, kind: str) -> None:
    """``kind``: refused (exit 2, one line), ran (exit 0), or a finding (traceback, hang, exit, lines, silent)."""
    CASES[category][kind] += 1


def summary() -> str | None:
    if not CASES:
        return None
    total = sum(sum(c.values()) for c in CASES.values())
    findings = Counter()
    for c in CASES.values():
        for kind, n in c.items():
            if kind not in ("refused", "ran"):
                findings[kind] += n
    per = ", ".join(f"{cat} {sum(c.values())} ({c['refused']} refused, {c['ran']} ran)"
                    for cat, c in sorted(CASES.items()))
    found = ", ".join(f"{k} {n}" for k, n in sorted(findings.items())) or "none"
    return (f"fuzz: {total} cases in {len(CASES)} categories: {per}; findings: {found} "
            f"(tracebacks {findings['traceback']}, hangs {findings['hang']}, silent acceptances {findings['silent']})")
