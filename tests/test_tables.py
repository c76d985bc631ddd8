"""The table registry (binlake/tables.py): one declaration per table, and every reader agrees with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from binlake.tables import (
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
