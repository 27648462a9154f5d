"""Rich tables as the CLI prints them: text columns to the left, numbers to the right."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from rich.table import Table


def add_columns(table: Table, columns: Iterable[str], *, left: Collection[str] = (), **style: Any) -> Table:
    """Add each of `columns` to `table`, left-aligned when named in `left`, right-aligned otherwise (a
    number column); `style` (e.g. overflow="fold") applies to every column. Returns `table`."""
    for column in columns:
        table.add_column(column, justify="left" if column in left else "right", **style)
    return table
