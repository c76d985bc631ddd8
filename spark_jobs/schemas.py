"""Spark schemas of every table the jobs write (the contracts of docs/tables.md).

Each table is declared once as a list of ``(column, type, nullable, comment)``; the Spark
``StructType`` (with column comments), the partition columns and the key columns come from
that declaration. ``records.py`` builds plain dicts with exactly these column names (its
tests check that), and ``ingest.py`` turns them into Arrow batches with
:func:`arrow_schema`. Importing this module needs pyspark but never starts Spark.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

S, L, I, B = StringType(), LongType(), IntegerType(), BooleanType()
TS, D, BIN = TimestampType(), DateType(), BinaryType()
STR_MAP = MapType(StringType(), StringType(), valueContainsNull=True)
STR_ARRAY = ArrayType(StringType(), containsNull=False)


@dataclass(frozen=True)
class TableSpec:
    """One table: logical name (as in ``binlake.tables``), columns, partitioning, keys."""

    name: str
    columns: tuple[tuple[str, DataType, bool, str], ...]
    partition_by: tuple[str, ...]
    key: tuple[str, ...]
    description: str

    @property
    def schema(self) -> StructType:
        return StructType([
            StructField(c, t, n, metadata={"comment": doc}) for c, t, n, doc in self.columns
        ])

    @property
    def column_names(self) -> list[str]:
        return [c for c, *_ in self.columns]


_FILE_COLS = (
    ("source", S, False, "source server name from the configuration"),
    ("file", S, False, "binlog object name (basename), e.g. binlog.000042"),
    ("file_seq", L, True, "numbered-series position parsed from the file name (42)"),
)

BRONZE_EVENTS = TableSpec(
    name="bronze.events",
    description="One row per binlog event, including the events inside TRANSACTION_PAYLOAD.",
    columns=_FILE_COLS + (
        ("pos", L, False, "byte offset of the event in the file (for embedded events: of their TRANSACTION_PAYLOAD)"),
        ("payload_index", I, True, "NULL for top-level events; 0.. for events inside a TRANSACTION_PAYLOAD"),
        ("payload_offset", L, True, "offset inside the uncompressed payload (embedded events only)"),
        ("next_pos", L, True, "pos + event_size (top-level) / next offset in the payload (embedded)"),
        ("type_code", I, False, "event type code"),
        ("event_type", S, False, "event type name, e.g. WRITE_ROWS_V2, MARIA_GTID, UNKNOWN_200"),
        ("event_time", TS, True, "header timestamp (UTC, second precision)"),
        ("server_id", L, True, "header server_id"),
        ("event_size", L, True, "header event size in bytes"),
        ("log_pos", L, True, "raw header log_pos (end position as the server wrote it)"),
        ("flags", I, True, "raw header flags"),
        ("checksum", S, False, "'ok', 'bad' (CRC32 mismatch, kept), or 'none' (no checksums / embedded)"),
        ("gtid", S, True, "GTID of the enclosing transaction: uuid:gno, uuid:tag:gno, d-s-n (MariaDB), ANONYMOUS"),
        ("trx_pos", L, True, "pos of the event that opened the enclosing transaction (joins silver.transactions.start_pos)"),
        ("db", S, True, "database of a QUERY / TABLE_MAP / rows event"),
        ("table_name", S, True, "table of a TABLE_MAP / rows event"),
        ("fields", S, True, "the event's own decoded fields as JSON (event.fields())"),
        ("raw", BIN, True, "raw event bytes (only when ingest keep_raw is on)"),
        ("event_date", D, True, "UTC date of event_time (partition column)"),
    ),
    partition_by=("source", "event_date"),
    key=("source", "file", "pos", "payload_index"),
)

BRONZE_QUARANTINE = TableSpec(
    name="bronze.quarantine",
    description="Everything that failed to decode: one row per failed event, range or file.",
    columns=_FILE_COLS + (
        ("pos", L, True, "offset of the event/structure at fault (NULL if unknown)"),
        ("scope", S, False, "'event' (one event skipped, decoding went on), 'tail' (truncated tail), 'file' or 'range' (could not read/decode on)"),
        ("type_code", I, True, "event type code when known"),
        ("event_type", S, True, "event type name when known"),
        ("error_class", S, False, "exception class, e.g. TruncatedEventError"),
        ("error_message", S, False, "error message"),
        ("range_start", L, True, "start of the byte range the task decoded"),
        ("range_end", L, True, "end of the byte range the task decoded (exclusive, NULL = end of file)"),
        ("raw_head", BIN, True, "up to 256 bytes from the offset at fault"),
        ("run_id", S, True, "ingest run that produced the row"),
    ),
    partition_by=("source",),
    key=("source", "file", "pos", "scope"),
)

SILVER_TRANSACTIONS = TableSpec(
    name="silver.transactions",
    description="One row per transaction (GTID / anonymous GTID / MariaDB GTID / BEGIN..COMMIT group / standalone statement).",
    columns=_FILE_COLS + (
        ("start_pos", L, False, "pos of the first event of the transaction (GTID event, or BEGIN)"),
        ("end_pos", L, True, "next_pos of the last event (XID / COMMIT / DDL)"),
        ("gtid", S, True, "GTID text (uuid:gno, uuid:tag:gno, d-s-n); NULL for anonymous / no GTID"),
        ("gtid_kind", S, False, "'GTID', 'TAGGED', 'ANONYMOUS', 'MARIADB' or 'NONE'"),
        ("uuid", S, True, "MySQL source UUID"),
        ("tag", S, True, "MySQL GTID tag (8.4+), NULL when untagged"),
        ("gno", L, True, "MySQL GNO"),
        ("mariadb_domain_id", L, True, "MariaDB GTID domain"),
        ("mariadb_server_id", L, True, "MariaDB GTID server_id"),
        ("mariadb_seq_no", L, True, "MariaDB GTID sequence number"),
        ("last_committed", L, True, "logical clock: last_committed"),
        ("sequence_number", L, True, "logical clock: sequence_number"),
        ("begin_time", TS, True, "timestamp of the first event"),
        ("commit_time", TS, True, "timestamp of the closing event"),
        ("original_commit_time", TS, True, "original_commit_timestamp (microseconds, MySQL 8.0.1+)"),
        ("immediate_commit_time", TS, True, "immediate_commit_timestamp"),
        ("original_server_version", L, True, "original_server_version (MySQL 8.0.14+)"),
        ("immediate_server_version", L, True, "immediate_server_version"),
        ("transaction_length", L, True, "transaction_length from the GTID event"),
        ("server_id", L, True, "header server_id of the opening event"),
        ("xid", L, True, "XID of the commit (NULL for DDL / non-transactional)"),
        ("events", I, False, "number of events in the transaction (embedded events counted)"),
        ("row_changes", L, False, "number of row images changed"),
        ("statements", STR_ARRAY, False, "SQL of its QUERY events (BEGIN/COMMIT left out), and ROWS_QUERY / ANNOTATE_ROWS texts"),
        ("tables", STR_ARRAY, False, "db.table touched by its rows events (sorted, distinct)"),
        ("kind", S, False, "'DML', 'DDL', 'MIXED' or 'EMPTY'"),
        ("end_event", S, True, "closing event: XID, COMMIT, ROLLBACK, DDL, XA_PREPARE; NULL when cut"),
        ("complete", B, False, "false when the file ends (truncated) or the next transaction starts before it closes"),
        ("commit_date", D, True, "UTC date of commit_time (or begin_time) (partition column)"),
    ),
    partition_by=("source", "commit_date"),
    key=("source", "file", "start_pos"),
)

SILVER_ROW_CHANGES = TableSpec(
    name="silver.row_changes",
    description="One row per changed row of a rows event, in binlog order.",
    columns=_FILE_COLS + (
        ("pos", L, False, "pos of the rows event (of its TRANSACTION_PAYLOAD when embedded)"),
        ("payload_index", I, True, "index of the rows event inside its TRANSACTION_PAYLOAD"),
        ("row_index", I, False, "index of the row inside the rows event"),
        ("gtid", S, True, "GTID of the transaction"),
        ("trx_pos", L, True, "start_pos of the transaction (joins silver.transactions)"),
        ("commit_time", TS, True, "commit time of the transaction (event time of XID/COMMIT)"),
        ("event_time", TS, True, "timestamp of the rows event"),
        ("server_id", L, True, "header server_id of the rows event"),
        ("db", S, False, "database"),
        ("table_name", S, False, "table"),
        ("operation", S, False, "'insert', 'update' or 'delete'"),
        ("before", STR_MAP, True, "before image: column name -> value as MySQL prints it (NULL value = SQL NULL); NULL for inserts"),
        ("after", STR_MAP, True, "after image, same encoding; NULL for deletes"),
        ("before_json", S, True, "before image as a JSON object with typed JSON values"),
        ("after_json", S, True, "after image as a JSON object with typed JSON values"),
        ("event_type", S, False, "rows event type, e.g. UPDATE_ROWS_V2"),
        ("commit_date", D, True, "UTC date of commit_time (partition column)"),
    ),
    partition_by=("source", "commit_date"),
    key=("source", "file", "pos", "payload_index", "row_index"),
)

SILVER_STATEMENTS = TableSpec(
    name="silver.statements",
    description="QUERY events (DDL and statement-based changes) except BEGIN / COMMIT markers.",
    columns=_FILE_COLS + (
        ("pos", L, False, "pos of the QUERY event"),
        ("payload_index", I, True, "index inside a TRANSACTION_PAYLOAD"),
        ("gtid", S, True, "GTID of the transaction"),
        ("trx_pos", L, True, "start_pos of the transaction"),
        ("event_time", TS, True, "event timestamp"),
        ("server_id", L, True, "header server_id"),
        ("db", S, True, "default database of the statement"),
        ("sql", S, True, "statement text"),
        ("kind", S, False, "'DDL', 'DML', 'TCL', 'DCL' or 'OTHER' (by leading keyword)"),
        ("thread_id", L, True, "thread id"),
        ("exec_time", L, True, "execution time in seconds"),
        ("error_code", I, True, "error code"),
        ("status_vars", S, True, "decoded status variables as JSON"),
        ("event_type", S, False, "QUERY or MARIA_QUERY_COMPRESSED"),
        ("event_date", D, True, "UTC date of event_time (partition column)"),
    ),
    partition_by=("source", "event_date"),
    key=("source", "file", "pos", "payload_index"),
)

META_BINLOG_FILES = TableSpec(
    name="meta.binlog_files",
    description="Per-file facts gathered at ingestion (what reconciliation reads).",
    columns=_FILE_COLS + (
        ("uri", S, False, "object URI or local path"),
        ("size", L, True, "object size in bytes"),
        ("etag", S, True, "object etag at ingestion"),
        ("fingerprint", S, True, "content digest (sha1 over the decoded byte ranges)"),
        ("flavor", S, False, "'mysql' or 'mariadb'"),
        ("binlog_version", I, True, "binlog format version (1, 3, 4)"),
        ("server_version", S, True, "server version from FORMAT_DESCRIPTION"),
        ("server_id", L, True, "server_id of the FORMAT_DESCRIPTION"),
        ("checksum_alg", S, True, "'CRC32' or 'OFF'"),
        ("previous_gtids", S, True, "PREVIOUS_GTIDS (MySQL) or GTID_LIST as domain intervals (MariaDB), canonical text"),
        ("previous_gtids_raw", S, True, "MariaDB GTID_LIST as written (d-s-n list)"),
        ("contained_gtids", S, False, "canonical GTID set of the transactions in the file"),
        ("duplicate_gtids", S, False, "GTIDs occurring more than once in the file"),
        ("first_gtid", S, True, "first GTID in the file"),
        ("last_gtid", S, True, "last GTID in the file"),
        ("transactions", L, False, "transactions in the file"),
        ("events", L, False, "events decoded (embedded included)"),
        ("first_event_time", TS, True, "earliest event timestamp"),
        ("last_event_time", TS, True, "latest event timestamp"),
        ("closing_event", S, True, "'ROTATE', 'STOP' or NULL (truncated / active file)"),
        ("next_file", S, True, "file named by the closing ROTATE"),
        ("truncated", B, False, "the file ends inside an event"),
        ("decoded_bytes", L, False, "bytes walked by the decoder"),
        ("quarantined", L, False, "rows this file put in bronze.quarantine"),
        ("ranges", I, False, "byte ranges (tasks) the file was split into"),
    ),
    partition_by=("source",),
    key=("source", "file"),
)

META_INGESTED_FILES = TableSpec(
    name="meta.ingested_files",
    description="Ingestion log: one row per (source, file), replaced when the file is re-ingested.",
    columns=_FILE_COLS + (
        ("uri", S, False, "object URI or local path"),
        ("size", L, True, "object size at ingestion"),
        ("etag", S, True, "object etag at ingestion (a new etag means: ingest again)"),
        ("run_id", S, False, "run that ingested the file"),
        ("status", S, False, "'ok', 'partial' (quarantined parts) or 'failed'"),
        ("events", L, False, "rows written to bronze.events"),
        ("transactions", L, False, "rows written to silver.transactions"),
        ("row_changes", L, False, "rows written to silver.row_changes"),
        ("statements", L, False, "rows written to silver.statements"),
        ("quarantined", L, False, "rows written to bronze.quarantine"),
    ),
    partition_by=("source",),
    key=("source", "file"),
)

META_GTID_COVERAGE = TableSpec(
    name="meta.gtid_coverage",
    description="Per source and GTID key (uuid + tag, or MariaDB domain): merged GNO intervals the archive holds.",
    columns=(
        ("source", S, False, "source name"),
        ("flavor", S, False, "'mysql' or 'mariadb'"),
        ("sid", S, False, "MySQL server UUID, or MariaDB domain id"),
        ("tag", S, False, "GTID tag ('' when untagged)"),
        ("gno_start", L, False, "first GNO / seq_no of the interval"),
        ("gno_end", L, False, "last GNO / seq_no of the interval (inclusive)"),
        ("transactions", L, False, "gno_end - gno_start + 1"),
        ("first_file", S, False, "file holding gno_start"),
        ("last_file", S, False, "file holding gno_end"),
        ("files", I, False, "files contributing to the interval"),
        ("gtid_set", S, False, "the interval as GTID-set text"),
    ),
    partition_by=("source",),
    key=("source", "sid", "tag", "gno_start"),
)

META_GTID_RECONCILIATION = TableSpec(
    name="meta.gtid_reconciliation",
    description="Per file in ROTATE-chain order: its PREVIOUS_GTIDS / GTID_LIST against what the archive says precedes it.",
    columns=(
        ("source", S, False, "source name"),
        ("chain_index", I, False, "0-based position in the chain walk (duplicates last)"),
        ("file", S, False, "file"),
        ("seq", L, True, "numbered-series position"),
        ("flavor", S, False, "'mysql' or 'mariadb'"),
        ("server_id", L, True, "server_id of the file"),
        ("status", S, False, "'OK', 'GAP', 'OVERLAP', 'DUPLICATE' or 'CHAIN_BREAK'"),
        ("previous_file", S, True, "predecessor in the chain"),
        ("expected_file", S, True, "what the predecessor's ROTATE named"),
        ("previous_gtids", S, True, "this file's PREVIOUS_GTIDS (MariaDB: GTID_LIST as intervals)"),
        ("expected_gtids", S, True, "predecessor's PREVIOUS_GTIDS + its GTIDs"),
        ("missing_gtids", S, False, "GTIDs the server executed that no archived file holds ('' if none)"),
        ("extra_gtids", S, False, "GTIDs in the archive twice or not recorded as preceding ('' if none)"),
        ("contained_gtids", S, False, "GTIDs inside this file"),
        ("missing_files", STR_ARRAY, False, "file names the ROTATE chain / numbering says are missing"),
        ("duplicate_of", S, True, "for a re-upload of identical bytes: the original file"),
        ("truncated", B, False, "the file ends inside an event"),
        ("closing_event", S, True, "'ROTATE', 'STOP' or NULL"),
        ("detail", S, False, "human-readable findings"),
    ),
    partition_by=("source",),
    key=("source", "file"),
)

ALL_TABLES: dict[str, TableSpec] = {t.name: t for t in (
    BRONZE_EVENTS, BRONZE_QUARANTINE, SILVER_TRANSACTIONS, SILVER_ROW_CHANGES, SILVER_STATEMENTS,
    META_BINLOG_FILES, META_INGESTED_FILES, META_GTID_COVERAGE, META_GTID_RECONCILIATION,
)}

# Tables ingest.py writes, in write order (meta.ingested_files last: it marks a file done).
INGEST_TABLES = ("bronze.events", "bronze.quarantine", "silver.transactions", "silver.row_changes",
                 "silver.statements", "meta.binlog_files", "meta.ingested_files")
# Output kinds records.py emits -> table.
KIND_TO_TABLE = {
    "events": "bronze.events",
    "quarantine": "bronze.quarantine",
    "transactions": "silver.transactions",
    "row_changes": "silver.row_changes",
    "statements": "silver.statements",
}


def spec(name: str) -> TableSpec:
    return ALL_TABLES[name]


def arrow_schema(name: str) -> Any:
    """The Arrow schema matching a table's Spark schema (for mapInArrow batches)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(spec(name).schema, timezone="UTC")
