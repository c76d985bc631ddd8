"""Run leases and table commit locks (binlake.lake.leases) on a local warehouse and on S3 (loopback moto).

Real primitives: ``O_EXCL`` files in a tmp folder, ``PUT If-None-Match: *`` over HTTP. Many
threads racing for one source must yield exactly one holder; the loser's error names the holder.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from binlake.config import S3Settings
from binlake.lake.leases import (
    LeaseHeldError,
    LocalLeaseBackend,
    S3LeaseBackend,
    SourceLeases,
    TableCommitLocks,
    lease_backend,
    table_commit_lock,
)


@pytest.fixture(params=["local", "s3"])
def leases(request: pytest.FixtureRequest, tmp_path: Path) -> SourceLeases:
    if request.param == "local":
        return SourceLeases(LocalLeaseBackend(tmp_path / "locks"), ttl=60)
    server = request.getfixturevalue("s3_server")
    bucket = request.getfixturevalue("s3_bucket")
    settings = S3Settings(endpoint_url=server.endpoint_url, path_style_access=True)
    return SourceLeases(lease_backend(f"s3://{bucket}/warehouse", settings), ttl=60)


def test_second_run_is_refused_naming_the_holder(leases: SourceLeases) -> None:
    first = leases.acquire("orders", "scheduled__2026-01-02T03:00:00+00:00")
    assert first.holder == "scheduled__2026-01-02T03:00:00+00:00"
    assert first.expires_at - first.acquired_at == pytest.approx(60.0, abs=0.01) and first.ttl == 60.0
    with pytest.raises(LeaseHeldError, match=r"source orders is being processed by run "
                                             r"'scheduled__2026-01-02T03:00:00\+00:00'"):
        leases.acquire("orders", "manual__backfill-1")
    # another source is independent
    assert leases.acquire("billing", "manual__backfill-1").holder == "manual__backfill-1"


def test_same_holder_renews_and_release_lets_the_next_run_in(leases: SourceLeases) -> None:
    first = leases.acquire("orders", "run-a")
    renewed = leases.acquire("orders", "run-a")
    assert renewed.acquired_at == first.acquired_at and renewed.expires_at >= first.expires_at
    assert leases.release("orders", "run-b") is False  # not the holder: nothing released
    assert leases.current("orders") is not None
    assert leases.release("orders", "run-a") is True
    assert leases.current("orders") is None
    assert leases.acquire("orders", "run-b").holder == "run-b"


def test_expired_lease_of_a_dead_run_is_taken_over(leases: SourceLeases) -> None:
    """Expired by the store's own clock (its Last-Modified / the file's mtime against its "now"),
    never by comparing the dead holder's clock with ours."""
    short = SourceLeases(leases.backend, ttl=0.2)
    short.acquire("orders", "dead-run")
    threading.Event().wait(3.4)  # the ttl, the slack (2 s) and the store clock's one-second resolution
    taken = short.acquire("orders", "next-run")
    assert taken.holder == "next-run"
    current = short.current("orders")
    assert current is not None and current.holder == "next-run"


def test_renew_and_release_are_conditional(leases: SourceLeases) -> None:
    """A renewal or release by a holder whose lease was taken over changes nothing."""
    from binlake.lake.leases import LockLostError

    held = leases.take("orders", "run-a")
    leases.release("orders", "run-a")
    other = leases.take("orders", "run-b")
    with pytest.raises(LockLostError, match="source orders: the run lease of 'run-a' was taken over by run 'run-b'"):
        leases.renew("orders", held)
    assert leases.release("orders", "run-a") is False
    assert leases.renew("orders", other).lease.holder == "run-b"


