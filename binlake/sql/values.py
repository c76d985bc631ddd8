"""Query results as canonical Python values, and how ``binlake sql`` prints them (table, CSV, JSON).

Why a canonical form: the fast path (DuckDB) and Spark hand results over as Arrow tables whose
Python conversion differs in details (aware vs naive timestamps, maps as key/value pairs). Both
engines' results go through :func:`arrow_rows`, so the same query prints the same text whatever
ran it, and the equality test can compare the two engines value by value.

Maps and structs print as Spark SQL's own CLI does (``{"k":"v"}``, ``{"a":1,"b":"x"}``), arrays as
``[1,2]``, binary as ``0x...`` hex, timestamps in UTC; no cell is ever cut or rewritten.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, TextIO


def canonical(value: Any, arrow_type: Any = None) -> Any:
    """One value in canonical form: UTC-naive timestamps, bytes, dicts for maps/structs, lists.

    ``arrow_type`` (the column's Arrow type) tells a map (key/value pairs, possibly empty) from a list.
    """
    import pyarrow as pa

    if value is None:
        return None
    if arrow_type is not None and pa.types.is_map(arrow_type):
        return {canonical(k, arrow_type.key_type): canonical(v, arrow_type.item_type) for k, v in value}
    if arrow_type is not None and pa.types.is_struct(arrow_type):
        return {field.name: canonical(value.get(field.name), field.type) for field in arrow_type}
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).replace(tzinfo=None) if value.tzinfo is not None else value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, dict):
        return {canonical(k): canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        item_type = getattr(arrow_type, "value_type", None)
        return [canonical(item, item_type) for item in value]
    return value


def arrow_rows(table: Any) -> list[tuple[Any, ...]]:
    """Rows of a ``pyarrow.Table`` in canonical form (column by column: duplicate names are fine)."""
    columns = [[canonical(v, column.type) for v in column.to_pylist()] for column in table.columns]
    return list(zip(*columns, strict=True)) if columns else []


def _nested(value: Any) -> str:
    """A value inside a map/struct/array: strings quoted, as Spark SQL's CLI prints them."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return render_text(value)


def render_text(value: Any, null: str = "NULL") -> str:
    """The full text of one cell (never cut, tabs and newlines kept)."""
    if value is None:
        return null
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return "0x" + value.hex()
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dict):
        return "{" + ",".join(f"{_nested(k)}:{_nested(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_nested(v) for v in value) + "]"
    return str(value)


def to_json_value(value: Any) -> Any:
    """A JSON-encodable form: maps/structs as objects, bytes as 0x hex, decimals and times as strings."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {render_text(k) if not isinstance(k, str) else k: to_json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_json_value(v) for v in value]
    if isinstance(value, (Decimal, dt.date, bytes)):
        return render_text(value)
    return str(value)


def write_csv(columns: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO) -> None:
    """RFC 4180 CSV with a header; NULL is an empty field."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([render_text(v, null="") for v in row])


def write_json_lines(columns: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO) -> None:
    """One JSON object per row (JSON Lines), keys in column order."""
    out.writelines(json.dumps({c: to_json_value(v) for c, v in zip(columns, row, strict=True)},
                             ensure_ascii=False) + "\n" for row in rows)


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A text table of full cell values (rich), as ``binlake sql`` prints it."""
    buffer = io.StringIO()
    write_table(columns, rows, buffer)
    return buffer.getvalue().rstrip("\n")


def write_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO) -> None:
    """A rich table; long cells fold onto more lines instead of being cut."""
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(box=box.ASCII, show_lines=False, header_style="bold")
    for name in columns:
        table.add_column(name, overflow="fold")
    for row in rows:
        table.add_row(*[Text(render_text(v)) for v in row])
    width = None if out.isatty() else 1_000_000
    console = Console(file=out, width=width, soft_wrap=False, highlight=False)
    if width is not None:
        console.print(table, width=_natural_width(columns, rows))
    else:
        console.print(table)


def _natural_width(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> int:
    """Width that fits every cell's longest line (files and pipes get the whole value on one line)."""
    widths = [len(c) for c in columns]
    for row in rows:
        for i, value in enumerate(row):
            longest = max((len(line) for line in render_text(value).splitlines() or [""]), default=0)
            widths[i] = max(widths[i], longest)
    return sum(widths) + 3 * len(widths) + 1
