"""Discovery: which archived binlogs of a source are closed (rotated) and ready to ingest.

Plain Python over :mod:`binlake.lake.storage` (boto3 ranged GETs for S3, seeks for a local folder);
it never downloads a whole object. Per object it reads

* the **head** (first :data:`HEAD_BYTES`, extended only when the FORMAT_DESCRIPTION /
  PREVIOUS_GTIDS / GTID_LIST do not fit): magic, FORMAT_DESCRIPTION (server, checksum
  algorithm, the ``LOG_EVENT_BINLOG_IN_USE_F`` flag) and the PREVIOUS_GTIDS (MySQL) or
  GTID_LIST (MariaDB);
* the **tail** (last :data:`TAIL_BYTES`, extended to :data:`MAX_TAIL_BYTES` only when no
  event ends exactly there, e.g. a ROTATE with an over-long name): the closing event,
  found as the ROTATE or STOP header whose ``event_size`` ends exactly at end of object,
  decoded with ``binlog_parser`` and trusted only when its CRC32 matches (files with
  checksums) or its ``log_pos`` equals the object size (files without).

What those bytes say is :mod:`binlog_parser.probe`'s (sans-I/O: :func:`parse_head`,
:func:`find_closing_event`); this module fetches the ranges it asks for and classifies.

Then it follows the chain: a file closed by ROTATE names its successor; one closed by STOP
(clean shutdown) is followed by the next number of its series (``binlog.000041`` ->
``binlog.000042``); a file with neither, or with the in-use flag set, is still being written
and is left for the next run. It reports, and never guesses:

==========================  ========  ==========================================================
issue kind                  severity  meaning
==========================  ========  ==========================================================
``missing_successor``       error     a file names a successor that is not in storage while later
                                      files exist (a gap in the archive)
``invalid_successor``       error     the named successor exists but is not a readable binlog
``fork``                    error     two files claim the same successor (a copy under another
                                      name, two servers writing one series)
``chain_restart``           error     a file nobody points at in the middle of the archive
                                      (RESET, a new server, a restore)
``hostile_rotate``          error     a ROTATE names something other than a plain file name in
                                      the same prefix (``../x``, ``a/b``, empty, control bytes,
                                      a name over 255 bytes)
``unclosed_file``           error     a file without ROTATE/STOP (or in use) with later files
                                      after it (server crash, truncated upload)
``cycle``                   error     files only reachable through a successor loop
``read_error``              error     the object could not be read (after retries)
``corrupt_binlog``          error     binlog magic present but the head does not decode
``changed_object``          warning   an ingested object has a new etag/size (ingested again; with
                                      ``on_replaced="fail"``: an error, and
                                      :class:`ReplacedObjectError` is raised)
``not_a_binlog``            warning   an object without the binlog magic (index files, notes)
``nested_object``           info      an object in a sub-folder of the prefix (not this chain)
``open_file``               info      the last file is still being written (next run), or an
                                      empty object at the tip (an upload in progress)
``awaiting_successor``      info      the newest closed file's successor is not archived yet
==========================  ========  ==========================================================

Results are plain dataclasses that turn into JSON for Airflow's XCom (:meth:`as_dict`).
No credentials are handled here: stores come from :func:`binlake.lake.storage.open_object_store`.
"""

from __future__ import annotations

import concurrent.futures
import logging
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from binlake.discovery.chain import follow_chain
from binlake.discovery.series import next_in_series, parse_series_name, series_sort_key
from binlake.errors import BinlakeError
from binlake.lake.storage import ObjectChangedError, ObjectInfo, ObjectNotFound, ObjectStore
from binlog_parser import (
    BinlogError,
    DecodeContext,
    NotABinlogError,
)
from binlog_parser.probe import HeadFacts, HeadNeedsMore, find_closing_event, parse_head, rotate_name_length

log = logging.getLogger(__name__)

