"""binlake archive against a scripted replication peer (binlake_testing.replication_peer): a server
that names hostile files, drops every session, fails over to another server under the same file
names, purges what the archive needs, crosses binlog.999999; and two archivers at once.

Each test reproduces an issue-43 finding (items 8-12) that today's archiver got wrong.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from binlake.archive.archiver import Archiver, ArchiverSettings, _ssl_context
from binlake.archive.files import ArchiveFiles
from binlake.errors import BinlakeError
from binlake.lake.storage import S3ObjectStore
from binlake_cli.archive import archive_command
from binlake_testing.replication_peer import ReplicationPeer, build_files, events_of
from binlog_parser.replication import gtid_of, parse_event

UUID_A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
UUID_B = "7f000001-0000-4000-8000-00000000000b"
SOURCE = "peer-src"


def cli(peer: ReplicationPeer, dest: Path | str, spool: Path, *extra: str) -> list[str]:
    return ["--source", SOURCE, "--dest", str(dest), "--host", "127.0.0.1", "--port", str(peer.port),
            "--user", "repl", "--server-id", "4242", "--spool-dir", str(spool), "--heartbeat-s", "1", *extra]


def status(spool: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((spool / SOURCE / "status.json").read_text())
    return doc


def gtids(files: dict[str, bytes]) -> list[str]:
    out = []
    for data in files.values():
        for raw in events_of(data):
            gtid = gtid_of(parse_event(raw))
            if gtid:
                out.append(gtid)
    return out


@pytest.fixture(autouse=True)
def _fast_reconnects(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Archiver, "reconnect_wait_s", 0.01, raising=False)


# --- item 8 / 11: hostile ROTATE names ----------------------------------------------------------


@pytest.mark.parametrize("kind", ["relative", "absolute", "5000-byte"])
def test_hostile_rotate_name_writes_nothing_and_a_restart_refuses_before_connecting(
        kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    victim = tmp_path / "victim" / "keep.txt"
    victim.parent.mkdir()
    victim.write_text("precious\n")
    name = {"relative": "../victim/keep.txt", "absolute": str(victim), "5000-byte": "b" * 4993 + ".000002"}[kind]
    files = build_files(UUID_A, [2, 1], rotate_to={0: name})
    dest, spool = tmp_path / "archive", tmp_path / "spool"
    with ReplicationPeer(files, announce={"binlog.000002": name}) as peer:
        rc = archive_command(cli(peer, dest, spool, "--stop-at-end"))
        err = capsys.readouterr().err
        connections = peer.connections
        rc_restart = archive_command(cli(peer, dest, spool, "--stop-at-end"))
        err_restart = capsys.readouterr().err
        restart_connections = peer.connections - connections
    assert victim.read_bytes() == b"precious\n"  # today: the binlog bytes of binlog.000002
    assert sorted(os.listdir(dest)) == ["binlog.000001"]
    assert (dest / "binlog.000001").read_bytes() == files["binlog.000001"]
    assert rc == 2 and "not a plain binlog file name" in err and err.count("\n") == 1, err
    assert ("characters" in err) if kind == "5000-byte" else (repr(name) in err)
    assert rc_restart == 2 and "the archive's last ROTATE event names the binlog file" in err_restart
    assert restart_connections == 0  # refused before connecting: no loop of the same fatal step
    doc = status(spool)
    assert doc["state"] == "failed" and "not a plain binlog file name" in doc["last_error"]


def test_hostile_first_rotate_is_refused_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The very first (artificial) ROTATE names an absolute path: nothing is created there."""
    target = tmp_path / "etc" / "passwd.000001"
    files = build_files(UUID_A, [1])
    with ReplicationPeer(files, announce={"binlog.000001": str(target)}) as peer:
        assert archive_command(cli(peer, tmp_path / "archive", tmp_path / "spool", "--stop-at-end")) == 2
    assert not target.parent.exists() and os.listdir(tmp_path / "archive") == []
    assert "not a plain binlog file name" in capsys.readouterr().err


def test_spool_error_is_a_clear_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Any OSError of the archive's own files: one line naming the file, status failed, exit 2."""
    files = build_files(UUID_A, [2, 1])
    dest, spool = tmp_path / "archive", tmp_path / "spool"
    (dest / "binlog.000002").mkdir(parents=True)  # something in the way of the next file
    with ReplicationPeer(files) as peer:
        assert archive_command(cli(peer, dest, spool, "--stop-at-end")) == 2
    err = capsys.readouterr().err
    assert "the archive's local files failed" in err and "binlog.000002" in err and "Traceback" not in err
    assert status(spool)["state"] == "failed"


# --- item 11: the reconnect budget --------------------------------------------------------------


