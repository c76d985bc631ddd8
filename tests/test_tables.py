"""The table registry (binlake/lake/tables.py): one declaration per table, and every reader agrees with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from binlake.lake.tables import (
    DATABASES,
    GOLD_DATABASE,
    STRING_ARRAY,
    TABLES,
    gold_table,
    gold_table_name,
    markdown,
    table,
    table_location,
)

DOCS = Path(__file__).resolve().parent.parent / "docs" / "tables.md"


def test_every_table_is_documented_as_declared() -> None:
    """docs/tables.md holds each table's block exactly as the registry renders it (no drift)."""
    text = DOCS.read_text()
    missing = [spec.full_name for spec in TABLES if markdown(spec) not in text]
    assert missing == []


def test_keys_and_partitions_are_columns() -> None:
    for spec in TABLES:
        names = spec.column_names
        assert len(names) == len(set(names)), spec.full_name
        assert set(spec.key) <= set(names) and set(spec.partition_by) <= set(names), spec.full_name
        assert spec.partition_by[0] == "source", spec.full_name  # writers of other sources never conflict
        assert spec.path == f"{spec.database}/{spec.name}"


def test_lookup_and_locations() -> None:
    assert table("meta.gold_status").key == ("source", "gold_table")
    assert table("silver.schema_history").ddl().startswith("source STRING NOT NULL, db STRING NOT NULL, ")
    assert "primary_key " + STRING_ARRAY in table("silver.schema_history").ddl()
    assert table_location("s3a://lake/wh/", "bronze.events") == "s3a://lake/wh/bronze/events"
    name = gold_table_name("maria-gold", "Shop", "Orders 2")
    assert name == "maria_gold__shop__orders_2"
    assert table(f"gold.{name}") == gold_table(name)
    assert table_location("/wh", f"gold.{name}") == f"/wh/gold/{name}"
    assert DATABASES[-1] == GOLD_DATABASE and len(DATABASES) == len(set(DATABASES))
    with pytest.raises(KeyError):
        table("silver.nope")
    with pytest.raises(KeyError):
        table("gold.")


def test_statistics_cover_the_key_and_the_filters_only() -> None:
    """Delta keeps data-skipping statistics on the key and filter columns (never a partition
    column, never the wide text), in table order; the property names them."""
    from binlake.lake.tables import CHECKPOINT_INTERVAL_PROPERTY, STATS_COLUMNS_PROPERTY

    events = table("bronze.events")
    assert events.stats_columns == ("file", "file_seq", "pos", "payload_index", "event_type", "db", "table_name")
    assert events.properties == {STATS_COLUMNS_PROPERTY: "file,file_seq,pos,payload_index,event_type,db,table_name",
                                 CHECKPOINT_INTERVAL_PROPERTY: "10"}
    assert table("silver.row_changes").stats_columns == (
        "file", "file_seq", "pos", "payload_index", "row_index", "db", "table_name")
    assert table("meta.ingested_files").stats_columns == ("file", "file_seq", "status")
    for spec in TABLES:
        assert set(spec.filters) <= set(spec.column_names), spec.full_name
        assert not set(spec.stats_columns) & set(spec.partition_by), spec.full_name
        assert set(spec.key) - set(spec.partition_by) <= set(spec.stats_columns), spec.full_name
    assert gold_table(gold_table_name("a", "b", "c")).properties == {}  # gold: Delta's default
