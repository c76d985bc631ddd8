"""Leases over a warehouse: per-source run leases and per-table commit locks.

**Run leases**: two pipeline runs never process the same source at the same time.

Why: the nightly and the backfill DAG each allow one active run, but one of each may run at once,
and both would ingest and reconcile the same source (replacing each other's rows mid-run). A
lease object ``<warehouse>/_binlake/locks/sources/<source>.json`` is created with an atomic
"create only if absent" - an exclusive ``link()`` on a local warehouse, ``PUT`` with
``If-None-Match: *`` on S3 (AWS, MinIO and moto honour it) - by the run's first task and deleted
by its last. Why hand-written: no library offers a lock over "a folder or an S3 prefix" with these
primitives, and an Airflow pool cannot serialize by source across two DAGs (pools cap slots,
they do not key them).

A lease names its holder (the Airflow run id) and lives ``ttl`` seconds after its last renewal; a
step heartbeats it while it runs (:class:`SourceLeaseRenewer`), so a run that died without
releasing blocks others only until then; the same holder may re-acquire (task retries, a cleared
task). The error a blocked run gets names the holder. A run that Airflow already ended (marked
failed in the UI, killed) is not waited for: the caller may pass ``holder_finished``.

**Table commit locks** (:class:`TableCommitLocks`): one Delta writer per table at a time across
drivers on S3. Since Delta commits on S3 are a put-if-absent of ``_delta_log/N.json`` (binlake's
conditional-PUT LogStore for Spark, delta-rs's conditional PUT), the lock is no longer what keeps
commits from being lost; it stays for fairness (writers take turns instead of failing each other's
commits with conflicts and retrying) and for stores without conditional writes
(docs/operations.md "Concurrency"). Local warehouses need no lock (rename-based commits).

Every change of a lock or lease object after its creation is conditional on the version its
writer last saw (its **tag**: the S3 ETag; locally a digest of the bytes, compared under an
``flock``), so of two writers only one wins, and a holder whose renewal fails (412) knows it lost:

* taking over an expired lock: ``PUT If-Match: <the expired object's ETag>``; two waiters that
  both saw it expire cannot both win;
* renew (heartbeat) and release: ``If-Match`` on the ETag the holder last wrote, so a stalled
  holder's late renewal cannot overwrite the next holder's lock, nor its release delete it;
* expiry: a waiter judges a lock dead when its ETag stayed the same for ``ttl`` seconds on the
  waiter's own monotonic clock, or when the store's own clock (``Last-Modified`` against the
  response's ``Date``; a file's mtime against a freshly touched file's) says it was last written
  more than ``ttl`` ago: no holder's clock is ever compared with a waiter's;
* fencing: a holder trusts its lock for ``SAFE_FRACTION`` of ``ttl`` after sending its last
  confirmed renewal (a waiter takes over only a whole ``ttl`` after seeing it); any failed renewal
  or heartbeat exception marks the lock lost, and writers call :meth:`HeldTableLock.check` right
  before committing;
* lock objects are parsed leniently: unknown fields are ignored, an unreadable one is a broken
  (expired) lock taken over with a warning, never a crash.
"""

from __future__ import annotations

import contextlib
import email.utils
import fcntl
import hashlib
import json
import logging
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from binlake.config import S3Settings, is_s3_uri, split_s3_uri
from binlake.errors import BinlakeError

if TYPE_CHECKING:  # pragma: no cover
    from binlake.lake.storage import S3Client

log = logging.getLogger("binlake.lake.leases")

#: lease lifetime unless renewed: long enough for a big decode step, short enough for dead runs
DEFAULT_TTL_SECONDS = 6 * 3600.0
TTL_ENV = "BINLAKE_SOURCE_LEASE_TTL"
#: of its ttl, how long a holder trusts its lock after sending its last confirmed renewal; the
#: rest is the margin for a commit started right after :meth:`HeldTableLock.check`
SAFE_FRACTION = 0.75
#: seconds added to ``ttl`` when the store's clock judges an age (``Last-Modified`` and ``Date``
#: have a resolution of one second)
STORE_CLOCK_SLACK = 2.0


class LeaseHeldError(BinlakeError, RuntimeError):
    """Another run holds the source's lease."""


class LockLostError(BinlakeError, RuntimeError):
    """A held table lock or source lease was lost (taken over, deleted, or its renewal failed)."""


class BrokenLeaseError(BinlakeError, ValueError):
    """A lease object that is not a lease (bad JSON, no holder)."""


