"""Per-column value encoders: ``make_encoder(column) -> value -> bytes``.

The inverse of ``binlog_parser.rows.values.make_decoder``: the same ``ColumnInfo`` (from a
TABLE_MAP) drives both, so what the writer stores the reader gives back. Accepted values are the
decoder's typed values plus convenient Python ones: int for integers / YEAR / ENUM index / SET
mask / BIT; float; ``Decimal`` (or int/str) for DECIMAL; ``datetime.date`` / ``datetime.datetime``
/ ``datetime.timedelta`` or the ``temporal`` classes; str or bytes for text and blobs; a JSON tree
or ``MySQLJson`` for JSON; ``Geometry``; ``Vector`` or a float sequence.
"""

from __future__ import annotations

import datetime as _dt
import struct
from collections.abc import Callable
from typing import Any

from binlog_parser.errors import ValueEncodeError
from binlog_parser.rows.charsets import CHARSET_CODEC
from binlog_parser.rows.column_types import INTEGER_SIZES
from binlog_parser.rows.column_types import ColumnType as T
from binlog_parser.rows.decimal import decimal_binary_size
from binlog_parser.rows.json_binary import MySQLJson
from binlog_parser.rows.temporal import (
    MySQLDate,
    MySQLDateTime,
    MySQLTime,
    MySQLTimestamp,
)
from binlog_parser.rows.values import Geometry, Vector
from binlog_parser.writer.decimal import encode_decimal
from binlog_parser.writer.json_binary import encode_json

Encoder = Callable[[Any], bytes]

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


# ---------------------------------------------------------------- numbers

_INT_FMT = {1: "b", 2: "h", 4: "i", 8: "q"}


def _int_encoder(size: int, unsigned: bool) -> Encoder:
    fmt = _INT_FMT.get(size)
    if fmt is not None:
        pack = struct.Struct("<" + (fmt.upper() if unsigned else fmt)).pack
        if unsigned:
            return pack
        ovf = 1 << (size * 8)

        def enc_signed(v, pack=pack, ovf=ovf, half=ovf >> 1):
            # accept the unsigned reading of a signed column (as old decoders produce)
            return pack(v - ovf if v >= half else v)
        return enc_signed

    def enc3(v):
        if v < 0:
            v += 1 << 24
        return (v & 0xFFFFFF).to_bytes(3, "little")
    return enc3


def _decimal_encoder(precision: int, scale: int) -> Encoder:
    size = decimal_binary_size(precision, scale)

    def enc(v):
        b = encode_decimal(v, precision, scale)
        assert len(b) == size
        return b
    return enc


# ---------------------------------------------------------------- temporal