HEAD_BYTES = 4096
TAIL_BYTES = 512
#: When no closing event ends within the first tail read, the tail is read again this far back:
#: a ROTATE is 19-byte header + 8-byte position + name + CRC32, and a name longer than MySQL's
#: FN_REFLEN (512) is hostile but must still be found and reported as what it is (not as a file
#: without a closing event). Bounded: a "name" beyond this is not looked for.
MAX_TAIL_BYTES = 64 << 10
#: Longest file name followed (NAME_MAX of common file systems and of S3 key segments we accept).
MAX_NAME_BYTES = 255
#: A head larger than this (a PREVIOUS_GTIDS of many thousand UUIDs) is refused.
MAX_HEAD_BYTES = 16 << 20
#: How many times an object replaced while discovery reads its head and tail is looked at again
#: (each time from a fresh HEAD: the new version's ETag and size) before it is left for the next
#: run as a file still being written.
CHANGED_RETRIES = 2

#: What discovery does with an ingested object now listed with another etag/size: ingest it
#: again (its rows are replaced; a warning) or refuse (:class:`ReplacedObjectError`). An archive
#: should never rewrite a closed binlog, so ``fail`` suits an archive that must be immutable;
#: ``reingest`` (the default) suits one whose active file is re-uploaded until it is closed.
ON_REPLACED_REINGEST = "reingest"
ON_REPLACED_FAIL = "fail"
ON_REPLACED_POLICIES = (ON_REPLACED_REINGEST, ON_REPLACED_FAIL)

SEVERITY_ERROR = "error"
SEVERITY_WARNING = "warning"
SEVERITY_INFO = "info"

_PLAIN_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._+@-]{0,254}$")


# --------------------------------------------------------------------------- results


class ReplacedObjectError(BinlakeError):
    """Ingested objects were replaced with different content and the policy is ``fail``.

    ``discovery`` is the full result (issues included), ``replaced`` the (file, old etag, old
    size, new etag, new size) of each replaced object.
    """

    def __init__(self, discovery: SourceDiscovery,
                 replaced: list[tuple[str, str | None, int | None, str, int]]) -> None:
        listed = "; ".join(f"{name}: etag {oe} size {osz} -> etag {ne} size {nsz}"
                           for name, oe, osz, ne, nsz in replaced)
        super().__init__(f"source {discovery.source}: {len(replaced)} ingested object(s) replaced with "
                         f"different content (policy on_replaced_object = 'fail'): {listed}")
        self.discovery = discovery
        self.replaced = replaced


@dataclass
class Issue:
    """Something discovery reports instead of guessing."""

    source: str
    kind: str
    severity: str
    file: str | None
    detail: str

    def __str__(self) -> str:
        where = f" {self.file}" if self.file else ""
        return f"[{self.severity}] {self.source}{where}: {self.kind}: {self.detail}"


@dataclass
class DiscoveredFile:
    """One object of a source prefix, as far as its head and tail tell.

    ``state``: ``closed`` (ends with ROTATE/STOP, not in use: ingestible), ``open`` (still being
    written), ``rejected`` (hostile ROTATE), ``not_binlog``, ``corrupt``, ``unreadable``, ``nested``.
    ``ingest``: ``new``, ``changed`` (etag/size differ from meta.ingested_files), ``retry`` (last
    ingestion failed), ``ingested`` (unchanged: skipped) or ``None`` (not ingestible).
    """

    source: str
    file: str
    uri: str
    size: int
    etag: str
    last_modified: float | None = None
    state: str = "closed"
    closing_event: str | None = None
    next_file: str | None = None        # ROTATE's name, or the series successor after STOP
    in_use: bool = False
    flavor: str | None = None           # 'mysql' / 'mariadb'
    server_id: int | None = None
    server_version: str | None = None
    binlog_version: int | None = None
    checksum: str | None = None         # 'CRC32' / 'OFF'
    previous_gtids: str | None = None   # PREVIOUS_GTIDS / GTID_LIST text as the decoder prints it
    create_timestamp: int | None = None
    chain_index: int | None = None      # position in the followed chain (0 = archive start)
    segment: int | None = None          # chain segment (a new one after each gap / restart)
    ingest: str | None = None
    head_bytes: int = 0
    tail_bytes: int = 0
    from_state: bool = False            # facts taken from meta state, nothing read
    detail: str = ""

    @property
    def closed(self) -> bool:
        return self.state == "closed"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def ingest_item(self) -> dict[str, Any]:
        """What the ingest job takes: source, file, uri, size, etag."""
        return {"source": self.source, "file": self.file, "uri": self.uri, "size": self.size, "etag": self.etag}


