"""Object-store access for binlog discovery: one small protocol, a local-folder and an S3 backend.

Why not Spark or fsspec: discovery runs in the Airflow worker before any Spark job, needs only
list / head / ranged reads (a binlog's header and tail are enough to chain files), and must count
the bytes it reads so tests can prove it does not download whole files. boto3 is used with the
standard credentials chain, "standard" retry mode with backoff, and list_objects_v2 pagination.
No credentials are ever passed in code or written to logs.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import hashlib
import http.client
import logging
import os
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    IncompleteReadError,
    ReadTimeoutError,
    ResponseStreamingError,
)
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential
from urllib3.exceptions import ProtocolError

from binlake.config import S3Settings, is_s3_uri, split_s3_uri
from binlake.errors import BinlakeError

log = logging.getLogger(__name__)

#: A response body cut mid-stream, as botocore / urllib3 / http.client / the socket report it.
#: botocore's own retries end when the response headers arrive: these happen later, while
#: the body is read, and are retried here (resuming at the first byte not received).
BODY_CUT_ERRORS: tuple[type[BaseException], ...] = (
    ResponseStreamingError, IncompleteReadError, ReadTimeoutError, ConnectionClosedError,
    ProtocolError, http.client.IncompleteRead, ConnectionError,
)
#: Body bytes asked for per read while streaming a ranged GET (a short read returns what
#: arrived, so a resumed GET starts at the first byte not received).
BODY_READ_CHUNK = 256 << 10


@dataclass(frozen=True)
class ObjectInfo:
    """One stored object. ``name`` is relative to the store's root prefix; ``uri`` is absolute."""

    name: str
    size: int
    etag: str
    uri: str
    last_modified: float | None = None  # POSIX seconds

    @property
    def key(self) -> str:
        """Alias of ``name`` (S3 wording)."""
        return self.name


class DownloadError(BinlakeError, OSError):
    """A ranged read whose body kept breaking off: every resumed attempt was cut too."""


class ObjectNotFound(BinlakeError, FileNotFoundError):
    """The named object does not exist in the store."""


class ObjectChangedError(BinlakeError):
    """An object is no longer the version a read was pinned to: its S3 ETag (``If-Match``
    answered 412 Precondition Failed), or a local file's identity (size + mtime).

    ``since_discovery``: the pin was the ETag the run's plan recorded (the file was replaced
    between discovery and this read, or between two ranges of a split file): re-run discovery.
    Otherwise the pin was what the read itself saw first (the object changed while one read was
    resumed, or while a local file was read): read it again. ``span`` names the bytes
    (``bytes 0-4095``), ``found`` is None when the store reported no version; ``detail`` adds
    what a local file now is (size, mtime); ``more``: the same for other objects, one line each.
    """

    def __init__(self, uri: str, expected: str | None, found: str | None, *, span: str, label: str = "ETag",
                 since_discovery: bool = True, detail: str = "", more: tuple[str, ...] = ()) -> None:
        self.fields: dict[str, Any] = {"uri": uri, "expected": expected, "found": found, "span": span,
                                       "label": label, "since_discovery": since_discovery, "detail": detail,
                                       "more": tuple(more)}
        self.uri, self.expected, self.found = uri, expected, found
        now = f'"{found}"' if found else "another version"
        if detail:
            now += f" ({detail})"
        if since_discovery:
            text = (f'{uri} changed since discovery ({label} "{expected}" expected, the store now has {now}); '
                    f"{span} not read: re-run discovery")
        else:
            text = (f'{uri} changed while {span} were being read ({label} "{expected}" when the read began, '
                    f"the store now has {now}): read it again")
        if more:
            text += f"; changed too: {'; '.join(more)}"
        super().__init__(text)

    def __reduce__(self) -> tuple[Any, ...]:
        """Rebuilt from its fields (the default would call ``__init__`` with the message alone)."""
        return (_changed_error, (self.fields,))


def _changed_error(fields: dict[str, Any]) -> ObjectChangedError:
    return ObjectChangedError(**fields)


def _span(start: int, end: int) -> str:
    return f"bytes {start}-{end - 1}"


