"""The registry of binlake's Delta tables: one list that every job, test and `binlake sql` uses.

Why a registry: table names (``bronze.events``) and their folders under the warehouse must not
drift between the writer (Spark jobs), the reader (``binlake sql``, the demo summary) and the docs.
Add a table here and it is registered by name everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TableSpec:
    """A Delta table: ``database.name`` stored at ``<warehouse>/<path>``."""

    database: str
    name: str
    path: str
    description: str

    @property
    def full_name(self) -> str:
        return f"{self.database}.{self.name}"

    def location(self, warehouse: str) -> str:
        """Absolute location of the table under ``warehouse`` (local folder or object-store URI)."""
        return f"{warehouse.rstrip('/')}/{self.path}"


TABLES: tuple[TableSpec, ...] = (
    TableSpec("bronze", "events", "bronze/events",
              "One row per decoded binlog event (header fields, typed payload, source file/offset)."),
    TableSpec("bronze", "quarantine", "bronze/quarantine",
              "Events or file regions that could not be decoded, with the error and raw bytes reference."),
    TableSpec("silver", "transactions", "silver/transactions",
              "One row per committed transaction (GTID, begin/commit positions, timestamps, counts)."),
    TableSpec("silver", "row_changes", "silver/row_changes",
              "One row per changed row (insert/update/delete) with before/after images."),
    TableSpec("silver", "statements", "silver/statements",
              "Statement-based events (DDL, statement-format DML) with schema and SQL text."),
    TableSpec("meta", "binlog_files", "meta/binlog_files",
              "Per-file facts gathered at ingestion (format, server, GTID sets, closing event)."),
    TableSpec("meta", "ingested_files", "meta/ingested_files",
              "Binlog objects seen per source: key, size, etag, when ingested (idempotent re-runs)."),
    TableSpec("meta", "gtid_coverage", "meta/gtid_coverage",
              "GTID intervals covered per source and server UUID/domain."),
    TableSpec("meta", "gtid_reconciliation", "meta/gtid_reconciliation",
              "Gaps/overlaps between consecutive files' GTID sets, with a status per source."),
)

DATABASES: tuple[str, ...] = tuple(dict.fromkeys(t.database for t in TABLES))


def table(full_name: str) -> TableSpec:
    """Look a table up by ``database.name`` (KeyError if unknown)."""
    for spec in TABLES:
        if spec.full_name == full_name:
            return spec
    raise KeyError(full_name)


def table_location(warehouse: str, full_name: str) -> str:
    """Location of ``full_name`` under ``warehouse``."""
    return table(full_name).location(warehouse)
