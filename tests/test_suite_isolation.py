"""The suite passes in any order: a test that runs the dashboard through Streamlit's ``AppTest`` must not
leave its page installed as ``__main__`` for the tests after it (tests/conftest.py puts it back).

Before the fix, ``pytest tests/test_app.py tests/fuzz`` killed every fuzz child: a multiprocessing child
prepares itself by importing ``__main__``'s file, which was still the dashboard page. The two tests below run
in file order: the first leaves a page behind that a child must not import, the second starts a child."""

from __future__ import annotations

import multiprocessing as mp
import time

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest

# a page that a multiprocessing child must never import: as the child's ``__mp_main__`` it exits with 3
PAGE = 'import streamlit as st\nif __name__ == "__mp_main__":\n    raise SystemExit(3)\nst.write("page")\n'


def test_an_apptest_run_installs_its_page():
    at = AppTest.from_string(PAGE, default_timeout=60).run()
    assert not at.exception
    assert [m.value for m in at.markdown] == ["page"]


def test_a_child_started_after_it_does_not_import_the_page():
    child = mp.get_context("spawn").Process(target=time.sleep, args=(0,))
    child.start()
    child.join(60)
    assert child.exitcode == 0
