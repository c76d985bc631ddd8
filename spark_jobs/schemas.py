"""Spark schemas of the tables the jobs write, derived from the registry in :mod:`binlake.lake.tables`.

The registry declares every column once (name, Spark SQL type name, nullability, comment); this
module turns a table into the ``StructType`` the jobs write with (column comments included) and
names the tables each job writes. The Arrow views of the same tables (what the executors and
delta-rs write) are the registry's (:attr:`binlake.lake.tables.TableSpec.arrow_schema`) and the
ingest's (:func:`binlake.ingest.layout.batch_schema`); the tests hold them equal to these.
Importing this module needs pyspark but never starts Spark.
"""

from __future__ import annotations

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


def struct_field(column: Column) -> StructField:
    """The Spark field of a registry column, its comment as column metadata."""
    return StructField(column.name, SPARK_TYPES[column.type], column.nullable,
                       metadata={"comment": column.comment})


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

    @property
    def arrow_schema(self) -> Any:
        """The registry's Arrow schema of the table (:attr:`binlake.lake.tables.TableSpec.arrow_schema`)."""
        return self.table.arrow_schema


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


def spec(name: str) -> TableSpec:
    """The Spark view of a job table by full name (KeyError if it is not one)."""
    if name in GOLD_TABLES:
        return GOLD_TABLES[name]
    return ALL_TABLES[name]
