"""spark_jobs.columns: per-column buffers -> one Arrow batch in a table's schema."""

from __future__ import annotations

import datetime as dt

import pytest

from spark_jobs.columns import MapColumn, TableColumns
from spark_jobs.schemas import spec

UTC = dt.UTC
US = 1_000_000


def _statement(cols: TableColumns, pos: int, event_us: int | None, sql: str) -> None:
    s = cols.add
    for name, value in (("pos", pos), ("payload_index", None), ("gtid", "u:1"), ("trx_pos", 4),
                        ("event_time", event_us), ("server_id", 7), ("db", "shop"), ("sql", sql),
                        ("kind", "DDL"), ("thread_id", 9), ("exec_time", 0), ("error_code", 0),
                        ("status_vars", None), ("event_type", "QUERY")):
        getattr(s, name)(value)


def test_a_batch_has_the_tables_schema_constants_and_dates() -> None:
    cols = TableColumns("silver.statements", {"source": "s", "file": "binlog.000002", "file_seq": 2})
    _statement(cols, 120, 86_400 * US + 5, "CREATE TABLE t (a INT)")
    _statement(cols, 300, None, "DROP TABLE t")
    assert len(cols) == 2
    batch = cols.take_batch()
    assert batch.schema == spec("silver.statements").arrow_schema
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


def test_a_date_is_the_first_non_null_of_its_timestamps() -> None:
    """silver.transactions.commit_date: of commit_time, else of begin_time."""
    cols = TableColumns("silver.transactions", {"source": "s", "file": "f", "file_seq": None})
    for commit_us, begin_us in ((None, 3 * 86_400 * US), (86_400 * US, 0), (None, None)):
        for c in cols.buffers:
            getattr(cols.add, c)({"commit_time": commit_us, "begin_time": begin_us, "statements": [],
                                  "tables": []}.get(c))
    days = [r["commit_date"] for r in cols.take_batch().to_pylist()]
    assert days == [dt.date(1970, 1, 4), dt.date(1970, 1, 2), None]


def test_group_columns_are_appended_once_per_group_and_maps_flat() -> None:
    """row_changes: an event's columns once, each row's image per row; NULL maps and absent keys kept."""
    cols = TableColumns("silver.row_changes", {"source": "s", "file": "f", "file_seq": 1},
                        group_columns=("pos", "payload_index", "gtid", "trx_pos", "commit_time", "event_time",
                                       "server_id", "db", "table_name", "operation", "event_type"),
                        map_columns=("before", "after"))
    r = cols.add
    for pos, op, images in ((10, "insert", [(None, {"id": "1", "n": None})]),
                            (20, "update", [({"id": "1"}, {"id": "2"}), ({"id": "5"}, {"id": "6", "x": "y"})]),
                            (30, "delete", [])):
        for name, value in (("pos", pos), ("payload_index", None), ("gtid", None), ("trx_pos", 4),
                            ("event_time", pos * US), ("server_id", 1), ("db", "d"), ("table_name", "t"),
                            ("operation", op), ("event_type", "X")):
            getattr(r, name)(value)
        for i, (before, after) in enumerate(images):
            r.row_index(i)
            r.before(before)
            r.after(after)
            r.before_json(None)
            r.after_json("{}")
        cols.end_group(len(images))
    with pytest.raises(ValueError, match="unequal length"):  # commit times not given yet
        cols.take_batch()
    for _group in range(3):
        r.commit_time(100 * US)
    rows = cols.take_batch().to_pylist()
    assert [(x["pos"], x["operation"], x["row_index"], x["before"], x["after"]) for x in rows] == [
        (10, "insert", 0, None, [("id", "1"), ("n", None)]),
        (20, "update", 0, [("id", "1")], [("id", "2")]),
        (20, "update", 1, [("id", "5")], [("id", "6"), ("x", "y")])]
    assert {x["commit_date"] for x in rows} == {dt.date(1970, 1, 1)} and rows[1]["event_time"].second == 20


def test_map_column_alone() -> None:
    import pyarrow as pa

    m = MapColumn()
    for image in ({"a": "1"}, None, {}, {"b": None, "c": "3"}):
        m.append(image)
    arr = m.array(pa.map_(pa.string(), pa.string()))
    assert arr.to_pylist() == [[("a", "1")], None, [], [("b", None), ("c", "3")]] and len(m) == 4
    m.clear()
    assert len(m) == 0 and m.array(arr.type).to_pylist() == []


def test_map_column_extend_is_appends() -> None:
    """A rows event's images in one ``extend`` make the rows one ``append`` each makes."""
    import pyarrow as pa

    images = [{"a": "1"}, None, {}, {"b": None, "c": "3"}]
    one, many = MapColumn(), MapColumn()
    one.append({"z": "0"})
    many.append({"z": "0"})
    for image in images:
        one.append(image)
    many.extend(images)
    assert (many.keys, many.values, many.offsets, many.nulls) == (one.keys, one.values, one.offsets, one.nulls)
    assert many.offsets == [0, 1, 2, 2, 2, 4]
    assert many.array(pa.map_(pa.string(), pa.string())).to_pylist() == [
        [("z", "0")], [("a", "1")], None, [], [("b", None), ("c", "3")]]
