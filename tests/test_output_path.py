"""One check of an output path (twin.cli.output_path) behind both adapters: the click option type
``OutputFile`` and the benchmark scripts' ``check_out_path``. Each refuses exactly the same paths, each in its
own words (unchanged for the problems both already refused)."""

from __future__ import annotations

import os
from pathlib import Path

import click
import pytest

from benchmarks.cli_checks import check_out_path
from twin.cli.option_types import OutputFile
from twin.cli.output_path import DIRECTORY, LINK_LOOP, NO_FOLDER, NOT_WRITABLE, output_path_problem
from twin.errors import TwinInputError


@pytest.fixture()
def paths(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "file.json").write_text("{}")
    (tmp_path / "folder").mkdir()
    os.symlink(tmp_path / "loop", tmp_path / "loop")
    return {"new": tmp_path / "new.json", "existing": tmp_path / "file.json", "folder": tmp_path / "folder",
            "loop": tmp_path / "loop", "no folder": tmp_path / "no" / "x.json"}


def _click(path: Path) -> str | None:
    try:
        OutputFile().convert(str(path), None, None)
    except click.BadParameter as exc:
        return exc.message
    return None


def _script(path: Path) -> str | None:
    try:
        check_out_path(path, "--json")
    except TwinInputError as exc:
        return str(exc)
    return None


def test_the_core_names_the_problem_and_what_it_is_about(paths):
    assert output_path_problem(paths["new"]) is None
    assert output_path_problem(paths["existing"]) is None
    assert output_path_problem(paths["folder"]) == (DIRECTORY, paths["folder"])
    assert output_path_problem(paths["loop"]) == (LINK_LOOP, paths["loop"])
    assert output_path_problem(paths["no folder"]) == (NO_FOLDER, paths["no folder"].parent)


def test_each_adapter_words_each_problem(paths):
    q = {k: repr(str(p)) for k, p in paths.items()}
    assert [_click(paths[k]) for k in paths] == [
        None, None, f"File {q['folder']} is a directory.", f"{q['loop']} is a symbolic link loop.",
        f"folder {repr(str(paths['no folder'].parent))} does not exist."]
    assert [_script(paths[k]) for k in paths] == [
        None, None, f"--json {paths['folder']}: a directory", f"--json {paths['loop']}: a symbolic link loop",
        f"--json {paths['no folder']}: folder {paths['no folder'].parent} does not exist"]
    assert _script(None) is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_a_read_only_folder_or_file_is_not_writable_in_both(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    (tmp_path / "ro.json").write_text("{}")
    (tmp_path / "ro.json").chmod(0o444)
    ro.chmod(0o555)
    try:
        for path in (ro / "x.json", tmp_path / "ro.json"):
            assert output_path_problem(path) == (NOT_WRITABLE, path)
            assert _click(path) == f"{str(path)!r} is not writable."
            assert _script(path) == f"--json {path}: not writable"
    finally:
        ro.chmod(0o755)
