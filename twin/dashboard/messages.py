"""What the page says when something is wrong: plain text that Markdown cannot reshape (``:x:`` stays three
characters, not an emoji; ``*`` and ``_`` stay characters), and upload errors that name the user's file and
advise only what the page lets them do."""

from __future__ import annotations

import re
from pathlib import Path

# characters Markdown (and Streamlit's LaTeX, `$`) gives a meaning to anywhere in a line: each is written with a
# backslash in front; `_` only where it could open or close emphasis (not inside a word: max_num_seqs stays)
MARKDOWN_SPECIALS = re.compile(r"([\\`*\[\]~$|]|(?<!\w)_|_(?!\w))")
LINE_START = re.compile(r"^(\s*)([#>+\-=]|\d+[.)])")   # a heading, quote or list marker opening the text
WORD_JOINER = "\u2060"  # invisible; after a colon it keeps ":x:" and ":red[...]" from being read as codes

TRACE_FORMAT_ADVICE = re.compile(r";? ?set workload\.trace\.format to one of [^;()]*")
ZERO_OUTPUT_ADVICE = re.compile(r"\(set workload\.trace\.zero_output: one[^)]*\)")
UPLOAD_TRACE_FORMATS = ("Upload trace reads the format from the file: a CSV with the columns of Azure "
                        "(TIMESTAMP, ContextTokens, GeneratedTokens), BurstGPT (Timestamp, Request tokens, "
                        "Response tokens) or lengths only (num_prefill_tokens, num_decode_tokens), or Mooncake "
                        "JSON Lines; to name the format or other columns, upload a scenario YAML whose "
                        "workload.trace sets format")
UPLOAD_ZERO_OUTPUT = ("(Upload trace refuses such rows; to serve them as 1 token or leave them out, upload a "
                      "scenario YAML with workload.trace.zero_output: one or skip)")


def plain(text: str) -> str:
    """``text`` for ``st.error`` / ``st.markdown`` that renders as exactly these characters."""
    escaped = MARKDOWN_SPECIALS.sub(r"\\\1", str(text))
    escaped = LINE_START.sub(lambda m: m.group(1) + (m.group(2)[:-1] + "\\" + m.group(2)[-1]), escaped)
    return re.sub(r":(?=[\w+\\-])", ":" + WORD_JOINER, escaped)


def name_uploads(message: str, uploads: dict[str, str]) -> str:
    """``message`` with each upload's server path (``uploads``: saved path -> the user's file name) replaced by
    the name the user knows it by."""
    for saved, name in uploads.items():
        for form in {str(Path(saved).resolve()), str(saved)}:
            message = message.replace(form, name)
    return message


def upload_error(message: str, saved: str | Path, filename: str) -> str:
    """An error about an uploaded trace as the user can act on it: the server's copy (a temporary path) named
    by the file they uploaded, and advice about settings Upload trace has no widget for replaced by what it
    does accept."""
    saved = Path(saved)
    for form in {str(saved.resolve()), str(saved)}:
        message = message.replace(form, filename)
    message = TRACE_FORMAT_ADVICE.sub("; " + UPLOAD_TRACE_FORMATS, message)
    return ZERO_OUTPUT_ADVICE.sub(UPLOAD_ZERO_OUTPUT, message)


__all__ = ["name_uploads", "plain", "upload_error"]
