"""binlake.archive.archiver against a real MariaDB server on 127.0.0.1 and the loopback S3 server.

Byte equality with the server's own binlog files (sha256), SIGKILL at random moments while a
workload runs, a purged start position, and the archiver's closed files through discovery and
the nightly DAG (Airflow's dag.test()) ingesting and reconciling them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from binlake.archive.archiver import ArchiverSettings, load_settings
from binlake.archive.errors import ArchiverError, BinlogPurgedError
from binlake.archive.files import BINLOG_NAME, scan_binlog_bytes
from binlake.errors import BinlakeError
from binlake.lake.storage import S3ObjectStore
from binlake_cli.archive import archive_command
from binlake_testing.mariadb_server import REPL_PASSWORD, REPL_USER, MariaDBServer, which
from binlog_parser.replication import gtid_of, parse_event

REPO = Path(__file__).resolve().parents[1]
SOURCE = "maria-live"


@pytest.fixture()
def server() -> Iterator[MariaDBServer]:
    if not (which("mariadbd", "mysqld") and which("mariadb-install-db", "mysql_install_db")):
        pytest.skip("!!! REAL-SERVER TEST SKIPPED: mariadb-server is not installed !!!")
    base = Path(tempfile.mkdtemp(prefix="binlake-archiver-"))
    db = MariaDBServer(base).start()
    db.query("CREATE DATABASE w; CREATE TABLE w.t (id INT PRIMARY KEY AUTO_INCREMENT, k INT, v TEXT) "
             "ENGINE=InnoDB")
    try:
        yield db
    finally:
        db.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(autouse=True)
def _password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BINLAKE_ARCHIVE_PASSWORD", REPL_PASSWORD)


def workload_round(db: MariaDBServer, i: int, rows: int = 40) -> None:
    """One round: a multi-row insert, an update, a delete, a DDL every 3rd round, then a rotation."""
    db.query(
        f"INSERT INTO w.t(k, v) WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM s WHERE n<{rows}) "
        f"SELECT n, REPEAT(CHAR(65 + {i} % 26), 200 + n) FROM s; "
        f"UPDATE w.t SET v = CONCAT(v, 'u') WHERE k % 7 = {i % 7}; DELETE FROM w.t WHERE k = {i % rows + 1}; "
        + (f"CREATE TABLE w.d{i} (a INT); " if i % 3 == 0 else "")
        + "FLUSH BINARY LOGS;")
    settle(db)


def settle(db: MariaDBServer) -> None:
    """Wait for the BINLOG_CHECKPOINT that names the active file: MariaDB writes it a moment after
    FLUSH BINARY LOGS returns, once InnoDB has made the older binlogs' commits durable."""
    for _ in range(100):
        active = db.binlog_files()[-1]
        if active.name.encode() in active.read_bytes():
            return
        time.sleep(0.1)
    raise AssertionError(f"no binlog checkpoint for {active.name} after 10 s")


def cli_args(db: MariaDBServer, dest: str, spool: Path, *extra: str) -> list[str]:
    return ["--source", SOURCE, "--dest", dest, "--host", "127.0.0.1", "--port", str(db.port),
            "--user", REPL_USER, "--server-id", "4242", "--spool-dir", str(spool), *extra]


def archived_objects(store: S3ObjectStore) -> dict[str, bytes]:
    return {o.name: store.read_all(o.name) for o in store.list() if BINLOG_NAME.match(o.name)}


def assert_byte_identical(db: MariaDBServer, objects: dict[str, bytes], spool: Path) -> None:
    """Every closed server file == its object (sha256); the active one == the spool copy."""
    files = db.binlog_files()
    for f in files[:-1]:
        assert f.name in objects, f"{f.name} is not archived"
        mine, theirs = objects[f.name], f.read_bytes()
        assert hashlib.sha256(mine).hexdigest() == hashlib.sha256(theirs).hexdigest(), _first_difference(
            f.name, mine, theirs)
    active = files[-1]
    assert (spool / SOURCE / active.name).read_bytes() == active.read_bytes()
    assert set(objects) <= {f.name for f in files}


