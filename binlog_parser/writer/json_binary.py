"""Python tree -> MySQL binary JSON (``sql-common/json_binary.cc``: ``serialize_json_value``).

The inverse of ``binlog_parser.rows.json_binary.parse_json_binary``: dict, list, str, int, float,
bool, None, ``Decimal`` and the temporal classes (as opaque values), ``JsonOpaque``. Object keys
are stored in MySQL's order (shorter first, then by bytes). Integers take the smallest signed type
that holds them (INT16/INT32/INT64), UINT64 beyond INT64's range, as the server's JSON parser does.
A container is written in the small format (16-bit offsets) unless it does not fit.
"""

from __future__ import annotations

import struct
from decimal import Decimal
from typing import Any

from binlog_parser.errors import JsonSmallFormatOverflow
from binlog_parser.rows.json_binary import (
    DOUBLE,
    INT16,
    INT32,
    INT64,
    LARGE_ARRAY,
    LARGE_OBJECT,
    LITERAL,
    OPAQUE,
    SMALL_ARRAY,
    SMALL_OBJECT,
    STRING,
    UINT64,
    JsonOpaque,
    JsonTimestamp,
    json_sort_key,
)
from binlog_parser.rows.temporal import MySQLDate, MySQLDateTime, MySQLTime
from binlog_parser.writer.decimal import encode_decimal

_I16 = struct.Struct("<h").pack
_I32 = struct.Struct("<i").pack
_I64 = struct.Struct("<q").pack
_U64 = struct.Struct("<Q").pack
_F64 = struct.Struct("<d").pack


def _varlen(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _int_type(v: int) -> tuple[int, bytes]:
    if -0x8000 <= v <= 0x7FFF:
        return INT16, _I16(v)
    if -0x80000000 <= v <= 0x7FFFFFFF:
        return INT32, _I32(v)
    if -(1 << 63) <= v < (1 << 63):
        return INT64, _I64(v)
    if 0 <= v < (1 << 64):
        return UINT64, _U64(v)
    raise ValueError(f"JSON integer {v} out of range")


def _datetime_packed(year, month, day, hour, minute, second, usec) -> int:
    ymd = ((year * 13 + month) << 5) | day
    hms = (hour << 12) | (minute << 6) | second
    return (((ymd << 17) | hms) << 24) + usec


def _opaque(field_type: int, data: bytes) -> bytes:
    return bytes((field_type,)) + _varlen(len(data)) + data


def _scalar(v: Any) -> tuple[int, bytes]:
    """(type, bytes) of a non-container value."""
    if v is None:
        return LITERAL, b"\x00"
    if v is True:
        return LITERAL, b"\x01"
    if v is False:
        return LITERAL, b"\x02"
    if isinstance(v, int):
        return _int_type(v)
    if isinstance(v, float):
        return DOUBLE, _F64(v)
    if isinstance(v, str):
        b = v.encode("utf-8", errors="surrogateescape")
        return STRING, _varlen(len(b)) + b
    if isinstance(v, Decimal):
        sign, digits, exp = v.as_tuple()
        scale = -exp if isinstance(exp, int) and exp < 0 else 0
        intg = max(len(digits) + (exp if isinstance(exp, int) else 0), 0)
        if intg == 1 and digits and digits[0] == 0 and len(digits) <= scale + 1:
            intg = 0
        precision = max(intg + scale, 1)
        return OPAQUE, _opaque(246, bytes((precision, scale)) + encode_decimal(v, precision, scale))
    if isinstance(v, JsonTimestamp):
        d = v.value
        return OPAQUE, _opaque(7, _I64(_datetime_packed(d.year, d.month, d.day, d.hour, d.minute,
                                                        d.second, d.microsecond)))
    if isinstance(v, MySQLDateTime):
        return OPAQUE, _opaque(12, _I64(_datetime_packed(v.year, v.month, v.day, v.hour, v.minute,
                                                         v.second, v.microsecond)))
    if isinstance(v, MySQLDate):
        return OPAQUE, _opaque(10, _I64(_datetime_packed(v.year, v.month, v.day, 0, 0, 0, 0)))
    if isinstance(v, MySQLTime):
        packed = (((v.hours << 12) | (v.minutes << 6) | v.seconds) << 24) + v.microsecond
        return OPAQUE, _opaque(11, _I64(-packed if v.negative else packed))
    if isinstance(v, JsonOpaque):
        return OPAQUE, _opaque(v.field_type, v.data)
    raise TypeError(f"cannot store {type(v).__name__} in JSON")


def _container(v: Any, large: bool) -> bytes:
    """Container body (count, size, entries, keys, values), offsets from its start."""
    osz = 4 if large else 2
    limit = 0xFFFFFFFF if large else 0xFFFF
    pack_off = struct.Struct("<I" if large else "<H").pack
    is_obj = isinstance(v, dict)
    if is_obj:
        items = sorted(v.items(), key=lambda kv: json_sort_key(kv[0]))
        keys = [k.encode("utf-8", errors="surrogateescape") for k, _ in items]
        values = [x for _, x in items]
    else:
        keys = []
        values = list(v)
    count = len(values)
    header_size = 2 * osz + (count * (osz + 2) if is_obj else 0) + count * (1 + osz)
    key_bytes = b"".join(keys)
    offset = header_size + len(key_bytes)
    entries = []
    payload = []
    for x in values:
        if isinstance(x, (dict, list)):
            body = _container(x, large)
            t = (LARGE_OBJECT if large else SMALL_OBJECT) if isinstance(x, dict) else \
                (LARGE_ARRAY if large else SMALL_ARRAY)
        else:
            t, body = _scalar(x)
            if t == LITERAL:
                entries.append(bytes((t,)) + body + b"\x00" * (osz - 1))
                continue
            if t == INT16 or (large and t == INT32):
                entries.append(bytes((t,)) + body + b"\x00" * (osz - len(body)))
                continue
        if offset > limit:
            raise JsonSmallFormatOverflow(f"offset {offset} past {limit}")
        entries.append(bytes((t,)) + pack_off(offset))
        payload.append(body)
        offset += len(body)
    size = offset
    if size > limit:
        raise JsonSmallFormatOverflow(f"size {size} past {limit}")
    out = [pack_off(count), pack_off(size)]
    if is_obj:
        koff = header_size
        for k in keys:
            if len(k) > 0xFFFF:
                raise ValueError("JSON key longer than 65535 bytes")
            out.append(pack_off(koff) + struct.pack("<H", len(k)))
            koff += len(k)
    out += entries
    out.append(key_bytes)
    out += payload
    return b"".join(out)


def encode_json(tree: Any) -> bytes:
    """One binary JSON document (type byte + value)."""
    if isinstance(tree, (dict, list)):
        try:
            body = _container(tree, False)
            large = False
        except JsonSmallFormatOverflow:
            body = _container(tree, True)
            large = True
        if isinstance(tree, dict):
            t = LARGE_OBJECT if large else SMALL_OBJECT
        else:
            t = LARGE_ARRAY if large else SMALL_ARRAY
        return bytes((t,)) + body
    t, body = _scalar(tree)
    return bytes((t,)) + body
