"""TABLE_MAP + rows events built byte by byte: every generation, bitmaps, compression, errors."""

from __future__ import annotations

import struct
import zlib

import pytest
from test_rows_json_binary import enc
from test_rows_json_diff import diff_bytes

from binlog_parser.context import DecodeContext
from binlog_parser.errors import CorruptEventError
from binlog_parser.header import EventHeader
from binlog_parser.rows import ROW_EVENT_DECODERS, PartialJson, RowsEvent, TableMapEvent
from binlog_parser.rows.column_types import ColumnType as T
from binlog_parser.wire import encode_packed_int as pk

PHL = bytearray(45)


def ctx(mariadb=False, v2=True) -> DecodeContext:
    phl = bytearray(171)
    phl[19 - 1] = 8
    for t in (20, 21, 22, 23, 24, 25, 166, 167, 168):
        phl[t - 1] = 8
    for t in (30, 31, 32, 39, 169, 170, 171):
        phl[t - 1] = 10
    return DecodeContext(server_version="10.11.6-MariaDB" if mariadb else "8.0.40",
                         post_header_lengths=bytes(phl), file="synthetic")


def hdr(t: int, pos: int = 100) -> EventHeader:
    return EventHeader(pos, pos + 10, 0, t, 1, 10, 0, 0)


def tlv(t: int, value: bytes) -> bytes:
    return bytes([t]) + pk(len(value)) + value


def names(*ns) -> bytes:
    return b"".join(pk(len(n)) + n.encode() for n in ns)


