"""binlake.archive.guard: the destination lease (S3 If-Match take-over and renewal, a dead holder on
this host), the spool lock and the series record, against the loopback S3 server and a folder."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from binlake.archive.errors import ArchiverGuardError, ArchiverLeaseHeld
from binlake.archive.guard import (
    LEASE_NAME,
    DestinationLease,
    ServerIdentity,
    SpoolLock,
    archive_meta_uri,
    fde_mismatch,
    meta_backend,
)


def test_meta_lives_beside_the_archive_not_in_it(tmp_path: Path) -> None:
    assert archive_meta_uri("s3://lake/binlogs/src/") == "s3://lake/_binlake/archiver/binlogs/src/"
    assert archive_meta_uri(str(tmp_path / "archive")) == f"{tmp_path}/_binlake/archiver/archive/"


def test_s3_lease_one_holder_then_a_conditional_take_over_and_the_stalled_holder_stops(
        s3_server: Any, s3_bucket: str) -> None:
    dest = f"s3://{s3_bucket}/binlogs/src/"
    backend = meta_backend(dest, client=s3_server.client())
    # a lease life long enough that a loaded CI worker reaches the second acquire inside it (0.3 s
    # was not: the second archiver took over instead of being refused)
    first = DestinationLease(backend, dest, ttl=2.0)
    first.acquire()
    second = DestinationLease(backend, dest, ttl=2.0)
    with pytest.raises(ArchiverLeaseHeld, match="is being written by another archiver"):
        second.acquire()
    time.sleep(3.3)  # the first holder stalls past its lease's life (the store's clock: whole seconds)
    second.acquire()  # taken over with If-Match on the expired lease's ETag
    with pytest.raises(ArchiverGuardError, match="taken over by another archiver"):
        first.renew(force=True)  # its late renewal does not overwrite the new holder's lease
    assert json.loads(backend.read(LEASE_NAME) or b"{}")["holder"] == second.holder
    first.release()  # not ours any more: left alone
    assert backend.read(LEASE_NAME) is not None
    second.renew(force=True)
    second.release()
    assert backend.read(LEASE_NAME) is None


def test_local_lease_of_a_dead_process_on_this_host_is_taken_over_at_once(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    backend = meta_backend(str(tmp_path / "archive"))
    stale = {"source": "x", "holder": "gone", "host": socket.gethostname(), "pid": int(dead.stdout),
             "acquired_at": time.time(), "expires_at": time.time() + 3600}
    assert backend.create(LEASE_NAME, json.dumps(stale).encode())
    lease = DestinationLease(backend, str(tmp_path / "archive"))
    lease.acquire()
    assert json.loads(backend.read(LEASE_NAME) or b"{}")["pid"] == os.getpid()
    lease.release()


def test_spool_lock_is_exclusive_and_released(tmp_path: Path) -> None:
    one, two = SpoolLock(tmp_path), SpoolLock(tmp_path)
    one.acquire()
    with pytest.raises(ArchiverLeaseHeld, match=f"is in use by pid {os.getpid()}"):
        two.acquire()
    one.release()
    two.acquire()
    two.release()


def test_server_identity_and_fde_comparison() -> None:
    a = ServerIdentity("mysql", 1, "3e11fa47-71ca-11e1-9e33-c80aa9429562")
    assert a.same_server(ServerIdentity("mysql", 2, "3e11fa47-71ca-11e1-9e33-c80aa9429562"))
    assert not a.same_server(ServerIdentity("mysql", 1, "7f000001-0000-4000-8000-00000000000b"))
    m = ServerIdentity("mariadb", 7, None, 0)
    assert m.same_server(ServerIdentity("mariadb", 7, None, 0)) and not m.same_server(ServerIdentity("mariadb", 8, None, 0))
    fde = bytes(range(19)) + b"\x04\x00" + b"10.11.6-MariaDB".ljust(50, b"\x00") + bytes(30)
    resent = fde[:13] + bytes(4) + fde[17:]  # log_pos 0: still the same file
    assert fde_mismatch(fde, resent) is None
    assert "time differs" in (fde_mismatch(fde, b"\x09" + fde[1:]) or "")
