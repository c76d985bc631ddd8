"""MySQL binary JSON -> tree -> MySQL's text."""

from __future__ import annotations

import struct
from decimal import Decimal

import pytest

from binlog_parser.rows.json_binary import (
    JsonDecodeError,
    JsonOpaque,
    json_to_text,
    parse_json_binary,
)
from binlog_parser.rows.temporal import MySQLDate, MySQLDateTime, MySQLTime


def _varlen(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def enc(v, large: bool = False) -> bytes:
    """Test-side serializer: (type byte, payload) of a document."""
    t, payload = _enc_value(v, large)
    return bytes([t]) + payload


def _enc_value(v, large):
    if v is None:
        return 0x04, b"\x00"
    if v is True:
        return 0x04, b"\x01"
    if v is False:
        return 0x04, b"\x02"
    if isinstance(v, int):
        if -32768 <= v <= 32767:
            return 0x05, struct.pack("<h", v)
        if -2**31 <= v < 2**31:
            return 0x07, struct.pack("<i", v)
        if v < 2**63:
            return 0x09, struct.pack("<q", v)
        return 0x0A, struct.pack("<Q", v)
    if isinstance(v, float):
        return 0x0B, struct.pack("<d", v)
    if isinstance(v, str):
        b = v.encode()
        return 0x0C, _varlen(len(b)) + b
    if isinstance(v, tuple) and v[0] == "opaque":
        return 0x0F, bytes([v[1]]) + _varlen(len(v[2])) + v[2]
    if isinstance(v, (dict, list)):
        return _enc_container(v, large)
    raise TypeError(v)


def _enc_container(v, large):
    is_obj = isinstance(v, dict)
    osz = 4 if large else 2
    fmt = "<I" if large else "<H"
    items = list(v.items()) if is_obj else [(None, x) for x in v]
    n = len(items)
    header = 2 * osz + (n * (osz + 2) if is_obj else 0) + n * (1 + osz)
    keys = b""
    key_entries = b""
    if is_obj:
        for k, _ in items:
            kb = k.encode()
            key_entries += struct.pack(fmt, header + len(keys)) + struct.pack("<H", len(kb))
            keys += kb
    body = b""
    value_entries = b""
    base = header + len(keys)
    inline = {0x04, 0x05, 0x06} | ({0x07, 0x08} if large else set())
    for _, x in items:
        t, payload = _enc_value(x, large)
        if t in inline:
            value_entries += bytes([t]) + payload.ljust(osz, b"\0")
        else:
            value_entries += bytes([t]) + struct.pack(fmt, base + len(body))
            body += payload
    total = header + len(keys) + len(body)
    head = struct.pack(fmt, n) + struct.pack(fmt, total)
    return (1 if large else 0) if is_obj else (3 if large else 2), head + key_entries + value_entries + keys + body


DOC = {"a": 1, "k": [1, 2, {"x": None}], "s": "é", "t": True, "f": False, "d": 1.5,
       "big": 2**62, "neg": -70000, "u": 2**64 - 1}


@pytest.mark.parametrize("large", [False, True])
def test_round_trip_small_and_large(large):
    tree = parse_json_binary(enc(DOC, large))
    assert tree == DOC
    assert list(tree) == list(DOC)


def test_text_matches_mysql_format():
    assert json_to_text(parse_json_binary(enc({"k": [1, 2, {"x": None}], "s": "é"}))) == \
        '{"k": [1, 2, {"x": null}], "s": "é"}'
    assert json_to_text(parse_json_binary(enc([1.0, 0.5, -1e300, 1e15, 100.0, 1e-7]))) == \
        "[1.0, 0.5, -1e300, 1e15, 100.0, 0.0000001]"
    assert json_to_text(parse_json_binary(enc("a\"b\\c\n\t\x01\x1f/é"))) == '"a\\"b\\\\c\\n\\t\\u0001\\u001f/é"'
    assert json_to_text(parse_json_binary(enc([]))) == "[]"
    assert json_to_text(parse_json_binary(enc({}))) == "{}"
    assert json_to_text(parse_json_binary(enc(None))) == "null"
    assert json_to_text(parse_json_binary(b"")) == "null"
    assert json_to_text(parse_json_binary(enc([True, False, -5, 2**64 - 1]))) == \
        "[true, false, -5, 18446744073709551615]"


def test_opaque_values():
    # DECIMAL(5,2) 9.00 as opaque: precision, scale, binary decimal
    dec = bytes([5, 2]) + bytes.fromhex("890000")[:2] + b""
    # 9.00 in DECIMAL(5,2): intg=3 -> 2 bytes (009), frac 2 digits -> 1 byte
    dec = bytes([5, 2]) + bytes([0x80, 0x09, 0x00])
    tree = parse_json_binary(enc({"e": ("opaque", 246, dec)}))
    assert tree == {"e": Decimal("9.00")}
    assert json_to_text(tree) == '{"e": 9.00}'
    # DATETIME 2012-03-18 11:30:45 as packed int64
    ym = 2012 * 13 + 3
    packed = (((ym << 5 | 18) << 17) | (11 << 12 | 30 << 6 | 45)) << 24
    tree = parse_json_binary(enc(("opaque", 12, struct.pack("<q", packed))))
    assert tree == MySQLDateTime(2012, 3, 18, 11, 30, 45, 0, 6)
    assert json_to_text(tree) == '"2012-03-18 11:30:45.000000"'
    tree = parse_json_binary(enc(("opaque", 10, struct.pack("<q", packed))))
    assert tree == MySQLDate(2012, 3, 18) and json_to_text(tree) == '"2012-03-18"'
    tpacked = ((87 << 12 | 31 << 6 | 46) << 24) + 654321
    tree = parse_json_binary(enc(("opaque", 11, struct.pack("<q", tpacked))))
    assert tree == MySQLTime(False, 87, 31, 46, 654321, 6)
    assert json_to_text(tree) == '"87:31:46.654321"'
    tree = parse_json_binary(enc(("opaque", 15, b"U")))
    assert tree == JsonOpaque(15, b"U") and json_to_text(tree) == '"base64:type15:VQ=="'


def test_large_document_offsets():
    doc = {f"key{i:04d}": "x" * 50 for i in range(2000)}  # > 64 KiB: needs the large format
    data = enc(doc, large=True)
    assert len(data) > 65536
    assert parse_json_binary(data) == doc


def test_truncated_document_is_an_error():
    data = enc(DOC)
    with pytest.raises(JsonDecodeError):
        parse_json_binary(data[:-5])
    with pytest.raises(JsonDecodeError):
        parse_json_binary(b"\x0e\x00")
