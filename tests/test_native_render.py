"""The compiled renderers against the Python ones.

* Row images (``native/src/render.rs``, ``ImageRenderer.render_changes_into``): every rows event
  of every fixture binlog, random images and hand-made values at the edges (escapes, big ints,
  "-0" DECIMALs, zero and far temporals, invalid UTF-8) must give the same JSON texts (the one
  form ``silver.row_changes`` stores), value for value and type for type, as
  ``compact_json(render_row(...))``, and fail where ``render_row_text`` or it fails; an image
  that does not fit its layout leaves the sink as it was.
* Events' fields (``native/src/fields.rs``, ``binlog_parser.render.event_fields_json``): every
  event of every fixture, and events holding values at the edges, must give the encoder's
  ``compact_json(event.fields())``.

Skipped when the extension is not built (``make setup-native``; ``make test`` builds it).
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from binlog_parser.errors import BinlogError
from binlog_parser.events import Event, GtidEvent, QueryEvent, RowsQueryEvent, XidEvent
from binlog_parser.header import EventHeader
from binlog_parser.reader import BinlogReader, read_events
from binlog_parser.render import _FIELDS_LAYOUTS, event_fields_json
from binlog_parser.rows import _native
from binlog_parser.rows.column_types import ColumnType as T
from binlog_parser.rows.render import ImageRenderer, ImageSink, compact_json, render_row, render_row_text
from binlog_parser.rows.rows_event import RowChange, RowsEvent
from binlog_parser.rows.table_map import ColumnInfo
from binlog_parser.rows.temporal import MySQLDate, MySQLDateTime, MySQLTime, MySQLTimestamp
from binlog_parser.rows.values import Vector
from tests._native_util import DAMAGED_FIXTURES, fixture_binlogs, native_extension

pytest.importorskip("binlog_parser._native_ext", reason="compiled renderer not built (make setup-native)")


def _reference(changes: Any, columns_by_name: dict[str, Any]) -> ImageSink:
    """The renderer and the encoder, image by image, laid out as the sink holds them: what
    ``render_changes_into`` must append (the server's text is rendered too, unstored: a value
    whose text fails fails the change, as the renderers' one pass does)."""
    sink = _sink()
    for change in changes:
        for row, jsons in ((change.before, sink.before_json), (change.after, sink.after_json)):
            if row is not None:
                render_row_text(row, columns_by_name)
            jsons.append(None if row is None else compact_json(render_row(row, columns_by_name)))
    return sink


def _sink() -> ImageSink:
    return ImageSink()


def _strict(sink: ImageSink) -> list[Any]:
    """Every list with each item's type: ``==`` alone would let a str equal a str subclass."""
    return [[(type(v).__name__, v) for v in getattr(sink, column)] for column in ImageSink.__slots__]


def _utf8(parts: tuple[Any, ...]) -> list[str | None]:
    rows, nulls, validity, offsets, data = parts
    data = bytes(data)
    ends = struct.unpack(f"<{rows + 1}i", offsets)
    valid = [validity is None or bool(validity[i >> 3] >> (i & 7) & 1) for i in range(rows)]
    assert ends[0] == 0 and ends[-1] == len(data) and nulls == valid.count(False)
    return [data[ends[i]:ends[i + 1]].decode() if valid[i] else None for i in range(rows)]


def _taken(columns: Any) -> ImageSink:
    """An extension ``ImageColumns``' Arrow buffers (``take``) read back into an ``ImageSink``'s
    lists, byte by byte (the Arrow arrays built from them: ``tests/test_columns.py``)."""
    sink = ImageSink()
    before, after = columns.take()
    sink.before_json.extend(_utf8(before))
    sink.after_json.extend(_utf8(after))
    assert len(columns) == 0  # take empties the columns
    return sink


def _native_sink(changes: Any, columns_by_name: dict[str, Any]) -> ImageSink:
    """``render_changes_into`` by the extension itself, into its ``ImageColumns``, failing if it
    handed the event back; read back as an ``ImageSink``."""
    renderer = ImageRenderer(columns_by_name)
    first = changes[0]
    columns = _native.image_columns()
    n = _native.render_changes_into(changes, renderer._native_layout(_names(first.before), RowChange),
                                    renderer._native_layout(_names(first.after), RowChange), columns)
    assert n == len(changes), "the extension did not render the event"
    return _taken(columns)


def _names(image: dict[str, Any] | None) -> tuple[str, ...] | None:
    return None if image is None else tuple(image)


def _rows_events(as_bytes: bool = False) -> Iterator[tuple[str, RowsEvent]]:
    """Every rows event with rows of the fixtures (``as_bytes``: read with ``rows_as_bytes``)."""
    for path in fixture_binlogs():
        reader = BinlogReader(str(path))
        reader.context.rows_as_bytes = as_bytes
        try:
            for ev in reader:
                if isinstance(ev, RowsEvent) and ev.rows:
                    yield path.name, ev
        except BinlogError:  # the fixtures damaged on purpose end in their error; any other fails
            if path.name not in DAMAGED_FIXTURES:
                raise


def test_every_fixture_rows_event_renders_as_the_python_renderers() -> None:
    events = values = 0
    for name, ev in _rows_events():
        cols = ev.columns_by_name()
        # rendered by the extension itself: it hands no fixture event back to Python
        assert _strict(_native_sink(ev.rows, cols)) == _strict(_reference(ev.rows, cols)), (name, ev.header.pos)
        events += 1
        values += sum(len(r.before or ()) + len(r.after or ()) for r in ev.rows)
    # the fixtures' images hold every column type (1,583 events, 294,762 values when written)
    assert events > 1500 and values > 250000, (events, values)


def test_rows_kept_as_bytes_render_and_read_as_the_decoded_rows() -> None:
    """``rows_as_bytes``: every fixture rows event's images, rendered straight from their bytes
    by the ingest's call (``ImageRenderer.render_changes_into``), are byte for byte what the
    decoded rows render to; read as a sequence, they are the decoded rows. An event is kept as
    bytes when every column is of a kind the bytes path takes; the others are decoded as ever."""
    decoded = list(_rows_events())
    kept = list(_rows_events(as_bytes=True))
    assert [(n, e.header.pos) for n, e in kept] == [(n, e.header.pos) for n, e in decoded]
    as_bytes = 0
    for (name, ev), (_, lazy) in zip(decoded, kept, strict=True):
        cols = ev.columns_by_name()
        rows = lazy.rows
        if type(rows).__name__ == "RowImages":
            as_bytes += 1
            columns = _native.image_columns()
            assert ImageRenderer(cols).render_changes_into(rows, columns) == len(ev.rows)
            assert _strict(_taken(columns)) == _strict(_reference(ev.rows, cols)), (name, ev.header.pos)
            assert rows.image_names == (_names(ev.rows[0].before), _names(ev.rows[0].after))
        assert len(rows) == len(ev.rows) and rows[0] == ev.rows[0] and rows[-1:] == ev.rows[-1:]
        assert list(rows) == list(ev.rows) and rows == ev.rows and lazy == ev
    # the fixtures are a zoo of column types: 518 of 1,583 events kept as bytes when written
    assert as_bytes > 450 and len(decoded) > 1500, (as_bytes, len(decoded))


def _edge_rows_binlog() -> bytes:
    """A binlog whose rows hold each column kind the bytes path renders at its edges: unsigned
    BIGINTs past 2**63, DECIMALs that ``Decimal`` prints with an exponent (``0E-7``, ``1E-7``:
    the renderer writes them with their scale),
    zero and fractional temporals, negative TIMEs, control characters, bytes that are not UTF-8,
    NULLs; written, updated and deleted."""
    import io

    from binlog_parser.writer import BinlogFileWriter, Column, Table

    cols = (Column("u", "BIGINT UNSIGNED"), Column("i", "TINYINT"), Column("d", "DECIMAL(20,10)"),
            Column("z", "DECIMAL(10,7)"), Column("y", "YEAR"), Column("dt", "DATETIME(6)"),
            Column("ts", "TIMESTAMP(3)"), Column("t", "TIME(2)"), Column("dd", "DATE"), Column("s", "VARCHAR(20)"),
            Column("b", "VARBINARY(10)"))
    table = Table("db", "t", cols, table_id=9)
    dt, tm, ts, date = MySQLDateTime, MySQLTime, MySQLTimestamp, MySQLDate
    rows = [
        {"u": 2 ** 64 - 1, "i": -128, "d": Decimal("-0.0000000000"), "z": Decimal("0.0000000"), "y": 0,
         "dt": dt(2024, 2, 29, 23, 59, 59, 1, 6), "ts": ts(0, 0, 3), "t": tm(True, 0, 0, 0, 500000, 2),
         "dd": date(0, 0, 0), "s": 'é"\\\n\x01', "b": b"\xff\x00"},
        {"u": 2 ** 63, "i": 127, "d": Decimal("0.0000001000"), "z": Decimal("-0.0000001"), "y": 2155,
         "dt": dt(0, 0, 0, 0, 0, 0, 0, 6), "ts": ts(2 ** 31 - 1, 999000, 3), "t": tm(False, 838, 59, 59, 990000, 2),
         "dd": date(9999, 12, 31), "s": "", "b": b""},
        {"u": 0, "i": 0, "d": Decimal("9999999999.9999999999"), "z": Decimal("-999.9999999"), "y": 1901,
         "dt": dt(1000, 1, 1, 0, 0, 0, 500000, 6), "ts": ts(1, 0, 3), "t": tm(True, 838, 59, 59, 0, 2),
         "dd": date(1000, 1, 1), "s": "日本 😀", "b": b"abc"},
        dict.fromkeys(("u", "i", "d", "z", "y", "dt", "ts", "t", "dd", "s", "b")),
    ]
    buf = io.BytesIO()
    w = BinlogFileWriter(buf, server_version="8.0.40", previous_gtids="", checksum=False)
    w.begin_transaction("3e11fa47-71ca-11e1-9e33-c80aa9429562:1", last_committed=0, sequence_number=1,
                        timestamp=1700000000)
    for _ in range(2):  # (the first event of a table and bitmap builds its plan: decoded as ever)
        w.write_rows(table, rows)
        w.update_rows(table, [(rows[0], rows[1]), (rows[3], rows[2])])
        w.delete_rows(table, rows[1:])
    w.xid(1)
    return buf.getvalue()


def test_edge_values_kept_as_bytes_render_as_the_decoded_values() -> None:
    data = _edge_rows_binlog()
    reader = BinlogReader(data)
    decoded = [e for e in reader if isinstance(e, RowsEvent)]
    reader = BinlogReader(data)
    reader.context.rows_as_bytes = True
    kept = [e for e in reader if isinstance(e, RowsEvent)]
    assert [type(e.rows).__name__ for e in kept][3:] == ["RowImages"] * 3
    for ev, lazy in zip(decoded, kept, strict=True):
        cols = ev.columns_by_name()
        columns = _native.image_columns()
        assert ImageRenderer(cols).render_changes_into(lazy.rows, columns) == len(ev.rows)
        assert _strict(_taken(columns)) == _strict(_reference(ev.rows, cols))
        assert lazy == ev
    # the values at their edges, as the ingest stores them
    columns = _native.image_columns()
    ImageRenderer(kept[3].columns_by_name()).render_changes_into(kept[3].rows, columns)
    after_json = _taken(columns).after_json
    assert after_json[0] == ('{"u":"18446744073709551615","i":-128,"d":"0.0000000000","z":"0.0000000","y":"0000",'
                             '"dt":"2024-02-29 23:59:59.000001","ts":"0000-00-00 00:00:00.000","t":"-00:00:00.50",'
                             '"dd":"0000-00-00","s":"é\\"\\\\\\n\\u0001","b":"0xff00"}')
    assert after_json[1] == ('{"u":"9223372036854775808","i":127,"d":"0.0000001000","z":"-0.0000001","y":"2155",'
                             '"dt":"0000-00-00 00:00:00.000000","ts":"2038-01-19 03:14:07.999","t":"838:59:59.99",'
                             '"dd":"9999-12-31","s":"","b":"0x"}')


def test_a_sink_is_left_as_it_was_when_an_image_does_not_fit_its_layout() -> None:
    cols = {"a": EDGE_COLUMNS["i"], "b": EDGE_COLUMNS["s"]}
    good = (RowChange(None, {"a": 1, "b": "x"}),)
    bad = (RowChange(None, {"a": 2, "b": "y"}), RowChange(None, {"b": "z", "a": 3}), RowChange(None, {"a": 4}))
    renderer = ImageRenderer(cols)
    columns = _native.image_columns()
    assert renderer.render_changes_into(good, columns) == 1
    # the first change fits, the second does not: the extension hands the event back
    assert _native.render_changes_into(bad, None, renderer._native_layout(_names(bad[0].after), RowChange), columns) is None
    assert len(columns) == 1  # cut back to its length on entry
    assert renderer.render_changes_into(bad, columns) == 3  # the Python renderer then appends
    assert _strict(_taken(columns)) == _strict(_reference(good + bad, cols))
    with native_extension(False):
        python = _sink()
        assert ImageRenderer(cols).render_changes_into(good + bad, python) == 4
    assert _strict(python) == _strict(_reference(good + bad, cols))


def test_a_column_name_that_is_not_utf8_is_stored_escaped() -> None:
    """A column name with a lone surrogate (a TABLE_MAP's names are decoded with
    surrogateescape) cannot be an Arrow string: the extension's columns hold it as
    ``backslashreplace`` writes it, the text ``\\udcff``, as the Python path's conversion does
    (``binlake.ingest.columns.arrow_array``); the JSON keeps the raw character (its escape)."""
    cols = {"a": EDGE_COLUMNS["i"], "\udcff": EDGE_COLUMNS["s"]}
    changes = (RowChange(None, {"a": 2}), RowChange(None, {"a": 3, "\udcff": "x"}))
    columns = _native.image_columns()
    assert ImageRenderer(cols).render_changes_into(changes, columns) == 2
    taken = _taken(columns)
    assert taken.after_json == ['{"a":2}', '{"a":3,"\\udcff":"x"}']


def test_a_change_the_sink_cannot_hold_appends_nothing() -> None:
    """A JSON text that is not a str (the renderers never make one) fails the change, and no
    part of it stays (its before image, appended first, is cut back)."""
    columns = _native.image_columns()
    columns.append(None, '{"a":1}')
    with pytest.raises(TypeError):
        columns.append('{"a":2}', {"a": 2})
    assert len(columns) == 1
    taken = _taken(columns)
    assert taken.before_json == [None] and taken.after_json == ['{"a":1}']


def test_without_the_extension_the_python_renderer_gives_the_same_images() -> None:
    changes = (RowChange({"i": 1, "s": "a\"b"}, {"i": 2, "s": "c"}),)
    cols = {"i": EDGE_COLUMNS["i"], "s": EDGE_COLUMNS["s"]}
    with native_extension(False):
        python = _sink()
        ImageRenderer(cols).render_changes_into(changes, python)
    assert _strict(python) == _strict(_native_sink(changes, cols)) == _strict(_reference(changes, cols))
    assert python.before_json == ['{"i":1,"s":"a\\"b"}'] and python.after_json == ['{"i":2,"s":"c"}']


def _col(name: str, t: int, **kw: Any) -> ColumnInfo:
    return ColumnInfo(index=0, name=name, type=t, binlog_type=t, meta=kw.pop("meta", 0), nullable=True, **kw)


EDGE_COLUMNS = {
    "s": _col("s", T.VARCHAR, charset="utf8mb4"),
    "i": _col("i", T.LONGLONG),
    "y": _col("y", T.YEAR),
    "d": _col("d", T.NEWDECIMAL, meta=(10 << 8) | 2, scale=2),
    "dn": _col("dn", T.NEWDECIMAL, meta=(10 << 8) | 2),
    "b": _col("b", T.BLOB, meta=2, charset="binary"),
    "u": _col("u", T.BLOB, meta=2),
    "t": _col("t", T.DATETIME2, meta=6, fsp=6),
    "f": _col("f", T.FLOAT),
}


@pytest.mark.parametrize("value", [
    "plain", "", "quote \" back \\ slash", "nl\n cr\r tab\t bs\b ff\f", "\x00\x01\x1f\x7f", "é 日本 😀",
    "\ud800 lone surrogate",
    0, -1, 2 ** 53, 2 ** 53 + 1, -(2 ** 53) - 1, 2 ** 63 - 1, -(2 ** 63), 2 ** 64, True, False, None,
    Decimal("0.00"), Decimal("-0.00"), Decimal("-12.50"), Decimal("12.5"), Decimal("1E+3"), Decimal("NaN"),
    Decimal("-0"), Decimal("0.0000001"),
    b"", b"\x00\xff", b"ok", "é".encode(), b"\xed\xa0\x80",
    MySQLDate(0, 0, 0), MySQLDate(2024, 2, 29), MySQLDate(-1, 13, 99),
    MySQLDateTime(2024, 1, 2, 3, 4, 5, 678901, 6), MySQLDateTime(0, 0, 0, 0, 0, 0, 0, 0),
    MySQLDateTime(9999, 12, 31, 23, 59, 59, 999999, 3), MySQLDateTime(2024, 1, 2, 3, 4, 5, 5, 0),
    MySQLDateTime(2024, 1, 2, 3, 4, 5, 1234567, 6), MySQLDateTime(2024, 1, 2, 3, 4, 5, -5, 6),
    MySQLDateTime(2024, 200, 2, 3, 4, 5, 0, 0),
    MySQLTime(True, 838, 59, 59, 0, 0), MySQLTime(False, 0, 0, 0, 500000, 1), MySQLTime(True, 1, 2, 3, 4, 6),
    MySQLTimestamp(0, 0, 0), MySQLTimestamp(0, 0, 3), MySQLTimestamp(0, 5, 6), MySQLTimestamp(1, 0, 0),
    MySQLTimestamp(951782400, 0, 0), MySQLTimestamp(4294967295, 999999, 6), MySQLTimestamp(-86401, 0, 0),
    MySQLTimestamp(253402300800, 0, 0),
    1.5, 0.1, float("inf"), Vector((1.0, 2.5)), dt.date(2024, 1, 2),
])
@pytest.mark.parametrize("column", sorted(EDGE_COLUMNS))
def test_edge_values_render_as_the_python_renderers(value: Any, column: str) -> None:
    cols = {column: EDGE_COLUMNS[column]}
    changes = (RowChange({column: value}, {column: value}), RowChange({column: value}, {column: value}))
    try:
        expected = _reference(changes, cols)
    except Exception as exc:  # noqa: BLE001 - the reference raises: the renderer must too
        with pytest.raises(type(exc)):
            ImageRenderer(cols).render_changes_into(changes, _sink())
        return
    sink = _sink()
    assert ImageRenderer(cols).render_changes_into(changes, sink) == 2
    assert _strict(sink) == _strict(expected)
    if type(value) in (str, int, bool, bytes, MySQLDate, MySQLDateTime, MySQLTime) and value != "\ud800 lone surrogate":
        assert _strict(_native_sink(changes, cols)) == _strict(expected)  # not handed back to Python


_TEXT = st.text(st.characters(codec="utf-8"), max_size=12)
_VALUES = st.one_of(
    st.none(), _TEXT, st.integers(), st.booleans(), st.binary(max_size=8),
    st.decimals(allow_nan=False, allow_infinity=False, places=2),
    st.builds(MySQLDateTime, st.integers(0, 9999), st.integers(0, 12), st.integers(0, 31), st.integers(0, 23),
              st.integers(0, 59), st.integers(0, 59), st.integers(0, 999999), st.integers(0, 6)),
    st.builds(MySQLTimestamp, st.integers(0, 2 ** 32 - 1), st.integers(0, 999999), st.integers(0, 6)),
    st.builds(MySQLTime, st.booleans(), st.integers(0, 838), st.integers(0, 59), st.integers(0, 59),
              st.integers(0, 999999), st.integers(0, 6)),
    st.builds(MySQLDate, st.integers(0, 9999), st.integers(0, 12), st.integers(0, 31)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(sorted(EDGE_COLUMNS)), _VALUES), min_size=1, max_size=6,
                unique_by=lambda cv: cv[0]))
