"""The compiled renderers against the Python ones.

* Row images (``native/src/render.rs``, ``ImageRenderer.render_changes``): every rows event of
  every fixture binlog, random images and hand-made values at the edges (escapes, big ints,
  "-0" DECIMALs, zero and far temporals, invalid UTF-8) must render to the same JSON text and
  the same text map, value for value, as ``compact_json(render_row(...))`` and
  ``render_row_text``.
* Events' fields (``native/src/fields.rs``, ``binlog_parser.render.event_fields_json``): every
  event of every fixture, and events holding values at the edges, must give the encoder's
  ``compact_json(event.fields())``.

Skipped when the extension is not built (``make setup-native``; ``make test`` builds it).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from binlog_parser.events import Event, GtidEvent, QueryEvent, RowsQueryEvent, XidEvent
from binlog_parser.header import EventHeader
from binlog_parser.reader import read_events
from binlog_parser.render import _FIELDS_LAYOUTS, event_fields_json
from binlog_parser.rows import _native
from binlog_parser.rows.column_types import ColumnType as T
from binlog_parser.rows.render import ImageRenderer, ImageSink, compact_json, render_row, render_row_text
from binlog_parser.rows.rows_event import RowChange, RowsEvent
from binlog_parser.rows.table_map import ColumnInfo
from binlog_parser.rows.temporal import MySQLDate, MySQLDateTime, MySQLTime, MySQLTimestamp
from binlog_parser.rows.values import Vector

pytest.importorskip("binlog_parser._native_ext", reason="compiled renderer not built (make setup-native)")

FIXTURES = Path(__file__).parent / "fixtures"


def _fixture_files() -> list[Path]:
    files = [p for p in sorted((FIXTURES / "binlogs").glob("*/*")) if p.suffix not in (".tsv", ".md")]
    return files + sorted((FIXTURES / "mariadb-10.11").glob("binlog.0*"))


@contextmanager
def _native_on(enabled: bool) -> Iterator[None]:
    assert _native.use_native(enabled) is enabled
    try:
        yield
    finally:
        _native.use_native(None)


def _reference(changes: Any, columns_by_name: dict[str, Any]) -> list[Any]:
    """The renderers and the encoder, image by image: what ``render_changes`` must give."""
    def one(row: dict[str, Any] | None) -> tuple[Any, Any]:
        if row is None:
            return None, None
        return compact_json(render_row(row, columns_by_name)), render_row_text(row, columns_by_name)
    out = []
    for change in changes:
        bj, bt = one(change.before)
        aj, at = one(change.after)
        out.append((bt, at, bj, aj))
    return out


def _native_images(changes: Any, columns_by_name: dict[str, Any]) -> list[Any]:
    """``render_changes`` through the extension, failing if it left the event to Python."""
    renderer = ImageRenderer(columns_by_name)
    first = changes[0]
    out = _native.render_changes(changes, renderer._native_layout(first.before),
                                 renderer._native_layout(first.after))
    assert out is not None, "the extension did not render the event"
    assert out == renderer.render_changes(changes)
    return out


def _strict(images: list[Any]) -> list[Any]:
    """Images with every text's type: ``==`` alone would let a str equal a str subclass."""
    def m(d: dict[str, Any] | None) -> Any:
        return None if d is None else [(k, type(v).__name__, v) for k, v in d.items()]
    return [(m(bt), m(at), bj, aj) for bt, at, bj, aj in images]


def _rows_events() -> Iterator[tuple[str, RowsEvent]]:
    for path in _fixture_files():
        try:
            for ev in read_events(str(path)):
                if isinstance(ev, RowsEvent) and ev.rows:
                    yield path.name, ev
        except Exception:  # noqa: BLE001 - damaged fixtures: their good events are enough here
            continue


def test_every_fixture_rows_event_renders_as_the_python_renderers() -> None:
    events = values = 0
    fallback_events = 0
    for _name, ev in _rows_events():
        cols = ev.columns_by_name()
        expected = _reference(ev.rows, cols)
        renderer = ImageRenderer(cols)
        first = ev.rows[0]
        native = _native.render_changes(ev.rows, renderer._native_layout(first.before),
                                        renderer._native_layout(first.after))
        if native is None:
            fallback_events += 1
            native = renderer.render_changes(ev.rows)
        assert _strict(native) == _strict(expected), (_name, ev.header.log_pos)
        events += 1
        values += sum(len(r.before or ()) + len(r.after or ()) for r in ev.rows)
    # every fixture with rows: the 86 files hold images of every column type
    assert events > 1500 and values > 250000, (events, values)
    # the extension renders every event itself (1583 events, 294,762 values when written)
    assert fallback_events == 0, (fallback_events, events)


def _sink() -> ImageSink:
    return ImageSink(*([] for _ in ImageSink._fields))