def quoted_etag(etag: str) -> str:
    """An ETag as HTTP's ``If-Match`` spells it (in double quotes), from either spelling."""
    return f'"{etag.strip(chr(34))}"'


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def conditional_write_refused(exc: ClientError, *, missing_too: bool) -> bool:
    """A conditional request refused because the object changed (or, for ``If-Match``, is gone):
    412 ``PreconditionFailed``; 409 ``ConditionalRequestConflict`` / ``OperationAborted`` (a
    concurrent conflicting write finished first, AWS's answer to a race it detects mid-request);
    with ``missing_too``, 404 as well (an ``If-Match`` on an object that is gone). The one
    classification for every conditional write: the leases and the archiver's uploads."""
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    code = exc.response.get("Error", {}).get("Code")
    if status == 412 or code == "PreconditionFailed":
        return True
    if status == 409 and code in ("ConditionalRequestConflict", "OperationAborted"):
        return True
    return missing_too and (status == 404 or code in ("NoSuchKey", "404"))


class S3Client(Protocol):
    """The calls binlake makes on a boto3 S3 client. boto3 builds its clients at run time (no
    static type without a stubs package), so this names what the stores and leases rely on; the
    requests' keyword arguments and response dicts are S3's own."""

    meta: Any  # botocore's ClientMeta (tests hook its event system)

    def get_paginator(self, operation_name: str) -> Any: ...
    def head_object(self, **kwargs: Any) -> dict[str, Any]: ...
    def get_object(self, **kwargs: Any) -> dict[str, Any]: ...
    def put_object(self, **kwargs: Any) -> dict[str, Any]: ...
    def delete_object(self, **kwargs: Any) -> dict[str, Any]: ...


@runtime_checkable
class ObjectStore(Protocol):
    """What discovery needs from a binlog archive (a local folder or an S3 prefix)."""

    root_uri: str
    bytes_read: int

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        """Objects whose name starts with ``prefix``, sorted by name (recursive)."""
        ...

    def head(self, name: str) -> ObjectInfo:
        """Metadata of one object (ObjectNotFound if missing)."""
        ...

    def read_range(self, name: str, start: int, end: int, *, etag: str | None = None) -> bytes:
        """Bytes ``[start, end)`` of the object (shorter at end of object). With ``etag`` (the
        version discovery saw), bytes of that version or :class:`ObjectChangedError`."""
        ...

    def read_tail(self, name: str, n: int, *, etag: str | None = None) -> bytes:
        """The last ``n`` bytes (all of it when the object is shorter); ``etag`` as in ``read_range``."""
        ...

    def read_all(self, name: str, *, etag: str | None = None) -> bytes:
        """The whole object; ``etag`` as in ``read_range``."""
        ...

    def put(self, name: str, data: bytes) -> ObjectInfo:
        """Write (overwrite) an object."""
        ...

    def delete(self, name: str) -> None:
        """Remove an object (ObjectNotFound if missing on a local folder; S3 deletes are idempotent)."""
        ...

    def put_if_absent(self, name: str, data: bytes) -> str | None:
        """Create an object only when none of that name exists; its ETag, or None when one exists.

        Why on the store: two writers of one name (two archivers of a destination, two drivers
        taking a lock) must not both believe they created it; S3 decides with ``If-None-Match: *``,
        a local folder with a link that fails when the name exists (``O_EXCL``'s rule)."""
        ...

    def put_if_match(self, name: str, data: bytes, etag: str) -> str | None:
        """Replace an object only while it is still version ``etag`` (S3 ``If-Match``); the new
        ETag, or None when it changed or is gone (a lagging writer never overwrites a newer one)."""
        ...

    def delete_if_match(self, name: str, etag: str) -> bool:
        """Delete an object only while it is still version ``etag``; False when it changed or is gone."""
        ...


class _ByteCounter:
    """Thread-safe count of bytes read, shared by both backends."""

    def __init__(self) -> None:
        self.bytes_read = 0
        self._lock = threading.Lock()

    def _count(self, data: bytes) -> bytes:
        with self._lock:
            self.bytes_read += len(data)
        return data

    def reset_counter(self) -> None:
        with self._lock:
            self.bytes_read = 0


def _check_range(start: int, end: int) -> None:
    if start < 0 or end < start:
        raise ValueError(f"bad byte range [{start}, {end})")


#: A local file's etag as :meth:`LocalObjectStore._info` makes it (MD5 hex of ``size:mtime_ns``).
#: Only an etag of this form names a version of a local file; any other string (a caller's own
#: label) cannot be checked against one.
_LOCAL_ETAG = re.compile(r"[0-9a-f]{32}")


