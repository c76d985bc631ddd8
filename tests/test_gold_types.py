"""binlake.gold.types: the MySQL -> Spark type table and the conversion of silver's values.

Values are the decoder's own renderings (``render_value`` of real decoded values), so a change
of the silver encoding breaks these tests rather than gold silently.
"""

from __future__ import annotations

import datetime as _dt
from decimal import Decimal

import pytest

from binlake.gold.errors import ConversionError
from binlake.gold.types import (
    MySQLColumn,
    Rendering,
    column_from_table_map,
    convert_value,
    default_value,
    raw_bytes_of,
    rendering_of,
    spark_type,
    table_map_name,
)


@pytest.mark.parametrize(("column", "expected"), [
    (MySQLColumn("a", "tinyint"), "TINYINT"),
    (MySQLColumn("a", "tinyint", unsigned=True), "SMALLINT"),
    (MySQLColumn("a", "mediumint", unsigned=True), "INT"),
    (MySQLColumn("a", "int", unsigned=True), "BIGINT"),
    (MySQLColumn("a", "bigint"), "BIGINT"),
    (MySQLColumn("a", "bigint", unsigned=True), "DECIMAL(20,0)"),
    (MySQLColumn("a", "decimal", precision=38, scale=10), "DECIMAL(38,10)"),
    (MySQLColumn("a", "decimal", precision=65, scale=30), "STRING"),
    (MySQLColumn("a", "datetime", fsp=6), "TIMESTAMP_NTZ"),
    (MySQLColumn("a", "timestamp", fsp=3), "TIMESTAMP"),
    (MySQLColumn("a", "time", fsp=6), "STRING"),
    (MySQLColumn("a", "bit", length=64), "BINARY"),
    (MySQLColumn("a", "enum", members=("x",)), "STRING"),
    (MySQLColumn("a", "json"), "STRING"),
    (MySQLColumn("a", "longblob"), "BINARY"),
    (MySQLColumn("a", "varchar", charset="latin1"), "STRING"),
    (MySQLColumn("a", "year"), "INT"),
    (MySQLColumn("a", "float"), "FLOAT"),
])
def test_spark_type(column: MySQLColumn, expected: str) -> None:
    assert spark_type(column) == expected


def test_unknown_type_is_an_error() -> None:
    with pytest.raises(ConversionError, match="no gold mapping"):
        spark_type(MySQLColumn("g", "point_cloud"))


def test_integers_signed_decoding_fixed_by_ddl() -> None:
    # without SIGNEDNESS the decoder reads BIGINT UNSIGNED max as -1
    assert convert_value(-1, MySQLColumn("a", "bigint", unsigned=True)) == Decimal(18446744073709551615)
    assert convert_value("18446744073709551615", MySQLColumn("a", "bigint", unsigned=True)) == Decimal(2**64 - 1)
    assert convert_value(-1, MySQLColumn("a", "int", unsigned=True)) == 4294967295
    assert convert_value(-8388608, MySQLColumn("a", "mediumint")) == -8388608


def test_decimals_exact() -> None:
    wide = MySQLColumn("a", "decimal", precision=65, scale=30)
    text = "12345678901234567890123456789012345.123456789012345678901234567890"
    assert convert_value(text, wide) == text
    assert convert_value("-0.0001", MySQLColumn("a", "decimal", precision=10, scale=4)) == Decimal("-0.0001")


def test_temporals() -> None:
    assert convert_value("9999-12-31 23:59:59.999999", MySQLColumn("a", "datetime", fsp=6)) == \
        _dt.datetime(9999, 12, 31, 23, 59, 59, 999999)
    assert convert_value("2038-01-19 03:14:07.999", MySQLColumn("a", "timestamp", fsp=3)) == \
        _dt.datetime(2038, 1, 19, 3, 14, 7, 999000, tzinfo=_dt.UTC)
    assert convert_value("0000-00-00", MySQLColumn("a", "date")) is None
    assert convert_value("2024-00-10", MySQLColumn("a", "date")) is None
    assert convert_value("-838:59:59.000000", MySQLColumn("a", "time", fsp=6)) == "-838:59:59.000000"
    assert convert_value("1999", MySQLColumn("a", "year")) == 1999


def test_unknown_charset_rendering_is_undone_exactly() -> None:
    latin1 = MySQLColumn("a", "varchar", charset="latin1")
    assert convert_value("0x636166e980", latin1, Rendering.RAW_OR_HEX) == "café€"
    # valid UTF-8 bytes were rendered as text: the latin1 reading of those bytes
    assert convert_value("é", latin1, Rendering.RAW_OR_HEX) == "Ã©"
    # "0x41" decodes to valid UTF-8 ("A"), so the decoder would have printed "A": literal text
    assert raw_bytes_of("0x41") == b"0x41"
    assert raw_bytes_of("0xff00") == b"\xff\x00"
    assert convert_value("0x41", MySQLColumn("a", "varchar", charset="utf8mb4"), Rendering.RAW_OR_HEX) == "0x41"
    assert convert_value("0xff00fe", MySQLColumn("b", "blob"), Rendering.RAW_OR_HEX) == b"\xff\x00\xfe"
    assert convert_value("abc", MySQLColumn("b", "blob"), Rendering.RAW_OR_HEX) == b"abc"


def test_binary_and_bit() -> None:
    assert convert_value("0x00ff0a", MySQLColumn("a", "binary", length=4, charset="binary")) == b"\x00\xff\x0a\x00"
    assert convert_value("0xffffffffffffffff", MySQLColumn("a", "bit", length=64)) == b"\xff" * 8
    with pytest.raises(ConversionError, match="not 0x"):
        convert_value("zz", MySQLColumn("a", "blob"))


def test_enum_set_from_indexes() -> None:
    enum = MySQLColumn("e", "enum", members=("red", "green", "blue"))
    assert convert_value(3, enum) == "blue" and convert_value(0, enum) == ""
    assert convert_value("green", enum) == "green"
    assert convert_value(0b1011, MySQLColumn("s", "set", members=("a", "b", "c", "d"))) == "a,b,d"
    with pytest.raises(ConversionError, match="beyond"):
        convert_value(4, enum)


def test_defaults() -> None:
    assert default_value(MySQLColumn("s", "varchar", default="new")) == "new"
    assert default_value(MySQLColumn("n", "int", default="-5")) == -5
    assert default_value(MySQLColumn("n", "int")) is None


def test_table_map_columns() -> None:
    fallback = {"name": "col_3", "type": "VARCHAR", "length": 40, "nullable": True, "name_from": "fallback"}
    assert table_map_name(fallback) == "@3"
    assert rendering_of(fallback) is Rendering.RAW_OR_HEX
    column = column_from_table_map(fallback)
    assert (column.name, column.type, spark_type(column)) == ("@3", "varbinary", "BINARY")
    full = {"name": "amount", "type": "NEWDECIMAL", "precision": 12, "scale": 2, "unsigned": False}
    assert spark_type(column_from_table_map(full)) == "DECIMAL(12,2)"
    assert rendering_of({"name": "v", "type": "VARCHAR", "charset": "utf8mb4"}) is Rendering.DECODED
