"""What keeps the archiver's destination consistent: one archiver per destination, one server per series.

- **The spool lock**: ``fcntl.flock`` on ``<spool>/<source>/.archiver.lock``, held for the process's
  life (the kernel drops it when the process dies, even on kill -9), so two archivers on one host
  never append to or truncate the same spool file.
- **The destination lease**: one lease object per destination, created with
  :mod:`binlake.lake.leases`' create-if-absent primitive (``link()`` locally, ``If-None-Match: *`` on S3)
  and renewed while the archiver streams. A second archiver of the destination (another host, a
  standby) refuses to start while the lease is live. Renewal, take-over and release go through
  leases.py's version-conditional ``replace`` / ``delete_if`` (``If-Match`` on S3), so a holder that
  stalled past the lease's life and a taker never both believe they hold it (the loser's write
  fails). The lease is not the last line: every object write is conditional too
  (:func:`binlake.archive.files.conditional_put`).
- **The series record**: the server an archived series was streamed from (MySQL ``server_uuid``;
  MariaDB ``server_id`` + ``gtid_domain_id``) and its first file's FORMAT_DESCRIPTION and
  PREVIOUS_GTIDS / GTID_LIST. A resume against a different server (a failover, a rebuilt host) is
  refused instead of splicing its same-named files onto the archive; ``--new-series`` starts a new
  series on purpose.

Both objects live beside the archive, never in it (discovery lists the source's prefix):
``s3://<bucket>/_binlake/archiver/<prefix>/`` for ``s3://<bucket>/<prefix>/``, and
``<parent>/_binlake/archiver/<name>/`` for a folder ``<parent>/<name>``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import random
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from binlake.archive.errors import ArchiverGuardError, ArchiverLeaseHeld
from binlake.config import S3Settings, is_s3_uri, split_s3_uri
from binlake.errors import BinlakeError
from binlake.lake.leases import Lease, LeaseBackend, LocalLeaseBackend, S3LeaseBackend, Stored, parse_lease
from binlake.lake.storage import S3Client

log = logging.getLogger("binlake.archive.archiver")

LEASE_NAME = "archiver-lease.json"
SERIES_NAME = "series.json"
#: the destination lease's life without renewal; the archiver renews it every third of it
LEASE_TTL_SECONDS = 60.0


def archive_meta_uri(dest: str) -> str:
    """Where the lease and the series record of the archive at ``dest`` live (beside it, see module doc)."""
    if is_s3_uri(dest):
        bucket, prefix = split_s3_uri(dest)
        return f"s3://{bucket}/_binlake/archiver/{prefix.strip('/') or '_bucket_root'}/"
    path = Path(dest.removeprefix("file://")).resolve()
    return str(path.parent / "_binlake" / "archiver" / path.name) + "/"


def meta_backend(dest: str, s3: S3Settings | None = None, client: S3Client | None = None) -> LeaseBackend:
    uri = archive_meta_uri(dest)
    if is_s3_uri(uri):
        return S3LeaseBackend(uri, s3, client=client)
    return LocalLeaseBackend(uri)


# --- the spool lock -----------------------------------------------------------------------------


class SpoolLock:
    """An exclusive ``flock`` on the spool folder (see module doc)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / ".archiver.lock"
        self._fh: IO[str] | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.path, "a+")  # noqa: SIM115 - held for the archiver's life
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            who = fh.read().strip() or "another process"
            fh.close()
            raise ArchiverLeaseHeld(f"the spool folder {self.path.parent} is in use by {who}: one archiver per "
                                    "source and spool folder") from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        fh.flush()
        self._fh = fh

    def release(self) -> None:
        if self._fh is not None:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None