def local_etag(st: os.stat_result) -> str:
    """A local file's etag: its identity (size + mtime in nanoseconds), cheap to take at open and
    after reading (a content hash would read the file)."""
    return hashlib.md5(f"{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()


def _local_state(st: os.stat_result) -> str:
    when = _dt.datetime.fromtimestamp(st.st_mtime_ns / 1e9, _dt.UTC).isoformat(timespec="microseconds")
    return f"{st.st_size} bytes, modified {when}"


class LocalObjectStore(_ByteCounter):
    """A local folder seen as an object store (names are POSIX-style relative paths)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        super().__init__()
        root_str = str(root)
        if root_str.startswith("file://"):
            root_str = root_str[len("file://"):]
        self.root = Path(root_str).resolve()
        self.root_uri = str(self.root) + "/"

    def _path(self, name: str) -> Path:
        path = (self.root / name).resolve()
        if path != self.root and self.root not in path.parents:
            raise ValueError(f"object name escapes the store root: {name!r}")
        return path

    def _info(self, path: Path) -> ObjectInfo:
        st = path.stat()
        etag = local_etag(st)
        name = path.relative_to(self.root).as_posix()
        return ObjectInfo(name=name, size=st.st_size, etag=etag, uri=str(path), last_modified=st.st_mtime)

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        if not self.root.is_dir():
            return []
        out = [self._info(p) for p in self.root.rglob("*") if p.is_file()]
        return sorted((o for o in out if o.name.startswith(prefix)), key=lambda o: o.name)

    def head(self, name: str) -> ObjectInfo:
        path = self._path(name)
        if not path.is_file():
            raise ObjectNotFound(f"{self.root_uri}{name}")
        return self._info(path)

    def read_range(self, name: str, start: int, end: int, *, etag: str | None = None) -> bytes:
        _check_range(start, end)
        return self._read(name, etag, lambda size: (start, end))

    def read_tail(self, name: str, n: int, *, etag: str | None = None) -> bytes:
        return self._read(name, etag, lambda size: (max(0, size - n), size))

    def read_all(self, name: str, *, etag: str | None = None) -> bytes:
        return self._read(name, etag, lambda size: (0, size))

    def _read(self, name: str, etag: str | None, span: Callable[[int], tuple[int, int]]) -> bytes:
        """The bytes ``span(size)`` of one open file, whose identity is checked at open (against
        ``etag``, the version discovery recorded, when it is one of ours) and again after reading
        (against what it was at open): a file replaced or rewritten in place is an
        :class:`ObjectChangedError`, never bytes of another version."""
        path = self._path(name)
        if not path.is_file():
            raise ObjectNotFound(f"{self.root_uri}{name}")
        pinned = etag if etag and _LOCAL_ETAG.fullmatch(etag) else None
        with path.open("rb") as fh:
            at_open = os.fstat(fh.fileno())
            start, end = span(at_open.st_size)
            if pinned is not None and local_etag(at_open) != pinned:
                raise ObjectChangedError(str(path), pinned, local_etag(at_open), span=_span(start, end),
                                         label="identity (size, mtime)", detail=_local_state(at_open))
            fh.seek(start)
            data = fh.read(end - start)
            after = os.fstat(fh.fileno())
        if local_etag(after) != local_etag(at_open):
            raise ObjectChangedError(str(path), pinned or local_etag(at_open), local_etag(after),
                                     span=_span(start, end), label="identity (size, mtime)",
                                     since_discovery=pinned is not None, detail=_local_state(after))
        return self._count(data)

    def put(self, name: str, data: bytes) -> ObjectInfo:
        path = self._path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp-binlake")
        tmp.write_bytes(data)
        tmp.replace(path)
        return self._info(path)

    def delete(self, name: str) -> None:
        try:
            self._path(name).unlink()
        except FileNotFoundError:
            raise ObjectNotFound(f"{self.root_uri}{name}") from None

    def _private_copy(self, path: Path, data: bytes) -> Path:
        """``data`` in a new file beside ``path``, under a name no other writer uses."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.tmp-binlake-{os.getpid()}-{threading.get_ident()}")
        tmp.write_bytes(data)
        return tmp

    def put_if_absent(self, name: str, data: bytes) -> str | None:
        """Written to a private file, then hard-linked into place: ``link()`` fails when the name
        exists (``O_EXCL``'s rule, atomically) and a reader never sees a half-written file."""
        path = self._path(name)
        tmp = self._private_copy(path, data)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return None
        finally:
            tmp.unlink(missing_ok=True)
        return self._info(path).etag

    @contextlib.contextmanager
    def _locked_version(self, name: str, etag: str) -> Iterator[Path | None]:
        """The path of ``name`` under an exclusive ``flock`` of its file while it is version
        ``etag`` (the file the name points at once locked); None when it changed or is gone."""
        path = self._path(name)
        try:
            fh = path.open("rb")
        except FileNotFoundError:
            yield None
            return
        with fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                st = os.fstat(fh.fileno())
                try:
                    same_file = os.stat(path).st_ino == st.st_ino
                except FileNotFoundError:
                    same_file = False
                yield path if same_file and local_etag(st) == etag.strip('"') else None
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def put_if_match(self, name: str, data: bytes, etag: str) -> str | None:
        """Its version is the file's identity (size, mtime), as fine as the filesystem's clock."""
        with self._locked_version(name, etag) as path:
            if path is None:
                return None
            self._private_copy(path, data).replace(path)
            return self._info(path).etag

    def delete_if_match(self, name: str, etag: str) -> bool:
        with self._locked_version(name, etag) as path:
            if path is None:
                return False
            path.unlink()
            return True


