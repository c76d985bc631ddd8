"""The seam to the optional compiled rows decoder (``binlog_parser._native_ext``).

The extension is built from ``native/`` (Rust + PyO3) by ``make setup-native``; it decodes the
row images of WRITE / UPDATE / DELETE rows events (v1, v2 and MariaDB's compressed ones, after
inflating) into the very objects the pure-Python decoder builds. The pure-Python decoder stays
the reference and is used for everything else: pre-GA rows events, PARTIAL_UPDATE_ROWS, and any
event the extension cannot decode (a short read, an impossible value, a failing Python
decoder): the extension then answers None and the event is decoded again in Python, which
raises the exact error (same type, file, offset, words) or decodes what the extension would
not.

``BINLAKE_NATIVE=0`` in the environment forces the pure-Python decoder (``binlog_parser._native_loader``); :func:`use_native`
switches at run time (the differential tests run both paths in one process).

Column kinds the extension does not know natively (JSON, GEOMETRY, VECTOR, MariaDB 5.3
temporals, charsets other than UTF-8 and binary, ...) are passed to it as their Python decoder,
so every column of a plan is decoded by the same code in both paths or by a port that the
differential test compares value by value.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from types import ModuleType
from typing import TYPE_CHECKING, Any

from binlog_parser._native_loader import switch
from binlog_parser.rows.charsets import make_text_decoder
from binlog_parser.rows.column_types import INTEGER_SIZES
from binlog_parser.rows.column_types import ColumnType as T

if TYPE_CHECKING:
    from binlog_parser import _native_ext as ext

# column kinds and text conversions: native/src/lib.rs's, which the built module exports as
# VALUE_KINDS (tests/test_native_sink_layout.py holds the three equal)
K_PY, K_INT, K_FLOAT, K_DOUBLE, K_DECIMAL, K_YEAR, K_DATE = 0, 1, 2, 3, 4, 5, 6
K_TIME_OLD, K_DATETIME_OLD, K_TIMESTAMP_OLD, K_TIMESTAMP2, K_DATETIME2, K_TIME2 = 7, 8, 9, 10, 11, 12
K_NULL, K_BIT, K_ENUM, K_SET, K_STR = 13, 14, 15, 16, 17
C_RAW, C_UTF8, C_PAD = 0, 1, 2

_KIND_CODE = {"insert": 0, "update": 1, "delete": 2}
_UNLOADED: Any = object()


class _State:
    """The loaded extension (None: pure Python) and the ``ValueTypes`` it builds values of."""

    module: ModuleType | None = _UNLOADED
    value_types: Any = None
    make_rows_event: Any = None


def extension() -> ModuleType | None:
    """The compiled decoder when it is built and enabled, else None (pure Python)."""
    if _State.module is _UNLOADED:
        use_native(None)
    return _State.module


def use_native(enabled: bool | None) -> bool:
    """Switch the compiled decoder on (True: if built), off (False), or back to the
    environment's choice (None). Returns whether it is now in use."""
    module = _State.module = switch(enabled)  # the framing loop follows the same switch
    return module is not None


def _value_types(module: ModuleType, row_change_type: type) -> Any:
    """The extension's ``ValueTypes`` (built once): the classes of the values it builds.

    ``RowChange`` comes from the caller (``rows_event``), which imports this module: taking it
    as an argument keeps the import graph acyclic."""
    if _State.value_types is None:
        from binlog_parser.rows.temporal import (
            MySQLDate,
            MySQLDateTime,
            MySQLTime,
            MySQLTimestamp,
        )

        _State.value_types = module.ValueTypes(Decimal, MySQLDate, MySQLDateTime, MySQLTime,
                                               MySQLTimestamp, row_change_type)
    return _State.value_types


def decode_rows_event(header: Any, body: memoryview, ctx: Any, rows_event_type: type) -> Any:
    """The whole ``RowsEvent`` (``rows_event_type``) of a WRITE / UPDATE / DELETE v1 or v2 event
    whose table and image plans are already known (every event after the first of a plan), or
    None: the Python decoder then decodes it (and, through :func:`decode_rows`, prepares the plans)."""
    module = _State.module
    if module is _UNLOADED:
        module = extension()
    if module is None:
        return None
    make = _State.make_rows_event
    if make is None:
        make = _State.make_rows_event = module.SlotsConstructor(rows_event_type)
    return module.decode_rows_event(make, header, header.type_code, body,
                                    ctx.post_header_lengths, ctx.table_maps)


