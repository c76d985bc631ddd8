"""``asof`` and ``flashback`` against a real MariaDB (issue 40).

One server runs a workload in ten checkpoints (inserts, updates incl. a primary-key change, deletes,
a multi-statement transaction, an ALTER TABLE ADD COLUMN ... DEFAULT, a table without a primary key,
text in utf8mb4 and latin1, binary, JSON, DECIMAL, BIGINT UNSIGNED, temporal fractions, BIT, ENUM);
each checkpoint's commit times are set with ``SET timestamp`` (10 s apart, no sleeping), and at each
one the test records ``SELECT *`` of every table, ``@@gtid_binlog_pos``, ``NOW(6)`` and the binlog
file:position. The closed binlogs are ingested once (Spark) and reconciled once (delta-rs); then
``asof`` at every checkpoint, by GTID, by time and by file:position, must equal the recorded rows
cell for cell (gold's comparison, ``test_gold_mariadb.expected_cell``). Flashback SQL for ranges at the
end of the workload is applied to the server inside a transaction (rolled back after): the tables must
equal the checkpoint before the range. The MySQL 8.x fixture binlogs ride along in the same ingest:
``asof`` at each one's end equals the contents its own row events give.
"""

from __future__ import annotations

import datetime as _dt
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
from conftest import make_test_config
from test_gold_mariadb import expected_cell, gold_cell
from test_mariadb_server import running_mariadb

from binlake.history.asof import table_as_of
from binlake.history.errors import CoverageGapError, HistoryError, MomentError
from binlake.history.moments import Moment

SOURCE = "maria-history"
BASE = 1_700_000_000  # commit times: BASE + 10 * checkpoint (+ 5 for the recorded moment)
TABLES = ("items", "log")

SETUP = [
    "CREATE DATABASE shop CHARACTER SET utf8mb4",
    """CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(40), price DECIMAL(10,2),
       qty INT UNSIGNED, big BIGINT UNSIGNED, data VARBINARY(8), j JSON, at6 DATETIME(6), t3 TIME(3),
       d DATE, lat VARCHAR(20) CHARACTER SET latin1, f DOUBLE, b BIT(3), e ENUM('a','b'),
       ts TIMESTAMP(2) NULL) DEFAULT CHARSET=utf8mb4""",
    "CREATE TABLE shop.log (a INT, b VARCHAR(10) CHARACTER SET latin1)",
]
#: one list of transactions per checkpoint (a string: one autocommit statement; a list: one transaction)
WORKLOAD: list[list[Any]] = [
    [],  # checkpoint 0: the tables exist, empty
    ["INSERT INTO shop.items VALUES (1, 'ann', 10.50, 3, 18446744073709551615, x'00ff', '{\"k\": [1, 2.5]}', "
     "'2024-02-29 12:00:00.123456', '-01:02:03.456', '2024-01-01', 'café', 1.5, b'101', 'a', "
     "'2030-01-01 00:00:00.25')",
     "INSERT INTO shop.items VALUES (2, 'bob', 20.00, 0, 0, x'', '[]', NULL, '00:00:00', NULL, NULL, -0.25, "
     "b'0', 'b', NULL), (3, 'héllo 😀', 0.01, 7, 5, NULL, NULL, '1999-12-31 23:59:59', NULL, '1999-12-31', "
     "'Ñandú', NULL, NULL, NULL, NULL)",
     "INSERT INTO shop.log VALUES (1, 'x'), (1, 'x'), (2, 'çà')"],
    ["UPDATE shop.items SET price = price * 2", "DELETE FROM shop.items WHERE id = 2",
     "INSERT INTO shop.log VALUES (3, NULL)"],
    ["UPDATE shop.items SET id = 30 WHERE id = 3", "UPDATE shop.items SET lat = 'über', name = 'it''s' WHERE id = 1",
     "FLUSH BINARY LOGS"],
    ["ALTER TABLE shop.items ADD COLUMN note VARCHAR(10) NOT NULL DEFAULT 'new' AFTER name",
     "INSERT INTO shop.items VALUES (5, 'eve', 'fifth', 5.55, 1, 1, x'0a', '{}', NULL, NULL, NULL, NULL, NULL, "
     "NULL, NULL, NULL)"],
    [["UPDATE shop.items SET qty = qty + 10 WHERE id = 1", "INSERT INTO shop.items (id, name) VALUES (6, 'six')",
      "DELETE FROM shop.log WHERE a = 1 LIMIT 1"]],
    ["UPDATE shop.items SET j = '{\"k\": \"é\\\\n\"}', data = x'5c27', note = 'back\\\\slash' WHERE id = 5",
     "DELETE FROM shop.items WHERE id = 6", "FLUSH BINARY LOGS"],
    ["INSERT INTO shop.items (id, name, price) VALUES (7, 'seven', 7.77)", "UPDATE shop.items SET note = 'one' WHERE id = 1"],
    ["UPDATE shop.items SET name = 'O''Brien \\\\ \\n x', at6 = '2000-01-01 00:00:00.000001' WHERE id = 7",
     "INSERT INTO shop.log VALUES (9, 'ü')"],
    [["UPDATE shop.items SET qty = qty + 1", "DELETE FROM shop.log WHERE a = 2"]],
]