def _frac_bytes(usec: int, fsp: int) -> bytes:
    if fsp <= 0:
        return b""
    if fsp <= 2:
        return bytes((usec // 10000,))
    if fsp <= 4:
        return (usec // 100).to_bytes(2, "big")
    return usec.to_bytes(3, "big")


def _to_usec_fsp(usec: int, fsp: int) -> int:
    # keep only the digits the column stores (the server rounds before logging)
    step = 10 ** (6 - fsp) if fsp < 6 else 1
    return usec - usec % step


def _date_parts(v: Any) -> tuple[int, int, int]:
    if isinstance(v, (MySQLDate, MySQLDateTime, _dt.date)):
        return v.year, v.month, v.day
    if isinstance(v, str):
        y, m, d = v[:10].split("-")
        return int(y), int(m), int(d)
    raise ValueEncodeError(f"not a date: {v!r}")


def _datetime_parts(v: Any) -> tuple[int, int, int, int, int, int, int]:
    if isinstance(v, (MySQLDateTime, _dt.datetime)):
        return v.year, v.month, v.day, v.hour, v.minute, v.second, v.microsecond
    if isinstance(v, (MySQLDate, _dt.date)):
        return v.year, v.month, v.day, 0, 0, 0, 0
    if isinstance(v, str):
        d = _dt.datetime.fromisoformat(v)
        return d.year, d.month, d.day, d.hour, d.minute, d.second, d.microsecond
    raise ValueEncodeError(f"not a datetime: {v!r}")


def _time_parts(v: Any) -> tuple[bool, int, int, int, int]:
    if isinstance(v, MySQLTime):
        return v.negative, v.hours, v.minutes, v.seconds, v.microsecond
    if isinstance(v, _dt.timedelta):
        neg = v < _dt.timedelta(0)
        if neg:
            v = -v
        total = v.days * 86400 + v.seconds
        return neg, total // 3600, (total // 60) % 60, total % 60, v.microseconds
    if isinstance(v, _dt.time):
        return False, v.hour, v.minute, v.second, v.microsecond
    raise ValueEncodeError(f"not a time: {v!r}")


def _timestamp_parts(v: Any) -> tuple[int, int]:
    if isinstance(v, MySQLTimestamp):
        return v.seconds, v.microsecond
    if isinstance(v, _dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=_dt.UTC)
        delta = v - _EPOCH
        return delta.days * 86400 + delta.seconds, delta.microseconds
    if isinstance(v, (int, float)):
        sec = int(v)
        return sec, int(round((v - sec) * 1e6))
    raise ValueEncodeError(f"not a timestamp: {v!r}")


def _datetime2_encoder(fsp: int) -> Encoder:
    def enc(v):
        y, mo, d, h, mi, s, us = _datetime_parts(v)
        ymd = ((y * 13 + mo) << 5) | d
        hms = (h << 12) | (mi << 6) | s
        intpart = ((ymd << 17) | hms) + 0x8000000000
        return intpart.to_bytes(5, "big") + _frac_bytes(_to_usec_fsp(us, fsp), fsp)
    return enc


def _timestamp2_encoder(fsp: int) -> Encoder:
    def enc(v):
        sec, us = _timestamp_parts(v)
        return sec.to_bytes(4, "big") + _frac_bytes(_to_usec_fsp(us, fsp), fsp)
    return enc


def _time2_encoder(fsp: int) -> Encoder:
    def enc(v):
        neg, h, m, s, us = _time_parts(v)
        us = _to_usec_fsp(us, fsp)
        packed = ((((h << 12) | (m << 6) | s)) << 24) + us
        if neg:
            packed = -packed
        # my_time_packed_to_binary: int part = arithmetic shift (floor); fractional part =
        # C remainder (sign of the dividend) divided with truncation, stored two's complement
        intpart = (packed >> 24) + 0x800000
        frac = (-((-packed) & 0xFFFFFF)) if neg else packed & 0xFFFFFF
        if fsp <= 0:
            return intpart.to_bytes(3, "big")
        if fsp <= 2:
            f = -((-frac) // 10000) if frac < 0 else frac // 10000
            return intpart.to_bytes(3, "big") + bytes((f & 0xFF,))
        if fsp <= 4:
            f = -((-frac) // 100) if frac < 0 else frac // 100
            return intpart.to_bytes(3, "big") + (f & 0xFFFF).to_bytes(2, "big")
        return (packed + 0x800000000000).to_bytes(6, "big")
    return enc


def _date_enc(v):
    y, m, d = _date_parts(v)
    return ((y << 9) | (m << 5) | d).to_bytes(3, "little")


def _time_enc(v):  # old TIME: [-]HHMMSS as a 3-byte signed integer
    neg, h, m, s, _us = _time_parts(v)
    n = h * 10000 + m * 100 + s
    return (-n if neg else n).to_bytes(3, "little", signed=True)


def _datetime_enc(v):  # old DATETIME: YYYYMMDDhhmmss as 8 bytes
    y, mo, d, h, mi, s, _ = _datetime_parts(v)
    return (((y * 10000 + mo * 100 + d) * 1000000) + h * 10000 + mi * 100 + s).to_bytes(8, "little")


def _timestamp_enc(v):
    return _timestamp_parts(v)[0].to_bytes(4, "little")


def _year_enc(v):
    if isinstance(v, (_dt.date, MySQLDate)):
        v = v.year
    return bytes((v - 1900 if v else 0,))


# ---------------------------------------------------------------- strings

def _text_encoder(charset: str | None) -> Callable[[Any], bytes]:
    codec = CHARSET_CODEC.get(charset) if charset else None
    if codec == "mysql_latin1":
        def enc_latin1(v):
            if isinstance(v, str):
                try:
                    return v.encode("cp1252")
                except UnicodeEncodeError:
                    return bytes(ord(c) if ord(c) < 256 and c in "\x81\x8d\x8f\x90\x9d"
                                 else c.encode("cp1252")[0] for c in v)
            return bytes(v)
        return enc_latin1
    codec = codec or "utf-8"

    def enc(v):
        if isinstance(v, str):
            return v.encode(codec, errors="surrogateescape" if codec == "utf_8" else "strict")
        return bytes(v)
    return enc


def _length_prefixed(nlen: int, to_bytes: Callable[[Any], bytes]) -> Encoder:
    if nlen == 1:
        def enc1(v):
            b = to_bytes(v)
            if len(b) > 255:
                raise ValueEncodeError(f"value of {len(b)} bytes does not fit a 1-byte length")
            return bytes((len(b),)) + b
        return enc1
    limit = 1 << (8 * nlen)

    def enc(v):
        b = to_bytes(v)
        if len(b) >= limit:
            raise ValueEncodeError(f"value of {len(b)} bytes does not fit a {nlen}-byte length")
        return len(b).to_bytes(nlen, "little") + b
    return enc


def _json_bytes(v: Any) -> bytes:
    if isinstance(v, MySQLJson):
        v = v.tree
    elif isinstance(v, (bytes, bytearray)):
        return bytes(v)  # already binary JSON
    return encode_json(v)


def _geometry_bytes(v: Any) -> bytes:
    if isinstance(v, Geometry):
        return v.to_bytes()
    return bytes(v)


def _vector_bytes(v: Any) -> bytes:
    vals = v.values if isinstance(v, Vector) else tuple(v)
    return struct.pack(f"<{len(vals)}f", *vals)


# ---------------------------------------------------------------- dispatch

def _bit_encoder(nbytes: int) -> Encoder:
    def enc_bit(v):
        if isinstance(v, int):
            return v.to_bytes(nbytes, "big")
        b = bytes(v)
        if len(b) != nbytes:
            raise ValueEncodeError(f"BIT value of {len(b)} bytes, column has {nbytes}")
        return b
    return enc_bit


def _enum_encoder(size: int, names: Any) -> Encoder:
    index = {n: i + 1 for i, n in enumerate(names)}
    index[""] = 0

    def enc_enum(v):
        i = v if isinstance(v, int) else index[v]
        return i.to_bytes(size, "little")
    return enc_enum


def _set_encoder(size: int, names: Any) -> Encoder:
    bit = {n: 1 << i for i, n in enumerate(names)}

    def enc_set(v):
        if isinstance(v, int):
            mask = v
        elif isinstance(v, str):
            mask = 0
            for n in (v.split(",") if v else ()):
                mask |= bit[n]
        else:
            mask = 0
            for n in v:
                mask |= bit[n]
        return mask.to_bytes(size, "little")
    return enc_set


def make_encoder(col: Any) -> Encoder:
    """The value encoder for one column (a ``binlog_parser.rows.ColumnInfo``)."""
    t = col.type
    meta = col.meta
    if t in INTEGER_SIZES:
        return _int_encoder(INTEGER_SIZES[t], bool(col.unsigned))
    if t == T.FLOAT:
        return struct.Struct("<f").pack
    if t == T.DOUBLE:
        return struct.Struct("<d").pack
    if t == T.NEWDECIMAL:
        return _decimal_encoder(meta >> 8, meta & 0xFF)
    if t == T.YEAR:
        return _year_enc
    if t in (T.DATE, T.NEWDATE):
        return _date_enc
    if t == T.TIME:
        return _time_enc
    if t == T.DATETIME:
        return _datetime_enc
    if t == T.TIMESTAMP:
        return _timestamp_enc
    if t == T.TIME2:
        return _time2_encoder(meta)
    if t == T.DATETIME2:
        return _datetime2_encoder(meta)
    if t == T.TIMESTAMP2:
        return _timestamp2_encoder(meta)
    if t == T.NULL:
        return lambda v: b""
    if t == T.BIT:
        return _bit_encoder(((meta >> 8) * 8 + (meta & 0xFF) + 7) // 8)
    if t == T.ENUM:
        return _enum_encoder(col.length, col.enum_values or ())
    if t == T.SET:
        return _set_encoder(col.length, col.set_values or ())
    if t in (T.VARCHAR, T.VAR_STRING, T.STRING):
        conv = _text_encoder(col.charset)
        if t == T.STRING:
            pad = b"\x00" if col.charset == "binary" else b" "

            def conv_char(v, conv=conv, pad=pad):  # the server strips the CHAR/BINARY pad
                return conv(v).rstrip(pad)
            return _length_prefixed(1 if col.length < 256 else 2, conv_char)
        return _length_prefixed(1 if col.length < 256 else 2, conv)
    if t in (T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB):
        return _length_prefixed(meta, _text_encoder(col.charset))
    if t == T.JSON:
        return _length_prefixed(meta, _json_bytes)
    if t == T.GEOMETRY:
        return _length_prefixed(meta, _geometry_bytes)
    if t == T.VECTOR:
        return _length_prefixed(meta, _vector_bytes)
    raise ValueEncodeError(f"column {col.index + 1} ({col.name}): cannot encode type {t}")
