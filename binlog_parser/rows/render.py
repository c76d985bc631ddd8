"""Column values -> the text MySQL's SELECT prints (one set of rules for the CLI JSON, the text
view and the Spark jobs' ``map<string,string>`` columns).

``render_value(value, column)`` -> JSON-able: integers as JSON numbers (strings beyond 2**53),
DOUBLE as JSON numbers equal to MySQL's printed value, FLOAT as the shortest number that is the
stored float32 (see ``numbers.format_float``), DECIMAL/dates/times/YEAR/strings/
ENUM/SET/JSON as MySQL's text, binary data (BLOB, BINARY, BIT, GEOMETRY, bytes of unknown
charset that are not UTF-8) as ``0x``-prefixed hex, VECTOR as a list of numbers, NULL as None.

``render_value_text(value, column)`` -> ``str | None``: the same as a string (VECTOR as
MySQL's ``VECTOR_TO_STRING``), NULL -> None.

``render_value_bytes(value, column)`` -> ``bytes | None``: what the server's text protocol sends
(utf8mb4 text, raw bytes for binary data), for comparisons with ``mysql --batch`` output.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from binlog_parser.rows.column_types import ColumnType as T
from binlog_parser.rows.decimal import decimal_text
from binlog_parser.rows.json_binary import MySQLJson
from binlog_parser.rows.json_diff import PartialJson, mysql_quote
from binlog_parser.rows.numbers import format_double, format_float, shortest_float32
from binlog_parser.rows.temporal import MySQLDate, MySQLDateTime, MySQLTime, MySQLTimestamp
from binlog_parser.rows.values import Geometry, Vector

_MAX_SAFE = 2 ** 53


def _is_float_col(column) -> bool:
    return column is not None and column.type == T.FLOAT


def _bytes_text(value: bytes, column) -> str:
    if column is not None and (column.is_binary or column.charset is not None):
        return "0x" + value.hex()
    try:  # charset unknown (no FULL metadata, no schema): UTF-8 text if it is valid UTF-8
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + value.hex()


def _vector_text(v: Vector) -> str:
    return "[" + ",".join(f"{x:.5e}" for x in v.values) + "]"


def _partial_json(value: PartialJson) -> Any:
    if value.document is not None:
        return str(value.document)
    return {"partial_json": [d.to_json() for d in value.diffs]}


def render_value(value: Any, column=None) -> Any:
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        if column is not None and column.type == T.YEAR:
            return f"{value:04d}"
        if -_MAX_SAFE <= value <= _MAX_SAFE:
            return value
        return str(value)
    if isinstance(value, float):
        text = format_float(value) if _is_float_col(column) else format_double(value)
        return float(text)
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _bytes_text(bytes(value), column)
    if isinstance(value, Decimal):
        return decimal_text(value, column.scale if column is not None else None)
    if isinstance(value, (MySQLDate, MySQLDateTime, MySQLTime, MySQLTimestamp, MySQLJson)):
        return str(value)
    if isinstance(value, PartialJson):
        return _partial_json(value)
    if isinstance(value, Geometry):
        return "0x" + value.to_bytes().hex()
    if isinstance(value, Vector):
        return [shortest_float32(x) for x in value.values]
    return str(value)


def render_value_text(value: Any, column=None) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        if column is not None and column.type == T.YEAR:
            return f"{value:04d}"
        return str(value)
    if isinstance(value, float):
        return format_float(value) if _is_float_col(column) else format_double(value)
    if isinstance(value, Vector):
        return _vector_text(value)
    if isinstance(value, PartialJson):
        r = _partial_json(value)
        return r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)
    r = render_value(value, column)
    return r if isinstance(r, str) else str(r)


def render_value_bytes(value: Any, column=None) -> bytes | None:
    """The bytes a text-protocol SELECT returns for the value (strings as UTF-8)."""
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, Geometry):
        return value.to_bytes()
    if isinstance(value, str):
        return value.encode("utf-8", errors="surrogateescape")
    return (render_value_text(value, column) or "").encode("utf-8")


def render_value_sql(value: Any, column=None) -> str:
    """A SQL-literal-ish form for the text view: NULL, numbers bare, everything else quoted."""
    if value is None:
        return "NULL"
    r = render_value_text(value, column) or ""
    if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool) and not (
            column is not None and column.type == T.YEAR):
        return r
    if isinstance(value, (bytes, Geometry)) and r.startswith("0x"):
        return r
    return mysql_quote(r)


def render_row(row: dict[str, Any] | None, columns_by_name: dict[str, Any]) -> dict[str, Any] | None:
    if row is None:
        return None
    return {name: render_value(v, columns_by_name.get(name)) for name, v in row.items()}


def render_row_text(row: dict[str, Any] | None, columns_by_name: dict[str, Any]) -> dict[str, str | None] | None:
    """A row as ``{name: text or None}`` (the Spark ``map<string,string>`` form)."""
    if row is None:
        return None
    return {name: render_value_text(v, columns_by_name.get(name)) for name, v in row.items()}


# ---------------------------------------------------------------- both forms in one pass

def _both_float(v, c):
    text = format_float(v) if _is_float_col(c) else format_double(v)
    return float(text), text


def _both_str_of(v, c):
    s = str(v)
    return s, s


def _both_bytes(v, c):
    s = _bytes_text(bytes(v), c)
    return s, s


def _both_decimal(v, c):
    s = decimal_text(v, c.scale if c is not None else None)
    return s, s


def _both_bool(v, c):
    return int(v), str(int(v))


_BOTH = {
    float: _both_float, bytes: _both_bytes, bytearray: _both_bytes, memoryview: _both_bytes,
    Decimal: _both_decimal, bool: _both_bool, MySQLDate: _both_str_of, MySQLDateTime: _both_str_of,
    MySQLTime: _both_str_of, MySQLTimestamp: _both_str_of, MySQLJson: _both_str_of,
}
_YEAR = T.YEAR


def render_row_json_text(row: dict[str, Any] | None, columns_by_name: dict[str, Any]
                         ) -> tuple[dict[str, Any] | None, dict[str, str | None] | None]:
    """``(render_row(row), render_row_text(row))`` computed in one pass over the values
    (each value rendered once where the two forms agree)."""
    if row is None:
        return None, None
    js: dict[str, Any] = {}
    tx: dict[str, str | None] = {}
    get_col = columns_by_name.get
    for name, v in row.items():
        tp = type(v)
        if tp is str:
            js[name] = tx[name] = v
        elif v is None:
            js[name] = tx[name] = None
        elif tp is int:
            c = get_col(name)
            if c is not None and c.type == _YEAR:
                js[name] = tx[name] = f"{v:04d}"
            else:
                s = str(v)
                tx[name] = s
                js[name] = v if -_MAX_SAFE <= v <= _MAX_SAFE else s
        else:
            both = _BOTH.get(tp)
            c = get_col(name)
            if both is None:  # anything else (VECTOR, partial JSON, GEOMETRY, subclasses)
                js[name] = render_value(v, c)
                tx[name] = render_value_text(v, c)
            else:
                js[name], tx[name] = both(v, c)
    return js, tx


# ---------------------------------------------------------------- mysqlbinlog -vv comments

_INT_TYPE_NAMES = {T.TINY: "TINYINT", T.SHORT: "SHORTINT", T.INT24: "MEDIUMINT", T.LONG: "INT",
                   T.LONGLONG: "LONGINT"}
_PLAIN_TYPE_NAMES = {T.FLOAT: "FLOAT", T.DOUBLE: "DOUBLE", T.TIMESTAMP: "TIMESTAMP", T.DATETIME: "DATETIME",
                     T.TIME: "TIME", T.YEAR: "YEAR", T.DATE: "DATE", T.NEWDATE: "DATE", T.GEOMETRY: "GEOMETRY",
                     T.JSON: "JSON", T.NULL: "NULL"}
_FSP_TYPE_NAMES = {T.TIMESTAMP2: "TIMESTAMP", T.DATETIME2: "DATETIME", T.TIME2: "TIME"}
_BLOB_TYPE_NAMES = {1: "TINYBLOB/TINYTEXT", 2: "BLOB/TEXT", 3: "MEDIUMBLOB/MEDIUMTEXT", 4: "LONGBLOB/LONGTEXT"}


def binlog_type_name(column: Any) -> str:
    """The column's type as ``mysqlbinlog -vv`` names it in its ``/* TYPE meta=... */`` comments.

    From the binlog's own type and metadata only (``log_event_print_value``): ``LONGINT`` for
    BIGINT, ``VARSTRING(64)`` with the byte length, ``DECIMAL(65,30)``, ``DATETIME(0)``...
    """
    t, meta = column.type, column.meta
    if t in _INT_TYPE_NAMES:
        return _INT_TYPE_NAMES[t]
    if t in _PLAIN_TYPE_NAMES:
        return _PLAIN_TYPE_NAMES[t]
    if t in _FSP_TYPE_NAMES:
        return f"{_FSP_TYPE_NAMES[t]}({meta})"
    if t == T.NEWDECIMAL:
        return f"DECIMAL({meta >> 8},{meta & 0xFF})"
    if t == T.BIT:
        return f"BIT({(meta >> 8) * 8 + (meta & 0xFF)})"
    if t == T.ENUM:
        return "ENUM(1 byte)" if column.length == 1 else "ENUM(2 bytes)"
    if t == T.SET:
        return f"SET({column.length} bytes)"
    if t in (T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB):
        return _BLOB_TYPE_NAMES.get(meta, f"BLOB({meta})")
    if t in (T.VARCHAR, T.VAR_STRING):
        return f"VARSTRING({meta})"
    if t == T.STRING:
        return f"STRING({column.length})"
    if t == T.VECTOR:
        return f"VECTOR({column.vector_dimensions or meta})"
    return f"TYPE{t}"


def column_label(column: Any) -> str:
    """``@N`` as mysqlbinlog names a column, unless the binlog or a schema gave its name."""
    if column.name_from == "fallback":
        return f"@{column.index + 1}"
    return column.name