@dataclass(frozen=True)
class Lease:
    """Who holds a source (or a table) and until when by the holder's clock (epoch seconds;
    informational only: expiry is judged without it, see module doc)."""

    source: str
    holder: str
    host: str
    pid: int
    acquired_at: float
    expires_at: float
    ttl: float = 0.0  # the holder's lifetime; a waiter waits for the longer of its own and this
    dag_id: str = ""  # the scheduler's name of the holding pipeline (Airflow DAG id), when known

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Lease:
        """Parse leniently: unknown fields ignored, missing ones defaulted; BrokenLeaseError when
        it is not a JSON object naming a holder."""
        try:
            doc = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise BrokenLeaseError(f"not JSON ({exc})") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("holder"), str) or not doc["holder"]:
            raise BrokenLeaseError("not a JSON object naming a holder")

        def num(key: str) -> float:
            value = doc.get(key)
            return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0

        return cls(source=str(doc.get("source") or ""), holder=doc["holder"], host=str(doc.get("host") or "?"),
                   pid=int(num("pid")), acquired_at=num("acquired_at"), expires_at=num("expires_at"),
                   ttl=num("ttl"), dag_id=str(doc.get("dag_id") or ""))

    def describe(self) -> str:
        until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.expires_at))
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.acquired_at))
        return f"run {self.holder!r} (host {self.host}, pid {self.pid}, since {since}, lease until {until})"


def parse_lease(data: bytes, where: str) -> Lease | None:
    """The lease in ``data``, or None (with a warning naming the object) when it is broken."""
    try:
        return Lease.from_bytes(data)
    except BrokenLeaseError as exc:
        log.warning("lease object %s is broken (%s): treated as expired", where, exc)
        return None


@dataclass(frozen=True)
class Stored:
    """A lease object as read: its bytes, its version tag, and its age by the store's own clock."""

    data: bytes
    tag: str
    age: float | None  # seconds since it was last written (None when the store does not say)


class LeaseBackend(Protocol):
    """Small lease objects: atomic create-if-absent and version-conditional replace / delete."""

    def create(self, name: str, data: bytes) -> bool: ...
    def read(self, name: str) -> bytes | None: ...
    def overwrite(self, name: str, data: bytes) -> None: ...
    def delete(self, name: str) -> None: ...
    def create_tagged(self, name: str, data: bytes) -> str | None: ...
    def read_tagged(self, name: str) -> Stored | None: ...
    def replace(self, name: str, data: bytes, tag: str) -> str | None: ...
    def delete_if(self, name: str, tag: str) -> bool: ...


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _is_version(path: Path, tag: str) -> bool:
    """Whether the lease file at ``path`` is still version ``tag`` (False when it is gone)."""
    try:
        return _digest(path.read_bytes()) == tag
    except FileNotFoundError:
        return False


