"""TABLE_MAP (with ``binlog_row_metadata=FULL`` optional metadata) and rows v2 events.

A table is described once with :class:`Table` / :class:`Column` (SQL type text such as
``"INT UNSIGNED"``, ``"VARCHAR(64)"``, ``"DECIMAL(10,2)"``, ``"DATETIME(6)"``, ``"ENUM('a','b')"``).
:func:`table_map_body` lays out the TABLE_MAP; the writer then decodes those bytes with the
reader's own ``decode_table_map`` so that the very ``ColumnInfo`` objects the reader uses drive
the value encoders (``binlog_parser.writer.values``): what we store is what the reader reads.

Layouts: MySQL ``libs/mysql/binlog/event/rows_event.{h,cpp}`` and ``Table_map_log_event::
init_metadata_fields`` (optional metadata order, as in server-written fixtures: SIGNEDNESS,
DEFAULT/COLUMN_CHARSET, GEOMETRY_TYPE, VECTOR_DIMENSIONALITY, then with FULL: COLUMN_NAME,
ENUM_AND_SET charsets, SET_STR_VALUE, ENUM_STR_VALUE, primary key, COLUMN_VISIBILITY).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from binlog_parser.errors import EncodeError
from binlog_parser.rows import table_map as tm
from binlog_parser.rows.column_types import (
    ENUM_SET_TYPES,
    MYSQL_CHARACTER_TYPES,
    NUMERIC_TYPES,
)
from binlog_parser.rows.column_types import (
    ColumnType as T,
)
from binlog_parser.wire import encode_packed_int as pint
from binlog_parser.writer.values import make_encoder

# charset name -> (default collation id, bytes per character)
CHARSETS = {
    "utf8mb4": (255, 4), "utf8mb3": (33, 3), "utf8": (33, 3), "latin1": (8, 1),
    "ascii": (11, 1), "binary": (63, 1),
}

GEOMETRY_TYPES = {"GEOMETRY": 0, "POINT": 1, "LINESTRING": 2, "POLYGON": 3, "MULTIPOINT": 4,
                  "MULTILINESTRING": 5, "MULTIPOLYGON": 6, "GEOMETRYCOLLECTION": 7}

# Table map flags (rows_event.h)
TM_BIT_LEN_EXACT_F = 1


@dataclass(frozen=True)
class Column:
    """One column of a table the writer logs. ``sql_type`` is MySQL's type text."""

    name: str
    sql_type: str
    nullable: bool = True
    primary_key: bool = False
    charset: str = "utf8mb4"
    collation: int | None = None
    visible: bool = True


@dataclass(frozen=True)
class ColumnLayout:
    """How a column appears in the TABLE_MAP."""

    binlog_type: int
    real_type: int
    meta: bytes
    unsigned: bool = False
    collation: int | None = None
    enum_values: tuple[str, ...] | None = None
    set_values: tuple[str, ...] | None = None
    geometry_type: int | None = None
    vector_dimensions: int | None = None


@dataclass(frozen=True)
class Table:
    """A table: schema, name, columns and the ``table_id`` the TABLE_MAP assigns."""

    schema: str
    name: str
    columns: tuple[Column, ...]
    table_id: int = 1
    flags: int = TM_BIT_LEN_EXACT_F

    def __post_init__(self) -> None:
        object.__setattr__(self, "columns", tuple(self.columns))

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


_TYPE_RE = re.compile(r"^\s*([A-Za-z]+)\s*(?:\((.*)\))?\s*(.*)$", re.S)


def _enum_items(args: str) -> tuple[str, ...]:
    return tuple(m.group(1).replace("''", "'") for m in re.finditer(r"'((?:[^']|'')*)'", args))


