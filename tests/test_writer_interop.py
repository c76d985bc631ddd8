"""Independent decoders read the writer's files with the same row values.

* python-mysql-replication (its own event classes, driven from file bytes by
  ``bench.peers.pymysqlrepl``) over a generated OLTP archive (sbtest + a JSON/DECIMAL/ENUM/SET/
  temporal ``orders`` table): every row image equals ours.
* ``mariadb-binlog -vv`` (Debian's C decoder) over a file of the column types MariaDB knows
  (it has no MySQL JSON): every ``@N=`` value equals the one we wrote.
"""

from __future__ import annotations

import datetime as dt
import io
import re
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest

from binlake_testing.synthetic import Faults, SyntheticConfig, generate
from binlog_parser import read_events
from binlog_parser.rows import MySQLDate, MySQLDateTime, MySQLTime, MySQLTimestamp
from binlog_parser.rows.json_binary import MySQLJson
from binlog_parser.writer import BinlogFileWriter, Column, Table

U = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


def _norm_ours(v, col):
    if isinstance(v, MySQLJson):
        return v.tree
    if isinstance(v, MySQLTimestamp):
        return v.to_python().replace(tzinfo=None)
    if isinstance(v, (MySQLDateTime, MySQLDate, MySQLTime)):
        return v.to_python()
    if col.type_name == "SET" and isinstance(v, str):
        # python-mysql-replication returns None for the empty set (it conflates '' and NULL)
        return set(v.split(",")) if v else None
    return v


def _norm_peer(v):
    if isinstance(v, bytes):
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError:
            return v
    if isinstance(v, dict):
        return {_norm_peer(k): _norm_peer(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_norm_peer(x) for x in v]
    return v


def _ours_rows(data: bytes):
    out = []
    for ev in read_events(data):
        if ev.name.endswith("ROWS_V2"):
            cols = {c.name: c for c in ev.table.columns}
            for r in ev.rows:
                for img in (r.before, r.after):
                    if img is not None:
                        out.append((ev.table_name, {k: _norm_ours(v, cols[k]) for k, v in img.items()}))
    return out


def _peer_rows(data: bytes):
    from pymysqlreplication.row_event import UpdateRowsEvent

    from bench.peers.pymysqlrepl import PeerError, iter_events

    out = []
    for ev in iter_events(data):
        assert not isinstance(ev, PeerError), ev
        if hasattr(ev, "rows") and hasattr(ev, "table_id"):
            for r in ev.rows:
                if isinstance(ev, UpdateRowsEvent):
                    images = (r["before_values"], r["after_values"])
                else:
                    images = (r["values"],)
                for img in images:
                    out.append((ev.table, {k: _norm_peer(v) for k, v in img.items()}))
    return out


def test_python_mysql_replication_reads_generated_archive(tmp_path: Path) -> None:
    pytest.importorskip("pymysqlreplication")
    truth = generate(str(tmp_path), SyntheticConfig(bytes_per_server=400 << 10, max_binlog_size=128 << 10,
                                                   rows_per_table=100, seed=7, faults=Faults()))
    files = [f for f in truth["sources"]["src1"]["files"] if f["present"]]
    assert len(files) >= 3
    total = 0
    for f in files:
        data = (tmp_path / f["object"]).read_bytes()
        ours = _ours_rows(data)
        theirs = _peer_rows(data)
        assert len(ours) == len(theirs)
        for (t1, a), (t2, b) in zip(ours, theirs):
            assert t1 == t2
            assert a == b, (t1, a, b)
        total += len(ours)
    assert total > 1000
    assert any(t == "orders" for f in files for t, _ in _ours_rows((tmp_path / f["object"]).read_bytes()))


TYPES = Table("db", "t", (
    Column("id", "BIGINT UNSIGNED", nullable=False, primary_key=True), Column("i", "INT"),
    Column("s", "SMALLINT"), Column("m", "MEDIUMINT UNSIGNED"), Column("v", "VARCHAR(20)"),
    Column("c", "CHAR(5)"), Column("d", "DECIMAL(12,3)"), Column("dt", "DATETIME(6)"),
    Column("da", "DATE"), Column("tm", "TIME(2)"), Column("f", "DOUBLE"), Column("y", "YEAR"),
    Column("b", "BLOB"), Column("e", "ENUM('x','y')"),
), table_id=5)

ROWS = [
    (1, -5, -300, 70000, "héllo", "ab", Decimal("-123.450"), dt.datetime(2024, 1, 2, 3, 4, 5, 60),
     dt.date(1999, 12, 31), dt.timedelta(hours=-30, seconds=-1, microseconds=-500000), 1.25, 2024,
     b"\x00\x01", "y"),
    (2, 2147483647, 32767, 8388607, "", "x", Decimal("999999999.999"), dt.datetime(1000, 1, 1),
     dt.date(2020, 2, 29), dt.timedelta(hours=838, minutes=59, seconds=59), -0.5, 1901, b"", "x"),
    (3, None, None, None, None, None, None, None, None, None, None, None, None, None),
]


def _mariadb_text(v) -> str:
    """How mariadb-binlog -vv prints a value we wrote (its log_event_print_value)."""
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return "'" + v + "'"
    if isinstance(v, bytes):
        return "'" + "".join(f"\\x{b:02x}" for b in v) + "'"
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, dt.datetime):
        return "'" + v.strftime("%Y-%m-%d %H:%M:%S") + f".{v.microsecond:06d}'"
    if isinstance(v, dt.date):
        return "'" + v.strftime("%Y:%m:%d") + "'"
    if isinstance(v, dt.timedelta):
        neg = v < dt.timedelta(0)
        v = -v if neg else v
        secs = v.days * 86400 + v.seconds
        return f"'{'-' if neg else ''}{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}.{v.microseconds // 10000:02d}'"
    if isinstance(v, float):
        return repr(v)
    return str(v)