def _first_difference(name: str, mine: bytes, theirs: bytes) -> str:
    at = next((i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b), min(len(mine), len(theirs)))
    return (f"{name}: archive {len(mine)} bytes, server {len(theirs)} bytes, first difference at {at}: "
            f"{mine[at:at + 24].hex()} vs {theirs[at:at + 24].hex()}; tails {mine[-60:].hex()} / {theirs[-60:].hex()}")


def archived_gtids(objects: dict[str, bytes]) -> list[str]:
    out = []
    for name in sorted(objects):
        data, pos = objects[name], 4
        while pos < len(data):
            size = int.from_bytes(data[pos + 9:pos + 13], "little")
            gtid = gtid_of(parse_event(data[pos:pos + size]))
            if gtid:
                out.append(gtid)
            pos += size
    return out


def server_gtid_count(db: MariaDBServer) -> int:
    pos = db.query("SELECT @@global.gtid_binlog_pos").stdout.strip()
    return int(pos.split("-")[2])


# --- into the loopback S3 server ----------------------------------------------------------------


def test_archive_to_s3_is_byte_identical(server: MariaDBServer, s3_server: Any, s3_bucket: str,
                                         tmp_path: Path) -> None:
    for i in range(4):
        workload_round(server, i)
    server.query("INSERT INTO w.t(k, v) VALUES (1, 'tail of the active file')")
    dest = f"s3://{s3_bucket}/binlogs/{SOURCE}/"
    args = cli_args(server, dest, tmp_path, "--stop-at-end", "--s3-endpoint-url", s3_server.endpoint_url)
    assert archive_command(args) == 0
    store = S3ObjectStore(dest, client=s3_server.client())
    objects = archived_objects(store)
    files = server.binlog_files()
    assert len(files) == 5 and sorted(objects) == [f.name for f in files]
    assert_byte_identical(server, objects, tmp_path)
    assert objects[files[-1].name] == files[-1].read_bytes()  # the open file, uploaded at the end
    assert not scan_binlog_bytes(files[-1].name, objects[files[-1].name]).closed
    status = json.loads((tmp_path / SOURCE / "status.json").read_text())
    assert status["state"] == "stopped" and status["current_file"] == files[-1].name
    assert status["bytes_archived"] == sum(f.stat().st_size - 4 for f in files)
    assert status["last_gtid"] == f"0-7-{server_gtid_count(server)}" and status["lag_gtids"] == 0

    # more work, a restart of the archiver: it resumes from its own files and stays identical
    workload_round(server, 4)
    assert archive_command(args) == 0
    objects = archived_objects(store)
    assert_byte_identical(server, objects, tmp_path)
    gtids = archived_gtids(objects)
    assert gtids == [f"0-7-{n}" for n in range(1, server_gtid_count(server) + 1)]

    # the spool lost (a new machine): resume from the open object in S3
    shutil.rmtree(tmp_path / SOURCE)
    workload_round(server, 5)
    assert archive_command(args) == 0
    objects = archived_objects(store)
    assert_byte_identical(server, objects, tmp_path)
    check_discovery_and_reconciliation(store, spark_session=None)


def check_discovery_and_reconciliation(store: S3ObjectStore, spark_session: Any) -> None:
    """The nightly DAG's discovery sees the archiver's closed files; the open one stays open."""
    from binlake.discovery.discover import discover_source

    found = discover_source(store, SOURCE)
    assert not found.errors, found.errors
    names = sorted(o for o in archived_objects(store))
    assert [f.file for f in found.closed_files] == names[:-1]
    assert [f.file for f in found.files if not f.closed] == names[-1:]


