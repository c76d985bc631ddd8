"""MySQL's binary JSON (``sql-common/json_binary.cc``) -> Python tree -> the text MySQL prints.

The tree uses plain Python values where they are faithful: dict (key order as stored, which is
MySQL's order: by key length, then bytes), list, str, int, bool, None, float. MySQL-specific
scalars keep their type so the text matches MySQL's ``Json_wrapper::to_string``: DECIMAL opaque
-> ``decimal.Decimal``; DATE/TIME/DATETIME/TIMESTAMP opaque -> the ``temporal`` classes (printed
with 6 fractional digits, as MySQL does); any other opaque -> ``JsonOpaque`` (printed
``"base64:typeNN:..."``).
"""

from __future__ import annotations

import base64
import struct
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from binlog_parser.errors import JsonDecodeError
from binlog_parser.limits import JSON_MAX_DEPTH
from binlog_parser.rows.decimal import decimal_text, make_decimal_decoder
from binlog_parser.rows.numbers import format_double
from binlog_parser.rows.temporal import MySQLDate, MySQLDateTime, MySQLTime

SMALL_OBJECT = 0x00
LARGE_OBJECT = 0x01
SMALL_ARRAY = 0x02
LARGE_ARRAY = 0x03
LITERAL = 0x04
INT16 = 0x05
UINT16 = 0x06
INT32 = 0x07
UINT32 = 0x08
INT64 = 0x09
UINT64 = 0x0A
DOUBLE = 0x0B
STRING = 0x0C
OPAQUE = 0x0F

_LIT_NULL, _LIT_TRUE, _LIT_FALSE = 0x00, 0x01, 0x02

# field types used inside opaque values
_T_NEWDECIMAL = 246
_T_DATE = 10
_T_TIME = 11
_T_DATETIME = 12
_T_TIMESTAMP = 7
_T_VAR_STRING = 253


@dataclass(frozen=True, slots=True)
class JsonOpaque:
    """An opaque JSON scalar MySQL keeps as (field type, raw bytes)."""

    field_type: int
    data: bytes

    def text(self) -> str:
        return f"base64:type{self.field_type}:{base64.b64encode(self.data).decode('ascii')}"


@dataclass(frozen=True, slots=True)
class JsonTimestamp:
    """A TIMESTAMP opaque (kept distinct from DATETIME only for its type; prints the same)."""

    value: MySQLDateTime

    def __str__(self) -> str:
        return str(self.value)


_I16 = struct.Struct("<h").unpack_from
_U16 = struct.Struct("<H").unpack_from
_I32 = struct.Struct("<i").unpack_from
_U32 = struct.Struct("<I").unpack_from
_I64 = struct.Struct("<q").unpack_from
_U64 = struct.Struct("<Q").unpack_from
_F64 = struct.Struct("<d").unpack_from
#: the fixed-size scalars: value type -> its little-endian unpacker
_NUMBERS = {INT16: _I16, UINT16: _U16, INT32: _I32, UINT32: _U32, INT64: _I64, UINT64: _U64, DOUBLE: _F64}


def _varlen(buf, pos: int, end: int) -> tuple[int, int]:
    value = 0
    shift = 0
    for _ in range(5):
        if pos >= end:
            raise JsonDecodeError("truncated variable-length integer")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
    raise JsonDecodeError("variable-length integer too long")


def _packed_datetime(packed: int, with_date: bool, fsp: int = 6):
    neg = packed < 0
    if neg:
        packed = -packed
    frac = packed & 0xFFFFFF
    intpart = packed >> 24
    if with_date:
        ymd = intpart >> 17
        ym = ymd >> 5
        hms = intpart & 0x1FFFF
        return MySQLDateTime(ym // 13, ym % 13, ymd & 31, hms >> 12, (hms >> 6) & 63, hms & 63,
                             frac, fsp)
    hms = intpart  # time packed: hour<<12 | minute<<6 | second
    return MySQLTime(neg, (hms >> 12) & 0x3FF, (hms >> 6) & 63, hms & 63, frac, fsp)