class LocalLeaseBackend:
    """Lease files in a local folder. ``link()`` (fails if the name exists) makes creation atomic;
    a conditional replace / delete compares the file's digest and swaps it under an exclusive
    ``flock`` on ``<root>/.mutex`` (held for microseconds, dropped by the kernel if the process dies),
    the local equivalent of S3's ``If-Match``."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    @contextlib.contextmanager
    def _mutex(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".mutex", "ab") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def _tmp(self, path: Path, data: bytes) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}-{random.random():.9f}")  # noqa: S311
        tmp.write_bytes(data)
        return tmp

    def create_tagged(self, name: str, data: bytes) -> str | None:
        from binlake.lake.storage import LocalObjectStore

        with self._mutex():
            created = LocalObjectStore(self.root).put_if_absent(name, data)
        return None if created is None else _digest(data)

    def create(self, name: str, data: bytes) -> bool:
        return self.create_tagged(name, data) is not None

    def read_tagged(self, name: str) -> Stored | None:
        try:
            with open(self.root / name, "rb") as fh:
                data, written = fh.read(), os.fstat(fh.fileno()).st_mtime_ns
        except FileNotFoundError:
            return None
        clock = self.root / ".clock"  # the filesystem's "now", from the same clock as the mtime
        clock.touch()
        return Stored(data, _digest(data), (clock.stat().st_mtime_ns - written) / 1e9)

    def read(self, name: str) -> bytes | None:
        stored = self.read_tagged(name)
        return stored.data if stored else None

    def replace(self, name: str, data: bytes, tag: str) -> str | None:
        path = self.root / name
        tmp = self._tmp(path, data)
        try:
            with self._mutex():
                if not _is_version(path, tag):
                    return None
                tmp.replace(path)
        finally:
            tmp.unlink(missing_ok=True)
        return _digest(data)

    def delete_if(self, name: str, tag: str) -> bool:
        path = self.root / name
        with self._mutex():
            if not _is_version(path, tag):
                return False
            path.unlink()
        return True

    def overwrite(self, name: str, data: bytes) -> None:
        path = self.root / name
        tmp = self._tmp(path, data)
        with self._mutex():
            tmp.replace(path)

    def delete(self, name: str) -> None:
        with self._mutex():
            (self.root / name).unlink(missing_ok=True)


class S3LeaseBackend:
    """Lease objects under an S3 prefix: ``If-None-Match: *`` creates, ``If-Match: <ETag>``
    replaces and deletes (AWS S3: conditional writes since 2024-11, conditional deletes since
    2025-09; moto honours both)."""

    def __init__(self, uri: str, settings: S3Settings | None = None, client: S3Client | None = None) -> None:
        from binlake.lake.storage import S3ObjectStore

        self.store = S3ObjectStore(uri, settings, client=client)
        self.bucket, self.prefix = self.store.bucket, self.store.prefix

    @property
    def client(self) -> S3Client:
        return self.store.client

    def create_tagged(self, name: str, data: bytes) -> str | None:
        return self.store.put_if_absent(name, data)

    def create(self, name: str, data: bytes) -> bool:
        return self.create_tagged(name, data) is not None

    def read_tagged(self, name: str) -> Stored | None:
        from botocore.exceptions import ClientError

        try:
            resp = self.client.get_object(Bucket=self.bucket, Key=self.prefix + name)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise
        data = bytes(resp["Body"].read())
        age = None
        date = resp.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
        if date and resp.get("LastModified") is not None:
            with contextlib.suppress(TypeError, ValueError):
                age = (email.utils.parsedate_to_datetime(date) - resp["LastModified"]).total_seconds()
        return Stored(data, str(resp["ETag"]).strip('"'), age)

    def read(self, name: str) -> bytes | None:
        stored = self.read_tagged(name)
        return stored.data if stored else None

    def replace(self, name: str, data: bytes, tag: str) -> str | None:
        return self.store.put_if_match(name, data, tag)

    def delete_if(self, name: str, tag: str) -> bool:
        return self.store.delete_if_match(name, tag)

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


def _replace_confirmed(backend: LeaseBackend, name: str, data: bytes, tag: str) -> str | None:
    """``backend.replace``; when refused, the object may still hold exactly ``data`` (a retried
    request whose first attempt landed): then it is ours, and its tag is returned."""
    new = backend.replace(name, data, tag)
    if new is None:
        current = backend.read_tagged(name)
        if current is not None and current.data == data:
            return current.tag
    return new


def _create_confirmed(backend: LeaseBackend, name: str, data: bytes) -> str | None:
    tag = backend.create_tagged(name, data)
    if tag is None:
        current = backend.read_tagged(name)
        if current is not None and current.data == data:
            return current.tag
    return tag


def _older_than(stored: Stored, ttl: float) -> bool:
    """The store's own clock says the object was last written more than ``ttl`` ago."""
    return stored.age is not None and stored.age > ttl + STORE_CLOCK_SLACK


@dataclass
class HeldLease:
    """A source lease this process holds, with the tag of the version it last wrote."""

    lease: Lease
    tag: str