def _nightly_config(path: Path, bucket: str, endpoint: str, tmp: Path) -> Path:
    """A binlake config whose only source is the archiver's prefix in the loopback S3 server."""
    jars = os.environ.get("BINLAKE_JARS_DIR", str(REPO / ".jars"))
    path.write_text("\n".join([
        "[pipeline]", f'warehouse = "{tmp / "warehouse"}"', f'state_dir = "{tmp / "state"}"', f'jars_dir = "{jars}"',
        "[[sources]]", f'name = "{SOURCE}"', f'uri = "s3://{bucket}/binlogs/{SOURCE}/"',
        "[s3]", f'endpoint_url = "{endpoint}"', "max_attempts = 3",
        "[spark]", 'mode = "local"', 'master = "local[2]"', "shuffle_partitions = 2", "ui_enabled = false",
        'driver_memory = "1g"', ""]))
    return path


@pytest.mark.airflow
@pytest.mark.spark
def test_nightly_dag_ingests_the_archive_with_reconciliation_ok(
        server: MariaDBServer, s3_server: Any, s3_bucket: str, tmp_path: Path, spark: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The Done-when's second half: the nightly DAG itself (dags/binlake_nightly.py through Airflow's
    dag.test(): scheduler loop, task runner, XCom) discovers the archiver's objects, ingests the closed
    ones and reconciles them OK; the open file waits for its ROTATE.

    The DAG's gold task runs, but answers without Spark: gold reads silver only, never the archive,
    and the archived files are asserted byte-identical to the server's, whose gold tables
    tests/test_gold_mariadb.py compares cell by cell with the server; the full DAG with gold runs in
    tests/test_dags.py and tests/test_demo_dag.py. (Building gold here cost the test a third of its time.)"""
    import spark_jobs.steps as steps
    from binlake.lake.tables import table_location
    from binlake.runs import put_doc
    from binlake.step_results import GoldStepResult
    from binlake_testing.demo import NIGHTLY_DAG_ID, run_dag
    from orchestration.run_local import load_dag, migrate_airflow_db

    gold_calls: list[tuple[str, str]] = []

    def gold_without_a_replay(cfg: Any, source: str, run_id: str) -> GoldStepResult:
        gold_calls.append((source, run_id))
        result = GoldStepResult(source=source, spark=False)
        put_doc(cfg, run_id, source, "gold", result)
        return result

    monkeypatch.setitem(steps.WITHOUT_SPARK, "gold", gold_without_a_replay)

    for i in range(3):
        workload_round(server, i)
    server.query("INSERT INTO w.t(k, v) VALUES (1, 'in the open file')")
    dest = f"s3://{s3_bucket}/binlogs/{SOURCE}/"
    assert archive_command(cli_args(server, dest, tmp_path / "spool", "--stop-at-end", "--s3-endpoint-url",
                                    s3_server.endpoint_url)) == 0
    files = server.binlog_files()
    assert_byte_identical(server, archived_objects(S3ObjectStore(dest, client=s3_server.client())),
                          tmp_path / "spool")
    monkeypatch.setenv("BINLAKE_CONFIG", str(_nightly_config(tmp_path / "binlake.toml", s3_bucket,
                                                             s3_server.endpoint_url, tmp_path)))
    migrate_airflow_db()
    result = run_dag(load_dag(NIGHTLY_DAG_ID))
    assert result.success, result
    assert gold_calls == [(SOURCE, result.run_id)]  # after a successful reconcile

    warehouse = str(tmp_path / "warehouse")
    ingested = spark.read.format("delta").load(table_location(warehouse, "meta.ingested_files")).collect()
    assert sorted((r.source, r.file, r.status) for r in ingested) == [(SOURCE, f.name, "ok") for f in files[:-1]]
    recon = spark.read.format("delta").load(table_location(warehouse, "meta.gtid_reconciliation")).collect()
    assert sorted((r.file, r.status, r.missing_gtids, r.extra_gtids) for r in recon) == [
        (f.name, "OK", "", "") for f in files[:-1]]
    closed_gtids = archived_gtids({f.name: f.read_bytes() for f in files[:-1]})
    txns = spark.read.format("delta").load(table_location(warehouse, "silver.transactions"))
    assert sorted(r.gtid for r in txns.where("gtid IS NOT NULL").collect()) == sorted(closed_gtids)


def test_status_command_prints_the_status_file(server: MariaDBServer, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    workload_round(server, 0)
    assert archive_command(cli_args(server, str(tmp_path / "archive"), tmp_path / "spool", "--stop-at-end")) == 0
    capsys.readouterr()
    assert archive_command(["--status", "--source", SOURCE, "--spool-dir", str(tmp_path / "spool")]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["source"] == SOURCE and status["files_closed"] >= 1 and status["events_archived"] > 0
    # local folder destination: the archive folder holds the server's files, identical
    for f in server.binlog_files():
        assert (tmp_path / "archive" / f.name).read_bytes() == f.read_bytes()
    assert REPL_PASSWORD not in json.dumps(status)


# --- SIGKILL at random moments ------------------------------------------------------------------


def _spawn(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    code = "import sys; from binlake_cli.archive import archive_command; sys.exit(archive_command(sys.argv[1:]))"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with open(log, "ab") as fh:
        return subprocess.Popen([sys.executable, "-c", code, *args], env=env, stdout=fh, stderr=subprocess.STDOUT)


def test_sigkill_at_random_moments_loses_and_duplicates_nothing(server: MariaDBServer, s3_server: Any,
                                                                 s3_bucket: str, tmp_path: Path) -> None:
    rng = random.Random(15)
    dest = f"s3://{s3_bucket}/binlogs/{SOURCE}/"
    args = cli_args(server, dest, tmp_path, "--s3-endpoint-url", s3_server.endpoint_url,
                    "--upload-bytes", "30000", "--upload-interval-s", "0.3", "--heartbeat-s", "1")
    log = tmp_path / "archiver.log"
    done = threading.Event()

    def run_workload() -> None:
        for i in range(14):
            workload_round(server, i, rows=rng.randint(5, 400))
            time.sleep(rng.uniform(0.05, 0.4))
        done.set()

    worker = threading.Thread(target=run_workload)
    worker.start()
    kills = 0
    try:
        while not done.is_set() or kills < 5:
            proc = _spawn(args, log)
            time.sleep(rng.uniform(0.8, 2.5))
            proc.kill()  # SIGKILL: no cleanup, no flush
            proc.wait()
            kills += 1
    finally:
        worker.join()
    server.query("FLUSH BINARY LOGS")
    settle(server)
    final = _spawn([*args, "--stop-at-end"], log)
    assert final.wait(timeout=180) == 0, log.read_text()[-3000:]
    objects = archived_objects(S3ObjectStore(dest, client=s3_server.client()))
    assert_byte_identical(server, objects, tmp_path)
    gtids = archived_gtids(objects)
    assert len(gtids) == len(set(gtids)), "duplicated GTIDs"
    assert gtids == [f"0-7-{n}" for n in range(1, server_gtid_count(server) + 1)], "missing GTIDs"
    print(f"\n{kills} SIGKILLs; {log.read_text().count('cutting a torn tail')} torn tails cut on resume; "
          f"{len(objects)} objects, {sum(len(b) for b in objects.values())} bytes")
    assert kills >= 5


def wait_for_reconnect(path: Path, timeout: float = 90.0) -> dict[str, Any]:
    """Until the archiver has reconnected and streams again (its status file says so)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            status: dict[str, Any] = json.loads(path.read_text())
            if status["reconnects"] >= 1 and status["state"] == "streaming":
                return status
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    raise AssertionError(f"the archiver did not reconnect in {timeout} s: {path.read_text()}")


