"""Against a real MariaDB: run tests/sql/all_types.sql, decode the binlogs it wrote, replay the
row changes in order and compare with what SELECT prints, value for value.

The server is Debian's ``mariadb-server`` (``make setup`` installs it; so does this test when
it runs as root with apt available). It runs as a child process on a temp datadir with a unix
socket and no networking (binlake_testing.mariadb_server, the one launcher of tests and benches).
Skipped - loudly - only when no server can be found or installed.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from rows_replay import Replayer, compare_table

from binlake_testing.mariadb_server import ROW_METADATA_ARGS, MariaDBServer
from binlake_testing.mariadb_server import ensure_installed as _ensure_installed
from binlog_parser.reader import read_events
from binlog_parser.rows import RowsEvent

SQL = Path(__file__).parent / "sql" / "all_types.sql"
TABLES = {"ints": "id", "nums": "id", "times": "id", "strs": "id", "geo": "id"}


def MariaDB(base: Path) -> MariaDBServer:  # noqa: N802 - the name other real-server tests import
    """The socket-only server of the decoding tests: full row metadata, TSV output with column names."""
    return MariaDBServer(base, networking=False, extra_args=ROW_METADATA_ARGS, output="tsv")


@contextmanager
def running_mariadb(prefix: str, what: str = "REAL-SERVER TEST") -> Iterator[MariaDBServer]:
    """A started :func:`MariaDB` on a new temp folder (``db.base``, named ``prefix...``), stopped
    and removed on exit: the launch of the real-server test modules' fixtures.

    No server to be found or installed skips the test loudly (stderr too, as ``what`` SKIPPED):
    a quiet skip would pass for a run."""
    reason = _ensure_installed()
    if reason:
        msg = f"!!! {what} SKIPPED: {reason} !!!"
        print(msg, file=sys.stderr)
        pytest.skip(msg)
    base = Path(tempfile.mkdtemp(prefix=prefix))
    db = MariaDB(base)
    try:
        db.start()
        yield db
    finally:
        db.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def server_run():
    with running_mariadb("binlake-mariadb-") as db:
        db.source(SQL)
        selects = {t: db.query(f"SELECT * FROM alltypes.{t} ORDER BY {pk}").stdout for t, pk in TABLES.items()}
        index = (db.datadir / "binlog.index").read_text().split()
        db.stop()
        files = [db.datadir / Path(name).name for name in index]
        yield files, selects


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
