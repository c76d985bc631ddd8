"""Executor side of the ingest staging: each table's Arrow batches as Parquet part files.

Why the executors write Parquet themselves: the decode step used to hand its rows to Spark
(``mapInArrow``) as one wide batch type with a struct column per table, which Spark wrote as
staging Parquet and then scanned once per table. Written here, each table's rows cross into the
JVM once, when the driver's Spark job reads that table's parts to write it to Delta; only the
small per-range facts travel back through Spark.

Layout and names are :mod:`binlake.staging`'s (``<kind>/part-<task>-<n>.parquet`` under the
run's folder): deterministic, so a retried Spark task overwrites its parts instead of adding to
them. Each part is written whole through :mod:`binlake.storage`'s object store: a temporary
file renamed into place in a local folder, a single PUT on S3. Nothing here holds a driver-side
object: the task gets the staging folder as a string and the S3 settings as a plain dict.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from binlake.staging import part_name
from binlake.storage import ObjectStore

#: a part is closed (and put) once its Parquet bytes reach this size
PART_BYTES = 32 << 20
#: rows gathered before they are written as one Parquet row group
GROUP_ROWS = 64 * 1024

_S3_CLIENTS: dict[str, Any] = {}


def staging_store(folder: str, s3: Mapping[str, Any] | None) -> ObjectStore:
    """The object store of a run's staging folder; on S3 with one client per process and
    settings (a boto3 client is costly, and a Python worker serves many tasks and runs)."""
    from binlake.config import S3Settings, is_s3_uri
    from binlake.storage import LocalObjectStore, S3ObjectStore, make_s3_client

    if not is_s3_uri(folder):
        return LocalObjectStore(folder)
    settings = S3Settings(**(s3 or {}))
    key = json.dumps(s3 or {}, sort_keys=True)
    client = _S3_CLIENTS.get(key)
    if client is None:
        client = _S3_CLIENTS[key] = make_s3_client(settings)
    return S3ObjectStore(folder.rstrip("/") + "/", settings, client=client)


class PartWriter:
    """One table's parts of one task: batches gathered into row groups, a part put whole when it
    reaches ``part_bytes``."""

    def __init__(self, store: ObjectStore, kind: str, task: int, schema: Any, *,
                 part_bytes: int = PART_BYTES, group_rows: int = GROUP_ROWS) -> None:
        self.store, self.kind, self.task, self.schema = store, kind, task, schema
        self.part_bytes, self.group_rows = part_bytes, group_rows
        self.names: list[str] = []
        self.rows = 0
        self._pending: list[Any] = []
        self._pending_rows = 0
        self._sink: Any = None
        self._writer: Any = None

    def write(self, batch: Any) -> None:
        self._pending.append(batch)
        self._pending_rows += batch.num_rows
        self.rows += batch.num_rows
        if self._pending_rows >= self.group_rows:
            self._write_group()

    def close(self) -> list[str]:
        """Write what is left; the names of the parts written (relative to the staging folder)."""
        if self._pending_rows:
            self._write_group()
        if self._writer is not None:
            self._put_part()
        return self.names

    def _write_group(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if self._writer is None:
            self._sink = pa.BufferOutputStream()
            self._writer = pq.ParquetWriter(self._sink, self.schema)
        self._writer.write_table(pa.Table.from_batches(self._pending, schema=self.schema))
        self._pending, self._pending_rows = [], 0
        if self._sink.tell() >= self.part_bytes:
            self._put_part()

    def _put_part(self) -> None:
        self._writer.close()
        name = part_name(self.kind, self.task, len(self.names))
        self.store.put(name, self._sink.getvalue().to_pybytes())
        self.names.append(name)
        self._writer = self._sink = None


class TaskStaging:
    """The part writers of one ingest task, one per table kind, made as batches arrive."""

    def __init__(self, store: ObjectStore, task: int, **part_options: int) -> None:
        self.store, self.task, self.part_options = store, task, part_options
        self.writers: dict[str, PartWriter] = {}

    def write(self, kind: str, batch: Any) -> None:
        writer = self.writers.get(kind)
        if writer is None:
            writer = self.writers[kind] = PartWriter(self.store, kind, self.task, batch.schema,
                                                     **self.part_options)
        writer.write(batch)

    def close(self) -> dict[str, list[str]]:
        """Kind -> the names of its parts."""
        return {kind: w.close() for kind, w in self.writers.items()}
