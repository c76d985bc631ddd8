"""Executor side of the ingest staging: each table's Arrow batches as Parquet part files.

Why the executors write Parquet themselves: the decode step used to hand its rows to Spark
(``mapInArrow``) as one wide batch type with a struct column per table, which Spark wrote as
staging Parquet and then scanned once per table. Written here, each table's rows cross into the
JVM once, when the driver's Spark job reads that table's parts to write it to Delta; only the
small per-range facts travel back through Spark.

Layout and names are :mod:`binlake.ingest.staging`'s (``<kind>/part-<task>-<n>.parquet`` under the
run's folder): deterministic, so a retried Spark task overwrites its parts instead of adding to
them. Each part is written whole through :mod:`binlake.lake.storage`'s object store: a temporary
file renamed into place in a local folder, a single PUT on S3. Nothing here holds a driver-side
object: the task gets the staging folder as a string and the S3 settings as a plain dict.

A table the driver names in :class:`DirectTable` (one holding no rows of the run's files) gets
no staging parts: its rows are written straight into the table's folder as Delta data files
(:class:`DataFileWriter`: Spark's partition folders, stats for the ``add`` action), which the
driver commits as they are (:func:`binlake.lake.delta_tables.append_files`). Their names end in a
token of the task attempt: a failed attempt's files are never committed, so they must not be
overwritten by a retry's files that are (they stay as uncommitted files until ``VACUUM``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from binlake.ingest.staging import part_name
from binlake.lake.delta_files import DataFile, FileStats, partition_folder, partition_text
from binlake.lake.storage import ObjectStore

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

#: a part is closed (and put) once its Parquet bytes reach this size
PART_BYTES = 32 << 20
#: rows gathered before they are written as one Parquet row group
GROUP_ROWS = 64 * 1024
#: parts' worth of Parquet bytes a task's data-file writers (one per table and partition) may hold
#: at once: past it, the fullest is put early, so a file spanning many dates cannot make a task
#: hold its whole output
OPEN_FILES_PARTS = 2

#: rows the Parquet writer encodes at a time (Arrow's default: 1024). Its levels, dictionary and
#: page checks go batch by batch, so larger batches cost less CPU for the same bytes (pages are
#: still cut at their size and row count; bench/HISTORY.md).
WRITE_BATCH_ROWS = 8192

#: the string columns that hold free text (JSON, SQL, messages, the row images' JSON): no
#: Parquet dictionary for them, nor for any non-string column. A dictionary pays off
#: for short repeated strings (names, kinds, GTIDs); tried on every value, it
#: cost a sixth of a task's Parquet writing for files barely smaller (bench/HISTORY.md).
FREE_TEXT_COLUMNS = frozenset({"fields", "sql", "status_vars", "error_message", "before", "after"})


def dictionary_columns(schema: pa.Schema) -> list[str]:
    """The Parquet column paths of ``schema`` written with a dictionary: plain string columns
    but :data:`FREE_TEXT_COLUMNS`, Arrow dictionary columns, and the keys of map columns."""
    import pyarrow as pa

    paths = []
    for field in schema:
        if pa.types.is_map(field.type):
            paths.append(f"{field.name}.key_value.key")
        elif pa.types.is_dictionary(field.type) or (pa.types.is_string(field.type)
                                                    and field.name not in FREE_TEXT_COLUMNS):
            paths.append(field.name)
    return paths


def staging_store(folder: str, s3: Mapping[str, Any] | None) -> ObjectStore:
    """The object store of a run's staging folder (on S3 with the process's shared client for the
    settings, :func:`binlake.lake.storage.make_s3_client`: a Python worker serves many tasks and runs)."""
    from binlake.config import S3Settings, is_s3_uri
    from binlake.lake.storage import LocalObjectStore, S3ObjectStore

    if not is_s3_uri(folder):
        return LocalObjectStore(folder)
    return S3ObjectStore(folder.rstrip("/") + "/", S3Settings(**(s3 or {})))


class PartWriter:
    """One table's parts of one task: batches gathered into row groups, a part put whole when it
    reaches ``part_bytes``."""

    def __init__(self, store: ObjectStore, kind: str, task: int, schema: pa.Schema, *,
                 part_bytes: int = PART_BYTES, group_rows: int = GROUP_ROWS) -> None:
        self.store, self.kind, self.task, self.schema = store, kind, task, schema
        self.part_bytes, self.group_rows = part_bytes, group_rows
        self.names: list[str] = []
        self.rows = 0
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        #: the part being written: its buffer and the Parquet writer into it (None: none open)
        self._open: tuple[pa.BufferOutputStream, pq.ParquetWriter] | None = None

    def write(self, batch: pa.RecordBatch) -> None:
        self._pending.append(batch)
        self._pending_rows += batch.num_rows
        self.rows += batch.num_rows
        if self._pending_rows >= self.group_rows:
            self._write_group()

    @property
    def buffered_bytes(self) -> int:
        """Parquet bytes of the part being written, not yet put."""
        return self._open[0].tell() if self._open is not None else 0

    def put_now(self) -> None:
        """Put the part being written now (a smaller part), pending rows included."""
        if self._pending_rows:
            self._write_group()
        self._put_part()

    def close(self) -> list[str]:
        """Write what is left; the names of the parts written (relative to the staging folder)."""
        if self._pending_rows:
            self._write_group()
        self._put_part()
        return self.names

    def _write_group(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if self._open is None:
            sink = pa.BufferOutputStream()
            # store_schema=False: no Arrow schema in the footer, as in the files Spark writes.
            # It would name the batches' dictionary types, which Arrow-based readers (delta-rs,
            # pyarrow) then give back instead of the plain strings the Parquet schema holds.
            self._open = (sink, pq.ParquetWriter(sink, self.schema, write_statistics=self._statistics(),
                                                 use_dictionary=dictionary_columns(self.schema),
                                                 write_batch_size=WRITE_BATCH_ROWS, store_schema=False))
        sink, writer = self._open
        # one dictionary per column of a row group: Parquet writes a column chunk whose pieces
        # have different dictionaries as plain values, larger
        group = pa.Table.from_batches(self._pending, schema=self.schema).unify_dictionaries()
        writer.write_table(group)
        self._wrote(group)
        self._pending, self._pending_rows = [], 0
        if sink.tell() >= self.part_bytes:
            self._put_part()

    def _put_part(self) -> None:
        """Put the open part whole (none open: nothing)."""
        if self._open is None:
            return
        sink, writer = self._open
        writer.close()
        name = self._name(len(self.names))
        data = sink.getvalue().to_pybytes()
        self.store.put(name, data)
        self.names.append(name)
        self._put(name, data, writer.writer.metadata)
        self._open = None

    def _name(self, n: int) -> str:
        return part_name(self.kind, self.task, n)

    def _statistics(self) -> bool | list[str]:
        """Which columns get Parquet min/max statistics: none in a staging part, which Spark
        reads whole once (computing them is a tenth of a part's write)."""
        return False

    def _wrote(self, group: pa.Table) -> None:
        """Hook: a row group was written."""

    def _put(self, name: str, data: bytes, metadata: pq.FileMetaData) -> None:
        """Hook: a part was put (its Parquet footer ``metadata``)."""


class DataFileWriter(PartWriter):
    """One partition's rows of one table and task, written as Delta data files into the table's
    folder (``store``): the partition columns left out, stats gathered for the ``add`` action."""

    def __init__(self, store: ObjectStore, kind: str, task: int, schema: pa.Schema, *, folder: str,
                 partition_values: Mapping[str, str | None], token: str,
                 stats_columns: Sequence[str] | None = None, **part_options: int) -> None:
        super().__init__(store, kind, task, schema, **part_options)
        self.folder, self.partition_values, self.token = folder, dict(partition_values), token
        self.stats_columns = stats_columns
        self.files: list[DataFile] = []
        self._stats = FileStats(schema, stats_columns)

    def _name(self, n: int) -> str:
        return f"{self.folder}/part-{self.task:05d}-{n:04d}-{self.token}.snappy.parquet"

    def _statistics(self) -> bool | list[str]:
        """The Delta stats columns (their bounds come from the footer) and every column of a
        fixed-width type (cheap, and what Spark's row-group filters use); not the other text,
        binary and nested columns (``fields`` JSON, row images, SQL), whose min/max no reader
        uses and which cost most of the statistics' CPU."""
        import pyarrow as pa

        def text_or_nested(t: pa.DataType) -> bool:  # a dictionary of strings is text too
            t = t.value_type if pa.types.is_dictionary(t) else t
            return pa.types.is_nested(t) or pa.types.is_string(t) or pa.types.is_binary(t)

        wanted = set(self._stats.columns)
        return [f.name for f in self.schema if f.name in wanted or not text_or_nested(f.type)]

    def _wrote(self, group: pa.Table) -> None:
        self._stats.note(group)

    def _put(self, name: str, data: bytes, metadata: pq.FileMetaData) -> None:
        self.files.append(DataFile(name, len(data), self.partition_values, self._stats.to_json(metadata)))
        self._stats = FileStats(self.schema, self.stats_columns)


@dataclass(frozen=True)
class DirectTable:
    """A table whose rows a task writes straight into its folder (see the module doc)."""

    location: str  # the table's folder: a local path or an s3:// URI
    partition_by: Sequence[str]
    #: the table's ``delta.dataSkippingStatsColumns`` (None: Delta's default, the first 32 columns)
    stats_columns: Sequence[str] | None = None


#: what :func:`_constant` answers for a column of more than one value
_VARIES = object()


def _constant(column: pa.Array) -> Any:
    """The one value of ``column`` (None for NULLs only), or :data:`_VARIES`. A scan for the
    least and greatest value (of a dictionary's indices) where ``pc.unique`` would hash every
    value (several times slower per batch: bench/HISTORY.md)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if column.null_count == len(column):
        return None
    if column.null_count:
        return _VARIES
    coded = pa.types.is_dictionary(column.type)
    low, high = pc.min_max(column.indices if coded else column).values()
    if low != high:
        return _VARIES
    return column.dictionary[low.as_py()].as_py() if coded else low.as_py()


def split_by_partition(batch: pa.RecordBatch, partition_by: Sequence[str]) -> list[tuple[dict[str, str | None], pa.RecordBatch]]:
    """``batch`` cut into one batch per distinct value of the partition columns, in row order
    within each, without the partition columns; with each one's ``partitionValues``. A
    dictionary column is compared by its words, so that two entries spelling one word are one
    partition."""
    import pyarrow as pa
    import pyarrow.compute as pc

    data = batch.drop_columns(list(partition_by))
    constants = [_constant(batch.column(c)) for c in partition_by]
    if all(c is not _VARIES for c in constants):  # nearly always: one source, one day
        return [({c: partition_text(v) for c, v in zip(partition_by, constants, strict=True)}, data)]
    varying = [c for c, v in zip(partition_by, constants, strict=True) if v is _VARIES]
    if len(varying) == 1:
        # the common case (one source, several dates): a mask per value of the one column that
        # varies, without grouping the batch
        fixed = {c: partition_text(v) for c, v in zip(partition_by, constants, strict=True) if v is not _VARIES}
        name, out = varying[0], []
        column = _decoded(batch.column(name))
        for value in pc.unique(column):
            mask = pc.is_null(column) if not value.is_valid else pc.fill_null(pc.equal(column, value), False)
            out.append(({**fixed, name: partition_text(value.as_py())}, data.filter(mask)))
        return [({c: values[c] for c in partition_by}, part) for values, part in out]
    columns = {c: _decoded(batch.column(c)) for c in partition_by}
    keys = pa.table(columns).group_by(list(partition_by)).aggregate([])
    out = []
    for key in keys.to_pylist():
        mask = None
        for c in partition_by:
            column = columns[c]
            test = pc.is_null(column) if key[c] is None else pc.fill_null(pc.equal(column, pa.scalar(
                key[c], column.type)), False)
            mask = test if mask is None else pc.and_(mask, test)
        out.append(({c: partition_text(key[c]) for c in partition_by}, data.filter(mask)))
    return out


def _decoded(column: pa.Array) -> pa.Array:
    """``column`` with a dictionary's indices replaced by the words they point at."""
    import pyarrow as pa

    return column.dictionary_decode() if pa.types.is_dictionary(column.type) else column


class TaskStaging:
    """The part writers of one ingest task, one per table kind, made as batches arrive; and the
    data-file writers of the kinds in ``direct``, one per partition (see the module doc)."""

    def __init__(self, store: ObjectStore, task: int, *, direct: Mapping[str, DirectTable] | None = None,
                 s3: Mapping[str, Any] | None = None, **part_options: int) -> None:
        self.store, self.task, self.part_options = store, task, part_options
        self.writers: dict[str, PartWriter] = {}
        self.direct = dict(direct or {})
        self.s3 = s3
        self.token = uuid.uuid4().hex[:12]
        self.file_writers: dict[tuple[str, tuple[str | None, ...]], DataFileWriter] = {}
        self._table_stores: dict[str, ObjectStore] = {}

    def write(self, kind: str, batch: pa.RecordBatch) -> None:
        target = self.direct.get(kind)
        if target is not None:
            self._write_files(kind, target, batch)
            return
        writer = self.writers.get(kind)
        if writer is None:
            writer = self.writers[kind] = PartWriter(self.store, kind, self.task, batch.schema,
                                                     **self.part_options)
        writer.write(batch)

    def _write_files(self, kind: str, target: DirectTable, batch: pa.RecordBatch) -> None:
        for values, rows in split_by_partition(batch, target.partition_by):
            key = (kind, tuple(values.values()))
            writer = self.file_writers.get(key)
            if writer is None:
                store = self._table_stores.get(kind)
                if store is None:
                    store = self._table_stores[kind] = staging_store(target.location, self.s3)
                writer = self.file_writers[key] = DataFileWriter(
                    store, kind, self.task, rows.schema, folder=partition_folder(target.partition_by, values),
                    partition_values=values, token=self.token, stats_columns=target.stats_columns,
                    **self.part_options)
            writer.write(rows)
        limit = OPEN_FILES_PARTS * self.part_options.get("part_bytes", PART_BYTES)
        total = sum(w.buffered_bytes for w in self.file_writers.values())
        if total <= limit:  # nearly always: sort only when something must be put
            return
        buffered = sorted((w.buffered_bytes, i, w) for i, w in enumerate(self.file_writers.values()))
        while total > limit and buffered:
            size, _, fullest = buffered.pop()
            fullest.put_now()
            total -= size

    def close(self) -> dict[str, list[str]]:
        """Kind -> the names of its parts (staged kinds only)."""
        return {kind: w.close() for kind, w in self.writers.items()}

    def close_files(self) -> dict[str, list[DataFile]]:
        """Kind -> the data files written into its table's folder (direct kinds only)."""
        files: dict[str, list[DataFile]] = {}
        for (kind, _), writer in self.file_writers.items():
            writer.close()
            files.setdefault(kind, []).extend(writer.files)
        return files