class SourceLeases:
    """Acquire / renew / release the run lease of a source (see module doc)."""

    def __init__(self, backend: LeaseBackend, ttl: float | None = None) -> None:
        self.backend = backend
        self.ttl = default_ttl() if ttl is None else ttl

    @staticmethod
    def _name(source: str) -> str:
        return f"sources/{source}.json"

    def current(self, source: str) -> Lease | None:
        stored = self.backend.read_tagged(self._name(source))
        return parse_lease(stored.data, self._name(source)) if stored else None

    def _lease(self, source: str, holder: str, acquired_at: float, dag_id: str) -> Lease:
        now = time.time()
        return Lease(source, holder, socket.gethostname(), os.getpid(), acquired_at, now + self.ttl,
                     self.ttl, dag_id)

    def take(self, source: str, holder: str, *, dag_id: str = "",
             holder_finished: Callable[[Lease], bool] | None = None) -> HeldLease:
        """Take (or renew, for the same holder) the lease; LeaseHeldError if another live run has it.

        Another run's lease is taken over (conditionally on its tag) when the store's clock says it
        was not renewed for its ttl, when it is broken, or when ``holder_finished(lease)`` says
        that run is over (Airflow marked it failed or it ended without releasing)."""
        name = self._name(source)
        for _ in range(5):  # create; or renew ours; or take over a dead one (each conditional)
            fresh = self._lease(source, holder, time.time(), dag_id)
            tag = _create_confirmed(self.backend, name, fresh.to_bytes())
            if tag is not None:
                return HeldLease(fresh, tag)
            stored = self.backend.read_tagged(name)
            if stored is None:
                continue  # released between our two calls
            held = parse_lease(stored.data, name)
            if held is not None and held.holder == holder:
                renewed = replace(fresh, acquired_at=held.acquired_at, dag_id=dag_id or held.dag_id)
                tag = _replace_confirmed(self.backend, name, renewed.to_bytes(), stored.tag)
                if tag is not None:
                    return HeldLease(renewed, tag)
                continue
            if held is not None and not self._dead(held, stored, holder_finished):
                raise LeaseHeldError(f"source {source} is being processed by {held.describe()}; this run "
                                     f"({holder!r}) does not overlap it: re-run after that run ends, or "
                                     f"delete the lease object {name} under <warehouse>/_binlake/locks/ "
                                     "if that run is known to be dead")
            tag = _replace_confirmed(self.backend, name, fresh.to_bytes(), stored.tag)
            if tag is not None:
                log.warning("source %s: took over the run lease of %s", source,
                            held.describe() if held else "a broken lease object")
                return HeldLease(fresh, tag)
        raise LeaseHeldError(f"source {source}: could not take the lease (contended)")

    def _dead(self, held: Lease, stored: Stored, holder_finished: Callable[[Lease], bool] | None) -> bool:
        if _older_than(stored, max(self.ttl, held.ttl)):
            return True
        if holder_finished is None:
            return False
        try:
            return holder_finished(held)
        except Exception as exc:  # noqa: BLE001 - unknown means alive: never take a live run's lease
            log.warning("could not tell whether run %r is over: %s", held.holder, exc)
            return False

    def acquire(self, source: str, holder: str, *, dag_id: str = "",
                holder_finished: Callable[[Lease], bool] | None = None) -> Lease:
        """:meth:`take`, the lease only."""
        return self.take(source, holder, dag_id=dag_id, holder_finished=holder_finished).lease

    def renew(self, source: str, held: HeldLease) -> HeldLease:
        """Rewrite the lease, conditional on the version we last wrote; LockLostError if it changed."""
        name = self._name(source)
        renewed = self._lease(source, held.lease.holder, held.lease.acquired_at, held.lease.dag_id)
        tag = _replace_confirmed(self.backend, name, renewed.to_bytes(), held.tag)
        if tag is None:
            stored = self.backend.read_tagged(name)
            other = parse_lease(stored.data, name) if stored else None
            raise LockLostError(f"source {source}: the run lease of {held.lease.holder!r} was "
                                + (f"taken over by {other.describe()}" if other else "deleted or replaced"))
        return HeldLease(renewed, tag)

    def release(self, source: str, holder: str) -> bool:
        """Delete the lease if ``holder`` holds it (conditional on the version read); True if it did."""
        name = self._name(source)
        stored = self.backend.read_tagged(name)
        if stored is None:
            return False
        held = parse_lease(stored.data, name)
        if held is None or held.holder != holder:
            return False
        return self.backend.delete_if(name, stored.tag)


class SourceLeaseRenewer:
    """Heartbeat a held source lease every third of its ttl in a daemon thread, conditionally;
    a refused renewal or any error stops it and is logged (the lease is then lost: the next step's
    :meth:`SourceLeases.take` names the run that took it)."""

    def __init__(self, leases: SourceLeases, source: str, held: HeldLease) -> None:
        self.leases, self.source, self.held = leases, source, held
        self.lost: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"binlake-lease-{source}", daemon=True)

    def start(self) -> SourceLeaseRenewer:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.leases.ttl / 3):
                self.held = self.leases.renew(self.source, self.held)
        except Exception as exc:  # noqa: BLE001 - the thread must never die silently
            self.lost = str(exc)
            if not self._stop.is_set():  # a renewal racing a newer take of the same run is no news
                log.error("source %s: run lease of %r lost: %s", self.source, self.held.lease.holder, exc)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)


