"""Every row event in the fixture binlogs decodes; values the source projects document match."""

from __future__ import annotations

from pathlib import Path

import pytest

from binlog_parser.errors import BinlogError, TruncatedEventError
from binlog_parser.reader import read_events
from binlog_parser.rows import RowsEvent, TableMapEvent, render_row_text, render_value_text
from binlog_parser.rows.column_types import ColumnType as T
from tests._native_util import DAMAGED_FIXTURES

ROOT = Path(__file__).parent / "fixtures"
BB = ROOT / "binlogs" / "blackbeam__rust_mysql_common"
ROW_TYPES = {19, 20, 21, 22, 23, 24, 25, 30, 31, 32, 39, 166, 167, 168, 169, 170, 171}


def _all_files():
    files = [p for p in sorted((ROOT / "binlogs").glob("*/*")) if p.suffix not in (".tsv", ".md")]
    return files + sorted((ROOT / "mariadb-10.11").glob("binlog.0*"))


def _rows(path: Path) -> list[RowsEvent]:
    return [e for e in read_events(str(path)) if isinstance(e, RowsEvent)]


@pytest.mark.parametrize("path", _all_files(), ids=lambda p: p.name[-48:])
def test_every_row_event_decodes(path):
    n_rows = 0
    try:
        for ev in read_events(str(path), lenient=True):
            if isinstance(ev, TableMapEvent):
                for col in ev.columns:
                    assert col.type in {t.value for t in T}, f"unknown column type {col.type}"
            elif isinstance(ev, RowsEvent):
                assert ev.table is not None
                ev.fields()  # renders every value
                n_rows += len(ev.rows)
            else:
                assert ev.header.type_code not in ROW_TYPES, f"row event left undecoded: {ev!r}"[:200]
    except TruncatedEventError:  # damaged on purpose (truncated tails); everything before was decoded
        assert path.name in DAMAGED_FIXTURES, f"{path.name} is not a damaged fixture, yet ends truncated"
    except BinlogError as exc:
        assert exc.type_code not in ROW_TYPES, f"row decoding failed: {exc}"


def test_sakila_volume():
    """5.5 binlog with 1374 WRITE_ROWS_V1 events (no FULL metadata): all 47273 rows."""
    evs = _rows(ROOT / "binlogs" / "osheroff__mysql-binlog-connector-java" / "src__test__resources__mysql-bin.sakila")
    assert len(evs) == 1374 and sum(len(e.rows) for e in evs) == 47273


def test_enum_string_set_values():
    evs = _rows(BB / "test-data__binlogs__mysql-enum-string-set.000001")
    d = "0123456789"
    ins, upd, dele = evs  # enum index 1 / set 0b101, then index 2 / set 0b1010 (rust_mysql_common)
    a = ins.rows[0].after
    assert a["f1"] == d * 10 and a["f3"] == "var1" and a["f4"] == "one,three" and a["f5"] == d
    assert len(a["f2"]) == len("012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
                               "012345678901234567890123456789012345678012345678901234567890123456789012345678901234567890"
                               "123456789012345678901234567890123456789012345678901234567890123456789012345678012345678901"
                               "2345678901234567890123456789")
    assert upd.rows[0].after == {"f1": "field1", "f2": "field_2", "f3": "variant2", "f4": "two,four",
                                 "f5": upd.rows[0].before["f2"]}
    assert dele.rows[0].before == upd.rows[0].after
    cols = {c.name: c for c in ins.table.columns}
    assert cols["f3"].enum_values == ("var1", "variant2", "foo")
    assert cols["f4"].set_values == ("one", "two", "three", "four")


def test_bit_values():
    (ev,) = _rows(BB / "test-data__binlogs__mysql_type_bit.000001")
    assert ev.rows[0].after == {"a": b"\x04", "b": "foo", "c": b"\x20"}
    assert ev.fields()["rows"][0]["after"] == {"a": "0x04", "b": "foo", "c": "0x20"}


