"""Spark schemas of the tables the jobs write, derived from the registry in :mod:`binlake.lake.tables`.

The registry declares every column once (name, Spark SQL type name, nullability, comment); this
module turns a table into the ``StructType`` the jobs write with (column comments included) and
names the tables each job writes. ``records.py`` builds Arrow batches with the same columns
(:meth:`TableSpec.arrow_schema`; its tests check that). Importing this module needs pyspark but
never starts Spark.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
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

from binlake.lake import tables
from binlake.lake.tables import Column

# The registry's type names -> Spark types. A map, not Spark's DDL parser: the parser needs a
# running JVM, and it cannot say that array elements are never NULL (containsNull=False).
SPARK_TYPES: dict[str, DataType] = {
    tables.STRING: StringType(),
    tables.BIGINT: LongType(),
    tables.INT: IntegerType(),
    tables.BOOLEAN: BooleanType(),
    tables.TIMESTAMP: TimestampType(),
    tables.DATE: DateType(),
    tables.BINARY: BinaryType(),
    tables.STRING_ARRAY: ArrayType(StringType(), containsNull=False),
    tables.STRING_MAP: MapType(StringType(), StringType(), valueContainsNull=True),
}


def arrow_type(type_name: str) -> Any:
    """The Arrow type of a registry type name: what the executors stage (TIMESTAMP is UTC
    microseconds, as Spark's Arrow conversion has it)."""
    import pyarrow as pa

    if type_name == tables.STRING_ARRAY:
        return pa.list_(pa.field("element", pa.string(), nullable=False))
    if type_name == tables.STRING_MAP:
        return pa.map_(pa.string(), pa.string())
    return {
        tables.STRING: pa.string(), tables.BIGINT: pa.int64(), tables.INT: pa.int32(),
        tables.BOOLEAN: pa.bool_(), tables.TIMESTAMP: pa.timestamp("us", tz="UTC"),
        tables.DATE: pa.date32(), tables.BINARY: pa.binary(),
    }[type_name]


def struct_field(column: Column) -> StructField:
    """The Spark field of a registry column, its comment as column metadata."""
    return StructField(column.name, SPARK_TYPES[column.type], column.nullable,
                       metadata={"comment": column.comment})


#: string columns whose every batch holds one value (the file's source and name, the run): the
#: ingest's batches hold them as dictionaries (:meth:`TableSpec.batch_schema`)
DICTIONARY_COLUMNS = frozenset({"source", "file", "run_id"})

#: string columns the rows give one by one but which hold few distinct values in a batch (names,
#: kinds, the GTID a transaction's rows share): the ingest's batches hold them as dictionaries
#: too, built as the rows are appended (the extension's ``Words``, ``native/src/columns.rs``)
WORD_COLUMNS: Mapping[str, frozenset[str]] = {
    "bronze.events": frozenset({"event_type", "checksum", "gtid", "db", "table_name"}),
    "silver.row_changes": frozenset({"gtid", "db", "table_name", "operation", "event_type"}),
    "silver.statements": frozenset({"gtid", "db", "kind", "event_type"}),
}


@dataclass(frozen=True)
class TableSpec:
    """The Spark view of a registry table; ``name`` is the full name (``bronze.events``)."""

    table: tables.TableSpec

    @property
    def name(self) -> str:
        return self.table.full_name

    @property
    def description(self) -> str:
        return self.table.description

    @property
    def partition_by(self) -> tuple[str, ...]:
        return self.table.partition_by

    @property
    def key(self) -> tuple[str, ...]:
        return self.table.key

    @property
    def column_names(self) -> list[str]:
        return self.table.column_names

    @cached_property
    def schema(self) -> StructType:
        return StructType([struct_field(c) for c in self.table.columns])

    @cached_property
    def arrow_schema(self) -> Any:
        """The columns as a pyarrow schema, every field nullable: staged rows are checked
        against NOT NULL by Delta when they are written, as Spark-built rows are."""
        import pyarrow as pa

        return pa.schema([pa.field(c.name, arrow_type(c.type)) for c in self.table.columns])

    @cached_property
    def batch_schema(self) -> Any:
        """:attr:`arrow_schema` as the ingest's batches hold it: the columns of
        :data:`DICTIONARY_COLUMNS` and :data:`WORD_COLUMNS` and the keys of every map as Arrow
        dictionaries (``int32`` indices into the distinct strings), and the table's NOT NULL
        columns not nullable.

        The Parquet files written from them hold plain strings, as :attr:`arrow_schema` says;
        the writer takes the indices it is given where it would hash every value to build the
        same dictionary page. A NOT NULL column is a ``required`` Parquet column, as Spark
        writes it: the writer stores no definition level per value, and refuses a NULL there
        (:meth:`spark_jobs.columns.TableColumns.take_batch` names it first)."""
        import pyarrow as pa

        words = pa.dictionary(pa.int32(), pa.string())
        coded = DICTIONARY_COLUMNS | WORD_COLUMNS.get(self.name, frozenset())
        required = {c.name for c in self.table.columns if not c.nullable}
        fields = []
        for f in self.arrow_schema:
            if pa.types.is_map(f.type):
                f = f.with_type(pa.map_(pa.field(f.type.key_field.name, words, nullable=False), f.type.item_field))
            elif f.name in coded and pa.types.is_string(f.type):
                f = f.with_type(words)
            fields.append(f.with_nullable(f.name not in required))
        return pa.schema(fields)


BRONZE_EVENTS = TableSpec(tables.BRONZE_EVENTS)
BRONZE_QUARANTINE = TableSpec(tables.BRONZE_QUARANTINE)
SILVER_TRANSACTIONS = TableSpec(tables.SILVER_TRANSACTIONS)
SILVER_ROW_CHANGES = TableSpec(tables.SILVER_ROW_CHANGES)
SILVER_STATEMENTS = TableSpec(tables.SILVER_STATEMENTS)
META_BINLOG_FILES = TableSpec(tables.META_BINLOG_FILES)
META_INGESTED_FILES = TableSpec(tables.META_INGESTED_FILES)
META_GTID_COVERAGE = TableSpec(tables.META_GTID_COVERAGE)
META_GTID_RECONCILIATION = TableSpec(tables.META_GTID_RECONCILIATION)
SILVER_SCHEMA_HISTORY = TableSpec(tables.SILVER_SCHEMA_HISTORY)
META_GOLD_STATUS = TableSpec(tables.META_GOLD_STATUS)

# Tables the decode and reconcile jobs write (what their tests compare between runs).
ALL_TABLES: dict[str, TableSpec] = {t.name: t for t in (
    BRONZE_EVENTS, BRONZE_QUARANTINE, SILVER_TRANSACTIONS, SILVER_ROW_CHANGES, SILVER_STATEMENTS,
    META_BINLOG_FILES, META_INGESTED_FILES, META_GTID_COVERAGE, META_GTID_RECONCILIATION,
)}
# Tables gold.py writes besides the per-source gold tables.
GOLD_TABLES: dict[str, TableSpec] = {t.name: t for t in (SILVER_SCHEMA_HISTORY, META_GOLD_STATUS)}

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
    """The Spark view of a job table by full name (KeyError if it is not one)."""
    if name in GOLD_TABLES:
        return GOLD_TABLES[name]
    return ALL_TABLES[name]
