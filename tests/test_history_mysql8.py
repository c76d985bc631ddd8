"""``asof`` over the MySQL 8.x fixture binlogs (no server here): at the end of each file — by binlog
position, by commit time and, where the file has GTIDs, by its last GTID — every table equals the
contents the fixture's own row events give (``test_gold_mysql8.EXPECTED``, from ``mariadb-binlog -v``
of the same files), value and type. One ingest (Spark) and one reconciliation (delta-rs); no gold run,
so every answer is a replay from the archive's start.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import make_test_config
from test_gold_mysql8 import EXPECTED, FILES, FIX

from binlake.history.asof import table_as_of
from binlake.history.moments import Moment


@pytest.fixture(scope="module")
def lake(spark: Any, tmp_path_factory: pytest.TempPathFactory, s3_server: Any) -> dict[str, Any]:
    from binlake.reconcile.job import run_reconcile
    from spark_jobs.ingest import BinlogObject, run_ingest

    root = tmp_path_factory.mktemp("history-mysql8")
    objects, sizes = [], {}
    for source in {key[0] for key in EXPECTED}:
        folder = root / source
        folder.mkdir()
        target = Path(shutil.copyfile(FIX / FILES[source], folder / "binlog.000001"))
        sizes[source] = target.stat().st_size
        objects.append(BinlogObject(source=source, uri=str(target), size=sizes[source], etag="1"))
    cfg = make_test_config(root, s3_server.endpoint_url)
    run_ingest(spark, cfg, objects, "history-mysql8-ingest")
    run_reconcile(cfg, "history-mysql8-reconcile", sources=sorted(sizes))
    return {"cfg": cfg, "sizes": sizes}


def _moments(cfg: Any, source: str, size: int) -> list[Moment]:
    from binlake.history.reads import load_transactions

    last = max(load_transactions(cfg, source), key=lambda t: (t.file_seq, t.start_pos))
    moments = [Moment("position", f"binlog.000001:{size}"), Moment("time", "2100-01-01 00:00:00")]
    if last.gtid and last.gtid != "ANONYMOUS":
        moments.append(Moment("gtid", last.gtid))
    return moments


def test_asof_at_the_end_equals_the_fixtures_contents(lake: dict[str, Any]) -> None:
    cells, by_gtid = 0, 0
    for (source, db, table), (columns, _types, rows) in EXPECTED.items():
        for moment in _moments(lake["cfg"], source, lake["sizes"][source]):
            got = table_as_of(lake["cfg"], source, db, table, moment)
            assert got.columns[: len(columns)] == columns, (source, table)
            values = [tuple(r[: len(columns)]) for r in got.rows]
            # repr: type and exact value (a DECIMAL's scale, bytes vs str) must both agree
            assert sorted(map(repr, values)) == sorted(map(repr, rows)), (source, table, str(moment))
            cells += len(rows) * len(columns)
            by_gtid += moment.kind == "gtid"
    assert cells >= 2 * 195 and by_gtid > 0
