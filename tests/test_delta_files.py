"""binlake.lake.delta_files: Spark's partition folders, and Delta statistics of a Parquet file binlake
writes itself, checked against the statistics Spark Delta writes for the same rows."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from binlake.lake.delta_files import (
    NULL_PARTITION,
    STATS_STRING_PREFIX,
    FileStats,
    partition_folder,
    partition_text,
)

UTC = dt.UTC
LONG = "x" * (STATS_STRING_PREFIX + 8)
SCHEMA = pa.schema([
    pa.field("file", pa.string(), nullable=False),
    pa.field("pos", pa.int64()),
    pa.field("n", pa.int32()),
    pa.field("flag", pa.bool_()),
    pa.field("at", pa.timestamp("us", tz="UTC")),
    pa.field("day", pa.date32()),
    pa.field("sql", pa.string()),
    pa.field("before", pa.map_(pa.string(), pa.string())),
    pa.field("gone", pa.string()),
])
GROUPS = [
    {"file": ["binlog.000002", "binlog.000001"], "pos": [4, 900], "n": [7, None], "flag": [True, False],
     "at": [dt.datetime(2024, 5, 1, 10, 0, 0, 123456, tzinfo=UTC), None],
     "day": [dt.date(2024, 5, 1), dt.date(2024, 4, 30)], "sql": ["BEGIN", LONG],
     "before": [[("id", "1")], None], "gone": [None, None]},
    {"file": ["binlog.000003"], "pos": [120], "n": [-3], "flag": [None],
     "at": [dt.datetime(2024, 5, 2, 23, 59, 59, 999001, tzinfo=UTC)], "day": [None], "sql": ["COMMIT"],
     "before": [None], "gone": [None]},
]


def _written(tmp_path: Path) -> tuple[Path, FileStats, Any]:
    path = tmp_path / "part.parquet"
    stats = FileStats(SCHEMA)
    with pq.ParquetWriter(path, SCHEMA) as writer:
        for group in GROUPS:
            table = pa.table(group, schema=SCHEMA)
            writer.write_table(table)
            stats.note(table)
    return path, stats, pq.read_metadata(path)


def test_partition_folders_are_spelled_as_spark_names_them() -> None:
    assert partition_folder(["source", "event_date"], {"source": "maria", "event_date": "2024-05-01"}) == (
        "source=maria/event_date=2024-05-01")
    assert partition_folder(["source", "d"], {"source": "a:b/c=d%", "d": None}) == (
        f"source=a%3Ab%2Fc%3Dd%25/d={NULL_PARTITION}")
    assert partition_text(dt.date(2024, 5, 1)) == "2024-05-01" and partition_text(None) is None
    assert partition_text("db-1") == "db-1"


def test_stats_count_rows_and_nulls_and_bound_each_flat_column(tmp_path: Path) -> None:
    _, stats, metadata = _written(tmp_path)
    assert json.loads(stats.to_json(metadata)) == {
        "numRecords": 3,
        "minValues": {"file": "binlog.000001", "pos": 4, "n": -3, "at": "2024-05-01T10:00:00.123Z",
                      "day": "2024-04-30", "sql": "BEGIN"},
        # the long string's maximum and the booleans have no bound; timestamps are ceiled to the
        # millisecond for a maximum (...59.999001 -> 2024-05-03 00:00:00.000)
        "maxValues": {"file": "binlog.000003", "pos": 900, "n": 7, "at": "2024-05-03T00:00:00.000Z",
                      "day": "2024-05-01"},
        "nullCount": {"file": 0, "pos": 0, "n": 1, "flag": 1, "at": 1, "day": 1, "sql": 0, "before": 2,
                      "gone": 3},
    }


def test_a_long_string_minimum_is_its_prefix(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("sql", pa.string())])
    stats = FileStats(schema)
    path = tmp_path / "p.parquet"
    table = pa.table({"sql": [LONG + "b", LONG + "a"]}, schema=schema)
    pq.write_table(table, path)
    stats.note(table)
    got = json.loads(stats.to_json(pq.read_metadata(path)))
    assert got["minValues"] == {"sql": LONG[:STATS_STRING_PREFIX]} and got["maxValues"] == {}


def test_our_stats_are_bounds_spark_delta_agrees_with(spark: Any, tmp_path: Path) -> None:
    """The same rows written by Spark Delta: every bound we give equals Spark's (the timestamp
    maximum: Spark's or the next millisecond), and the row and NULL counts are Spark's."""
    _, stats, metadata = _written(tmp_path)
    ours = json.loads(stats.to_json(metadata))
    rows = pa.concat_tables(pa.table(g, schema=SCHEMA) for g in GROUPS).to_pylist()
    location = str(tmp_path / "spark")
    spark_schema = ("file STRING NOT NULL, pos BIGINT, n INT, flag BOOLEAN, at TIMESTAMP, day DATE, sql STRING, "
                    "before MAP<STRING, STRING>, gone STRING")
    for r in rows:
        r["before"] = dict(r["before"]) if r["before"] is not None else None
    (spark.createDataFrame(rows, spark_schema).coalesce(1).write.format("delta").save(location))
    log = (Path(location) / "_delta_log" / "00000000000000000000.json").read_text().splitlines()
    (add,) = [json.loads(line)["add"] for line in log if '"add"' in line]
    theirs = json.loads(add["stats"])
    assert ours["numRecords"] == theirs["numRecords"] and ours["nullCount"] == theirs["nullCount"]
    assert {k: v for k, v in theirs["minValues"].items() if k in ours["minValues"]} == ours["minValues"]
    their_max = {k: v for k, v in theirs["maxValues"].items() if k in ours["maxValues"]}
    assert their_max.pop("at") == "2024-05-02T23:59:59.999Z"
    assert their_max == {k: v for k, v in ours["maxValues"].items() if k != "at"}
    # what we leave out, Spark keeps: the long string's maximum (cut, with a tie-breaking character)
    assert set(theirs["maxValues"]) - set(ours["maxValues"]) == {"sql"}


def test_stats_on_the_tables_stats_columns_only(tmp_path: Path) -> None:
    """A table with ``delta.dataSkippingStatsColumns``: statistics on those columns, whatever their place."""
    _, _, metadata = _written(tmp_path)
    stats = FileStats(SCHEMA, ["day", "file", "before"])
    for group in GROUPS:
        stats.note(pa.table(group, schema=SCHEMA))
    assert json.loads(stats.to_json(metadata)) == {
        "numRecords": 3, "minValues": {"file": "binlog.000001", "day": "2024-04-30"},
        "maxValues": {"file": "binlog.000003", "day": "2024-05-01"}, "nullCount": {"file": 0, "day": 1, "before": 2}}
