"""benchmarks/README.md indexes every script in benchmarks/: one row each, naming a file that exists, with a known
kind of run and a section that exists (a docs/fidelity.md heading, or a file)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INDEX = ROOT / "benchmarks" / "README.md"
RUNS = ("reads", "sims", "fits", "times", "GPU", "helper")
ROW = re.compile(r"^\| `([^`]+)` \|")


def _rows() -> list[list[str]]:
    """The index's script rows, each as its cells (script, question, runs, backs)."""
    rows = []
    for line in INDEX.read_text(encoding="utf-8").splitlines():
        if ROW.match(line):
            cells = [c.strip() for c in line.replace("\\|", "/").strip("|").split("|")]
            rows.append(cells)
    return rows


def _script(cells: list[str]) -> str:
    return cells[0].strip("`")


def test_every_script_is_listed_once_and_every_listed_one_exists():
    listed = [_script(c) for c in _rows()]
    on_disk = sorted(p.name for p in (ROOT / "benchmarks").glob("*.py"))
    assert sorted(n for n in set(listed) if listed.count(n) > 1) == []
    assert sorted(set(on_disk) - set(listed)) == [], "add a row to benchmarks/README.md for each"
    assert sorted(set(listed) - set(on_disk)) == [], "rows of benchmarks/README.md naming no file"


def test_every_row_has_four_cells_and_a_known_kind_of_run():
    for cells in _rows():
        assert len(cells) == 4, cells[0]
        assert cells[1], cells[0]
        kinds = [k.strip() for k in re.sub(r"\([^)]*\)", "", cells[2]).split(";")]
        assert all(k in RUNS for k in kinds), (cells[0], cells[2])


def test_every_section_a_row_backs_exists():
    headings = [line[3:] for line in (ROOT / "docs" / "fidelity.md").read_text(encoding="utf-8").splitlines()
                if line.startswith("## ")]
    for cells in _rows():
        for part in (p.strip().strip('"') for p in cells[3].split(";")):
            if part.startswith("Round") or part.startswith("The calibration") or part.startswith("Real vLLM"):
                assert any(h.startswith(part) for h in headings), (cells[0], part)
            for path in re.findall(r"(?:docs/)?[\w.-]+\.md", part):
                assert (ROOT / path).is_file(), (cells[0], path)