def test_random_images_render_as_the_python_renderers(items: list[tuple[str, Any]]) -> None:
    image = dict(items)
    cols = {name: EDGE_COLUMNS[name] for name in image}
    changes = (RowChange(image, image), RowChange(dict(image), dict(image)))
    assert _strict(_native_sink(changes, cols)) == _strict(_reference(changes, cols))


def _events() -> Iterator[Event]:
    for path in fixture_binlogs():
        try:
            yield from read_events(str(path))
        except BinlogError:  # the fixtures damaged on purpose end in their error; any other fails
            if path.name not in DAMAGED_FIXTURES:
                raise


def test_every_fixture_events_fields_json_is_the_encoders() -> None:
    events = walked = 0
    for ev in _events():
        text = event_fields_json(ev)
        assert text == compact_json(ev.fields()), (type(ev).__name__, ev.header)
        events += 1
        layout = _FIELDS_LAYOUTS.get(type(ev))
        walked += layout is not None and _native.fields_json(ev, layout) == text
    assert events > 4000, events
    # the extension writes the fields of every event of the default walk (not TABLE_MAP, rows)
    assert walked > events // 2, (walked, events)


_HEADER = EventHeader(pos=4, next_pos=23, timestamp=1, type_code=2, server_id=1, event_size=19, log_pos=23, flags=0)


