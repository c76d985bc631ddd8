"""The ingest tables as the executors build them: which tables, in which order, and how each one's
Arrow batches hold its columns.

The columns themselves are the registry's (:mod:`binlake.lake.tables`); what this module adds is
the ingest's own view: the tables it writes (:data:`INGEST_TABLES`), the decoder's output kinds
(:data:`KIND_TO_TABLE`), and the batch schema (:func:`batch_schema`: some string columns as Arrow
dictionaries, NOT NULL columns ``required``). No Spark here: the executors' decoder
(:mod:`binlake.ingest.records`) and its column buffers (:mod:`binlake.ingest.columns`) run in a
Python worker.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

from binlake.lake import tables

if TYPE_CHECKING:
    import pyarrow as pa

#: Tables the ingest writes, in write order (``meta.ingested_files`` last: it marks a file done).
INGEST_TABLES = ("bronze.events", "bronze.quarantine", "silver.transactions", "silver.row_changes",
                 "silver.statements", "meta.binlog_files", "meta.ingested_files")
#: Output kinds the decoder (:mod:`binlake.ingest.records`) emits -> table.
KIND_TO_TABLE = {
    "events": "bronze.events",
    "quarantine": "bronze.quarantine",
    "transactions": "silver.transactions",
    "row_changes": "silver.row_changes",
    "statements": "silver.statements",
}

#: string columns whose every batch holds one value (the file's source and name, the run): the
#: ingest's batches hold them as dictionaries (:func:`batch_schema`)
DICTIONARY_COLUMNS = frozenset({"source", "file", "run_id"})

#: string columns the rows give one by one but which hold few distinct values in a batch (names,
#: kinds, the GTID a transaction's rows share): the ingest's batches hold them as dictionaries
#: too, built as the rows are appended (the extension's ``Words``, ``native/src/columns.rs``)
WORD_COLUMNS: Mapping[str, frozenset[str]] = {
    "bronze.events": frozenset({"event_type", "checksum", "gtid", "db", "table_name"}),
    "silver.row_changes": frozenset({"gtid", "db", "table_name", "operation", "event_type"}),
    "silver.statements": frozenset({"gtid", "db", "kind", "event_type"}),
}


@cache
def batch_schema(name: str) -> pa.Schema:
    """The registry table ``name``'s Arrow schema (:attr:`binlake.lake.tables.TableSpec.arrow_schema`)
    as the ingest's batches hold it: the columns of :data:`DICTIONARY_COLUMNS` and
    :data:`WORD_COLUMNS` and the keys of every map as Arrow dictionaries (``int32`` indices into
    the distinct strings), and the table's NOT NULL columns not nullable.

    The Parquet files written from them hold plain strings, as the Arrow schema says; the writer
    takes the indices it is given where it would hash every value to build the same dictionary
    page. A NOT NULL column is a ``required`` Parquet column, as Spark writes it: the writer
    stores no definition level per value, and refuses a NULL there
    (:meth:`binlake.ingest.columns.TableColumns.take_batch` names it first)."""
    import pyarrow as pa

    table = tables.table(name)
    words = pa.dictionary(pa.int32(), pa.string())
    coded = DICTIONARY_COLUMNS | WORD_COLUMNS.get(name, frozenset())
    required = {c.name for c in table.columns if not c.nullable}
    fields = []
    for f in table.arrow_schema:
        if pa.types.is_map(f.type):
            f = f.with_type(pa.map_(pa.field(f.type.key_field.name, words, nullable=False), f.type.item_field))
        elif f.name in coded and pa.types.is_string(f.type):
            f = f.with_type(words)
        fields.append(f.with_nullable(f.name not in required))
    return pa.schema(fields)


# The columns of the tables a decoder appends a row at a time, in the order the row calls give
# their values: :mod:`binlake.ingest.records` (``TableColumns`` checks each against the registry
# when it is built) and, for four of its buffers, the extension's ``EventSink``
# (:func:`sink_layout`).
EVENT_COLUMNS = ("pos", "payload_index", "payload_offset", "next_pos", "type_code", "event_type",
                 "event_time", "server_id", "event_size", "log_pos", "flags", "checksum", "gtid",
                 "trx_pos", "db", "table_name", "fields", "raw")
QUARANTINE_COLUMNS = ("pos", "scope", "type_code", "event_type", "error_class", "error_message",
                      "range_start", "range_end", "raw_head")
TRX_COLUMNS = ("start_pos", "end_pos", "gtid", "gtid_kind", "uuid", "tag", "gno", "mariadb_domain_id",
               "mariadb_server_id", "mariadb_seq_no", "last_committed", "sequence_number", "begin_time",
               "commit_time", "original_commit_time", "immediate_commit_time", "original_server_version",
               "immediate_server_version", "transaction_length", "server_id", "xid", "events",
               "row_changes", "statements", "tables", "kind", "end_event", "complete")
#: silver.row_changes' columns appended once per rows event (``row_index`` counts its rows up
#: from 0: :data:`ROW_CHANGE_SEQUENCES`; ``commit_time`` is appended when the transaction ends:
#: :data:`ROW_CHANGE_LATE`)
ROW_CHANGE_COLUMNS = ("pos", "payload_index", "row_index", "gtid", "trx_pos", "event_time", "server_id", "db",
                      "table_name", "operation", "event_type")
ROW_CHANGE_SEQUENCES = ("row_index",)
ROW_CHANGE_LATE = ("commit_time",)
#: silver.row_changes' row image columns (each image once, its typed JSON), in the order the
#: image sink holds them
ROW_CHANGE_IMAGES = ("before", "after")
STATEMENT_COLUMNS = ("pos", "payload_index", "gtid", "trx_pos", "event_time", "server_id", "db", "sql", "kind",
                     "thread_id", "exec_time", "error_code", "status_vars", "event_type")

#: The extension's ``EventSink`` buffers, as ``(role, table, columns, sequence columns)``, in the
#: order ``EventSink`` takes them.
SINK_BUFFERS: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("events", "bronze.events", EVENT_COLUMNS, ()),
    ("row_changes", "silver.row_changes", ROW_CHANGE_COLUMNS, ROW_CHANGE_SEQUENCES),
    ("commit_times", "silver.row_changes", ROW_CHANGE_LATE, ()),
    ("transactions", "silver.transactions", TRX_COLUMNS, ()),
)


def row_kind(arrow_type: Any) -> str:
    """How a ``RowColumns`` (``native/src/columns.rs``) holds a column of ``arrow_type``."""
    import pyarrow as pa

    if pa.types.is_int64(arrow_type) or pa.types.is_timestamp(arrow_type):
        return "int64"  # a timestamp's values are appended as integer microseconds
    if pa.types.is_int32(arrow_type):
        return "int32"
    if pa.types.is_dictionary(arrow_type):
        return "words"  # a string column of few distinct values (WORD_COLUMNS)
    if pa.types.is_boolean(arrow_type):
        return "bool"
    if pa.types.is_string(arrow_type):
        return "utf8"
    if pa.types.is_binary(arrow_type):
        return "binary"
    return "object"


def row_kinds(table: str, columns: tuple[str, ...], sequences: tuple[str, ...] = ()) -> list[str]:
    """The ``RowColumns`` kind of each of ``columns`` of ``table``, from its batch schema; a
    sequence column's (counting up in ``append_repeated``) with ``_sequence``."""
    schema = batch_schema(table)
    return [row_kind(schema.field(c).type) + ("_sequence" if c in sequences else "") for c in columns]


def sink_layout() -> list[tuple[str, str, tuple[tuple[str, str], ...]]]:
    """``(role, table, ((column, kind), ...))`` of each ``EventSink`` buffer, derived from the
    registry: what the extension's ``SINK_LAYOUT`` (``native/src/sink.rs``) must say."""
    return [(role, table, tuple(zip(columns, row_kinds(table, columns, sequences))))
            for role, table, columns, sequences in SINK_BUFFERS]
