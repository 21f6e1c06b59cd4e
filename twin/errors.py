"""The one exception type for bad user input. The CLI prints its message as a single line and exits 2."""

import math
from collections.abc import Callable


class TwinInputError(ValueError):
    """Bad input: the message names the field (or file and line), the value, and what is allowed."""


def did_you_mean(name: object, choices: "list[str] | tuple[str, ...]",
                 aliases: "dict[str, str] | None" = None) -> str:
    """``"; did you mean 'eagle-c16'?"`` for the closest of ``choices`` to a mistyped ``name`` (case and
    ``-``/``_`` ignored; ``difflib``'s ratio of 0.6 or more), else ``""``. ``aliases`` (other spelling -> its
    choice) are matched too and suggest their choice: ``h10`` is close to the alias ``h100`` of ``H100-SXM``."""
    import difflib

    def key(text: object) -> str:
        return str(text).lower().replace("_", "-")

    by_key = {key(a): c for a, c in (aliases or {}).items()} | {key(c): c for c in choices}
    close = difflib.get_close_matches(key(name), list(by_key), n=4, cutoff=0.6)
    return suggestion(list(dict.fromkeys(by_key[c] for c in close)))


def suggestion(names: "list[str]") -> str:
    """``"; did you mean 'a' or 'b'?"`` for the first two of ``names``; ``""`` for none."""
    if not names:
        return ""
    return "; did you mean " + " or ".join(repr(n) for n in names[:2]) + "?"


def counted(n: "int | float | None", noun: str) -> str:
    """``1 request``, ``0 requests``, ``1,234 preemptions``: a count with its noun, the count written as the
    tables write one (``twin.results.numbers.count``: exact, thousands separated; ``-`` for None), plural unless
    it reads exactly one (regular nouns only: every caller's noun takes an ``s``), for messages and printed text
    alike (never ``request(s)``; ``twin.results.numbers`` offers it beside the other words a person reads)."""
    text = "-" if n is None else f"{n:,.0f}" if isinstance(n, (int, float)) and math.isfinite(n) else str(n)
    return f"{text} {noun}" if text == "1" else f"{text} {noun}s"


def run_script(main: Callable[[], object]) -> None:
    """Run a script's ``main()`` as the CLI does: a ``TwinInputError`` (a missing ground-truth folder, a broken
    file) is one line on stderr and exit status 2, not a traceback."""
    import sys
    try:
        main()
    except TwinInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