@dataclass
class SourceDiscovery:
    """Discovery of one source: every object, the issues, what to ingest, and what it cost."""

    source: str
    uri: str
    files: list[DiscoveredFile] = field(default_factory=list)
    issues: list[Issue] = field(default_factory=list)
    objects: int = 0
    bytes_read: int = 0
    seconds: float = 0.0

    @property
    def to_ingest(self) -> list[DiscoveredFile]:
        """Closed files not yet ingested (or changed, or failed before), in chain order."""
        todo = [f for f in self.files if f.closed and f.ingest in ("new", "changed", "retry")]
        return sorted(todo, key=_chain_sort_key)

    @property
    def closed_files(self) -> list[DiscoveredFile]:
        return sorted((f for f in self.files if f.closed), key=_chain_sort_key)

    @property
    def errors(self) -> list[Issue]:
        return [i for i in self.issues if i.severity == SEVERITY_ERROR]

    @property
    def chain_broken(self) -> bool:
        return bool(self.errors)

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source, "uri": self.uri, "objects": self.objects, "bytes_read": self.bytes_read,
            "seconds": round(self.seconds, 3),
            "files": [f.as_dict() for f in self.files],
            "issues": [asdict(i) for i in self.issues],
            "to_ingest": [f.ingest_item() for f in self.to_ingest],
        }

    def summary(self) -> str:
        states: dict[str, int] = {}
        for f in self.files:
            states[f.state] = states.get(f.state, 0) + 1
        st = ", ".join(f"{k}={v}" for k, v in sorted(states.items()))
        return (f"source {self.source}: {self.objects} objects ({st}); to ingest {len(self.to_ingest)}; "
                f"{len(self.errors)} error(s), {len(self.issues) - len(self.errors)} other issue(s); "
                f"{self.bytes_read} bytes read in {self.seconds:.2f}s")


@dataclass(frozen=True)
class KnownFile:
    """What ``meta.ingested_files`` (and ``meta.binlog_files``) say about an ingested object.

    With ``closing_event`` / ``next_file`` known and etag + size unchanged, discovery does not
    read the object again.
    """

    etag: str | None
    size: int | None
    status: str = "ok"
    closing_event: str | None = None
    next_file: str | None = None
    server_id: int | None = None
    flavor: str | None = None
    previous_gtids: str | None = None


# --------------------------------------------------------------------------- names


def plain_file_name_problem(name: str | None) -> str | None:
    """Why ``name`` is not a plain file name in the same prefix (None when it is fine)."""
    if name is None or name == "":
        return "empty file name"
    length = len(name.encode("utf-8", "surrogateescape"))
    if length > MAX_NAME_BYTES:
        return f"over-long file name ({length} bytes, limit {MAX_NAME_BYTES}): {name[:32]!r}..."
    if "/" in name or "\\" in name:
        return f"path separator in {name!r}"
    if name in (".", "..") or ".." in name:
        return f"relative path component in {name!r}"
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return f"control character in {name!r}"
    if not _PLAIN_NAME.match(name):
        return f"not a plain binlog file name: {name!r}"
    return None


def _chain_sort_key(f: DiscoveredFile) -> tuple:
    return (f.segment if f.segment is not None else 1 << 30,
            f.chain_index if f.chain_index is not None else 1 << 30, series_sort_key(f.file))


# --------------------------------------------------------------------------- reading one object


