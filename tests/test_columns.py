"""binlake.ingest.columns: per-column buffers -> one Arrow batch in a table's schema."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest

from binlake.ingest.columns import TableColumns, array_from_parts, image_arrays, utc_dates
from binlake.ingest.layout import batch_schema
from binlog_parser.rows import _native
from binlog_parser.rows.render import ImageSink
from tests._native_util import native_extension

UTC = dt.UTC
US = 1_000_000


def _statement(cols: TableColumns, pos: int, event_us: int | None, sql: str) -> None:
    values = {"pos": pos, "payload_index": None, "gtid": "u:1", "trx_pos": 4, "event_time": event_us,
              "server_id": 7, "db": "shop", "sql": sql, "kind": "DDL", "thread_id": 9, "exec_time": 0,
              "error_code": 0, "status_vars": None, "event_type": "QUERY"}
    cols.row(*(values[c] for c in cols.row_columns))


def _modes() -> list[Any]:
    """The row buffers with the extension (when built) and without (Python lists)."""
    built = _native.use_native(None)
    return [pytest.param(True, id="extension", marks=pytest.mark.skipif(not built, reason="extension not built")),
            pytest.param(False, id="python")]


@pytest.fixture(params=_modes())
def native(request: pytest.FixtureRequest) -> Iterator[bool]:
    with native_extension(request.param):
        yield request.param


def test_a_batch_has_the_tables_schema_constants_and_dates(native: bool) -> None:
    cols = TableColumns("silver.statements", {"source": "s", "file": "binlog.000002", "file_seq": 2})
    assert (type(cols.row_buffer).__name__ == "RowColumns") is native
    _statement(cols, 120, 86_400 * US + 5, "CREATE TABLE t (a INT)")
    _statement(cols, 300, None, "DROP TABLE t")
    assert len(cols) == 2
    batch = cols.take_batch()
    assert batch.schema == batch_schema("silver.statements")
    assert batch.to_pylist() == [
        {"source": "s", "file": "binlog.000002", "file_seq": 2, "pos": 120, "payload_index": None, "gtid": "u:1",
         "trx_pos": 4, "event_time": dt.datetime(1970, 1, 2, 0, 0, 0, 5, tzinfo=UTC), "server_id": 7,
         "db": "shop", "sql": "CREATE TABLE t (a INT)", "kind": "DDL", "thread_id": 9, "exec_time": 0,
         "error_code": 0, "status_vars": None, "event_type": "QUERY", "event_date": dt.date(1970, 1, 2)},
        {"source": "s", "file": "binlog.000002", "file_seq": 2, "pos": 300, "payload_index": None, "gtid": "u:1",
         "trx_pos": 4, "event_time": None, "server_id": 7, "db": "shop", "sql": "DROP TABLE t", "kind": "DDL",
         "thread_id": 9, "exec_time": 0, "error_code": 0, "status_vars": None, "event_type": "QUERY",
         "event_date": None}]
    # the buffers are empty again, and the bound appends still feed them
    assert len(cols) == 0
    _statement(cols, 400, 0, "TRUNCATE t")
    (row,) = cols.take_batch().to_pylist()
    assert (row["pos"], row["event_date"]) == (400, dt.date(1970, 1, 1))


def test_a_null_in_a_not_null_column_is_refused_by_name(native: bool) -> None:
    """A NOT NULL column is not nullable in a batch (a required Parquet column): a NULL there,
    which only a fault of the ingest could put, is named before any batch is made."""
    from binlake.ingest.columns import NotNullError

    cols = TableColumns("silver.statements", {"source": "s", "file": "binlog.000002", "file_seq": 2})
    _statement(cols, 120, 0, "CREATE TABLE t (a INT)")
    assert not cols.take_batch().schema.field("pos").nullable
    _statement(cols, None, 0, "DROP TABLE t")  # type: ignore[arg-type]
    with pytest.raises(NotNullError, match=r"silver\.statements: NULL in NOT NULL column\(s\) pos of a batch of 1 rows"):
        cols.take_batch()


def test_a_date_is_the_first_non_null_of_its_timestamps(native: bool) -> None:
    """silver.transactions.commit_date: of commit_time, else of begin_time."""
    cols = TableColumns("silver.transactions", {"source": "s", "file": "f", "file_seq": None})
    for commit_us, begin_us in ((None, 3 * 86_400 * US), (86_400 * US, 0), (None, None)):
        values = {"commit_time": commit_us, "begin_time": begin_us, "statements": [], "tables": [], "start_pos": 4,
                  "gtid_kind": "GTID", "events": 2, "row_changes": 0, "kind": "EMPTY", "complete": True}
        cols.row(*(values.get(c) for c in cols.row_columns))
    days = [r["commit_date"] for r in cols.take_batch().to_pylist()]
    assert days == [dt.date(1970, 1, 4), dt.date(1970, 1, 2), None]


#: one bronze.events row per kind of value at its edges: NULLs, int32/int64 bounds, non-ASCII
#: and empty text, bytes with a NUL, timestamps before 1970
EDGE_EVENTS = [
    {"pos": 4, "payload_index": 2 ** 31 - 1, "payload_offset": -(2 ** 63), "next_pos": 2 ** 63 - 1, "type_code": -(2 ** 31),
     "event_type": "é 日本 😀", "event_time": -1, "server_id": 0, "event_size": 19, "log_pos": 0, "flags": 0,
     "checksum": "", "gtid": None, "trx_pos": None, "db": "d\udcff", "table_name": "t\x00", "fields": "{}", "raw": b"\x00\xff"},
    # NULL in every nullable column (of each kind of column: int32, int64, timestamp, word, text, binary)
    {**dict.fromkeys(("payload_index", "payload_offset", "next_pos", "event_time", "server_id", "event_size",
                      "log_pos", "flags", "gtid", "trx_pos", "db", "table_name", "fields", "raw")),
     "pos": 5, "type_code": 2, "event_type": "QUERY", "checksum": "none"},
]


def _batches_with_and_without_the_extension(table: str,
                                            fill: Callable[[TableColumns, bool], None]) -> pa.RecordBatch:
    """The batch ``fill(columns, native)`` makes of ``table``: valid, and the same with the
    extension's buffers and with Python lists."""
    if not _native.use_native(None):
        pytest.skip("compiled extension not built")
    batches = []
    for enabled in (True, False):
        with native_extension(enabled):
            cols = TableColumns(table, {"source": "s", "file": "f", "file_seq": 1})
            fill(cols, enabled)
            batch = cols.take_batch()
            batch.validate(full=True)
            batches.append(batch)
    assert batches[0].equals(batches[1])
    return batches[0]