# --- the destination lease ----------------------------------------------------------------------


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class DestinationLease:
    """The destination's archiver lease (see module doc), on leases.py's tagged primitives:
    ``create_tagged`` (create-if-absent), ``replace`` / ``delete_if`` (only over the version we
    hold: ``If-Match`` on S3, a locked digest compare in a folder)."""

    backend: LeaseBackend
    dest: str
    ttl: float = LEASE_TTL_SECONDS
    holder: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}:{random.random():.9f}")  # noqa: S311
    _tag: str | None = None  # the version of the lease object we wrote last
    _renewed: float = 0.0
    held: bool = False

    def _lease(self, acquired_at: float) -> bytes:
        now = time.time()
        return Lease(self.dest, self.holder, socket.gethostname(), os.getpid(), acquired_at, now + self.ttl,
                     ttl=self.ttl).to_bytes()

    def _took(self, tag: str) -> None:
        self._tag, self._renewed, self.held = tag, time.monotonic(), True

    def acquire(self) -> None:
        """Take the lease, or take over a dead holder's; ArchiverLeaseHeld while a live one holds it."""
        for _ in range(3):
            tag = self.backend.create_tagged(LEASE_NAME, self._lease(time.time()))
            if tag is not None:
                self._took(tag)
                return
            stored = self.backend.read_tagged(LEASE_NAME)
            if stored is None:
                continue  # released between our two calls
            other = parse_lease(stored.data, f"{archive_meta_uri(self.dest)}{LEASE_NAME}")
            if other is not None and not self._stale(other, stored):
                raise ArchiverLeaseHeld(
                    f"the archive {self.dest} is being written by another archiver: {other.describe()}. One "
                    f"archiver per destination; this one stops. If that archiver is dead, its lease expires "
                    f"{self.ttl:.0f} s after its last renewal (delete {archive_meta_uri(self.dest)}{LEASE_NAME} "
                    "to take over at once)")
            new = self.backend.replace(LEASE_NAME, self._lease(time.time()), stored.tag)
            if new is not None:  # the lease we judged dead is still the one stored: ours now
                log.warning("took over the archiver lease of %s from %s", self.dest,
                            other.describe() if other else "a broken lease object")
                self._took(new)
                return
        raise ArchiverLeaseHeld(f"the archive {self.dest}: could not take the archiver lease (contended)")

    def _stale(self, other: Lease, stored: Stored) -> bool:
        """Dead: a process of this host that no longer runs, or not rewritten for the holder's lease
        life by the store's own clock (without one, by the holder's expiry plus one life of allowance
        for clock differences between hosts)."""
        if other.host == socket.gethostname() and not _pid_alive(other.pid):
            return True
        life = max(self.ttl, other.ttl)
        if stored.age is not None:
            return stored.age > life
        return other.expires_at + life < time.time()

    def renew(self, force: bool = False) -> None:
        """Every third of the lease's life: rewrite it, only over the version we wrote last."""
        if not self.held or (not force and time.monotonic() - self._renewed < self.ttl / 3):
            return
        new = self.backend.replace(LEASE_NAME, self._lease(time.time()), self._tag or "")
        if new is None:
            self.held = False
            raise ArchiverGuardError(
                f"the archive {self.dest}: the archiver lease was taken over by another archiver while this one "
                "was stalled; stopping without writing more")
        self._tag, self._renewed = new, time.monotonic()

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        with contextlib.suppress(Exception):  # best effort: an unreleased lease expires
            self.backend.delete_if(LEASE_NAME, self._tag or "")


# --- the series record --------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerIdentity:
    """Which server a stream comes from: MySQL's ``server_uuid``; MariaDB's ``server_id`` and
    ``gtid_domain_id`` (a MariaDB replica promoted in a failover has its own server_id)."""

    flavor: str  # "mysql" | "mariadb"
    server_id: int
    server_uuid: str | None = None
    gtid_domain_id: int | None = None

    def same_server(self, other: ServerIdentity) -> bool:
        if self.flavor != other.flavor:
            return False
        if self.flavor == "mysql":
            return self.server_uuid == other.server_uuid
        return (self.server_id, self.gtid_domain_id) == (other.server_id, other.gtid_domain_id)

    def describe(self) -> str:
        if self.flavor == "mysql":
            return f"MySQL server_uuid {self.server_uuid} (server_id {self.server_id})"
        return f"MariaDB server_id {self.server_id}, gtid_domain_id {self.gtid_domain_id}"

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> ServerIdentity:
        return cls(str(doc.get("flavor", "")), int(doc.get("server_id") or 0), doc.get("server_uuid"),
                   doc.get("gtid_domain_id"))