def inspect_object(store: ObjectStore, source: str, obj: ObjectInfo, *, head_bytes: int = HEAD_BYTES,
                   tail_bytes: int = TAIL_BYTES) -> DiscoveredFile:
    """Read the head and tail of one object (ranged reads only) and classify it.

    Every read is pinned to the listed ETag (``If-Match``; a local file's size + mtime), so
    the facts found (closing event, successor, GTIDs) are those of the version whose ETag and
    size discovery records and the plan hands to the decode step. An object replaced meanwhile
    is looked at again from a fresh HEAD (:data:`CHANGED_RETRIES` times), then left ``open``.
    """
    changed = None
    for _ in range(CHANGED_RETRIES + 1):
        try:
            return _inspect_version(store, source, obj, head_bytes=head_bytes, tail_bytes=tail_bytes)
        except ObjectChangedError as exc:
            log.info("%s: changed while discovery read it (%s); looking again", obj.uri, exc)
            changed = exc
            try:
                obj = store.head(obj.name)
            except ObjectNotFound:
                return _unread(source, obj, "unreadable", "object vanished between listing and reading")
            except Exception as head_exc:  # noqa: BLE001 - storage errors (after botocore's own retries)
                return _unread(source, obj, "unreadable", f"HEAD after a change: {type(head_exc).__name__}: "
                                                          f"{head_exc}")
    now = f"{changed.found}" if changed is not None and changed.found else "unknown"
    return _unread(source, obj, "open", f"replaced each of the {CHANGED_RETRIES + 1} times discovery read it "
                                        f"(ETag now {now}): still being written; left for the next run")


def _unread(source: str, obj: ObjectInfo, state: str, detail: str) -> DiscoveredFile:
    return DiscoveredFile(source=source, file=obj.name, uri=obj.uri, size=obj.size, etag=obj.etag,
                          last_modified=obj.last_modified, state=state, detail=detail)


def _inspect_version(store: ObjectStore, source: str, obj: ObjectInfo, *, head_bytes: int,
                     tail_bytes: int) -> DiscoveredFile:
    """:func:`inspect_object` for the version ``obj`` names (ObjectChangedError when it is gone)."""
    f = DiscoveredFile(source=source, file=obj.name, uri=obj.uri, size=obj.size, etag=obj.etag,
                       last_modified=obj.last_modified)
    if "/" in obj.name:
        f.state = "nested"
        f.detail = "object in a sub-folder of the source prefix"
        return f
    if obj.size == 0 and parse_series_name(obj.name).number is not None:
        # an S3 upload in progress may be listed empty: not closed yet (an empty file with later
        # files after it is still reported, as unclosed_file)
        f.state = "open"
        f.detail = "empty object (0 bytes): upload in progress, not closed yet"
        return f
    try:
        head, ctx, facts = _read_head(store, obj, f, head_bytes)
    except NotABinlogError as exc:
        f.state = "not_binlog"
        f.detail = exc.message
        return f
    except ObjectNotFound:
        f.state = "unreadable"
        f.detail = "object vanished between listing and reading"
        return f
    except ObjectChangedError:
        raise
    except BinlogError as exc:
        f.state = "corrupt"
        f.detail = str(exc)
        return f
    except Exception as exc:  # noqa: BLE001 - storage errors (after botocore's own retries)
        f.state = "unreadable"
        f.detail = f"{type(exc).__name__}: {exc}"
        return f

    f.in_use = facts.in_use
    f.flavor = facts.flavor
    f.server_id = facts.server_id
    f.server_version = facts.server_version
    f.binlog_version = facts.binlog_version
    f.checksum = facts.checksum
    f.previous_gtids = facts.previous_gtids
    f.create_timestamp = facts.create_timestamp
    try:
        closing = _read_closing_event(store, obj, f, head, ctx, facts.fde_end or 4, tail_bytes)
    except ObjectChangedError:
        raise
    except Exception as exc:  # noqa: BLE001 - storage errors (after botocore's own retries)
        f.state = "unreadable"
        f.detail = f"tail: {type(exc).__name__}: {exc}"
        return f
    name_bytes = None
    if closing is not None and closing[0] == "ROTATE":
        name_bytes = rotate_name_length(obj.size, closing[2], ctx)
    _classify_by_closing_event(f, obj, closing, name_bytes)
    return f