def test_row_buffers_with_and_without_the_extension_give_the_same_batch() -> None:
    def fill(cols: TableColumns, native: bool) -> None:
        for _ in range(3):  # more than a byte of validity bits
            for row in EDGE_EVENTS * 3:
                cols.row(*(row[c] for c in cols.row_columns))

    batch = _batches_with_and_without_the_extension("bronze.events", fill)
    assert batch.column("raw").to_pylist()[:2] == [b"\x00\xff", None]
    # a lone surrogate (a name decoded with surrogateescape) as backslashreplace writes it
    assert batch.column("db").to_pylist()[:2] == ["d\\udcff", None]


def test_the_extensions_buffers_become_arrow_arrays_without_a_copy_and_outlive_the_next_batch() -> None:
    """A batch's values, offsets and string data are handed over as the builders' own memory
    (an ``ArrowBuffer``, read-only, not a ``bytes`` copy), which Arrow wraps in place; and that
    memory is the batch's alone: the rows appended for the next batch do not touch it, and it
    outlives the columns that filled it."""
    if not _native.use_native(None):
        pytest.skip("compiled extension not built")
    with native_extension(True):
        cols = TableColumns("silver.statements", {"source": "s", "file": "binlog.000002", "file_seq": 2})
        _statement(cols, 120, 86_400 * US + 5, "CREATE TABLE t (a INT)")
        _statement(cols, 300, None, "DROP TABLE t")
        columns = dict(zip(cols.row_columns, cols.row_buffer.take(), strict=True))
        rows, nulls, validity, offsets, data = columns["sql"]
        assert (rows, nulls, validity, bytes(data)) == (2, 0, None, b"CREATE TABLE t (a INT)DROP TABLE t")
        assert {type(data).__name__, type(offsets).__name__, type(columns["pos"][3]).__name__} == {"ArrowBuffer"}
        assert memoryview(data).readonly and memoryview(offsets).readonly
        with pytest.raises(TypeError):
            memoryview(data)[0] = 0
        sql = array_from_parts(columns["sql"], pa.string())
        pos = array_from_parts(columns["pos"], pa.int64())
        assert sql.buffers()[2].address == pa.py_buffer(data).address  # wrapped in place
        assert pos.buffers()[1].address == pa.py_buffer(columns["pos"][3]).address
        del columns, rows, nulls, validity, offsets, data
        for n in range(50):  # the next batches, larger, fill new memory
            _statement(cols, 1000 + n, None, "x" * 100)
        later = cols.take_batch()
        del cols
    assert sql.to_pylist() == ["CREATE TABLE t (a INT)", "DROP TABLE t"] and pos.to_pylist() == [120, 300]
    assert later.column("pos").to_pylist() == list(range(1000, 1050))


