"""Per-source run leases (binlake.leases) on a local warehouse and on S3 (the loopback moto server).

Real primitives: ``O_EXCL`` files in a tmp folder, ``PUT If-None-Match: *`` over HTTP. Many
threads racing for one source must yield exactly one holder; the loser's error names the holder.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from binlake.config import S3Settings
from binlake.leases import (
    LeaseHeldError,
    LocalLeaseBackend,
    S3LeaseBackend,
    SourceLeases,
    lease_backend,
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
    first = leases.acquire("orders", "scheduled__2026-01-02T03:00:00+00:00", now=1000.0)
    assert first.holder == "scheduled__2026-01-02T03:00:00+00:00" and first.expires_at == 1060.0
    with pytest.raises(LeaseHeldError, match=r"source orders is being processed by run "
                                             r"'scheduled__2026-01-02T03:00:00\+00:00'"):
        leases.acquire("orders", "manual__backfill-1", now=1010.0)
    # another source is independent
    assert leases.acquire("billing", "manual__backfill-1", now=1010.0).holder == "manual__backfill-1"


def test_same_holder_renews_and_release_lets_the_next_run_in(leases: SourceLeases) -> None:
    leases.acquire("orders", "run-a", now=1000.0)
    renewed = leases.acquire("orders", "run-a", now=1030.0)
    assert (renewed.acquired_at, renewed.expires_at) == (1000.0, 1090.0)
    assert leases.release("orders", "run-b") is False  # not the holder: nothing released
    assert leases.current("orders") is not None
    assert leases.release("orders", "run-a") is True
    assert leases.current("orders") is None
    assert leases.acquire("orders", "run-b", now=1031.0).holder == "run-b"


def test_expired_lease_of_a_dead_run_is_taken_over(leases: SourceLeases) -> None:
    leases.acquire("orders", "dead-run", now=1000.0)
    taken = leases.acquire("orders", "next-run", now=1061.0)
    assert taken.holder == "next-run"
    current = leases.current("orders")
    assert current is not None and current.holder == "next-run"


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