@dataclass
class SeriesRecord:
    """The archived series' server and first file (``series.json`` beside the archive)."""

    server: ServerIdentity
    address: str
    recorded_at: float
    first_file: str | None = None
    first_fde: str | None = None  # hex
    first_previous_gtids: str | None = None  # hex of PREVIOUS_GTIDS / GTID_LIST
    previous_series: list[dict[str, Any]] = field(default_factory=list)

    def to_bytes(self) -> bytes:
        doc = asdict(self)
        return json.dumps(doc, indent=1, sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> SeriesRecord:
        doc = json.loads(data)
        return cls(ServerIdentity.from_dict(doc["server"]), str(doc.get("address", "")),
                   float(doc.get("recorded_at") or 0), doc.get("first_file"), doc.get("first_fde"),
                   doc.get("first_previous_gtids"), list(doc.get("previous_series") or []))

    def describe(self) -> str:
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.recorded_at))
        first = f", first file {self.first_file}" if self.first_file else ""
        return f"{self.server.describe()} at {self.address}{first}, recorded {since}"


def read_series(backend: LeaseBackend) -> SeriesRecord | None:
    raw = backend.read(SERIES_NAME)
    if raw is None:
        return None
    try:
        return SeriesRecord.from_bytes(raw)
    except (ValueError, KeyError, TypeError) as exc:
        raise ArchiverGuardError(f"the archive's series record {SERIES_NAME} is unreadable ({exc}); move it "
                                 "aside and restart with --new-series to record the current server") from None


def write_series(backend: LeaseBackend, record: SeriesRecord) -> None:
    backend.overwrite(SERIES_NAME, record.to_bytes())


def fde_mismatch(archived: bytes, streamed: bytes) -> str | None:
    """Why the FORMAT_DESCRIPTION the server re-sends for a resumed file is not the archived file's
    (its time, server id, binlog and server version), or None when it is the same file's.

    The server re-sends it with log_pos 0, the in-use flag and the created time cleared and a new
    checksum; the header's time and server id and the versions stay the file's own.
    """
    if len(archived) < 19 + 52 or len(streamed) < 19 + 52:
        return None
    for what, lo, hi in (("time", 0, 4), ("server id", 5, 9), ("binlog/server version", 19, 19 + 52)):
        if archived[lo:hi] != streamed[lo:hi]:
            return (f"its FORMAT_DESCRIPTION's {what} differs ({streamed[lo:hi].rstrip(bytes(1))!r} from the server, "
                    f"{archived[lo:hi].rstrip(bytes(1))!r} archived)")
    return None


def continuation_mismatch(raw: bytes, type_code: int, checksum_len: int, last_gtid: str) -> str | None:
    """Why a file started at byte 4 after an archived closed file does not continue it, or None.

    Its PREVIOUS_GTIDS (MySQL) must hold the archive's last GTID; its GTID_LIST (MariaDB) must name
    that GTID's domain at the same or a later sequence number. A file of a reset or different server
    under the expected name fails this (the FDE check only covers a resume in the middle of a file).
    """
    from binlog_parser.constants import EventType
    from binlog_parser.gtid import GtidSet
    from binlog_parser.replication import gtid_list_state, parse_event

    try:
        if type_code == EventType.PREVIOUS_GTIDS and ":" in last_gtid:
            have, _tagged = GtidSet.decode(raw[19:len(raw) - checksum_len])
            return None if have.contains(last_gtid) else f"its PREVIOUS_GTIDS ({have}) lacks {last_gtid}"
        if type_code == EventType.MARIA_GTID_LIST and last_gtid.count("-") == 2:
            domain, _server, seq = last_gtid.split("-")
            state = gtid_list_state(parse_event(raw)) or ""
            seqs = [int(p.split("-")[2]) for p in state.split(",") if p and p.split("-")[0] == domain]
            return None if seqs and max(seqs) >= int(seq) else f"its GTID_LIST ({state or 'empty'}) is before {last_gtid}"
    except (ValueError, IndexError, BinlakeError) as exc:
        return f"its GTID state is unreadable ({exc})"
    return None