def decode_rows(data: bytes, pos: int, kind: str, plan_first: Any, plan_second: Any,
                row_change_type: type) -> tuple | None:
    """The tuple of ``RowChange`` (``row_change_type``) of rows ``data[pos:]`` (WRITE / DELETE:
    ``plan_first`` only; UPDATE: before and after plans), or None: no extension, or let the
    Python decoder do it."""
    module = _State.module
    if module is _UNLOADED:
        module = extension()
    if module is None:
        return None
    value_types = _value_types(module, row_change_type)
    first = _image_reader(module, value_types, plan_first)
    if plan_second is None:
        return module.decode_rows(data, pos, _KIND_CODE[kind], first)
    return module.decode_rows(data, pos, _KIND_CODE[kind], first, _image_reader(module, value_types, plan_second))


def render_changes_into(changes: Any, before: ext.ImageLayout | None, after: ext.ImageLayout | None,
                        sink: ext.ImageColumns) -> int | None:
    """The images of a rows event's changes appended to ``sink`` (the extension's
    ``ImageColumns``): the number of changes, or None with the sink untouched: no extension,
    or let Python do it."""
    module = _State.module
    if module is _UNLOADED:
        module = extension()
    if module is None or (before is None and after is None):
        return None
    result: int | None = module.render_changes_into(changes, before, after, sink)
    return result


def image_columns() -> ext.ImageColumns | None:
    """A new ``ImageColumns`` of the extension (the row image columns as Arrow buffers), or
    None without it."""
    module = extension()
    return None if module is None else module.ImageColumns()


def row_columns(kinds: list[str], names: list[str]) -> ext.RowColumns | None:
    """A new ``RowColumns`` of the extension (a table's columns as Arrow buffers, appended a row
    at a time; ``kinds``: how each column is held, ``names``: their names, for errors), or None
    without it."""
    module = extension()
    return None if module is None else module.RowColumns(kinds, names)


def event_sink(tables: tuple[ext.RowColumns, ext.RowColumns, ext.RowColumns, ext.RowColumns],
               images: ext.ImageColumns, fields: dict[int, ext.FieldsLayout], names: dict[int, str],
               operations: dict[int, str], batch_rows: int, max_pending: int) -> ext.EventSink | None:
    """A new ``EventSink`` of the extension, or None without it. Given to a decoder context
    (``DecodeContext.event_sink``), it appends the rows of the top-level events of plain
    transactions (GTID, BEGIN, annotations, TABLE_MAP, rows events, XID) inside the compiled
    framing loop: to ``tables``, four ``RowColumns`` whose columns are the extension's
    ``SINK_LAYOUT`` (it refuses others with a ValueError: the caller declares the same layout
    from its tables), and to ``images`` (``ImageColumns``). ``fields``: ``FieldsLayout`` by type code of the GTIDs, QUERY, XID and
    annotations; ``names``: ``event.name`` by type code; ``operations``:
    ``silver.row_changes.operation`` by rows type code; ``batch_rows`` and ``max_pending``: it
    leaves to the caller any event after which a buffer would hold ``batch_rows`` rows, or the
    open transaction ``max_pending`` rows waiting for its commit time."""
    module = extension()
    if module is None:
        return None
    return module.EventSink(tables, images, fields, names, operations, batch_rows, max_pending)


def image_layout(specs: list[tuple[str, str, bool, int, bool, Any]], pair_any: Callable[..., Any],
                 row_change_type: type) -> ext.ImageLayout | None:
    """The extension's ``ImageLayout`` of one image's columns (``render.ImageRenderer``), or
    None without the extension. ``specs``: ``(name, name as JSON with its colon, YEAR, DECIMAL
    scale or -1, bytes as hex, column)`` per column, in image order."""
    module = extension()
    if module is None:
        return None
    return module.ImageLayout(_value_types(module, row_change_type), specs, pair_any)


def fields_layout(cls: type, keys_json: list[str], fallback: Callable[[Any], str]) -> ext.FieldsLayout | None:
    """The extension's ``FieldsLayout`` of an event class whose ``fields()`` is the default
    dataclass walk (``binlog_parser.render.event_fields_json``), or None without the extension
    or for a class it cannot walk. ``keys_json``: each field after the header as the JSON
    encoder writes it, with its colon; ``fallback(value)``: the JSON text of any other value."""
    module = extension()
    if module is None:
        return None
    try:
        return module.FieldsLayout(cls, keys_json, fallback)
    except (TypeError, ValueError):  # not a frozen slots dataclass of PyObject slots
        return None


