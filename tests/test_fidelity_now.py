"""docs/fidelity-now.md (issue 33, round 20, 33za) stays true to what it points at: every "Round N: ..." pointer names
a section of docs/fidelity.md, every command it quotes names an existing script and options that script declares,
every path it names exists, every term in its terms table is a parameter the twin knows, it stays one page, and
README and docs/fidelity.md link to it. Cheap static checks, no simulation."""

from __future__ import annotations

import re
from pathlib import Path

from twin.fitting.parameters import PARAMETERS_BY_NAME
from twin.fitting.provenance import embedded_entries

ROOT = Path(__file__).resolve().parents[1]
NOW = ROOT / "docs" / "fidelity-now.md"
TEXT = NOW.read_text()
FLAT = " ".join(TEXT.split())
HEADINGS = {re.sub(r" \(issue 33\)$", "", line[3:].strip())
            for line in (ROOT / "docs" / "fidelity.md").read_text().splitlines() if line.startswith("## Round ")}


def _pointers(text: str) -> list[str]:
    return re.findall(r'"(Round \d+[^"]*)"', text)


def _commands(text: str) -> list[str]:
    """The indented block lines that run a script (``python benchmarks/x.py ...``), comments dropped."""
    return [line.split("#")[0].strip() for line in text.splitlines()
            if line.startswith("    python ")]


def test_one_page():
    assert len(TEXT.splitlines()) <= 250


def test_every_round_pointer_names_a_section():
    pointers = [p for p in _pointers(FLAT) if p != "Round N: ..."]
    assert len(pointers) >= 15
    missing = [p for p in pointers if p not in HEADINGS]
    assert missing == []


def test_pointer_check_catches_a_wrong_title():
    assert _pointers('see "Round 18: the eager step\'s structure" and "Round 18: no such section"') == [
        "Round 18: the eager step's structure", "Round 18: no such section"]
    assert "Round 18: the eager step's structure" in HEADINGS
    assert "Round 18: no such section" not in HEADINGS


def test_every_quoted_command_names_a_script_and_its_options():
    commands = _commands(TEXT)
    assert len(commands) >= 8
    for command in commands:
        words = command.split()
        assert words[0] == "python" and words[1].startswith("benchmarks/"), command
        script = ROOT / words[1]
        assert script.is_file(), command
        source = script.read_text()
        for option in (w.split("=")[0] for w in words[2:] if w.startswith("--")):
            assert f'"{option}"' in source, f"{command}: {option} is not an option of {words[1]}"


def test_every_named_path_exists():
    paths = set(re.findall(r"`((?:twin|benchmarks|docs|tests)/[\w/.-]+)`", TEXT))
    scripts = set(re.findall(r"`(\w+\.py)`", TEXT))
    assert paths and scripts
    for p in paths:
        assert (ROOT / p).exists(), p
    for s in scripts:
        assert any((ROOT / d / s).is_file() for d in ("benchmarks", "twin/fitting", "twin/cost")), s


def test_every_term_in_the_table_is_a_parameter():
    known = set(PARAMETERS_BY_NAME) | {e.parameter for e in embedded_entries()}
    rows = [line for line in TEXT.splitlines() if line.startswith("| `")]
    assert len(rows) >= 20
    for row in rows:
        name = re.match(r"\| `([^`]+)`", row).group(1)
        assert name in known, name


def test_every_scoped_name_it_quotes_can_cover_a_deployment():
    from twin.fitting.scoped import check_scoped_name
    names = set(re.findall(r"`(\w+@[\w.+]+)`", TEXT)) - {"name@scope"}     # the notation itself
    assert len(names) >= 15
    for name in names:
        check_scoped_name(name)


def test_one_held_out_table_to_update():
    assert TEXT.count("| fold (75 cases) |") == 1


def test_linked_from_readme_and_fidelity():
    assert "docs/fidelity-now.md" in (ROOT / "README.md").read_text()
    head = (ROOT / "docs" / "fidelity.md").read_text().splitlines()[:4]
    assert any("docs/fidelity-now.md" in line for line in head)
