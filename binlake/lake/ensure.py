"""A registry table brought to binlake's layout with delta-rs: created when absent (schema, column
comments, partitioning, description, properties), given the columns and properties a newer binlake
added, re-partitioned once when an older binlake wrote it otherwise.

Why one implementation: every writer of a small table without a JVM (reconcile's coverage tables,
maintenance's run record) must create it exactly as the others do, and as
:func:`spark_jobs.lake.ensure_table` does (the Delta schema JSON is the one Spark writes for the same
registry columns), so a table created by any of them is the same table.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from binlake.config import BinlakeConfig
from binlake.errors import BinlakeError
from binlake.lake.tables import Column, TableSpec, arrow_type, table, table_location

if TYPE_CHECKING:  # pragma: no cover
    from deltalake import DeltaTable

    from binlake.lake.leases import CommitFence

log = logging.getLogger("binlake.lake.ensure")


class TableSetupError(BinlakeError):
    """A registry table that delta-rs could not create or bring to binlake's layout."""


def delta_schema_json(spec: TableSpec, columns: Sequence[Column] | None = None) -> str:
    """The Delta schema JSON of ``spec``'s columns (comments as column metadata): what Spark writes
    for the same registry columns, so a table created here is the one ``ensure_table`` creates.
    From the columns' Arrow types (:func:`binlake.lake.tables.arrow_type`, the registry's one type
    mapping without Spark), as delta-rs converts them."""
    import pyarrow as pa
    from deltalake import Schema

    fields = [pa.field(c.name, arrow_type(c.type), c.nullable, metadata={"comment": c.comment})
              for c in (spec.columns if columns is None else columns)]
    return str(Schema.from_arrow(pa.schema(fields)).to_json())


def _open(cfg: BinlakeConfig, name: str) -> DeltaTable | None:
    from binlake.lake.delta_tables import open_delta_table

    return open_delta_table(table_location(cfg.warehouse, name), cfg.s3)


def _must_open(cfg: BinlakeConfig, name: str) -> DeltaTable:
    found = _open(cfg, name)
    if found is None:
        raise TableSetupError(f"{table_location(cfg.warehouse, name)}: table {name} vanished while being created")
    return found


def ensure_registry_table(cfg: BinlakeConfig, name: str) -> DeltaTable:
    """The registry table ``name``, created when absent and brought to the registry's layout (new
    columns, properties, partitioning); race-safe, and no commit when it is up to date.

    A table an older binlake wrote with other partition columns is rewritten once, rows kept (these
    tables hold a few rows per file or run). Every change is a
    :func:`binlake.lake.leases.committed_write` (the table's commit lock on S3, fenced, a commit
    conflict retried: each change is a no-op once done).
    """
    from deltalake.exceptions import CommitFailedError

    from binlake.lake.leases import committed_write

    spec = table(name)
    current = _open(cfg, name)
    if current is not None and _layout_ok(current, spec):
        return current
    location = table_location(cfg.warehouse, name)

    def bring_up_to_date(fence: CommitFence) -> DeltaTable:
        fence.check()
        return _bring_up_to_date(cfg, name, spec)

    return committed_write(location, cfg.s3, bring_up_to_date, what=f"create or update {name}",
                           retryable=lambda exc: isinstance(exc, CommitFailedError))


def _bring_up_to_date(cfg: BinlakeConfig, name: str, spec: TableSpec) -> DeltaTable:
    from deltalake import DeltaTable, Schema, write_deltalake

    from binlake.lake.delta_tables import delta_uri, locked_storage_options

    location = table_location(cfg.warehouse, name)
    current = _open(cfg, name)
    if current is None:
        try:
            DeltaTable.create(delta_uri(location), schema=Schema.from_json(delta_schema_json(spec)),
                              partition_by=list(spec.partition_by) or None, description=spec.description,
                              configuration=spec.properties or None, mode="ignore",
                              storage_options=locked_storage_options(location, cfg.s3))
        except Exception:  # noqa: BLE001 - a concurrent creator won the race for version 0
            if _open(cfg, name) is None:
                raise
        return _must_open(cfg, name)
    if tuple(current.metadata().partition_columns) != spec.partition_by:
        log.warning("%s: partitioned by %s, binlake partitions it by %s: rewriting it once (rows kept)",
                    name, list(current.metadata().partition_columns) or "nothing", list(spec.partition_by))
        write_deltalake(current, current.to_pyarrow_table(), mode="overwrite", schema_mode="overwrite",
                        partition_by=list(spec.partition_by) or None)
        current = _must_open(cfg, name)
    have = {f.name for f in current.schema().fields}
    missing = [c for c in spec.columns if c.name not in have]
    if missing:
        log.info("%s: adding column(s) %s", name, ", ".join(c.name for c in missing))
        current.alter.add_columns(list(Schema.from_json(delta_schema_json(spec, missing)).fields))
    props = {k: v for k, v in spec.properties.items() if current.metadata().configuration.get(k) != v}
    if props:
        current.alter.set_table_properties(props, raise_if_not_exists=False)
    return _must_open(cfg, name)


def _layout_ok(current: DeltaTable, spec: TableSpec) -> bool:
    have = {f.name for f in current.schema().fields}
    config = current.metadata().configuration
    return (tuple(current.metadata().partition_columns) == spec.partition_by
            and all(c.name in have for c in spec.columns)
            and all(config.get(k) == v for k, v in spec.properties.items()))
