"""spark_jobs.schemas and the Arrow views (binlake.lake.tables, binlake.ingest.layout) of the registry's tables agree."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from binlake.ingest.layout import DICTIONARY_COLUMNS, INGEST_TABLES, KIND_TO_TABLE, WORD_COLUMNS, batch_schema
from binlake.lake import tables
from spark_jobs.schemas import ALL_TABLES, GOLD_TABLES, spec


@pytest.mark.parametrize("name", INGEST_TABLES)
def test_arrow_schema_is_sparks_arrow_conversion_all_nullable(name: str) -> None:
    """What the executors stage is what Spark itself would hand to Arrow for the table, every
    field nullable (NOT NULL is Delta's check when the rows are written)."""
    ts = spec(name)
    sparks = to_arrow_schema(ts.schema, timezone="UTC")
    ours = ts.arrow_schema
    assert ours.names == ts.column_names == sparks.names
    for mine, theirs in zip(ours, sparks):
        assert mine.nullable and mine.type.equals(theirs.type), mine.name


@pytest.mark.parametrize("name", INGEST_TABLES)
def test_the_batch_schema_is_the_arrow_schema_with_dictionaries_for_the_constants_words_and_map_keys(
        name: str) -> None:
    """The ingest's batches hold ``source``, ``file`` and ``run_id``, the table's word columns
    (names, kinds, GTIDs) and every map's keys as dictionaries of strings; every other field is
    the table's, and decoding each dictionary gives the table's type back. The table's NOT NULL
    columns, and only they, are not nullable."""
    ts = spec(name)
    batch = batch_schema(name)
    words = pa.dictionary(pa.int32(), pa.string())
    coded = DICTIONARY_COLUMNS | WORD_COLUMNS.get(name, frozenset())
    assert batch.names == ts.arrow_schema.names
    for field, table in zip(batch, ts.arrow_schema):
        if field.name in coded:
            assert field.type == words and table.type == pa.string(), field.name
        elif pa.types.is_map(table.type):
            assert field.type.key_type == words and field.type.item_type == table.type.item_type, field.name
            assert field.type.key_field.name == table.type.key_field.name and not field.type.key_field.nullable
        else:
            assert field == table.with_nullable(field.nullable), field.name
    # a NOT NULL column is not nullable in a batch (a required Parquet column), the others are
    assert {f.name for f in batch if not f.nullable} == {c.name for c in ts.table.columns if not c.nullable}
    dictionaries = {f.name for f in batch if pa.types.is_dictionary(f.type)}
    assert {"source", "file"} <= dictionaries
    assert {"silver.row_changes": {"gtid", "db", "table_name", "operation", "event_type"},
            "bronze.events": {"gtid", "db", "table_name", "event_type", "checksum"}}.get(name, set()) <= dictionaries


def test_every_registry_type_has_a_spark_and_an_arrow_type() -> None:
    from binlake.lake.tables import arrow_type
    from spark_jobs.schemas import SPARK_TYPES

    names = {c.type for t in (*ALL_TABLES.values(), *GOLD_TABLES.values()) for c in t.table.columns}
    assert names <= set(SPARK_TYPES)
    assert str(arrow_type(tables.TIMESTAMP)) == "timestamp[us, tz=UTC]" and arrow_type(tables.INT) == pa.int32()
    assert set(KIND_TO_TABLE.values()) <= set(INGEST_TABLES)
