"""Against a real MariaDB: run tests/sql/all_types.sql, decode the binlogs it wrote, replay the
row changes in order and compare with what SELECT prints, value for value.

The server is Debian's ``mariadb-server`` (``make setup`` installs it; so does this test when
it runs as root with apt available). It runs as a child process on a temp datadir with a unix
socket and no networking. Skipped - loudly - only when no server can be found or installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from rows_replay import Replayer, compare_table

from binlog_parser.reader import read_events
from binlog_parser.rows import RowsEvent

SQL = Path(__file__).parent / "sql" / "all_types.sql"
TABLES = {"ints": "id", "nums": "id", "times": "id", "strs": "id", "geo": "id"}
SBIN = ("/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin")


def _which(*names: str) -> str | None:
    for n in names:
        p = shutil.which(n, path=os.pathsep.join([os.environ.get("PATH", ""), *SBIN]))
        if p:
            return p
    return None


def _ensure_installed() -> str | None:
    if _which("mariadbd", "mysqld") and _which("mariadb-install-db", "mysql_install_db"):
        return None
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return "mariadb-server is not installed and this process cannot apt-get install it"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    r = subprocess.run(["apt-get", "install", "-y", "-qq", "mariadb-server", "mariadb-client"],
                       env=env, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True, timeout=600)
        r = subprocess.run(["apt-get", "install", "-y", "-qq", "mariadb-server", "mariadb-client"],
                           env=env, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return f"apt-get install mariadb-server failed: {r.stderr[-500:]}"
    return None


class MariaDB:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.datadir = base / "data"
        self.sock = base / "mysqld.sock"
        self.proc: subprocess.Popen | None = None
        self.mariadbd = _which("mariadbd", "mysqld")
        self.install_db = _which("mariadb-install-db", "mysql_install_db")
        self.client = _which("mariadb", "mysql")
        self.admin = _which("mariadb-admin", "mysqladmin")

    def start(self) -> None:
        user = ["--user=root"] if os.geteuid() == 0 else []
        r = subprocess.run([self.install_db, "--no-defaults", f"--datadir={self.datadir}",
                            "--auth-root-authentication-method=normal", "--skip-test-db", *user],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"mariadb-install-db failed: {r.stdout[-800:]} {r.stderr[-800:]}")
        self.log = open(self.base / "server.log", "wb")
        self.proc = subprocess.Popen(
            [self.mariadbd, "--no-defaults", f"--datadir={self.datadir}", f"--socket={self.sock}",
             "--skip-networking", f"--pid-file={self.base / 'mysqld.pid'}", *user,
             f"--log-bin={self.datadir / 'binlog'}", "--binlog-format=ROW", "--binlog-row-image=FULL",
             "--binlog-row-metadata=FULL", "--server-id=7", "--default-time-zone=+00:00",
             "--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci",
             "--innodb-buffer-pool-size=32M", "--max-allowed-packet=64M", "--skip-log-error",
             "--innodb-log-file-size=16M"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mariadbd exited: {(self.base / 'server.log').read_text()[-2000:]}")
            if self.sock.exists() and self.query("SELECT 1", check=False).returncode == 0:
                return
            time.sleep(0.2)
        raise RuntimeError("mariadbd did not become ready in 60 s")

    def _client(self, *args: str) -> list[str]:
        return [self.client, "--no-defaults", f"--socket={self.sock}", "-uroot",
                "--default-character-set=utf8mb4", *args]

    def query(self, sql: str, check: bool = True, batch: bool = True) -> subprocess.CompletedProcess:
        args = ["--batch"] if batch else []
        return subprocess.run(self._client(*args, "-e", sql), capture_output=True, timeout=120, check=check)

    def source(self, path: Path) -> None:
        with open(path, "rb") as f:
            r = subprocess.run(self._client(), stdin=f, capture_output=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError(f"SQL script failed: {r.stderr.decode(errors='replace')}")

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            subprocess.run([self.admin, "--no-defaults", f"--socket={self.sock}", "-uroot", "shutdown"],
                           capture_output=True, timeout=60)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def server_run():
    reason = _ensure_installed()
    if reason:
        msg = f"!!! REAL-SERVER TEST SKIPPED: {reason} !!!"
        print(msg, file=sys.stderr)
        pytest.skip(msg)
    base = Path(tempfile.mkdtemp(prefix="binlake-mariadb-"))
    db = MariaDB(base)
    try:
        db.start()
        db.source(SQL)
        selects = {t: db.query(f"SELECT * FROM alltypes.{t} ORDER BY {pk}").stdout for t, pk in TABLES.items()}
        index = (db.datadir / "binlog.index").read_text().split()
        db.stop()
        files = [db.datadir / Path(name).name for name in index]
        yield files, selects
    finally:
        db.stop()
        shutil.rmtree(base, ignore_errors=True)


def test_binlogs_rotated_and_compressed(server_run):
    files, _ = server_run
    assert len(files) >= 4
    types = set()
    for f in files:
        for ev in read_events(str(f)):
            if isinstance(ev, RowsEvent):
                types.add(ev.header.type_code)
    assert types & {166, 167, 168, 169, 170, 171}, f"no compressed rows events: {sorted(types)}"
    assert {23, 24, 25} <= types or {30, 31, 32} <= types


@pytest.mark.parametrize("table", list(TABLES))
def test_replay_equals_select(server_run, table):
    files, selects = server_run
    r = Replayer()
    for f in files:
        r.feed_file(f)
    compare_table(r, "alltypes", table, selects[table])