def test_mariadb_full_metadata_fixture():
    evs = _rows(BB / "test-data__binlogs__mariadb-bin.000001")
    cols = evs[0].table.columns
    assert [c.name for c in cols] == ["id", "topic", "event_type", "event", "created"]
    assert [c.primary_key for c in cols] == [True, False, False, False, False]
    assert [c.collation for c in cols] == [None, 45, 45, 63, None]
    assert render_row_text(evs[0].rows[0].after, {c.name: c for c in cols}) == {
        "id": "62", "topic": "foo", "event_type": "JSON", "event": "0x7b22666f6f223a317d",
        "created": "2022-04-20 22:18:04"}


def test_vector_values():
    evs = _rows(BB / "test-data__binlogs__vector.binlog")
    foo = evs[0]
    cols = {c.name: c for c in foo.table.columns}
    assert cols["vector_column"].type == T.VECTOR and cols["vector_column"].vector_dimensions == 3
    v = foo.rows[0].after["vector_column"]
    assert foo.fields()["rows"][0]["after"]["vector_column"] == [1.1, 2.2, 3.3]
    assert render_value_text(v, cols["vector_column"]) == "[1.10000e+00,2.20000e+00,3.30000e+00]"
    bar = evs[1]
    assert bar.fields()["rows"][1]["after"] == {"id": 2, "vector_column": [1.01, -1.01], "foo": "bar",
                                                "vector_column2": [42.0, 43.0, 44.0, 45.0]}


def test_json_opaque_values():
    evs = _rows(BB / "test-data__binlogs__json-opaque.binlog")
    texts = [str(e.rows[0].after["a"]) for e in evs]
    assert texts == ['{"a": "base64:type15:VQ=="}', '{"b": "2012-03-18"}', '{"c": "2012-03-18 11:30:45.000000"}',
                     '{"c": "87:31:46.654321"}', '{"d": 123.456}', '{"e": 9.00}', '{"e": [0, 1, true, false]}',
                     '{"e": null}']


def test_json_full_documents():
    evs = _rows(BB / "test-data__binlogs__json.binlog.000001")
    assert str(evs[0].rows[0].after["col_2"]) == '{"age": 24, "data": "xxxxxxxxxx", "name": "Joe"}'
    upd = evs[4]
    assert upd.kind == "update" and str(upd.rows[0].after["col_2"]) == '{"age": 25, "data": "xxxxxxxxxx", "name": "Joe"}'


def test_negative_time():
    (ev,) = _rows(BB / "test-data__binlogs__time_issue.000001")
    v = ev.rows[0].after["col_1"]
    assert v.negative and str(v) == "-507:48:27"


def test_invisible_columns_and_minimal_image():
    evs = _rows(BB / "test-data__binlogs__binlog-invisible-columns.000001")
    assert evs[0].rows[0].after == {"f1": 1, "f2": 2, "f3": -3, "f4": "4", "f5": b"\x05", "f6": 6000000000}
    assert evs[2].rows[0].after["f1"] == 111
    (m,) = _rows(BB / "test-data__binlogs__minimal_row_metadata.000001")
    assert set(m.rows[0].after) == {"col_1", "col_3", "col_5"}  # absent columns stay absent


def test_pre_ga_rows_events():
    path = ROOT / "binlogs" / "webscalesql__webscalesql-5.6" / "mysql-test__suite__binlog__std_data__ver_5_1_17.001"
    ins, upd, dele = _rows(path)
    assert [r.after for r in ins.rows] == [{"col_1": 0, "col_2": b"one"}, {"col_1": 1, "col_2": b"two"}]
    assert [(r.before["col_1"], r.after["col_1"]) for r in upd.rows] == [(0, 1), (1, 2)]
    assert dele.rows[0].before == {"col_1": 2, "col_2": b"two"}
    assert ins.fields()["rows"][0]["after"] == {"col_1": 0, "col_2": "one"}


def test_compressed_transaction_payload_rows():
    (ev,) = _rows(BB / "test-data__binlogs__transaction_compression.000001")
    assert ev.kind == "insert" and len(ev.rows) == 1