def wait_for_status(path: Path, state: str, timeout: float = 60.0) -> dict[str, Any]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            status: dict[str, Any] = json.loads(path.read_text())
            if status["state"] == state:
                return status
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    raise AssertionError(f"the archiver did not reach state {state!r} in {timeout} s")


# --- a purged start position --------------------------------------------------------------------


def test_purged_position_is_a_clear_error(server: MariaDBServer, tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    workload_round(server, 0)
    assert archive_command(cli_args(server, str(archive), tmp_path / "spool", "--stop-at-end")) == 0
    archived = sorted(p.name for p in archive.iterdir())
    last_gtid = f"0-7-{server_gtid_count(server)}"
    workload_round(server, 1)
    workload_round(server, 2)
    server.query("PURGE BINARY LOGS TO 'binlog.000004'")  # binlog.000002/3 are gone, never archived
    settings = load_settings({"source": SOURCE, "dest": str(archive), "host": "127.0.0.1", "port": server.port,
                              "user": REPL_USER, "spool_dir": tmp_path / "spool", "stop_at_end": True}, None)
    from binlake.archive.archiver import Archiver

    with pytest.raises(BinlogPurgedError) as err:
        Archiver(settings).run()
    message = str(err.value)
    assert archived == ["binlog.000001", "binlog.000002"]
    oldest = server.query("SHOW BINARY LOGS").stdout.split()[0]  # MariaDB may keep a log its checkpoint needs
    assert oldest > "binlog.000002"
    assert "cannot stream binlog.000002 at byte " in message and f"Its oldest binlog is {oldest}" in message
    assert f"Missing GTIDs: after {last_gtid} up to 0-7-" in message and "error 1236" in message
    # the CLI prints it as one line and exits 2 (a restart would only repeat it: systemd does not loop)
    assert archive_command(cli_args(server, str(archive), tmp_path / "spool", "--stop-at-end")) == 2
    # an explicit start file that was purged: same clear error, for an empty archive
    with pytest.raises(BinlogPurgedError, match="binlog.000001"):
        Archiver(dataclasses.replace(settings, dest=str(tmp_path / "empty"), start_file="binlog.000001")).run()


def test_torn_tail_is_cut_and_restreamed(server: MariaDBServer, tmp_path: Path) -> None:
    """What a kill -9 in the middle of a transaction leaves: the open file cut anywhere (inside a rows
    event, inside the GTID event, after a garbage write). Resume cuts back to the last complete
    transaction and the server's bytes come back identical."""
    archive = tmp_path / "archive"
    args = cli_args(server, str(archive), tmp_path / "spool", "--stop-at-end")
    workload_round(server, 0)
    server.query("INSERT INTO w.t(k, v) VALUES (1, REPEAT('z', 5000)); INSERT INTO w.t(k, v) VALUES (2, 'y')")
    assert archive_command(args) == 0
    active = server.binlog_files()[-1]
    full = active.read_bytes()
    scan = scan_binlog_bytes(active.name, full)
    assert scan.boundary == len(full) and not scan.closed
    for cut in (len(full) - 1, len(full) - 40, len(full) // 2, 300, 5):
        (archive / active.name).write_bytes(full[:cut])
        assert archive_command(args) == 0
        assert (archive / active.name).read_bytes() == full, cut
    (archive / active.name).write_bytes(full + b"\x00garbage")  # a torn event header after the end
    assert archive_command(args) == 0
    assert (archive / active.name).read_bytes() == full


@pytest.mark.parametrize("how", ["clean", "sigkill"])
def test_server_restart_while_archiving(server: MariaDBServer, s3_server: Any, s3_bucket: str, tmp_path: Path,
                                        how: str) -> None:
    """The server goes away under a running archiver (shutdown or kill -9) and comes back: the
    archiver reconnects on its own and the archive stays identical (a crashed server's last file has
    no closing event; the archiver closes it when the server streams the next one)."""
    dest = f"s3://{s3_bucket}/binlogs/{SOURCE}/"
    args = cli_args(server, dest, tmp_path, "--s3-endpoint-url", s3_server.endpoint_url, "--heartbeat-s", "1",
                    "--upload-interval-s", "0.2")
    log = tmp_path / "archiver.log"
    proc = _spawn(args, log)
    try:
        wait_for_status(tmp_path / SOURCE / "status.json", "streaming")
        workload_round(server, 0)
        server.query("INSERT INTO w.t(k, v) VALUES (7, 'before the restart')")
        time.sleep(1.5)
        if how == "sigkill":
            assert server.proc is not None
            server.proc.kill()
            server.proc.wait()
            server.proc = None
            server.log.close()
        else:
            server.stop()
        server.start()
        workload_round(server, 1)
        status = wait_for_reconnect(tmp_path / SOURCE / "status.json")
        assert status["reconnects"] >= 1 and status["state"] == "streaming"
    finally:
        proc.kill()
        proc.wait()
    assert "reconnecting" in log.read_text(), log.read_text()[-2000:]
    server.query("FLUSH BINARY LOGS")
    settle(server)
    assert archive_command([*args, "--stop-at-end"]) == 0
    objects = archived_objects(S3ObjectStore(dest, client=s3_server.client()))
    assert_byte_identical(server, objects, tmp_path)
    gtids = archived_gtids(objects)
    assert gtids == [f"0-7-{n}" for n in range(1, server_gtid_count(server) + 1)]


# --- settings -----------------------------------------------------------------------------------


def test_settings_precedence_cli_env_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "binlake.toml"
    conf.write_text(
        '[[sources]]\nname = "maria-live"\nuri = "s3://lake/binlogs/maria-live/"\n\n'
        '[archive]\nhost = "db.internal"\nport = 3307\nserver_id = 901\nheartbeat_s = 2.5\n\n'
        '[archive.maria-live]\nserver_id = 902\nupload_bytes = 1048576\n')
    monkeypatch.setenv("BINLAKE_ARCHIVE_PORT", "3308")
    s = load_settings({"source": "maria-live", "heartbeat_s": 9.0}, str(conf))
    assert (s.dest, s.host, s.port, s.server_id, s.heartbeat_s, s.upload_bytes) == (
        "s3://lake/binlogs/maria-live/", "db.internal", 3308, 902, 9.0, 1048576)
    assert "password" not in dataclasses.asdict(s) and REPL_PASSWORD not in repr(s)
    assert s.spool_dir == str(tmp_path / ".state" / "archive-spool")  # under the config's state_dir
    # a key the schema does not know is the config's one-line error, not a silent default
    conf.write_text(conf.read_text().replace("heartbeat_s", "heartbeat"))
    with pytest.raises(BinlakeError, match=r"unknown key 'heartbeat' in \[archive\]: did you mean 'heartbeat_s'"):
        load_settings({"source": "maria-live"}, str(conf))
    monkeypatch.setenv("BINLAKE_ARCHIVE_PORT", "many")
    with pytest.raises(ArchiverError, match="BINLAKE_ARCHIVE_PORT: Input should be a valid integer"):
        load_settings({"source": "maria-live"}, None)


def test_bad_settings_are_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ArchiverError, match="bad archive settings .*server_id: Input should be greater"):
        load_settings({"source": "x", "dest": str(tmp_path), "server_id": 0}, None)
    assert archive_command(["--source", "x", "--dest", str(tmp_path), "--server-id", "0"]) == 1
    assert archive_command(["--status", "--source", "nope", "--spool-dir", str(tmp_path)]) == 1
    with pytest.raises(ArchiverError, match="no --dest for source 'x' and no \\[\\[sources\\]\\] entry"):
        load_settings({"source": "x"}, None)
    assert "no archiver status at" in capsys.readouterr().err


# --- TLS ----------------------------------------------------------------------------------------


def _make_certs(folder: Path) -> tuple[Path, Path, Path]:
    """A throw-away CA and a server certificate for 127.0.0.1 (openssl CLI)."""
    ca_key, ca, key, csr, cert = (folder / n for n in ("ca.key", "ca.pem", "server.key", "server.csr",
                                                         "server.pem"))
    ext = folder / "san.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")
    for cmd in (
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca, "-days", "2",
         "-subj", "/CN=binlake-test-ca"],
        ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1"],
        ["x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert, "-days", "2",
         "-extfile", ext],
    ):
        subprocess.run(["openssl", *map(str, cmd)], check=True, capture_output=True, timeout=60)
    return ca, cert, key


