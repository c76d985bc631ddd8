"""binlake's Delta tables without a JVM (delta-rs), local or on any S3-compatible store: opening
them, the one replace-write of a few rows (:func:`replace_rows`), and the commit of data files
written into a table's folder (:func:`append_files`).

Why one module: the SQL fast path, the coverage page, the data checks, the ingest state reads and
the test digests all read Delta tables with delta-rs, and the ingest writes its small meta tables
with it; they must agree on how an ``s3a://`` location is spelled for delta-rs and which endpoint
and credentials it uses.
"""

from __future__ import annotations

import contextlib
import enum
import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from binlake.config import S3Settings, is_s3_uri
from binlake.lake.delta_files import DataFile

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable

log = logging.getLogger("binlake.lake.delta_tables")

#: Writer features :func:`replace_rows` lets delta-rs write: the ones of binlake's tables (protocol
#: 1 / 2, as :func:`spark_jobs.lake.ensure_table` creates them and Spark Delta keeps them), which
#: delta-rs enforces as Spark does (NOT NULL columns; an append-only table refuses the replace).
DELTA_RS_WRITER_FEATURES = frozenset({"appendOnly", "invariants"})
#: What a gold table (and its ``__history``) adds, as Spark creates it with ``[gold]
#: change_data_feed`` and a DATETIME column: the change feed (delta-rs 1.6 writes a MERGE's
#: ``_change_data`` files as Spark does) and ``timestamp_ntz``. Deletion vectors are not among them:
#: delta-rs 1.6 does not write them, so a table with them is left to Spark.
DELTA_RS_GOLD_WRITER_FEATURES = DELTA_RS_WRITER_FEATURES | {"changeDataFeed", "timestampNtz"}
DELTA_RS_GOLD_READER_FEATURES = frozenset({"timestampNtz"})
#: commit attempts of :func:`replace_rows` (a concurrent metadata change: a local table's first
#: CREATE or property change by another source's ingest; on S3 the commit lock excludes them)
REPLACE_ATTEMPTS = 6


def delta_uri(location: str) -> str:
    """delta-rs spells every S3 flavour (``s3a://``, ``s3n://``) ``s3://``."""
    if is_s3_uri(location):
        return "s3://" + location.split("://", 1)[1]
    return location


def storage_options(s3: S3Settings, location: str | None = None) -> dict[str, str]:
    """delta-rs (object_store) options for the configured S3 endpoint; credentials from the AWS chain.

    Empty for a local ``location``. boto3 resolves the credentials (env vars, profiles, roles: the
    same chain as discovery and ingestion) and hands them over explicitly, since object_store alone
    reads env vars only.
    """
    if location is not None and not is_s3_uri(location):
        return {}
    options: dict[str, str] = {"AWS_REGION": s3.region}
    if s3.endpoint_url:
        options["AWS_ENDPOINT_URL"] = s3.endpoint_url
        if s3.endpoint_url.startswith("http://"):
            options["AWS_ALLOW_HTTP"] = "true"
    if s3.path_style_access:
        options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false"
    import boto3

    credentials = boto3.Session(region_name=s3.region).get_credentials()
    if credentials is not None:
        frozen = credentials.get_frozen_credentials()
        options["AWS_ACCESS_KEY_ID"] = frozen.access_key
        options["AWS_SECRET_ACCESS_KEY"] = frozen.secret_key
        if frozen.token:
            options["AWS_SESSION_TOKEN"] = frozen.token
    return options


#: the tables :func:`open_delta_table` keeps open inside :func:`reused_delta_tables` (None outside)
_reused: ContextVar[dict[str, DeltaTable] | None] = ContextVar("binlake_reused_delta_tables", default=None)


@contextlib.contextmanager
def reused_delta_tables() -> Iterator[None]:
    """Inside the block, :func:`open_delta_table` opens each table once and later brings it up to
    date (``update_incremental``: only the log entries since) instead of reading its log again.

    Why: the run's discover task and its summary read the same few meta tables once per source; a
    fresh open lists and reads the table's log each time, which for a fleet is most of their cost.
    Every call still sees the latest version, so a reader inside the block sees what one outside would."""
    token = _reused.set({})
    try:
        yield
    finally:
        _reused.reset(token)


