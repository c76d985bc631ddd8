"""Gold's input fingerprints in this process (``binlake.gold.fingerprints``): Spark's ``xxhash64``
re-computed bit for bit, and the per-table split at a mark W. The comparison with Spark's own
aggregate over a real warehouse is in ``test_gold_fixture.py``."""

from __future__ import annotations

from decimal import Decimal

from binlake.gold.fingerprints import HASHED_COLUMNS, Counts, count_rows, spark_xxhash64
from binlake.gold.schema_history import Coordinates

NAMES = [name for name, _ in HASHED_COLUMNS]
#: rows and what Spark 4.2.0's ``xxhash64(file, pos, payload_index, row_index, operation, before, after)``
#: returned for them (a NULL column is skipped; non-ASCII text hashed as UTF-8; INT extremes; empty strings)
SPARK_SAID = [
    (("binlog.000001", 4, None, 0, "insert", None, '{"id":1,"name":"Åsa 😀"}'), -6894821167456388238),
    (("binlog.000002", 1234567890123, 3, 7, "update", '{"id":1}', '{"id":2}'), 6013812548899811375),
    (("", -1, -2147483648, 2147483647, "delete", "", None), 7035320166344985437),
]


def test_the_hash_is_sparks_xxhash64() -> None:
    assert [spark_xxhash64(dict(zip(NAMES, row))) for row, _ in SPARK_SAID] == [want for _, want in SPARK_SAID]


def _row(table: str, file_seq: int | None, pos: int, payload: int | None, row_index: int) -> dict[str, object]:
    return {"db": "shop", "table_name": table, "file_seq": file_seq, "file": f"binlog.{file_seq or 0:06d}",
            "pos": pos, "payload_index": payload, "row_index": row_index, "operation": "insert",
            "before": None, "after": f'{{"pos":{pos}}}'}


def test_rows_split_at_the_tables_mark() -> None:
    """Rows at or before W are old (their own count and sum); the least row after W is the first
    new one, in Spark's struct order (file_seq, file, pos, payload_index with NULL as -1, row)."""
    a = [_row("a", 1, 100, None, 0), _row("a", 1, 100, None, 1), _row("a", 2, 50, 0, 0), _row("a", 2, 50, None, 0)]
    b = [_row("b", 1, 300, None, 0)]
    mark = Coordinates(1, 100, -1, 1, "binlog.000001")  # a's W: its second row
    counts = count_rows([a[2], b[0], a[0], a[3], a[1]], {("shop", "a"): mark})
    h = [spark_xxhash64(r) for r in a]
    assert counts[("shop", "a")] == Counts(4, Decimal(sum(h)), 2, Decimal(h[0] + h[1]),
                                           Coordinates(2, 50, -1, 0, "binlog.000002"))  # NULL payload first
    assert counts[("shop", "b")] == Counts(1, Decimal(spark_xxhash64(b[0])), 0, Decimal(0), None)  # no mark