def test_word_columns_hold_each_word_once_per_batch_and_an_index_per_row(native: bool) -> None:
    """A word column (``WORD_COLUMNS``: names, kinds, GTIDs) is a dictionary in the batch: each
    distinct word once, in the order first seen, whichever ``str`` object holds it (the
    extension finds the objects it was given lately by identity), NULL kept apart; each batch
    starts its own words; the Parquet file holds the plain strings."""
    import pyarrow.parquet as pq

    cols = TableColumns("silver.statements", {"source": "s", "file": "binlog.000002", "file_seq": 2})
    shop = "".join(["sh", "op"])
    for i, db in enumerate([shop, "".join(["sh", "op"]), None, "crm", shop, "", shop]):
        values = {"pos": i, "payload_index": None, "gtid": f"u:{i // 3}", "trx_pos": 4, "event_time": None,
                  "server_id": 7, "db": db, "sql": "x", "kind": "DDL", "thread_id": 9, "exec_time": 0,
                  "error_code": 0, "status_vars": None, "event_type": "QUERY"}
        cols.row(*(values[c] for c in cols.row_columns))
    batch = cols.take_batch()
    db = batch.column("db")
    assert db.type == pa.dictionary(pa.int32(), pa.string())
    assert db.dictionary.to_pylist() == ["shop", "crm", ""]
    assert db.indices.to_pylist() == [0, 0, None, 1, 0, 2, 0]
    assert batch.column("gtid").dictionary.to_pylist() == ["u:0", "u:1", "u:2"]
    assert batch.column("kind").dictionary.to_pylist() == ["DDL"]
    _statement(cols, 9, None, "y")  # the next batch: words of its own
    assert cols.take_batch().column("db").dictionary.to_pylist() == ["shop"]
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_batches([batch]), sink, store_schema=False)
    table = pq.read_table(pa.BufferReader(sink.getvalue()))
    assert table.schema.field("db").type == pa.string()
    assert table.column("db").to_pylist() == ["shop", "shop", None, "crm", "shop", "", "shop"]


@pytest.mark.parametrize("bad, error", [
    ({"pos": "4"}, TypeError), ({"raw": "text"}, TypeError), ({"fields": b"\xff"}, ValueError),
    ({"flags": 1.5}, TypeError), ({"event_type": 5}, TypeError)])
def test_a_row_the_extension_cannot_hold_keeps_nothing(bad: dict[str, Any], error: type[Exception]) -> None:
    """A value of another type fails the row, as ``pa.array`` fails the batch; the rows before
    it stay whole."""
    if not _native.use_native(None):
        pytest.skip("compiled extension not built")
    cols = TableColumns("bronze.events", {"source": "s", "file": "f", "file_seq": 1})
    cols.row(*(EDGE_EVENTS[0][c] for c in cols.row_columns))
    with pytest.raises(error, match=f"bronze.events.{next(iter(bad))}: "):
        cols.row(*(dict(EDGE_EVENTS[0], **bad)[c] for c in cols.row_columns))
    with pytest.raises(TypeError):
        cols.row(1, 2)
    assert len(cols) == 1
    assert cols.take_batch().to_pylist()[0]["raw"] == b"\x00\xff"


