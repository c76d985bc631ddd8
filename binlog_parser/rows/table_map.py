"""TABLE_MAP_EVENT (19): table id -> schema, table, column types, metadata, optional metadata.

Layout (MySQL ``libs/mysql/binlog/event/rows_event.{h,cpp}``): post-header table_id (6 bytes,
4 when the FORMAT_DESCRIPTION says the post-header is 6 long) + flags (2); body: schema name
(1-byte length, bytes, NUL), table name (same), column count (packed int), one type byte per
column, metadata length (packed int) + metadata block, NULL-ability bitmap, then optional
metadata as TLV fields (type byte, packed length, value) when ``binlog_row_metadata`` allows.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from binlog_parser._fast import slots_constructor
from binlog_parser.context import DecodeContext
from binlog_parser.errors import CorruptEventError, ShortBufferError
from binlog_parser.events import Event, to_json_value
from binlog_parser.header import EventHeader
from binlog_parser.rows.charsets import BINARY_COLLATION, charset_of
from binlog_parser.rows.column_types import (
    ENUM_SET_TYPES,
    MARIADB_CHARACTER_TYPES,
    MARIADB_NUMERIC_TYPES,
    MYSQL_CHARACTER_TYPES,
    NUMERIC_TYPES,
    read_column_metadata,
    string_real_type_and_length,
    type_name,
)
from binlog_parser.rows.column_types import (
    ColumnType as T,
)
from binlog_parser.wire import packed_int

# Optional metadata field types
SIGNEDNESS = 1
DEFAULT_CHARSET = 2
COLUMN_CHARSET = 3
COLUMN_NAME = 4
SET_STR_VALUE = 5
ENUM_STR_VALUE = 6
GEOMETRY_TYPE = 7
SIMPLE_PRIMARY_KEY = 8
PRIMARY_KEY_WITH_PREFIX = 9
ENUM_AND_SET_DEFAULT_CHARSET = 10
ENUM_AND_SET_COLUMN_CHARSET = 11
COLUMN_VISIBILITY = 12
VECTOR_DIMENSIONALITY = 13

@dataclass(frozen=True, slots=True)
class ColumnInfo:
    """One column as the TABLE_MAP (and, as a fallback, a user schema) describes it.

    ``type`` is the real type (ENUM/SET for CHAR-encoded enums and sets), ``binlog_type`` the
    byte in the event. ``length`` is the maximum byte length (CHAR/VARCHAR), the length-prefix
    size (BLOB/JSON/GEOMETRY/VECTOR), or the value size (ENUM/SET). Fields the event does not
    carry are None.
    """

    index: int
    name: str
    type: int
    binlog_type: int
    meta: int
    nullable: bool
    unsigned: bool | None = None
    collation: int | None = None
    charset: str | None = None
    length: int = 0
    precision: int | None = None
    scale: int | None = None
    fsp: int | None = None
    bits: int | None = None
    enum_values: tuple[str, ...] | None = None
    set_values: tuple[str, ...] | None = None
    geometry_type: int | None = None
    visible: bool | None = None
    vector_dimensions: int | None = None
    primary_key: bool = False
    primary_key_prefix: int | None = None
    name_from: str = "fallback"  # 'metadata' | 'schema' | 'fallback'

    @property
    def type_name(self) -> str:
        return type_name(self.type)

    @property
    def is_binary(self) -> bool:
        """True when values are raw bytes by definition (BINARY/BLOB/BIT/GEOMETRY...)."""
        return self.charset == "binary" or self.type in (T.BIT, T.GEOMETRY)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "type": self.type_name}
        for k in ("unsigned", "charset", "collation", "precision", "scale", "fsp", "bits",
                  "enum_values", "set_values", "geometry_type", "visible", "vector_dimensions",
                  "primary_key_prefix"):
            v = getattr(self, k)
            if v is not None:
                d[k] = list(v) if isinstance(v, tuple) else v
        if self.type in (T.VARCHAR, T.VAR_STRING, T.STRING, T.BLOB, T.JSON, T.GEOMETRY, T.VECTOR,
                         T.ENUM, T.SET):
            d["length"] = self.length
        d["nullable"] = self.nullable
        if self.primary_key:
            d["primary_key"] = True
        if self.name_from != "metadata":
            d["name_from"] = self.name_from
        return d


@dataclass(frozen=True, slots=True)
class TableMapEvent(Event):
    table_id: int
    flags: int
    schema: str
    table: str
    column_count: int
    column_types: tuple[int, ...]
    column_metadata: tuple[int, ...]
    null_bitmap: bytes
    signedness: tuple[bool, ...] | None = None
    default_charset: int | None = None
    column_charsets: tuple[int, ...] | None = None
    column_names: tuple[str, ...] | None = None
    set_str_values: tuple[tuple[str, ...], ...] | None = None
    enum_str_values: tuple[tuple[str, ...], ...] | None = None
    geometry_types: tuple[int, ...] | None = None
    primary_key: tuple[tuple[int, int], ...] | None = None
    enum_set_default_charset: int | None = None
    enum_set_column_charsets: tuple[int, ...] | None = None
    column_visibility: tuple[bool, ...] | None = None
    vector_dimensions: tuple[int, ...] | None = None
    unknown_optional_metadata: tuple[tuple[int, bytes], ...] = ()
    columns: tuple[ColumnInfo, ...] = ()
    decoders: tuple = field(default=(), repr=False, compare=False)
    plan_cache: dict = field(default_factory=dict, repr=False, compare=False)

    type_name = "TABLE_MAP"

    def fields(self) -> dict[str, Any]:
        return {
            "table_id": self.table_id,
            "flags": self.flags,
            "schema": self.schema,
            "table": self.table,
            "column_count": self.column_count,
            "columns": [c.to_json() for c in self.columns],
            "primary_key": [c.name for c in self.columns if c.primary_key] or None,
            "has_full_metadata": self.column_names is not None,
            "unknown_optional_metadata": to_json_value(self.unknown_optional_metadata) or None,
        }


# ---------------------------------------------------------------- optional metadata parsing

def _packed_list(v: bytes, what: str = "optional metadata") -> list[int]:
    out = []
    pos = 0
    while pos < len(v):
        x, end = packed_int(v, pos)
        if x is None:
            raise ShortBufferError(f"{what}: NULL marker 0xfb at byte {pos} of the field, a number expected")
        out.append(x)
        pos = end
    return out


def _bits_msb(v: bytes) -> list[bool]:
    return [bool(b & (0x80 >> i)) for b in v for i in range(8)]


def _str_lists(v: bytes) -> tuple[tuple[str, ...], ...]:
    out = []
    pos = 0
    while pos < len(v):
        count, pos = packed_int(v, pos)
        if count is None or count > len(v) - pos:  # every string needs >= 1 length byte
            raise ShortBufferError(f"enum/set value count {count} past end")
        items = []
        for _ in range(count):
            n, pos = packed_int(v, pos)
            if n is None or pos + n > len(v):
                raise ShortBufferError("enum/set string past end")
            items.append(v[pos:pos + n].decode("utf-8", errors="surrogateescape"))
            pos += n
        out.append(tuple(items))
    return tuple(out)


def _default_charset(v: bytes) -> tuple[int, dict[int, int]]:
    vals = _packed_list(v, "default charset")
    if not vals:
        raise ShortBufferError("default charset field is empty: it must hold at least the default collation")
    default = vals[0]
    pairs = {}
    for i in range(1, len(vals) - 1, 2):
        pairs[vals[i]] = vals[i + 1]
    return default, pairs


def _parse_optional(data: bytes) -> dict[int, bytes]:
    fields: dict[int, bytes] = {}
    pos = 0
    while pos < len(data):
        t = data[pos]
        if pos + 1 >= len(data):
            raise ShortBufferError(f"optional metadata field type {t} at byte {pos} has no length")
        n, pos = packed_int(data, pos + 1)
        if n is None or pos + n > len(data):
            raise ShortBufferError(f"optional metadata field type {t}: length {n} runs past the end of "
                                   f"the optional metadata ({len(data) - pos} bytes left)")
        fields[t] = data[pos:pos + n]  # later duplicates win (servers never repeat)
        pos += n
    return fields


# ---------------------------------------------------------------- decoder

#: Distinct TABLE_MAP bodies remembered per context, and their total column count (memory:
#: about 1 KB per cached column); the cache is emptied when either would be exceeded.
TABLE_MAP_CACHE_MAX = 4096
TABLE_MAP_CACHE_MAX_COLUMNS = 32768
_CACHED_COLUMNS = "columns"  # the cache's running column count (the other keys are bytes)


def decode_table_map(header: EventHeader, body: memoryview, ctx: DecodeContext) -> TableMapEvent:
    data = bytes(body)
    cache = getattr(ctx, "table_map_cache", None)
    if cache is not None:
        # A server writes the same TABLE_MAP before every transaction on a table: decode the
        # columns and build their value decoders once per distinct body. What else the decode
        # depends on (post-header length, flavour, user schema) is checked on every hit.
        hit = cache.get(data)
        if hit is not None:
            tag, args, user = hit
            if tag == (ctx.post_header_length(T_TABLE_MAP), ctx.server_version) and (
                    user is None and ctx.schemas is None
                    or user == _user_schema(ctx, args[2], args[3], args[4])):
                ev = _new_table_map(header, *args)
                ctx.table_maps[ev.table_id] = ev
                return ev
    try:
        ev = _decode(header, data, ctx)
    except (ShortBufferError, IndexError, ValueError, UnicodeDecodeError, struct.error) as exc:
        raise CorruptEventError(f"bad TABLE_MAP: {exc}", file=ctx.file, offset=header.pos,
                                type_code=header.type_code) from None
    ctx.table_maps[ev.table_id] = ev
    if cache is not None and ev.column_count <= TABLE_MAP_CACHE_MAX_COLUMNS:
        cached_columns = cache.get(_CACHED_COLUMNS, 0)
        if (len(cache) > TABLE_MAP_CACHE_MAX
                or cached_columns + ev.column_count > TABLE_MAP_CACHE_MAX_COLUMNS):
            cache.clear()
            cached_columns = 0
        user = _user_schema(ctx, ev.schema, ev.table, ev.column_count)
        # (the compiled framing loop reads hits of this shape: native/src/framing.rs table_map_hit)
        cache[data] = ((ctx.post_header_length(T_TABLE_MAP), ctx.server_version),
                       tuple(getattr(ev, name) for name in _TM_FIELDS), user)
        cache[_CACHED_COLUMNS] = cached_columns + ev.column_count
    return ev


def _count(data: bytes, pos: int, what: str) -> tuple[int, int]:
    """A packed integer that sizes what follows it: present, not NULL, within the event."""
    if pos >= len(data):
        raise ShortBufferError(f"{what} expected at byte {pos}, but the event body ends at byte {len(data)}")
    n, end = packed_int(data, pos)
    if n is None:
        raise ShortBufferError(f"{what} at byte {pos} is the NULL marker 0xfb")
    if n > len(data) - end:
        raise ShortBufferError(f"{what} {n} at byte {pos} exceeds the {len(data) - end} bytes left in the event")
    return n, end


def _name(data: bytes, pos: int, what: str) -> tuple[str, int]:
    """A schema/table name: 1-byte length, the bytes, a NUL."""
    if pos >= len(data):
        raise ShortBufferError(f"{what} length expected at byte {pos}, but the event body ends at byte {len(data)}")
    n = data[pos]
    if pos + 2 + n > len(data):
        raise ShortBufferError(f"{what} length {n} at byte {pos} runs past the end of the event body "
                               f"({len(data)} bytes)")
    return data[pos + 1:pos + 1 + n].decode("utf-8", errors="surrogateescape"), pos + 2 + n


def _decode(header: EventHeader, data: bytes, ctx: DecodeContext) -> TableMapEvent:
    phl = ctx.post_header_length(T_TABLE_MAP)
    id_len = 4 if phl == 6 else 6
    pos = id_len + 2 if phl in (0, 6, 8) else phl
    if pos > len(data):
        raise ShortBufferError(f"post-header of {pos} bytes is longer than the event body ({len(data)} bytes)")
    table_id = int.from_bytes(data[0:id_len], "little")
    flags = int.from_bytes(data[id_len:id_len + 2], "little")
    schema, pos = _name(data, pos, "schema name")
    table, pos = _name(data, pos, "table name")
    ncols, pos = _count(data, pos, "column count")
    types = data[pos:pos + ncols]
    pos += ncols
    metas: list[int] = [0] * ncols
    null_bitmap = b"\xff" * ((ncols + 7) // 8)
    optional: dict[int, bytes] = {}
    if pos < len(data):
        mlen, pos = _count(data, pos, "column metadata length")
        block = data[pos:pos + mlen]
        metas = read_column_metadata(types, block)
        pos += mlen
        nb = (ncols + 7) // 8
        null_bitmap = data[pos:pos + nb]
        if len(null_bitmap) != nb:
            raise ShortBufferError(f"NULL bitmap of {nb} bytes for {ncols} columns at byte {pos} runs past "
                                   f"the end of the event body ({len(data)} bytes)")
        pos += nb
        if pos < len(data):
            optional = _parse_optional(data[pos:])

    opt_kwargs = _optional_fields(optional)
    columns = _build_columns(types, metas, null_bitmap, opt_kwargs, ctx, schema, table)
    from binlog_parser.rows.values import UnsupportedColumnType, make_decoder

    decoders = []
    for c in columns:
        try:
            decoders.append(make_decoder(c))
        except UnsupportedColumnType:
            decoders.append(None)  # reported when a rows event needs this column
    return TableMapEvent(
        header, table_id, flags, schema, table, ncols, tuple(types), tuple(metas), null_bitmap,
        columns=tuple(columns), decoders=tuple(decoders), **opt_kwargs)


T_TABLE_MAP = 19
# TableMapEvent's fields after the header, in __init__ order
_TM_FIELDS = tuple(f.name for f in dataclasses.fields(TableMapEvent) if f.name != "header")
_new_table_map = slots_constructor(TableMapEvent)  # TableMapEvent(header, *every field)


def _column_names(v: bytes) -> tuple[str, ...]:
    names = []
    pos = 0
    while pos < len(v):
        n, pos = packed_int(v, pos)
        if n is None or pos + n > len(v):
            raise ShortBufferError("column name past end")
        names.append(v[pos:pos + n].decode("utf-8", errors="surrogateescape"))
        pos += n
    return tuple(names)


def _primary_key_with_prefix(v: bytes) -> tuple[tuple[int, int], ...]:
    vals = _packed_list(v, "primary key with prefix")
    return tuple((vals[i], vals[i + 1]) for i in range(0, len(vals) - 1, 2))


#: optional metadata type -> (field, how its bytes read); the two default-charset types fill two
#: fields each (see :func:`_optional_fields`)
_OPTIONAL_FIELDS: dict[int, tuple[str, Callable[[bytes], Any]]] = {
    SIGNEDNESS: ("signedness", lambda v: tuple(_bits_msb(v))),
    COLUMN_CHARSET: ("column_charsets", lambda v: tuple(_packed_list(v, "column charsets"))),
    COLUMN_NAME: ("column_names", _column_names),
    SET_STR_VALUE: ("set_str_values", lambda v: _str_lists(v)),
    ENUM_STR_VALUE: ("enum_str_values", lambda v: _str_lists(v)),
    GEOMETRY_TYPE: ("geometry_types", lambda v: tuple(_packed_list(v, "geometry types"))),
    SIMPLE_PRIMARY_KEY: ("primary_key", lambda v: tuple((i, 0) for i in _packed_list(v, "primary key"))),
    PRIMARY_KEY_WITH_PREFIX: ("primary_key", _primary_key_with_prefix),
    ENUM_AND_SET_COLUMN_CHARSET: ("enum_set_column_charsets",
                                  lambda v: tuple(_packed_list(v, "ENUM/SET column charsets"))),
    COLUMN_VISIBILITY: ("column_visibility", lambda v: tuple(_bits_msb(v))),
    VECTOR_DIMENSIONALITY: ("vector_dimensions", lambda v: tuple(_packed_list(v, "vector dimensions"))),
}
_DEFAULT_CHARSET_FIELDS = {DEFAULT_CHARSET: "", ENUM_AND_SET_DEFAULT_CHARSET: "enum_set_"}


def _optional_fields(optional: dict[int, bytes]) -> dict[str, Any]:
    kw: dict[str, Any] = {}
    unknown = []
    for t, v in optional.items():
        known = _OPTIONAL_FIELDS.get(t)
        if known is not None:
            kw[known[0]] = known[1](v)
        elif t in _DEFAULT_CHARSET_FIELDS:
            prefix = _DEFAULT_CHARSET_FIELDS[t]
            kw[f"{prefix}default_charset"], kw[f"_{prefix}charset_pairs"] = _default_charset(v)
        else:
            unknown.append((t, v))
    if unknown:
        kw["unknown_optional_metadata"] = tuple(unknown)
    return kw


def _type_details(bt: int, meta: int) -> tuple[int, dict[str, Any]]:
    """The real type of a column and what its TABLE_MAP metadata says (length, precision and
    scale, fsp, bits)."""
    real = bt
    extra: dict[str, Any] = {}
    if bt == T.STRING:
        real, length = string_real_type_and_length(meta)
        extra["length"] = length
    elif bt in (T.VARCHAR, T.VAR_STRING):
        extra["length"] = meta
    elif bt in (T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB, T.JSON, T.GEOMETRY, T.VECTOR):
        extra["length"] = meta
    elif bt == T.NEWDECIMAL:
        extra["precision"], extra["scale"] = meta >> 8, meta & 0xFF
    elif bt in (T.TIME2, T.DATETIME2, T.TIMESTAMP2):
        extra["fsp"] = meta
    elif bt in (T.TIME, T.DATETIME, T.TIMESTAMP):
        extra["fsp"] = 0
    elif bt == T.BIT:
        extra["bits"] = (meta >> 8) * 8 + (meta & 0xFF)
    return real, extra


def _fill_from_user_schema(spec, bt: int, real: int, ctx, name: str, name_from: str, unsigned, collation,
                           extra: dict[str, Any]) -> tuple[str, str, Any, Any]:
    """What a user-supplied schema adds where the TABLE_MAP's metadata is silent; returns
    (name, name_from, unsigned, collation) and fills ``extra``."""
    if name_from != "metadata" and spec.name:
        name, name_from = spec.name, "schema"
    if unsigned is None and spec.unsigned is not None and real in NUMERIC_TYPES:
        unsigned = spec.unsigned
    if collation is None and spec.charset is not None:
        collation = spec.collation_id()
    if real == T.ENUM and "enum_values" not in extra and spec.enum_values is not None:
        extra["enum_values"] = tuple(spec.enum_values)
    if real == T.SET and "set_values" not in extra and spec.set_values is not None:
        extra["set_values"] = tuple(spec.set_values)
    if (bt in (T.TIME, T.DATETIME, T.TIMESTAMP) and ctx.is_mariadb
            and getattr(spec, "fsp", None) and 0 < spec.fsp <= 6):
        # MariaDB 5.3 fractional format: old type code, no metadata; fsp from the schema
        extra["fsp"] = spec.fsp
    return name, name_from, unsigned, collation


#: optional metadata given per column of one type (one entry per such column, in column order):
#: type -> (TABLE_MAP metadata key, ColumnInfo field it fills)
_PER_TYPE_METADATA: dict[int, tuple[str, str]] = {
    T.ENUM: ("enum_str_values", "enum_values"),
    T.SET: ("set_str_values", "set_values"),
    T.GEOMETRY: ("geometry_types", "geometry_type"),
    T.VECTOR: ("vector_dimensions", "vector_dimensions"),
}


def _collation(index: int, per_column: tuple[int, ...] | None, pairs: dict[int, int],
               default: int | None) -> int | None:
    """The collation of the ``index``-th column of its kind (character, or ENUM/SET): from the
    per-column list when the TABLE_MAP has one, else the default charset's exceptions or the
    default itself; None when the TABLE_MAP says nothing."""
    if per_column is not None:
        return per_column[index] if index < len(per_column) else None
    if default is not None:
        return pairs.get(index, default)
    return None


def _build_columns(types, metas, null_bitmap, kw, ctx, schema, table) -> list[ColumnInfo]:
    charset_pairs = kw.pop("_charset_pairs", {})
    es_pairs = kw.pop("_enum_set_charset_pairs", {})
    ncols = len(types)
    char_types = MARIADB_CHARACTER_TYPES if ctx.is_mariadb else MYSQL_CHARACTER_TYPES
    num_types = MARIADB_NUMERIC_TYPES if ctx.is_mariadb else NUMERIC_TYPES
    names = kw.get("column_names")
    user = _user_schema(ctx, schema, table, ncols)
    signedness = kw.get("signedness")
    col_charsets = kw.get("column_charsets")
    es_col_charsets = kw.get("enum_set_column_charsets")
    visibility = kw.get("column_visibility")
    pk = dict(kw.get("primary_key") or ())

    cols = []
    i_num = i_char = i_es = 0
    seen = dict.fromkeys(_PER_TYPE_METADATA, 0)  # columns of each of those types so far
    for i in range(ncols):
        bt = types[i]
        meta = metas[i]
        real, extra = _type_details(bt, meta)
        nullable = bool(null_bitmap[i // 8] >> (i % 8) & 1) if i // 8 < len(null_bitmap) else True

        unsigned = None
        if real in num_types:
            if signedness is not None and real != T.YEAR:
                unsigned = signedness[i_num] if i_num < len(signedness) else None
            i_num += 1
        collation = None
        if real in char_types:
            collation = _collation(i_char, col_charsets, charset_pairs, kw.get("default_charset"))
            i_char += 1
        elif real in ENUM_SET_TYPES:
            collation = _collation(i_es, es_col_charsets, es_pairs, kw.get("enum_set_default_charset"))
            i_es += 1
        per_type = _PER_TYPE_METADATA.get(real)
        if per_type is not None:
            key, attr = per_type
            values, k = kw.get(key), seen[real]
            if values is not None and k < len(values):
                extra[attr] = values[k]
            seen[real] = k + 1
        if real in (T.BIT, T.GEOMETRY) and collation is None:
            collation = BINARY_COLLATION if real == T.GEOMETRY else None

        name_from = "fallback"
        name = f"col_{i + 1}"
        if names is not None and i < len(names):
            name, name_from = names[i], "metadata"
        spec = user[i] if user is not None else None
        if spec is not None:
            name, name_from, unsigned, collation = _fill_from_user_schema(
                spec, bt, real, ctx, name, name_from, unsigned, collation, extra)
        if real == T.ENUM or real == T.SET:
            extra.setdefault("length", meta & 0xFF)
        cols.append(ColumnInfo(
            index=i, name=name, type=real, binlog_type=bt, meta=meta, nullable=nullable,
            unsigned=unsigned, collation=collation, charset=charset_of(collation),
            visible=(visibility[i] if visibility is not None and i < len(visibility) else None),
            primary_key=i in pk, primary_key_prefix=(pk[i] if i in pk and pk[i] else None),
            name_from=name_from, **extra))
    return cols


def _user_schema(ctx: DecodeContext, schema: str, table: str, ncols: int):
    reg = getattr(ctx, "schemas", None)
    if reg is None:
        return None
    from binlog_parser.rows.schema import lookup_columns

    return lookup_columns(reg, schema, table, ncols)
