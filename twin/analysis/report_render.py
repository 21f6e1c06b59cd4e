"""Report rendering shared by ``twin protocol`` and ``twin diagnose``: blocks to Markdown and to HTML, and the files.

A report is built once as a list of blocks (``("h1" | "h2" | "h3", text)``, ``("p", text)``, ``("list", items)``,
``("table", headers, rows)``, ``("code", text)``, ``("figure", key, caption)``) and rendered here to either format,
so the two never disagree: Markdown names each figure, HTML embeds the Plotly figure of that key (plotly.js once,
so the page works offline). ``write_reports`` writes ``<stem>.md``, ``<stem>.html`` and ``<stem>.json`` (the
report's data with NaN and infinity as null). What goes into the blocks and figures lives with each report
(``protocol_report``, ``protocol_figures``, ``diagnose_report``).
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import plotly.graph_objects as go

from twin.errors import TwinInputError

Block = tuple


def _md_cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(blocks: Sequence[Block]) -> str:
    out: list[str] = []
    for b in blocks:
        kind = b[0]
        if kind in ("h1", "h2", "h3"):
            out.append("#" * int(kind[1]) + " " + b[1])
        elif kind == "p":
            out.append(b[1])
        elif kind == "list":
            out.append("\n".join(f"- {item}" for item in b[1]))
        elif kind == "table":
            headers, rows = b[1], b[2]
            lines = ["| " + " | ".join(_md_cell(h) for h in headers) + " |",
                     "|" + "|".join("---" for _ in headers) + "|"]
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
            out.append("\n".join(lines))
        elif kind == "code":
            out.append("```bash\n" + b[1] + "\n```")
        elif kind == "figure":
            out.append(f"*Figure: {b[2]} (in the HTML report).*")
    return "\n\n".join(out) + "\n"


_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1180px;margin:24px auto;padding:0 16px;
color:#222;line-height:1.45}
h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}th,td{border:1px solid #ddd;padding:4px 8px;
text-align:right}th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}
pre{background:#f6f8fa;padding:10px;overflow-x:auto;font-size:.85em;white-space:pre-wrap;word-break:break-all}
.recommend{color:#1a7f37;font-weight:600}.advise_against{color:#cf222e;font-weight:600}.flag{color:#9a6700;
font-weight:600}.no_change{color:#57606a}.info{color:#0969da}
"""


def _inline(text: str) -> str:
    """Markdown-ish emphasis (**bold**, `code`) to HTML, the rest escaped."""
    esc = html.escape(str(text))
    parts = esc.split("**")
    esc = "".join(f"<b>{p}</b>" if i % 2 else p for i, p in enumerate(parts))
    parts = esc.split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def to_html(blocks: Sequence[Block], figures: Mapping[str, go.Figure], title: str) -> str:
    out = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
           f"<style>{_CSS}</style></head><body>"]
    first = True
    for b in blocks:
        kind = b[0]
        if kind in ("h1", "h2", "h3"):
            out.append(f"<{kind}>{_inline(b[1])}</{kind}>")
        elif kind == "p":
            text = b[1]
            if len(text) > 2 and text.startswith("*") and text.endswith("*") and not text.startswith("**"):
                out.append(f"<p><em>{_inline(text[1:-1])}</em></p>")
            else:
                out.append(f"<p>{_inline(text)}</p>")
        elif kind == "list":
            out.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b[1]) + "</ul>")
        elif kind == "table":
            head = "".join(f"<th>{_inline(h)}</th>" for h in b[1])
            rows = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in b[2])
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif kind == "code":
            out.append(f"<pre>{html.escape(b[1])}</pre>")
        elif kind == "figure":
            fig = figures.get(b[1])
            if fig is not None:
                out.append(fig.to_html(full_html=False, include_plotlyjs=first,
                                       config={"displaylogo": False}))
                first = False
    out.append("</body></html>")
    return "\n".join(out)


def write_reports(out_dir: str | Path, stem: str, blocks: Sequence[Block], figures: Mapping[str, go.Figure],
                  title: str, data: Mapping[str, Any]) -> dict[str, Path]:
    """``<stem>.md``, ``<stem>.html`` and ``<stem>.json`` in ``out_dir`` (created)."""
    d = Path(out_dir)
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TwinInputError(f"--out {out_dir}: cannot create the folder ({exc.strerror})") from None
    paths = {"markdown": d / f"{stem}.md", "html": d / f"{stem}.html", "json": d / f"{stem}.json"}
    paths["markdown"].write_text(to_markdown(blocks), encoding="utf-8")
    paths["html"].write_text(to_html(blocks, figures, title), encoding="utf-8")
    paths["json"].write_text(json.dumps(_jsonable(data), indent=1, sort_keys=True, allow_nan=False) + "\n",
                             encoding="utf-8")
    return paths


def _jsonable(v: Any) -> Any:
    if isinstance(v, Mapping):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.ndarray):
        return [_jsonable(x) for x in v.tolist()]
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return f if math.isfinite(f) else None
    if v is None or isinstance(v, str):
        return v
    return str(v)


__all__ = ["Block", "to_html", "to_markdown", "write_reports"]
