"""Regression tests for the decoder bugs the mariadb-binlog differential test found, built byte
by byte so they run without a server (the live versions are in
test_differential_mariadb_server.py).

1. USER_VAR string values were decoded as UTF-8 (else Latin-1) whatever their charset: a
   latin1 variable holding C3 A9 came out as "é" instead of the server's "Ã©"; ucs2 00 E9 as
   "\\x00é" instead of "é".
2. MariaDB's 5.3-format TIME/DATETIME/TIMESTAMP(n) (mysql56_temporal_format=OFF, tables from
   MariaDB <= 10.0) are logged with the old type codes 11/12/7 and no metadata: the decoder
   used the old 3/8/4-byte layouts, so DATETIME(6) (8 bytes, like the old DATETIME) decoded to
   a garbage date silently and the others overran. Now: the fsp comes from the table's DDL
   (SchemaRegistry / ColumnSpec.fsp), and without it the event fails with an error that says why.
"""

from __future__ import annotations

import struct

import pytest
from _binlog_util import Builder
from test_rows_event import ctx, hdr, table_map

from binlog_parser import CorruptEventError, read_events
from binlog_parser.constants import EventType
from binlog_parser.context import DecodeContext
from binlog_parser.rows import ROW_EVENT_DECODERS, SchemaRegistry
from binlog_parser.rows.column_types import ColumnType as T


def _uv(name: bytes, vtype: int, collation: int, value: bytes) -> bytes:
    return (struct.pack("<I", len(name)) + name + b"\x00" + struct.pack("<BII", vtype, collation, len(value))
            + value)


@pytest.mark.parametrize("collation,raw,want", [
    (8, b"\xc3\xa9", "Ã©"),             # latin1: the bytes are latin1 characters, even if valid UTF-8
    (8, b"\xe9\xff", "éÿ"),
    (35, b"\x00\xe9", "é"),             # ucs2
    (45, "é🐬".encode(), "é🐬"),        # utf8mb4
    (33, b"h\xc3\xa9", "hé"),           # utf8mb3
    (63, b"\x00\xff", b"\x00\xff"),      # binary: bytes
    (45, b"\xff\xfe", b"\xff\xfe"),      # invalid in its charset: the raw bytes, never replaced
    (9999, b"abc", b"abc"),              # unknown collation: bytes
])
def test_user_var_string_uses_its_charset(collation, raw, want) -> None:
    b = Builder(version="10.11.6-MariaDB-log")
    b.add(EventType.USER_VAR, _uv(b"a", 0, collation, raw))
    ev = list(read_events(b.bytes()))[1]
    assert ev.value == want and type(ev.value) is type(want)


# A MariaDB 10.11 server with mysql56_temporal_format=OFF wrote this row of
# leg(id INT, t1 TIME(1), d6 DATETIME(6), s3 TIMESTAMP(3) NULL, d0 DATETIME):
# (1, '-00:00:00.1', '9999-12-31 23:59:59.999999', '2038-01-19 03:14:07.999', '2025-05-27 01:06:53')
LEG_TYPES = [T.LONG, T.TIME, T.DATETIME, T.TIMESTAMP, T.DATETIME]
LEG_ROW = (b"\x00" + struct.pack("<i", 1) + bytes.fromhex("01cce05f") + bytes.fromhex("04fcee3943bfffff")
           + bytes.fromhex("7fffffff03e7") + (20250527010653).to_bytes(8, "little"))
LEG_DDL = ("CREATE TABLE db.t (id INT PRIMARY KEY, t1 TIME(1), d6 DATETIME(6), "
           "s3 TIMESTAMP(3) NULL, d0 DATETIME)")


