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
from typing import TYPE_CHECKING

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
