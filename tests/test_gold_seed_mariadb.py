"""Seeding gold from a dump, against a real MariaDB: a workload runs, ``mariadb-dump
--single-transaction --master-data=2 --gtid --hex-blob`` is taken mid-workload (the dump records
its GTID position), the workload goes on (updates and deletes of dumped rows, new rows, an
``ALTER TABLE ... ADD COLUMN ... DEFAULT``). The archive given to binlake lacks the first binlog
(the CREATE TABLEs and the first rows: only the dump has them) and starts with the file the dump
was taken in, whose first changes are already in the dump. Gold, seeded from the dump, must equal
the server's final ``SELECT *`` cell by cell, and say how many archived changes it skipped
because the snapshot already held them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import make_test_config
from test_gold_mariadb import CREATE, ROW_MAX, ROW_MIN, ROW_NULL, _connect, expected_cell, gold_cell
from test_mariadb_server import MariaDB, _ensure_installed

from binlake_testing.mariadb_server import which
from spark_jobs.gold.job import gold_location, gold_table_name, run_gold
from spark_jobs.ingest import BinlogObject, run_ingest

SOURCE = "maria-seed"
TABLES = ("t_all", "orders", "nopk")
BEFORE_DUMP = [
    ["CREATE DATABASE shop CHARACTER SET utf8mb4", CREATE[0], CREATE[1], CREATE[3],
     f"INSERT INTO shop.t_all VALUES {ROW_MAX}, {ROW_MIN}",
     "INSERT INTO shop.orders VALUES (1, 'ann', 10.50, 'first'), (2, 'bob', 20.00, NULL), (3, 'cy', 0.01, 'x')",
     "INSERT INTO shop.nopk VALUES (1, 'x')",
     "FLUSH BINARY LOGS"],
    # the file the dump is taken in: these changes are in the dump AND in the archive (6 row changes)
    ["UPDATE shop.orders SET amount = amount * 2 WHERE id <= 2",
     "INSERT INTO shop.nopk VALUES (1, 'x'), (2, 'çà')",  # re-applied, nopk would hold 3 copies of (1, 'x')
     "UPDATE shop.t_all SET id = 20 WHERE id = 2",
     f"INSERT INTO shop.t_all VALUES {ROW_NULL}"],
]
AFTER_DUMP = [
    ["UPDATE shop.orders SET id = 30, customer = 'cyd' WHERE id = 3",
     "DELETE FROM shop.orders WHERE id = 1",
     "UPDATE shop.t_all SET vl = 'über', biu = 18446744073709551614 WHERE id = 20",
     "DELETE FROM shop.nopk WHERE b = 'çà'",
     "ALTER TABLE shop.orders ADD COLUMN status VARCHAR(10) NOT NULL DEFAULT 'new' AFTER amount",
     "INSERT INTO shop.orders VALUES (4, 'dee', 4.44, 'paid', 'fourth')",
     "FLUSH BINARY LOGS"],
    ["UPDATE shop.orders SET status = 'sent' WHERE id = 2", "DELETE FROM shop.t_all WHERE id = 3",
     "INSERT INTO shop.nopk VALUES (3, NULL)"],
]


def _run(db: Any, phases: list[list[str]]) -> None:
    for phase in phases:
        conn = _connect(db.sock)
        with conn.cursor() as cur:
            for sql in phase:
                cur.execute(sql)
        conn.close()


def _select(db: Any) -> dict[str, tuple[list[str], list[tuple[Any, ...]], dict[str, tuple[str, str]]]]:
    conn = _connect(db.sock)
    out = {}
    with conn.cursor() as cur:
        for table in TABLES:
            cur.execute(f"SELECT * FROM shop.{table}")
            names, rows = [d[0] for d in cur.description], list(cur.fetchall())
            cur.execute("SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE FROM information_schema.COLUMNS "
                        "WHERE TABLE_SCHEMA = 'shop' AND TABLE_NAME = %s", (table,))
            out[table] = (names, rows, {r[0]: (r[1], r[2]) for r in cur.fetchall()})
    conn.close()
    return out


@pytest.fixture(scope="module")
def workload() -> Iterator[dict[str, Any]]:
    reason = _ensure_installed()
    if reason:
        pytest.skip(f"!!! REAL-SERVER TEST SKIPPED: {reason} !!!")
    base = Path(tempfile.mkdtemp(prefix="binlake-gold-seed-"))
    db = MariaDB(base)
    try:
        db.start()
        _run(db, BEFORE_DUMP)
        dump = subprocess.run([str(which("mariadb-dump", "mysqldump")), "--no-defaults", f"--socket={db.sock}",
                               "-uroot", "--single-transaction", "--master-data=2", "--gtid", "--hex-blob",
                               "--databases", "shop"], capture_output=True, check=True, timeout=120)
        _run(db, AFTER_DUMP)
        selects = _select(db)
        files = db.binlog_files()
        db.stop()
        archive = base / "archive"
        archive.mkdir()
        kept = []
        for path in files[1:]:  # the first file (CREATE TABLEs, first rows) is not archived
            kept.append(archive / path.name)
            shutil.copyfile(path, kept[-1])
        yield {"dump": dump.stdout.decode("utf-8"), "files": kept, "selects": selects}
    finally:
        db.stop()
        shutil.rmtree(base, ignore_errors=True)


def _compare(spark: Any, cfg: Any, table: str, select: tuple[list[str], list[tuple[Any, ...]], Any]) -> int:
    names, rows, types = select
    df = spark.read.format("delta").load(gold_location(cfg, gold_table_name(SOURCE, "shop", table)))
    copies = "_copies" in df.columns
    got: list[tuple[Any, ...]] = []
    for g in df.select(*[f"`{n}`" for n in names], *(["_copies"] if copies else [])).collect():
        got.extend([tuple(gold_cell(g[i], types[n][0]) for i, n in enumerate(names))] * (g["_copies"] if copies else 1))
    want = [tuple(expected_cell(v, *types[n]) for v, n in zip(r, names)) for r in rows]
    assert sorted(map(repr, got)) == sorted(map(repr, want)), table
    return len(want) * len(names)


def test_seeded_gold_equals_the_final_select(spark: Any, workload: dict[str, Any],
                                            tmp_path_factory: pytest.TempPathFactory, s3_server: Any) -> None:
    root = tmp_path_factory.mktemp("gold-seed")
    dump = root / "shop.sql"
    dump.write_text(workload["dump"], encoding="utf-8")
    cfg = make_test_config(root, s3_server.endpoint_url, gold={"seed_dumps": {SOURCE: str(dump)}})
    objects = [BinlogObject(source=SOURCE, uri=str(p), size=p.stat().st_size, etag="1") for p in workload["files"]]
    run_ingest(spark, cfg, objects, "seed-ingest")
    result = run_gold(spark, cfg, SOURCE, "seed-gold")
    cells = sum(_compare(spark, cfg, t, workload["selects"][t]) for t in TABLES)
    print(f"seeded gold == server SELECT: {cells} cells over {len(TABLES)} tables", file=sys.stderr)
    assert cells == 2 * 36 + 3 * 5 + 3 * 2  # t_all: 1 and 20; orders: 2, 30, 4; nopk: (1,x) twice, (3,NULL)
    skipped = {t.table: dict(t.warnings).get("row changes already in the seed snapshot (skipped)", 0)
               for t in result.tables}
    assert skipped == {"t_all": 2, "orders": 2, "nopk": 2}
    others = {t.table: dict(t.warnings) for t in result.tables}
    for warnings in others.values():
        warnings.pop("row changes already in the seed snapshot (skipped)", None)
    assert others == {"t_all": {}, "orders": {}, "nopk": {}}
    again = run_gold(spark, cfg, SOURCE, "seed-gold-again")
    assert {t.write_mode for t in again.tables} == {"unchanged"}