@pytest.mark.parametrize("event", [
    XidEvent(_HEADER, 2 ** 64 - 1),
    XidEvent(_HEADER, -(2 ** 70)),
    RowsQueryEvent(_HEADER, "q \" \\ \n\u0001 é 😀"),
    RowsQueryEvent(_HEADER, "\ud800 lone"),
    QueryEvent(_HEADER, 1, 0, 0, "db", "BEGIN", {"flags2": 0, "sql_mode": 2 ** 60, "charset": (33, 33, 8),
                                                  "time_zone": "+00:00", "catalog": b"std\x00"}, None, True),
    QueryEvent(_HEADER, 1, 0, 0, "db", "x", {}, 7, False),
    GtidEvent(_HEADER, None, 1, "u", None, 0, None, None, None, None, None, None, None, None),
])
def test_edge_events_fields_json_is_the_encoders(event: Event) -> None:
    expected = compact_json(event.fields())
    assert event_fields_json(event) == expected
    with native_extension(False):
        assert event_fields_json(event) == expected


def test_a_subclass_or_an_overridden_fields_is_encoded_in_python() -> None:
    class Shouting(RowsQueryEvent):
        def fields(self) -> dict[str, Any]:
            return {"query": self.query.upper()}

    ev = Shouting(_HEADER, "begin")
    assert event_fields_json(ev) == '{"query":"BEGIN"}'
    layout = _FIELDS_LAYOUTS.get(RowsQueryEvent) or _native.fields_layout(RowsQueryEvent, ['"query":'], str)
    assert _native.fields_json(ev, layout) is None  # not the layout's class: handed back
