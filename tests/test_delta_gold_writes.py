"""binlake.lake.delta_tables' gold writes (``overwrite_table``, ``merge_rows``): what a small gold table's
MERGE or overwrite does through delta-rs, in a folder (no JVM, no server: the fast loop's)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa

from binlake.lake.delta_tables import Commit, open_delta_table

ROWS = pa.table({"source": ["a", "b"], "n": [1, 2]})


GOLD_SCHEMA = pa.schema([("Id", pa.int64()), ('say "hi"', pa.string()), ("amount", pa.decimal128(12, 2)),
                         ("blob", pa.binary()), ("vec", pa.list_(pa.float32())), ("placed", pa.timestamp("us")),
                         ("_commit_time", pa.timestamp("us", tz="UTC"))])
GOLD_PROPERTIES = {"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": "false"}


def _gold_rows(*rows: tuple[Any, ...]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(GOLD_SCHEMA.names, r, strict=True)) for r in rows], schema=GOLD_SCHEMA)


def _row(key: int, text: str | None, blob: bytes | None) -> tuple[Any, ...]:
    at = dt.datetime(2024, 2, 29, 23, 59, 59, 999_999)
    return (key, text, None if text is None else Decimal("12.50"), blob, [1.5, None], at, at.replace(tzinfo=dt.UTC))


def test_overwrite_table_creates_with_the_properties_then_replaces_rows_and_schema(tmp_path: Path) -> None:
    from binlake.lake.delta_tables import overwrite_table

    path = str(tmp_path / "gold")
    rows = _gold_rows(_row(1, "a", b"\x00\xff"), _row(2, None, None))
    assert overwrite_table(path, None, rows, configuration=GOLD_PROPERTIES, user_metadata='{"job": "gold"}') \
        is Commit.COMMITTED
    table = open_delta_table(path)
    assert table is not None and table.metadata().configuration == GOLD_PROPERTIES
    assert table.to_pyarrow_table().sort_by("Id").equals(rows)
    assert table.history(1)[0]["userMetadata"] == '{"job": "gold"}'
    narrower = pa.table({"Id": pa.array([7], pa.int64())})  # a new schema: the table takes it
    assert overwrite_table(path, None, narrower, configuration={}, user_metadata=None) is Commit.COMMITTED
    table = open_delta_table(path)
    assert table is not None and table.to_pyarrow_table().to_pylist() == [{"Id": 7}]
    assert table.metadata().configuration == GOLD_PROPERTIES and table.version() == 1


def test_merge_rows_updates_only_changed_rows_and_its_change_feed_says_so(tmp_path: Path) -> None:
    """Keyed on ``Id``: 1 unchanged (NULLs and BINARY and ARRAY values compared null-safely), 2 updated,
    3 deleted, 4 inserted; the change feed holds exactly those; a MERGE that changes nothing commits
    nothing."""
    from deltalake import DeltaTable

    from binlake.lake.delta_tables import merge_rows, overwrite_table

    path = str(tmp_path / "gold")
    before = _gold_rows(_row(1, None, None), _row(2, "b", b"\x01"), _row(3, "c", b"\x02"))
    overwrite_table(path, None, before, configuration=GOLD_PROPERTIES, user_metadata=None)
    after = _gold_rows(_row(1, None, None), _row(2, "B", b"\x01"), _row(4, "d", None))
    assert merge_rows(path, None, after, ["Id"], user_metadata='{"job": "gold"}') is Commit.COMMITTED
    table = DeltaTable(path)
    assert table.version() == 1 and table.to_pyarrow_table().sort_by("Id").equals(after)
    changes = pa.table(table.load_cdf(starting_version=1, ending_version=1).read_all())
    got = sorted((r["_change_type"], r["Id"], r['say "hi"']) for r in changes.to_pylist())
    assert got == [("delete", 3, "c"), ("insert", 4, "d"), ("update_postimage", 2, "B"),
                   ("update_preimage", 2, "b")]
    assert merge_rows(path, None, after, ["Id"], user_metadata=None) is Commit.COMMITTED
    assert DeltaTable(path).version() == 1


def test_gold_writes_leave_deletion_vectors_and_backquoted_names_to_spark(tmp_path: Path) -> None:
    from deltalake import write_deltalake

    from binlake.lake.delta_tables import merge_rows, overwrite_table

    path = str(tmp_path / "dv")
    write_deltalake(path, ROWS)
    table = open_delta_table(path)
    assert table is not None
    table.alter.set_table_properties({"delta.enableDeletionVectors": "true"})
    assert overwrite_table(path, None, ROWS, configuration={}, user_metadata=None) is Commit.LEFT_TO_SPARK
    assert merge_rows(path, None, ROWS, ["n"], user_metadata=None) is Commit.LEFT_TO_SPARK
    odd = str(tmp_path / "odd")
    named = pa.table({"k": [1], "a`b": ["x"]})
    overwrite_table(odd, None, named, configuration={}, user_metadata=None)
    assert merge_rows(odd, None, named, ["k"], user_metadata=None) is Commit.LEFT_TO_SPARK
