"""Row events: TABLE_MAP, rows events of every generation, column values.

``ROW_EVENT_DECODERS`` maps type codes to body decoders; the core reader merges it into
its dispatch table.

Public API:

- ``TableMapEvent`` (with ``columns: tuple[ColumnInfo, ...]``), ``RowsEvent`` (``kind``,
  ``rows: tuple[RowChange, ...]``, ``table``), ``RowChange(before, after)``.
- Value types: ``MySQLDate``, ``MySQLDateTime``, ``MySQLTime``, ``MySQLTimestamp``, ``MySQLJson``,
  ``PartialJson`` / ``JsonDiff``, ``Geometry``, ``Vector`` (plus int/float/Decimal/str/bytes).
- ``render_value`` / ``render_value_text`` / ``render_value_bytes``: MySQL's SELECT text.
- ``SchemaRegistry`` for column names when binlogs lack ``binlog_row_metadata=FULL``.
"""

from __future__ import annotations

from binlog_parser.context import Decoder
from binlog_parser.rows.json_binary import MySQLJson, json_to_text, parse_json_binary
from binlog_parser.rows.json_diff import JsonDiff, PartialJson, apply_json_diffs
from binlog_parser.rows.render import (
    render_row,
    render_row_text,
    render_value,
    render_value_bytes,
    render_value_text,
)
from binlog_parser.rows.rows_event import ROWS_EVENT_TYPES, RowChange, RowsEvent, decode_rows_event
from binlog_parser.rows.schema import ColumnSpec, SchemaRegistry
from binlog_parser.rows.table_map import ColumnInfo, TableMapEvent, decode_table_map
from binlog_parser.rows.temporal import MySQLDate, MySQLDateTime, MySQLTime, MySQLTimestamp
from binlog_parser.rows.values import Geometry, Vector

ROW_EVENT_DECODERS: dict[int, Decoder] = {19: decode_table_map}
ROW_EVENT_DECODERS.update({t: decode_rows_event for t in ROWS_EVENT_TYPES})

__all__ = [
    "ROW_EVENT_DECODERS", "ColumnInfo", "ColumnSpec", "Geometry", "JsonDiff", "MySQLDate",
    "MySQLDateTime", "MySQLJson", "MySQLTime", "MySQLTimestamp", "PartialJson", "RowChange",
    "RowsEvent", "SchemaRegistry", "TableMapEvent", "Vector", "apply_json_diffs",
    "json_to_text", "parse_json_binary", "render_row", "render_row_text", "render_value",
    "render_value_bytes", "render_value_text",
]
