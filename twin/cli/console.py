"""The terminal consoles every command prints to (results on stdout, progress and errors on stderr).

A table printed on them fits the width (80 columns and up): wrapped, or split over several tables, never cut
(``twin.results.tables.fit_table``)."""

from typing import Any

from rich.console import Console
from rich.table import Table

from twin.results.tables import fit_table


class FittingConsole(Console):
    """A rich Console whose ``print`` of one table prints it fitted to the width."""

    def print(self, *objects: Any, **kwargs: Any) -> None:  # noqa: A003
        if len(objects) == 1 and isinstance(objects[0], Table):
            for table in fit_table(objects[0], self):
                super().print(table, **kwargs)
            return
        super().print(*objects, **kwargs)


console = FittingConsole()
err_console = FittingConsole(stderr=True)
