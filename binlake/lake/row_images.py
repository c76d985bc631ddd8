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


# ---------------------------------------------------------------------------------------------
# The server's text of each value, derived from the stored JSON (docs/row_values.md)
# ---------------------------------------------------------------------------------------------

def text_map(image: str | None) -> dict[str, str | None] | None:
    """An image's typed JSON as ``{column: the server's text}``: what the previous layout stored
    as ``map<string,string>`` (``binlog_parser.rows.render.render_row_text``), exactly. A JSON
    string is its text, null is NULL, an integer its digits; a float the server's layout of its
    shortest digits (``449847`` for ``449847.0``, ``1e15``, ``0.00000015``); a list (VECTOR)
    ``VECTOR_TO_STRING``'s ``[1.10000e+00,...]``; an object (a partial JSON update's diffs)
    Python's ``json.dumps`` text."""
    if image is None:
        return None
    from binlog_parser.rows.numbers import format_double

    out: dict[str, str | None] = {}
    for name, value in json.loads(image).items():
        if value is None or isinstance(value, str):
            out[name] = value
        elif isinstance(value, bool):
            out[name] = "1" if value else "0"
        elif isinstance(value, int):
            out[name] = str(value)
        elif isinstance(value, float):
            out[name] = format_double(value)
        elif isinstance(value, list):
            out[name] = "[" + ",".join(f"{x:.5e}" for x in value) + "]"
        else:
            out[name] = json.dumps(value, ensure_ascii=False)
    return out


#: Spark SQL: ``before`` / ``after`` (``{j}``) as ``map<string,string>`` of the server's text
#: (:func:`text_map`, but for two kinds of DOUBLE: one the server prints in fixed form below
#: 1e-4, ``0.00000015``, is ``1.5e-7`` here, and ``-0`` is ``0``)
SPARK_TEXT_MAP = (
    "CASE WHEN {j} IS NULL THEN NULL ELSE transform_values(from_json({j}, 'map<string,variant>'), (k, v) -> "
    "CASE WHEN v IS NULL OR is_variant_null(v) THEN NULL "
    "WHEN schema_of_variant(v) LIKE 'ARRAY%' THEN concat('[', array_join(transform(cast(v AS array<double>), "
    "x -> format_string('%.5e', x)), ','), ']') "
    "WHEN schema_of_variant(v) LIKE 'OBJECT%' THEN regexp_replace(regexp_replace(to_json(v), "
    "'([\\\\]}\"0-9el]),', '$1, '), '\":', '\": ') "
    "WHEN schema_of_variant(v) = 'DOUBLE' THEN regexp_replace(regexp_replace(cast(v AS string), "
    "'\\\\.0E', 'E'), 'E', 'e') "
    "ELSE cast(v AS string) END) END")

#: DuckDB (``binlake sql``'s fast path registers them): ``row_image_text(before)`` is the same
#: map (:func:`text_map`; a double in exponent form is DuckDB's ``1.5e-7`` where the server
#: prints ``0.00000015``)
DUCKDB_TEXT_MAP_MACROS = (
    "CREATE OR REPLACE MACRO row_image_value(t) AS CASE json_type(t) "
    "WHEN 'NULL' THEN NULL "
    "WHEN 'VARCHAR' THEN json_extract_string(t, '$') "
    "WHEN 'DOUBLE' THEN CASE WHEN t::VARCHAR = '-0.0' THEN '-0' "
    "WHEN t::DOUBLE = trunc(t::DOUBLE) AND abs(t::DOUBLE) < 1e15 THEN (t::DOUBLE)::HUGEINT::VARCHAR "
    "ELSE t::VARCHAR END "
    "WHEN 'ARRAY' THEN '[' || array_to_string(list_transform(t::DOUBLE[], lambda x: printf('%.5e', x)), ',') || ']' "
    "WHEN 'OBJECT' THEN regexp_replace(regexp_replace(t::VARCHAR, '([\\]}\"0-9el]),', '\\1, ', 'g'), "
    "'\":', '\": ', 'g') "
    "ELSE t::VARCHAR END",
    "CREATE OR REPLACE MACRO row_image_text(j) AS CASE WHEN j IS NULL THEN NULL ELSE map_from_entries("
    "list_transform(json_keys(j), lambda k: {'key': k, 'value': row_image_value("
    "json_extract(j, '/' || replace(replace(k, '~', '~0'), '/', '~1')))})) END",
)


def spark_text_map(column: str) -> str:
    """:data:`SPARK_TEXT_MAP` over ``column`` (``before`` or ``after``, or any expression)."""
    return SPARK_TEXT_MAP.replace("{j}", column)