def column_layout(col: Column) -> ColumnLayout:
    """Parse ``col.sql_type`` into its TABLE_MAP type byte, metadata and optional metadata."""
    m = _TYPE_RE.match(col.sql_type)
    if not m:
        raise EncodeError(f"cannot parse column type {col.sql_type!r}")
    base = m.group(1).upper()
    args = m.group(2)
    rest = m.group(3).upper()
    unsigned = "UNSIGNED" in rest
    cs = col.charset if col.charset in CHARSETS else "utf8mb4"
    coll_id, mbmax = CHARSETS[cs]
    if col.collation is not None:
        coll_id = col.collation
    ints = {"TINYINT": T.TINY, "BOOL": T.TINY, "BOOLEAN": T.TINY, "SMALLINT": T.SHORT,
            "MEDIUMINT": T.INT24, "INT": T.LONG, "INTEGER": T.LONG, "BIGINT": T.LONGLONG}
    if base in ints:
        t = ints[base]
        return ColumnLayout(t, t, b"", unsigned)
    if base == "FLOAT":
        return ColumnLayout(T.FLOAT, T.FLOAT, b"\x04", unsigned)
    if base in ("DOUBLE", "REAL"):
        return ColumnLayout(T.DOUBLE, T.DOUBLE, b"\x08", unsigned)
    if base in ("DECIMAL", "NUMERIC", "DEC"):
        p, s = 10, 0
        if args:
            parts = [int(x) for x in args.split(",")]
            p = parts[0]
            s = parts[1] if len(parts) > 1 else 0
        return ColumnLayout(T.NEWDECIMAL, T.NEWDECIMAL, bytes((p, s)), unsigned)
    if base == "DATE":
        return ColumnLayout(T.DATE, T.DATE, b"")
    if base == "YEAR":
        return ColumnLayout(T.YEAR, T.YEAR, b"")
    if base in ("TIME", "DATETIME", "TIMESTAMP"):
        fsp = int(args) if args else 0
        t = {"TIME": T.TIME2, "DATETIME": T.DATETIME2, "TIMESTAMP": T.TIMESTAMP2}[base]
        return ColumnLayout(t, t, bytes((fsp,)))
    if base in ("CHAR", "BINARY"):
        if base == "BINARY":
            coll_id, mbmax = 63, 1
        n = int(args) if args else 1
        length = n * mbmax
        b0 = T.STRING ^ ((length & 0x300) >> 4)
        return ColumnLayout(T.STRING, T.STRING, bytes((b0, length & 0xFF)), collation=coll_id)
    if base in ("VARCHAR", "VARBINARY"):
        if base == "VARBINARY":
            coll_id, mbmax = 63, 1
        length = int(args) * mbmax
        return ColumnLayout(T.VARCHAR, T.VARCHAR, length.to_bytes(2, "little"), collation=coll_id)
    blobs = {"TINYBLOB": 1, "BLOB": 2, "MEDIUMBLOB": 3, "LONGBLOB": 4,
             "TINYTEXT": 1, "TEXT": 2, "MEDIUMTEXT": 3, "LONGTEXT": 4}
    if base in blobs:
        if "BLOB" in base:
            coll_id = 63
        return ColumnLayout(T.BLOB, T.BLOB, bytes((blobs[base],)), collation=coll_id)
    if base == "JSON":
        return ColumnLayout(T.JSON, T.JSON, b"\x04")
    if base in GEOMETRY_TYPES:
        return ColumnLayout(T.GEOMETRY, T.GEOMETRY, b"\x04", geometry_type=GEOMETRY_TYPES[base])
    if base == "VECTOR":
        dims = int(args) if args else 2048
        return ColumnLayout(T.VECTOR, T.VECTOR, b"\x04", collation=63, vector_dimensions=dims)
    if base == "ENUM":
        items = _enum_items(args or "")
        size = 1 if len(items) < 256 else 2
        return ColumnLayout(T.STRING, T.ENUM, bytes((T.ENUM, size)), collation=coll_id,
                            enum_values=items)
    if base == "SET":
        items = _enum_items(args or "")
        size = (len(items) + 7) // 8
        size = 8 if size > 4 else max(size, 1)
        return ColumnLayout(T.STRING, T.SET, bytes((T.SET, size)), collation=coll_id,
                            set_values=items)
    if base == "BIT":
        n = int(args) if args else 1
        return ColumnLayout(T.BIT, T.BIT, bytes((n % 8, n // 8)))
    raise EncodeError(f"unsupported column type {col.sql_type!r}")


# ---------------------------------------------------------------- optional metadata

def _tlv(field_type: int, value: bytes) -> bytes:
    return bytes((field_type,)) + pint(len(value)) + value


def _bits_msb(flags: Sequence[bool]) -> bytes:
    out = bytearray((len(flags) + 7) // 8)
    for i, f in enumerate(flags):
        if f:
            out[i // 8] |= 0x80 >> (i % 8)
    return bytes(out)


def _str_lists(lists: Iterable[Sequence[str]]) -> bytes:
    out = bytearray()
    for items in lists:
        out += pint(len(items))
        for s in items:
            b = s.encode("utf-8", errors="surrogateescape")
            out += pint(len(b)) + b
    return bytes(out)


def _charset_field(collations: list[int], default_type: int, column_type: int,
                   use_default: bool | None = None, default: int | None = None) -> bytes:
    """DEFAULT_CHARSET (most used collation + exceptions) or COLUMN_CHARSET (one per column),
    whichever is shorter (unless ``use_default`` forces one; then ``default`` is the default)."""
    if not collations:
        return b""
    if default is None:
        counts: dict[int, int] = {}
        for c in collations:
            counts[c] = counts.get(c, 0) + 1
        default = max(counts, key=lambda c: counts[c])  # first most-used on ties
    dflt = pint(default) + b"".join(pint(i) + pint(c) for i, c in enumerate(collations)
                                    if c != default)
    col = b"".join(pint(c) for c in collations)
    if use_default is None:
        use_default = len(dflt) < len(col)
    return _tlv(default_type, dflt) if use_default else _tlv(column_type, col)


def _optional_metadata(layouts: Sequence[ColumnLayout], names: Sequence[str] | None,
                       pk: Sequence[tuple[int, int]], visible: Sequence[bool] | None,
                       full: bool) -> bytes:
    out = []
    numeric = [lay.unsigned for lay in layouts if lay.real_type in NUMERIC_TYPES]
    if numeric:
        out.append(_tlv(tm.SIGNEDNESS, _bits_msb(numeric)))
    chars = [lay.collation or 63 for lay in layouts if lay.real_type in MYSQL_CHARACTER_TYPES]
    out.append(_charset_field(chars, tm.DEFAULT_CHARSET, tm.COLUMN_CHARSET))
    geos = [lay.geometry_type or 0 for lay in layouts if lay.real_type == T.GEOMETRY]
    if geos:
        out.append(_tlv(tm.GEOMETRY_TYPE, b"".join(pint(g) for g in geos)))
    vec = [lay.vector_dimensions or 0 for lay in layouts if lay.real_type == T.VECTOR]
    if vec:
        out.append(_tlv(tm.VECTOR_DIMENSIONALITY, b"".join(pint(v) for v in vec)))
    if full:
        if names is not None:
            out.append(_tlv(tm.COLUMN_NAME, b"".join(
                pint(len(b)) + b for b in (n.encode("utf-8") for n in names))))
        es = [lay.collation or 63 for lay in layouts if lay.real_type in ENUM_SET_TYPES]
        out.append(_charset_field(es, tm.ENUM_AND_SET_DEFAULT_CHARSET, tm.ENUM_AND_SET_COLUMN_CHARSET))
        sets = [lay.set_values or () for lay in layouts if lay.real_type == T.SET]
        if sets:
            out.append(_tlv(tm.SET_STR_VALUE, _str_lists(sets)))
        enums = [lay.enum_values or () for lay in layouts if lay.real_type == T.ENUM]
        if enums:
            out.append(_tlv(tm.ENUM_STR_VALUE, _str_lists(enums)))
        if pk:
            if any(prefix for _i, prefix in pk):
                out.append(_tlv(tm.PRIMARY_KEY_WITH_PREFIX,
                                b"".join(pint(i) + pint(p) for i, p in pk)))
            else:
                out.append(_tlv(tm.SIMPLE_PRIMARY_KEY, b"".join(pint(i) for i, _p in pk)))
        if visible is not None:  # 8.0.23+ writes it in FULL mode, even when all are visible
            out.append(_tlv(tm.COLUMN_VISIBILITY, _bits_msb(visible)))
    return b"".join(out)


def _name(s: str) -> bytes:
    b = s.encode("utf-8")
    if len(b) > 255:
        raise EncodeError("schema/table name longer than 255 bytes")
    return bytes((len(b),)) + b + b"\x00"


def _table_map(table_id: int, flags: int, schema: str, table: str, types: bytes, meta: bytes,
               null_bitmap: bytes, optional: bytes) -> bytes:
    return (table_id.to_bytes(6, "little") + flags.to_bytes(2, "little") + _name(schema)
            + _name(table) + pint(len(types)) + types + pint(len(meta)) + meta + null_bitmap
            + optional)


def table_map_body(table: Table, *, full_metadata: bool = True) -> bytes:
    """TABLE_MAP body for ``table`` (``binlog_row_metadata=FULL`` unless told MINIMAL)."""
    layouts = [column_layout(c) for c in table.columns]
    types = bytes(lay.binlog_type for lay in layouts)
    meta = b"".join(lay.meta for lay in layouts)
    null_bitmap = bytearray((len(layouts) + 7) // 8)
    for i, c in enumerate(table.columns):
        if c.nullable:
            null_bitmap[i // 8] |= 1 << (i % 8)
    pk = [(i, 0) for i, c in enumerate(table.columns) if c.primary_key]
    optional = _optional_metadata(layouts, table.column_names, pk,
                                  [c.visible for c in table.columns], full_metadata)
    return _table_map(table.table_id, table.flags, table.schema, table.name, types, meta,
                      bytes(null_bitmap), optional)


# ---------------------------------------------------------------- re-encoding decoded events

def _meta_bytes(binlog_type: int, meta: int) -> bytes:
    sizes: dict[int, int] = {T.FLOAT: 1, T.DOUBLE: 1, T.BLOB: 1, T.TINY_BLOB: 1, T.MEDIUM_BLOB: 1, T.LONG_BLOB: 1,
         T.GEOMETRY: 1, T.JSON: 1, T.VECTOR: 1, T.TIMESTAMP2: 1, T.DATETIME2: 1, T.TIME2: 1,
         T.VARCHAR: 2, T.VAR_STRING: 2, T.BIT: 2, T.NEWDECIMAL: 2, T.STRING: 2, T.ENUM: 2,
         T.SET: 2}
    n = sizes.get(binlog_type, 0)
    if n == 0:
        return b""
    if n == 1:
        return bytes((meta,))
    if binlog_type in (T.VARCHAR, T.VAR_STRING, T.BIT):
        return meta.to_bytes(2, "little")
    return bytes((meta >> 8, meta & 0xFF))


def table_map_body_from_event(ev: Any) -> bytes:
    """Body of a decoded ``TableMapEvent`` (same optional-metadata fields it carried)."""
    if T.TYPED_ARRAY in ev.column_types:
        raise EncodeError("TYPED_ARRAY columns are not re-encoded")
    meta = b"".join(_meta_bytes(t, m) for t, m in zip(ev.column_types, ev.column_metadata))
    cols = ev.columns
    out = []
    if ev.signedness is not None:
        out.append(_tlv(tm.SIGNEDNESS, _bits_msb(ev.signedness)))
    chars = [c.collation for c in cols if c.type in MYSQL_CHARACTER_TYPES]
    if ev.default_charset is not None:
        out.append(_charset_field(chars, tm.DEFAULT_CHARSET, tm.COLUMN_CHARSET, True,
                                  ev.default_charset))
    elif ev.column_charsets is not None:
        out.append(_tlv(tm.COLUMN_CHARSET, b"".join(pint(c) for c in ev.column_charsets)))
    if ev.geometry_types is not None:
        out.append(_tlv(tm.GEOMETRY_TYPE, b"".join(pint(g) for g in ev.geometry_types)))
    if ev.vector_dimensions is not None:
        out.append(_tlv(tm.VECTOR_DIMENSIONALITY, b"".join(pint(v) for v in ev.vector_dimensions)))
    if ev.column_names is not None:
        out.append(_tlv(tm.COLUMN_NAME, b"".join(
            pint(len(b)) + b for b in (n.encode("utf-8", errors="surrogateescape")
                                       for n in ev.column_names))))
    es = [c.collation for c in cols if c.type in ENUM_SET_TYPES]
    if ev.enum_set_default_charset is not None:
        out.append(_charset_field(es, tm.ENUM_AND_SET_DEFAULT_CHARSET,
                                  tm.ENUM_AND_SET_COLUMN_CHARSET, True, ev.enum_set_default_charset))
    elif ev.enum_set_column_charsets is not None:
        out.append(_tlv(tm.ENUM_AND_SET_COLUMN_CHARSET,
                        b"".join(pint(c) for c in ev.enum_set_column_charsets)))
    if ev.set_str_values is not None:
        out.append(_tlv(tm.SET_STR_VALUE, _str_lists(ev.set_str_values)))
    if ev.enum_str_values is not None:
        out.append(_tlv(tm.ENUM_STR_VALUE, _str_lists(ev.enum_str_values)))
    if ev.primary_key is not None:
        if any(p for _i, p in ev.primary_key):
            out.append(_tlv(tm.PRIMARY_KEY_WITH_PREFIX,
                            b"".join(pint(i) + pint(p) for i, p in ev.primary_key)))
        else:
            out.append(_tlv(tm.SIMPLE_PRIMARY_KEY, b"".join(pint(i) for i, _p in ev.primary_key)))
    if ev.column_visibility is not None:
        out.append(_tlv(tm.COLUMN_VISIBILITY, _bits_msb(ev.column_visibility)))
    for t, v in ev.unknown_optional_metadata:
        out.append(_tlv(t, v))
    return _table_map(ev.table_id, ev.flags, ev.schema, ev.table, bytes(ev.column_types), meta,
                      ev.null_bitmap, b"".join(out))


# ---------------------------------------------------------------- rows events

WRITE_ROWS_V2, UPDATE_ROWS_V2, DELETE_ROWS_V2 = 30, 31, 32
STMT_END_F = 0x0001


class RowsEncoder:
    """Encodes the rows of one table (a decoded ``TableMapEvent``) into rows v2 bodies.

    Rows are dicts (column name -> value; a missing column is not in the image) or sequences
    in column order (all columns present). ``None`` is SQL NULL.
    """

    def __init__(self, table_map: Any) -> None:
        self.table_map = table_map
        self.columns = table_map.columns
        self.encoders = [make_encoder(c) for c in self.columns]
        self.names = [c.name for c in self.columns]
        n = len(self.columns)
        self.width = n
        self.full_bitmap = bytes([0xFF] * (n // 8) + ([(1 << (n % 8)) - 1] if n % 8 else []))
        self._plans: dict[bytes, tuple] = {}
        self._width_bytes = pint(n)

    def _plan(self, bitmap: bytes) -> tuple:
        plan = self._plans.get(bitmap)
        if plan is None:
            plan = tuple((i, self.names[i], self.encoders[i]) for i in range(self.width)
                         if bitmap[i // 8] >> (i % 8) & 1)
            self._plans[bitmap] = plan
        return plan

    def bitmap_of(self, row: Any) -> bytes:
        if row is None or not isinstance(row, dict):
            return self.full_bitmap
        out = bytearray(len(self.full_bitmap))
        for i, name in enumerate(self.names):
            if name in row:
                out[i // 8] |= 1 << (i % 8)
        return bytes(out)

    def image(self, row: Any, plan: tuple) -> bytes:
        """NULL bitmap over the present columns, then the non-NULL values."""
        nulls = 0
        parts = []
        by_name = isinstance(row, dict)  # a dict row is keyed by column name, a sequence by index
        for k, (i, name, enc) in enumerate(plan):
            v = row[name if by_name else i]
            if v is None:
                nulls |= 1 << k
            else:
                parts.append(enc(v))
        nb = (len(plan) + 7) >> 3
        return nulls.to_bytes(nb, "little") + b"".join(parts)

    def body(self, type_code: int, rows: Sequence[Any], *, flags: int = STMT_END_F,
             extra_data: bytes = b"", before_bitmap: bytes | None = None,
             after_bitmap: bytes | None = None) -> bytes:
        """A rows v2 body. WRITE: rows are after images; DELETE: before images; UPDATE:
        ``(before, after)`` pairs."""
        tid = self.table_map.table_id.to_bytes(6, "little")
        head = tid + flags.to_bytes(2, "little") + (2 + len(extra_data)).to_bytes(2, "little") \
            + extra_data + self._width_bytes
        image = self.image
        if type_code in (WRITE_ROWS_V2, DELETE_ROWS_V2):
            bm = before_bitmap or (self.bitmap_of(rows[0]) if rows else self.full_bitmap)
            plan = self._plan(bm)
            return head + bm + b"".join([image(r, plan) for r in rows])
        bb = before_bitmap or (self.bitmap_of(rows[0][0]) if rows else self.full_bitmap)
        ab = after_bitmap or (self.bitmap_of(rows[0][1]) if rows else self.full_bitmap)
        pb, pa = self._plan(bb), self._plan(ab)
        return head + bb + ab + b"".join([image(b, pb) + image(a, pa) for b, a in rows])


_ENCODER_CACHE: dict[int, RowsEncoder] = {}


def rows_encoder(table_map: Any) -> RowsEncoder:
    enc = _ENCODER_CACHE.get(id(table_map))
    if enc is None or enc.table_map is not table_map:
        if len(_ENCODER_CACHE) > 1024:
            _ENCODER_CACHE.clear()
        enc = RowsEncoder(table_map)
        _ENCODER_CACHE[id(table_map)] = enc
    return enc


def rows_body_from_event(ev: Any) -> bytes:
    """Body of a decoded v2 ``RowsEvent`` (WRITE/UPDATE/DELETE_ROWS_V2)."""
    t = ev.header.type_code
    if t not in (WRITE_ROWS_V2, UPDATE_ROWS_V2, DELETE_ROWS_V2):
        raise EncodeError(f"only rows v2 events are re-encoded, not type {t}")
    if ev.table is None:
        raise EncodeError("rows event without its TABLE_MAP")
    enc = rows_encoder(ev.table)
    if t == WRITE_ROWS_V2:
        rows = [r.after for r in ev.rows]
    elif t == DELETE_ROWS_V2:
        rows = [r.before for r in ev.rows]
    else:
        rows = [(r.before, r.after) for r in ev.rows]
    body = enc.body(t, rows, flags=ev.flags, extra_data=ev.extra_data,
                    before_bitmap=ev.columns_present, after_bitmap=ev.columns_present_after)
    # the table id was written with 6 bytes; decoded events keep theirs
    return body
