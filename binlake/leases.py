"""Leases over a warehouse: per-source run leases and per-table commit locks.

**Run leases**: two pipeline runs never process the same source at the same time.

Why: the nightly and the backfill DAG each allow one active run, but one of each may run at once,
and both would ingest and reconcile the same source (replacing each other's rows mid-run). A
lease object ``<warehouse>/_binlake/locks/sources/<source>.json`` is created with an atomic
"create only if absent" - an exclusive ``link()`` on a local warehouse, ``PUT`` with
``If-None-Match: *`` on S3 (AWS, MinIO and moto honour it) - by the run's first task and deleted
by its last. Why hand-written: no library offers a lock over "a folder or an S3 prefix" with these
two primitives, and an Airflow pool cannot serialize by source across two DAGs (pools cap slots,
they do not key them).

A lease names its holder (the Airflow run id) and expires (``ttl``, renewed by every step of the
holding run), so a run that died without releasing blocks others only until then; the same holder
may re-acquire (task retries, a cleared task). The error a blocked run gets names the holder.

**Table commit locks** (:class:`TableCommitLocks`): on S3, Delta Lake's ``S3SingleDriverLogStore``
is only safe when one *driver* commits to a table at a time: S3 has no atomic "put if absent" that
Delta 4.4 uses, so two drivers committing version N of the same table at once both "succeed" and
one commit is silently lost. Parallel Airflow tasks are separate drivers (LocalExecutor processes,
spark-submit applications). The alternative Delta offers, ``S3DynamoDBLogStore``, needs DynamoDB
and the AWS SDK v1; instead every binlake Delta write to an ``s3a://`` table holds a lock object
``s3://<bucket>/_binlake/locks/tables/<table key>.json`` (same create-if-absent primitive as above)
for the duration of the write, waiting (jittered, bounded) while another driver holds it. A held
lock is renewed by a heartbeat thread; a lock whose holder died expires after ``ttl`` seconds.
Local warehouses need no lock: Delta's rename-based commit is atomic there.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from binlake.config import S3Settings, is_s3_uri, split_s3_uri
from binlake.errors import BinlakeError

log = logging.getLogger("binlake.leases")

#: lease lifetime unless renewed: long enough for a big decode step, short enough for dead runs
DEFAULT_TTL_SECONDS = 6 * 3600.0
TTL_ENV = "BINLAKE_SOURCE_LEASE_TTL"


class LeaseHeldError(BinlakeError, RuntimeError):
    """Another run holds the source's lease."""


@dataclass(frozen=True)
class Lease:
    """Who holds a source and until when (epoch seconds)."""

    source: str
    holder: str
    host: str
    pid: int
    acquired_at: float
    expires_at: float

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Lease:
        return cls(**json.loads(data))

    def describe(self) -> str:
        until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.expires_at))
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.acquired_at))
        return f"run {self.holder!r} (host {self.host}, pid {self.pid}, since {since}, lease until {until})"


class LeaseBackend(Protocol):
    """Atomic create-if-absent, read, overwrite and delete of small lease objects."""

    def create(self, name: str, data: bytes) -> bool: ...
    def read(self, name: str) -> bytes | None: ...
    def overwrite(self, name: str, data: bytes) -> None: ...
    def delete(self, name: str) -> None: ...