def _read_head(store: ObjectStore, obj: ObjectInfo, f: DiscoveredFile,
               head_bytes: int) -> tuple[bytes, DecodeContext, HeadFacts]:
    """Ranged reads from the start until the head events are complete (counted in ``f``)."""
    size = obj.size
    want = min(size, head_bytes)
    head = store.read_range(obj.name, 0, want, etag=obj.etag or None)
    f.head_bytes = len(head)
    while True:
        parsed = parse_head(head, size, obj.name)
        if not isinstance(parsed, HeadNeedsMore):
            ctx, facts = parsed
            return head, ctx, facts
        need = min(size, max(parsed.needed, len(head) + 1))
        if need <= len(head) or need > MAX_HEAD_BYTES:
            raise BinlogError(f"head needs {parsed.needed} bytes (limit {MAX_HEAD_BYTES})",
                              file=obj.name, offset=0)
        extra = store.read_range(obj.name, len(head), need, etag=obj.etag or None)
        f.head_bytes += len(extra)
        if not extra:
            raise BinlogError("object shorter than listed", file=obj.name, offset=len(head))
        head = head + extra


def _read_closing_event(store: ObjectStore, obj: ObjectInfo, f: DiscoveredFile, head: bytes,
                        ctx: DecodeContext, fde_end: int,
                        tail_bytes: int) -> tuple[str, str | None, int] | None:
    """The closing event from the tail (the head reused when it covers the end; counted in ``f``).

    First the last ``tail_bytes``; when no ROTATE/STOP ends exactly at the end there, the tail is
    extended back to :data:`MAX_TAIL_BYTES` (only the missing bytes are read), so that the last
    event is found by its own size even when a hostile ROTATE carries a name of hundreds of bytes.
    """
    size = obj.size
    window = min(tail_bytes, size)
    tail = b""
    while True:
        start = size - window
        if size <= len(head):
            tail = head[start:size]
        else:
            missing_end = size - len(tail)
            more = store.read_range(obj.name, start, missing_end, etag=obj.etag or None)
            f.tail_bytes += len(more)
            tail = more + tail
        closing = find_closing_event(tail, start, size, ctx, obj.name, min_pos=fde_end)
        if closing is not None or window >= min(size, MAX_TAIL_BYTES):
            return closing
        window = min(size, MAX_TAIL_BYTES)


def _classify_by_closing_event(f: DiscoveredFile, obj: ObjectInfo,
                               closing: tuple[str, str | None, int] | None,
                               name_bytes: int | None = None) -> None:
    """closed / open / rejected, from how the object ends and its in-use flag (``name_bytes``:
    the ROTATE name's length on disk, which may exceed the decoded name)."""
    if closing is None:
        f.state = "open"
        f.detail = "no ROTATE/STOP at the end: still being written (or cut)"
        return
    kind, next_name, _pos = closing
    f.closing_event = kind
    if kind == "ROTATE":
        problem = plain_file_name_problem(next_name)
        if name_bytes is not None and name_bytes > MAX_NAME_BYTES and next_name is not None:
            problem = (f"over-long file name ({name_bytes} bytes, limit {MAX_NAME_BYTES}): "
                       f"{next_name[:32]!r}...")
        f.next_file = next_name
        if problem:
            f.state = "rejected"
            f.detail = f"ROTATE names a non-plain file: {problem}"
            return
    else:
        f.next_file = next_in_series(obj.name)
    if f.in_use:
        f.state = "open"
        f.detail = f"in-use flag set in FORMAT_DESCRIPTION (ends with {kind})"
        return
    f.state = "closed"


def _from_known(source: str, obj: ObjectInfo, known: KnownFile) -> DiscoveredFile:
    return DiscoveredFile(source=source, file=obj.name, uri=obj.uri, size=obj.size, etag=obj.etag,
                          last_modified=obj.last_modified, state="closed", closing_event=known.closing_event,
                          next_file=known.next_file if known.closing_event == "ROTATE" else next_in_series(obj.name),
                          server_id=known.server_id, flavor=known.flavor, previous_gtids=known.previous_gtids,
                          from_state=True, ingest="ingested")


