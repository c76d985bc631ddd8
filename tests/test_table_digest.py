"""binlake_testing.table_digest: counts + order-independent checksums that catch any changed row."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from binlake_testing.table_digest import delta_table_digest, rows_digest

ROWS: list[dict[str, Any]] = [
    {"source": "a", "file": "binlog.000001", "pos": 4, "raw": b"\x01\x02", "run_id": "r1",
     "event_time": dt.datetime(2026, 1, 2, 3, 4, 5), "after": [("id", "1"), ("name", "x")]},
    {"source": "b", "file": "binlog.000002", "pos": 120, "raw": None, "run_id": "r1",
     "event_time": None, "after": None},
]


def test_order_and_run_id_do_not_matter() -> None:
    other_run = [dict(r, run_id="r2") for r in reversed(ROWS)]
    swapped_map = [dict(ROWS[0], after=[("name", "x"), ("id", "1")]), ROWS[1]]
    assert rows_digest("t", ROWS) == rows_digest("t", other_run) == rows_digest("t", swapped_map)
    assert rows_digest("t", ROWS).rows == 2


def test_any_changed_missing_or_duplicated_row_changes_the_digest() -> None:
    base = rows_digest("t", ROWS)
    assert rows_digest("t", [dict(ROWS[0], pos=5), ROWS[1]]) != base
    assert rows_digest("t", [dict(ROWS[0], raw=b"\x01\x03"), ROWS[1]]) != base
    assert rows_digest("t", ROWS[:1]) != base
    doubled = rows_digest("t", [*ROWS, ROWS[1]])
    assert doubled != base and doubled.rows == 3
    assert rows_digest("t", ROWS, ignore_columns=frozenset()) != rows_digest(
        "t", [dict(r, run_id="r2") for r in ROWS], ignore_columns=frozenset())


def test_delta_table_digest_reads_the_table(tmp_path: Path) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    table = pa.table({"source": ["a", "b"], "file": ["binlog.000001", "binlog.000002"], "pos": [4, 120],
                      "run_id": ["r1", "r1"]})
    write_deltalake(str(tmp_path / "t"), table, partition_by=["source"])
    expected = rows_digest("meta.t", [{"source": "b", "file": "binlog.000002", "pos": 120},
                                      {"source": "a", "file": "binlog.000001", "pos": 4}])
    assert delta_table_digest("meta.t", str(tmp_path / "t")) == expected
