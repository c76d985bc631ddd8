"""Values of silver's row images as SQL literals a MySQL / MariaDB server reads back to the same value.

Why from silver's images and not gold's values: gold maps some values to what Spark holds (a zero
date becomes NULL, a TIME a string, a TIMESTAMP an instant); the undo SQL must put back exactly what
the server had, so each literal starts from the image as the decoder rendered it
(docs/row_values.md) and the column's type:

* integers in decimal (UNSIGNED from the column, not the image's sign); DECIMAL as its exact text;
  FLOAT / DOUBLE as the shortest text that reads back as the same value; BIT as its integer;
* temporal values as the text the decoder wrote (fractions kept, zero dates kept); TIMESTAMP text is
  UTC, so the script starts with ``SET time_zone = '+00:00'``;
* text as ``_utf8mb4'...'`` (quotes doubled; the script starts with ``SET NAMES utf8mb4``, and the
  server converts to the column's charset), or ``_utf8mb4 X'..'`` when it holds a backslash or a
  control character (so ``NO_BACKSLASH_ESCAPES`` or not, it reads the same); text whose charset the
  binlog did not say and whose bytes are not UTF-8 as ``X'..'`` (the bytes as they were);
* binary strings, BLOBs and geometry as ``X'..'``; JSON as its text; ENUM / SET as their member text
  (their index / bitmask when the binlog gave only that: the server reads those numbers the same).
"""

from __future__ import annotations

from typing import Any

from binlake.gold.types import INTEGER_BITS, MySQLColumn, Rendering, convert_value, spark_type
from binlake.history.errors import HistoryError

#: the session settings the literals assume (the undo script starts with them)
SESSION_SETUP = ("SET NAMES utf8mb4", "SET time_zone = '+00:00'")
_UNSAFE = frozenset("\\\0\n\r\x1a\t\b")


def identifier(name: str) -> str:
    """A MySQL identifier in backquotes (a backquote inside doubled)."""
    return "`" + name.replace("`", "``") + "`"


def text_literal(text: str) -> str:
    if any(ch in _UNSAFE or ord(ch) < 0x20 for ch in text):
        return "_utf8mb4 X'" + text.encode("utf-8").hex().upper() + "'"
    return "_utf8mb4'" + text.replace("'", "''") + "'"


def hex_literal(data: bytes) -> str:
    return "X'" + data.hex().upper() + "'"


def _number(raw: Any, column: MySQLColumn) -> str:
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise HistoryError(f"column {column.name}: {raw!r} is not a number")
    return repr(raw) if isinstance(raw, float) else str(raw)


def literal(raw: Any, column: MySQLColumn, rendering: Rendering = Rendering.DECODED) -> str:
    """``raw`` (one value of a silver JSON image, after ``json.loads``) as a SQL literal for ``column``."""
    if raw is None:
        return "NULL"
    t = column.type
    if t in INTEGER_BITS or t == "year":
        return str(convert_value(raw, column))
    if t in ("decimal", "float", "double"):
        return _number(raw, column)
    if t in ("date", "datetime", "timestamp", "time"):
        return "'" + str(raw).replace("'", "''") + "'"
    if t in ("enum", "set"):
        return str(int(raw)) if isinstance(raw, int) else text_literal(str(raw))
    if t == "json":
        if isinstance(raw, dict) and "partial_json" in raw:
            raise HistoryError(f"column {column.name}: a partial JSON update (only the diffs are in the binlog) "
                               "cannot be undone to a document the image does not hold")
        return text_literal(raw if isinstance(raw, str) else str(raw))
    if t == "bit":
        return str(int.from_bytes(convert_value(raw, column, rendering), "big"))
    if t == "vector":
        raise HistoryError(f"column {column.name}: VECTOR values are not written back (no literal form here)")
    value = convert_value(raw, column, rendering)
    if spark_type(column) == "BINARY" or isinstance(value, bytes):
        return hex_literal(value)
    return text_literal(str(value))