#: a table lock's lifetime without renewal (the holder's heartbeat renews it every third of it)
TABLE_LOCK_TTL_SECONDS = 120.0
#: how long a writer waits for another driver's write of the same table before giving up
TABLE_LOCK_WAIT_SECONDS = 3600.0


class HeldTableLock:
    """A table commit lock this driver holds: its tag, its heartbeat, and the fence
    (:meth:`check`, :attr:`is_lost`) a writer consults right before committing."""

    def __init__(self, locks: TableCommitLocks, table: str, lease: Lease, tag: str, sent_at: float) -> None:
        self.locks, self.table, self.lease, self.tag = locks, table, lease, tag
        self.holder = lease.holder
        self.name = locks._name(table)
        self.lost: str | None = None
        self._valid_until = sent_at + locks.ttl * SAFE_FRACTION
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    @property
    def is_lost(self) -> bool:
        return self.lost is not None or time.monotonic() > self._valid_until

    def check(self) -> None:
        """LockLostError when the lock may be someone else's by now: a renewal was refused or failed,
        or none was confirmed for ``SAFE_FRACTION`` of the ttl (a stalled heartbeat)."""
        if self.lost is None and time.monotonic() > self._valid_until:
            why = f"no renewal confirmed for {self.locks.ttl * SAFE_FRACTION:.1f}s (stalled)"
        elif self.lost is None:
            return
        else:
            why = self.lost
        raise LockLostError(f"table {self.table}: the commit lock {self.name} of {self.holder!r} was lost "
                            f"({why}); not committing: another writer may hold it now, the write is retried "
                            "by the task's retry")

    def _mark_lost(self, why: str) -> None:
        if self.lost is None:
            self.lost = why
            log.error("table %s: commit lock lost: %s", self.table, why)

    def renew(self) -> bool:
        """One conditional renewal (what the heartbeat runs); False (and lost) when refused."""
        lease = self.locks._lease(self.table, self.holder, self.lease.acquired_at)
        sent = time.monotonic()
        tag = _replace_confirmed(self.locks.backend, self.name, lease.to_bytes(), self.tag)
        if tag is None:
            current = self.locks.backend.read_tagged(self.name)
            other = parse_lease(current.data, self.name) if current else None
            self._mark_lost("taken over by " + other.describe() if other else "the lock object was deleted")
            return False
        self.lease, self.tag = lease, tag
        self._valid_until = sent + self.locks.ttl * SAFE_FRACTION
        return True

    def _heartbeat(self) -> None:
        try:
            while not self._stop.wait(self.locks.ttl / 3):
                if self.lost is not None or not self.renew():
                    return
        except BaseException as exc:  # noqa: BLE001 - never die silently: an unrenewed lock is lost
            self._mark_lost(f"heartbeat failed: {type(exc).__name__}: {exc}")

    def start_heartbeat(self) -> None:
        self._beat = threading.Thread(target=self._heartbeat, name=f"binlake-lock-{self.table}", daemon=True)
        self._beat.start()

    def release(self) -> None:
        """Stop the heartbeat; delete the lock if it is still ours (conditional on its tag). A
        heartbeat stuck in a request is not waited for long: its late write is conditional too."""
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=2.0)
        current = self.locks.backend.read_tagged(self.name)
        held = parse_lease(current.data, self.name) if current else None
        if current is not None and held is not None and held.holder == self.holder:
            self.locks.backend.delete_if(self.name, current.tag)


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
        return Lease(table, holder, socket.gethostname(), os.getpid(), acquired_at, time.time() + self.ttl, self.ttl)

    def acquire(self, table: str, holder: str) -> HeldTableLock:
        """Wait until the table's lock is free or dead, then take it; LeaseHeldError on timeout.

        Dead: its ETag unchanged for the ttl on this process's monotonic clock, the store's clock
        says it is older than that, or it is broken; taken over with ``If-Match`` on that ETag."""
        name = self._name(table)
        deadline = time.monotonic() + self.wait
        pause = 0.2
        seen: tuple[str, float] | None = None  # (tag, monotonic time we first saw it)
        while True:
            lease = self._lease(table, holder, time.time())
            sent = time.monotonic()
            tag = _create_confirmed(self.backend, name, lease.to_bytes())
            if tag is not None:
                return HeldTableLock(self, table, lease, tag, sent)
            current = self.backend.read_tagged(name)
            if current is None:
                continue  # released between our two calls
            held = parse_lease(current.data, name)
            if seen is None or seen[0] != current.tag:
                seen = (current.tag, time.monotonic())
            ttl = max(self.ttl, held.ttl if held else 0.0)
            if held is None or time.monotonic() - seen[1] >= ttl or _older_than(current, ttl):
                sent = time.monotonic()
                tag = _replace_confirmed(self.backend, name, lease.to_bytes(), current.tag)
                if tag is not None:  # its holder died mid-write (or stalled past its life): fenced off
                    log.warning("table %s: took over the commit lock of %s", table,
                                held.describe() if held else "a broken lock object")
                    return HeldTableLock(self, table, lease, tag, sent)
                continue  # another waiter took it, or its holder renewed: look again
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
        """Delete the lock if ``holder`` still holds it (conditional on the version read)."""
        current = self.backend.read_tagged(self._name(table))
        held = parse_lease(current.data, self._name(table)) if current else None
        if current is not None and held is not None and held.holder == holder:
            self.backend.delete_if(self._name(table), current.tag)

    @contextlib.contextmanager
    def hold(self, table: str) -> Iterator[HeldTableLock]:
        """Hold the table's lock for the ``with`` block, renewed by a heartbeat thread; the block
        calls ``check()`` on what it gets right before committing."""
        holder = f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}:{random.random():.12f}"  # noqa: S311
        lock = self.acquire(table, holder)
        lock.start_heartbeat()
        try:
            yield lock
        finally:
            lock.release()


