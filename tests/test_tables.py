"""Tables fit 80 columns without cutting a cell: ``twin.results.tables.fit_table`` (kept, wrapped or split into
pages), the comparison of many variants split by variant, and ``twin list`` / ``twin compare`` at COLUMNS=80."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from twin.results.report import render_comparison
from twin.results.tables import fit_table, measure, pack

ROOT = Path(__file__).resolve().parent.parent
TWIN = [sys.executable, "-c", "import sys; from twin.cli.main import main; sys.argv[0] = 'twin'; main()"]


def render(tables, width=80) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None)
    for t in tables:
        console.print(t)
    return buf.getvalue()


def wide_table(columns=12, rows=3) -> Table:
    table = Table(title="Wide")
    for c in range(columns):
        table.add_column(f"metric_{c}_ms", justify="right")
    for r in range(rows):
        table.add_row(*(f"{r}.{c:04d}" for c in range(columns)))
    return table


def test_pack_is_greedy_and_keeps_order():
    assert pack([1, 2, 3, 4, 5], lambda g: sum(g) <= 5) == [[1, 2], [3], [4], [5]]
    assert pack([9], lambda g: False) == [[9]]
    assert pack([], lambda g: True) == []


def test_a_table_that_fits_is_kept_as_it_is():
    console = Console(file=io.StringIO(), width=80)
    table = wide_table(columns=3)
    assert fit_table(table, console) == [table]


def test_a_wide_table_is_split_into_pages_with_every_cell_whole():
    console = Console(file=io.StringIO(), width=80)
    pages = fit_table(wide_table(), console)
    assert len(pages) > 1
    assert all(measure(console, p).maximum <= 80 for p in pages)
    headers = [str(c.header) for p in pages for c in p.columns]
    # each page starts with the row number and the first column; every other column appears exactly once
    assert all([str(c.header) for c in p.columns[:2]] == ["#", "metric_0_ms"] for p in pages)
    assert sorted(h for h in headers if h not in ("#", "metric_0_ms")) == sorted(f"metric_{c}_ms" for c in range(1, 12))
    assert [str(p.title) for p in pages][0] == f"Wide (1/{len(pages)})"
    text = render(pages)
    assert "…" not in text and max(map(len, text.splitlines())) <= 80
    for r in range(3):
        for c in range(12):
            assert f"{r}.{c:04d}" in text


def test_long_text_wraps_in_one_table_and_the_name_stays_whole():
    table = Table(title="Scenarios")
    table.add_column("name")
    table.add_column("description")
    table.add_row("a_rather_long_scenario_name", "word " * 80)
    table.add_row("short", "a-very-long-hyphenated-identifier-that-cannot-wrap-anywhere-at-all " * 2)
    console = Console(file=io.StringIO(), width=80)
    fitted = fit_table(table, console)
    assert len(fitted) == 1
    text = render(fitted)
    assert "…" not in text and max(map(len, text.splitlines())) <= 80
    assert "a_rather_long_scenario_name" in text


def test_many_variants_compare_one_page_at_a_time():
    base = {"request_throughput": 10.0, "mean_ttft_ms": 100.0, "p99_ttft_ms": 200.0, "completed": 100}
    runs = {"baseline": base}
    for i in range(6):
        runs[f"a-long-variant-name-{i}"] = {k: v * (1 + i / 10) for k, v in base.items()}
    buf = io.StringIO()
    console = Console(file=buf, width=80, color_system=None)
    render_comparison(runs, console=console)
    text = buf.getvalue()
    assert "…" not in text and max(map(len, text.splitlines())) <= 80
    for name in runs:
        assert name in text
    assert "of 6 against baseline" in text


def test_cli_list_fits_80_columns():
    env = {**os.environ, "COLUMNS": "80"}
    proc = subprocess.run([*TWIN, "list"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(map(len, lines)) <= 80 and "…" not in proc.stdout
    for name in ("azure_conversation_replay", "cluster_prefix_affinity", "llama-3.1-70b", "A100-PCIe-80GB"):
        assert name in proc.stdout, name


def test_cli_compare_of_many_variants_fits_80_columns(tmp_path):
    variants = "\n".join(f"  seqs-{n}: {{server: {{max_num_seqs: {n}}}}}" for n in (1, 2, 4, 16, 32, 64))
    path = tmp_path / "many.yaml"
    path.write_text(f"""\
name: many
deployment: {{gpu: H100-SXM, model: llama-3.1-8b}}
server: {{max_num_seqs: 8}}
workload:
  arrivals: {{process: poisson, rate_per_s: 20}}
  num_requests: 20
  classes: [{{name: a, share: 1.0, prompt: {{suffix_tokens: 100}}, output_tokens: 20}}]
variants:
{variants}
""")
    env = {**os.environ, "COLUMNS": "80"}
    proc = subprocess.run([*TWIN, "compare", str(path), "-q", "--full"], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert max(map(len, proc.stdout.splitlines())) <= 80
    tables = [line for line in proc.stdout.splitlines() if line.startswith("|")]
    assert "…" not in proc.stdout
    # more than four variants: the summary first, one row per run ...
    summary = [line for line in tables if re.match(r"^\| (baseline \(ref\)|seqs-\d+) ", line)]
    assert [line.split("|")[1].strip() for line in summary[:7]] == \
        ["baseline (ref)", *(f"seqs-{n}" for n in (1, 2, 4, 16, 32, 64))]
    # ... then (--full) every metric, a few variants at a time beside the baseline
    headers = [line for line in tables if line.startswith("| metric")]
    for n in (1, 2, 4, 16, 32, 64):
        assert any(f" seqs-{n} |" in line for line in headers), n
    short = subprocess.run([*TWIN, "compare", str(path), "-q"], capture_output=True, text=True, cwd=ROOT, env=env,
                           timeout=120)
    assert short.returncode == 0 and "| metric" not in short.stdout and "--full" in short.stdout
