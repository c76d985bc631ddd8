"""binlake.archive.files without a server: scans of real binlogs, torn tails, gaps, verified uploads."""

from __future__ import annotations

import hashlib
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest

from binlake.archive.errors import ArchiveFileError
from binlake.archive.files import (
    ArchiveFiles,
    BinlogFileWriter,
    next_binlog_name,
    scan_binlog_bytes,
    upload_verified,
)
from binlake.lake.storage import LocalObjectStore, S3ObjectStore
from binlog_parser.replication import parse_event

MARIA = Path(__file__).parent / "fixtures" / "mariadb-10.11"
FIX = Path(__file__).parent / "fixtures" / "replication"


def test_next_binlog_name() -> None:
    assert next_binlog_name("binlog.000009") == "binlog.000010"
    assert next_binlog_name("mysql-bin.999999") == "mysql-bin.1000000"
    with pytest.raises(ArchiveFileError, match="not a binlog file name"):
        next_binlog_name("binlog.index")


def test_scan_closed_and_open_files() -> None:
    closed = scan_binlog_bytes("binlog.000002", (MARIA / "binlog.000002").read_bytes())
    assert closed.closed and closed.next_file == "binlog.000003" and closed.boundary == closed.size == 73944
    assert closed.last_gtid is not None and closed.events == 23
    open_file = (FIX / "binlog.000003").read_bytes()  # the server's active file at capture time
    scan = scan_binlog_bytes("binlog.000003", open_file)
    assert not scan.closed and scan.boundary == len(open_file)


def test_scan_cuts_inside_a_transaction_back_to_its_start() -> None:
    data = (MARIA / "binlog.000002").read_bytes()
    # 73169..73389 is a QUERY (DDL) after the GTID at 73127; 73389 starts the next transaction
    for cut, boundary in ((73300, 73127), (73389, 73389), (73400, 73389), (73900, 73900), (5, 4), (2, 0)):
        assert scan_binlog_bytes("binlog.000002", data[:cut]).boundary == boundary, cut
    assert scan_binlog_bytes("binlog.000002", b"not a binlog").boundary == 0


def test_mariadb_gtid_list_names_the_gtid_before_the_file() -> None:
    scan = scan_binlog_bytes("binlog.000003", (FIX / "binlog.000003").read_bytes())
    first = scan_binlog_bytes("binlog.000003", (FIX / "binlog.000003").read_bytes()[:299])
    assert first.last_gtid == "0-7-7" and scan.last_gtid == "0-7-8"


def _events(path: Path) -> list[Any]:
    data, pos, out = path.read_bytes(), 4, []
    while pos < len(data):
        size = struct.unpack_from("<I", data, pos + 9)[0]
        out.append(parse_event(data[pos:pos + size]))
        pos += size
    return out


def test_writer_rebuilds_a_file_and_refuses_a_gap(tmp_path: Path) -> None:
    events = _events(FIX / "binlog.000002")
    writer = BinlogFileWriter(tmp_path / "binlog.000002")
    boundaries = [writer.append(ev, 0.0) for ev in events if writer.continues(ev)]
    writer.close(closed_by_server=True)
    assert (tmp_path / "binlog.000002").read_bytes() == (FIX / "binlog.000002").read_bytes()
    assert boundaries[-1] and sum(boundaries) >= 3
    again = BinlogFileWriter(tmp_path / "again.000001")
    with pytest.raises(ArchiveFileError, match="ending at byte .* but the archived file is 4 bytes long"):
        again.continues(events[3])  # skipping events: a hole the archiver must not write


def test_local_archive_resume_cuts_torn_tail(tmp_path: Path) -> None:
    shutil.copy(MARIA / "binlog.000001", tmp_path / "binlog.000001")
    torn = (MARIA / "binlog.000002").read_bytes()[:73300]
    (tmp_path / "binlog.000002").write_bytes(torn)
    files = ArchiveFiles(LocalObjectStore(tmp_path), tmp_path / "spool")
    point = files.resume_point()
    assert point is not None and (point.file, point.position) == ("binlog.000002", 73127)
    assert (tmp_path / "binlog.000002").stat().st_size == 73127
    (tmp_path / "binlog.000002").write_bytes((MARIA / "binlog.000002").read_bytes())
    point = files.resume_point()
    assert point is not None and (point.file, point.position) == ("binlog.000003", 4)


def test_s3_resume_uploads_a_closed_spool_file_first(s3_server: Any, s3_bucket: str, tmp_path: Path) -> None:
    store = S3ObjectStore(f"s3://{s3_bucket}/src/", client=s3_server.client())
    spool = tmp_path / "spool"
    spool.mkdir()
    shutil.copy(MARIA / "binlog.000001", spool / "binlog.000001")  # closed, crash before its upload
    files = ArchiveFiles(store, spool)
    point = files.resume_point()
    assert point is not None and (point.file, point.position) == ("binlog.000002", 4)
    assert store.read_all("binlog.000001") == (MARIA / "binlog.000001").read_bytes()
    assert not (spool / "binlog.000001").exists()
    # an open object and no spool (a new machine): continue the object
    store.put("binlog.000002", (MARIA / "binlog.000002").read_bytes()[:73400])
    point = files.resume_point()
    assert point is not None and (point.file, point.position) == ("binlog.000002", 73389)
    assert (spool / "binlog.000002").stat().st_size == 73389


def test_upload_verified_checks_size_and_etag(s3_server: Any, s3_bucket: str) -> None:
    store = S3ObjectStore(f"s3://{s3_bucket}/v/", client=s3_server.client())
    data = (MARIA / "binlog.000003").read_bytes()
    upload_verified(store, "binlog.000003", data)
    assert store.head("binlog.000003").etag == hashlib.md5(data).hexdigest()

    class ShortStore:
        def put(self, name: str, payload: bytes) -> Any:
            return store.put(name, payload[:-1])

        def read_all(self, name: str) -> bytes:
            return store.read_all(name)

    with pytest.raises(ArchiveFileError, match="stored 1932 bytes, expected 1933"):
        upload_verified(ShortStore(), "binlog.000003", data)  # type: ignore[arg-type]


def test_kill_between_last_event_and_close_still_clears_in_use_flag(s3_server: Any, s3_bucket: str,
                                                                    tmp_path: Path) -> None:
    """kill -9 after the server's ROTATE reached the spool but before the close cleared the FDE's
    in-use flag: resume finishes the close, so the object equals the server's closed file."""
    closed = (FIX / "binlog.000002").read_bytes()
    assert closed[21] & 1 == 0
    in_use = bytearray(closed)
    in_use[21] |= 1
    store = S3ObjectStore(f"s3://{s3_bucket}/k/", client=s3_server.client())
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "binlog.000002").write_bytes(bytes(in_use))
    point = ArchiveFiles(store, spool).resume_point()
    assert point is not None and (point.file, point.position) == ("binlog.000003", 4)
    assert store.read_all("binlog.000002") == closed
    # the same when only the object is left (uploaded with the flag, spool lost)
    store.put("binlog.000002", bytes(in_use))
    assert ArchiveFiles(store, tmp_path / "spool2").resume_point() == point
    assert store.read_all("binlog.000002") == closed
    # and in a local folder archive
    (tmp_path / "local").mkdir()
    (tmp_path / "local" / "binlog.000002").write_bytes(bytes(in_use))
    ArchiveFiles(LocalObjectStore(tmp_path / "local"), tmp_path / "spool3").resume_point()
    assert (tmp_path / "local" / "binlog.000002").read_bytes() == closed