def table_map(table_id, types, metas: bytes, nullable: int, optional: bytes = b"", schema=b"db",
              table=b"t") -> bytes:
    n = len(types)
    return (table_id.to_bytes(6, "little") + b"\x01\x00" + bytes([len(schema)]) + schema + b"\0"
            + bytes([len(table)]) + table + b"\0" + pk(n) + bytes(types) + pk(len(metas)) + metas
            + nullable.to_bytes((n + 7) // 8, "little") + optional)


def decode(c, t, body, pos=100):
    return ROW_EVENT_DECODERS[t](hdr(t, pos), memoryview(body), c)


# id INT UNSIGNED PK, name VARCHAR(20) utf8mb4, price DECIMAL(5,2), tags SET('a','b','c'),
# kind ENUM('x','y') latin1, doc JSON, geo POINT, bits BIT(10), v VECTOR(2), hid INT invisible
TYPES = [T.LONG, T.VARCHAR, T.NEWDECIMAL, T.STRING, T.STRING, T.JSON, T.GEOMETRY, T.BIT, T.VECTOR, T.LONG]
METAS = (b"" + (80).to_bytes(2, "little") + bytes([5, 2]) + bytes([T.SET, 1]) + bytes([T.ENUM, 1])
         + bytes([4]) + bytes([4]) + bytes([2, 1]) + bytes([4]))
OPTIONAL = (
    tlv(1, bytes([0b10000000, 0b00000000]))                 # id unsigned; price, hid signed
    + tlv(2, pk(45) + pk(1) + pk(63))                        # default utf8mb4; char col #1 (VECTOR) binary
    + tlv(4, names("id", "name", "price", "tags", "kind", "doc", "geo", "bits", "v", "hid"))
    + tlv(5, pk(3) + pk(1) + b"a" + pk(1) + b"b" + pk(1) + b"c")
    + tlv(6, pk(2) + pk(1) + b"x" + pk(1) + b"y")
    + tlv(7, pk(1))
    + tlv(9, pk(0) + pk(0) + pk(1) + pk(4))                  # PK(id, name(4))
    + tlv(11, pk(33) + pk(8))                                 # tags utf8mb3, kind latin1
    + tlv(12, bytes([0b11111111, 0b10000000]))               # hid invisible
    + tlv(13, pk(2))
)


def make_tm(c, table_id=7):
    return decode(c, 19, table_map(table_id, TYPES, METAS, 0b1111111110, OPTIONAL))


def test_table_map_full_metadata():
    c = ctx()
    tm = make_tm(c)
    assert isinstance(tm, TableMapEvent) and c.table_maps[7] is tm
    cols = {col.name: col for col in tm.columns}
    assert [col.name for col in tm.columns] == ["id", "name", "price", "tags", "kind", "doc", "geo", "bits", "v", "hid"]
    assert cols["id"].unsigned is True and cols["price"].unsigned is False and cols["hid"].unsigned is False
    assert cols["name"].charset == "utf8mb4" and cols["name"].length == 80
    assert cols["v"].charset == "binary" and cols["v"].vector_dimensions == 2
    assert cols["tags"].type == T.SET and cols["tags"].set_values == ("a", "b", "c") and cols["tags"].charset == "utf8mb3"
    assert cols["kind"].type == T.ENUM and cols["kind"].enum_values == ("x", "y") and cols["kind"].charset == "latin1"
    assert cols["geo"].geometry_type == 1
    assert cols["id"].primary_key and cols["name"].primary_key and cols["name"].primary_key_prefix == 4
    assert cols["hid"].visible is False and cols["id"].visible is True
    assert cols["bits"].bits == 10 and cols["price"].precision == 5 and cols["price"].scale == 2
    assert not cols["id"].nullable and cols["name"].nullable
    f = tm.fields()
    assert f["primary_key"] == ["id", "name"] and f["has_full_metadata"]


def row_values(null_mask: int, n: int, *values: bytes) -> bytes:
    return null_mask.to_bytes((n + 7) // 8, "little") + b"".join(values)


ROW1 = row_values(
    0, 10,
    struct.pack("<I", 4000000000), bytes([6]) + b"h\xc3\xa9llo", bytes.fromhex("80040c"),  # price 4.12
    bytes([0b101]), bytes([2]), struct.pack("<I", len(enc({"a": 1}))) + enc({"a": 1}),
    struct.pack("<I", 25) + struct.pack("<I", 4326) + bytes.fromhex("0101000000") + struct.pack("<dd", 1.0, 2.0),
    bytes([0x02, 0xAA]), struct.pack("<I", 8) + struct.pack("<ff", 1.5, -2.0), struct.pack("<i", -1),
)


def test_write_rows_v2_all_value_types():
    c = ctx()
    make_tm(c)
    ev = decode(c, 30, (7).to_bytes(6, "little") + b"\x01\x00" + b"\x02\x00" + pk(10) + b"\xff\x03" + ROW1 * 2)
    assert isinstance(ev, RowsEvent) and ev.kind == "insert" and ev.version == 2 and len(ev.rows) == 2
    after = ev.rows[0].after
    assert ev.rows[0].before is None
    assert after["id"] == 4000000000 and after["name"] == "héllo" and str(after["price"]) == "4.12"
    assert after["tags"] == "a,c" and after["kind"] == "y" and str(after["doc"]) == '{"a": 1}'
    assert after["geo"].srid == 4326 and after["bits"] == b"\x02\xaa" and after["v"].values == (1.5, -2.0)
    assert after["hid"] == -1
    out = ev.fields()
    assert out["schema"] == "db" and out["table"] == "t" and out["kind"] == "insert"
    r = out["rows"][0]["after"]
    assert r["geo"] == "0x" + (struct.pack("<I", 4326) + bytes.fromhex("0101000000") + struct.pack("<dd", 1.0, 2.0)).hex()
    assert r["bits"] == "0x02aa" and r["v"] == [1.5, -2.0] and r["price"] == "4.12" and r["id"] == 4000000000
    assert ev.text_lines()[0] == "### INSERT INTO `db`.`t`"


def test_update_minimal_image_nulls_and_absent_columns():
    c = ctx()
    make_tm(c)
    before = row_values(0, 1, struct.pack("<I", 1))             # only id
    after = row_values(0b10, 2, bytes([2]) + b"hi")                # name='hi', price NULL
    body = (7).to_bytes(6, "little") + b"\0\0" + b"\x02\x00" + pk(10) + b"\x01\x00" + b"\x06\x00" + before + after
    ev = decode(c, 31, body)
    assert ev.kind == "update"
    assert ev.rows[0].before == {"id": 1}
    assert ev.rows[0].after == {"name": "hi", "price": None}  # absent != NULL
    assert ev.columns_present == b"\x01\x00" and ev.columns_present_after == b"\x06\x00"


def test_v1_delete_and_extra_data_partition():
    c = ctx()
    make_tm(c)
    body = (7).to_bytes(6, "little") + b"\0\0" + pk(10) + b"\x01\x00" + row_values(0, 1, struct.pack("<I", 9))
    ev = decode(c, 25, body)
    assert ev.kind == "delete" and ev.rows[0].before == {"id": 9} and ev.rows[0].after is None and ev.version == 1
    extra = bytes([1]) + (3).to_bytes(2, "little")
    body2 = ((7).to_bytes(6, "little") + b"\0\0" + (2 + len(extra)).to_bytes(2, "little") + extra + pk(10)
             + b"\x01\x00" + row_values(0, 1, struct.pack("<I", 9)))
    ev2 = decode(c, 30, body2)
    assert ev2.partition_id == 3 and ev2.fields()["partition_id"] == 3


@pytest.mark.parametrize("t", [166, 169])
def test_mariadb_compressed_rows(t):
    c = ctx(mariadb=True)
    make_tm(c)
    rows = row_values(0, 1, struct.pack("<I", 5)) + row_values(0, 1, struct.pack("<I", 6))
    comp = zlib.compress(rows)
    blob = bytes([0x80 | 1, len(rows)]) + comp
    head = (7).to_bytes(6, "little") + b"\0\0" + (b"\x02\x00" if t == 169 else b"")
    ev = decode(c, t, head + pk(10) + b"\x01\x00" + blob)
    assert ev.compressed and ev.kind == "insert"
    assert [r.after for r in ev.rows] == [{"id": 5}, {"id": 6}]


def test_partial_update_applies_diffs_to_before_document():
    c = ctx()
    make_tm(c)
    doc = enc({"age": 25, "name": "Joe"})
    before = row_values(0, 2, struct.pack("<I", 1), struct.pack("<I", len(doc)) + doc)
    diffs = diff_bytes((0, "$.age", 26))
    after = pk(1) + b"\x01" + row_values(0, 2, struct.pack("<I", 1), struct.pack("<I", len(diffs)) + diffs)
    body = (7).to_bytes(6, "little") + b"\0\0" + b"\x02\x00" + pk(10) + b"\x21\x00" + b"\x21\x00" + before + after
    ev = decode(c, 39, body)
    pj = ev.rows[0].after["doc"]
    assert isinstance(pj, PartialJson) and str(pj.document) == '{"age": 26, "name": "Joe"}'
    assert ev.fields()["rows"][0]["after"]["doc"] == '{"age": 26, "name": "Joe"}'
    # value_options = 0: a full document after all
    after_full = pk(0) + row_values(0, 2, struct.pack("<I", 1), struct.pack("<I", len(doc)) + doc)
    ev2 = decode(c, 39, (7).to_bytes(6, "little") + b"\0\0\x02\x00" + pk(10) + b"\x21\x00\x21\x00" + before + after_full)
    assert str(ev2.rows[0].after["doc"]) == '{"age": 25, "name": "Joe"}'


def test_rows_without_table_map_is_an_error_with_offset():
    c = ctx()
    with pytest.raises(CorruptEventError) as ei:
        decode(c, 30, (99).to_bytes(6, "little") + b"\0\0\x02\x00" + pk(1) + b"\x01" + b"\x00\x01", pos=1234)
    assert ei.value.offset == 1234 and "table_id 99" in str(ei.value)


def test_truncated_row_is_an_error():
    c = ctx()
    make_tm(c)
    body = (7).to_bytes(6, "little") + b"\x01\x00\x02\x00" + pk(10) + b"\xff\x03" + ROW1[:-3]
    with pytest.raises(CorruptEventError) as ei:
        decode(c, 30, body, pos=555)
    assert ei.value.offset == 555


def test_no_full_metadata_uses_fallback_names_and_schema_registry():
    from binlog_parser.rows import SchemaRegistry

    c = ctx()
    body = table_map(3, [T.LONG, T.VARCHAR, T.STRING], (40).to_bytes(2, "little") + bytes([T.ENUM, 1]), 0b111)
    tm = decode(c, 19, body)
    assert [col.name for col in tm.columns] == ["col_1", "col_2", "col_3"]
    row = row_values(0, 3, struct.pack("<i", -5), bytes([2]) + b"ok", bytes([1]))
    ev = decode(c, 30, (3).to_bytes(6, "little") + b"\0\0\x02\x00" + pk(3) + b"\x07" + row)
    assert ev.rows[0].after == {"col_1": -5, "col_2": b"ok", "col_3": 1}  # raw bytes, enum index
    assert ev.fields()["rows"][0]["after"] == {"col_1": -5, "col_2": "ok", "col_3": 1}
    reg = SchemaRegistry()
    assert reg.add_ddl("CREATE TABLE `t` (id INT UNSIGNED NOT NULL, s VARCHAR(10) CHARACTER SET utf8mb4, "
                       "e ENUM('p','q') , PRIMARY KEY (id))", default_schema="db")
    c2 = ctx()
    c2.schemas = reg
    tm2 = decode(c2, 19, body)
    assert [col.name for col in tm2.columns] == ["id", "s", "e"] and tm2.columns[0].name_from == "schema"
    ev2 = decode(c2, 30, (3).to_bytes(6, "little") + b"\0\0\x02\x00" + pk(3) + b"\x07" + row)
    assert ev2.rows[0].after == {"id": 4294967291, "s": "ok", "e": "p"}


def test_pre_ga_rows_reserved_null_bit():
    c = ctx()
    body = table_map(16, [T.LONG, T.STRING], b"", 0)[:-1]  # 5.1.17 maps: no metadata, no null bitmap
    body = (16).to_bytes(6, "little") + b"\0\0" + b"\x04test\x00\x02t1\x00\x02\x03\xfe"
    tm = decode(c, 19, body)
    assert tm.columns[1].nullable
    rows = bytes.fromhex("100000000000010002fff900000000036f6e65f9010000000374776f")
    ev = decode(c, 20, rows)
    assert [r.after for r in ev.rows] == [{"col_1": 0, "col_2": "one"}, {"col_1": 1, "col_2": "two"}] or \
        [r.after for r in ev.rows] == [{"col_1": 0, "col_2": b"one"}, {"col_1": 1, "col_2": b"two"}]
