"""The archiver's files: the open binlog (appended event by event), its spool, uploads and resume.

Two destinations, one code path. A local folder is written in place (the open file is the archive
file). An object store (S3) cannot append, so the open file lives in a local spool folder and is
(re-)uploaded whole under its real name at a transaction boundary when ``upload_bytes`` new bytes or
``upload_interval_s`` seconds have passed; discovery already treats an object with no closing
ROTATE/STOP as still open. A closed file is uploaded whole, verified (size + MD5 ETag of a single-part
put, else a re-read compared by sha256) and only then removed from the spool.

Resume (after kill -9, a lost connection or a server restart) reads the archiver's own files: the
spool (or the folder) and else the last object in the store (by number: ``binlog.1000000`` comes
after ``binlog.999999``). A torn tail is cut back to the last complete transaction; a closed file
resumes at the start of the file its ROTATE names.

Nothing the server sends chooses a path: a file name from a ROTATE must be a plain
``basename.NNNNNN`` (:func:`check_binlog_name`), and every write of an object is conditional on
the ETag this archiver last saw for it (``If-Match``; ``If-None-Match: *`` for a new one), so a
second, lagging archiver of the same destination cannot put a shorter prefix over a longer object.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from botocore.exceptions import ClientError

from binlake.archive.errors import ArchiveConflictError, ArchiveFileError, UnsafeBinlogNameError
from binlake.discovery.series import series_sort_key
from binlake.lake.storage import LocalObjectStore, ObjectInfo, ObjectNotFound, ObjectStore
from binlog_parser.constants import BINLOG_MAGIC, LOG_EVENT_BINLOG_IN_USE_F, EventType
from binlog_parser.framing import event_size_at
from binlog_parser.replication import (
    EVENT_HEADER_LEN,
    StreamEvent,
    TransactionTracker,
    checksum_len_of_fde,
    gtid_list_state,
    gtid_of,
    parse_event,
)

log = logging.getLogger(__name__)

#: a server's binlog file name: basename + "." + at least 6 digits (binlog.000042)
BINLOG_NAME = re.compile(r"^(?P<base>[^/]+)\.(?P<num>\d{6,})$")
#: what a name the server sends may be: the server's own pattern (``<basename>.<6 to 10 digits>``,
#: ``log-bin``'s base name being letters, digits, ``_``, ``-`` and inner dots) and no more
SAFE_BINLOG_NAME = re.compile(r"^(?P<base>[A-Za-z0-9_][A-Za-z0-9_.-]*)\.(?P<num>[0-9]{6,10})$")
#: a file name component longer than this is no server's binlog (Linux's NAME_MAX is 255)
MAX_BINLOG_NAME_LEN = 200
_GTID_TYPES = frozenset({EventType.GTID, EventType.ANONYMOUS_GTID, EventType.GTID_TAGGED, EventType.MARIA_GTID})
_FDE_FLAGS_OFFSET = 4 + 17  # magic + (timestamp 4, type 1, server id 4, size 4, log_pos 4)


def check_binlog_name(name: str, where: str = "the server's ROTATE event") -> str:
    """``name`` when it is a plain binlog file name (``binlog.000042``); else UnsafeBinlogNameError.

    Why: the name comes from the network (a ROTATE event) and becomes a local path and an object
    key; ``../x``, ``/etc/x``, a NUL or a 5,000-byte name must never reach ``open()``.
    """
    shown = repr(name) if len(name) <= 120 else f"{name[:60]!r}... ({len(name)} characters)"
    if (len(name) > MAX_BINLOG_NAME_LEN or ".." in name or not SAFE_BINLOG_NAME.match(name)
            or not name.isascii()):
        raise UnsafeBinlogNameError(
            f"{where} names the binlog file {shown}, which is not a plain binlog file name "
            f"(basename.NNNNNN: letters, digits, '_', '-', '.', at most {MAX_BINLOG_NAME_LEN} characters, "
            "no path): refusing to write it")
    return name


def binlog_sort_key(name: str) -> tuple[str, str, int, str]:
    """Numbered files in number order (``binlog.999999`` < ``binlog.1000000``), never text order."""
    return series_sort_key(name)


def next_binlog_name(name: str) -> str:
    """The file the server opens after ``name`` (same basename, number + 1, same width)."""
    m = BINLOG_NAME.match(name)
    if not m:
        raise ArchiveFileError(f"{name!r} is not a binlog file name (basename.NNNNNN)")
    num = m.group("num")
    return f"{m.group('base')}.{int(num) + 1:0{len(num)}d}"


@dataclass(frozen=True)
class FileScan:
    """What an archived binlog holds: where its last complete transaction ends and whether it is closed."""

    name: str
    size: int
    boundary: int  # byte offset after the last complete transaction (4: only the magic)
    closed: bool  # ends with the server's ROTATE or STOP
    next_file: str | None  # the file to continue with when closed
    last_gtid: str | None
    events: int


def scan_binlog_bytes(name: str, data: bytes) -> FileScan:
    """Walk the event headers of an archived file (possibly torn at the end)."""
    if len(data) < 4 or data[:4] != BINLOG_MAGIC:
        return FileScan(name, len(data), 0, False, None, None, 0)
    tracker = TransactionTracker()
    offset = boundary = 4
    closed, next_file, last_gtid, events = False, None, None, 0
    while offset + EVENT_HEADER_LEN <= len(data):
        size = event_size_at(data, offset) or 0
        if size < EVENT_HEADER_LEN or offset + size > len(data):
            break
        event = parse_event(data[offset:offset + size])
        if event.type_code in _GTID_TYPES:
            boundary = offset  # a GTID always starts a transaction
        offset += size
        events += 1
        last_gtid = gtid_of(event) or last_gtid or gtid_list_state(event)
        if tracker.observe(event):
            boundary = offset
        if event.type_code == EventType.ROTATE:
            closed, next_file = True, event.rotate_target(tracker.checksum_len)[0]
        elif event.type_code == EventType.STOP:
            closed, next_file = True, next_binlog_name(name)
    return FileScan(name, len(data), boundary, closed, next_file, last_gtid, events)


@dataclass(frozen=True)
class ResumePoint:
    """Where to ask the server to continue: ``position`` in ``file`` (4: the file starts afresh)."""

    file: str
    position: int
    last_gtid: str | None = None


class BinlogFileWriter:
    """The open binlog file in the spool/folder: appends events, fsyncs and cuts at boundaries."""

    def __init__(self, path: Path, fsync_interval_s: float = 0.0) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        exists = path.exists()
        self._fh = open(path, "r+b" if exists else "w+b")  # noqa: SIM115 - lives as long as the file is open
        self._fh.seek(0, os.SEEK_END)
        self.size = self._fh.tell()
        if self.size == 0:
            self._fh.write(BINLOG_MAGIC)
            self.size = 4
        self.boundary = self.size
        self.fsync_interval_s = fsync_interval_s
        self._last_fsync = 0.0
        self.tracker = TransactionTracker()
        #: the file's FORMAT_DESCRIPTION as archived (None until written): a resumed dump must match it
        self.fde: bytes | None = None
        if self.size > 4 + EVENT_HEADER_LEN:  # resumed: the file's FDE says whether events carry CRC32
            self._fh.seek(4)
            head = self._fh.read(EVENT_HEADER_LEN)
            self.fde = head + self._fh.read((event_size_at(head, 0) or EVENT_HEADER_LEN) - EVENT_HEADER_LEN)
            self.tracker.checksum_len = checksum_len_of_fde(self.fde)
            self._fh.seek(0, os.SEEK_END)

    @property
    def name(self) -> str:
        return self.path.name

    def continues(self, event: StreamEvent) -> bool:
        """True when ``event`` is the next on-disk event of this file (its log_pos is our end + size).

        Raises when the server's position does not fit: the archive would get a hole or an overlap.
        """
        if event.is_artificial:
            return False
        expected = self.size + event.event_size
        if event.log_pos != expected:
            raise ArchiveFileError(
                f"{self.name}: the server sent an event ending at byte {event.log_pos} but the archived "
                f"file is {self.size} bytes long (expected {expected}): the stream does not continue "
                f"the file")
        return True

    def append(self, event: StreamEvent, now: float) -> bool:
        """Append one on-disk event; True at a transaction boundary (then fsynced when due)."""
        raw = event.raw
        if event.type_code in _GTID_TYPES:
            self.boundary = self.size  # a GTID always starts a transaction
        if event.type_code == EventType.FORMAT_DESCRIPTION and self.size == 4:
            raw = _with_in_use_flag(raw, True)  # as the server's own open file has it
            self.fde = raw
        self._fh.write(raw)
        self.size += len(raw)
        if not self.tracker.observe(event):
            return False
        self.boundary = self.size
        if now - self._last_fsync >= self.fsync_interval_s:
            self.sync(now)
        return True

    def sync(self, now: float) -> None:
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._last_fsync = now

    def close(self, closed_by_server: bool) -> None:
        """Close; a file the server closed gets its FDE in-use flag cleared, as the server does.

        The FDE's CRC32 does not cover that flag (the server computes it with the flag clear), so
        clearing it leaves the checksum valid and the bytes equal to the server's closed file.
        """
        self._fh.flush()
        if closed_by_server:
            _clear_in_use_flag(self._fh)
        os.fsync(self._fh.fileno())
        self._fh.close()

    def read_until_boundary(self) -> bytes:
        self._fh.flush()
        with open(self.path, "rb") as fh:
            return fh.read(self.boundary)


def _clear_in_use_flag(fh: BinaryIO) -> None:
    """Clear LOG_EVENT_BINLOG_IN_USE_F in the FDE of an open binlog file (idempotent)."""
    fh.seek(_FDE_FLAGS_OFFSET)
    raw = fh.read(2)
    if len(raw) == 2:
        (flags,) = struct.unpack("<H", raw)
        if flags & LOG_EVENT_BINLOG_IN_USE_F:
            fh.seek(_FDE_FLAGS_OFFSET)
            fh.write(struct.pack("<H", flags & ~LOG_EVENT_BINLOG_IN_USE_F))
            fh.flush()
    fh.seek(0, os.SEEK_END)


def finish_closed_file(path: Path) -> None:
    """A file that ends with the server's ROTATE/STOP but was not closed by us (kill -9 between the
    last event and the close): clear its in-use flag as the close would have, and make it durable."""
    with open(path, "r+b") as fh:
        _clear_in_use_flag(fh)
        os.fsync(fh.fileno())


def _with_in_use_flag(raw: bytes, in_use: bool) -> bytes:
    (flags,) = struct.unpack_from("<H", raw, 17)
    flags = flags | LOG_EVENT_BINLOG_IN_USE_F if in_use else flags & ~LOG_EVENT_BINLOG_IN_USE_F
    return raw[:17] + struct.pack("<H", flags) + raw[19:]


def truncate_to(path: Path, size: int) -> None:
    """Cut a torn tail (or the whole file when ``size`` is 0) and make the cut durable."""
    with open(path, "r+b") as fh:
        fh.truncate(size)
        fh.flush()
        os.fsync(fh.fileno())


def conditional_put(store: ObjectStore, name: str, data: bytes, expected_etag: str | None) -> str:
    """Put ``data`` under ``name`` only if the object is still ``expected_etag`` (``If-Match``), or
    absent when that is None (``If-None-Match: *``); the new ETag. ArchiveConflictError otherwise.

    Why: a second archiver of the same destination (a lagging standby, a restarted twin) must never
    replace a longer, verified object with the shorter prefix it holds.
    """
    if expected_etag:
        etag = store.put_if_match(name, data, expected_etag)
    else:
        etag = store.put_if_absent(name, data)
    if etag is None:
        raise ArchiveConflictError(
            f"{store.root_uri}{name}: not written, the object is not the one this archiver last wrote "
            f"(expected {'ETag ' + expected_etag if expected_etag else 'no object: a new file'}, the store "
            "refused the conditional write): another archiver writes this destination, or the file was "
            "archived before (a different server or series)")
    return etag


def upload_verified(store: ObjectStore, name: str, data: bytes, expected_etag: str | None = None,
                    conditional: bool = False) -> str:
    """Put ``data`` under ``name`` (``conditional``: only over ``expected_etag``, see
    :func:`conditional_put`) and prove the store holds exactly it (size, then MD5 ETag of a
    single-part put or, when the ETag is not an MD5, a re-read compared by sha256); the ETag."""
    if conditional:
        etag = conditional_put(store, name, data, expected_etag)
        info = store.head(name)
        if etag and info.etag != etag:
            raise ArchiveConflictError(f"{name}: replaced by another writer right after this archiver's upload "
                                       f"(ETag {info.etag}, ours {etag})")
    else:
        info = store.put(name, data)
    if info.size != len(data):
        raise ArchiveFileError(f"upload of {name} stored {info.size} bytes, expected {len(data)}")
    if info.etag == hashlib.md5(data).hexdigest():
        return info.etag
    if hashlib.sha256(store.read_all(name)).digest() != hashlib.sha256(data).digest():
        raise ArchiveFileError(f"upload of {name}: the stored bytes differ from the spool file")
    return info.etag


def _masked(data: bytes) -> bytes:
    """``data`` with the FDE in-use flag cleared: an open copy and a closed copy of one file compare equal."""
    if len(data) <= _FDE_FLAGS_OFFSET:
        return data
    return data[:_FDE_FLAGS_OFFSET] + bytes((data[_FDE_FLAGS_OFFSET] & ~LOG_EVENT_BINLOG_IN_USE_F & 0xFF,)) \
        + data[_FDE_FLAGS_OFFSET + 1:]


class ArchiveFiles:
    """The archive of one source: its store, the spool (S3) or folder (local) and the open file."""

    def __init__(self, store: ObjectStore, spool_dir: Path, upload_bytes: int = 8 << 20,
                 upload_interval_s: float = 10.0, fsync_interval_s: float = 0.0) -> None:
        self.store = store
        self.in_place = isinstance(store, LocalObjectStore)
        self.work_dir = store.root if isinstance(store, LocalObjectStore) else spool_dir
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.upload_bytes = upload_bytes
        self.upload_interval_s = upload_interval_s
        self.fsync_interval_s = fsync_interval_s
        self.current: BinlogFileWriter | None = None
        self._uploaded_size = 0
        self._uploaded_at = 0.0
        self.files_closed = 0
        #: the ETag this archiver last wrote (or adopted) per object: every re-upload is conditional on it
        self.etags: dict[str, str] = {}
        #: the series' base name (``binlog`` of ``binlog.000042``): resume only follows files of it
        self.base: str | None = None

    # --- resume ---------------------------------------------------------------------------------

    def _in_series(self, name: str) -> bool:
        m = BINLOG_NAME.match(name)
        return bool(m) and (self.base is None or (m is not None and m.group("base") == self.base))

    def _work_files(self) -> list[Path]:
        return sorted((p for p in self.work_dir.iterdir() if p.is_file() and self._in_series(p.name)),
                      key=lambda p: binlog_sort_key(p.name))

    def resume_point(self) -> ResumePoint | None:
        """Where to continue, from the archiver's own files; None when the archive is empty."""
        local = self._work_files()
        if not self.in_place:
            for path in local:  # closed spool files: a crash between close and upload
                scan = scan_binlog_bytes(path.name, path.read_bytes())
                if scan.closed:
                    finish_closed_file(path)
                    self._upload_closed(path)
            local = self._work_files()
        if local:
            if not self.in_place:
                self._reconcile_spool(local[-1])
            return self._resume_from_local(local[-1])
        if self.in_place:
            return None
        objects = sorted((o for o in self.store.list() if self._in_series(o.name)),
                         key=lambda o: binlog_sort_key(o.name))
        if not objects:
            return None
        return self._resume_from_object(objects[-1])

    def _resume_from_object(self, obj: ObjectInfo) -> ResumePoint:
        name = obj.name
        data = self.store.read_all(name)
        self.etags[name] = obj.etag
        scan = scan_binlog_bytes(name, data)
        if scan.closed and scan.next_file:
            if data[_FDE_FLAGS_OFFSET] & LOG_EVENT_BINLOG_IN_USE_F:  # uploaded before a kill -9 closed it
                (self.work_dir / name).write_bytes(data)
                finish_closed_file(self.work_dir / name)
                self._upload_closed(self.work_dir / name)
            return ResumePoint(scan.next_file, 4, scan.last_gtid)
        (self.work_dir / name).write_bytes(data)  # continue the open object in the spool
        return self._resume_from_local(self.work_dir / name)

    def _object(self, name: str) -> ObjectInfo | None:
        try:
            return self.store.head(name)
        except ObjectNotFound:
            return None

    def _is_prefix(self, obj: ObjectInfo, data: bytes) -> bool | None:
        """Whether the object's bytes start ``data`` (True), continue beyond it (None: ``data`` is a
        prefix of the object) or differ (False); the in-use flag ignored. MD5 ETag first, else a read."""
        if obj.size <= len(data) and obj.etag in (hashlib.md5(data[:obj.size]).hexdigest(),
                                                  hashlib.md5(_masked(data[:obj.size])).hexdigest()):
            return True
        theirs = _masked(self.store.read_all(obj.name))
        mine = _masked(data)
        if len(theirs) <= len(mine):
            return mine[:len(theirs)] == theirs
        return None if theirs[:len(mine)] == mine else False

    def _expected_etag(self, name: str, data: bytes) -> str | None:
        """The ETag to write ``name`` over: the one this process wrote, else the object's when it holds
        a prefix of ``data`` (this archiver's upload before a restart); None when there is no object."""
        if name in self.etags:
            return self.etags[name]
        obj = self._object(name)
        if obj is None:
            return None
        if self._is_prefix(obj, data) is not True:
            raise ArchiveConflictError(
                f"{self.store.root_uri}{name} ({obj.size} bytes, ETag {obj.etag}) is not a prefix of this "
                f"archiver's copy ({len(data)} bytes): another archiver or another series wrote it; not "
                "overwritten")
        return obj.etag

    def _reconcile_spool(self, path: Path) -> None:
        """The open spool file against its object: the object may hold more (another archiver of this
        destination went further while this one was down): continue from the object then."""
        data = path.read_bytes()
        obj = self._object(path.name)
        if obj is None:
            return
        relation = self._is_prefix(obj, data)
        if relation is None:
            log.warning("%s: the archive's object (%d bytes) is longer than the spool copy (%d bytes): "
                        "continuing from the object", path.name, obj.size, len(data))
            path.write_bytes(self.store.read_all(path.name))
        elif relation is False:
            raise ArchiveConflictError(
                f"{self.store.root_uri}{path.name} ({obj.size} bytes) differs from the spool copy {path} "
                f"({len(data)} bytes): another archiver or another series wrote it; not overwritten")
        self.etags[path.name] = obj.etag

    def _resume_from_local(self, path: Path) -> ResumePoint:
        scan = scan_binlog_bytes(path.name, path.read_bytes())
        if scan.closed and scan.next_file:
            finish_closed_file(path)
            return ResumePoint(scan.next_file, 4, scan.last_gtid)
        if scan.boundary < scan.size:
            log.warning("%s: cutting a torn tail of %d bytes at offset %d (last complete transaction)",
                        path.name, scan.size - scan.boundary, scan.boundary)
            truncate_to(path, scan.boundary)
        return ResumePoint(path.name, max(scan.boundary, 4), scan.last_gtid)

    def retire(self, name: str) -> None:
        """Leave ``name`` as it is archived, never to be continued (a skip forward with --start-file, a
        new series): its complete transactions are uploaded and the spool copy dropped."""
        if self.current is not None and self.current.name == name:
            self.detach()
        path = self.work_dir / name
        if self.in_place or not path.is_file():
            return
        data = path.read_bytes()
        data = data[:scan_binlog_bytes(name, data).boundary]
        if len(data) > 4:
            self.etags[name] = upload_verified(self.store, name, data, self._expected_etag(name, data), True)
        path.unlink()
        log.info("%s: left as archived (%d bytes); the archive continues elsewhere", name, len(data))

    def abandon(self, name: str) -> None:
        """Drop ``name``, a file this process started afresh and found not to belong to the archive
        (its object too, only while it is still the version this archiver wrote)."""
        if self.current is not None and self.current.name == name:
            self.detach()
        (self.work_dir / name).unlink(missing_ok=True)
        etag = self.etags.pop(name, None)
        if etag and not self.in_place:
            try:
                deleted = self.store.delete_if_match(name, etag)
            except ClientError as exc:
                log.warning("%s: left in the archive (%s)", name, exc)
                return
            if not deleted:
                log.warning("%s: left in the archive (no longer the version this archiver wrote)", name)

    # --- streaming ------------------------------------------------------------------------------

    def open(self, name: str, position: int) -> None:
        """Make ``name`` the open file; the server will continue it at ``position``."""
        check_binlog_name(name)
        if self.current is not None and self.current.name == name:
            return
        if self.current is not None:
            # The server moved on without a ROTATE/STOP in this file (it crashed): keep it as is.
            self.close(closed_by_server=False)
        path = self.work_dir / name
        if position <= 4:
            self._check_new_file(name, path)
        if position <= 4 and path.exists():
            truncate_to(path, 0)
        self.current = BinlogFileWriter(path, self.fsync_interval_s)
        if self.current.size != max(position, 4):
            raise ArchiveFileError(
                f"{name}: the server continues at byte {position} but the archived file is "
                f"{self.current.size} bytes long")
        self._uploaded_size, self._uploaded_at = 0, 0.0
        if self.base is None:
            m = SAFE_BINLOG_NAME.match(name)
            self.base = m.group("base") if m else None

    def _check_new_file(self, name: str, path: Path) -> None:
        """A file started afresh must not replace a closed archived one (a new series that reuses the
        old one's names, a server that went back after RESET MASTER)."""
        if self.in_place:
            closed = path.is_file() and scan_binlog_bytes(name, path.read_bytes()).closed
        else:
            closed = name not in self.etags and self._object(name) is not None
        if closed:
            raise ArchiveConflictError(
                f"{self.store.root_uri}{name} is already archived: the server starts that file afresh, which "
                "would overwrite it (a different server or a RESET MASTER reusing the names); not overwritten")

    def write(self, event: StreamEvent, now: float) -> bool:
        """Append an on-disk event to the open file (False for events that are not on disk)."""
        cur = self.current
        if cur is None or not cur.continues(event):
            return False
        boundary = cur.append(event, now)
        if event.type_code in (EventType.ROTATE, EventType.STOP):
            self.close(closed_by_server=True)  # uploads the whole closed file (S3)
        elif boundary and not self.in_place and (
                cur.boundary - self._uploaded_size >= self.upload_bytes
                or now - self._uploaded_at >= self.upload_interval_s):
            self._upload_open(now)
        return True

    def _upload_open(self, now: float) -> None:
        assert self.current is not None
        name = self.current.name
        data = self.current.read_until_boundary()
        self.etags[name] = conditional_put(self.store, name, data, self._expected_etag(name, data))
        self._uploaded_size, self._uploaded_at = len(data), now

    def close(self, closed_by_server: bool) -> None:
        """Close the open file; on S3 upload it whole, verify it and drop the spool copy."""
        cur = self.current
        if cur is None:
            return
        self.current = None
        cur.close(closed_by_server)
        self.files_closed += 1
        if not self.in_place:
            self._upload_closed(cur.path)

    def _upload_closed(self, path: Path) -> None:
        data = path.read_bytes()
        self.etags[path.name] = upload_verified(self.store, path.name, data,
                                                self._expected_etag(path.name, data), conditional=True)
        path.unlink()
        log.info("archived closed binlog %s", path.name)

    def flush(self, now: float, force: bool = False) -> None:
        """fsync the open file; on S3 upload its complete transactions when due (or ``force``)."""
        cur = self.current
        if cur is None:
            return
        cur.sync(now)
        new_bytes = cur.boundary - self._uploaded_size
        if not self.in_place and new_bytes > 0 and (
                force or new_bytes >= self.upload_bytes or now - self._uploaded_at >= self.upload_interval_s):
            self._upload_open(now)

    def detach(self) -> None:
        """Forget the open file without closing it (connection lost: resume re-reads it)."""
        if self.current is not None:
            self.current.sync(0.0)
            self.current._fh.close()
            self.current = None
