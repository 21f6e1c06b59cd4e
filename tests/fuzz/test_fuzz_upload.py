"""Fuzz the dashboard's upload path (``scenario_from_yaml``, what the sidebar hands an uploaded file to) with
scenarios that name server files in every file-naming field, written plainly, quoted, through an alias, or
behind a YAML tag (``!!binary`` base64, ``!!str``, a local tag). Each case runs in-process with every
``open`` recorded: it must end in a one-line ``TwinInputError`` or a scenario that names only allowed files,
and no file outside the allowed roots may have been opened (a finding is counted as silent when a forbidden
path is accepted, as a traceback for any other exception)."""

from __future__ import annotations

import base64
import builtins
import io
import os
import sys
import traceback
from pathlib import Path
from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

import fuzz_tally
from test_fuzz_cli import fuzz

WL = ("workload: {arrivals: {process: poisson, rate_per_s: 4}, num_requests: 5, classes: [{name: a, share: 1, "
      "prompt: {suffix_tokens: 8}, output_tokens: 4}]}\n")
FIELDS = {
    "trace": "workload: {trace: {path: {v}}}\n",
    "gpu": "deployment: {gpu: {v}}\n" + WL,
    "model": "deployment: {model: {v}}\n" + WL,
    "group-gpu": "deployment: {groups: [{gpu: {v}}]}\n" + WL,
    "profile": "cost_model: {kind: profile, profile: {v}}\n" + WL,
    "draft": "speculative_decoding: {method: draft_model, draft_model: {v}, num_speculative_tokens: 2}\n" + WL,
    "empirical": ("workload: {arrivals: {process: poisson, rate_per_s: 4}, num_requests: 5, classes: [{name: a, "
                  "share: 1, prompt: {suffix_tokens: {empirical: {path: {v}, column: c}}}, output_tokens: 4}]}\n"),
    "variant": WL + "variants: {v: {deployment: {model: {v}}}}\n",
}
FORBIDDEN = ["/etc/passwd", "/proc/self/environ", ".git/config", ".streamlit/secrets.toml", "../x", "../../etc/hosts",
             "~/.bashrc", "{traces}/../../../etc/passwd", "/tmp/../etc/passwd", "README.md", "pyproject.toml",
             "twin", "x/../../etc/passwd", "/dev/zero", "./.git/HEAD"]
ALLOWED = ["H100-SXM", "llama-3.1-8b", "a100-80gb"]
FORMS = ["plain", "quoted", "alias", "binary", "str-tag", "local-tag", "bare-tag"]
ROOT = Path(__file__).resolve().parents[2]


def _render(form: str, value: str) -> tuple[str, str]:
    """(the value as written in YAML, a prefix of anchors the value needs)."""
    if form == "quoted":
        return "'" + value.replace("'", "''") + "'", ""
    if form == "alias":
        return "*p", "anchor: &p '" + value.replace("'", "''") + "'\n"
    if form == "binary":
        return "!!binary " + base64.b64encode(value.encode()).decode(), ""
    if form == "str-tag":
        return "!!str '" + value.replace("'", "''") + "'", ""
    if form == "local-tag":
        return "!path '" + value.replace("'", "''") + "'", ""
    if form == "bare-tag":
        return "! '" + value.replace("'", "''") + "'", ""
    return value, ""


@st.composite
def upload_cases(draw):
    field = draw(st.sampled_from(sorted(FIELDS)))
    value = draw(st.sampled_from(FORBIDDEN + ALLOWED))
    form = draw(st.sampled_from(FORMS))
    written, prefix = _render(form, value)
    text = prefix + FIELDS[field].replace("{v}", written)
    forbidden = value in FORBIDDEN or form in ("binary", "str-tag", "local-tag", "bare-tag")
    return text, value, forbidden


def _outside(path: str) -> bool:
    """A file the upload path has no business opening (the twin's own package data is fine)."""
    p = Path(path)
    if not p.is_absolute():
        return True
    p = p.resolve()
    inside = [ROOT / "twin", ROOT / "calibration", ROOT / "scenarios", Path(sys.prefix), Path(sys.base_prefix)]
    return not any(p.is_relative_to(r.resolve()) for r in inside)


@fuzz(40)
@given(upload_cases())
def test_dashboard_uploads(case):
    from twin.dashboard import state as dash
    from twin.errors import TwinInputError

    text, value, forbidden = case
    opened: list[str] = []
    real_open, real_os_open = builtins.open, os.open

    def rec_open(file, *a, **k):
        if isinstance(file, (str, bytes, os.PathLike)):
            opened.append(os.fsdecode(file))
        return real_open(file, *a, **k)

    def rec_os_open(path, *a, **k):
        opened.append(os.fsdecode(path))
        return real_os_open(path, *a, **k)

    kind, problem = "ran", None
    with mock.patch.object(builtins, "open", rec_open), mock.patch.object(io, "open", rec_open), \
            mock.patch.object(os, "open", rec_os_open):
        try:
            dash.scenario_from_yaml(text.encode(), "up.yaml")
        except TwinInputError as exc:
            kind = "refused" if "\n" not in str(exc) else "lines"
        except Exception:  # noqa: BLE001 - a finding
            kind, problem = "traceback", traceback.format_exc()[-2000:]
    bad = [p for p in opened if _outside(p)]
    if kind == "ran" and forbidden:
        kind, problem = "silent", f"accepted {value!r}"
    elif bad:
        kind, problem = "silent", f"opened {bad}"
    fuzz_tally.record("dashboard-upload", kind)
    assert problem is None and kind != "lines", f"{kind}: {text!r}: {problem}"