def _connect(sock: Path) -> Any:
    return pymysql.connect(unix_socket=str(sock), user="root", charset="utf8mb4",
                           init_command="SET time_zone = '+00:00'", autocommit=True)


def _select(cur: Any, table: str) -> tuple[list[str], list[tuple[Any, ...]], dict[str, tuple[str, str]]]:
    cur.execute(f"SELECT * FROM shop.{table}")
    names = [d[0] for d in cur.description]
    rows = list(cur.fetchall())
    cur.execute("SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE FROM information_schema.COLUMNS "
                "WHERE TABLE_SCHEMA = 'shop' AND TABLE_NAME = %s", (table,))
    return names, rows, {r[0]: (r[1], r[2]) for r in cur.fetchall()}


def _checkpoint(cur: Any, k: int) -> dict[str, Any]:
    cur.execute(f"SET timestamp = {BASE + 10 * k + 5}")
    cur.execute("SELECT @@gtid_binlog_pos, NOW(6)")
    gtid, now = cur.fetchone()
    cur.execute("SHOW MASTER STATUS")
    status = cur.fetchone()
    return {"gtid": gtid, "time": now, "position": f"{status[0]}:{status[1]}",
            "selects": {t: _select(cur, t) for t in TABLES}}


def _run_phase(cur: Any, k: int, phase: list[Any]) -> None:
    for step in phase:
        cur.execute(f"SET timestamp = {BASE + 10 * k}")
        if isinstance(step, list):
            cur.execute("BEGIN")
            for sql in step:
                cur.execute(sql)
            cur.execute("COMMIT")
        else:
            cur.execute(step)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The workload run, its checkpoints, and the closed binlogs copied to an archive folder; the
    server keeps running (flashback SQL is tried on it)."""
    with running_mariadb("binlake-history-") as db:
        conn = _connect(db.sock)
        checkpoints = []
        with conn.cursor() as cur:
            cur.execute(f"SET timestamp = {BASE - 10}")
            for sql in SETUP:
                cur.execute(sql)
            for k, phase in enumerate(WORKLOAD):
                _run_phase(cur, k, phase)
                checkpoints.append(_checkpoint(cur, k))
            cur.execute("FLUSH BINARY LOGS")
        archive = tmp_path_factory.mktemp("history-archive")
        files = []
        for path in db.binlog_files()[:-1]:  # the last one is the server's open file
            files.append(Path(shutil.copyfile(path, archive / path.name)))
        yield {"db": db, "conn": conn, "checkpoints": checkpoints, "files": files}
        conn.close()


@pytest.fixture(scope="module")
def warehouse(spark: Any, server: dict[str, Any], tmp_path_factory: pytest.TempPathFactory,
              s3_server: Any) -> dict[str, Any]:
    """One ingest (Spark) of the archived files and, as sources of their own, the MySQL 8.x fixture
    binlogs (one Spark job for both: the suite's wall time), one reconciliation (delta-rs) of all,
    and one gold run (Spark, ``__history`` kept) of the MariaDB source."""
    from test_gold_mysql8 import EXPECTED, FILES, FIX

    from binlake.reconcile.job import run_reconcile
    from spark_jobs.gold.job import run_gold
    from spark_jobs.ingest import BinlogObject, run_ingest

    root = tmp_path_factory.mktemp("history-wh")
    cfg = make_test_config(root, s3_server.endpoint_url, gold={"history": True})
    objects = [BinlogObject(source=SOURCE, file=p.name, uri=str(p), size=p.stat().st_size,
                            etag=str(p.stat().st_size)) for p in server["files"]]
    sizes = {}
    for source in sorted({key[0] for key in EXPECTED}):
        (root / source).mkdir()
        target = Path(shutil.copyfile(FIX / FILES[source], root / source / "binlog.000001"))
        sizes[source] = target.stat().st_size
        objects.append(BinlogObject(source=source, uri=str(target), size=sizes[source], etag="1"))
    run_ingest(spark, cfg, objects, "history-ingest")
    run_reconcile(cfg, "history-reconcile", sources=[SOURCE, *sizes])
    run_gold(spark, cfg, SOURCE, "history-gold")
    return {"cfg": cfg, "mysql8_sizes": sizes}


@pytest.fixture(scope="module")
def lake(warehouse: dict[str, Any]) -> Any:
    return warehouse["cfg"]


def assert_rows_equal(table: str, got_columns: list[str], got_rows: list[tuple[Any, ...]],
                      select: tuple[list[str], list[tuple[Any, ...]], dict[str, tuple[str, str]]]) -> int:
    """``asof``'s rows == the server's SELECT, cell for cell with gold's types; the cells compared."""
    names, rows, types = select
    assert got_columns == names, f"{table}: columns {got_columns} != server's {names}"
    expected = sorted((tuple(expected_cell(v, *types[n]) for v, n in zip(r, names)) for r in rows), key=repr)
    got = sorted((tuple(gold_cell(v, types[n][0]) for v, n in zip(r, names)) for r in got_rows), key=repr)
    assert len(got) == len(expected), f"{table}: asof has {len(got)} rows, the server had {len(expected)}"
    for e, g in zip(expected, got):
        for n, ev, gv in zip(names, e, g):
            assert (ev is None and gv is None) or (ev == gv and type(ev) is type(gv)), (
                f"{table}.{n}: server {ev!r} ({type(ev).__name__}) != asof {gv!r} ({type(gv).__name__})")
    return len(expected) * len(names)


@pytest.mark.parametrize("kind", ["gtid", "time", "position"])
def test_asof_equals_every_checkpoint(lake: Any, server: dict[str, Any], kind: str) -> None:
    cells = 0
    for k, cp in enumerate(server["checkpoints"]):
        text = cp[kind].isoformat(sep=" ") if kind == "time" else cp[kind]
        for table in TABLES:
            got = table_as_of(lake, SOURCE, "shop", table, Moment(kind, text))
            cells += assert_rows_equal(f"{table} at checkpoint {k} ({kind} {text})", got.columns, got.rows,
                                       cp["selects"][table])
    assert cells > 300


@pytest.mark.parametrize("start", ["replay", "gold", "history"])
def test_asof_from_either_state_equals_every_checkpoint(lake: Any, server: dict[str, Any], start: str) -> None:
    """Forced to replay from the archive's start, to take gold's table back, or to read its
    ``__history`` table at the cut: the same rows. Gold's tables cannot serve before the ALTER TABLE
    of checkpoint 4 (the rows have another shape now)."""
    from binlake.history.unapply import Unusable

    cells = 0
    for k, cp in enumerate(server["checkpoints"]):
        for table in TABLES:
            if start != "replay" and table == "items" and k < 4:
                with pytest.raises(Unusable, match="DDL after the moment .*ALTER TABLE shop.items"):
                    table_as_of(lake, SOURCE, "shop", table, Moment("gtid", cp["gtid"]), start=start)
                continue
            got = table_as_of(lake, SOURCE, "shop", table, Moment("gtid", cp["gtid"]), start=start)
            said = {"gold": "took back", "history": "read the versions valid then", "replay": "asked for a replay"}
            assert got.method.startswith(said[start]), got.method
            cells += assert_rows_equal(f"{table} at checkpoint {k} from {start}", got.columns, got.rows,
                                       cp["selects"][table])
    assert cells > 150


def test_asof_table_in_binlake_sql_equals_the_checkpoints(lake: Any, server: dict[str, Any]) -> None:
    """The SQL form: ``asof_table(...)`` in ``binlake sql`` (the fast path, no JVM) gives the rows the
    server held at each checkpoint, and filters and joins like any table."""
    from binlake.errors import BinlakeError
    from binlake_cli.sql import SqlSession

    session = SqlSession(lake, engine="auto")
    cells = 0
    try:
        for k, cp in enumerate(server["checkpoints"]):
            for table in TABLES:
                got = session.run(f"SELECT * FROM asof_table('{SOURCE}', 'shop.{table}', 'gtid', '{cp['gtid']}')", 0)
                cells += assert_rows_equal(f"{table} at checkpoint {k} by asof_table", got.columns, got.rows,
                                           cp["selects"][table])
        first, last = server["checkpoints"][0], server["checkpoints"][-1]
        joined = session.run(
            f"SELECT count(*) AS n FROM asof_table('{SOURCE}', 'shop.items', 'gtid', '{first['gtid']}') AS a "
            f"JOIN asof_table('{SOURCE}', 'shop.items', 'time', '{last['time'].isoformat(sep=' ')}') AS b "
            "ON a.id = b.id", 0)
        first_ids = {r[0] for r in first["selects"]["items"][1]}
        assert joined.rows == [(len(first_ids & {r[0] for r in last["selects"]["items"][1]}),)]
        with pytest.raises(BinlakeError, match="asof_table takes"):
            session.run(f"SELECT * FROM asof_table('{SOURCE}', 'shop.items')", 0)
        with pytest.raises(BinlakeError, match=r"runs on the fast path only \(--engine spark\)"):
            SqlSession(lake, engine="spark").run(
                f"SELECT * FROM asof_table('{SOURCE}', 'shop.items', 'gtid', '{first['gtid']}')", 0)
    finally:
        session.close()
    assert cells > 150


def test_asof_starts_from_the_nearer_state(lake: Any, server: dict[str, Any]) -> None:
    last, early = server["checkpoints"][-1], server["checkpoints"][1]
    at_end = table_as_of(lake, SOURCE, "shop", "items", Moment("gtid", last["gtid"]))
    assert at_end.method.startswith("took back 0 later row change(s) from gold.maria_history__shop__items")
    before_alter = table_as_of(lake, SOURCE, "shop", "items", Moment("gtid", early["gtid"]))
    assert before_alter.method.startswith("gold's state cannot serve: DDL after the moment")
    log = table_as_of(lake, SOURCE, "shop", "log", Moment("gtid", early["gtid"]))
    assert log.method.startswith("nearest start: the archive's (a replay from the start works through 3 row "
                                 "change(s)"), log.method


def test_asof_refuses_moments_outside_the_archive(lake: Any, server: dict[str, Any]) -> None:
    first = server["checkpoints"][0]
    with pytest.raises(MomentError, match="precedes the archive"):
        table_as_of(lake, SOURCE, "shop", "items", Moment("time", "2000-01-01 00:00:00"))
    domain, server_id, seq = first["gtid"].split("-")
    with pytest.raises(MomentError, match="not in the archive"):
        table_as_of(lake, SOURCE, "shop", "items", Moment("gtid", f"{domain}-{server_id}-{int(seq) + 999}"))
    with pytest.raises(MomentError, match="not a binlog position"):
        table_as_of(lake, SOURCE, "shop", "items", Moment("position", "nonsense"))
    with pytest.raises(HistoryError, match="unknown at that moment"):
        table_as_of(lake, SOURCE, "shop", "nothere", Moment("gtid", server["checkpoints"][-1]["gtid"]))


def test_asof_refuses_a_gap_before_the_moment(lake: Any, server: dict[str, Any]) -> None:
    from binlake.history.asof import check_coverage

    rows = [{"file": "binlog.000001", "chain_index": 0, "status": "OK"},
            {"file": "binlog.000002", "chain_index": 1, "status": "GAP", "missing_gtids": "0:5-9"},
            {"file": "binlog.000003", "chain_index": 2, "status": "OK"}]
    check_coverage(rows, "binlog.000001", SOURCE)  # before the GAP: answered
    with pytest.raises(CoverageGapError, match=r"GAP before file binlog.000002 \(missing: 0:5-9\)"):
        check_coverage(rows, "binlog.000003", SOURCE)
    with pytest.raises(CoverageGapError, match="never checked"):
        check_coverage(None, "binlog.000001", SOURCE)


# ------------------------------------------------------------------ flashback

def _seq(gtid_pos: str) -> tuple[str, int]:
    """``d-s-n`` (one domain) -> (``d-s-``, n)."""
    d, s, n = gtid_pos.split("-")
    return f"{d}-{s}-", int(n)


def _range(server: dict[str, Any], after_checkpoint: int, through_checkpoint: int) -> str:
    prefix, first = _seq(server["checkpoints"][after_checkpoint]["gtid"])
    _, last = _seq(server["checkpoints"][through_checkpoint]["gtid"])
    return f"{prefix}{first + 1}..{prefix}{last}"


def _apply_and_compare(server: dict[str, Any], undos: list[Any], checkpoint: int) -> int:
    """Run the undo statements on the server in one transaction, compare every table with the
    checkpoint's SELECT, roll back; the rows compared."""
    conn = server["conn"]
    compared = 0
    conn.begin()
    try:
        with conn.cursor() as cur:
            for undo in undos:
                for statement in undo.script().split(";\n")[:-1]:
                    cur.execute(statement)
            for table in TABLES:
                names, rows, _types = _select(cur, table)
                want_names, want_rows, _ = server["checkpoints"][checkpoint]["selects"][table]
                assert names == want_names
                assert sorted(rows, key=repr) == sorted(want_rows, key=repr), f"{table} != checkpoint {checkpoint}"
                compared += len(rows)
    finally:
        conn.rollback()
    return compared


@pytest.mark.parametrize(("selection", "back_to"), [("gtid 8..9", 8), ("time 7..9", 7), ("gtid 4..9", 4),
                                                    ("transactions 6..9", 5)])
def test_flashback_sql_restores_the_checkpoint_before_the_range(lake: Any, server: dict[str, Any], selection: str,
                                                                 back_to: int) -> None:
    from binlake.history.undo import flashback, gtid_range, time_window, transactions

    kind, span = selection.split()
    a, b = (int(x) for x in span.split(".."))
    if kind == "gtid":
        chosen = gtid_range(_range(server, a, b))
    elif kind == "time":
        chosen = time_window(_dt.datetime.fromtimestamp(BASE + 10 * (a + 1), _dt.UTC).isoformat(),
                             _dt.datetime.fromtimestamp(BASE + 10 * b + 5, _dt.UTC).isoformat())
    else:
        prefix, first = _seq(server["checkpoints"][a - 1]["gtid"])
        _, last = _seq(server["checkpoints"][b]["gtid"])
        chosen = transactions([f"{prefix}{n}" for n in range(first + 1, last + 1)])
    undos = [flashback(lake, SOURCE, "shop", table, chosen) for table in TABLES]
    assert all(u.statements for u in undos)
    assert _apply_and_compare(server, undos, back_to) > 0
    script = undos[0].script(single_transaction=True)
    assert script.startswith("SET NAMES utf8mb4;\nSET time_zone = '+00:00';\nSTART TRANSACTION;\n")
    assert script.endswith("COMMIT;\n")


def test_flashback_refuses_a_range_across_an_alter(lake: Any, server: dict[str, Any]) -> None:
    from binlake.history.errors import SchemaChangeError
    from binlake.history.undo import flashback, gtid_range

    with pytest.raises(SchemaChangeError, match=r"shop.items: DDL at binlog.\d+:\d+ inside .*ALTER TABLE shop.items"):
        flashback(lake, SOURCE, "shop", "items", gtid_range(_range(server, 3, 5)))


def test_flashback_names_later_transactions_on_the_same_rows(lake: Any, server: dict[str, Any]) -> None:
    from binlake.history.undo import flashback, gtid_range, transactions

    undo = flashback(lake, SOURCE, "shop", "items", gtid_range(_range(server, 6, 7)))
    prefix, cp7 = _seq(server["checkpoints"][7]["gtid"])
    _, cp9 = _seq(server["checkpoints"][9]["gtid"])
    # checkpoint 8 updates row 7 (inserted in the range), checkpoint 9 every row (row 1 updated in it)
    assert {c.gtid for c in undo.conflicts} == {f"{prefix}{cp7 + 1}", f"{prefix}{cp9}"}
    assert all(c.key in {(7,), (1,)} for c in undo.conflicts)
    assert [s.split()[0] for s in undo.statements] == ["UPDATE", "DELETE"]  # reverse binlog order
    assert not any(c.inside for c in undo.conflicts)
    # checkpoint 7's insert of row 7 and checkpoint 9 picked one by one: checkpoint 8's update of row 7,
    # left out between them, is named as a change between the chosen transactions
    _, cp6 = _seq(server["checkpoints"][6]["gtid"])
    picked = flashback(lake, SOURCE, "shop", "items", transactions([f"{prefix}{cp6 + 1}", f"{prefix}{cp9}"]))
    assert [(c.gtid, c.inside) for c in picked.conflicts] == [(f"{prefix}{cp7 + 1}", True)]


# ------------------------------------------------------------------ the command lines

def test_cli_asof_csv_delta_and_flashback(lake: Any, server: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    import io

    import binlake.config
    from binlake_cli.app import main
    from binlake_cli.history import AsofOptions, FlashbackOptions, run_asof, run_flashback

    monkeypatch.setattr(binlake.config, "load_config", lambda path=None: lake)
    cp = server["checkpoints"][2]
    out, err = io.StringIO(), io.StringIO()
    assert run_asof(AsofOptions(SOURCE, "shop.items", gtid=cp["gtid"], output_format="csv"), out, err) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].split(",")[:4] == ["id", "name", "price", "qty"] and len(lines) == 1 + 2
    assert f"through {cp['gtid']}" in err.getvalue() and "replayed" in err.getvalue()
    target = tmp_path / "items_at_2"
    run_asof(AsofOptions(SOURCE, "`shop`.`items`", time=cp["time"].isoformat(), to_delta=str(target)), out, err)
    import pyarrow as pa
    from deltalake import DeltaTable
    written = pa.table(DeltaTable(str(target)).to_pyarrow_table())
    assert str(written.schema.field("big").type) == "decimal128(20, 0)"
    assert str(written.schema.field("at6").type) == "timestamp[us]" and written.num_rows == 2
    assert sorted(written.column("id").to_pylist()) == sorted(r[0] for r in cp["selects"]["items"][1])
    out, err = io.StringIO(), io.StringIO()
    run_flashback(FlashbackOptions(SOURCE, "shop.items", gtid_range=_range(server, 6, 7), single_transaction=True),
                  out, err)
    assert out.getvalue().count("START TRANSACTION;") == 1 and "UPDATE `shop`.`items` SET" in out.getvalue()
    assert err.getvalue().count("warning: after the range, ") == 2
    assert main(["asof", "-s", SOURCE, "-t", "shop.items", "--gtid", cp["gtid"], "--time", "2020-01-01"]) == 1


# ------------------------------------------------------------------ MySQL 8.x fixture binlogs

def _ends(cfg: Any, source: str, size: int) -> list[Moment]:
    from binlake.history.reads import load_transactions

    last = max(load_transactions(cfg, source), key=lambda t: (t.file_seq, t.start_pos))
    moments = [Moment("position", f"binlog.000001:{size}"), Moment("time", "2100-01-01 00:00:00")]
    if last.gtid and last.gtid != "ANONYMOUS":
        moments.append(Moment("gtid", last.gtid))
    return moments


def test_asof_at_the_end_of_mysql8_fixtures_equals_their_contents(warehouse: dict[str, Any]) -> None:
    """At the end of each MySQL 8.x fixture binlog (no server here) — by position, by time and, where
    the file has GTIDs, by its last GTID — every table equals the contents the file's own row events
    give (``test_gold_mysql8.EXPECTED``, from ``mariadb-binlog -v`` of the same files), value and type;
    no gold run for them, so each answer is a replay from the archive's start."""
    from test_gold_mysql8 import EXPECTED

    cfg, cells, by_gtid = warehouse["cfg"], 0, 0
    for (source, db, table), (columns, _types, rows) in EXPECTED.items():
        for moment in _ends(cfg, source, warehouse["mysql8_sizes"][source]):
            got = table_as_of(cfg, source, db, table, moment)
            assert got.columns[: len(columns)] == columns, (source, table)
            values = [tuple(r[: len(columns)]) for r in got.rows]
            # repr: type and exact value (a DECIMAL's scale, bytes vs str) must both agree
            assert sorted(map(repr, values)) == sorted(map(repr, rows)), (source, table, str(moment))
            cells += len(rows) * len(columns)
            by_gtid += moment.kind == "gtid"
    assert cells >= 2 * 195 and by_gtid > 0
