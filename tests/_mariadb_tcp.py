"""A throw-away MariaDB server on 127.0.0.1:<free port> with binlogs on, for the archiver tests/bench.

Why not tests/test_mariadb_server.MariaDB: that one runs with --skip-networking (socket only); a
replica connects over TCP with a user that has the REPLICATION SLAVE grant.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

SBIN = ("/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin")
REPL_USER = "binlake_repl"
REPL_PASSWORD = "repl-secret-pw"


def which(*names: str) -> str | None:
    for n in names:
        p = shutil.which(n, path=os.pathsep.join([os.environ.get("PATH", ""), *SBIN]))
        if p:
            return p
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MariaDBServer:
    """mariadbd as a child process: datadir under ``base``, binlog basename ``binlog``."""

    def __init__(self, base: Path, server_id: int = 7, extra_args: tuple[str, ...] = ()) -> None:
        self.base = base
        self.datadir = base / "data"
        self.sock = base / "mysqld.sock"
        self.port = free_port()
        self.server_id = server_id
        self.extra_args = extra_args
        self.proc: subprocess.Popen[bytes] | None = None
        self.mariadbd = which("mariadbd", "mysqld")
        self.install_db = which("mariadb-install-db", "mysql_install_db")
        self.client = which("mariadb", "mysql")
        self.admin = which("mariadb-admin", "mysqladmin")

    def install(self) -> None:
        user = ["--user=root"] if os.geteuid() == 0 else []
        r = subprocess.run([str(self.install_db), "--no-defaults", f"--datadir={self.datadir}",
                            "--auth-root-authentication-method=normal", "--skip-test-db", *user],
                           capture_output=True, text=True, timeout=120, check=False)
        if r.returncode != 0:
            raise RuntimeError(f"mariadb-install-db failed: {r.stdout[-800:]} {r.stderr[-800:]}")

    def start(self) -> MariaDBServer:
        if not self.datadir.exists():
            self.install()
            fresh = True
        else:
            fresh = False
        user = ["--user=root"] if os.geteuid() == 0 else []
        self.log = open(self.base / "server.log", "ab")  # noqa: SIM115 - open while the server runs
        self.proc = subprocess.Popen(
            [str(self.mariadbd), "--no-defaults", f"--datadir={self.datadir}", f"--socket={self.sock}",
             "--bind-address=127.0.0.1", f"--port={self.port}", f"--pid-file={self.base / 'mysqld.pid'}",
             *user, f"--log-bin={self.datadir / 'binlog'}", "--binlog-format=ROW",
             f"--server-id={self.server_id}", "--innodb-buffer-pool-size=32M", "--skip-log-error",
             "--innodb-log-file-size=16M", "--max-allowed-packet=64M", "--skip-name-resolve",
             *self.extra_args],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mariadbd exited: {(self.base / 'server.log').read_text()[-2000:]}")
            if self.sock.exists() and self.query("SELECT 1", check=False).returncode == 0:
                break
            time.sleep(0.2)
        else:
            raise RuntimeError("mariadbd did not become ready in 60 s")
        if fresh:
            self.query(f"CREATE USER '{REPL_USER}'@'127.0.0.1' IDENTIFIED BY '{REPL_PASSWORD}'; "
                       f"GRANT REPLICATION SLAVE, BINLOG MONITOR, REPLICATION MASTER ADMIN ON *.* "
                       f"TO '{REPL_USER}'@'127.0.0.1'")
        return self

    def query(self, sql: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        r = subprocess.run([str(self.client), "--no-defaults", f"--socket={self.sock}", "-uroot",
                            "--batch", "--skip-column-names", "-e", sql],
                           capture_output=True, timeout=300, check=False, text=True)
        if check and r.returncode != 0:
            raise RuntimeError(f"SQL failed: {r.stderr.strip()} -- in: {sql[:200]}")
        return r

    def binlog_files(self) -> list[Path]:
        index = (self.datadir / "binlog.index").read_text().split()
        return [self.datadir / Path(name).name for name in index]

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            subprocess.run([str(self.admin), "--no-defaults", f"--socket={self.sock}", "-uroot", "shutdown"],
                           capture_output=True, timeout=60, check=False)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        self.log.close()
