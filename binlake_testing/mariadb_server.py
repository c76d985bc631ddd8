"""A throw-away MariaDB server (Debian's ``mariadbd``) as a child process, for tests and benchmarks.

One launcher for every user: the real-server decoding tests (socket only, full row metadata), the
archiver's tests and benchmark (TCP on 127.0.0.1:<free port>, a replication user) and the bench
corpus writer. Why hand-written: no maintained Python package starts a local mariadbd on a temp
datadir (testcontainers needs a Docker engine, which CI and this machine do not have).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Literal

from binlake_testing.processes import wait_or_kill

SBIN = ("/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin", "/usr/local/mysql/bin")
REPL_USER = "binlake_repl"
REPL_PASSWORD = "repl-secret-pw"  # a loopback test server's password, not a secret
#: server options that make binlogs carry everything a decoder test compares with SELECT
ROW_METADATA_ARGS: tuple[str, ...] = (
    "--binlog-row-image=FULL", "--binlog-row-metadata=FULL", "--default-time-zone=+00:00",
    "--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci")


def which(*names: str) -> str | None:
    """The first of ``names`` on PATH or in the sbin folders (mariadbd lives in /usr/sbin)."""
    for name in names:
        found = shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), *SBIN]))
        if found:
            return found
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ensure_installed() -> str | None:
    """None when mariadbd is there (installing it with apt-get when running as root); else why not."""
    if which("mariadbd", "mysqld") and which("mariadb-install-db", "mysql_install_db"):
        return None
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return "mariadb-server is not installed and this process cannot apt-get install it"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = ["apt-get", "install", "-y", "-qq", "mariadb-server", "mariadb-client"]
    proc = subprocess.run(install, env=env, capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True, timeout=600, check=False)
        proc = subprocess.run(install, env=env, capture_output=True, text=True, timeout=600, check=False)
    return None if proc.returncode == 0 else f"apt-get install mariadb-server failed: {proc.stderr[-500:]}"


class MariaDBServer:
    """mariadbd on a datadir under ``base`` with binlogs on (basename ``binlog``, ROW format).

    ``networking``: listen on 127.0.0.1:``port`` and create the replication user ``REPL_USER``
    (what a replica needs); else a unix socket only. ``output``: what :meth:`query` returns,
    ``"text"`` (str, no column names: scalar answers) or ``"tsv"`` (bytes with a header row, what
    the decoding tests' TSV reader parses). The root user connects over the socket.
    """

    def __init__(self, base: Path, *, server_id: int = 7, networking: bool = True,
                 extra_args: tuple[str, ...] = (), output: Literal["text", "tsv"] = "text") -> None:
        self.base = base
        self.datadir = base / "data"
        self.sock = base / "mysqld.sock"
        self.networking = networking
        self.port = free_port() if networking else 0
        self.server_id = server_id
        self.extra_args = extra_args
        self.text = output == "text"
        self.proc: subprocess.Popen[bytes] | None = None
        self.mariadbd = which("mariadbd", "mysqld")
        self.install_db = which("mariadb-install-db", "mysql_install_db")
        self.client = which("mariadb", "mysql")
        self.admin = which("mariadb-admin", "mysqladmin")

    def _root_user(self) -> list[str]:
        return ["--user=root"] if os.geteuid() == 0 else []

    def _env(self) -> dict[str, str]:
        """The server's environment: its own ``TMPDIR`` (mariadbd's default ``tmpdir``). Servers of
        parallel test workers bootstrapping at once in the shared /tmp failed now and then ("Could
        not remove temporary table '/tmp/#sql-temptable-...', error: 2", then "Unknown table
        'mysql.tmp_user_sys'")."""
        tmp = self.base / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        return {**os.environ, "TMPDIR": str(tmp)}

    def install(self) -> None:
        """mariadb-install-db into a fresh datadir."""
        if not (self.install_db and self.mariadbd and self.client):
            raise RuntimeError("mariadbd / mariadb-install-db / mariadb not found (apt-get install mariadb-server)")
        proc = subprocess.run([self.install_db, "--no-defaults", f"--datadir={self.datadir}",
                               "--auth-root-authentication-method=normal", "--skip-test-db", *self._root_user()],
                              capture_output=True, text=True, timeout=180, check=False, env=self._env())
        if proc.returncode != 0:
            raise RuntimeError(f"mariadb-install-db failed: {proc.stdout[-800:]} {proc.stderr[-800:]}")

    def command(self) -> list[str]:
        """The mariadbd command line."""
        network = (["--bind-address=127.0.0.1", f"--port={self.port}", "--skip-name-resolve"] if self.networking
                   else ["--skip-networking"])
        return [str(self.mariadbd), "--no-defaults", f"--datadir={self.datadir}", f"--socket={self.sock}", *network,
                f"--pid-file={self.base / 'mysqld.pid'}", *self._root_user(), f"--log-bin={self.datadir / 'binlog'}",
                "--binlog-format=ROW", f"--server-id={self.server_id}", "--innodb-buffer-pool-size=32M",
                "--skip-log-error", "--innodb-log-file-size=16M", "--max-allowed-packet=64M", *self.extra_args]

    def start(self) -> MariaDBServer:
        """Start (installing the datadir the first time) and wait until it answers; restart-safe."""
        fresh = not self.datadir.exists()
        if fresh:
            self.base.mkdir(parents=True, exist_ok=True)
            self.install()
        self.log = open(self.base / "server.log", "ab")  # noqa: SIM115 - open while the server runs
        self.proc = subprocess.Popen(self.command(), stdout=self.log, stderr=subprocess.STDOUT, env=self._env())
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mariadbd exited: {(self.base / 'server.log').read_text()[-2000:]}")
            if self.sock.exists() and self.query("SELECT 1", check=False).returncode == 0:
                break
            time.sleep(0.2)
        else:
            raise RuntimeError("mariadbd did not become ready in 60 s")
        if fresh and self.networking:
            self.query(f"CREATE USER '{REPL_USER}'@'127.0.0.1' IDENTIFIED BY '{REPL_PASSWORD}'; "
                       f"GRANT REPLICATION SLAVE, BINLOG MONITOR, REPLICATION MASTER ADMIN ON *.* "
                       f"TO '{REPL_USER}'@'127.0.0.1'")
        return self

    def client_command(self, *args: str) -> list[str]:
        """The ``mariadb`` client as root over the socket, utf8mb4."""
        return [str(self.client), "--no-defaults", f"--socket={self.sock}", "-uroot",
                "--default-character-set=utf8mb4", *args]

    def query(self, sql: str, check: bool = True, batch: bool = True) -> subprocess.CompletedProcess[Any]:
        """Run ``sql``; RuntimeError with the server's words on failure (when ``check``)."""
        args = ["--batch"] if batch else []
        if batch and self.text:
            args.append("--skip-column-names")
        return self._run(self.client_command(*args, "-e", sql), None, check, sql[:200], timeout=600)

    def run_script(self, script: bytes) -> subprocess.CompletedProcess[Any]:
        """Feed a client script on stdin (``source``)."""
        return self._run(self.client_command(), script, True, "a script", timeout=1800)

    def source(self, path: Path) -> None:
        """Run the SQL file ``path``."""
        self.run_script(path.read_bytes())

    def _run(self, cmd: list[str], stdin: bytes | None, check: bool, what: str,
             timeout: float) -> subprocess.CompletedProcess[Any]:
        proc = subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise RuntimeError(f"SQL failed: {proc.stderr.decode(errors='replace').strip()} -- in: {what}")
        if self.text:
            return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(errors="replace"),
                                               proc.stderr.decode(errors="replace"))
        return proc

    def binlog_files(self) -> list[Path]:
        """The server's binlogs in order (its index file)."""
        index = (self.datadir / "binlog.index").read_text().split()
        return [self.datadir / Path(name).name for name in index]

    def stop(self) -> None:
        """Clean shutdown (mariadb-admin), kill after 60 s; a no-op when not running."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            subprocess.run([str(self.admin), "--no-defaults", f"--socket={self.sock}", "-uroot", "shutdown"],
                           capture_output=True, timeout=60, check=False)
            wait_or_kill(self.proc, 60)
        self.proc = None
        self.log.close()
