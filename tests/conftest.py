"""Test-wide settings."""

import contextlib
import os
import sys

import pytest
from hypothesis import settings

# Property tests explore a fixed, reproducible set of examples (the same on every machine and in CI);
# TWIN_HYPOTHESIS_RANDOM=1 explores new ones.
settings.register_profile("reproducible", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile("explore" if os.environ.get("TWIN_HYPOTHESIS_RANDOM") else "reproducible")


@contextlib.contextmanager
def main_module_kept():
    """Put ``sys.modules["__main__"]`` back as it was on the way out.

    Streamlit's ``AppTest`` runs the page as ``__main__`` and leaves it installed. A multiprocessing child
    started later in the same process (the fuzz suite's forkserver children) imports ``__main__``'s file again
    to prepare itself, so it would run the dashboard page, which starts its own worker while the child is
    still bootstrapping, and die before it reports."""
    main = sys.modules.get("__main__")
    try:
        yield
    finally:
        if main is None:
            sys.modules.pop("__main__", None)
        else:
            sys.modules["__main__"] = main


@pytest.fixture(autouse=True)
def _main_module_kept():
    """Every test leaves ``__main__`` as it found it, so the suite passes in any order."""
    with main_module_kept():
        yield


@pytest.fixture
def wide_console():
    """One table per table (no split at 80 columns), so a test reads a table's headers whole."""
    from twin.cli.console import console

    old = console._width
    console.width = 400
    yield
    console._width = old
