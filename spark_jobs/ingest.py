"""The decode job: archived binlog objects -> bronze / silver / meta Delta tables.

Driver: plans tasks from the object list (never reads file bodies), runs one Spark job that
decodes on the executors (one task per partition of a small task RDD) and collects only the
per-range facts, then commits each row table once:

- a table that holds no rows of the run's files (by its Delta log's statistics: every nightly
  file, every backfill of new files) gets its rows written by the executors straight into its
  folder as Delta data files, which the driver commits as they are, in one ``add``-only delta-rs
  commit (:func:`binlake.lake.delta_tables.append_files`): the rows are written once;
- a table that may hold rows of them (a file re-ingested: changed, forced, or a killed run's
  files under a new run id) gets one Spark Delta overwrite (``replaceWhere`` on source + file)
  from the rows the executors staged as Parquet parts under the run's staging folder;
- a table with no rows of the files now and none before is left alone.

A run whose files total at most ``[pipeline] decode_in_process_bytes`` runs the same tasks in the
calling process instead, one after another, and commits every table with delta-rs, the staged parts
of a re-ingested file's tables included (:func:`_decodes_here`, :func:`_replace_from_parts`): a small
night starts no Spark job (docs/architecture.md, "Where the JVM starts").

Executors: open the object store from plain settings (never a driver-side client), read their
byte ranges (boto3 ranged GETs for s3://, seeks for local paths), decode with
``binlake.ingest.records`` into Arrow batches of about ``batch_rows`` rows per table, and write them
as Parquet, into the table's folder or the run's staging folder (``binlake.ingest.parquet_parts``).

Large files (> ``split_threshold`` bytes) are first scanned header-only on an executor and
cut at transaction starts into ranges of about ``split_target`` bytes; small files are packed
into tasks of about ``pack_target`` bytes.

Exactly-once: every Delta write carries ``txnAppId = binlake-ingest:<run_id>`` /
``txnVersion`` (Delta skips a write it already committed for that run: a killed run re-run
with the same run id finishes the missing tables only) and ``userMetadata`` naming the run.
The row tables' appends and the two meta tables (one row per file, :func:`replace_few_rows`, last)
are delta-rs commits of the same kind (txn action, ``userMetadata``). Data files of a run killed
before its commit stay in the table's folder uncommitted: no reader sees them, and a re-run
writes its own; Delta's ``VACUUM`` removes them.
Whatever the run id, rows are keyed by (source, file) and replaced, never appended twice;
decoding is deterministic, so a re-run leaves every table with identical rows.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import gc
import hashlib
import io
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from binlake.config import BinlakeConfig
from binlake.ingest import records
from binlake.ingest.layout import INGEST_TABLES, KIND_TO_TABLE, QUARANTINE_COLUMNS
from binlake.ingest.parquet_parts import DirectTable
from binlake.lake.delta_files import STATS_STRING_PREFIX, DataFile
from binlake.lake.sql_text import files_predicate
from binlake.run_ids import new_run_id
from binlake.step_results import BinlogObject
from spark_jobs.errors import DirectWriteRefused
from spark_jobs.lake import delta_log, ensure_table, replace_few_rows, table_path, table_version, write_replace
from spark_jobs.schemas import TableSpec, spec

if TYPE_CHECKING:  # pragma: no cover
    from deltalake import DeltaTable
    from pyspark.sql import DataFrame, SparkSession

    from binlake.lake.storage import ObjectStore
    from spark_jobs.session import SparkSource

log = logging.getLogger("binlake.ingest")
T = TypeVar("T")
R = TypeVar("R")

DEFAULT_SPLIT_THRESHOLD = 128 << 20
DEFAULT_SPLIT_TARGET = 64 << 20
DEFAULT_PACK_TARGET = 64 << 20
HEAD_BYTES = 64 << 10
READ_CHUNK = 8 << 20


# ---------------------------------------------------------------------------------------
# Inputs and results
# ---------------------------------------------------------------------------------------


def as_binlog_object(item: Any, source: str | None = None) -> BinlogObject:
    """Accept a BinlogObject, a dict, or any object with source/uri/size/etag attributes
    (e.g. ``binlake.lake.storage.ObjectInfo`` plus a ``source``)."""
    if isinstance(item, BinlogObject):
        return item
    get = item.get if isinstance(item, Mapping) else (lambda k, d=None: getattr(item, k, d))
    src = get("source") or source
    if not src:
        raise ValueError(f"binlog object without a source: {item!r}")
    uri = get("uri")
    name = get("file") or get("name") or ""
    return BinlogObject(source=str(src), uri=str(uri), size=int(get("size") or 0),
                        etag=get("etag"), file=str(name).rsplit("/", 1)[-1] if name else "")


@dataclass
class IngestResult:
    run_id: str
    files: int = 0
    skipped: int = 0
    tasks: int = 0
    split_files: int = 0
    bytes: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    quarantined: int = 0
    file_status: dict[str, str] = field(default_factory=dict)  # "source/file" -> ok|partial|failed
    stale_staging_removed: int = 0  # staging folders of dead runs removed at the start
    #: "source/file" -> [start, end) byte ranges stepped over by the resynchronising decoder
    #: (each one a bronze.quarantine row; the file is "partial")
    skipped_ranges: dict[str, list[list[int]]] = field(default_factory=dict)
    seconds: float = 0.0
    decode_seconds: float = 0.0
    write_seconds: float = 0.0
    table_versions: dict[str, int] = field(default_factory=dict)
    #: decoded in the calling process (at most ``[pipeline] decode_in_process_bytes``), not on executors
    in_process: bool = False

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# ---------------------------------------------------------------------------------------
# Executor side: byte access
# ---------------------------------------------------------------------------------------

_STORES: dict[tuple[str, ...], ObjectStore] = {}


def _store_and_name(uri: str, s3: Mapping[str, Any] | None) -> tuple[ObjectStore, str]:
    from binlake.config import S3Settings, is_s3_uri, split_s3_uri
    from binlake.lake.storage import LocalObjectStore, S3ObjectStore

    if is_s3_uri(uri):
        bucket, key = split_s3_uri(uri)
        ck = ("s3", bucket, json.dumps(s3 or {}, sort_keys=True))
        store = _STORES.get(ck)
        if store is None:
            store = S3ObjectStore(f"s3://{bucket}/", S3Settings(**(s3 or {})))
            _STORES[ck] = store
        return store, key
    path = uri[len("file://"):] if uri.startswith("file://") else uri
    folder, _, name = path.rpartition("/")
    local_key = ("local", folder or "/")
    store = _STORES.get(local_key)
    if store is None:
        store = LocalObjectStore(folder or "/")
        _STORES[local_key] = store
    return store, name


def read_bytes(uri: str, start: int, end: int, s3: Mapping[str, Any] | None = None, *,
               etag: str | None = None) -> bytes:
    """Bytes ``[start, end)`` of an object (local path or s3:// URI), in one read of the store: a
    local file is read straight into the result, and an S3 body cut mid-way is resumed by the
    store itself (gathered in 8 MiB reads, every byte was copied twice more; bench/HISTORY.md).
    ``etag``: the version the run's plan names (discovery's); another
    version is a :class:`binlake.lake.storage.ObjectChangedError`, never its bytes."""
    store, name = _store_and_name(uri, s3)
    return store.read_range(name, start, end, etag=etag)


class RangeStream(io.RawIOBase):
    """A read-only forward stream over an object, fetched ``READ_CHUNK`` bytes at a time."""

    def __init__(self, uri: str, size: int, s3: Mapping[str, Any] | None = None, *, etag: str | None = None) -> None:
        self.uri, self.size, self.s3, self.etag, self.pos = uri, size, s3, etag, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self.pos >= self.size:
            return 0
        n = min(len(b), READ_CHUNK, self.size - self.pos)
        data = read_bytes(self.uri, self.pos, self.pos + n, self.s3, etag=self.etag)
        b[: len(data)] = data
        self.pos += len(data)
        return len(data)


def scan_split_points(uri: str, size: int, target: int, s3: Mapping[str, Any] | None = None, *,
                      etag: str | None = None) -> list[int]:
    """Header-only scan of one object (executor side): transaction-start cut offsets, read from
    the version ``etag`` names."""
    from binlake.lake.storage import ObjectChangedError
    from binlog_parser.reader import HeaderScan

    stream = io.BufferedReader(RangeStream(uri, size, s3, etag=etag), buffer_size=READ_CHUNK)
    try:
        scan = HeaderScan(stream, file_name=uri.rsplit("/", 1)[-1], types=records.SPLIT_POINT_TYPES)
        return records.split_points(scan, file_size=size, target=target, skip_to=scan.skip_to)
    except ObjectChangedError as exc:  # its decode task meets the same change and reports it
        log.warning("header scan of %s stopped: %s", uri, exc)
        return []
    except Exception:  # noqa: BLE001 - an unreadable file is decoded whole (and quarantined)
        log.exception("header scan failed for %s; decoding it as one range", uri)
        return []


# ---------------------------------------------------------------------------------------
# Executor side: decode tasks into staged Parquet parts
# ---------------------------------------------------------------------------------------

STAGE_KINDS = ("events", "quarantine", "transactions", "row_changes", "statements")


def _failure(piece: Mapping[str, Any], exc: BaseException, run_id: str | None) -> Iterator[tuple[str, Any]]:
    """An unreadable piece: one ``file`` / ``range`` quarantine row and facts marking the failure.
    An object that is no longer the planned version gets no row at all (none of its rows may be
    written), only facts carrying the change (``changed``: the error's fields), which the driver
    turns into the run's error (:func:`refuse_changed_objects`)."""
    from binlake.ingest.columns import TableColumns
    from binlake.lake.storage import ObjectChangedError
    from binlake.reconcile.coverage import split_series

    file_seq = split_series(piece["file"])[1]
    changed = exc.fields if isinstance(exc, ObjectChangedError) else None
    quarantine = TableColumns("bronze.quarantine", {"source": piece["source"], "file": piece["file"],
                                                    "file_seq": file_seq, "run_id": run_id},
                              row_columns=QUARANTINE_COLUMNS)
    quarantine.row(piece["start"], "file" if piece["start"] == 0 else "range", None, None, type(exc).__name__,
                   str(exc) or repr(exc), piece["start"], piece["end"] if piece["end"] < piece["size"] else None,
                   None)
    if changed is None:
        yield "quarantine", quarantine.take_batch()
    yield "file_facts", {
        "source": piece["source"], "file": piece["file"], "file_seq": file_seq, "uri": piece["uri"],
        "range_index": piece["range_index"], "range_start": piece["start"], "range_end": piece["end"],
        "binlog_version": None, "server_version": None, "server_id": None, "checksum_alg": None,
        "previous_gtids": None, "previous_gtids_raw": None, "first_gtid": None, "last_gtid": None,
        "transactions": 0, "events": 0, "first_event_time": None, "last_event_time": None,
        "closing_event": None, "next_file": None, "truncated": False, "decoded_bytes": 0,
        "quarantined": 1, "sha1": "", "flavor": "mysql", "contained_gtids": "", "duplicate_gtids": "",
        "read_failed": True, "changed": changed,
    }


def decode_piece(piece: Mapping[str, Any], *, s3: Mapping[str, Any] | None, keep_raw: bool,
                 run_id: str | None, batch_rows: int = records.DEFAULT_BATCH_ROWS) -> Iterator[tuple[str, Any]]:
    """Decode one byte range of one object (executor side) into ``(kind, RecordBatch)`` pairs,
    then ``("file_facts", facts)``; never raises. Both reads (the range, and the file's head for
    a range after the first) are pinned to the piece's ``etag``, the version discovery saw."""
    etag = piece.get("etag")
    try:
        data = read_bytes(piece["uri"], piece["start"], piece["end"], s3, etag=etag)
        ctx = None
        if piece["start"] > 0:
            head = read_bytes(piece["uri"], 0, min(HEAD_BYTES, piece["size"]), s3, etag=etag)
            ctx = records.context_from_head(head, piece["file"])
    except Exception as exc:  # noqa: BLE001 - unreadable object / head: quarantined, run goes on
        yield from _failure(piece, exc, run_id)
        return
    yield from records.RangeDecoder(
        data, source=piece["source"], file=piece["file"], uri=piece["uri"],
        range_start=piece["start"], range_index=piece["range_index"], file_size=piece["size"],
        context=ctx, keep_raw=keep_raw, run_id=run_id, batch_rows=batch_rows).batches()


@dataclass(frozen=True)
class TaskSettings:
    """What an ingest task needs, as plain values (executors are other processes: settings
    travel, objects do not)."""

    staging: str  # the run's staging folder (local path or s3:// URI)
    s3: Mapping[str, Any] | None
    keep_raw: bool
    run_id: str | None
    batch_rows: int = records.DEFAULT_BATCH_ROWS
    #: kind -> its table, for the kinds written straight into their table's folder
    direct: Mapping[str, DirectTable] = field(default_factory=dict)
    #: the task runs in a Spark Python worker (tuned for it: :func:`freed_memory_kept`,
    #: :func:`young_objects_collected_rarely`), not in the step's own long-lived process
    spark_worker: bool = True


#: the young generation's collection threshold while a task decodes (Python's default: 700)
TASK_GC_THRESHOLD = 50_000


@contextlib.contextmanager
def young_objects_collected_rarely() -> Iterator[None]:
    """The cyclic garbage collector, for one task, looking only at the objects the task makes,
    and less often.

    A task makes container objects as it goes (most freed at once by refcounting); each 700 not
    yet freed start a collection of the young ones, every tenth of those the middle generation
    too, and now and then all of them, every module Spark, Arrow and the decoder loaded: a
    fresh process's first tasks spent most of their collector time there (bench/HISTORY.md).
    Freezing takes what exists before the task out
    of the collector's sight; the higher threshold still collects the task's own cycles (rare)
    every 50,000 new objects, so what they hold stays bounded. The threshold is put back after
    the task, even when it raises.

    What was frozen stays frozen: Spark's Python worker collects everything after each task
    (``pyspark.daemon``), a full collection over every object of the modules each time;
    frozen, only the task's leftovers are looked at. That collection
    runs just before the next task starts, so the next task freezes what is still alive, bar what
    Spark made in between to read that task."""
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(TASK_GC_THRESHOLD, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


#: ``mallopt`` settings of a decode worker (:func:`freed_memory_kept`): (option, bytes)
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
WORKER_MALLOPT = ((_M_MMAP_THRESHOLD, 256 << 20), (_M_TRIM_THRESHOLD, 1 << 30), (_M_TOP_PAD, 64 << 20))


@functools.cache
def freed_memory_kept() -> bool:
    """Have glibc's allocator keep the memory a task frees for the next one (once a process);
    False where the C library is not glibc or refuses.

    A task's column buffers (the extension's Rust vectors, MBs each) are freed once their
    batch is written. With glibc's defaults each is a fresh ``mmap``, given back at once, so the
    next batch faults on every page it touches again; kept, most of those faults and their
    kernel time go (figures: bench/HISTORY.md, docs/architecture.md). The cost: a worker's
    resident memory stays near its peak between tasks.
    Set with ``mallopt`` in the worker, not as ``MALLOC_*`` variables of the executor, so that
    the executor's JVM is left as it is.
    """
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return False
        libc = ctypes.CDLL("libc.so.6")
    except (ValueError, OSError):  # no such name here, or not glibc
        return False
    return all(libc.mallopt(option, value) == 1 for option, value in WORKER_MALLOPT)


def decode_task(task: tuple[int, list[dict[str, Any]]], settings: TaskSettings) -> dict[str, Any]:
    """One ingest task (executor side): decode its pieces and stage each table's rows as Parquet
    parts (or as data files of the tables in ``settings.direct``); return ``{"facts": [...],
    "parts": {kind: [names]}, "files": {kind: [DataFile]}}``. Each piece's facts row carries
    the piece's row count per kind in ``row_counts``: the driver gets the per-file counts with the
    facts, never by scanning the staged rows again."""
    from binlake.ingest.parquet_parts import TaskStaging, staging_store

    task_id, pieces = task
    if settings.spark_worker:
        freed_memory_kept()
    with young_objects_collected_rarely() if settings.spark_worker else contextlib.nullcontext():
        staging = TaskStaging(staging_store(settings.staging, settings.s3), task_id, direct=settings.direct,
                              s3=settings.s3)
        facts = []
        for piece in pieces:
            counts = dict.fromkeys(STAGE_KINDS, 0)
            for kind, item in decode_piece(piece, s3=settings.s3, keep_raw=settings.keep_raw,
                                           run_id=settings.run_id, batch_rows=settings.batch_rows):
                if kind == "file_facts":
                    facts.append(dict(item, size=piece["size"], etag=piece.get("etag"), n_ranges=piece["n_ranges"],
                                      row_counts=counts))
                else:
                    counts[kind] += item.num_rows
                    staging.write(kind, item)
        return {"facts": facts, "parts": staging.close(), "files": staging.close_files()}


# ---------------------------------------------------------------------------------------
# Driver side: planning
# ---------------------------------------------------------------------------------------

#: Files smaller than this are never cut to spread a small archive over the cores (a header scan
#: and a second task are not worth it), and ranges cut for that are never smaller than MIN_RANGE.
MIN_SPLIT_BYTES = 4 << 20
MIN_RANGE_BYTES = 1 << 20


def spread_targets(split_threshold: int, split_target: int, pack_target: int, *, total_bytes: int,
                   parallelism: int) -> tuple[int, int, int]:
    """``(split_threshold, split_target, pack_target)`` lowered so that an archive smaller than
    ``parallelism`` × the targets still makes at least ``parallelism`` tasks: every core decodes.

    Each core's share is ``total_bytes / parallelism``: small files are packed up to one share
    and an eighth (the slack keeps files of about equal size from spilling a last, lone file
    into a task of its own: greedy packing in file order), and a file larger than one share (and
    than :data:`MIN_SPLIT_BYTES`) is cut into ranges of about one share. Large archives keep the
    given targets."""
    share = max(1, -(-total_bytes // max(1, parallelism)))
    return (min(split_threshold, max(share, MIN_SPLIT_BYTES)), min(split_target, max(share, MIN_RANGE_BYTES)),
            min(pack_target, share + share // 8))



def plan_tasks(objects: Sequence[BinlogObject], cuts: Mapping[tuple[str, str], list[int]], *,
               pack_target: int) -> list[list[dict[str, Any]]]:
    """Group byte ranges into tasks: ranges of split files alone, small files packed."""
    tasks: list[list[dict[str, Any]]] = []
    pack: list[dict[str, Any]] = []
    pack_bytes = 0
    for obj in objects:
        points = cuts.get((obj.source, obj.file)) or []
        bounds = [0] + [p for p in points if 0 < p < obj.size] + [obj.size]
        n = len(bounds) - 1
        for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
            piece = {"source": obj.source, "file": obj.file, "uri": obj.uri, "size": obj.size,
                     "etag": obj.etag, "start": a, "end": b, "range_index": i, "n_ranges": n}
            if n > 1 or (b - a) >= pack_target:
                tasks.append([piece])
                continue
            if pack and pack_bytes + (b - a) > pack_target:
                tasks.append(pack)
                pack, pack_bytes = [], 0
            pack.append(piece)
            pack_bytes += b - a
    if pack:
        tasks.append(pack)
    return tasks


def _delete_path(config: BinlakeConfig, path: str) -> None:
    """Remove the run's staging folder: a local tree, or every object under the prefix (through
    binlake's object store, not Hadoop's FileSystem: a Spark Connect client has no JVM)."""
    from binlake.lake.storage import ObjectNotFound, open_object_store

    if "://" not in path:
        shutil.rmtree(path, ignore_errors=True)
        return
    store = open_object_store(path.rstrip("/") + "/", config.s3)
    for obj in list(store.list("")):
        with contextlib.suppress(ObjectNotFound):
            store.delete(obj.name)


def already_ingested(spark: SparkSource, config: BinlakeConfig) -> dict[tuple[str, str], tuple[str | None, int | None]]:
    """(source, file) -> (etag, size) of files meta.ingested_files marks done.

    Read with delta-rs (:func:`binlake.ingest.state.read_table_rows`, one row per file): a Spark
    read is a job, seconds of JVM CPU at the start of every ingest (issue 13). Spark reads the
    table when delta-rs cannot."""
    from binlake.ingest.state import INGESTED_FILES, read_table_rows
    from spark_jobs.lake import is_delta_table
    from spark_jobs.session import session_of

    columns = ("source", "file", "etag", "size", "status")
    rows = read_table_rows(config, INGESTED_FILES, columns)
    if rows is None:
        path = table_path(config, INGESTED_FILES)
        session = session_of(spark)
        if not is_delta_table(session, path):
            return {}
        rows = [r.asDict() for r in session.read.format("delta").load(path).select(*columns).collect()]
    return {(r["source"], r["file"]): (r["etag"], r["size"]) for r in rows if r["status"] != "failed"}


# ---------------------------------------------------------------------------------------
# The job
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IngestOptions:
    """How one ingest run cuts, packs, decodes and stages (see :func:`run_ingest`)."""

    split_threshold: int = DEFAULT_SPLIT_THRESHOLD
    split_target: int = DEFAULT_SPLIT_TARGET
    pack_target: int = DEFAULT_PACK_TARGET
    keep_raw: bool = False
    batch_rows: int = records.DEFAULT_BATCH_ROWS
    keep_staging: bool = False
    write_threads: int = 3
    #: the run id written to ``meta.ingested_files.run_id`` (e.g. the Airflow run id); default the run's
    record_run_id: str | None = None
    #: let the executors write a table holding no rows of the run's files straight into its folder
    direct_writes: bool = True


@dataclass(frozen=True)
class StagedRun:
    """What the decode step left: the staging folder (as Spark names it), each table's parts in
    it, the data files written into the ``direct`` tables' folders, and the per-range facts and
    row counts, by file."""

    path: str
    parts: Mapping[str, list[str]]
    facts: Mapping[tuple[str, str], list[dict[str, Any]]]
    counts: Mapping[tuple[str, str], Mapping[str, int]]
    direct: Mapping[str, DirectTable] = field(default_factory=dict)
    files: Mapping[str, list[DataFile]] = field(default_factory=dict)
    #: the staging folder as binlake names it (a local path or an s3:// URI)
    folder: str = ""


@dataclass(frozen=True)
class FileOutcome:
    """One ingested file's ``meta.binlog_files`` row (None if it failed) and ``meta.ingested_files`` row."""

    status: str
    binlog_file_row: dict[str, Any] | None
    ingested_row: dict[str, Any]


def run_ingest(spark: SparkSource, config: BinlakeConfig, files: Iterable[Any], run_id: str | None = None, *,
               force: bool = False, split_threshold: int = DEFAULT_SPLIT_THRESHOLD,
               split_target: int = DEFAULT_SPLIT_TARGET, pack_target: int = DEFAULT_PACK_TARGET,
               keep_raw: bool = False, batch_rows: int = records.DEFAULT_BATCH_ROWS,
               keep_staging: bool = False, write_threads: int = 3,
               record_run_id: str | None = None, direct_writes: bool = True) -> IngestResult:
    """Decode ``files`` (binlog objects from discovery) into the bronze/silver/meta tables.

    Files whose (source, file, etag, size) ``meta.ingested_files`` already holds are skipped
    unless ``force``; a changed etag or size means the object changed (an active file
    re-archived): it is ingested again and its rows replaced. ``record_run_id`` (the Airflow run
    id) goes into ``meta.ingested_files.run_id``; ``run_id`` (path-safe) names staging and commits.

    Files totalling at most ``[pipeline] decode_in_process_bytes`` are decoded here, by the same
    tasks one after another, and every table is committed by delta-rs (:func:`_decodes_here`):
    ``spark`` is then not used, and a :class:`spark_jobs.session.LazySession` never starts.
    """
    t0 = time.time()
    opts = IngestOptions(split_threshold, split_target, pack_target, keep_raw, batch_rows, keep_staging,
                         write_threads, record_run_id, direct_writes)
    result = IngestResult(run_id=run_id or new_run_id())
    result.stale_staging_removed = _clean_stale_staging(config, result.run_id)
    objects = _objects_to_ingest(spark, config, files, force, result)
    for name in INGEST_TABLES:
        ensure_table(spark, config, name)
    if objects:
        result.in_process = _decodes_here(config, result.bytes)
        tasks = _plan(spark, objects, opts, dataclasses.asdict(config.s3), result)
        direct = _direct_tables(config, objects) if opts.direct_writes else {}
        staged = _decode_to_staging(spark, config, tasks, opts, direct, result)
        try:
            refuse_changed_objects(staged.facts)
        except Exception:
            if not opts.keep_staging:
                _delete_path(config, staged.path)
            raise
        t2 = time.time()
        _write_tables(spark, config, objects, staged, opts, result)
        result.write_seconds = time.time() - t2
        for name in INGEST_TABLES:
            v = table_version(config, table_path(config, name))
            if v is not None:
                result.table_versions[name] = v
        if not opts.keep_staging:
            _delete_path(config, staged.path)
    result.seconds = time.time() - t0
    log.info("ingest %s: %d files, %d tasks%s, %.1f MB in %.1fs", result.run_id, result.files, result.tasks,
             " (in process)" if result.in_process else "", result.bytes / 1e6, result.seconds)
    return result


def _decodes_here(config: BinlakeConfig, total_bytes: int) -> bool:
    """Whether the run decodes in this process: its files total at most ``[pipeline]
    decode_in_process_bytes`` and delta-rs may commit to every table it writes.

    Why a line in bytes: below it a Spark job's fixed cost (a JVM, or a Connect server's job and
    its Python workers) is most of the run's CPU, while the decoder takes well under a second per
    MB; above it Spark's executors decode the files in parallel (docs/architecture.md, "Where the
    JVM starts")."""
    from binlake.lake.delta_tables import delta_rs_writes

    if total_bytes > config.decode_in_process_bytes:
        return False
    for name in INGEST_TABLES:
        table = delta_log(config, table_path(config, name))
        if table is None or not delta_rs_writes(table):
            return False
    return True


def _clean_stale_staging(config: BinlakeConfig, run_id: str) -> int:
    """Remove staging left by runs killed during their Delta writes (see binlake.ingest.staging for the
    age rule). Housekeeping: a failure to list or delete is logged, never fails the ingest."""
    from binlake.ingest.staging import clean_stale_staging

    try:
        return len(clean_stale_staging(config.warehouse, config.s3, keep_run=run_id))
    except Exception:  # noqa: BLE001
        log.warning("could not clean stale staging under %s", config.warehouse, exc_info=True)
        return 0


def _objects_to_ingest(spark: SparkSource, config: BinlakeConfig, files: Iterable[Any], force: bool,
                       result: IngestResult) -> list[BinlogObject]:
    """One object per (source, file) (the last listed wins), sorted, without the ones already
    ingested with the same etag and size (unless ``force``)."""
    uniq: dict[tuple[str, str], BinlogObject] = {}
    for o in (as_binlog_object(f) for f in files):
        uniq[(o.source, o.file)] = o
    objects = sorted(uniq.values(), key=lambda o: (o.source, o.file))
    if not force:
        done = already_ingested(spark, config)
        todo = [o for o in objects if done.get((o.source, o.file)) != (o.etag, o.size)]
        result.skipped = len(objects) - len(todo)
        objects = todo
    result.files = len(objects)
    result.bytes = sum(o.size for o in objects)
    return objects


def _plan(spark: SparkSource, objects: Sequence[BinlogObject], opts: IngestOptions, s3: Mapping[str, Any],
          result: IngestResult) -> list[list[dict[str, Any]]]:
    """Split points of large files (a header scan on the executors), then the task list: at
    least ``defaultParallelism`` tasks when the archive allows it (:func:`spread_targets`); one
    core's worth when the run decodes in process."""
    from spark_jobs.session import default_parallelism, session_of

    parallelism = 1 if result.in_process else default_parallelism(session_of(spark))
    threshold, target, pack = spread_targets(opts.split_threshold, opts.split_target, opts.pack_target,
                                             total_bytes=sum(o.size for o in objects), parallelism=parallelism)
    big = [o for o in objects if o.size > threshold]
    cuts: dict[tuple[str, str], list[int]] = {}
    if big:
        found = _map(spark, result.in_process,
                     lambda t: ((t[0], t[1]), scan_split_points(t[2], t[3], target, s3, etag=t[4])),
                     [(o.source, o.file, o.uri, o.size, o.etag) for o in big])
        cuts = dict(found)
        result.split_files = sum(1 for v in cuts.values() if v)
    tasks = plan_tasks(objects, cuts, pack_target=pack)
    result.tasks = len(tasks)
    return tasks


def _direct_tables(config: BinlakeConfig, objects: Sequence[BinlogObject]) -> dict[str, DirectTable]:
    """The row tables the executors may write straight into (see the module doc): delta-rs may
    commit to them, their columns and partitioning are binlake's, and their logs' statistics
    say no data file holds rows of ``objects`` (so an append replaces nothing). Only this run
    writes rows of these files meanwhile: it holds their source's lease."""
    from binlake.lake.delta_tables import delta_rs_writes
    from binlake.lake.tables import STATS_COLUMNS_PROPERTY, table_location

    pairs = {(o.source, o.file) for o in objects}
    direct = {}
    for kind, name in KIND_TO_TABLE.items():
        ts = spec(name)
        table = delta_log(config, table_path(config, name))
        if (table is None or not delta_rs_writes(table)
                or [f.name for f in table.schema().fields] != list(ts.column_names)
                or list(table.metadata().partition_columns) != list(ts.partition_by)
                or may_hold_rows_of(table, pairs)):
            continue
        stats = table.metadata().configuration.get(STATS_COLUMNS_PROPERTY)
        direct[kind] = DirectTable(table_location(config.warehouse, name), tuple(ts.partition_by),
                                   tuple(c.strip() for c in stats.split(",")) if stats else None)
    return direct


def _map(spark: SparkSource, here: bool, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``fn`` over ``items``: here, one after another, or one Spark task each on the executors."""
    from spark_jobs.session import run_on_executors, session_of

    return [fn(item) for item in items] if here else run_on_executors(session_of(spark), fn, items)


def _decode_to_staging(spark: SparkSource, config: BinlakeConfig, tasks: list[list[dict[str, Any]]],
                       opts: IngestOptions, direct: Mapping[str, DirectTable], result: IngestResult) -> StagedRun:
    """Decode every task once (on the executors, or here: ``result.in_process``), writing each
    table's rows as Parquet (data files of the ``direct`` tables, staging parts of the others);
    collect only the per-range facts and the file names."""
    from binlake.config import to_spark_uri
    from binlake.ingest.staging import staging_folder

    folder = staging_folder(config.warehouse, result.run_id)
    settings = TaskSettings(folder, dataclasses.asdict(config.s3), opts.keep_raw, result.run_id, opts.batch_rows,
                            direct, spark_worker=not result.in_process)
    t1 = time.time()
    done = _map(spark, result.in_process, functools.partial(decode_task, settings=settings), list(enumerate(tasks)))
    result.decode_seconds = time.time() - t1
    parts: dict[str, list[str]] = {k: [] for k in STAGE_KINDS}
    files: dict[str, list[DataFile]] = {k: [] for k in direct}
    by_file: dict[tuple[str, str], list[dict[str, Any]]] = {}
    counts: dict[tuple[str, str], dict[str, int]] = {}
    for task in done:
        for kind, names in task["parts"].items():
            parts[kind].extend(names)
        for kind, written in task["files"].items():
            files[kind].extend(written)
        for fact in task["facts"]:
            key = (fact["source"], fact["file"])
            by_file.setdefault(key, []).append(fact)
            file_counts = counts.setdefault(key, dict.fromkeys(STAGE_KINDS, 0))
            for kind, n in fact.pop("row_counts").items():
                file_counts[kind] += n
    return StagedRun(to_spark_uri(folder), parts, by_file, counts, direct, files, folder)


def refuse_changed_objects(facts: Mapping[tuple[str, str], Sequence[Mapping[str, Any]]]) -> None:
    """Raise :class:`binlake.lake.storage.ObjectChangedError` when an executor found a file that is no
    longer the version the plan names (replaced between discovery and decode, or between two
    ranges of a split file), before any table is written: the run writes no row of that file,
    and none of the others either (they are decoded again by the re-run, after a new discovery).

    Why the whole run and not just that file: a task packs several files into one data file per
    table, so one file's rows cannot be left out of what the executors wrote; and the decode step
    runs one source, so "the run" is that source's. The message names each changed file, its
    ETag (or local identity) expected and the one the store has now."""
    from binlake.lake.storage import ObjectChangedError

    changed: dict[str, Mapping[str, Any]] = {}
    for key in sorted(facts):
        for fact in sorted(facts[key], key=lambda f: f.get("range_index") or 0):
            if fact.get("changed"):
                changed.setdefault(fact["changed"]["uri"], fact["changed"])
    if not changed:
        return
    first, *rest = changed.values()
    log.error("ingest: %d file(s) changed since discovery; no table written", len(changed))
    raise ObjectChangedError(**{**first, "more": tuple(str(ObjectChangedError(**c)) for c in rest)})


def _staged_df(spark: SparkSession, staged: StagedRun, kind: str) -> DataFrame:
    """One table's staged rows (its parts, read with the table's schema: no schema inference)."""
    ts = spec(KIND_TO_TABLE[kind])
    names = staged.parts.get(kind) or []
    if not names:  # no rows: still written, it replaces the files' earlier rows
        return spark.createDataFrame([], ts.schema)
    return spark.read.schema(ts.schema).parquet(*[f"{staged.path}/{n}" for n in names])


def _write_tables(spark: SparkSource, config: BinlakeConfig, objects: Sequence[BinlogObject], staged: StagedRun,
                  opts: IngestOptions, result: IngestResult) -> None:
    """The five row tables (from a few driver threads: an append of the data files the executors
    wrote, or a Spark replacement from the staged parts), then meta.binlog_files and
    meta.ingested_files, in that order (with delta-rs: :func:`replace_few_rows`): each one Delta
    commit of the run's files. meta.ingested_files, which marks the files done, is the last
    commit of the run."""
    predicate = files_predicate((o.source, o.file) for o in objects)
    # one Delta transaction id per (run, file set): a retried run skips what it already wrote
    txn_app = f"binlake-ingest:{result.run_id}:{hashlib.sha1(predicate.encode()).hexdigest()[:12]}"

    pairs = {(o.source, o.file) for o in objects}

    def write_kind(kind: str) -> None:
        ts = spec(KIND_TO_TABLE[kind])
        path = table_path(config, ts.name)
        if kind in staged.direct:
            _append_files(config, path, ts, staged.files.get(kind) or [], txn_app=txn_app, run_id=result.run_id,
                          n_files=len(objects))
            return
        if not staged.parts.get(kind) and not may_hold_rows_of(delta_log(config, path), pairs):
            # nothing to add and nothing to replace: the commit would change no row (a night's
            # quarantine is nearly always empty), and each commit costs seconds of JVM CPU
            log.info("ingest %s: %s unchanged (no rows of these files before or now)", result.run_id, ts.name)
            return
        if result.in_process:
            _replace_from_parts(config, path, ts, staged, kind, pairs, txn_app=txn_app, run_id=result.run_id,
                                n_files=len(objects))
            return
        from spark_jobs.session import session_of

        df = _staged_df(session_of(spark), staged, kind)
        write_replace(df, path, predicate, s3=config.s3, run_id=result.run_id,
                      job="ingest", txn_app=txn_app, extra_meta={"files": len(objects)})

    # The five row tables are independent Delta logs: commit them from a few driver threads
    # (small writes are dominated by per-commit latency). meta.* tables follow, in order.
    if opts.write_threads > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=opts.write_threads) as pool:
            for fut in [pool.submit(write_kind, k) for k in STAGE_KINDS]:
                fut.result()
    else:
        for kind in STAGE_KINDS:
            write_kind(kind)
    outcomes = [_file_outcome(o, staged, result, opts.record_run_id) for o in objects]
    counts = dict.fromkeys(STAGE_KINDS, 0)
    for o in objects:
        for k, n in staged.counts.get((o.source, o.file), {}).items():
            counts[k] = counts.get(k, 0) + n
    file_rows = [f.binlog_file_row for f in outcomes if f.binlog_file_row is not None]
    for name, rows in (("meta.binlog_files", file_rows),
                       ("meta.ingested_files", [f.ingested_row for f in outcomes])):
        replace_few_rows(spark, config, name, rows, functools.partial(files_predicate, pairs), run_id=result.run_id,
                         job="ingest", txn_app=txn_app)
    result.rows = {KIND_TO_TABLE[k]: n for k, n in counts.items()}
    result.quarantined = counts["quarantine"]


def _replace_from_parts(config: BinlakeConfig, path: str, ts: TableSpec, staged: StagedRun, kind: str,
                        pairs: set[tuple[str, str]], *, txn_app: str, run_id: str, n_files: int) -> None:
    """The in-process run's replacement of a table that may hold rows of its files: the staged
    parts read here and written over those files' rows in one delta-rs commit (the commit the
    Spark path's ``replaceWhere`` write makes: predicate, txn id, ``userMetadata``). Raises
    :class:`DirectWriteRefused` when the table's protocol changed since the run checked it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from binlake.ingest.parquet_parts import staging_store
    from binlake.lake.delta_tables import Commit, replace_rows
    from binlake.lake.sql_text import DELTA_RS

    store = staging_store(staged.folder, dataclasses.asdict(config.s3))
    parts = [pq.read_table(io.BytesIO(store.read_all(name)), schema=ts.arrow_schema)
             for name in staged.parts.get(kind) or []]
    data = pa.concat_tables(parts) if parts else ts.arrow_schema.empty_table()
    done = replace_rows(path, config.s3, data, files_predicate(pairs, DELTA_RS), partition_by=ts.partition_by,
                        txn_app=txn_app,
                        user_metadata=json.dumps({"files": n_files, "job": "ingest", "run_id": run_id}, sort_keys=True))
    if done is Commit.LEFT_TO_SPARK:
        raise DirectWriteRefused(f"{path}: table {ts.name} now has Delta protocol features delta-rs does not write "
                                 f"(changed since run {run_id} checked it); nothing written: re-run the step "
                                 "(it writes the table with Spark)")


def _append_files(config: BinlakeConfig, path: str, ts: TableSpec, files: Sequence[DataFile], *, txn_app: str, run_id: str,
                  n_files: int) -> None:
    """Commit the data files the executors wrote into a table that held no rows of the run's
    files (:func:`_direct_tables`); no files, no commit. Raises :class:`DirectWriteRefused`, leaving
    the files uncommitted, when the table's protocol changed since the run checked it (a re-run
    writes with Spark)."""
    if not files:
        log.info("ingest %s: %s unchanged (no rows of these files before or now)", run_id, ts.name)
        return
    from binlake.lake.delta_tables import Commit, append_files

    done = append_files(path, config.s3, files, partition_by=ts.partition_by, txn_app=txn_app,
                        user_metadata=json.dumps({"files": n_files, "job": "ingest", "run_id": run_id}, sort_keys=True))
    if done is Commit.LEFT_TO_SPARK:
        raise DirectWriteRefused(f"{path}: table {ts.name} now has Delta protocol features delta-rs does not write "
                                 f"(changed since run {run_id} checked it); its {len(files)} data file(s) stay "
                                 "uncommitted: re-run the step (it writes the table with Spark)")


def may_hold_rows_of(log_reader: DeltaTable | None, pairs: Iterable[tuple[str, str]]) -> bool:
    """Whether a data file of the table may hold rows of ``pairs`` ((source, file) pairs), judged
    from its Delta log alone: the ``source`` partition value and the ``file`` column's min/max
    statistics, as Delta's own data skipping would. True when a file lacks them or they may be
    truncated (Delta cuts string statistics to :data:`STATS_STRING_PREFIX` characters), False for no table.

    Why not ask Spark: a query of the table is a job, several seconds of JVM CPU, for the
    answer the log already holds (the same reading ``replaceWhere`` itself starts with).
    """
    from binlake.lake.delta_tables import add_actions

    if log_reader is None:
        return False
    wanted: dict[str, list[str]] = {}
    for source, file in pairs:
        wanted.setdefault(source, []).append(file)
    actions = add_actions(log_reader)
    sources = actions.get("partition.source") or [None] * len(actions.get("path", []))
    lows = actions.get("min.file") or [None] * len(sources)
    highs = actions.get("max.file") or [None] * len(sources)
    for source, low, high in zip(sources, lows, highs, strict=True):
        files = wanted.get(source) if source is not None else [f for fs in wanted.values() for f in fs]
        if not files:
            continue
        if low is None or high is None or max(len(low), len(high)) >= STATS_STRING_PREFIX:
            return True
        if any(low <= f <= high for f in files):
            return True
    return False


def _file_outcome(o: BinlogObject, staged: StagedRun, result: IngestResult,
                  record_run_id: str | None) -> FileOutcome:
    """A file's status (ok / partial / failed) and its two meta rows; noted in ``result``."""
    parts = staged.facts.get((o.source, o.file)) or []
    c = staged.counts.get((o.source, o.file), {})
    decoded_any = any((p.get("events") or 0) > 0 for p in parts)
    if not parts or any(p.get("read_failed") for p in parts) or not decoded_any:
        status = "failed"  # unreadable, or not a binlog at all (quarantined, kept out of the chain)
    elif c.get("quarantine", 0):
        status = "partial"
    else:
        status = "ok"
    result.file_status[f"{o.source}/{o.file}"] = status
    skipped = sorted(r for p in parts for r in (p.get("skipped_ranges") or []))
    if skipped:
        result.skipped_ranges[f"{o.source}/{o.file}"] = skipped
        log.warning("%s/%s is partial: %d byte range(s) skipped (%s), see bronze.quarantine", o.source,
                    o.file, len(skipped), ", ".join(f"{a}-{b}" for a, b in skipped[:10]))
    merged = None
    if parts and status != "failed":
        merged = records.merge_file_facts(parts, size=o.size, etag=o.etag, ranges=parts[0].get("n_ranges"))
        merged["uri"] = o.uri
    ingested = {
        "source": o.source, "file": o.file, "file_seq": records.split_series(o.file)[1],
        "uri": o.uri, "size": o.size, "etag": o.etag, "run_id": record_run_id or result.run_id,
        "status": status,
        "events": c.get("events", 0), "transactions": c.get("transactions", 0),
        "row_changes": c.get("row_changes", 0), "statements": c.get("statements", 0),
        "quarantined": c.get("quarantine", 0),
    }
    return FileOutcome(status, merged, ingested)