@pytest.mark.skipif(shutil.which("mariadb-binlog") is None, reason="mariadb-binlog not installed")
def test_mariadb_binlog_reads_written_rows(tmp_path: Path) -> None:
    buf = io.BytesIO()
    w = BinlogFileWriter(buf, server_version="8.0.40", previous_gtids="", timestamp=1_700_000_000)
    w.begin_transaction(f"{U}:1")
    w.write_rows(TYPES, ROWS)
    w.update_rows(TYPES, [(ROWS[0], ROWS[1])])
    w.delete_rows(TYPES, [ROWS[2]])
    w.xid()
    w.rotate("binlog.000002")
    path = tmp_path / "binlog.000001"
    path.write_bytes(buf.getvalue())
    out = subprocess.run(["mariadb-binlog", "-vv", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    values = re.findall(r"^###   @(\d+)=(.*?)(?: \(\d+\))? /\*", out.stdout, re.M)
    images = [ROWS[0], ROWS[1], ROWS[2], ROWS[0], ROWS[1], ROWS[2]]
    assert len(values) == len(images) * len(TYPES.columns)
    k = 0
    for img in images:
        for i, v in enumerate(img):
            n, text = values[k]
            k += 1
            assert int(n) == i + 1
            if i == 0 and v >= 1 << 63:  # mariadb prints BIGINT UNSIGNED as signed (unsigned)
                continue
            if TYPES.columns[i].name == "e" and v is not None:  # ENUM: printed as its index
                assert text == str(("x", "y").index(v) + 1)
                continue
            assert text == _mariadb_text(v), (TYPES.columns[i].name, text, v)
    assert "### UPDATE `db`.`t`" in out.stdout and "### DELETE FROM `db`.`t`" in out.stdout


@pytest.mark.skipif(shutil.which("mariadb-binlog") is None, reason="mariadb-binlog not installed")
def test_mariadb_binlog_reads_generated_oltp_chain(tmp_path: Path) -> None:
    truth = generate(str(tmp_path), SyntheticConfig(bytes_per_server=200 << 10, max_binlog_size=64 << 10,
                                                   rows_per_table=50, tables=2, seed=3,
                                                   orders=False))
    # (the orders table has JSON, which MariaDB does not know: sbtest tables only)
    files = truth["sources"]["src1"]["files"]
    assert len(files) >= 3
    total = 0
    for f in files:
        data = (tmp_path / f["object"]).read_bytes()
        out = subprocess.run(["mariadb-binlog", "-vv", str(tmp_path / f["object"])],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        ours = [v for _t, img in _ours_rows(data) for v in img.values()]
        theirs = re.findall(r"^###   @\d+=(.*?) /\*", out.stdout, re.M)
        total += len(ours)
        assert [("'" + v + "'") if isinstance(v, str) else str(v) for v in ours] == theirs
    assert total > 1000


_BENCH = Path(__file__).resolve().parent.parent / ".bench"


def _peer_counts(cmd: list[str]) -> tuple[int, int]:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    last = out.stdout.strip().splitlines()[-1]
    if last.startswith("{"):
        import json

        d = json.loads(last)
        return d["rows"], d["errors"]
    events, rows, errors = map(int, last.split())
    return rows, errors


@pytest.mark.parametrize("peer", ["go-mysql", "mysql-binlog-connector-java"])
def test_compiled_peers_read_generated_archive(tmp_path: Path, peer: str) -> None:
    """go-mysql's ParseFile and mysql-binlog-connector-java (built by bench/decode.py into .bench/;
    skipped when not built) read every file without error and find the same number of rows."""
    if peer == "go-mysql":
        exe = _BENCH / "gomysql-peer"
        if not exe.exists():
            pytest.skip("go peer not built (python bench/decode.py builds it)")
        cmd = [str(exe)]
    else:
        classes, lib = _BENCH / "java" / "classes", _BENCH / "java" / "lib"
        if not (classes / "BinlogFileBench.class").exists() or shutil.which("java") is None:
            pytest.skip("java peer not built (python bench/decode.py builds it)")
        cp = ":".join([str(classes)] + [str(j) for j in sorted(lib.glob("*.jar"))])
        cmd = ["java", "-cp", cp, "BinlogFileBench"]
    truth = generate(str(tmp_path), SyntheticConfig(bytes_per_server=300 << 10, max_binlog_size=100 << 10,
                                                   rows_per_table=50, seed=4, compression=False))
    for f in truth["sources"]["src1"]["files"]:
        path = tmp_path / f["object"]
        rows, errors = _peer_counts(cmd + [str(path)])
        assert errors == 0
        # go-mysql lists an UPDATE's before and after images as two rows
        per_update = 2 if peer == "go-mysql" else 1
        ours = sum(len(ev.rows) * (per_update if ev.kind == "update" else 1)
                   for ev in read_events(path) if ev.name.endswith("ROWS_V2"))
        assert rows == ours
