"""The server's text of each value, derived from the one stored image (issue 37): for every image
of every fixture binlog, the Python rule (``binlake.lake.row_images.text_map``), the Spark SQL
expression (``SPARK_TEXT_MAP``) and the DuckDB macro of ``binlake sql``'s fast path
(``row_image_text``) give exactly the map the previous layout stored
(``render_row_text``: what ``silver.row_changes.before`` / ``after`` held before)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from binlake.lake.row_images import DUCKDB_TEXT_MAP_MACROS, spark_text_map, text_map
from binlog_parser.errors import BinlogError
from binlog_parser.reader import BinlogReader
from binlog_parser.rows.render import compact_json, render_row, render_row_text
from binlog_parser.rows.rows_event import RowsEvent
from tests._native_util import DAMAGED_FIXTURES, fixture_binlogs

#: values whose text is not their JSON token's, beside the fixtures' (floats in the server's
#: layout, VECTORs, a partial JSON update's diffs, a name with a slash and a tilde)
EXTRA = [('{"f":449847.0,"g":0.1,"h":-2.5,"n":null,"s":"1.0","i":9007199254740993,"u":"18446744073709551615"}',
          {"f": "449847", "g": "0.1", "h": "-2.5", "n": None, "s": "1.0", "i": "9007199254740993",
           "u": "18446744073709551615"}),
         ('{"v":[1.1,-2.0,0.0],"a/b~c":"x","e":"","q":"say \\"hi\\", ok: yes"}',
          {"v": "[1.10000e+00,-2.00000e+00,0.00000e+00]", "a/b~c": "x", "e": "", "q": 'say "hi", ok: yes'})]


def _fixture_images() -> list[tuple[str, dict[str, str | None]]]:
    """(typed JSON, the previous layout's text map) of every image of every fixture."""
    out = []
    for path in fixture_binlogs():
        try:
            for ev in BinlogReader(str(path)):
                if isinstance(ev, RowsEvent):
                    cols = ev.columns_by_name()
                    for change in ev.rows:
                        for row in (change.before, change.after):
                            if row is not None:
                                out.append((compact_json(render_row(row, cols)), render_row_text(row, cols)))
        except BinlogError:
            if path.name not in DAMAGED_FIXTURES:
                raise
    return out


@pytest.fixture(scope="module")
def images() -> list[tuple[str, dict[str, str | None]]]:
    found = _fixture_images()
    assert len(found) > 40_000 and sum(len(t) for _, t in found) > 250_000, len(found)
    return found + EXTRA


def _as_dict(value: Any) -> dict[str, str | None] | None:
    if value is None:
        return None
    return dict(value.items() if hasattr(value, "items") else value)


def test_the_python_rule_gives_the_previous_map(images: list[tuple[str, dict[str, str | None]]]) -> None:
    assert [text_map(j) for j, _ in images] == [t for _, t in images]
    assert text_map(None) is None


def test_duckdbs_row_image_text_gives_the_previous_map(images: list[tuple[str, dict[str, str | None]]]) -> None:
    import duckdb

    con = duckdb.connect()
    for macro in DUCKDB_TEXT_MAP_MACROS:
        con.execute(macro)
    con.register("images", pa.table({"i": list(range(len(images))) + [len(images)],
                                     "j": [j for j, _ in images] + [None]}))
    got = con.execute("SELECT row_image_text(j) FROM images ORDER BY i").fetchall()
    assert [_as_dict(m) for (m,) in got] == [t for _, t in images] + [None]


@pytest.mark.spark
def test_sparks_expression_gives_the_previous_map(spark: Any, images: list[tuple[str, dict[str, str | None]]]) -> None:
    df = spark.createDataFrame([(i, j) for i, (j, _) in enumerate(images)] + [(len(images), None)],
                               "i INT, after STRING")
    got = df.selectExpr("i", f"{spark_text_map('after')} AS m").orderBy("i").collect()
    assert [_as_dict(r["m"]) for r in got] == [t for _, t in images] + [None]


def test_binlake_sqls_fast_path_has_row_image_text(tmp_path: Any) -> None:
    """``binlake sql`` (the DuckDB fast path) answers ``row_image_text(after)`` over the table."""
    import datetime as dt

    from deltalake import write_deltalake

    from binlake.config import BinlakeConfig
    from binlake.lake import tables
    from binlake.lake.tables import table_location
    from binlake.sql.fast import FastWarehouse

    cfg = BinlakeConfig(warehouse=str(tmp_path / "wh"), state_dir=str(tmp_path / "state"))
    when = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)
    row = {"source": "s", "file": "binlog.000001", "file_seq": 1, "pos": 4, "row_index": 0, "db": "d", "table_name": "t",
           "operation": "update", "event_type": "UPDATE_ROWS_V2", "commit_time": when, "commit_date": when.date(),
           "before": EXTRA[0][0], "after": EXTRA[1][0]}
    write_deltalake(table_location(cfg.warehouse, "silver.row_changes"),
                    pa.Table.from_pylist([row], schema=tables.table("silver.row_changes").arrow_schema),
                    partition_by=["source", "commit_date"])
    fast = FastWarehouse(cfg)
    try:
        (got,) = fast.run("SELECT row_image_text(before) AS b, row_image_text(after) AS a FROM silver.row_changes").rows
    finally:
        fast.close()
    assert [_as_dict(m) for m in got] == [EXTRA[0][1], EXTRA[1][1]]