# --------------------------------------------------------------------------- the chain


def _classify_ingest(f: DiscoveredFile, known: KnownFile | None) -> str:
    if known is None:
        return "new"
    if known.status == "failed":
        return "retry"
    if (known.etag or None) != (f.etag or None) or (known.size is not None and known.size != f.size):
        return "changed"
    return "ingested"


@dataclass
class _Chain:
    """What :func:`build_chain` works on: the readable binlogs in series order, and its findings."""

    source: str
    by_name: dict[str, DiscoveredFile]
    binlogs: dict[str, DiscoveredFile]
    ordered: list[str]
    issues: list[Issue] = field(default_factory=list)
    explained_roots: set[str] = field(default_factory=set)

    def report(self, kind: str, severity: str, file: str | None, detail: str) -> None:
        self.issues.append(Issue(self.source, kind, severity, file, detail))

    def first_after(self, name: str, skip: str | None = None) -> str | None:
        """The first binlog of ``name``'s series after it (``skip`` aside), noted as a chain start
        the issue about ``name`` explains (no ``chain_restart`` of its own); None at the tip."""
        after = [n for n in self.later_files(name) if n != skip]
        if not after:
            return None
        self.explained_roots.add(after[0])
        return after[0]

    def later_files(self, name: str) -> list[str]:
        """Binlogs of the same series after ``name`` (by number)."""
        this = parse_series_name(name)
        out = []
        for n in self.ordered:
            other = parse_series_name(n)
            if (other.series == this.series and this.number is not None and other.number is not None
                    and other.number > this.number):
                out.append(n)
        return out


def build_chain(source: str, files: list[DiscoveredFile]) -> list[Issue]:
    """Follow the successor pointers; set ``chain_index``/``segment``; return the issues found."""
    by_name = {f.file: f for f in files if f.state != "nested"}
    binlogs = {n: f for n, f in by_name.items() if f.state in ("closed", "open", "rejected")}
    chain = _Chain(source, by_name, binlogs, sorted(binlogs, key=series_sort_key))
    succ = _successors(chain)
    preds: dict[str, list[str]] = {}
    for p, s in succ.items():
        preds.setdefault(s, []).append(p)
    for s, ps in sorted(preds.items()):
        if len(ps) > 1:
            chain.report("fork", SEVERITY_ERROR, s, f"{len(ps)} files claim {s} as their successor: {', '.join(sorted(ps))}")
            chain.explained_roots.update(ps)  # the extra claimant starts no chain of its own: reported once
    _report_missing_successors(chain, succ)
    _report_unclosed_files(chain)
    _walk_segments(chain, succ, preds)
    return chain.issues


def _successors(chain: _Chain) -> dict[str, str]:
    """The successor pointers of closed files (STOP without a number and hostile ROTATEs reported)."""
    succ: dict[str, str] = {}
    for n in chain.ordered:
        f = chain.binlogs[n]
        if f.state == "closed":
            if f.next_file:
                succ[n] = f.next_file
            elif f.closing_event == "STOP":
                chain.report("awaiting_successor", SEVERITY_WARNING, n,
                             "closed by STOP but its name has no number: the next file cannot be inferred")
        elif f.state == "rejected":
            chain.report("hostile_rotate", SEVERITY_ERROR, n, f"{f.detail}; file rejected, the name is not followed")
    return succ


def _report_missing_successors(chain: _Chain, succ: dict[str, str]) -> None:
    binlogs, by_name = chain.binlogs, chain.by_name
    for p, s in sorted(succ.items(), key=lambda kv: series_sort_key(kv[0])):
        how = "ROTATE" if binlogs[p].closing_event == "ROTATE" else "STOP (next in series)"
        if s in binlogs:
            continue
        if s in by_name:
            chain.report("invalid_successor", SEVERITY_ERROR, p,
                         f"successor {s} ({how}) is in storage but not a usable binlog: {by_name[s].state} "
                         f"({by_name[s].detail})")
            chain.first_after(p)
            continue
        nxt = chain.first_after(p, skip=s)
        if nxt:
            chain.report("missing_successor", SEVERITY_ERROR, p,
                         f"GAP: {s} is missing from storage (named by {how} in {p}; {nxt} follows)")
        else:
            chain.report("awaiting_successor", SEVERITY_INFO, p, f"{s} ({how}) not archived yet")


