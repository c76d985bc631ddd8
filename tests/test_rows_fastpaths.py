"""The decode fast paths agree with the straightforward code they shortcut.

- TABLE_MAP cache (``DecodeContext.table_map_cache``): a repeated TABLE_MAP is the same event
  as a fresh decode (new header), and anything else the decode depends on (post-header length,
  server flavour, the user schema) is re-checked on every hit;
- compiled row-image readers (``rows_event._compile_image_reader``) == the generic loop, NULLs,
  short images and all;
- ``render_row_json_text`` / ``ImageRenderer`` == (``render_row`` JSON-encoded, ``render_row_text``);
- ``fields_head`` + ``ImageRenderer.render_changes`` == ``binlake.ingest.records.row_images`` over
  ``event.fields()`` (head, text maps, typed JSON).
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import random
from decimal import Decimal

import pytest
from test_rows_event import ctx, hdr, names, table_map, tlv

from binlog_parser import read_events
from binlog_parser.errors import BinlogError, CorruptEventError
from binlog_parser.header import EventHeader, new_event_header
from binlog_parser.rows import RowsEvent, TableMapEvent
from binlog_parser.rows import rows_event as R
from binlog_parser.rows.column_types import ColumnType as T
from binlog_parser.rows.render import render_row, render_row_json_text, render_row_text
from binlog_parser.rows.schema import SchemaRegistry
from binlog_parser.rows.table_map import decode_table_map

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


def _fixture_files() -> list[str]:
    out = []
    for f in sorted(glob.glob(os.path.join(FIXTURES, "**", "*"), recursive=True)):
        if os.path.isfile(f) and os.path.getsize(f) > 4:
            with open(f, "rb") as fh:
                if fh.read(4) == b"\xfebin":
                    out.append(f)
    return out


def _rows_events(path):
    """The rows events of ``path``. A decoding error is raised, not swallowed: every file these
    tests take has rows events and decodes to its end (the broken fixtures have none)."""
    return (ev for ev in read_events(path, lenient=True) if isinstance(ev, RowsEvent))


def _has_rows_events(path: str) -> bool:
    """Whether ``path`` holds a rows event the decoder reaches (a broken file's error ends it: no)."""
    try:
        return any(isinstance(ev, RowsEvent) for ev in read_events(path, lenient=True))
    except BinlogError:  # the truncated / corrupt fixtures: no rows event before their error
        return False


#: The fixture files the per-file tests take: those with rows events (computed at collection,
#: a fraction of a second); a file without any would be an item that asserts nothing.
ROWS_FILES = [p for p in _fixture_files() if _has_rows_events(p)]


def test_the_per_file_tests_take_files_with_rows_events():
    """The parametrized tests compare rows events, so each of their files has some and they exist."""
    assert len(ROWS_FILES) >= 40, ROWS_FILES
    assert COMPILED_READER_FILES
    for path in ROWS_FILES:
        assert any(True for _ in _rows_events(path)), path


# ---------------------------------------------------------------- TABLE_MAP cache

BODY = table_map(7, [T.LONG, T.VARCHAR], bytes([80, 0]), 0b10, tlv(4, names("id", "name")))
BODY_NO_NAMES = table_map(7, [T.LONG, T.VARCHAR], bytes([80, 0]), 0b10)


def test_repeated_table_map_is_a_fresh_decode_with_its_own_header():
    c = ctx()
    first = decode_table_map(hdr(19, 100), memoryview(BODY), c)
    second = decode_table_map(hdr(19, 500), memoryview(bytearray(BODY)), c)
    assert len([k for k in c.table_map_cache if isinstance(k, bytes)]) == 1
    fresh = decode_table_map(hdr(19, 500), memoryview(BODY), ctx())
    assert second == fresh and second.header.pos == 500 and first.header.pos == 100
    assert second.columns is first.columns and second.decoders is first.decoders
    assert c.table_maps[7] is second
    for f in dataclasses.fields(TableMapEvent):
        assert getattr(second, f.name) == getattr(fresh, f.name) or f.name in ("decoders", "plan_cache")


def test_table_map_cache_rechecks_context_and_user_schema():
    c = ctx()
    a = decode_table_map(hdr(19), memoryview(BODY_NO_NAMES), c)
    assert [col.name for col in a.columns] == ["col_1", "col_2"]
    # a user schema given after the first decode is honoured by the next one
    c.schemas = SchemaRegistry({"db.t": [{"name": "id", "type": "INT"}, {"name": "label", "type": "VARCHAR(20)"}]})
    b = decode_table_map(hdr(19), memoryview(BODY_NO_NAMES), c)
    assert [col.name for col in b.columns] == ["id", "label"]
    c.schemas.add_table("db", "t", [{"name": "k", "type": "INT"}, {"name": "v", "type": "VARCHAR(20)"}])
    d = decode_table_map(hdr(19), memoryview(BODY_NO_NAMES), c)
    assert [col.name for col in d.columns] == ["k", "v"]
    # another flavour (a new FORMAT_DESCRIPTION) decodes again
    c.schemas = None
    c.server_version = "10.11.6-MariaDB"
    e = decode_table_map(hdr(19), memoryview(BODY_NO_NAMES), c)
    assert e == decode_table_map(hdr(19), memoryview(BODY_NO_NAMES), ctx(mariadb=True))


def test_table_map_cache_is_bounded(monkeypatch):
    from binlog_parser.rows import table_map as tm_mod

    monkeypatch.setattr(tm_mod, "TABLE_MAP_CACHE_MAX", 3)
    c = ctx()
    for i in range(10):
        decode_table_map(hdr(19), memoryview(table_map(i + 1, [T.LONG], b"", 0)), c)
        assert len([k for k in c.table_map_cache if isinstance(k, bytes)]) <= 3
    monkeypatch.setattr(tm_mod, "TABLE_MAP_CACHE_MAX", 4096)
    monkeypatch.setattr(tm_mod, "TABLE_MAP_CACHE_MAX_COLUMNS", 10)
    c = ctx()
    for i in range(20):
        decode_table_map(hdr(19), memoryview(table_map(i + 1, [T.LONG] * 3, b"", 0)), c)
        assert sum(3 for k in c.table_map_cache if isinstance(k, bytes)) <= 10
        assert c.table_map_cache["columns"] == sum(3 for k in c.table_map_cache if isinstance(k, bytes))
    wide = table_map(99, [T.LONG] * 11, b"", 0)
    decode_table_map(hdr(19), memoryview(wide), c)
    assert wide not in c.table_map_cache  # wider than the whole budget: never cached


def test_corrupt_table_map_is_never_cached():
    c = ctx()
    with pytest.raises(CorruptEventError):
        decode_table_map(hdr(19), memoryview(BODY[:-3]), c)
    assert not c.table_map_cache


def test_event_header_factory_matches_the_dataclass():
    args = (4, 100, 1700000000, 30, 1, 96, 100, 0, True, None, None)
    assert new_event_header(*args) == EventHeader(*args)
    assert hash(new_event_header(*args)) == hash(EventHeader(*args))


# ---------------------------------------------------------------- compiled image readers

def _generic(buf, pos, plan):
    return R._read_image(buf, pos, R._Plan(plan))  # a _Plan without .read: the generic loop


def _outcome(read, buf, pos, *plan):
    """``read(buf, pos, *plan)``'s result, or its exception as (type, message): the compiled
    reader and the generic loop must agree on both."""
    try:
        return read(buf, pos, *plan)
    except Exception as exc:  # noqa: BLE001
        return (type(exc), str(exc))


def _nine_column_reader():
    """A TABLE_MAP of nine nullable columns a..i (utf8mb4 default charset) whose decoders the
    compiled reader inlines, its full-image plan and that plan's compiled reader."""
    c = ctx()
    types = [T.LONGLONG, T.VARCHAR, T.VARCHAR, T.DATETIME2, T.NEWDECIMAL, T.TINY, T.DATETIME2,
             T.TIMESTAMP, T.DATETIME]
    metas = (bytes([80, 0]) + (1000).to_bytes(2, "little") + bytes([6]) + bytes([12, 2]) + bytes([0]))
    body = table_map(9, types, metas, 0x1FF, tlv(4, names("a", "b", "c", "d", "e", "f", "g", "h", "i"))
                     + tlv(2, b"\x2d"))
    tm = decode_table_map(hdr(19), memoryview(body), c)
    plan = R._plan(tm, b"\xff\x01", False)
    return tm, plan, R._compile_image_reader(plan)


COMPILED_READER_FILES = [p for p in ROWS_FILES if "mariadb" in p or "sakila" in p or "connector" in p][:40]


@pytest.mark.parametrize("path", COMPILED_READER_FILES)
def test_compiled_reader_equals_generic_loop_on_fixtures(path):
    rng = random.Random(path)
    checked = 0
    for ev in _rows_events(path):
        if ev.table is None or ev.version == 0 or not ev.rows:
            continue
        for plan in list(ev.table.plan_cache.values()):
            read = R._compile_image_reader(plan)
            # every image of this plan in the event: random starts, truncations, garbage
            for _ in range(20):
                n = rng.randrange(1, 64)
                buf = bytes(rng.getrandbits(8) for _ in range(n))
                pos = rng.randrange(0, 3)
                want = _outcome(_generic, buf, pos, plan)
                got = _outcome(read, buf, pos)
                assert repr(got) == repr(want)
                checked += 1

    assert checked, f"{path}: no rows event with a table map and a plan to compare"


def test_compiled_reader_types_and_nulls():
    tm, plan, read = _nine_column_reader()
    # the inlined decoders are all exercised
    assert [getattr(d, "inline", (None,))[0] for d in tm.decoders] == [
        None, "utf8", "utf8", "datetime2", None, None, "datetime2", "timestamp_old", "datetime_old"]
    assert tm.decoders[2].inline[1] == 2 and tm.decoders[0].fixed_unpack[1] == 8
    rng = random.Random(5)
    for _ in range(2000):
        n = rng.randrange(0, 80)
        buf = bytes(rng.getrandbits(8) for _ in range(n))
        if rng.random() < 0.5 and n > 2:
            buf = bytes([0, 0]) + buf[2:]  # no NULLs: the straight-line path
        if rng.random() < 0.3 and n > 70:  # a valid old DATETIME at the end
            buf = buf[:-8] + (20240102030405).to_bytes(8, "little")
        for pos in (0, 1):
            want = _outcome(_generic, buf, pos, plan)
            got = _outcome(read, buf, pos)
            assert repr(got) == repr(want)


# ---------------------------------------------------------------- rendering once

@pytest.mark.parametrize("path", ROWS_FILES)
def test_render_row_json_text_matches_both_renderers(path):
    for ev in _rows_events(path):
        by_name = ev.columns_by_name()
        for change in ev.rows:
            for image in (change.before, change.after):
                js, tx = render_row_json_text(image, by_name)
                typed = render_row(image, by_name)
                assert js == (None if typed is None else _json_dumps(typed))
                assert tx == render_row_text(image, by_name)
                if js is not None:
                    assert list(json.loads(js)) == list(image) == list(tx)


def _json_dumps(value):
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def test_render_row_json_text_values():
    from binlog_parser.rows.json_binary import MySQLJson
    from binlog_parser.rows.temporal import MySQLDate, MySQLDateTime, MySQLTime, MySQLTimestamp
    from binlog_parser.rows.values import Vector

    row = {"i": 2 ** 60, "j": -3, "b": True, "f": 0.1, "s": 'a"\\\n\x01é', "n": None, "d": Decimal("-0.00"),
           "raw": b"\x00\xff", "dt": MySQLDateTime(2024, 1, 2, 3, 4, 5, 120000, 2),
           "ts": MySQLTimestamp(0, 0, 3), "ts2": MySQLTimestamp(1700000000, 5, 6),
           "day": MySQLDate(0, 0, 0), "t": MySQLTime(True, 838, 59, 59), "inf": float("inf"),
           "nan": float("nan"), "doc": MySQLJson({"k": ["v", 1]}), "vec": Vector((1.5, -2.0)),
           "é\"key": 7}
    js, tx = render_row_json_text(row, {})
    assert js == _json_dumps(render_row(row, {})) and tx == render_row_text(row, {})
    assert js == ('{"i":"1152921504606846976","j":-3,"b":1,"f":0.1,"s":"a\\"\\\\\\n\\u0001é","n":null,'
                  '"d":"0.00","raw":"0x00ff","dt":"2024-01-02 03:04:05.12","ts":"0000-00-00 00:00:00.000",'
                  '"ts2":"2023-11-14 22:13:20.000005","day":"0000-00-00","t":"-838:59:59",'
                  '"inf":0.0,"nan":0.0,"doc":"{\\"k\\": [\\"v\\", 1]}","vec":[1.5,-2.0],"é\\"key":7}')
    assert tx["s"] == 'a"\\\n\x01é' and tx["i"] == "1152921504606846976" and tx["vec"] == "[1.50000e+00,-2.00000e+00]"
    assert render_row_json_text(None, {}) == (None, None)
    assert render_row_json_text({}, {}) == ("{}", {})


@pytest.mark.parametrize("path", ROWS_FILES)
def test_rendered_rows_event_parts_equal_the_records_generic_path(path):
    from binlake.ingest.records import row_images
    from binlog_parser.rows.render import ImageRenderer, compact_json

    for ev in _rows_events(path):
        fields = ev.fields()
        head, images = ev.fields_head(), ImageRenderer(ev.columns_by_name()).render_changes(ev.rows)
        assert head == {k: v for k, v in fields.items() if k != "rows"}
        assert images == list(row_images(ev, fields))
        # the typed JSON of each image is exactly fields()'s
        assert images == [
            (None if r["before"] is None else compact_json(r["before"]), None if r["after"] is None else compact_json(r["after"]))
            for r in fields["rows"]]


def test_hot_plans_are_compiled_and_decode_the_same():
    """A plan is compiled after _COMPILE_AFTER_ROWS images; events decode the same before and
    after (the OLTP-like fixture tables have thousands of rows)."""
    from binlog_parser.rows import _native

    hot = 0
    for path in ROWS_FILES:
        if "sakila" not in path:
            continue
        _native.use_native(False)  # the pure-Python decoder's compiled readers (not native/)
        a = list(_rows_events(path))
        old = R._COMPILE_AFTER_ROWS
        try:
            R._COMPILE_AFTER_ROWS = 10 ** 12  # never compile: the generic loop only
            b = list(_rows_events(path))
        finally:
            R._COMPILE_AFTER_ROWS = old
            _native.use_native(None)
        assert [e.rows for e in a] == [e.rows for e in b]
        hot += sum(1 for e in a if e.table is not None
                   for p in e.table.plan_cache.values() if getattr(p, "read", None) is not None)
    assert hot


def test_compiled_reader_on_a_valid_image_and_every_truncation():
    tm, plan, read = _nine_column_reader()
    ymd = ((2024 * 13 + 1) << 5) | 2
    dt2 = (((ymd << 17) | (3 << 12) | (4 << 6) | 5) + 0x8000000000).to_bytes(5, "big")
    image = (b"\x00\x00" + (7).to_bytes(8, "little") + b"\x01a" + b"\x02\x00\xc3\xa9"
             + dt2 + (123456).to_bytes(3, "big") + b"\x80\x00\x00\x00\x01\x07" + b"\x05"
             + dt2 + (1700000000).to_bytes(4, "little") + (20240102030405).to_bytes(8, "little"))
    row, end = read(image, 0)
    assert end == len(image) and (row, end) == _generic(image, 0, plan)
    assert row["a"] == 7 and row["b"] == "a" and row["c"] == "é" and row["f"] == 5
    assert str(row["d"]) == "2024-01-02 03:04:05.123456" and str(row["g"]) == "2024-01-02 03:04:05"
    assert str(row["e"]) == "1.07" and str(row["h"]) == "2023-11-14 22:13:20"
    assert str(row["i"]) == "2024-01-02 03:04:05"
    bad_dt = image[:-8] + (20241302030405).to_bytes(8, "little")  # month 13: impossible
    for buf in [image[:k] for k in range(len(image))] + [bad_dt, image[:3] + b"\xff" + image[4:]]:
        want = _outcome(_generic, buf, 0, plan)
        got = _outcome(read, buf, 0)
        assert repr(got) == repr(want)


def test_image_renderer_values_off_their_columns_usual_type():
    """A renderer compiled on a first image renders later images whose values have other types
    (NULLs, bytes, big ints, a Decimal in place of a str...) exactly as the two renderers."""
    from binlog_parser.rows.render import ImageRenderer
    from binlog_parser.rows.temporal import MySQLDateTime, MySQLTime

    year = dataclasses.make_dataclass("Col", ["type", "scale", "is_binary", "charset"])(T.YEAR, None, False, None)
    dec = dataclasses.make_dataclass("Col", ["type", "scale", "is_binary", "charset"])(T.NEWDECIMAL, 3, False, None)
    by_name = {"y": year, "d": dec}
    rows = [
        {"i": 1, "s": "a", "d": Decimal("1.500"), "t": MySQLDateTime(2024, 1, 2, 3, 4, 5, 6, 6), "y": 2024, "50%": 1},
        {"i": 2 ** 53 + 1, "s": None, "d": Decimal("-0.000"), "t": MySQLTime(True, 1, 2, 3), "y": None, "50%": "%s"},
        {"i": None, "s": b"\xff", "d": "x", "t": None, "y": 7, "50%": 1.25},
        {"i": True, "s": Decimal("2"), "d": None, "t": "text", "y": 0, "50%": None},
    ]
    render = ImageRenderer(by_name).render
    got = [render(r) for r in rows]
    assert got == [(_json_dumps(render_row(r, by_name)), render_row_text(r, by_name)) for r in rows]
    assert got[0] == ('{"i":1,"s":"a","d":"1.500","t":"2024-01-02 03:04:05.000006","y":"2024","50%":1}',
                      {"i": "1", "s": "a", "d": "1.500", "t": "2024-01-02 03:04:05.000006", "y": "2024", "50%": "1"})
    assert got[1][0] == '{"i":"9007199254740993","s":null,"d":"0.000","t":"-01:02:03","y":null,"50%":"%s"}'
    assert got[2][1] == {"i": None, "s": "0xff", "d": "x", "t": None, "y": "0007", "50%": "1.25"}
    assert render(None) == (None, None)
    assert render({"s": "b"}) == ('{"s":"b"}', {"s": "b"})