def test_an_integer_out_of_its_columns_range_is_stored_as_null_and_named(native: bool) -> None:
    """A binlog integer that does not fit its column (a flipped byte in a length or an XID)
    costs that value, not the row: it is stored as NULL and the answer names it; the same with
    and without the extension, repeated rows too."""
    cols = TableColumns("bronze.events", {"source": "s", "file": "f", "file_seq": 1})
    row = dict(EDGE_EVENTS[0], payload_index=2 ** 31, event_size=2 ** 63, next_pos=-(2 ** 63) - 1, log_pos=2 ** 64 - 1)
    assert cols.row(*(EDGE_EVENTS[0][c] for c in cols.row_columns)) is None
    assert cols.row(*(row[c] for c in cols.row_columns)) == [
        f"bronze.events.payload_index: {2 ** 31} does not fit an INT (int32) column",
        f"bronze.events.next_pos: {-(2 ** 63) - 1} does not fit a BIGINT (int64) column",
        f"bronze.events.event_size: {2 ** 63} does not fit a BIGINT (int64) column",
        f"bronze.events.log_pos: {2 ** 64 - 1} does not fit a BIGINT (int64) column"]
    assert cols.repeated(2, *(row[c] for c in cols.row_columns)) == [
        f"bronze.events.payload_index: {2 ** 31} does not fit an INT (int32) column",
        f"bronze.events.next_pos: {-(2 ** 63) - 1} does not fit a BIGINT (int64) column",
        f"bronze.events.event_size: {2 ** 63} does not fit a BIGINT (int64) column",
        f"bronze.events.log_pos: {2 ** 64 - 1} does not fit a BIGINT (int64) column"]
    batch = cols.take_batch()
    batch.validate(full=True)
    got = batch.to_pylist()
    assert [(r["pos"], r["payload_index"], r["next_pos"], r["log_pos"], r["event_size"]) for r in got] == [
        (4, 2 ** 31 - 1, 2 ** 63 - 1, 0, 19)] + [(4, None, None, None, None)] * 3
    assert got[1]["raw"] == b"\x00\xff" and got[1]["db"] == "d\\udcff"


def test_row_columns_are_checked_against_the_schema() -> None:
    with pytest.raises(ValueError, match="appended as"):
        TableColumns("silver.statements", {"source": "s", "file": "f", "file_seq": 1}, row_columns=("sql", "pos"))
    # source and file are one word per batch (dictionaries): given as constants, never by row
    with pytest.raises(ValueError, match="source, file must be given as constants"):
        TableColumns("silver.statements", {"file_seq": 1})


def _image_sinks() -> list[Any]:
    """Both row image sinks: the extension's Arrow buffers (when built) and the Python lists."""
    sinks: list[Any] = [ImageSink()]
    native = _native.image_columns()
    return sinks + ([native] if native is not None else [])


ROW_CHANGE_COLUMNS = ("pos", "payload_index", "row_index", "gtid", "trx_pos", "event_time", "server_id", "db",
                      "table_name", "operation", "event_type")


def _row_changes(images_sink: Any) -> TableColumns:
    return TableColumns("silver.row_changes", {"source": "s", "file": "f", "file_seq": 1}, images=images_sink,
                        image_columns=("before", "after"), row_columns=ROW_CHANGE_COLUMNS,
                        late_columns=("commit_time",), sequence_columns=("row_index",))