def test_racing_runs_get_exactly_one_holder(leases: SourceLeases) -> None:
    barrier = threading.Barrier(8)
    won: list[str] = []
    refused: list[str] = []

    def contend(holder: str) -> None:
        barrier.wait()
        try:
            leases.acquire("orders", holder)
            won.append(holder)
        except LeaseHeldError as exc:
            refused.append(str(exc))

    threads = [threading.Thread(target=contend, args=(f"run-{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and len(refused) == 7
    assert all(f"'{won[0]}'" in msg for msg in refused)


def test_s3_create_is_conditional(s3_server: Any, s3_bucket: str, s3_client: Any) -> None:
    backend = S3LeaseBackend(f"s3://{s3_bucket}/wh/_binlake/locks/",
                             S3Settings(endpoint_url=s3_server.endpoint_url, path_style_access=True))
    assert backend.create("sources/x.json", b"one") is True
    assert backend.create("sources/x.json", b"two") is False
    body = s3_client.get_object(Bucket=s3_bucket, Key="wh/_binlake/locks/sources/x.json")["Body"].read()
    assert body == b"one"


def _table_locks(s3_server: Any, bucket: str, **kwargs: float) -> TableCommitLocks:
    settings = S3Settings(endpoint_url=s3_server.endpoint_url, path_style_access=True)
    return TableCommitLocks(S3LeaseBackend(f"s3://{bucket}/_binlake/locks/", settings), **kwargs)


def test_table_commit_lock_admits_one_writer_at_a_time(s3_server: Any, s3_bucket: str) -> None:
    """Six "drivers" writing one table: never two inside at once, every one gets its turn."""
    locks = _table_locks(s3_server, s3_bucket, ttl=30, wait=120)
    inside: list[int] = []
    most = [0]
    done: list[int] = []
    guard = threading.Lock()
    barrier = threading.Barrier(6)

    def write(i: int) -> None:
        barrier.wait()
        with locks.hold("wh/meta/gtid_coverage"):
            with guard:
                inside.append(i)
                most[0] = max(most[0], len(inside))
            threading.Event().wait(0.05)
            with guard:
                inside.remove(i)
                done.append(i)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 1 and sorted(done) == list(range(6))
    assert locks.backend.read("tables/wh/meta/gtid_coverage.json") is None  # released


def test_table_commit_lock_of_a_dead_writer_expires(s3_server: Any, s3_bucket: str) -> None:
    locks = _table_locks(s3_server, s3_bucket, ttl=0.5, wait=30)
    locks.acquire("wh/bronze/events", "killed-driver")  # never released, never renewed
    threading.Event().wait(0.6)
    with locks.hold("wh/bronze/events") as lease:
        assert lease.holder != "killed-driver"


def test_table_commit_lock_wait_is_bounded_and_names_the_holder(s3_server: Any, s3_bucket: str) -> None:
    locks = _table_locks(s3_server, s3_bucket, ttl=60, wait=0.5)
    locks.acquire("wh/silver/statements", "busy-driver")
    with pytest.raises(LeaseHeldError, match="table wh/silver/statements: still being written by run 'busy-driver'"):
        locks.acquire("wh/silver/statements", "second-driver")


def test_table_commit_lock_is_keyed_by_location_and_a_no_op_locally(s3_server: Any, s3_bucket: str,
                                                                      s3_client: Any, tmp_path: Path) -> None:
    settings = S3Settings(endpoint_url=s3_server.endpoint_url, path_style_access=True)
    with table_commit_lock(f"s3a://{s3_bucket}/lake/meta/binlog_files", settings):
        key = "_binlake/locks/tables/lake/meta/binlog_files.json"
        assert b"binlog_files" in s3_client.get_object(Bucket=s3_bucket, Key=key)["Body"].read()
    with table_commit_lock(str(tmp_path / "meta" / "binlog_files"), None):
        assert not list(tmp_path.rglob("*.json"))


@pytest.mark.parametrize(("status", "code", "missing_too", "lost"), [
    (412, "PreconditionFailed", False, True),
    (409, "ConditionalRequestConflict", False, True),  # AWS: a concurrent conditional write finished first
    (409, "OperationAborted", True, True),
    (409, "BucketNotEmpty", False, False),  # another 409 is an error, not a lost race
    (404, "NoSuchKey", True, True),  # If-Match on an object deleted meanwhile
    (404, "NoSuchKey", False, False),  # If-None-Match never answers 404 for "exists"
    (503, "SlowDown", True, False),
])
def test_s3_conditional_refusals_are_told_from_errors(status: int, code: str, missing_too: bool, lost: bool) -> None:
    from botocore.exceptions import ClientError

    from binlake.lake.storage import conditional_write_refused

    exc = ClientError({"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "PutObject")
    assert conditional_write_refused(exc, missing_too=missing_too) is lost