def _opaque(field_type: int, data: bytes) -> Any:
    if field_type == _T_NEWDECIMAL and len(data) >= 2:
        precision, scale = data[0], data[1]
        try:
            return make_decimal_decoder(precision, scale)(data, 2)[0]
        except (ValueError, IndexError):
            return JsonOpaque(field_type, data)
    if field_type in (_T_DATE, _T_DATETIME, _T_TIMESTAMP, _T_TIME) and len(data) >= 8:
        packed = _I64(data, 0)[0]
        if field_type == _T_TIME:
            return _packed_datetime(packed, False)
        dt = _packed_datetime(packed, True)
        if field_type == _T_DATE:
            return MySQLDate(dt.year, dt.month, dt.day)
        if field_type == _T_TIMESTAMP:
            return JsonTimestamp(dt)
        return dt
    if field_type == _T_VAR_STRING:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return JsonOpaque(field_type, data)
    return JsonOpaque(field_type, data)


def _scalar(t: int, buf, pos: int, end: int, budget: list[int] | None = None) -> Any:
    if t == LITERAL:
        v = buf[pos]
        if v == _LIT_NULL:
            return None
        if v == _LIT_TRUE:
            return True
        if v == _LIT_FALSE:
            return False
        raise JsonDecodeError(f"bad literal {v}")
    unpack = _NUMBERS.get(t)
    if unpack is not None:
        return unpack(buf, pos)[0]
    if t == STRING:
        return _sized(buf, pos, end, budget, "string").decode("utf-8", errors="surrogateescape")
    if t == OPAQUE:
        return _opaque(buf[pos], _sized(buf, pos + 1, end, budget, "opaque value"))
    raise JsonDecodeError(f"unknown JSON value type 0x{t:02x}")


def _sized(buf, pos: int, end: int, budget: list[int] | None, what: str) -> bytes:
    """The bytes of a length-prefixed value (string, opaque) at ``pos``, charged to ``budget``."""
    n, p = _varlen(buf, pos, end)
    if p + n > end:
        raise JsonDecodeError(f"{what} runs past the end")
    if budget is not None:
        _charge(budget, n)
    return bytes(buf[p:p + n])


def _charge(budget: list[int], n: int) -> None:
    """Count ``n`` units of decoded output against the document's size.

    In a document MySQL wrote, every value has its own entry (>= 3 bytes) and every string,
    key and opaque value its own bytes, so the decoded output never exceeds the document's
    size. Entries pointing at shared or overlapping values (a DAG, or a cycle) would expand
    exponentially: the budget turns them into an error instead of a memory/time bomb.
    """
    budget[0] -= n
    if budget[0] < 0:
        raise JsonDecodeError("binary JSON decodes to more values than its bytes can hold "
                              "(shared or overlapping values)")


def _container(t: int, buf, start: int, end: int, depth: int = 1,
               budget: list[int] | None = None) -> Any:
    if depth > JSON_MAX_DEPTH:
        raise JsonDecodeError(f"binary JSON nested deeper than {JSON_MAX_DEPTH} levels")
    if budget is None:
        budget = [len(buf)]
    large = t in (LARGE_OBJECT, LARGE_ARRAY)
    is_obj = t in (SMALL_OBJECT, LARGE_OBJECT)
    osz = 4 if large else 2
    rd = _U32 if large else _U16
    if start + 2 * osz > end:
        raise JsonDecodeError("container header runs past the end")
    count = rd(buf, start)[0]
    size = rd(buf, start + osz)[0]
    cend = start + size
    if cend > end:
        raise JsonDecodeError("container size exceeds document")
    pos = start + 2 * osz
    # the entry tables must fit in the container before anything is allocated for them
    if pos + count * ((osz + 2 if is_obj else 0) + 1 + osz) > cend:
        raise JsonDecodeError(f"container of {size} bytes cannot hold {count} elements")
    _charge(budget, count)
    keys = []
    if is_obj:
        for _ in range(count):
            koff = rd(buf, pos)[0]
            klen = _U16(buf, pos + osz)[0]
            pos += osz + 2
            if start + koff + klen > cend:
                raise JsonDecodeError("key runs past the end")
            _charge(budget, klen)
            keys.append(bytes(buf[start + koff:start + koff + klen]).decode("utf-8", errors="surrogateescape"))
    values = []
    for _ in range(count):
        vt = buf[pos]
        if vt in (LITERAL, INT16, UINT16) or (large and vt in (INT32, UINT32)):
            values.append(_scalar(vt, buf, pos + 1, cend))
        else:
            off = rd(buf, pos + 1)[0]
            if vt in (SMALL_OBJECT, LARGE_OBJECT, SMALL_ARRAY, LARGE_ARRAY):
                values.append(_container(vt, buf, start + off, cend, depth + 1, budget))
            else:
                values.append(_scalar(vt, buf, start + off, cend, budget))
        pos += 1 + osz
    if is_obj:
        return dict(zip(keys, values))
    return values


