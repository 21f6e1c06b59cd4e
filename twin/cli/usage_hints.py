"""What to write instead, added to a click usage error a newcomer meets (issue 33, the first hour)."""

import re

import click


def usage_hint(exc: click.UsageError) -> str:
    """``"; --set takes KEY=VALUE as one word: --set server.max_num_seqs=4"`` when ``--set server.max_num_seqs 4``
    left the value as an extra argument; ``""`` for any other usage error."""
    extra = re.fullmatch(r"Got unexpected extra arguments? \((.+)\)", exc.format_message())
    params = exc.ctx.params if exc.ctx is not None else {}
    bare = [s for s in params.get("sets") or () if "=" not in s]
    if extra is None or not bare:
        return ""
    return f"; --set takes KEY=VALUE as one word: --set {bare[0]}={extra.group(1).split()[0]}"