def test_tls_required_and_verified(tmp_path: Path) -> None:
    if not (which("mariadbd", "mysqld") and shutil.which("openssl")):
        pytest.skip("!!! TLS TEST SKIPPED: mariadbd or openssl missing !!!")
    ca, cert, key = _make_certs(tmp_path)
    db = MariaDBServer(tmp_path / "srv", extra_args=(f"--ssl-ca={ca}", f"--ssl-cert={cert}", f"--ssl-key={key}"))
    (tmp_path / "srv").mkdir()
    db.start()
    try:
        db.query(f"ALTER USER '{REPL_USER}'@'127.0.0.1' REQUIRE SSL; CREATE DATABASE w; "
                 "CREATE TABLE w.t (id INT PRIMARY KEY AUTO_INCREMENT, k INT, v TEXT); FLUSH BINARY LOGS")
        workload_round(db, 0)
        args = cli_args(db, str(tmp_path / "archive"), tmp_path / "spool", "--stop-at-end")
        assert archive_command([*args, "--ssl-mode", "disabled"]) == 1  # the user requires TLS
        assert archive_command([*args, "--ssl-mode", "required", "--ssl-ca", str(ca), "--ssl-verify-identity"]) == 0
        for f in db.binlog_files():
            assert (tmp_path / "archive" / f.name).read_bytes() == f.read_bytes()
    finally:
        db.stop()


