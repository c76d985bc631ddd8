"""``asof_table(...)``: the SQL form of ``binlake asof`` in ``binlake sql``.

Why here: the sql stage cannot import history (history reads through it), so ``binlake sql``'s command
line hands this function to the fast path as one of its table functions (:data:`binlake.sql.fast.TableFunction`).
The name is not ``asof``: that is a keyword of DuckDB's dialect (ASOF JOIN).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from binlake.history.errors import HistoryError

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from binlake.config import BinlakeConfig
    from binlake.sql.fast import TableFunction

ASOF_TABLE = "asof_table"
MOMENT_KINDS = ("gtid", "time", "position")


def split_table(text: str) -> tuple[str, str]:
    """``db.table`` (backquotes allowed) -> (db, table)."""
    db, sep, table = text.replace("`", "").partition(".")
    if not sep or not db or not table:
        raise HistoryError(f"a table is named db.table, got {text!r}")
    return db, table


def asof_table_function(cfg: BinlakeConfig) -> TableFunction:
    """``asof_table('source', 'db.table', 'gtid' | 'time' | 'position', 'moment')``: the rows
    ``binlake asof`` prints, typed like gold, as a table a query can filter and join."""

    def rows(arguments: Sequence[str]) -> pa.Table:
        from binlake.history.asof import table_as_of
        from binlake.history.moments import Moment
        from binlake.history.output import as_arrow

        if len(arguments) != 4 or arguments[2].lower() not in MOMENT_KINDS:
            raise HistoryError(f"{ASOF_TABLE} takes ('source', 'db.table', 'gtid' | 'time' | 'position', 'moment'), "
                               f"got {len(arguments)} argument(s): {', '.join(map(repr, arguments))}")
        source, name, kind, text = arguments
        db, table = split_table(name)
        return as_arrow(table_as_of(cfg, source, db, table, Moment(kind.lower(), text)))

    return rows