def _value(t: int, buf, pos: int, end: int) -> Any:
    if t in (SMALL_OBJECT, LARGE_OBJECT, SMALL_ARRAY, LARGE_ARRAY):
        return _container(t, buf, pos, end)
    return _scalar(t, buf, pos, end)


def parse_json_binary(data: bytes | memoryview) -> Any:
    """Decode one binary JSON document into the Python tree described in the module doc.

    An empty value (length 0, which servers write for JSON columns set to '' under relaxed
    SQL modes) decodes to JSON null. Hostile documents are refused with ``JsonDecodeError``:
    nesting deeper than MySQL's limit (100), element counts the bytes cannot hold, values
    shared between entries (which could expand exponentially).
    """
    buf = memoryview(data)
    if len(buf) == 0:
        return None
    try:
        return _value(buf[0], buf, 1, len(buf))
    except (struct.error, IndexError):
        raise JsonDecodeError(f"truncated binary JSON: an offset or length inside the {len(buf)}-byte "
                              f"document points past its end") from None


# ---------------------------------------------------------------- text

def _quote(s: str) -> str:
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif o <= 0x1F:
            out.append({8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r"}.get(o, f"\\u00{o:02x}"))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _write(v: Any, out: list[str]) -> None:
    if v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif isinstance(v, str):
        out.append(_quote(v))
    elif isinstance(v, int):
        out.append(str(v))
    elif isinstance(v, float):
        s = format_double(v)
        if "." not in s and "e" not in s:
            s += ".0"
        out.append(s)
    elif isinstance(v, dict):
        out.append("{")
        first = True
        for k, item in v.items():
            if not first:
                out.append(", ")
            first = False
            out.append(_quote(k))
            out.append(": ")
            _write(item, out)
        out.append("}")
    elif isinstance(v, list):
        out.append("[")
        for i, item in enumerate(v):
            if i:
                out.append(", ")
            _write(item, out)
        out.append("]")
    elif isinstance(v, Decimal):
        out.append(decimal_text(v))
    elif isinstance(v, (MySQLDateTime, MySQLTime)):
        out.append('"' + str(v) + '"')
    elif isinstance(v, (MySQLDate, JsonTimestamp)):
        out.append('"' + str(v) + '"')
    elif isinstance(v, JsonOpaque):
        out.append(_quote(v.text()))
    else:
        raise TypeError(f"not a JSON tree value: {type(v).__name__}")


def json_to_text(tree: Any) -> str:
    """The text MySQL's SELECT prints for a JSON value (``Json_wrapper::to_string``)."""
    out: list[str] = []
    _write(tree, out)
    return "".join(out)


def json_sort_key(key: str) -> tuple[int, bytes]:
    """MySQL's object key order: shorter keys first, then by bytes."""
    b = key.encode("utf-8", errors="surrogateescape")
    return (len(b), b)


@dataclass(frozen=True, slots=True, eq=True)
class MySQLJson:
    """A JSON column value. ``tree`` is the decoded document; ``str()`` is MySQL's text."""

    tree: Any

    def __str__(self) -> str:
        return json_to_text(self.tree)

    def __hash__(self) -> int:  # trees hold dicts/lists
        return hash(str(self))


def decode_json_column(data: bytes | memoryview) -> MySQLJson:
    return MySQLJson(parse_json_binary(data))
