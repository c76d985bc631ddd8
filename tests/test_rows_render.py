"""render_value / render_value_text: MySQL's SELECT text for every value type."""

from __future__ import annotations

import json
import struct
from decimal import Decimal

import pytest

from binlog_parser.rows import (
    ColumnInfo,
    Geometry,
    MySQLDate,
    MySQLDateTime,
    MySQLJson,
    MySQLTime,
    MySQLTimestamp,
    Vector,
    render_value,
    render_value_bytes,
    render_value_text,
)
from binlog_parser.rows.column_types import ColumnType as T
from binlog_parser.rows.numbers import format_double, format_float_select


def col(t, **kw):
    return ColumnInfo(index=0, name="c", type=t, binlog_type=t, meta=0, nullable=True, **kw)


def f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


@pytest.mark.parametrize("value,text", [
    (3.141592653589793, "3.141592653589793"), (-1e300, "-1e300"), (0.5, "0.5"), (1e15, "1e15"),
    (1e14, "100000000000000"), (123456789012345680.0, "1.2345678901234568e17"), (0.1, "0.1"),
    (1e-7, "0.0000001"), (1e-15, "0.000000000000001"), (1e-16, "1e-16"), (100.0, "100"),
    (2.2250738585072014e-308, "2.2250738585072014e-308"), (1.7976931348623157e308, "1.7976931348623157e308"),
    (0.30000000000000004, "0.30000000000000004"), (0.0, "0"),
])
def test_double_text(value, text):
    assert format_double(value) == text
    assert render_value_text(value, col(T.DOUBLE)) == text
    assert render_value(value, col(T.DOUBLE)) == float(text)


@pytest.mark.parametrize("value,text", [  # as MariaDB 10.11 printed them (tests/sql/all_types.sql)
    (6.28318, "6.28318"), (-3e-10, "-0.0000000003"), (3.40282e38, "3.40282e38"), (0.1, "0.1"),
    (1234567, "1234570"), (-0.00001, "-0.00001"), (100, "100"), (1e-20, "1e-20"), (0.5, "0.5"),
])
def test_float_text(value, text):
    # the server's 6 digits; binlake's own text is the shortest that is the float32
    assert format_float_select(f32(value)) == text
    shortest = render_value_text(f32(value), col(T.FLOAT))
    assert f32(float(shortest)) == f32(value) and len(shortest) <= len(f"{f32(value):.9g}")
    assert render_value(f32(value), col(T.FLOAT)) == float(shortest)


def test_integers_and_json_safety():
    assert render_value(2**53, col(T.LONGLONG)) == 2**53
    assert render_value(2**53 + 1, col(T.LONGLONG)) == "9007199254740993"
    assert render_value(-2**63, col(T.LONGLONG)) == "-9223372036854775808"
    assert render_value_text(18446744073709551615, col(T.LONGLONG)) == "18446744073709551615"
    assert render_value(0, col(T.YEAR)) == "0000" and render_value(1999, col(T.YEAR)) == "1999"


def test_decimal_keeps_scale():
    c = col(T.NEWDECIMAL, precision=12, scale=2)
    assert render_value(Decimal("12.50"), c) == "12.50"
    assert render_value(Decimal("-0.000000000000000000000000000001"), col(T.NEWDECIMAL, scale=30)) == \
        "-0.000000000000000000000000000001"
    assert render_value(Decimal("12.5"), col(T.NEWDECIMAL, scale=4)) == "12.5000"


def test_temporal_text():
    assert render_value(MySQLDateTime(2025, 5, 27, 1, 6, 53, 569478, 6), col(T.DATETIME2)) == "2025-05-27 01:06:53.569478"
    assert render_value(MySQLTime(True, 12, 0, 0, 0, 2), col(T.TIME2)) == "-12:00:00.00"
    assert render_value(MySQLDate(0, 0, 0), col(T.DATE)) == "0000-00-00"
    assert render_value(MySQLTimestamp(0, 0, 4), col(T.TIMESTAMP2)) == "0000-00-00 00:00:00.0000"
    assert render_value(MySQLTimestamp(1, 500000, 6), col(T.TIMESTAMP2)) == "1970-01-01 00:00:01.500000"


def test_strings_binary_sets_json():
    assert render_value("new,vip", col(T.SET)) == "new,vip"
    assert render_value(b"\x00\x01", col(T.BLOB, charset="binary")) == "0x0001"
    assert render_value(b"\x02\xaa", col(T.BIT)) == "0x02aa"
    assert render_value(b"plain", col(T.VARCHAR)) == "plain"            # charset unknown, valid UTF-8
    assert render_value(b"\xff\xfe", col(T.VARCHAR)) == "0xfffe"        # charset unknown, not UTF-8
    assert render_value(MySQLJson({"k": [1, 2.5]}), col(T.JSON)) == '{"k": [1, 2.5]}'
    g = Geometry(0, bytes.fromhex("0101000000") + struct.pack("<dd", 1, 2))
    assert render_value(g, col(T.GEOMETRY)) == "0x00000000" + g.wkb.hex()
    assert render_value_bytes(g, col(T.GEOMETRY)) == g.to_bytes()
    v = Vector((f32(1.1), -2.0))
    assert render_value(v, col(T.VECTOR)) == [1.1, -2.0]
    assert render_value_text(v, col(T.VECTOR)) == "[1.10000e+00,-2.00000e+00]"
    assert render_value(None, col(T.LONG)) is None and render_value_text(None, col(T.LONG)) is None


def test_everything_is_json_serialisable():
    values = [1, 2**64 - 1, 0.5, Decimal("1.5"), "é", b"\x00", MySQLDate(2024, 1, 2), MySQLJson([None, True]),
              Vector((1.0,)), Geometry(4326, b"\x01")]
    json.dumps([render_value(v) for v in values])
    assert all(isinstance(render_value_text(v), str) for v in values)
