"""spark_jobs.staging_writer: a task's batches as Parquet parts, deterministic names, put whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from binlake.config import S3Settings
from binlake.storage import LocalObjectStore, S3ObjectStore
from spark_jobs.staging_writer import PartWriter, TaskStaging, staging_store

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