class CommitFence(Protocol):
    """What a writer under a table's commit lock consults right before its commit."""

    def check(self) -> None:
        """LockLostError when the lock may be someone else's by now."""


class NoLock:
    """What :func:`table_commit_lock` yields where no lock is needed (local tables): never lost."""

    is_lost = False

    def check(self) -> None:
        return None


@contextlib.contextmanager
def _no_lock() -> Iterator[NoLock]:
    yield NoLock()


def table_commit_lock(table_uri: str, s3: S3Settings | None) -> contextlib.AbstractContextManager[CommitFence]:
    """The commit lock for a Delta write to the table at ``table_uri``: a real lock on S3, a no-op
    locally. It yields an object whose ``check()`` raises LockLostError when the lock was lost:
    call it right before the commit.

    Keyed by the table's location (``s3://<bucket>/_binlake/locks/tables/<key>.json``), not by a
    config, so every writer of that location agrees on the lock whatever its warehouse setting.
    """
    if not is_s3_uri(table_uri):
        return _no_lock()
    bucket, key = split_s3_uri(table_uri)
    backend = S3LeaseBackend(f"s3://{bucket}/_binlake/locks/", s3)
    return TableCommitLocks(backend).hold(key.strip("/"))


T = TypeVar("T")
#: attempts of :func:`committed_write` in all, and the longest wait between two of them (seconds)
COMMIT_ATTEMPTS = 6
COMMIT_MAX_WAIT_SECONDS = 20.0


def committed_write(table_uri: str, s3: S3Settings | None, write: Callable[[CommitFence], T], *, what: str,
                    retryable: Callable[[BaseException], bool], attempts: int = COMMIT_ATTEMPTS,
                    max_wait: float = COMMIT_MAX_WAIT_SECONDS) -> T:
    """Run ``write(fence)``, one Delta commit to the table at ``table_uri``, under the table's commit
    lock (:func:`table_commit_lock`), re-run on a commit conflict ``retryable`` accepts: at most
    ``attempts`` times in all, waiting 0.5 s .. ``max_wait`` (exponential, full jitter) in between;
    the last conflict, and any other error, is raised. ``write`` calls ``fence.check()`` right
    before its commit (after its reads), so a lock lost meanwhile stops it before anything lands.

    Why one function: every job write (Spark's and delta-rs's) must take the lock, fence and retry
    the same way; written out at each site, they drifted. Re-running is safe because every binlake
    write is a deterministic replacement tied to its run (a ``txn`` action Delta skips when it
    landed). The jitter keeps two writers that collided from colliding again in lock step; tenacity
    does the waiting.
    """
    from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        log.warning("%s: Delta commit conflict (attempt %d of %d), retrying: %s", what, state.attempt_number,
                    attempts, str(exc).split("\n", 1)[0][:300])

    with table_commit_lock(table_uri, s3) as fence:
        retrying = Retrying(stop=stop_after_attempt(attempts), wait=wait_random_exponential(multiplier=0.5, max=max_wait),
                            retry=retry_if_exception(retryable), before_sleep=before_sleep, reraise=True)
        return retrying(write, fence)