def test_a_peer_dropping_every_session_after_one_transaction_gets_all_22_archived(tmp_path: Path) -> None:
    files = build_files(UUID_A, [11, 11])
    dest, spool = tmp_path / "archive", tmp_path / "spool"
    with ReplicationPeer(files, transactions_per_session=1) as peer:
        assert archive_command(cli(peer, dest, spool, "--stop-at-end", "--reconnect-attempts", "3")) == 0
    archived = {n: (dest / n).read_bytes() for n in files}
    assert archived == files
    assert gtids(archived) == [f"{UUID_A}:{n}" for n in range(1, 23)]
    doc = status(spool)
    assert doc["state"] == "stopped" and doc["reconnects"] == 22


# --- item 12: numeric order ---------------------------------------------------------------------


@pytest.mark.parametrize("where", ["folder", "s3"])
def test_restart_after_binlog_999999_resumes_binlog_1000000_where_it_stopped(
        where: str, tmp_path: Path, s3_server: Any, s3_bucket: str) -> None:
    before = build_files(UUID_A, [2, 3], first=999999)
    after = build_files(UUID_A, [2, 5], first=999999)
    assert list(before) == ["binlog.999999", "binlog.1000000"]
    spool = tmp_path / "spool"
    dest = f"s3://{s3_bucket}/binlogs/{SOURCE}/" if where == "s3" else str(tmp_path / "archive")
    extra = ("--s3-endpoint-url", s3_server.endpoint_url) if where == "s3" else ()
    with ReplicationPeer(before) as peer:
        assert archive_command(cli(peer, dest, spool, "--stop-at-end", *extra)) == 0
    if where == "s3":
        shutil.rmtree(spool / SOURCE)  # resume from the store's listing, not the spool
    with ReplicationPeer(after) as peer:
        assert archive_command(cli(peer, dest, spool, "--stop-at-end", *extra)) == 0
        assert peer.dumps == [("binlog.1000000", len(before["binlog.1000000"]))]  # not a rewind to byte 4
    if where == "s3":
        store = S3ObjectStore(dest, client=s3_server.client())
        assert {n: store.read_all(n) for n in after} == after
    else:
        assert {n: (tmp_path / "archive" / n).read_bytes() for n in after} == after


# --- item 10: failover, RESET MASTER, purged files ----------------------------------------------