def test_start_by_gtid_archives_the_whole_file_that_holds_it(server: MariaDBServer, tmp_path: Path) -> None:
    for i in range(3):
        workload_round(server, i)
    files = server.binlog_files()
    holder = files[2]  # binlog.000003: find a GTID that it holds
    gtids = archived_gtids({holder.name: holder.read_bytes()})
    assert gtids
    domain, server_id, seq = gtids[1 if len(gtids) > 1 else 0].split("-")
    start = f"{domain}-{server_id}-{int(seq) - 1}"  # the replica's state: everything before that GTID
    archive = tmp_path / "archive"
    assert archive_command(cli_args(server, str(archive), tmp_path / "spool", "--stop-at-end",
                                    "--start-gtid", start)) == 0
    assert sorted(p.name for p in archive.iterdir()) == [f.name for f in files[2:]]
    for f in files[2:]:
        assert (archive / f.name).read_bytes() == f.read_bytes()


def test_credentials_from_an_airflow_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    """``airflow_conn_id``: host, port, user and password from the connection (here from Airflow's
    env-variable secrets backend), never from a file or a flag."""
    from binlake_cli.archive import with_airflow_login

    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_REPL", "mysql://binlake_repl:s3cr%40t@127.0.0.1:3307")
    settings = ArchiverSettings(source="x", dest="/nowhere", airflow_conn_id="mysql_repl")
    resolved, password = with_airflow_login(settings)
    assert (password, {"host": resolved.host, "port": resolved.port, "user": resolved.user}) == (
        "s3cr@t", {"host": "127.0.0.1", "port": 3307, "user": "binlake_repl"})


