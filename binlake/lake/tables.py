"""The registry of binlake's Delta tables: the one place that says what each table is.

Why one registry: table names (``bronze.events``), their folders under the warehouse, their
columns, keys and partitioning must not drift between the writers (the Spark jobs, which derive
their ``StructType`` s from here in :mod:`spark_jobs.schemas`; the ingest's executors and delta-rs,
which write the Arrow schemas of :attr:`TableSpec.arrow_schema`), the readers (``binlake sql``, the
demo summary, the table digests) and docs/tables.md. Add a table here and every one of them knows it.

Column types are Spark SQL type names (``BIGINT``, ``ARRAY<STRING>`` ...); this module stays free
of pyspark. Gold tables (``gold.<source>__<db>__<table>``) are made per source table at run time:
:func:`gold_table` describes one, and ``meta.gold_status`` lists the ones a warehouse holds.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from binlake.errors import BinlakeError

if TYPE_CHECKING:
    import pyarrow as pa

STRING, BIGINT, INT, BOOLEAN = "STRING", "BIGINT", "INT", "BOOLEAN"
TIMESTAMP, DATE, BINARY = "TIMESTAMP", "DATE", "BINARY"
STRING_ARRAY = "ARRAY<STRING>"  # elements never NULL
STRING_MAP = "MAP<STRING,STRING>"  # values may be NULL (SQL NULL in a row image)
#: the Delta table property naming the columns with data-skipping statistics
STATS_COLUMNS_PROPERTY = "delta.dataSkippingStatsColumns"
#: the Delta table property saying every how many commits a writer writes a checkpoint
CHECKPOINT_INTERVAL_PROPERTY = "delta.checkpointInterval"
#: :data:`CHECKPOINT_INTERVAL_PROPERTY` of binlake's own tables (Spark's default, written down: see
#: :attr:`TableSpec.properties`)
CHECKPOINT_INTERVAL = "10"


def arrow_type(type_name: str) -> pa.DataType:
    """The Arrow type of a registry type name: what rows written without Spark hold (TIMESTAMP is
    UTC microseconds, as Spark's Arrow conversion has it)."""
    import pyarrow as pa

    if type_name == STRING_ARRAY:
        return pa.list_(pa.field("element", pa.string(), nullable=False))
    if type_name == STRING_MAP:
        return pa.map_(pa.string(), pa.string())
    return {
        STRING: pa.string(), BIGINT: pa.int64(), INT: pa.int32(), BOOLEAN: pa.bool_(),
        TIMESTAMP: pa.timestamp("us", tz="UTC"), DATE: pa.date32(), BINARY: pa.binary(),
    }[type_name]


@dataclass(frozen=True)
class Column:
    """One column: name, Spark SQL type name, whether it may be NULL, and what it holds."""

    name: str
    type: str
    nullable: bool
    comment: str

    def ddl(self) -> str:
        return f"{self.name} {self.type}" + ("" if self.nullable else " NOT NULL")


@dataclass(frozen=True)
class TableSpec:
    """A Delta table ``database.name`` stored at ``<warehouse>/<database>/<name>``.

    ``columns`` is empty for a gold table (its columns follow the source table's schema).
    """

    database: str
    name: str
    description: str
    columns: tuple[Column, ...] = ()
    partition_by: tuple[str, ...] = ("source",)
    key: tuple[str, ...] = ()
    #: columns readers filter on besides the key (``file_seq``, ``db`` ...): Delta keeps
    #: data-skipping statistics on them (:attr:`stats_columns`)
    filters: tuple[str, ...] = ()

    @property
    def full_name(self) -> str:
        return f"{self.database}.{self.name}"

    @property
    def path(self) -> str:
        """Folder of the table, relative to the warehouse."""
        return f"{self.database}/{self.name}"

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def stats_columns(self) -> tuple[str, ...]:
        """The columns Delta collects data-skipping statistics on (min, max, NULL count per data
        file): the key's and the :attr:`filters`, partition columns aside (Delta has their values
        in the log already); empty for a table without declared columns (gold: Delta's default).

        Why not Delta's default, the first 32 columns: the writer then folds every row's wide
        text (``fields`` JSON, row images, SQL) into min/max aggregates that no query uses, a
        large share of an ingest's JVM CPU (issue 13); ``replaceWhere`` on ``file`` and the readers'
        filters only need these.
        """
        wanted = {c for c in self.key + self.filters if c not in self.partition_by}
        return tuple(c for c in self.column_names if c in wanted)

    @property
    def properties(self) -> dict[str, str]:
        """Delta table properties binlake sets on the table: ``delta.dataSkippingStatsColumns``, and
        for a table with declared columns a checkpoint every :data:`CHECKPOINT_INTERVAL` commits.

        Why the interval, Spark's default: most commits are delta-rs's now (the meta tables, a
        small night's row tables), whose default is 100, and every reader that opens a table (a
        task process, each source of a fleet) reads each commit since the last checkpoint: with
        one commit per source and night, a fleet's tables were read commit by commit, most of the
        object store's requests (bench/RESULTS.md, session 32)."""
        if not self.columns:
            return {}
        cols = self.stats_columns
        return {CHECKPOINT_INTERVAL_PROPERTY: CHECKPOINT_INTERVAL, **({STATS_COLUMNS_PROPERTY: ",".join(cols)} if cols else {})}

    def ddl(self) -> str:
        """The columns as Spark DDL text (``source STRING NOT NULL, ...``)."""
        return ", ".join(c.ddl() for c in self.columns)

    @cached_property
    def arrow_schema(self) -> pa.Schema:
        """The columns as a pyarrow schema, every field nullable: rows written without Spark are
        checked against NOT NULL by Delta when they are committed, as Spark-built rows are."""
        import pyarrow as pa

        return pa.schema([pa.field(c.name, arrow_type(c.type)) for c in self.columns])

    def location(self, warehouse: str) -> str:
        """Absolute location of the table under ``warehouse`` (local folder or object-store URI)."""
        return f"{warehouse.rstrip('/')}/{self.path}"


_FILE_COLUMNS = (
    Column("source", STRING, False, "source server name from the configuration"),
    Column("file", STRING, False, "binlog object name (basename), e.g. binlog.000042"),
    Column("file_seq", BIGINT, True, "numbered-series position parsed from the file name (42)"),
)

BRONZE_EVENTS = TableSpec(
    'bronze', 'events',
    'One row per binlog event, including the events inside TRANSACTION_PAYLOAD.',
    columns=_FILE_COLUMNS + (
        Column('pos', BIGINT, False, 'byte offset of the event in the file (for embedded events: of their TRANSACTION_PAYLOAD)'),
        Column('payload_index', INT, True, 'NULL for top-level events; 0.. for events inside a TRANSACTION_PAYLOAD'),
        Column('payload_offset', BIGINT, True, 'offset inside the uncompressed payload (embedded events only)'),
        Column('next_pos', BIGINT, True, 'pos + event_size (top-level) / next offset in the payload (embedded)'),
        Column('type_code', INT, False, 'event type code'),
        Column('event_type', STRING, False, 'event type name, e.g. WRITE_ROWS_V2, MARIA_GTID, UNKNOWN_200'),
        Column('event_time', TIMESTAMP, True, 'header timestamp (UTC, second precision)'),
        Column('server_id', BIGINT, True, 'header server_id'),
        Column('event_size', BIGINT, True, 'header event size in bytes'),
        Column('log_pos', BIGINT, True, 'raw header log_pos (end position as the server wrote it)'),
        Column('flags', INT, True, 'raw header flags'),
        Column('checksum', STRING, False, "'ok', 'bad' (CRC32 mismatch, kept), or 'none' (no checksums / embedded)"),
        Column('gtid', STRING, True, 'GTID of the enclosing transaction: uuid:gno, uuid:tag:gno, d-s-n (MariaDB), ANONYMOUS'),
        Column('trx_pos', BIGINT, True,
               'pos of the event that opened the enclosing transaction (joins silver.transactions.start_pos)'),
        Column('db', STRING, True, 'database of a QUERY / TABLE_MAP / rows event'),
        Column('table_name', STRING, True, 'table of a TABLE_MAP / rows event'),
        Column('fields', STRING, True,
               "the event's own decoded fields as JSON (event.fields()); for a rows event without "
               "its row images: row_count and row_images = 'silver.row_changes' in place of rows"),
        Column('raw', BINARY, True, 'raw event bytes (only when ingest keep_raw is on)'),
        Column('event_date', DATE, True, 'UTC date of event_time (partition column)'),
    ),
    partition_by=('source', 'event_date'),
    key=('source', 'file', 'pos', 'payload_index'),
    filters=('file_seq', 'db', 'table_name', 'event_type'),
)

BRONZE_QUARANTINE = TableSpec(
    'bronze', 'quarantine',
    'Everything that failed to decode: one row per failed event, range or file.',
    columns=_FILE_COLUMNS + (
        Column('pos', BIGINT, True, 'offset of the event/structure at fault (NULL if unknown)'),
        Column('scope', STRING, False,
               "'event' (one bad event skipped by its own size, decoding went on), 'skipped' (bytes "
               "stepped over to the next header that checks out, or to the end), 'tail' (truncated tail), "
               "'file' or 'range' (could not read/decode on), 'value' (integers that do not fit their "
               "column, stored as NULL in a row that was kept)"),
        Column('type_code', INT, True, 'event type code when known'),
        Column('event_type', STRING, True, 'event type name when known'),
        Column('error_class', STRING, False, 'exception class, e.g. TruncatedEventError'),
        Column('error_message', STRING, False, 'error message'),
        Column('range_start', BIGINT, True,
               "'event'/'skipped': first skipped byte; else start of the byte range the task decoded"),
        Column('range_end', BIGINT, True,
               "'event'/'skipped': end of the skipped bytes (exclusive); else end of the byte range the "
               "task decoded (NULL = end of file)"),
        Column('raw_head', BINARY, True,
               "'event'/'skipped': the skipped bytes (at most 64 KiB); else up to 256 bytes from the offset at fault"),
        Column('run_id', STRING, True, 'ingest run that produced the row'),
    ),
    partition_by=('source',),
    key=('source', 'file', 'pos', 'scope'),
    filters=('file_seq',),
)

SILVER_TRANSACTIONS = TableSpec(
    'silver', 'transactions',
    'One row per transaction (GTID / anonymous GTID / MariaDB GTID / BEGIN..COMMIT group / standalone statement).',
    columns=_FILE_COLUMNS + (
        Column('start_pos', BIGINT, False, 'pos of the first event of the transaction (GTID event, or BEGIN)'),
        Column('end_pos', BIGINT, True, 'next_pos of the last event (XID / COMMIT / DDL)'),
        Column('gtid', STRING, True, 'GTID text (uuid:gno, uuid:tag:gno, d-s-n); NULL for anonymous / no GTID'),
        Column('gtid_kind', STRING, False, "'GTID', 'TAGGED', 'ANONYMOUS', 'MARIADB' or 'NONE'"),
        Column('uuid', STRING, True, 'MySQL source UUID'),
        Column('tag', STRING, True, 'MySQL GTID tag (8.4+), NULL when untagged'),
        Column('gno', BIGINT, True, 'MySQL GNO'),
        Column('mariadb_domain_id', BIGINT, True, 'MariaDB GTID domain'),
        Column('mariadb_server_id', BIGINT, True, 'MariaDB GTID server_id'),
        Column('mariadb_seq_no', BIGINT, True, 'MariaDB GTID sequence number'),
        Column('last_committed', BIGINT, True, 'logical clock: last_committed'),
        Column('sequence_number', BIGINT, True, 'logical clock: sequence_number'),
        Column('begin_time', TIMESTAMP, True, 'timestamp of the first event'),
        Column('commit_time', TIMESTAMP, True, 'timestamp of the closing event'),
        Column('original_commit_time', TIMESTAMP, True, 'original_commit_timestamp (microseconds, MySQL 8.0.1+)'),
        Column('immediate_commit_time', TIMESTAMP, True, 'immediate_commit_timestamp'),
        Column('original_server_version', BIGINT, True, 'original_server_version (MySQL 8.0.14+)'),
        Column('immediate_server_version', BIGINT, True, 'immediate_server_version'),
        Column('transaction_length', BIGINT, True, 'transaction_length from the GTID event'),
        Column('server_id', BIGINT, True, 'header server_id of the opening event'),
        Column('xid', BIGINT, True, 'XID of the commit (NULL for DDL / non-transactional)'),
        Column('events', INT, False, 'number of events in the transaction (embedded events counted)'),
        Column('row_changes', BIGINT, False, 'number of row images changed'),
        Column('statements', STRING_ARRAY, False,
               'SQL of its QUERY events (BEGIN/COMMIT left out), and ROWS_QUERY / ANNOTATE_ROWS texts'),
        Column('tables', STRING_ARRAY, False, 'db.table touched by its rows events (sorted, distinct)'),
        Column('kind', STRING, False, "'DML', 'DDL', 'MIXED' or 'EMPTY'"),
        Column('end_event', STRING, True, 'closing event: XID, COMMIT, ROLLBACK, DDL, XA_PREPARE; NULL when cut'),
        Column('complete', BOOLEAN, False,
               'false when the file ends (truncated) or the next transaction starts before it closes'),
        Column('commit_date', DATE, True, 'UTC date of commit_time (or begin_time) (partition column)'),
    ),
    partition_by=('source', 'commit_date'),
    key=('source', 'file', 'start_pos'),
    filters=('file_seq', 'gtid', 'kind'),
)

SILVER_ROW_CHANGES = TableSpec(
    'silver', 'row_changes',
    'One row per changed row of a rows event, in binlog order.',
    columns=_FILE_COLUMNS + (
        Column('pos', BIGINT, False, 'pos of the rows event (of its TRANSACTION_PAYLOAD when embedded)'),
        Column('payload_index', INT, True, 'index of the rows event inside its TRANSACTION_PAYLOAD'),
        Column('row_index', INT, False, 'index of the row inside the rows event'),
        Column('gtid', STRING, True, 'GTID of the transaction'),
        Column('trx_pos', BIGINT, True, 'start_pos of the transaction (joins silver.transactions)'),
        Column('commit_time', TIMESTAMP, True, 'commit time of the transaction (event time of XID/COMMIT)'),
        Column('event_time', TIMESTAMP, True, 'timestamp of the rows event'),
        Column('server_id', BIGINT, True, 'header server_id of the rows event'),
        Column('db', STRING, False, 'database'),
        Column('table_name', STRING, False, 'table'),
        Column('operation', STRING, False, "'insert', 'update' or 'delete'"),
        Column('before', STRING, True,
               'before image as a JSON object, column name -> typed JSON value (integers to 2^53 as numbers, '
               'larger ones, DECIMAL and temporal as strings, VECTORs as lists; a key with null = SQL NULL, '
               'a key absent = not in the image); NULL for inserts. docs/row_values.md'),
        Column('after', STRING, True, 'after image, same encoding; NULL for deletes'),
        Column('event_type', STRING, False, 'rows event type, e.g. UPDATE_ROWS_V2'),
        Column('commit_date', DATE, True, 'UTC date of commit_time (partition column)'),
    ),
    partition_by=('source', 'commit_date'),
    key=('source', 'file', 'pos', 'payload_index', 'row_index'),
    filters=('file_seq', 'db', 'table_name'),
)

SILVER_STATEMENTS = TableSpec(
    'silver', 'statements',
    'QUERY events (DDL and statement-based changes) except BEGIN / COMMIT markers.',
    columns=_FILE_COLUMNS + (
        Column('pos', BIGINT, False, 'pos of the QUERY event'),
        Column('payload_index', INT, True, 'index inside a TRANSACTION_PAYLOAD'),
        Column('gtid', STRING, True, 'GTID of the transaction'),
        Column('trx_pos', BIGINT, True, 'start_pos of the transaction'),
        Column('event_time', TIMESTAMP, True, 'event timestamp'),
        Column('server_id', BIGINT, True, 'header server_id'),
        Column('db', STRING, True, 'default database of the statement'),
        Column('sql', STRING, True, 'statement text'),
        Column('kind', STRING, False, "'DDL', 'DML', 'TCL', 'DCL' or 'OTHER' (by leading keyword)"),
        Column('thread_id', BIGINT, True, 'thread id'),
        Column('exec_time', BIGINT, True, 'execution time in seconds'),
        Column('error_code', INT, True, 'error code'),
        Column('status_vars', STRING, True, 'decoded status variables as JSON'),
        Column('event_type', STRING, False, 'QUERY or MARIA_QUERY_COMPRESSED'),
        Column('event_date', DATE, True, 'UTC date of event_time (partition column)'),
    ),
    partition_by=('source', 'event_date'),
    key=('source', 'file', 'pos', 'payload_index'),
    filters=('file_seq', 'db', 'kind'),
)

META_BINLOG_FILES = TableSpec(
    'meta', 'binlog_files',
    'Per-file facts gathered at ingestion (what reconciliation reads).',
    columns=_FILE_COLUMNS + (
        Column('uri', STRING, False, 'object URI or local path'),
        Column('size', BIGINT, True, 'object size in bytes'),
        Column('etag', STRING, True, 'object etag at ingestion'),
        Column('fingerprint', STRING, True, 'content digest (sha1 over the decoded byte ranges)'),
        Column('flavor', STRING, False, "'mysql' or 'mariadb'"),
        Column('binlog_version', INT, True, 'binlog format version (1, 3, 4)'),
        Column('server_version', STRING, True, 'server version from FORMAT_DESCRIPTION'),
        Column('server_id', BIGINT, True, 'server_id of the FORMAT_DESCRIPTION'),
        Column('checksum_alg', STRING, True, "'CRC32' or 'OFF'"),
        Column('previous_gtids', STRING, True,
               'PREVIOUS_GTIDS (MySQL) or GTID_LIST as domain intervals (MariaDB), canonical text'),
        Column('previous_gtids_raw', STRING, True, 'MariaDB GTID_LIST as written (d-s-n list)'),
        Column('contained_gtids', STRING, False, 'canonical GTID set of the transactions in the file'),
        Column('duplicate_gtids', STRING, False, 'GTIDs occurring more than once in the file'),
        Column('first_gtid', STRING, True, 'first GTID in the file'),
        Column('last_gtid', STRING, True, 'last GTID in the file'),
        Column('transactions', BIGINT, False, 'transactions in the file'),
        Column('events', BIGINT, False, 'events decoded (embedded included)'),
        Column('first_event_time', TIMESTAMP, True, 'earliest event timestamp'),
        Column('last_event_time', TIMESTAMP, True, 'latest event timestamp'),
        Column('closing_event', STRING, True, "'ROTATE', 'STOP' or NULL (truncated / active file)"),
        Column('next_file', STRING, True, 'file named by the closing ROTATE'),
        Column('truncated', BOOLEAN, False, 'the file ends inside an event'),
        Column('decoded_bytes', BIGINT, False, 'bytes walked by the decoder'),
        Column('quarantined', BIGINT, False, 'rows this file put in bronze.quarantine'),
        Column('ranges', INT, False, 'byte ranges (tasks) the file was split into'),
    ),
    partition_by=('source',),
    key=('source', 'file'),
    filters=('file_seq', 'next_file'),
)

META_INGESTED_FILES = TableSpec(
    'meta', 'ingested_files',
    'Ingestion log: one row per (source, file), replaced when the file is re-ingested.',
    columns=_FILE_COLUMNS + (
        Column('uri', STRING, False, 'object URI or local path'),
        Column('size', BIGINT, True, 'object size at ingestion'),
        Column('etag', STRING, True, 'object etag at ingestion (a new etag means: ingest again)'),
        Column('run_id', STRING, False, 'run that ingested the file'),
        Column('status', STRING, False, "'ok', 'partial' (quarantined parts) or 'failed'"),
        Column('events', BIGINT, False, 'rows written to bronze.events'),
        Column('transactions', BIGINT, False, 'rows written to silver.transactions'),
        Column('row_changes', BIGINT, False, 'rows written to silver.row_changes'),
        Column('statements', BIGINT, False, 'rows written to silver.statements'),
        Column('quarantined', BIGINT, False, 'rows written to bronze.quarantine'),
    ),
    partition_by=('source',),
    key=('source', 'file'),
    filters=('file_seq', 'status'),
)

META_GTID_COVERAGE = TableSpec(
    'meta', 'gtid_coverage',
    'Per source and GTID key (uuid + tag, or MariaDB domain): merged GNO intervals the archive holds.',
    columns=(
        Column('source', STRING, False, 'source name'),
        Column('flavor', STRING, False, "'mysql' or 'mariadb'"),
        Column('sid', STRING, False, 'MySQL server UUID, or MariaDB domain id'),
        Column('tag', STRING, False, "GTID tag ('' when untagged)"),
        Column('gno_start', BIGINT, False, 'first GNO / seq_no of the interval'),
        Column('gno_end', BIGINT, False, 'last GNO / seq_no of the interval (inclusive)'),
        Column('transactions', BIGINT, False, 'gno_end - gno_start + 1'),
        Column('first_file', STRING, False, 'file holding gno_start'),
        Column('last_file', STRING, False, 'file holding gno_end'),
        Column('files', INT, False, 'files contributing to the interval'),
        Column('gtid_set', STRING, False, 'the interval as GTID-set text'),
        Column('first_commit_time', TIMESTAMP, True, 'commit time of the interval\'s first transaction (silver.transactions)'),
        Column('last_commit_time', TIMESTAMP, True, 'commit time of the interval\'s last transaction (silver.transactions)'),
    ),
    partition_by=('source',),
    key=('source', 'sid', 'tag', 'gno_start'),
)

META_GTID_RECONCILIATION = TableSpec(
    'meta', 'gtid_reconciliation',
    'Per file in ROTATE-chain order: its PREVIOUS_GTIDS / GTID_LIST against what the archive says precedes it.',
    columns=(
        Column('source', STRING, False, 'source name'),
        Column('chain_index', INT, False, '0-based position in the chain walk (duplicates last)'),
        Column('file', STRING, False, 'file'),
        Column('seq', BIGINT, True, 'numbered-series position'),
        Column('flavor', STRING, False, "'mysql' or 'mariadb'"),
        Column('server_id', BIGINT, True, 'server_id of the file'),
        Column('status', STRING, False, "'OK', 'GAP', 'OVERLAP', 'DUPLICATE' or 'CHAIN_BREAK'"),
        Column('previous_file', STRING, True, 'predecessor in the chain'),
        Column('expected_file', STRING, True, "what the predecessor's ROTATE named"),
        Column('previous_gtids', STRING, True, "this file's PREVIOUS_GTIDS (MariaDB: GTID_LIST as intervals)"),
        Column('expected_gtids', STRING, True, "predecessor's PREVIOUS_GTIDS + its GTIDs"),
        Column('missing_gtids', STRING, False, "GTIDs the server executed that no archived file holds ('' if none)"),
        Column('extra_gtids', STRING, False, "GTIDs in the archive twice or not recorded as preceding ('' if none)"),
        Column('contained_gtids', STRING, False, 'GTIDs inside this file'),
        Column('missing_files', STRING_ARRAY, False, 'file names the ROTATE chain / numbering says are missing'),
        Column('duplicate_of', STRING, True, 'for a re-upload of identical bytes: the original file'),
        Column('truncated', BOOLEAN, False, 'the file ends inside an event'),
        Column('closing_event', STRING, True, "'ROTATE', 'STOP' or NULL"),
        Column('detail', STRING, False, 'human-readable findings'),
    ),
    partition_by=('source',),
    key=('source', 'file'),
    filters=('status',),
)

SILVER_SCHEMA_HISTORY = TableSpec(
    "silver", "schema_history",
    "Every schema version of every source table, with the binlog coordinates from which it holds (gold).",
    columns=(
        Column("source", STRING, False, "source name"),
        Column("db", STRING, False, "database"),
        Column("table_name", STRING, False, "table"),
        Column("version", INT, False, "1.. per (source, db, table_name)"),
        Column("origin", STRING, False, "'seed' (initial schema text) or 'ddl' (a statement in the archive)"),
        Column("file", STRING, True, "file of the statement (NULL for a seed)"),
        Column("file_seq", BIGINT, True, "numbered-series position of that file"),
        Column("pos", BIGINT, True, "pos of the statement"),
        Column("payload_index", INT, True, "index inside a TRANSACTION_PAYLOAD"),
        Column("statement", STRING, True, "the DDL text"),
        Column("columns", STRING, True, "JSON list of the columns; NULL when unknown from here on"),
        Column("primary_key", STRING_ARRAY, True, "primary key columns"),
        Column("renames", STRING, True, "JSON of CHANGE / RENAME COLUMN pairs"),
        Column("dropped", BOOLEAN, False, "the table was dropped by this statement"),
        Column("warning", STRING, True, "why the statement or table could not be understood"),
    ),
    key=("source", "db", "table_name", "version"),
)

META_GOLD_STATUS = TableSpec(
    "meta", "gold_status",
    "Per gold table: how far it is complete, what its last run did, and where it lives.",
    columns=(
        Column("source", STRING, False, "source name"),
        Column("gold_table", STRING, False,
               "gold table name (<source>__<db>__<table>, or a [gold] union table; database gold)"),
        Column("db", STRING, False, "source database"),
        Column("table_name", STRING, False, "source table"),
        Column("location", STRING, False, "location of the gold Delta table"),
        Column("rows", BIGINT, False, "rows in the gold table"),
        Column("changes", BIGINT, False, "row changes the table's rows result from (every run's)"),
        Column("schema_version", INT, True, "latest silver.schema_history version of the table"),
        Column("last_file", STRING, True, "file of the latest change among current rows"),
        Column("last_pos", BIGINT, True, "pos of that change"),
        Column("last_gtid", STRING, True, "GTID of that change"),
        Column("last_commit_time", TIMESTAMP, True, "commit time of that change"),
        Column("archive_gtids", STRING, True, "the source's meta.gtid_coverage set"),
        Column("complete", BOOLEAN, True, "false after a GAP / CHAIN_BREAK; NULL when not reconciled"),
        Column("incomplete_since", STRING, True, "first file with a GAP or CHAIN_BREAK"),
        Column("seeded", BOOLEAN, False, "an initial schema text was given"),
        Column("write_mode", STRING, False, "'merge', 'overwrite', 'unchanged' or 'dropped'; a union part: "
               "'union' (replaced), 'merge' (touched keys merged), 'removed', 'unchanged' or 'failed'"),
        Column("warnings", STRING, True, "JSON: reason -> count"),
        Column("input_fingerprint", STRING, True, "digest of the table's silver inputs (equal: skipped)"),
        Column("run_id", STRING, False, "run that wrote the row"),
        Column("updated_at", TIMESTAMP, False, "when the row was written"),
        # the replay state (docs/gold.md, "Incremental replay"); appended: older tables get them added
        Column("replay", STRING, True, "this run: 'full' (replayed from the table's whole history), 'incremental' "
               "(only the changes after replayed_through, on the rows they touch) or 'none' (nothing replayed)"),
        Column("replay_reason", STRING, True, "why the replay was full (e.g. an older file backfilled, a DDL)"),
        Column("replayed", BIGINT, True, "row changes this run fed to the replay (changes: all it holds)"),
        Column("replayed_through", STRING, True, "coordinates of the table's last TABLE_MAP / row change the "
               "table includes: JSON [file_seq, file, pos, payload_index, row_index]"),
        Column("table_version", BIGINT, True, "Delta version of the table after the run (an incremental run "
               "requires it unchanged; NULL for a union part)"),
        Column("schema_digest", STRING, True, "digest of the schema its rows were converted with"),
        Column("silver_version", BIGINT, True, "silver.row_changes version the run's fingerprints describe (the "
               "next run aggregates only the files added since; NULL after an only_tables run)"),
        Column("table_map", STRING, True, "a table without DDL: the best-informed TABLE_MAP its schema comes from "
               "and where it was seen (JSON; the next run compares only newer TABLE_MAPs with it)"),
        Column("schema_status", STRING, True, "NULL when the table's schema is known (DDL, seed or FULL row "
               "metadata); else why not, naming the table and the statement (seed it: [gold] seed_dumps)"),
    ),
    key=("source", "gold_table"),
)

META_MAINTENANCE_RUNS = TableSpec(
    "meta", "maintenance_runs",
    "Per maintenance run and table: what binlake_maintenance did (compaction, VACUUM, checkpoint) and its effect.",
    columns=(
        Column("source", STRING, False, "'*': maintenance works on whole tables (every source's partition)"),
        Column("run_id", STRING, False, "maintenance run"),
        Column("table_name", STRING, False, "table (bronze.events, gold.<name> ...)"),
        Column("engine", STRING, False, "'delta-rs' or 'spark' (a protocol delta-rs does not write)"),
        Column("actions", STRING_ARRAY, False, "what was done: zorder / cluster / compact, checkpoint, vacuum"),
        Column("cluster_by", STRING_ARRAY, False, "the columns files were clustered by"),
        Column("files_before", BIGINT, False, "live data files before"),
        Column("files_after", BIGINT, False, "live data files after"),
        Column("bytes_before", BIGINT, False, "bytes of the live data files before"),
        Column("bytes_after", BIGINT, False, "bytes of the live data files after"),
        Column("log_entries_before", BIGINT, False, "commit files in _delta_log before"),
        Column("log_entries_after", BIGINT, False, "commit files in _delta_log after"),
        Column("files_vacuumed", BIGINT, False, "files VACUUM deleted (-1: not counted, a Spark VACUUM)"),
        Column("retention_hours", BIGINT, False, "the VACUUM retention"),
        Column("millis", BIGINT, False, "wall time spent on the table (milliseconds)"),
        Column("started_at", TIMESTAMP, False, "when the table's maintenance started"),
    ),
    key=("source", "run_id", "table_name"),
)

GOLD_DATABASE = "gold"

TABLES: tuple[TableSpec, ...] = (
    BRONZE_EVENTS, BRONZE_QUARANTINE, SILVER_TRANSACTIONS, SILVER_ROW_CHANGES, SILVER_STATEMENTS,
    META_BINLOG_FILES, META_INGESTED_FILES, META_GTID_COVERAGE, META_GTID_RECONCILIATION,
    SILVER_SCHEMA_HISTORY, META_GOLD_STATUS, META_MAINTENANCE_RUNS,
)

DATABASES: tuple[str, ...] = (*dict.fromkeys(t.database for t in TABLES), GOLD_DATABASE)


def table(full_name: str) -> TableSpec:
    """Look a table up by ``database.name`` (KeyError if unknown); ``gold.*`` names included."""
    for spec in TABLES:
        if spec.full_name == full_name:
            return spec
    database, _, name = full_name.partition(".")
    if database == GOLD_DATABASE and name:
        return gold_table(name)
    raise KeyError(full_name)


def table_location(warehouse: str, full_name: str) -> str:
    """Location of ``full_name`` under ``warehouse``."""
    return table(full_name).location(warehouse)


class GoldNameError(BinlakeError, ValueError):
    """Two source tables would share one gold table name (or a source name cannot start one)."""


#: the suffix of a gold table's SCD2 history table (``spark_jobs.gold.tables.HISTORY_SUFFIX``)
_HISTORY_SUFFIX = "__history"


def gold_name_part(part: str) -> str:
    """One part of a gold table name: lower-case, anything but ``[a-z0-9_]`` as ``_``."""
    return re.sub(r"[^a-z0-9_]", "_", part.lower())


def gold_table_name(source: str, db: str, table_name: str) -> str:
    """``<source>__<db>__<table>``, each part lower-case with anything but ``[a-z0-9_]`` as ``_``.

    The scheme is kept as it always was (existing warehouses keep their names); what makes it
    safe is around it: the source part never holds ``__`` nor starts or ends with ``_``
    (config-checked source names; :class:`GoldNameError` here otherwise), so it ends at the
    first ``__`` and two sources never share a name; two tables of one source that do
    (``Orders``/``orders``, ``a__b.c``/``a.b__c``) are refused by :func:`check_gold_names`.
    """
    prefix = gold_name_part(source)
    if not prefix or "__" in prefix or prefix.startswith("_") or prefix.endswith("_"):
        raise GoldNameError(f"source name {source!r} cannot start a gold table name (gold.{prefix}__...): "
                            "its part must not hold '__' nor start or end with '_'")
    return "__".join((prefix, gold_name_part(db), gold_name_part(table_name)))


def check_gold_names(source: str, tables: Iterable[tuple[str, str]],
                     keeps_history: Callable[[str, str], bool] | None = None) -> dict[tuple[str, str], str]:
    """The gold table name of each ``(db, table)`` of ``source``; GoldNameError naming both tables
    when two would share a gold table (or one would be another's ``__history`` table), since each
    one's gold step would then replace the other's rows. MySQL table names are case-sensitive and
    may hold ``__``; binlake's gold names are lower-case and join parts with ``__``."""
    names: dict[tuple[str, str], str] = {}
    owner: dict[str, tuple[str, str]] = {}
    for key in sorted(set(tables)):
        name = gold_table_name(source, *key)
        names[key] = name
        taken = [(name, owner.get(name))]
        if keeps_history is not None and keeps_history(*key):
            taken.append((name + _HISTORY_SUFFIX, owner.get(name + _HISTORY_SUFFIX)))
        for gold, other in taken:
            if other is not None and other != key:
                raise GoldNameError(
                    f"source {source!r}: tables {_quoted(other)} and {_quoted(key)} both map to gold.{gold} "
                    "(gold names are lower-case, anything but letters, digits and '_' becomes '_', parts "
                    "are joined by '__'); binlake cannot keep both in gold: leave one out of gold "
                    "(run_gold's only_tables) or rename it in the source database")
            owner[gold] = key
    return names


def _quoted(key: tuple[str, str]) -> str:
    return ".".join(f"`{part}`" for part in key)


def gold_table(name: str) -> TableSpec:
    """The gold table ``gold.<name>`` (columns: the source table's, see docs/gold.md)."""
    return TableSpec(GOLD_DATABASE, name, "Current rows of one source table, typed (gold).", partition_by=())


def markdown(spec: TableSpec) -> str:
    """The table as docs/tables.md documents it (heading, description, key, columns)."""
    lines = [f"### `{spec.full_name}`", "", spec.description, "",
             f"Key: ({', '.join(spec.key)}) · Partitioned by: {', '.join(spec.partition_by) or 'nothing'}"
             + (f" · Statistics on: {', '.join(spec.stats_columns)}" if spec.stats_columns else ""), "",
             "| column | type | null | meaning |", "|---|---|---|---|"]
    lines += [f"| `{c.name}` | {c.type.lower()} | {'yes' if c.nullable else 'no'} | {c.comment} |"
              for c in spec.columns]
    return "\n".join(lines) + "\n"