def test_a_rows_events_columns_are_one_call_for_its_rows_and_commit_times_come_late(native: bool) -> None:
    """row_changes: an event's columns in one call for all its rows (row_index counting up), each
    row's images from the sink, the commit time per event once the transaction ends; NULL images
    and absent keys kept."""
    sink = _native.image_columns() if native else None
    images_sink = sink if sink is not None else ImageSink()
    cols = _row_changes(images_sink)
    for pos, op, images in ((10, "insert", [(None, '{"id":1,"n":null}')]),
                            (20, "update", [('{"id":1}', '{"id":2}'), ('{"id":5}', '{"id":6,"x":"y"}')]),
                            (30, "delete", []),
                            (40, "delete", [('{"id":9}', None)] * 3)):
        cols.repeated(len(images), pos, None, 0, None if pos == 40 else "u:1", 4, pos * US, 1, "d", "t", op, "X")
        for before, after in images:
            images_sink.append(before, after)
    with pytest.raises(ValueError, match="unequal length"):  # commit times not given yet
        cols.take_batch()
    for n in (1, 2, 0):
        cols.late(n, 100 * US)
    cols.late(3, None)
    rows = cols.take_batch().to_pylist()
    assert [(x["pos"], x["operation"], x["row_index"], x["gtid"], x["before"], x["after"])
            for x in rows] == [
        (10, "insert", 0, "u:1", None, '{"id":1,"n":null}'),
        (20, "update", 0, "u:1", '{"id":1}', '{"id":2}'),
        (20, "update", 1, "u:1", '{"id":5}', '{"id":6,"x":"y"}'),
        (40, "delete", 0, None, '{"id":9}', None),
        (40, "delete", 1, None, '{"id":9}', None),
        (40, "delete", 2, None, '{"id":9}', None)]
    assert [x["commit_date"] for x in rows] == [dt.date(1970, 1, 1)] * 3 + [None] * 3
    assert rows[1]["event_time"].second == 20 and rows[5]["event_time"].second == 40
    assert len(images_sink) == 0 and len(cols) == 0


def test_repeated_rows_with_and_without_the_extension_give_the_same_batch() -> None:
    """Every kind of column repeated, NULLs and a NULL sequence value included, runs shorter and
    longer than a byte of validity bits, from any bit of a byte on; a row that cannot be held
    keeps nothing, repeated or not."""
    def fill(cols: TableColumns, native: bool) -> None:
        for i, row in enumerate(EDGE_EVENTS * 3):
            cols.repeated(5 * i + 1, *(row[c] for c in cols.row_columns))
        cols.repeated(0, *(EDGE_EVENTS[0][c] for c in cols.row_columns))

    batch = _batches_with_and_without_the_extension("bronze.events", fill)
    assert batch.num_rows == 81
    raw = batch.column("raw").to_pylist()
    assert raw == ([b"\x00\xff"] + [None] * 6 + [b"\x00\xff"] * 11 + [None] * 16 + [b"\x00\xff"] * 21
                   + [None] * 26)
    sink = _native.image_columns()
    cols = _row_changes(sink)
    cols.repeated(2, 10, None, 2 ** 31 - 2, None, 4, US, 1, "d", "t", "insert", "X")
    with pytest.raises(OverflowError, match="silver.row_changes.row_index: .* does not fit an INT"):
        cols.repeated(3, 10, None, 2 ** 31 - 2, None, 4, US, 1, "d", "t", "insert", "X")
    assert len(cols) == 2
    cols.late(2, None)
    for _ in range(2):
        sink.append(None, "{}")
    assert cols.take_batch().column("row_index").to_pylist() == [2 ** 31 - 2, 2 ** 31 - 1]


IMAGES = [('{"a":1}', None), (None, "{}"), ('{"b":null,"c":"日本 😀"}', ""), (None, None)]
TYPES = [pa.string()] * 2