def test_documented_archive_keys_are_the_schema(tmp_path: Path) -> None:
    """conf/binlake.toml and `binlake config --example` document every [archive] key, and the
    documented block, uncommented, validates (so the comments cannot drift from the schema)."""
    import tomllib

    from binlake.config import EXAMPLE_CONFIG_PATH, ArchiveSettings, config_from_dict

    for path in (REPO / "conf" / "binlake.toml", EXAMPLE_CONFIG_PATH):
        text = path.read_text()
        block = text[text.index("# The binlog archiver"):]
        lines = [ln.removeprefix("#").strip() for ln in block.splitlines()]
        doc = tomllib.loads("\n".join(ln for ln in lines if ln.startswith("[") or " = " in ln))
        assert sorted(k for k, v in doc["archive"].items() if not isinstance(v, dict)) == sorted(
            f.name for f in dataclasses.fields(ArchiveSettings) if f.name not in ("start_file", "start_gtid",
                                                                                  "stop_at_end")), path
        cfg = config_from_dict({"sources": [{"name": "orders-primary", "uri": "/x"}], **doc}, base=tmp_path, env={})
        assert cfg.archive is not None
        per_source = cfg.archive.for_source("orders-primary")
        assert (per_source.host, per_source.server_id, per_source.start_file) == ("db1.internal", 4243, "binlog.000100")