def _rows_body(table_id: int, ncols: int, row: bytes) -> bytes:
    return (table_id.to_bytes(6, "little") + b"\x01\x00" + b"\x02\x00" + bytes([ncols])
            + b"\xff" * ((ncols + 7) // 8) + row)


def _decode_leg(c: DecodeContext):
    ROW_EVENT_DECODERS[19](hdr(19), memoryview(table_map(9, LEG_TYPES, b"", 0b11110)), c)
    return ROW_EVENT_DECODERS[30](hdr(30, 200), memoryview(_rows_body(9, 5, LEG_ROW)), c)


def test_mariadb53_hires_columns_decode_with_the_ddl() -> None:
    c = ctx(mariadb=True)
    reg = SchemaRegistry()
    assert reg.add_ddl(LEG_DDL)
    assert [s.fsp for s in reg.get("db", "t")] == [None, 1, 6, 3, 0]
    c.schemas = reg
    ev = _decode_leg(c)
    row = {k: str(v) for k, v in ev.rows[0].after.items()}
    assert row == {"id": "1", "t1": "-00:00:00.1", "d6": "9999-12-31 23:59:59.999999",
                   "s3": "2038-01-19 03:14:07.999", "d0": "2025-05-27 01:06:53"}


def test_mariadb53_hires_columns_from_a_json_schema() -> None:
    c = ctx(mariadb=True)
    c.schemas = {"db.t": ["id", {"name": "t1", "fsp": 1}, {"name": "d6", "fsp": 6},
                          {"name": "s3", "fsp": 3}, "d0"]}
    assert str(_decode_leg(c).rows[0].after["d6"]) == "9999-12-31 23:59:59.999999"


def test_mariadb53_hires_without_the_fsp_is_an_error_that_says_why() -> None:
    c = ctx(mariadb=True)
    with pytest.raises(CorruptEventError, match="MariaDB's 5.3 format.*fsp"):
        _decode_leg(c)


def test_fsp_from_a_schema_is_not_applied_to_mysql_binlogs() -> None:
    """MySQL never logs fractional values with the old codes: an fsp in a MySQL schema (for a
    TIME2 column, say) must not change how an old-code column decodes."""
    c = ctx(mariadb=False)
    c.schemas = {"db.t": ["id", {"name": "t", "fsp": 3}]}
    ROW_EVENT_DECODERS[19](hdr(19), memoryview(table_map(9, [T.LONG, T.TIME], b"", 0b10)), c)
    row = b"\x00" + struct.pack("<i", 1) + (-123456).to_bytes(3, "little", signed=True)
    ev = ROW_EVENT_DECODERS[30](hdr(30, 200), memoryview(_rows_body(9, 2, row)), c)
    assert str(ev.rows[0].after["t"]) == "-12:34:56"


# 3. Charset mappings: Python's codecs differ from the server's for some codes (found by
#    comparing every code with MariaDB's CONVERT(... USING utf8mb4); the live exhaustive check
#    is test_differential_mariadb_server.py::test_charset_tables_match_the_server).
@pytest.mark.parametrize("charset,raw,want", [
    ("sjis", b"\x81\x5f", "\\"),            # Python shift_jis: U+FF3C
    ("sjis", b"\x82\xa0\x81\x5f", "あ\\"),
    ("cp866", b"\xfc\xfd", "ⁿ²"),            # Python cp866: №¤
    ("koi8u", b"\x95", "•"),                 # Python koi8_u: ∙
    ("greek", b"\xa1\xa2", "ʽʼ"),            # ISO 8859-7:1987 (Python: 2003 quotes)
    ("hebrew", b"\xaf", "‾"),                # Python iso8859_8: ¯
    ("tis620", b"\xa0", "\ufffd"),           # the server's own table says U+FFFD
    ("big5", b"\xf9\xd6", "碁"),             # ETEN extension (Python big5: error)
    ("euckr", b"\xa4\xd4", "\u3164"),        # Python euc_kr: error
    ("ujis", b"\xa1\xc0", "\\"),
    ("ujis", b"\xf5\xa1\x8f\xf5\xa1", "\ue000\ue3ac"),   # user-defined rows -> PUA
    ("eucjpms", b"\xa1\xc1\xad\xa1\x8f\xf3\xf3", "～①ⅰ"),  # Windows mappings, NEC, IBM
    ("dec8", b"caf\xe9", "café"),            # no Python codec: from the server's table
    ("armscii8", b"\xb2", "Ա"),
])
def test_text_decoding_follows_the_server(charset, raw, want) -> None:
    from binlog_parser.rows.charsets import make_text_decoder
    assert make_text_decoder(charset)(raw) == want


@pytest.mark.parametrize("charset,raw", [("ascii", b"\xff"), ("greek", b"\xae"), ("cp1250", b"\x81")])
def test_codes_the_server_cannot_convert_stay_bytes(charset, raw) -> None:
    from binlog_parser.rows.charsets import make_text_decoder
    assert make_text_decoder(charset)(b"a" + raw) == b"a" + raw