def open_delta_table(location: str, s3: S3Settings | None = None) -> DeltaTable | None:
    """The Delta table at ``location`` (a path, ``s3://`` / ``s3a://``), or None when there is none yet."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    uri = delta_uri(location)
    reused = _reused.get()
    if reused is not None and uri in reused:
        table = reused[uri]
        table.update_incremental()
        return table
    options = storage_options(s3 or S3Settings(), location) or None
    # Not DeltaTable.is_deltatable: it holds the GIL while it waits on S3 (deltalake 1.x), so an
    # S3 API served by a thread of this process (the tests' moto server) never answers it.
    try:
        table = DeltaTable(uri, storage_options=options)
    except TableNotFoundError:
        return None
    if reused is not None:
        reused[uri] = table
    return table


def add_actions(table: DeltaTable) -> dict[str, list[Any]]:
    """The table's live data files, one list per column: ``path``, ``partition.<col>``,
    ``min.<col>`` / ``max.<col>`` statistics ... (delta-rs's flattened add actions). Read through
    pyarrow because delta-rs returns an arro3 table, which has no ``to_pydict``."""
    import pyarrow as pa

    return dict(pa.table(table.get_add_actions(flatten=True)).to_pydict())


def locked_storage_options(location: str, s3: S3Settings | None) -> dict[str, str] | None:
    """delta-rs storage options for a commit to the table at ``location`` (the name is older than
    the reason: commits need no lock for safety now); None for a local table.

    On S3 delta-rs 1.6 commits version N as a ``PUT`` of ``_delta_log/N.json`` with
    ``If-None-Match: *`` (its default log store, object_store's ``PutMode::Create``): the loser of a
    race gets 412, re-reads the log, checks for conflicts and retries at N+1 or reports the conflict.
    ``AWS_S3_ALLOW_UNSAFE_RENAME`` is not set (binlake set it until issue 43): in delta-rs 1.6 it
    only wraps the store for the old rename-based commit, which no S3 commit uses any more, and
    it says "one writer only", which is no longer binlake's model. A store that ignores
    ``If-None-Match`` is not safe with it either (docs/operations.md, "What is safe with which stores").
    """
    if not is_s3_uri(location):
        return None
    return storage_options(s3 or S3Settings(), location)


class Commit(enum.Enum):
    """What :func:`replace_rows` / :func:`append_files` did: an expected outcome each, not an error.

    ``LEFT_TO_SPARK``: the table's protocol names features delta-rs should not write (an older or a
    foreign writer added them); nothing was written and the caller decides (write it with Spark, or
    say why not)."""

    COMMITTED = "committed"
    ALREADY_COMMITTED = "already committed"
    LEFT_TO_SPARK = "left to Spark"


def delta_rs_writes(table: DeltaTable, writer_features: frozenset[str] = DELTA_RS_WRITER_FEATURES,
                    reader_features: frozenset[str] = frozenset()) -> bool:
    """Whether delta-rs may write the table: reader protocol 1 (or 3 with ``reader_features`` only),
    and writer protocol 2 (4 where the change feed is allowed: its legacy version) or table features
    among ``writer_features``."""
    protocol = table.protocol()
    if protocol.min_reader_version > 1 and not (
            protocol.min_reader_version == 3 and set(protocol.reader_features or ()) <= reader_features):
        return False
    if protocol.min_writer_version <= (4 if "changeDataFeed" in writer_features else 2):
        return True
    return protocol.min_writer_version == 7 and set(protocol.writer_features or ()) <= writer_features


def replace_rows(location: str, s3: S3Settings | None, data: pa.Table, predicate: str, *, partition_by: Sequence[str],
                 txn_app: str, txn_version: int = 0, user_metadata: str | None = None) -> Commit:
    """Replace the rows matching ``predicate`` (a :data:`binlake.lake.sql_text.DELTA_RS` predicate) with
    ``data`` (Arrow) in one delta-rs commit of the existing table at ``location``;
    ``ALREADY_COMMITTED`` when a commit of ``txn_app`` at ``txn_version`` or later is in the log
    already (written, skipped).

    The same commit as a Spark ``replaceWhere`` write tied to a run: a Delta ``txn`` action
    (``txn_app``, ``txn_version``), skipped when the log holds it as Spark skips it, and
    ``userMetadata``. Why not Spark for a few rows: a Spark Delta commit costs seconds of JVM CPU
    whatever its size, a delta-rs one a small part of that (issue 13). The commit is a
    :func:`binlake.lake.leases.committed_write` like every Spark write (the table's commit lock on S3,
    the fence); a concurrent metadata change (local tables) is retried, the txn check included.
    ``LEFT_TO_SPARK``, before writing anything, for a table whose protocol delta-rs should not
    write; delta-rs refuses a NULL in a NOT NULL column, as Spark does.
    """
    from deltalake import write_deltalake

    def commit(table: DeltaTable | None, properties: CommitProperties) -> None:
        assert table is not None
        write_deltalake(table, data, mode="overwrite", predicate=predicate, partition_by=list(partition_by) or None,
                        commit_properties=properties)

    return _commit_once(location, s3, commit, txn_app=txn_app, txn_version=txn_version, user_metadata=user_metadata)


def append_files(location: str, s3: S3Settings | None, files: Sequence[DataFile], *, partition_by: Sequence[str],
                 txn_app: str, txn_version: int = 0, user_metadata: str | None = None) -> Commit:
    """Commit ``files``, Parquet files already written in the table's folder
    (:mod:`binlake.lake.delta_files`), to the existing table at ``location`` as one ``add``-only commit,
    tied to the run as :func:`replace_rows` is (txn id skipped when the log holds it, ``userMetadata``,
    the S3 commit lock, retries). ``ALREADY_COMMITTED`` when the txn was committed already.

    Only for rows the table cannot hold yet (the caller checks): an append replaces nothing.
    ``LEFT_TO_SPARK`` before committing for a protocol delta-rs should not write; raises
    :class:`ValueError` when a file has NULLs in a NOT NULL column (which Spark would refuse).
    """
    from deltalake.transaction import AddAction, RemoveAction

    now = int(time.time() * 1000)
    actions: list[AddAction | RemoveAction] = [
        AddAction(f.path, f.size, dict(f.partition_values), now, True, f.stats) for f in files]

    def commit(table: DeltaTable | None, properties: CommitProperties) -> None:
        assert table is not None
        _check_not_null(location, table, files)
        table.create_write_transaction(actions, mode="append", schema=table.schema(),
                                       partition_by=list(partition_by) or None, commit_properties=properties)

    return _commit_once(location, s3, commit, txn_app=txn_app, txn_version=txn_version, user_metadata=user_metadata)


def _check_not_null(location: str, table: DeltaTable, files: Sequence[DataFile]) -> None:
    """Refuse files whose stats count NULLs in a column the table declares NOT NULL."""
    required = [f.name for f in table.schema().fields if not f.nullable]
    for f in files:
        nulls = json.loads(f.stats).get("nullCount", {})
        bad = [c for c in required if nulls.get(c)]
        if bad:
            raise ValueError(f"{location}: {f.path} has NULLs in NOT NULL column(s) {', '.join(bad)}")


def overwrite_table(location: str, s3: S3Settings | None, data: pa.Table, *, configuration: Mapping[str, str],
                    user_metadata: str | None) -> Commit:
    """Replace the whole table at ``location`` with ``data`` and its schema (created with
    ``configuration`` when there is none yet): Spark's ``mode("overwrite")`` with ``overwriteSchema``,
    as one delta-rs commit under :func:`binlake.lake.leases.committed_write`. ``LEFT_TO_SPARK`` for an
    existing table whose protocol is beyond :data:`DELTA_RS_GOLD_WRITER_FEATURES`. Why: a gold table
    of a few rows costs a Spark Delta write seconds of JVM time (its snapshot is a Spark job), delta-rs
    milliseconds (issue 36)."""
    from deltalake import write_deltalake

    def commit(table: DeltaTable | None, properties: CommitProperties) -> None:
        target = delta_uri(location) if table is None else table
        write_deltalake(target, data, mode="overwrite", schema_mode="overwrite",
                        configuration=dict(configuration) if table is None else None,
                        storage_options=locked_storage_options(location, s3) if table is None else None,
                        commit_properties=properties)

    return _commit_once(location, s3, commit, txn_app=None, user_metadata=user_metadata, create=True,
                        features=(DELTA_RS_GOLD_WRITER_FEATURES, DELTA_RS_GOLD_READER_FEATURES))


def merge_rows(location: str, s3: S3Settings | None, data: pa.Table, keys: Sequence[str], *,
               user_metadata: str | None) -> Commit:
    """Make the existing table at ``location`` hold exactly ``data``, matched on ``keys``: rows whose
    values differ are updated, new keys inserted, keys not in ``data`` deleted; an unchanged row is
    not rewritten into the change feed. The delta-rs form of gold's ``MERGE INTO ... WHEN MATCHED AND
    <a value differs> THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT * WHEN NOT MATCHED BY SOURCE
    THEN DELETE``; ``data`` has the table's schema. ``LEFT_TO_SPARK`` as :func:`overwrite_table`, and
    for a column name delta-rs's SQL parser cannot take (one holding a back-quote)."""
    from binlake.lake.sql_text import delta_rs_identifier

    if any("`" in name for name in data.column_names):
        return Commit.LEFT_TO_SPARK
    on = " AND ".join(f"t.{delta_rs_identifier(k)} = s.{delta_rs_identifier(k)}" for k in keys)
    # null-safe equality: DataFusion 48 plans IS NOT DISTINCT FROM on a BINARY or ARRAY column as
    # an error, the coalesce of = and both-NULL on every type
    same = " AND ".join(f"coalesce(t.{q} = s.{q}, t.{q} IS NULL AND s.{q} IS NULL)"
                        for q in map(delta_rs_identifier, data.column_names))

    def commit(table: DeltaTable | None, properties: CommitProperties) -> None:
        assert table is not None
        (table.merge(data, predicate=on, source_alias="s", target_alias="t", commit_properties=properties)
         .when_matched_update_all(predicate=f"NOT ({same})")
         .when_not_matched_insert_all()
         .when_not_matched_by_source_delete()
         .execute())

    return _commit_once(location, s3, commit, txn_app=None, user_metadata=user_metadata,
                        features=(DELTA_RS_GOLD_WRITER_FEATURES, DELTA_RS_GOLD_READER_FEATURES))


def _commit_once(location: str, s3: S3Settings | None, commit: Callable[[DeltaTable | None, CommitProperties], None],
                 *, txn_app: str | None, txn_version: int = 0, user_metadata: str | None, create: bool = False,
                 features: tuple[frozenset[str], frozenset[str]] = (DELTA_RS_WRITER_FEATURES, frozenset())) -> Commit:
    """Run ``commit(table, commit_properties)`` once per ``(txn_app, txn_version)``: a
    :func:`binlake.lake.leases.committed_write` (commit lock, fence, retried on a commit conflict),
    skipped when the log holds the txn. Without ``txn_app`` the commit is tied to no run (a write
    whose result is a function of its input: a re-run writes the same). ``create``: with no table
    at ``location`` yet, ``commit`` gets None and creates it; else the table must exist.

    The table is opened with :func:`open_delta_table`: inside :func:`reused_delta_tables` (a task's
    batch of sources) the snapshot the step read is brought up to date (the commits since) instead of
    the log being read again from its last checkpoint for every commit (bench/RESULTS.md, session
    32). Each attempt, the first and each retry after a conflict, sees the latest version."""
    from deltalake import CommitProperties, Transaction
    from deltalake.exceptions import CommitFailedError, TableNotFoundError

    from binlake.lake.leases import CommitFence, committed_write

    metadata = {"userMetadata": user_metadata} if user_metadata is not None else None
    transactions = None if txn_app is None else [Transaction(txn_app, txn_version)]

    def attempt(fence: CommitFence) -> Commit:
        table = open_delta_table(location, s3)
        if table is None and not create:
            raise TableNotFoundError(f"no Delta table at {location}")
        if table is not None and not delta_rs_writes(table, *features):
            log.info("%s: protocol %s: delta-rs leaves the table to Spark", location, table.protocol())
            return Commit.LEFT_TO_SPARK
        done = None if table is None or txn_app is None else table.transaction_version(txn_app)
        if done is not None and done >= txn_version:
            log.info("%s: %s (version %d) is committed already", location, txn_app, done)
            return Commit.ALREADY_COMMITTED
        fence.check()
        commit(table, CommitProperties(custom_metadata=metadata, app_transactions=transactions))
        return Commit.COMMITTED

    return committed_write(location, s3, attempt, what=f"delta-rs commit to {location}",
                           retryable=lambda exc: isinstance(exc, CommitFailedError), attempts=REPLACE_ATTEMPTS)