def _report_unclosed_files(chain: _Chain) -> None:
    """Open files: the tip is normal, an open file with later files is not."""
    for n in chain.ordered:
        f = chain.binlogs[n]
        if f.state != "open":
            continue
        nxt = chain.first_after(n)
        if nxt:
            chain.report("unclosed_file", SEVERITY_ERROR, n,
                         f"{f.detail}; but later files exist ({nxt}...): crash or truncated upload; not ingested")
        else:
            chain.report("open_file", SEVERITY_INFO, n, f"{f.detail}; left for the next run")
    for n in chain.ordered:
        if chain.binlogs[n].state == "rejected":
            chain.first_after(n)


def _walk_segments(chain: _Chain, succ: dict[str, str], preds: dict[str, list[str]]) -> None:
    """Walk the chain from each root (reporting unexplained restarts) and mark loops."""
    binlogs, ordered = chain.binlogs, chain.ordered
    series_pos = {n: i for i, n in enumerate(ordered)}
    roots = [n for n in ordered if n not in preds or not any(p in binlogs for p in preds[n])]
    visited: set[str] = set()
    for segment, root in enumerate(roots):
        if segment > 0 and root not in chain.explained_roots:
            prev = ordered[series_pos[root] - 1] if series_pos[root] > 0 else None
            chain.report("chain_restart", SEVERITY_ERROR, root, _restart_detail(binlogs, root, prev))
        walk = follow_chain(root, lambda n: (s if (s := succ.get(n)) in binlogs else None), visited)
        for index, n in enumerate(walk):
            binlogs[n].segment = segment
            binlogs[n].chain_index = index
    unreached = [n for n in ordered if n not in visited]
    if unreached:
        chain.report("cycle", SEVERITY_ERROR, unreached[0],
                     f"files reachable only through a successor loop: {', '.join(unreached[:10])}")
    for n in unreached:
        binlogs[n].state = "rejected" if binlogs[n].state == "closed" else binlogs[n].state


def _restart_detail(binlogs: dict[str, DiscoveredFile], root: str, prev: str | None) -> str:
    detail = f"nothing in the archive names {root} as successor"
    rf = binlogs[root]
    if prev is not None:
        pf = binlogs[prev]
        detail += f" (previous by name: {prev}, which points to {pf.next_file or 'nothing'})"
        if pf.server_id is not None and rf.server_id is not None and pf.server_id != rf.server_id:
            detail += f"; server_id changes {pf.server_id} -> {rf.server_id} (new server?)"
    if rf.previous_gtids == "":
        detail += "; its PREVIOUS_GTIDS/GTID_LIST is empty (RESET?)"
    return detail


# --------------------------------------------------------------------------- entry points


