"""Per-column value decoders: ``make_decoder(column) -> (buf, pos) -> (value, new_pos)``.

A TABLE_MAP builds one decoder per column once; every row of every rows event on that table
reuses them, so the hot loop does no type dispatch. ``buf`` is ``bytes``.

Typed values (see ``docs/row_values.md``): int for integers (signedness from metadata, signed
when unknown); float for FLOAT/DOUBLE; ``decimal.Decimal`` for DECIMAL; int for YEAR (0 = the
zero year); ``temporal`` classes for dates and times; str for text with a known charset, bytes
for binary data or when the charset is unknown or the bytes are invalid in it; bytes for BIT;
str/int for ENUM (name / index) and SET (``a,b`` / bitmask); ``MySQLJson`` for JSON;
``Geometry`` for GEOMETRY; ``Vector`` for VECTOR.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from binlog_parser.errors import UnsupportedColumnType
from binlog_parser.rows import temporal
from binlog_parser.rows.charsets import make_text_decoder
from binlog_parser.rows.column_types import INTEGER_SIZES
from binlog_parser.rows.column_types import ColumnType as T
from binlog_parser.rows.decimal import make_decimal_decoder
from binlog_parser.rows.json_binary import decode_json_column


@dataclass(frozen=True, slots=True)
class Geometry:
    """A GEOMETRY value as MySQL stores it: SRID (little-endian uint32) then WKB."""

    srid: int
    wkb: bytes

    def to_bytes(self) -> bytes:
        return self.srid.to_bytes(4, "little") + self.wkb


@dataclass(frozen=True, slots=True)
class Vector:
    """A VECTOR value: float32 components."""

    values: tuple[float, ...]

    def __len__(self) -> int:
        return len(self.values)


_INT_STRUCTS = {(size, unsigned): struct.Struct("<" + (fmt.upper() if unsigned else fmt))
                for size, fmt in ((1, "b"), (2, "h"), (4, "i"), (8, "q")) for unsigned in (False, True)}


def _int_decoder(size: int, unsigned: bool):
    st = _INT_STRUCTS.get((size, unsigned))
    if st is not None:
        unpack = st.unpack_from

        def dec(buf, pos):
            return unpack(buf, pos)[0], pos + size
        # (unpack_from, size): lets the rows decoder inline fixed-width integers
        dec.fixed_unpack = (unpack, size)  # type: ignore[attr-defined]
        return dec

    def dec3(buf, pos):
        return int.from_bytes(buf[pos:pos + size], "little", signed=not unsigned), pos + size
    return dec3


def _length_prefixed(nlen: int, convert=None):
    if nlen == 1:
        def dec(buf, pos):
            n = buf[pos]
            end = pos + 1 + n
            if end > len(buf):
                raise ValueError("value runs past the end of the event")
            data = buf[pos + 1:end]
            return (convert(data) if convert else data), end
    else:
        def dec(buf, pos):
            n = int.from_bytes(buf[pos:pos + nlen], "little")
            start = pos + nlen
            end = start + n
            if end > len(buf):
                raise ValueError("value runs past the end of the event")
            data = buf[start:end]
            return (convert(data) if convert else data), end
    if nlen in (1, 2) and getattr(convert, "python_codec", None) == "utf-8":
        # the common VARCHAR utf8mb4 column: rows_event inlines the length prefix and the decode
        dec.inline = ("utf8", nlen)  # type: ignore[attr-defined]
    return dec


def _bytes_to_set(mask: int, names):
    if names is None:
        return mask
    return ",".join(n for i, n in enumerate(names) if mask >> i & 1)


def make_decoder(col):
    """The value decoder for one column (a ``ColumnInfo``)."""
    t = col.type
    meta = col.meta
    if t in INTEGER_SIZES:
        return _int_decoder(INTEGER_SIZES[t], bool(col.unsigned))
    if t == T.FLOAT:
        unpack_f = struct.Struct("<f").unpack_from
        return lambda buf, pos: (unpack_f(buf, pos)[0], pos + 4)
    if t == T.DOUBLE:
        unpack_d = struct.Struct("<d").unpack_from
        return lambda buf, pos: (unpack_d(buf, pos)[0], pos + 8)
    if t == T.NEWDECIMAL:
        return make_decimal_decoder(meta >> 8, meta & 0xFF)
    if t == T.YEAR:
        return temporal.make_year_decoder()
    if t in (T.DATE, T.NEWDATE):
        return temporal.make_date_decoder()
    if t in (T.TIME, T.DATETIME, T.TIMESTAMP) and col.fsp:
        # MariaDB 5.3 fractional format: old type code, fsp from the table definition
        return {T.TIME: temporal.make_time_hires_decoder, T.DATETIME: temporal.make_datetime_hires_decoder,
                T.TIMESTAMP: temporal.make_timestamp_hires_decoder}[t](col.fsp)
    if t == T.TIME:
        return temporal.make_time_decoder()
    if t == T.DATETIME:
        return temporal.make_datetime_decoder()
    if t == T.TIMESTAMP:
        return temporal.make_timestamp_decoder()
    if t == T.TIME2:
        return temporal.make_time2_decoder(meta)
    if t == T.DATETIME2:
        return temporal.make_datetime2_decoder(meta)
    if t == T.TIMESTAMP2:
        return temporal.make_timestamp2_decoder(meta)
    if t == T.NULL:
        return lambda buf, pos: (None, pos)
    if t == T.BIT:
        nbytes = ((meta >> 8) * 8 + (meta & 0xFF) + 7) // 8
        return lambda buf, pos: (buf[pos:pos + nbytes], pos + nbytes)
    if t == T.ENUM:
        size = col.length
        names = col.enum_values

        def dec_enum(buf, pos):
            idx = int.from_bytes(buf[pos:pos + size], "little")
            if names is None:
                return idx, pos + size
            if idx == 0:
                return "", pos + size
            return (names[idx - 1] if idx <= len(names) else idx), pos + size
        return dec_enum
    if t == T.SET:
        size = col.length
        names = col.set_values
        return lambda buf, pos: (_bytes_to_set(int.from_bytes(buf[pos:pos + size], "little"), names),
                                 pos + size)
    if t in (T.VARCHAR, T.VAR_STRING, T.STRING):
        conv = make_text_decoder(col.charset)
        if t == T.STRING and col.charset == "binary" and col.length:
            width = col.length

            def conv(data, width=width):  # BINARY(n): the binlog strips trailing 0x00 pad
                return data + b"\x00" * (width - len(data)) if len(data) < width else data
        return _length_prefixed(1 if col.length < 256 else 2, conv)
    if t in (T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB):
        return _length_prefixed(meta, make_text_decoder(col.charset))
    if t == T.JSON:
        return _length_prefixed(meta, decode_json_column)
    if t == T.GEOMETRY:
        return _length_prefixed(meta, lambda d: Geometry(int.from_bytes(d[:4], "little"), d[4:]))
    if t == T.VECTOR:
        def to_vector(d):
            n = len(d) // 4
            return Vector(struct.unpack_from(f"<{n}f", d, 0))
        return _length_prefixed(meta, to_vector)
    raise UnsupportedColumnType(f"column {col.index + 1} ({col.name}): cannot decode type {t}")