class LocalLeaseBackend:
    """Lease files in a local folder; ``link()`` (fails if the name exists) makes creation atomic."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def create(self, name: str, data: bytes) -> bool:
        # Written to a private file first, then hard-linked into place: link() fails if the name
        # exists (atomic, like O_EXCL) and a reader never sees a half-written lease.
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}")
        tmp.write_bytes(data)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        finally:
            tmp.unlink(missing_ok=True)
        return True

    def read(self, name: str) -> bytes | None:
        try:
            return (self.root / name).read_bytes()
        except FileNotFoundError:
            return None

    def overwrite(self, name: str, data: bytes) -> None:
        path = self.root / name
        tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
        tmp.write_bytes(data)
        tmp.replace(path)

    def delete(self, name: str) -> None:
        (self.root / name).unlink(missing_ok=True)


class S3LeaseBackend:
    """Lease objects under an S3 prefix; ``If-None-Match: *`` makes creation atomic."""

    def __init__(self, uri: str, settings: S3Settings | None = None, client: Any = None) -> None:
        from binlake.storage import make_s3_client

        self.bucket, prefix = split_s3_uri(uri)
        self.prefix = prefix if not prefix or prefix.endswith("/") else prefix + "/"
        self.client = client or make_s3_client(settings or S3Settings())

    def create(self, name: str, data: bytes) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.client.put_object(Bucket=self.bucket, Key=self.prefix + name, Body=data, IfNoneMatch="*")
        except ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            code = exc.response.get("Error", {}).get("Code")
            if status in (409, 412) or code in ("PreconditionFailed", "ConditionalRequestConflict"):
                return False
            raise
        return True

    def read(self, name: str) -> bytes | None:
        from botocore.exceptions import ClientError

        try:
            return bytes(self.client.get_object(Bucket=self.bucket, Key=self.prefix + name)["Body"].read())
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise

    def overwrite(self, name: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self.prefix + name, Body=data)

    def delete(self, name: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self.prefix + name)


def lease_backend(warehouse: str, s3: S3Settings | None = None) -> LeaseBackend:
    """The backend for the leases of a warehouse (local folder or ``s3://``/``s3a://`` URI)."""
    root = warehouse.rstrip("/") + "/_binlake/locks/"
    if is_s3_uri(root):
        return S3LeaseBackend(root, s3)
    return LocalLeaseBackend(root.removeprefix("file://"))


def default_ttl() -> float:
    return float(os.environ.get(TTL_ENV) or DEFAULT_TTL_SECONDS)


class SourceLeases:
    """Acquire / renew / release the run lease of a source (see module doc)."""

    def __init__(self, backend: LeaseBackend, ttl: float | None = None) -> None:
        self.backend = backend
        self.ttl = default_ttl() if ttl is None else ttl

    @staticmethod
    def _name(source: str) -> str:
        return f"sources/{source}.json"

    def current(self, source: str) -> Lease | None:
        data = self.backend.read(self._name(source))
        return Lease.from_bytes(data) if data else None

    def acquire(self, source: str, holder: str, *, now: float | None = None) -> Lease:
        """Take (or renew, for the same holder) the lease; LeaseHeldError if another live run has it."""
        now = time.time() if now is None else now
        lease = Lease(source, holder, socket.gethostname(), os.getpid(), now, now + self.ttl)
        name = self._name(source)
        for _ in range(3):  # create; or renew ours; or take over an expired one, then create again
            if self.backend.create(name, lease.to_bytes()):
                return lease
            held = self.current(source)
            if held is None:
                continue  # released between our two calls
            if held.holder == holder:
                renewed = Lease(source, holder, lease.host, lease.pid, held.acquired_at, lease.expires_at)
                self.backend.overwrite(name, renewed.to_bytes())
                return renewed
            if held.expires_at > now:
                raise LeaseHeldError(f"source {source} is being processed by {held.describe()}; this run "
                                     f"({holder!r}) does not overlap it: re-run after that run ends, or "
                                     f"delete the lease object {name} under <warehouse>/_binlake/locks/ "
                                     "if that run is known to be dead")
            self.backend.delete(name)  # expired: the holding run died without releasing it
        raise LeaseHeldError(f"source {source}: could not take the lease (contended)")

    def release(self, source: str, holder: str) -> bool:
        """Delete the lease if ``holder`` holds it; True if it did."""
        held = self.current(source)
        if held is None or held.holder != holder:
            return False
        self.backend.delete(self._name(source))
        return True


#: a table lock's lifetime without renewal (the holder's heartbeat renews it every third of it)
TABLE_LOCK_TTL_SECONDS = 120.0
#: how long a writer waits for another driver's write of the same table before giving up
TABLE_LOCK_WAIT_SECONDS = 3600.0


class TableCommitLocks:
    """One Delta writer per table at a time across drivers (S3 warehouses; see module doc)."""

    def __init__(self, backend: LeaseBackend, *, ttl: float = TABLE_LOCK_TTL_SECONDS,
                 wait: float = TABLE_LOCK_WAIT_SECONDS) -> None:
        self.backend = backend
        self.ttl = ttl
        self.wait = wait

    @staticmethod
    def _name(table: str) -> str:
        return f"tables/{table}.json"

    def _lease(self, table: str, holder: str, acquired_at: float) -> Lease:
        return Lease(table, holder, socket.gethostname(), os.getpid(), acquired_at, time.time() + self.ttl)

    def acquire(self, table: str, holder: str) -> Lease:
        """Wait until the table's lock is free (or expired), then take it; LeaseHeldError on timeout."""
        name = self._name(table)
        deadline = time.monotonic() + self.wait
        pause = 0.2
        while True:
            lease = self._lease(table, holder, time.time())
            if self.backend.create(name, lease.to_bytes()):
                return lease
            data = self.backend.read(name)
            held = Lease.from_bytes(data) if data else None
            if held is not None and held.expires_at < time.time():
                self.backend.delete(name)  # its holder died mid-write: its commit never happened
                continue
            if pause == 0.2:  # first time only: say who we wait for
                log.info("table %s: waiting for the commit lock held by %s", table,
                         held.describe() if held else "another writer")
            if time.monotonic() > deadline:
                who = held.describe() if held else "another writer"
                raise LeaseHeldError(f"table {table}: still being written by {who} after "
                                     f"{self.wait:.0f}s of waiting")
            time.sleep(pause * (0.5 + random.random()))  # noqa: S311 - jitter, not crypto
            pause = min(pause * 1.5, 2.0)

    def release(self, table: str, holder: str) -> None:
        """Delete the lock if ``holder`` still holds it."""
        data = self.backend.read(self._name(table))
        if data and Lease.from_bytes(data).holder == holder:
            self.backend.delete(self._name(table))

    @contextlib.contextmanager
    def hold(self, table: str) -> Iterator[Lease]:
        """Hold the table's lock for the ``with`` block, renewed by a heartbeat thread."""
        holder = f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}:{random.random():.12f}"  # noqa: S311
        lease = self.acquire(table, holder)
        stop = threading.Event()

        def heartbeat() -> None:
            while not stop.wait(self.ttl / 3):
                self.backend.overwrite(self._name(table), self._lease(table, holder, lease.acquired_at).to_bytes())

        beat = threading.Thread(target=heartbeat, name=f"binlake-lock-{table}", daemon=True)
        beat.start()
        try:
            yield lease
        finally:
            stop.set()
            beat.join()
            self.release(table, holder)


def table_commit_lock(table_uri: str, s3: S3Settings | None) -> contextlib.AbstractContextManager[Any]:
    """The commit lock for a Delta write to the table at ``table_uri``: a real lock on S3, a no-op locally.

    Keyed by the table's location (``s3://<bucket>/_binlake/locks/tables/<key>.json``), not by a
    config, so every writer of that location agrees on the lock whatever its warehouse setting.
    """
    if not is_s3_uri(table_uri):
        return contextlib.nullcontext()
    bucket, key = split_s3_uri(table_uri)
    backend = S3LeaseBackend(f"s3://{bucket}/_binlake/locks/", s3)
    return TableCommitLocks(backend).hold(key.strip("/"))