def discover_source(store: ObjectStore, source: str, *, known: Mapping[str, KnownFile] | None = None,
                    reuse_known: bool = True, workers: int = 8, head_bytes: int = HEAD_BYTES,
                    tail_bytes: int = TAIL_BYTES, on_replaced: str = ON_REPLACED_REINGEST) -> SourceDiscovery:
    """Discover the rotated, not yet ingested binlogs of one source prefix.

    ``known``: ``file -> KnownFile`` from the ingestion state. With ``reuse_known`` an ingested
    object whose etag and size are unchanged and whose closing event is known is not read again.
    ``on_replaced`` (config ``[pipeline] on_replaced_object``): ``reingest`` an ingested object
    listed with a new etag/size (a ``changed_object`` warning), or ``fail``: the issue is an
    error, the object is not ingested, and :class:`ReplacedObjectError` is raised at the end.
    """
    if on_replaced not in ON_REPLACED_POLICIES:
        raise ValueError(f"on_replaced must be one of {ON_REPLACED_POLICIES}, not {on_replaced!r}")
    t0 = time.monotonic()
    before = getattr(store, "bytes_read", 0)
    known = known or {}
    result = SourceDiscovery(source=source, uri=store.root_uri)
    objects = store.list()
    result.objects = len(objects)

    def one(obj: ObjectInfo) -> DiscoveredFile:
        k = known.get(obj.name)
        if (reuse_known and k is not None and k.status != "failed" and k.closing_event in ("ROTATE", "STOP")
                and k.etag == obj.etag and (k.size is None or k.size == obj.size) and "/" not in obj.name):
            return _from_known(source, obj, k)
        return inspect_object(store, source, obj, head_bytes=head_bytes, tail_bytes=tail_bytes)

    if workers > 1 and len(objects) > 1:
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            files = list(pool.map(one, objects))
    else:
        files = [one(o) for o in objects]
    result.files = files

    for f in files:
        if f.state == "not_binlog":
            result.issues.append(Issue(source, "not_a_binlog", SEVERITY_WARNING, f.file, f.detail))
        elif f.state == "nested":
            result.issues.append(Issue(source, "nested_object", SEVERITY_INFO, f.file, f.detail))
        elif f.state == "corrupt":
            result.issues.append(Issue(source, "corrupt_binlog", SEVERITY_ERROR, f.file, f.detail))
        elif f.state == "unreadable":
            result.issues.append(Issue(source, "read_error", SEVERITY_ERROR, f.file, f.detail))
    result.issues.extend(build_chain(source, files))
    replaced = _note_replaced_objects(result, known, on_replaced)
    result.bytes_read = getattr(store, "bytes_read", 0) - before
    result.seconds = time.monotonic() - t0
    log.info(result.summary())
    for issue in result.issues:
        (log.error if issue.severity == SEVERITY_ERROR else log.warning if issue.severity == SEVERITY_WARNING
         else log.info)("%s", issue)
    if replaced and on_replaced == ON_REPLACED_FAIL:
        raise ReplacedObjectError(result, replaced)
    return result


def _note_replaced_objects(result: SourceDiscovery, known: Mapping[str, KnownFile],
                           on_replaced: str) -> list[tuple[str, str | None, int | None, str, int]]:
    """Classify closed files for ingestion and report the replaced ones (per the policy)."""
    replaced = []
    fail = on_replaced == ON_REPLACED_FAIL
    for f in result.files:
        if f.state != "closed":
            continue
        if f.ingest is None:
            f.ingest = _classify_ingest(f, known.get(f.file))
        if f.ingest != "changed":
            continue
        k = known[f.file]
        replaced.append((f.file, k.etag, k.size, f.etag, f.size))
        what = "not ingested (on_replaced_object = 'fail')" if fail else "ingested again"
        result.issues.append(Issue(result.source, "changed_object", SEVERITY_ERROR if fail else SEVERITY_WARNING,
                                   f.file, f"etag/size changed since ingestion ({k.etag}/{k.size} -> "
                                   f"{f.etag}/{f.size}): {what}"))
        if fail:
            f.ingest = "replaced"
    return replaced


def select_range(files: Iterable[DiscoveredFile], *, from_file: str | None = None, to_file: str | None = None,
                 from_time: float | None = None, to_time: float | None = None) -> list[DiscoveredFile]:
    """Closed files within a file-name range (series order, inclusive) and/or a last-modified window."""
    out = []
    lo = series_sort_key(from_file) if from_file else None
    hi = series_sort_key(to_file) if to_file else None
    for f in files:
        if not f.closed:
            continue
        k = series_sort_key(f.file)
        if lo is not None and (k[0] != lo[0] or k < lo):
            continue
        if hi is not None and (k[0] != hi[0] or k > hi):
            continue
        if from_time is not None and (f.last_modified is None or f.last_modified < from_time):
            continue
        if to_time is not None and (f.last_modified is None or f.last_modified >= to_time):
            continue
        out.append(f)
    return sorted(out, key=_chain_sort_key)
