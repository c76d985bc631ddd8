"""``silver.row_changes`` written by a binlake that stored each row image twice, brought to the
one-image layout (issue 37), once.

The previous layout held ``before`` / ``after`` as ``map<string,string>`` (the server's text of
each value) and ``before_json`` / ``after_json`` (the typed JSON). Now ``before`` / ``after``
are the typed JSON, and the map is derived when wanted (docs/row_values.md). The migration is one
schema change and one rewrite of the rows: ``before := before_json``, ``after := after_json``, the
maps dropped, every other column and the partitioning as they were. It runs with delta-rs (no
JVM) under the table's commit lock, streaming the old files into the new ones, so the ingest's
first step (``spark_jobs.lake.ensure_table``) and ``binlake`` tools without Spark run the same
code.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from binlake.config import S3Settings
from binlake.errors import BinlakeError
from binlake.lake import tables
from binlake.lake.delta_tables import delta_uri, locked_storage_options, open_delta_table
from binlake.lake.leases import CommitFence, committed_write

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from deltalake import DeltaTable

log = logging.getLogger("binlake.lake.row_images")

ROW_CHANGES = "silver.row_changes"
#: the previous layout's JSON columns -> the column that now holds them
OLD_JSON_COLUMNS = {"before": "before_json", "after": "after_json"}


class RowImagesMigrationError(BinlakeError):
    """``silver.row_changes`` in the previous layout that could not be migrated."""


def is_old_layout(table: DeltaTable) -> bool:
    """Whether the table is ``silver.row_changes`` as the previous layout wrote it (its typed JSON
    images in ``before_json`` / ``after_json``)."""
    names = {f.name for f in table.schema().fields}
    return set(OLD_JSON_COLUMNS.values()) <= names


def old_layout_message(location: str) -> str:
    """The words of every reader that finds the previous layout: what it is, and what migrates it."""
    return (f"silver.row_changes at {location} holds each row image twice (the previous layout: "
            "before/after as map<string,string> and before_json/after_json): the next `binlake ingest` "
            "migrates it in one rewrite (docs/tables.md, 'Row images')")


def migrate_row_changes(location: str, s3: S3Settings | None = None) -> bool:
    """Migrate the table at ``location`` when it is in the previous layout; True when it did.
    Safe to call on every run: a migrated (or absent, or new) table is left as it is."""
    current = open_delta_table(location, s3)
    if current is None or not is_old_layout(current):
        return False

    def rewrite(fence: CommitFence) -> bool:
        table = open_delta_table(location, s3)  # under the lock: another run may have migrated it
        if table is None or not is_old_layout(table):
            return False
        _rewrite(table, location, s3, fence)
        return True

    try:
        done = committed_write(location, s3, rewrite, what=f"migrate {ROW_CHANGES}", retryable=lambda _e: False)
    except BinlakeError:
        raise
    except Exception as exc:  # noqa: BLE001 - delta-rs / Arrow errors named in the error root
        raise RowImagesMigrationError(f"{old_layout_message(location)}; migrating it failed: "
                                      f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}") from exc
    if done:
        log.warning("%s at %s: row images migrated to the one-image layout (before/after := typed JSON)",
                    ROW_CHANGES, location)
    return done


def _rewrite(table: DeltaTable, location: str, s3: S3Settings | None, fence: CommitFence) -> None:
    """One overwrite commit with the new schema, the rows streamed from the table's files."""
    import pyarrow as pa
    from deltalake import CommitProperties, write_deltalake

    spec = tables.table(ROW_CHANGES)
    target = spec.arrow_schema
    scanner = table.to_pyarrow_dataset().scanner(columns=_projection(target))

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in scanner.to_batches():
            if batch.num_rows:
                yield from pa.Table.from_batches([batch]).cast(target).to_batches()

    reader = pa.RecordBatchReader.from_batches(target, batches())
    fence.check()
    write_deltalake(delta_uri(location), reader, mode="overwrite", schema_mode="overwrite",
                    partition_by=list(spec.partition_by) or None,
                    storage_options=locked_storage_options(location, s3),
                    commit_properties=CommitProperties(custom_metadata={"userMetadata": json.dumps(
                        {"job": "migrate", "change": "row images stored once: before/after := typed JSON"})}))


def _projection(target: pa.Schema) -> dict[str, object]:
    """The new columns as expressions over the old ones."""
    import pyarrow.dataset as ds

    return {f.name: ds.field(OLD_JSON_COLUMNS.get(f.name, f.name)) for f in target}