#: what decides which credentials and endpoint boto3's default chain picks for a client
_CLIENT_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
               "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
               "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
               "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
               "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION")
#: the clients :func:`make_s3_client` made in this process, by settings and that environment
_clients: dict[tuple[str, tuple[str | None, ...]], S3Client] = {}
_clients_lock = threading.Lock()
_CLIENTS_KEPT = 16


def make_s3_client(settings: S3Settings) -> S3Client:
    """A boto3 S3 client: endpoint from settings (or AWS_ENDPOINT_URL*), standard retries with backoff.

    Credentials: boto3's default chain (env, profile, roles). Under Airflow, ``settings.aws_conn_id``
    is honoured by the orchestration layer, which puts that connection's credentials in the task's env
    (:func:`orchestration.credentials.export_airflow_aws_credentials`) before anything here runs.

    One client per settings and credential environment in the process, shared (boto3 clients are
    thread-safe). Why: making one loads and parses botocore's service model and endpoint rules, about
    0.2 CPU-s, and every object store opened (a run document, a lease, a source's listing) used to
    make its own: the run's discover task made 19 per source. A changed credential variable makes a
    new client, so credentials exported later are honoured; refreshable credentials refresh in place.
    """
    # the pid too: a forked child (pyspark's daemon forks its workers) must not share the parent's sockets
    key = (f"{os.getpid()} {settings!r}", tuple(os.environ.get(name) for name in _CLIENT_ENV))
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            if len(_clients) >= _CLIENTS_KEPT:
                _clients.pop(next(iter(_clients)))
            client = _clients[key] = _new_s3_client(settings)
    return client


def _new_s3_client(settings: S3Settings) -> S3Client:
    import boto3
    from botocore.config import Config

    cfg = Config(
        retries={"total_max_attempts": settings.max_attempts, "mode": "standard"},
        s3={"addressing_style": "path" if settings.path_style_access else "auto"},
        connect_timeout=10,
        read_timeout=60,
    )
    return boto3.session.Session().client("s3", endpoint_url=settings.endpoint_url, region_name=settings.region, config=cfg)