def test_image_arrays_of_both_sinks_are_the_same_arrow_arrays() -> None:
    """The extension's buffers wrapped as they are and the Python lists converted give equal,
    valid arrays: NULL images, empty ones, non-ASCII text; the sink is emptied; the types are
    the ingest batch's (each image once, its JSON text)."""
    sinks = _image_sinks()
    if len(sinks) < 2:
        pytest.skip("compiled extension not built")
    assert [batch_schema("silver.row_changes").field(c).type for c in ("before", "after")] == TYPES
    arrays = []
    for sink in sinks:
        for image in IMAGES:
            sink.append(*image)
        got = image_arrays(sink, TYPES)
        for arr in got:
            arr.validate(full=True)
        arrays.append(got)
        assert len(sink) == 0 and [a.to_pylist() for a in image_arrays(sink, TYPES)] == [[]] * 2
    python, native = arrays
    assert all(p.equals(n) for p, n in zip(python, native, strict=True))
    assert [a.to_pylist() for a in python] == [
        ['{"a":1}', None, '{"b":null,"c":"日本 😀"}', None],
        [None, "{}", "", None]]


@pytest.mark.parametrize("which", [0, 1], ids=["python", "extension"])
def test_a_sink_truncated_is_as_it_was(which: int) -> None:
    sinks = _image_sinks()
    if which >= len(sinks):
        pytest.skip("compiled extension not built")
    sink = sinks[which]
    sink.append(*IMAGES[0])
    sink.append(*IMAGES[2])
    sink.truncate(1)
    for image in IMAGES[1:]:
        sink.append(*image)
    assert [a.to_pylist() for a in image_arrays(sink, TYPES)][0] == [
        '{"a":1}', None, '{"b":null,"c":"日本 😀"}', None]


def test_bool_columns_hold_values_and_nulls_apart() -> None:
    """silver.transactions.complete: True, False and NULL kept apart through more than a byte of
    bits, repeated rows and a row cut back by a later bad value, with and without the extension."""
    def fill(cols: TableColumns, native: bool) -> None:
        for i, complete in enumerate([True, False, None] * 4):
            values = {"start_pos": i, "events": 1, "row_changes": 0, "statements": [], "tables": [],
                      "gtid_kind": "NONE", "kind": "EMPTY", "complete": complete}
            cols.repeated(2 if i % 5 == 0 else 1, *(values.get(c) for c in cols.row_columns))
            if native and i == 7:
                with pytest.raises(TypeError, match="silver.transactions.kind"):
                    cols.row(*(dict(values, kind=1).get(c) for c in cols.row_columns))

    from binlake.ingest.columns import NotNullError

    if not _native.use_native(None):
        pytest.skip("compiled extension not built")
    for enabled in (True, False):
        with native_extension(enabled):
            cols = TableColumns("silver.transactions", {"source": "s", "file": "f", "file_seq": 1})
            fill(cols, enabled)
            # the column is NOT NULL in the table: a batch with its NULLs is refused, by name
            with pytest.raises(NotNullError, match=r"NOT NULL column\(s\) complete of a batch of 15 rows"):
                cols.take_batch()
            fill(cols, enabled)
            complete = dict(zip(cols.row_columns, cols.row_buffer.take(), strict=True))["complete"]
            assert array_from_parts(complete, pa.bool_()).to_pylist() == [
                True, True, False, None, True, False, None, None, True, False, None, True, False, False, None]


def test_utc_dates_are_arrows_own_cast_to_date32() -> None:
    """The batches' date columns (``event_date``, ``commit_date``) are the days since 1970 of
    their UTC timestamps, as Arrow's cast through the time zone gives them: at midnight and one
    microsecond before, NULLs, and the last second a TIMESTAMP holds."""
    micros = [0, 86_399_999_999, 86_400_000_000, None, 1_700_000_000_123_456, 253_402_300_799_000_000]
    ts = pa.array(micros, pa.timestamp("us", tz="UTC"))
    got = utc_dates(ts)
    assert got.type == pa.date32() and got.equals(ts.cast(pa.date32()))
    assert got.to_pylist()[:3] == [dt.date(1970, 1, 1), dt.date(1970, 1, 1), dt.date(1970, 1, 2)]
    assert got.to_pylist()[3:] == [None, dt.date(2023, 11, 14), dt.date(9999, 12, 31)]
    sliced = ts.slice(2)  # its bitmap starts two bits in
    assert utc_dates(sliced).equals(sliced.cast(pa.date32())) and utc_dates(sliced).to_pylist()[1] is None