def fields_json(event: Any, layout: ext.FieldsLayout) -> str | None:
    """``compact_json(event.fields())`` written by the extension, or None: let Python do it."""
    module = _State.module
    if module is _UNLOADED:
        module = extension()
    if module is None:
        return None
    result: str | None = module.fields_json(event, layout)
    return result


def _image_reader(module: ModuleType, value_types: Any, plan: Any) -> Any:
    """The extension's reader for a rows_event ``_Plan`` (built once, kept on the plan)."""
    reader = getattr(plan, "native_reader", None)
    if reader is None:
        reader = module.ImageReader(value_types,
                                    [column_spec(name, dec, col) for name, dec, col in plan])
        plan.native_reader = reader
    return reader


def column_spec(name: str, dec: Callable[..., Any], col: Any) -> tuple[str, int, int, int, int, Any]:
    """``(name, kind, a, b, c, obj)`` for one present column: the native kind that decodes
    exactly what ``values.make_decoder(col)`` (``dec``) decodes, else ``K_PY`` with ``dec``."""
    t = col.type
    meta = col.meta
    if t in INTEGER_SIZES:
        return name, K_INT, INTEGER_SIZES[t], int(bool(col.unsigned)), 0, None
    if t == T.FLOAT:
        return name, K_FLOAT, 0, 0, 0, None
    if t == T.DOUBLE:
        return name, K_DOUBLE, 0, 0, 0, None
    if t == T.NEWDECIMAL:
        precision, scale = meta >> 8, meta & 0xFF
        if 0 < precision <= 65 and scale <= min(precision, 30):
            return name, K_DECIMAL, precision, scale, 0, dec  # dec: groups out of range
        return name, K_PY, 0, 0, 0, dec
    if t == T.YEAR:
        return name, K_YEAR, 0, 0, 0, None
    if t in (T.DATE, T.NEWDATE):
        return name, K_DATE, 0, 0, 0, None
    if t in (T.TIME, T.DATETIME, T.TIMESTAMP) and col.fsp:
        return name, K_PY, 0, 0, 0, dec  # MariaDB 5.3 hires format
    old = {T.TIME: K_TIME_OLD, T.DATETIME: K_DATETIME_OLD, T.TIMESTAMP: K_TIMESTAMP_OLD}.get(t)
    if old is not None:
        return name, old, 0, 0, 0, dec  # dec: raises the exact error for impossible values
    new = {T.TIME2: K_TIME2, T.DATETIME2: K_DATETIME2, T.TIMESTAMP2: K_TIMESTAMP2}.get(t)
    if new is not None:
        return (name, new, meta, 0, 0, None) if 0 <= meta <= 6 else (name, K_PY, 0, 0, 0, dec)
    if t == T.NULL:
        return name, K_NULL, 0, 0, 0, None
    if t == T.BIT:
        return name, K_BIT, ((meta >> 8) * 8 + (meta & 0xFF) + 7) // 8, 0, 0, None
    if t in (T.ENUM, T.SET) and 1 <= col.length <= 8:
        names = col.enum_values if t == T.ENUM else col.set_values
        return name, K_ENUM if t == T.ENUM else K_SET, col.length, 0, 0, names
    return _text_spec(name, dec, col)


def _text_spec(name: str, dec: Callable[..., Any], col: Any) -> tuple[str, int, int, int, int, Any]:
    """Strings and BLOBs whose conversion is raw bytes, UTF-8 or BINARY(n) padding."""
    t = col.type
    if t in (T.VARCHAR, T.VAR_STRING, T.STRING):
        nlen = 1 if col.length < 256 else 2
        if t == T.STRING and col.charset == "binary" and col.length:
            return name, K_STR, nlen, C_PAD, col.length, None
    elif t in (T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB) and 1 <= col.meta <= 4:
        nlen = col.meta
    else:
        return name, K_PY, 0, 0, 0, dec
    conv = make_text_decoder(col.charset)
    if conv is None:
        return name, K_STR, nlen, C_RAW, 0, None
    if getattr(conv, "python_codec", None) == "utf-8":
        return name, K_STR, nlen, C_UTF8, 0, None
    return name, K_PY, 0, 0, 0, dec
