"""The fuzz suite's summary: cases and categories run, and what they found."""

import fuzz_tally


def pytest_terminal_summary(terminalreporter):
    line = fuzz_tally.summary()
    if line:
        terminalreporter.write_line(line)