def _sink_of(images: list[Any]) -> ImageSink:
    """The flat columns of rendered images, built here from the tuples (what the sink holds)."""
    sink = _sink()
    for bt, at, bj, aj in images:
        for image, keys, values, offsets, nulls in ((bt, sink.before_keys, sink.before_values, sink.before_offsets,
                                                     sink.before_nulls),
                                                    (at, sink.after_keys, sink.after_values, sink.after_offsets,
                                                     sink.after_nulls)):
            nulls.append(image is None)
            keys.extend(image or ())
            values.extend((image or {}).values())
            offsets.append(len(keys))
        sink.before_json.append(bj)
        sink.after_json.append(aj)
    return sink


def _strict_sink(sink: ImageSink) -> list[Any]:
    return [[(type(v).__name__, v) for v in column] for column in sink]


def test_every_fixture_rows_event_renders_into_a_sink_as_the_python_renderers() -> None:
    events = 0
    for _name, ev in _rows_events():
        cols = ev.columns_by_name()
        renderer = ImageRenderer(cols)
        first = ev.rows[0]
        sink = _sink()
        n = _native.render_changes_into(ev.rows, renderer._native_layout(first.before),
                                        renderer._native_layout(first.after), sink)
        assert n == len(ev.rows), (_name, ev.header.log_pos)
        assert _strict_sink(sink) == _strict_sink(_sink_of(_reference(ev.rows, cols))), (_name, ev.header.log_pos)
        events += 1
    assert events > 1500, events


def test_a_sink_is_left_as_it_was_when_an_image_does_not_fit_its_layout() -> None:
    cols = {"a": EDGE_COLUMNS["i"], "b": EDGE_COLUMNS["s"]}
    good = (RowChange(None, {"a": 1, "b": "x"}),)
    bad = (RowChange(None, {"a": 2, "b": "y"}), RowChange(None, {"a": 3}))
    renderer = ImageRenderer(cols)
    sink = _sink()
    assert renderer.render_changes_into(good, sink) == 1
    kept = _strict_sink(sink)
    assert _native.render_changes_into(bad, None, renderer._native_layout(bad[0].after), sink) is None
    assert _strict_sink(sink) == kept  # every list cut back to its length on entry
    assert renderer.render_changes_into(bad, sink) == 2  # the Python renderer then appends
    assert _strict_sink(sink) == _strict_sink(_sink_of(_reference(good + bad, cols)))
    with _native_on(False):
        python = _sink()
        assert ImageRenderer(cols).render_changes_into(good + bad, python) == 3
    assert _strict_sink(python) == _strict_sink(sink)


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
            ImageRenderer(cols).render_changes(changes)
        return
    assert _strict(ImageRenderer(cols).render_changes(changes)) == _strict(expected)
    if type(value) in (str, int, bool, bytes, MySQLDate, MySQLDateTime, MySQLTime) and value != "\ud800 lone surrogate":
        _native_images(changes, cols)  # rendered by the extension itself, not handed back


def test_an_image_with_other_columns_than_its_layout_is_rendered_in_python() -> None:
    cols = {"a": EDGE_COLUMNS["i"], "b": EDGE_COLUMNS["s"]}
    changes = (RowChange(None, {"a": 1, "b": "x"}), RowChange(None, {"b": "y", "a": 2}),
               RowChange(None, {"a": 3}))
    renderer = ImageRenderer(cols)
    layout = renderer._native_layout(changes[0].after)
    assert _native.render_changes(changes, None, layout) is None
    assert _strict(renderer.render_changes(changes)) == _strict(_reference(changes, cols))


def test_without_the_extension_the_python_renderer_gives_the_same_images() -> None:
    changes = (RowChange({"i": 1, "s": "a\"b"}, {"i": 2, "s": "c"}),)
    cols = {"i": EDGE_COLUMNS["i"], "s": EDGE_COLUMNS["s"]}
    with _native_on(False):
        python = ImageRenderer(cols).render_changes(changes)
    with _native_on(True):
        native = ImageRenderer(cols).render_changes(changes)
    assert _strict(python) == _strict(native) == _strict(_reference(changes, cols))
    assert native[0][2] == '{"i":1,"s":"a\\"b"}' and native[0][1] == {"i": "2", "s": "c"}


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
    assert _strict(_native_images(changes, cols)) == _strict(_reference(changes, cols))


def _events() -> Iterator[Event]:
    for path in _fixture_files():
        try:
            yield from read_events(str(path))
        except Exception:  # noqa: BLE001 - damaged fixtures: their good events are enough here
            continue


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
    with _native_on(False):
        assert event_fields_json(event) == expected


def test_a_subclass_or_an_overridden_fields_is_encoded_in_python() -> None:
    class Shouting(RowsQueryEvent):
        def fields(self) -> dict[str, Any]:
            return {"query": self.query.upper()}

    ev = Shouting(_HEADER, "begin")
    assert event_fields_json(ev) == '{"query":"BEGIN"}'
    layout = _FIELDS_LAYOUTS.get(RowsQueryEvent) or _native.fields_layout(RowsQueryEvent, ['"query":'], str)
    assert _native.fields_json(ev, layout) is None  # not the layout's class: handed back
