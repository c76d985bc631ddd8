"""PARTIAL_UPDATE_ROWS JSON diffs: parsing, paths, applying to the before document."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_rows_json_binary import enc

from binlog_parser.reader import read_events
from binlog_parser.rows import RowsEvent
from binlog_parser.rows.json_binary import MySQLJson, json_to_text
from binlog_parser.rows.json_diff import (
    JsonDiff,
    JsonDiffError,
    PartialJson,
    apply_json_diffs,
    describe_diffs,
    parse_json_diffs,
    parse_path,
)
from binlog_parser.wire import encode_packed_int

FIXTURE = Path(__file__).parent / "fixtures" / "binlogs" / "blackbeam__rust_mysql_common" / \
    "test-data__binlogs__json.binlog.000001"


def diff_bytes(*diffs) -> bytes:
    out = b""
    for op, path, value in diffs:
        p = path.encode()
        out += bytes([op]) + encode_packed_int(len(p)) + p
        if op != 2:
            v = enc(value)
            out += encode_packed_int(len(v)) + v
    return out


def test_parse_paths():
    assert parse_path("$") == []
    assert parse_path("$.a[2].b") == ["a", 2, "b"]
    assert parse_path('$."a b"[0]."x\\"y"') == ["a b", 0, 'x"y']
    assert parse_path("$[last]") == [("last", 0)]
    assert parse_path("$[last-1]") == [("last", 1)]
    with pytest.raises(JsonDiffError):
        parse_path("a.b")


def test_parse_and_apply():
    data = diff_bytes((0, "$.age", 26), (1, "$.tags[1]", "x"), (1, "$.new", [1]), (2, "$.gone", None))
    diffs = parse_json_diffs(data)
    assert [(d.operation, d.path) for d in diffs] == [
        ("REPLACE", "$.age"), ("INSERT", "$.tags[1]"), ("INSERT", "$.new"), ("REMOVE", "$.gone")]
    assert str(diffs[0].value) == "26" and diffs[3].value is None
    before = {"age": 25, "gone": 1, "tags": ["a", "b"], "name": "Joe"}
    after = apply_json_diffs(before, diffs)
    assert before == {"age": 25, "gone": 1, "tags": ["a", "b"], "name": "Joe"}  # untouched
    # keys stay in MySQL's order (length, then bytes)
    assert json_to_text(after) == '{"age": 26, "new": [1], "name": "Joe", "tags": ["a", "x", "b"]}'
    assert describe_diffs(diffs[:2], "`doc`") == "JSON_ARRAY_INSERT(JSON_REPLACE(`doc`, '$.age', 26), '$.tags[1]', \"x\")"


def test_apply_errors_are_reported():
    diffs = parse_json_diffs(diff_bytes((0, "$.missing.x", 1)))
    with pytest.raises(JsonDiffError):
        apply_json_diffs({"a": 1}, diffs)
    root = parse_json_diffs(diff_bytes((0, "$", [1, 2])))
    assert apply_json_diffs({"a": 1}, root) == [1, 2]


def test_partial_update_fixture_keeps_the_diffs():
    """json.binlog (MySQL 8.0.22, binlog_row_image=MINIMAL, PARTIAL_JSON): UPDATE t SET
    j = JSON_REPLACE(j, '$.age', ...) -> diffs, not dropped; no before document to apply to."""
    events = [e for e in read_events(str(FIXTURE)) if isinstance(e, RowsEvent)]
    partial = [e for e in events if e.header.type_code == 39]
    assert len(partial) == 1
    ev = partial[0]
    assert ev.kind == "update" and len(ev.rows) == 6
    ages = []
    for row in ev.rows:
        assert set(row.before) == {"col_1"}
        pj = row.after["col_2"]
        assert isinstance(pj, PartialJson) and pj.document is None
        assert len(pj.diffs) == 1 and pj.diffs[0].operation == "REPLACE" and pj.diffs[0].path == "$.age"
        ages.append(pj.diffs[0].value.tree)
        assert row.after["col_4"] == pj.diffs[0].value.tree  # the generated column agrees
    assert ages == [26, 34, 42, 26, 34, 42]
    rendered = ev.fields()["rows"][0]["after"]["col_2"]
    assert rendered == {"partial_json": [{"op": "REPLACE", "path": "$.age", "value": "26"}]}


def test_partial_json_applied_when_before_image_has_the_document():
    diffs = parse_json_diffs(diff_bytes((0, "$.age", 26)))
    doc = MySQLJson(apply_json_diffs({"age": 25, "name": "Joe"}, diffs))
    pj = PartialJson(diffs, doc)
    assert str(pj) == '{"age": 26, "name": "Joe"}'
    assert isinstance(diffs[0], JsonDiff)