def test_failover_to_another_server_with_the_same_names_is_refused_then_a_new_series(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest, spool = tmp_path / "archive", tmp_path / "spool"
    first = build_files(UUID_A, [3, 2])
    with ReplicationPeer(first, server_uuid=UUID_A) as a:
        assert archive_command(cli(a, dest, spool, "--stop-at-end")) == 0
    archived = {n: (dest / n).read_bytes() for n in first}
    assert archived == first
    # the same address now answers as server B, whose binlog.000002 is longer (same event sizes)
    second = build_files(UUID_B, [3, 4, 2], server_id=2, timestamp=1_800_000_000)
    capsys.readouterr()
    with ReplicationPeer(second, server_uuid=UUID_B, server_id=2) as b:
        assert archive_command(cli(b, dest, spool, "--stop-at-end")) == 2
        err = capsys.readouterr().err
        assert b.dumps == []
        assert f"server_uuid {UUID_B}" in err and f"server_uuid {UUID_A}" in err and "--new-series" in err
        assert {n: (dest / n).read_bytes() for n in first} == first  # nothing spliced
        assert status(spool)["state"] == "failed"
        # --new-series from B's first binlog would overwrite the archived binlog.000001: refused
        assert archive_command(cli(b, dest, spool, "--stop-at-end", "--new-series")) == 2
        assert "binlog.000001 is already archived" in capsys.readouterr().err
        assert {n: (dest / n).read_bytes() for n in first} == first
        # --new-series --start-file past the archived names: B's binlog.000003 starts a new series
        assert archive_command(cli(b, dest, spool, "--stop-at-end", "--new-series",
                                   "--start-file", "binlog.000003")) == 0
        assert (dest / "binlog.000003").read_bytes() == second["binlog.000003"]
        assert archive_command(cli(b, dest, spool, "--stop-at-end")) == 0  # B is now the recorded server
    assert {n: (dest / n).read_bytes() for n in first} == first
    series = json.loads((tmp_path / "_binlake" / "archiver" / "archive" / "series.json").read_text())
    assert series["server"]["server_uuid"] == UUID_B and series["first_file"] == "binlog.000003"
    assert series["previous_series"][0]["server"]["server_uuid"] == UUID_A
    fde = events_of(second["binlog.000003"])[0]  # as streamed: the in-use flag clear
    assert series["first_fde"] == (fde[:17] + bytes((fde[17] & 0xFE,)) + fde[18:]).hex()
    assert series["first_previous_gtids"] == events_of(second["binlog.000003"])[1].hex()  # PREVIOUS_GTIDS


def test_a_failover_between_two_sessions_of_a_running_archiver_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The server drops the session and the address comes back as server B (same names): the
    reconnect is refused, not spliced; what server A sent stays archived."""
    dest, spool = tmp_path / "archive", tmp_path / "spool"
    first = build_files(UUID_A, [3])
    second = build_files(UUID_B, [3], server_id=2, timestamp=1_800_000_000)

    def fail_over(peer: ReplicationPeer) -> None:
        if peer.dumps:  # after the first session: another server answers
            peer.files, peer.server_uuid, peer.server_id = second, UUID_B, 2

    with ReplicationPeer(first, transactions_per_session=1, on_connect=fail_over) as peer:
        assert archive_command(cli(peer, dest, spool, "--stop-at-end")) == 2
        assert len(peer.dumps) == 1
    assert f"server_uuid {UUID_B}" in capsys.readouterr().err
    archived = (dest / "binlog.000001").read_bytes()
    assert gtids({"binlog.000001": archived}) == [f"{UUID_A}:1"] and first["binlog.000001"].startswith(archived[:30])


def test_reset_master_same_server_new_files_is_refused_mid_file(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Same server_uuid, but binlog.000002 is a new file (RESET MASTER): its FDE differs from the archived one."""
    dest, spool = tmp_path / "archive", tmp_path / "spool"
    first = build_files(UUID_A, [3, 2])
    with ReplicationPeer(first) as a:
        assert archive_command(cli(a, dest, spool, "--stop-at-end")) == 0
    reset = build_files(UUID_A, [1, 6], timestamp=1_800_000_000)
    with ReplicationPeer(reset) as a:
        assert archive_command(cli(a, dest, spool, "--stop-at-end")) == 2
    err = capsys.readouterr().err
    assert "binlog.000002 on the server" in err and "FORMAT_DESCRIPTION's time differs" in err
    assert {n: (dest / n).read_bytes() for n in first} == first


@pytest.mark.parametrize("where", ["folder", "s3"])
def test_reset_master_caught_at_the_next_file_by_its_previous_gtids(
        where: str, tmp_path: Path, s3_server: Any, s3_bucket: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The archive ends with a closed binlog.000001 (last GTID A:3); after RESET MASTER the same
    server's new binlog.000002 starts from A:1-1: refused, and nothing of it is kept."""
    spool = tmp_path / "spool"
    dest = f"s3://{s3_bucket}/binlogs/{SOURCE}/" if where == "s3" else str(tmp_path / "archive")
    extra = ("--s3-endpoint-url", s3_server.endpoint_url) if where == "s3" else ()
    first = build_files(UUID_A, [3], last_open=False)
    with ReplicationPeer(first) as a:
        assert archive_command(cli(a, dest, spool, "--stop-at-end", *extra)) == 0
    reset = build_files(UUID_A, [1, 2], timestamp=1_800_000_000)
    with ReplicationPeer(reset) as a:
        assert archive_command(cli(a, dest, spool, "--stop-at-end", *extra)) == 2
        assert a.dumps == [("binlog.000002", 4)]
    err = capsys.readouterr().err
    assert f"does not continue the archive (last archived GTID {UUID_A}:3)" in err and "PREVIOUS_GTIDS" in err
    if where == "s3":
        store = S3ObjectStore(dest, client=s3_server.client())
        archived = {o.name: store.read_all(o.name) for o in store.list()}
        assert not (spool / SOURCE / "binlog.000002").exists()
    else:
        archived = {n: (tmp_path / "archive" / n).read_bytes() for n in os.listdir(tmp_path / "archive")}
    assert archived == first


def test_a_purged_file_is_a_clear_error_and_start_file_moves_past_it(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    dest, spool = tmp_path / "archive", tmp_path / "spool"
    files = build_files(UUID_A, [2, 2, 2, 2, 1])
    with ReplicationPeer({n: files[n] for n in list(files)[:2]}) as a:
        assert archive_command(cli(a, dest, spool, "--stop-at-end")) == 0
    capsys.readouterr()
    with ReplicationPeer({n: files[n] for n in list(files)[3:]}) as a:  # binlog.000003 was purged
        assert archive_command(cli(a, dest, spool, "--stop-at-end")) == 2
        err = capsys.readouterr().err
        assert "cannot stream binlog.000003" in err and "--start-file binlog.000004" in err
        assert len(a.dumps) == 1  # one refusal, no retry loop
        assert archive_command(cli(a, dest, spool, "--stop-at-end", "--start-file", "binlog.000004")) == 0
    assert sorted(os.listdir(dest)) == ["binlog.000001", "binlog.000002", "binlog.000004", "binlog.000005"]
    assert all((dest / n).read_bytes() == files[n] for n in os.listdir(dest))


# --- item 9: one archiver per destination -------------------------------------------------------


def test_two_archivers_on_one_destination(tmp_path: Path, s3_server: Any, s3_bucket: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    files = build_files(UUID_A, [3, 2])
    dest = f"s3://{s3_bucket}/binlogs/{SOURCE}/"
    s3 = ("--s3-endpoint-url", s3_server.endpoint_url)
    results: list[int] = []
    with ReplicationPeer(files) as peer:
        first = threading.Thread(target=lambda: results.append(archive_command(
            cli(peer, dest, tmp_path / "a", "--reconnect-attempts", "1", "--upload-interval-s", "0", *s3))))
        first.start()
        deadline = time.monotonic() + 30
        while not (tmp_path / "a" / SOURCE / "status.json").exists() or status(tmp_path / "a")["events_archived"] < 25:
            assert time.monotonic() < deadline, "the first archiver did not stream"
            time.sleep(0.05)
        capsys.readouterr()
        # a second host's archiver (own spool): the destination's lease refuses it
        assert archive_command(cli(peer, dest, tmp_path / "b", "--stop-at-end", *s3)) == 1
        assert "is being written by another archiver" in capsys.readouterr().err
        # a second process on the same spool: the spool lock refuses it before anything is truncated
        assert archive_command(cli(peer, dest, tmp_path / "a", "--stop-at-end", *s3)) == 1
        assert "is in use by pid" in capsys.readouterr().err
        assert status(tmp_path / "a")["state"] == "streaming"  # the running one's status is left alone
        peer.stop()
        first.join(timeout=30)
    store = S3ObjectStore(dest, client=s3_server.client())
    assert {n: store.read_all(n) for n in files} == files
    assert (tmp_path / "a" / SOURCE / "binlog.000002").read_bytes() == files["binlog.000002"]


def test_a_lagging_archiver_cannot_put_a_shorter_prefix_over_a_longer_object(
        tmp_path: Path, s3_server: Any, s3_bucket: str) -> None:
    """The lease aside (it lapsed while the first archiver stalled): every upload is conditional
    on the archiver's own last ETag, so the lagging one's next upload fails and the object stays."""
    data = build_files(UUID_A, [4], last_open=False)["binlog.000001"]
    events = [parse_event(raw) for raw in events_of(data)]
    xids = [i for i, e in enumerate(events) if e.type_code == 16]
    store = S3ObjectStore(f"s3://{s3_bucket}/binlogs/{SOURCE}/", client=s3_server.client())
    lagging = ArchiveFiles(store, tmp_path / "lagging", upload_bytes=1, upload_interval_s=0)
    lagging.open("binlog.000001", 4)
    for e in events[:xids[1] + 1]:
        lagging.write(e, 0.0)
    prefix = store.read_all("binlog.000001")
    live = ArchiveFiles(store, tmp_path / "live", upload_bytes=1, upload_interval_s=0)
    point = live.resume_point()
    assert point is not None and (point.file, point.position) == ("binlog.000001", len(prefix))
    live.open(point.file, point.position)
    for e in events[xids[1] + 1:]:
        live.write(e, 0.0)
    assert store.read_all("binlog.000001") == data  # closed, verified
    with pytest.raises(BinlakeError, match="another archiver"):
        for e in events[xids[1] + 1:xids[2] + 1]:
            lagging.write(e, 0.0)
    assert store.read_all("binlog.000001") == data


# --- item 8: TLS --------------------------------------------------------------------------------


def test_tls_verification_is_on_where_a_ca_is_configured(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    if not shutil.which("openssl"):
        pytest.skip("!!! TLS TEST SKIPPED: openssl missing !!!")
    ca = tmp_path / "ca.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(tmp_path / "ca.key"), "-out", str(ca), "-days", "1",
                    "-subj", "/CN=binlake-test-ca"], check=True, capture_output=True, timeout=60)
    for mode in ("preferred", "required"):
        ctx = _ssl_context(ArchiverSettings(source="x", dest=str(tmp_path), ssl_mode=mode, ssl_ca=str(ca)))
        assert ctx is not None and ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname, mode
    off = _ssl_context(ArchiverSettings(source="x", dest=str(tmp_path), ssl_ca=str(ca), ssl_verify_identity=False))
    assert off is not None and off.verify_mode == ssl.CERT_REQUIRED and not off.check_hostname
    assert _ssl_context(ArchiverSettings(source="x", dest=str(tmp_path))) is None  # preferred, no CA: unverified
    # a CA configured and a server (or a man in the middle) that offers no TLS: refused, never plaintext
    with ReplicationPeer(build_files(UUID_A, [1])) as peer:
        assert archive_command(cli(peer, tmp_path / "archive", tmp_path / "spool", "--stop-at-end",
                                   "--ssl-ca", str(ca))) == 1
        assert peer.dumps == []
    assert "SSL" in capsys.readouterr().err
