"""A throw-away PostgreSQL cluster (Debian's ``postgresql``) on loopback, for the catalog's metastore tests.

``initdb`` in a temporary folder, ``pg_ctl start`` on 127.0.0.1:<free port> (its socket in that folder,
not /var/run/postgresql), one database and role for the Hive metastore, ``pg_ctl stop`` and the folder
removed at the end. Why hand-written: no maintained Python package starts a local postgres without a
Docker engine, which CI and this machine do not have. Postgres refuses to run as root: under root the
server runs as the ``postgres`` account the Debian package creates, in a folder it owns.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from binlake_testing.mariadb_server import free_port

#: where Debian's postgresql puts initdb and pg_ctl (not on PATH: /usr/lib/postgresql/<major>/bin)
DEBIAN_BINS = "/usr/lib/postgresql/*/bin"
SERVICE_ACCOUNT = "postgres"
METASTORE_DB = "metastore"
METASTORE_USER = "metastore"
METASTORE_PASSWORD = "metastore-test-pw"  # a loopback test cluster's password, not a secret


def bin_dir() -> Path | None:
    """The folder holding initdb, pg_ctl and postgres (the newest Debian major first, then PATH)."""
    for folder in sorted(glob.glob(DEBIAN_BINS), key=lambda f: int(Path(f).parent.name), reverse=True):
        if all((Path(folder) / tool).is_file() for tool in ("initdb", "pg_ctl", "postgres")):
            return Path(folder)
    initdb = shutil.which("initdb")
    if initdb and shutil.which("pg_ctl"):
        return Path(os.path.realpath(initdb)).parent
    return None


def missing() -> str | None:
    """None when a cluster can be started here; else why not, in words."""
    if bin_dir() is None:
        return f"postgres not installed (no initdb/pg_ctl in {DEBIAN_BINS} or on PATH; apt-get install postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVICE_ACCOUNT)
        except KeyError:
            return f"postgres not installed: running as root and no {SERVICE_ACCOUNT!r} account to run it as"
    return None


class PostgresServer:
    """One cluster; ``with PostgresServer() as pg:`` starts it with the metastore database made."""

    def __init__(self) -> None:
        folder = bin_dir()
        if folder is None:
            raise RuntimeError(missing() or "postgres not installed")
        self.bin = folder
        self.base = Path(tempfile.mkdtemp(prefix="binlake-pg-"))  # under /tmp: the service account reaches it
        self.data = self.base / "data"
        self.port = free_port()
        self.user: str | None = SERVICE_ACCOUNT if os.geteuid() == 0 else None

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:postgresql://127.0.0.1:{self.port}/{METASTORE_DB}"

    def _run(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        options: dict[str, Any] = {"user": self.user} if self.user else {}
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False,
                              cwd=self.base, **options)
        if proc.returncode != 0:
            raise RuntimeError(f"{Path(argv[0]).name} failed (exit {proc.returncode}): {proc.stderr[-1500:]}")
        return proc

    def start(self) -> PostgresServer:
        if self.user:
            shutil.chown(self.base, self.user)
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
                  "--encoding=UTF8", "--no-sync")
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.base} -c fsync=off"
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.base / "server.log"), "-o", options,
                  "-w", "-t", "60", "start")
        self.sql(f"CREATE ROLE {METASTORE_USER} LOGIN PASSWORD '{METASTORE_PASSWORD}'")
        self.sql(f"CREATE DATABASE {METASTORE_DB} OWNER {METASTORE_USER}")
        return self

    def sql(self, statement: str, database: str = "postgres") -> str:
        """Run one statement with psql over the cluster's socket; its unaligned output."""
        psql = self.bin / "psql"
        client = str(psql) if psql.is_file() else (shutil.which("psql") or "psql")
        return self._run(client, "-h", str(self.base), "-p", str(self.port), "-U", "postgres", "-d", database,
                         "-v", "ON_ERROR_STOP=1", "-At", "-c", statement).stdout

    def stop(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