class S3ObjectStore(_ByteCounter):
    """An S3 prefix (``s3://bucket/prefix/``) seen as an object store; names are relative to the prefix."""

    def __init__(self, uri: str, settings: S3Settings | None = None, client: S3Client | None = None,
                 page_size: int | None = None, body_attempts: int = 5, body_backoff: float = 0.2) -> None:
        super().__init__()
        self.page_size = page_size  # list_objects_v2 page size (None: S3's default, 1000)
        #: GETs per ranged read when the body breaks off (resumed where it broke), and the first
        #: backoff in seconds (doubling, at most 10 s)
        self.body_attempts = body_attempts
        self.body_backoff = body_backoff
        bucket, prefix = split_s3_uri(uri)
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        self.bucket = bucket
        self.prefix = prefix
        self.scheme = uri.split("://", 1)[0]
        self.root_uri = f"{self.scheme}://{bucket}/{prefix}"
        self.settings = settings or S3Settings()
        self._client = client

    @property
    def client(self) -> S3Client:
        if self._client is None:
            self._client = make_s3_client(self.settings)
        return self._client

    def _key(self, name: str) -> str:
        return self.prefix + name

    @contextlib.contextmanager
    def _not_found_as_missing(self, name: str) -> Iterator[None]:
        """S3's "no such key" (404 / NoSuchKey / NotFound) as :class:`ObjectNotFound`."""
        try:
            yield
        except ClientError as exc:
            if _error_code(exc) in ("404", "NoSuchKey", "NotFound"):
                raise ObjectNotFound(f"{self.root_uri}{name}") from exc
            raise

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        paginator = self.client.get_paginator("list_objects_v2")
        out: list[ObjectInfo] = []
        pagination = {"PageSize": self.page_size} if self.page_size else {}
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self._key(prefix), PaginationConfig=pagination):
            for obj in page.get("Contents", []):
                key: str = obj["Key"]
                if key.endswith("/"):
                    continue  # "folder" marker objects
                out.append(ObjectInfo(
                    name=key[len(self.prefix):],
                    size=int(obj["Size"]),
                    etag=str(obj.get("ETag", "")).strip('"'),
                    uri=f"{self.scheme}://{self.bucket}/{key}",
                    last_modified=obj["LastModified"].timestamp() if obj.get("LastModified") else None,
                ))
        return sorted(out, key=lambda o: o.name)

    def head(self, name: str) -> ObjectInfo:
        key = self._key(name)
        with self._not_found_as_missing(name):
            resp = self.client.head_object(Bucket=self.bucket, Key=key)
        return ObjectInfo(
            name=name,
            size=int(resp["ContentLength"]),
            etag=str(resp.get("ETag", "")).strip('"'),
            uri=f"{self.scheme}://{self.bucket}/{key}",
            last_modified=resp["LastModified"].timestamp() if resp.get("LastModified") else None,
        )

    def read_range(self, name: str, start: int, end: int, *, etag: str | None = None) -> bytes:
        """Bytes ``[start, end)``, every GET pinned with ``If-Match`` to ``etag`` (the version
        discovery saw) or, without one, to the first response's ETag: another version is an
        :class:`ObjectChangedError`, never bytes of it. A body cut mid-stream (connection
        reset, IncompleteRead) is resumed with a new ranged GET from the first byte not received,
        at most ``body_attempts`` GETs with exponential backoff; then :class:`DownloadError`."""
        _check_range(start, end)
        if end == start:
            return b""
        got = bytearray()
        pinned: dict[str, str] = {"IfMatch": quoted_etag(etag)} if etag else {}

        def note_retry(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome is not None else None
            log.warning("%s%s: body of bytes %d-%d broke off at byte %d (%s: %s); resuming (attempt %d of %d)",
                        self.root_uri, name, start, end - 1, start + len(got), type(exc).__name__, exc,
                        state.attempt_number + 1, self.body_attempts)

        retrying = Retrying(stop=stop_after_attempt(self.body_attempts),
                            wait=wait_exponential(multiplier=self.body_backoff, max=10),
                            retry=retry_if_exception_type(BODY_CUT_ERRORS), before_sleep=note_retry,
                            reraise=True)
        try:
            with self._changed_as_error(name, pinned, _span(start, end), since_discovery=bool(etag)):
                for attempt in retrying:
                    with attempt:
                        if not self._get_range_into(name, start + len(got), end, got, pinned):
                            return b""
        except BODY_CUT_ERRORS as exc:
            raise DownloadError(f"{self.root_uri}{name}: bytes {start}-{end - 1}: the download broke off at "
                                f"byte {start + len(got)} on each of {self.body_attempts} attempts "
                                f"({type(exc).__name__}: {exc})") from exc
        return bytes(got)

    def _get_range_into(self, name: str, start: int, end: int, out: bytearray, pinned: dict[str, str]) -> bool:
        """One ranged GET of ``[start, end)`` appended to ``out`` as it arrives (what came before
        a cut is kept; ``pinned`` gets the first response's ETag as ``IfMatch`` when it has
        none); False when ``start`` is beyond the object's end."""
        try:
            with self._not_found_as_missing(name):
                resp = self.client.get_object(Bucket=self.bucket, Key=self._key(name),
                                              Range=f"bytes={start}-{end - 1}", **pinned)
        except ClientError as exc:
            if _error_code(exc) == "InvalidRange":  # start beyond the end of the object
                return False
            raise
        if not pinned and resp.get("ETag"):
            pinned["IfMatch"] = resp["ETag"]
        body = resp["Body"]
        try:
            while True:
                piece = body.read(BODY_READ_CHUNK)
                if not piece:
                    return True
                out += self._count(piece)
        finally:
            body.close()

    @contextlib.contextmanager
    def _changed_as_error(self, name: str, pinned: dict[str, str], span: str, *,
                          since_discovery: bool) -> Iterator[None]:
        """S3's 412 Precondition Failed (the ``If-Match`` ETag is not the object's any more) as
        :class:`ObjectChangedError`, naming the ETag the store has now (one HEAD)."""
        try:
            yield
        except ClientError as exc:
            if _error_code(exc) not in ("PreconditionFailed", "412"):
                raise
            found, detail = None, ""
            try:
                found = self.head(name).etag or None
            except ObjectNotFound:
                detail = "no object of that name any more"
            except Exception as head_exc:  # noqa: BLE001 - the 412 is the error; the HEAD only adds to it
                detail = f"its ETag could not be read: {type(head_exc).__name__}"
            raise ObjectChangedError(f"{self.root_uri}{name}", pinned.get("IfMatch", "").strip('"') or None,
                                     found, span=span, since_discovery=since_discovery, detail=detail) from exc

    def read_tail(self, name: str, n: int, *, etag: str | None = None) -> bytes:
        if n <= 0:
            return b""
        pinned = {"IfMatch": quoted_etag(etag)} if etag else {}
        with self._changed_as_error(name, pinned, f"the last {n} bytes", since_discovery=True), \
                self._not_found_as_missing(name):
            resp = self.client.get_object(Bucket=self.bucket, Key=self._key(name), Range=f"bytes=-{n}", **pinned)
        return self._count(resp["Body"].read())

    def read_all(self, name: str, *, etag: str | None = None) -> bytes:
        pinned = {"IfMatch": quoted_etag(etag)} if etag else {}
        with self._changed_as_error(name, pinned, "the whole object", since_discovery=True), \
                self._not_found_as_missing(name):
            resp = self.client.get_object(Bucket=self.bucket, Key=self._key(name), **pinned)
        return self._count(resp["Body"].read())

    def put(self, name: str, data: bytes) -> ObjectInfo:
        self.client.put_object(Bucket=self.bucket, Key=self._key(name), Body=data)
        return self.head(name)

    def delete(self, name: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._key(name))

    def _conditional(self, request: Callable[..., dict[str, Any]], name: str, condition: dict[str, str], *,
                     missing_too: bool, **kwargs: Any) -> dict[str, Any] | None:
        """One conditional request; None when the store refused its condition
        (:func:`conditional_write_refused`), any other failure raised as it is."""
        try:
            return dict(request(Bucket=self.bucket, Key=self._key(name), **condition, **kwargs))
        except ClientError as exc:
            if conditional_write_refused(exc, missing_too=missing_too):
                return None
            raise

    def put_if_absent(self, name: str, data: bytes) -> str | None:
        resp = self._conditional(self.client.put_object, name, {"IfNoneMatch": "*"}, missing_too=False, Body=data)
        return None if resp is None else str(resp.get("ETag", "")).strip('"')

    def put_if_match(self, name: str, data: bytes, etag: str) -> str | None:
        resp = self._conditional(self.client.put_object, name, {"IfMatch": quoted_etag(etag)}, missing_too=True,
                                 Body=data)
        return None if resp is None else str(resp.get("ETag", "")).strip('"')

    def delete_if_match(self, name: str, etag: str) -> bool:
        return self._conditional(self.client.delete_object, name, {"IfMatch": quoted_etag(etag)},
                                 missing_too=True) is not None


def open_object_store(uri: str, settings: S3Settings | None = None) -> ObjectStore:
    """The store for ``uri``: S3 for s3:// / s3a:// / s3n://, else a local folder."""
    if is_s3_uri(uri):
        return S3ObjectStore(uri, settings)
    return LocalObjectStore(uri)
