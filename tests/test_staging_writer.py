"""binlake.ingest.parquet_parts: a task's batches as Parquet parts, deterministic names, put whole."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from binlake.config import S3Settings
from binlake.ingest.parquet_parts import DirectTable, PartWriter, TaskStaging, split_by_partition, staging_store
from binlake.lake.storage import LocalObjectStore, S3ObjectStore

SCHEMA = pa.schema([pa.field("pos", pa.int64()), pa.field("sql", pa.string())])


def _batch(start: int, n: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"pos": list(range(start, start + n)),
                                       "sql": [f"statement {i} " + "x" * 40 for i in range(start, start + n)]},
                                      schema=SCHEMA)


def _write(store: Any, task: int) -> dict[str, list[str]]:
    staging = TaskStaging(store, task, part_bytes=4_000, group_rows=100)
    for start in range(0, 1000, 50):
        staging.write("statements", _batch(start, 50))
    staging.write("events", _batch(0, 3))
    return staging.close()


def test_parts_hold_every_row_once_in_order_with_deterministic_names(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "ingest-r1")
    parts = _write(store, 7)
    names = parts["statements"]
    assert names == [f"statements/part-00007-{n:04d}.parquet" for n in range(len(names))] and len(names) > 2
    assert parts["events"] == ["events/part-00007-0000.parquet"]
    table = pa.concat_tables(pq.read_table(tmp_path / "ingest-r1" / n) for n in names)
    assert table.schema == SCHEMA and table.column("pos").to_pylist() == list(range(1000))
    # row groups of ~group_rows rows, whatever the batches' size
    assert {pq.ParquetFile(tmp_path / "ingest-r1" / n).metadata.row_group(0).num_rows for n in names} == {100}
    # a retried task writes the same parts again: overwritten, nothing added, no temporary left
    before = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert _write(store, 7) == parts
    after = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert after == before and not [p for p in after if "tmp" in p]


def test_a_writer_without_rows_writes_nothing(tmp_path: Path) -> None:
    writer = PartWriter(LocalObjectStore(tmp_path), "quarantine", 0, SCHEMA)
    assert writer.close() == [] and list(tmp_path.iterdir()) == []


def test_s3_parts_are_single_puts(s3_server: Any, s3_bucket: str, s3_client: Any) -> None:
    settings = {"endpoint_url": s3_server.endpoint_url, "path_style_access": True, "max_attempts": 3}
    store = staging_store(f"s3a://{s3_bucket}/wh/_staging/ingest-r1", settings)
    assert isinstance(store, S3ObjectStore) and store.settings == S3Settings(**settings)
    # one S3 client per process and settings, whatever the run
    assert staging_store(f"s3a://{s3_bucket}/wh/_staging/ingest-r2", dict(settings)).client is store.client
    calls: list[str] = []
    store.client.meta.events.register("before-call.s3", lambda model, **_: calls.append(model.name))
    parts = _write(store, 3)
    keys = sorted(o["Key"] for o in s3_client.list_objects_v2(Bucket=s3_bucket)["Contents"])
    assert keys == sorted(f"wh/_staging/ingest-r1/{n}" for names in parts.values() for n in names)
    n_parts = sum(len(v) for v in parts.values())
    assert calls.count("PutObject") == n_parts and "CreateMultipartUpload" not in calls
    body = s3_client.get_object(Bucket=s3_bucket, Key=f"wh/_staging/ingest-r1/{parts['events'][0]}")["Body"].read()
    assert pq.read_table(pa.BufferReader(body)).column("pos").to_pylist() == [0, 1, 2]


DATED = pa.schema([pa.field("source", pa.string()), pa.field("pos", pa.int64()), pa.field("day", pa.date32())])


def _dated(source: str, days: list[dt.date | None], start: int = 0) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"source": [source] * len(days), "pos": list(range(start, start + len(days))),
                                       "day": days}, schema=DATED)


def test_split_by_partition_keeps_row_order_and_drops_the_partition_columns() -> None:
    d1, d2 = dt.date(2024, 5, 1), dt.date(2024, 5, 2)
    (only,) = split_by_partition(_dated("a", [d1, d1]), ["source", "day"])
    assert only[0] == {"source": "a", "day": "2024-05-01"} and only[1].schema.names == ["pos"]
    got = {tuple(v.values()): b.column("pos").to_pylist()
           for v, b in split_by_partition(_dated("a", [d2, d1, None, d2, d1]), ["source", "day"])}
    assert got == {("a", "2024-05-02"): [0, 3], ("a", "2024-05-01"): [1, 4], ("a", None): [2]}
    both = pa.concat_batches([_dated("a", [d1, d2]), _dated("b", [d1], start=2)])  # two columns vary
    got = {tuple(v.values()): b.column("pos").to_pylist() for v, b in split_by_partition(both, ["source", "day"])}
    assert got == {("a", "2024-05-01"): [0], ("a", "2024-05-02"): [1], ("b", "2024-05-01"): [2]}


def test_a_batch_of_one_partition_is_found_by_its_bounds() -> None:
    """One value in every partition column (a dictionary's indices all one word, a NULL-only
    column) is one partition without grouping. Indices of two entries that spell the same word
    go the grouping way and are still one word (before, one partition per entry: every row
    twice); a NULL beside a value is a partition of its own."""
    d1 = dt.date(2024, 5, 1)
    day = pa.array([d1, d1, d1], pa.date32())
    for source, days, want in (
            (pa.DictionaryArray.from_arrays(pa.array([1, 1, 1], pa.int32()), pa.array(["b", "a"])), day,
             [({"source": "a", "day": "2024-05-01"}, [0, 1, 2])]),
            (pa.DictionaryArray.from_arrays(pa.array([0, 1, 0], pa.int32()), pa.array(["a", "a"])), day,
             [({"source": "a", "day": "2024-05-01"}, [0, 1, 2])]),
            (pa.DictionaryArray.from_arrays(pa.array([0, 0, 0], pa.int32()), pa.array(["a"])),
             pa.array([None, None, None], pa.date32()), [({"source": "a", "day": None}, [0, 1, 2])]),
            (pa.DictionaryArray.from_arrays(pa.array([0, 0, 0], pa.int32()), pa.array(["a"])),
             pa.array([None, d1, None], pa.date32()),
             [({"source": "a", "day": None}, [0, 2]), ({"source": "a", "day": "2024-05-01"}, [1])]),
            (pa.DictionaryArray.from_arrays(pa.array([0, 1, 0], pa.int32()), pa.array(["a", "a"])),
             pa.array([d1, None, d1], pa.date32()),
             [({"source": "a", "day": "2024-05-01"}, [0, 2]), ({"source": "a", "day": None}, [1])])):
        batch = pa.RecordBatch.from_arrays([pa.array([0, 1, 2], pa.int64()), source, days], ["pos", "source", "day"])
        got = [(values, part.column("pos").to_pylist()) for values, part in split_by_partition(batch, ["source", "day"])]
        assert sorted(got, key=lambda g: g[1]) == want


def test_a_direct_table_gets_data_files_in_partition_folders_with_stats(tmp_path: Path) -> None:
    """A direct kind's rows go to its table's folder, a file per partition, named by task and a
    token of the attempt (a retry writes new names: the failed attempt's files are never
    committed); the staged kinds are staged as before."""
    d1, d2 = dt.date(2024, 5, 1), dt.date(2024, 5, 2)
    table = tmp_path / "wh" / "silver" / "statements"
    staging = TaskStaging(LocalObjectStore(tmp_path / "ingest-r1"), 3,
                          direct={"statements": DirectTable(str(table), ("source", "day"))})
    staging.write("statements", _dated("a", [d1, d2, d1]))
    staging.write("statements", _dated("a", [d2], start=3))
    staging.write("events", _batch(0, 3))
    assert staging.close() == {"events": ["events/part-00003-0000.parquet"]}
    files = sorted(staging.close_files()["statements"], key=lambda f: f.path)
    assert [re.sub(r"-[0-9a-f]{12}\.", "-T.", f.path) for f in files] == [
        "source=a/day=2024-05-01/part-00003-0000-T.snappy.parquet",
        "source=a/day=2024-05-02/part-00003-0000-T.snappy.parquet"]
    assert [f.partition_values for f in files] == [{"source": "a", "day": "2024-05-01"},
                                                   {"source": "a", "day": "2024-05-02"}]
    assert [pq.read_table(table / f.path).to_pydict() for f in files] == [{"pos": [0, 2]}, {"pos": [1, 3]}]
    assert [f.size for f in files] == [(table / f.path).stat().st_size for f in files]
    assert [json.loads(f.stats) for f in files] == [
        {"numRecords": 2, "minValues": {"pos": 0}, "maxValues": {"pos": 2}, "nullCount": {"pos": 0}},
        {"numRecords": 2, "minValues": {"pos": 1}, "maxValues": {"pos": 3}, "nullCount": {"pos": 0}}]
    # a second attempt of the task: other names, the first attempt's files untouched
    again = TaskStaging(LocalObjectStore(tmp_path / "ingest-r1"), 3,
                        direct={"statements": DirectTable(str(table), ("source", "day"))})
    again.write("statements", _dated("a", [d1]))
    (retry,) = again.close_files()["statements"]
    assert retry.path not in {f.path for f in files} and all((table / f.path).exists() for f in files)


def test_many_open_partitions_put_their_files_early(tmp_path: Path) -> None:
    """A task whose rows span many dates holds at most about two parts' worth of Parquet bytes:
    past it the fullest file is put (a smaller file), and no row is lost."""
    table = tmp_path / "t"
    staging = TaskStaging(LocalObjectStore(tmp_path / "s"), 0, direct={"statements": DirectTable(str(table),
                          ("source", "day"))}, part_bytes=3_000, group_rows=10)
    days = [dt.date(2024, 1, 1) + dt.timedelta(days=i % 20) for i in range(2000)]
    for start in range(0, 2000, 100):
        staging.write("statements", _dated("a", days[start:start + 100], start))
        assert sum(w.buffered_bytes for w in staging.file_writers.values()) <= 2 * 3_000 + 3_000
    files = staging.close_files()["statements"]
    assert len(files) > 20
    rows = sorted(p for f in files for p in pq.read_table(table / f.path).column("pos").to_pylist())
    assert rows == list(range(2000))


def test_only_short_repeated_strings_get_a_parquet_dictionary(tmp_path: Path) -> None:
    """Names, kinds and map keys are dictionary-encoded; free text (JSON, SQL, the row images'
    JSON), map values and numbers are not (a dictionary tried on every value cost a sixth of the
    Parquet writing)."""
    schema = pa.schema([("pos", pa.int64()), ("db", pa.string()), ("sql", pa.string()),
                        ("tags", pa.map_(pa.string(), pa.string())), ("after", pa.string())])
    rows = {"pos": list(range(200)), "db": ["shop"] * 200, "sql": ["INSERT INTO t VALUES (1)"] * 200,
            "tags": [[("k", str(i))] for i in range(200)], "after": ['{"id":1}'] * 200}
    writer = PartWriter(LocalObjectStore(tmp_path), "row_changes", 0, schema)
    writer.write(pa.RecordBatch.from_pydict(rows, schema=schema))
    (name,) = writer.close()
    group = pq.ParquetFile(tmp_path / name).metadata.row_group(0)
    encoded = {group.column(i).path_in_schema: "RLE_DICTIONARY" in group.column(i).encodings
               for i in range(group.num_columns)}
    assert encoded == {"pos": False, "db": True, "sql": False, "tags.key_value.key": True,
                       "tags.key_value.value": False, "after": False}
    assert pq.read_table(tmp_path / name).to_pydict() == rows
