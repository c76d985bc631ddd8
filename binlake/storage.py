"""Object-store access for binlog discovery: one small protocol, a local-folder and an S3 backend.

Why not Spark or fsspec: discovery runs in the Airflow worker before any Spark job, needs only
list / head / ranged reads (a binlog's header and tail are enough to chain files), and must count
the bytes it reads so tests can prove it does not download whole files. boto3 is used with the
standard credentials chain, "standard" retry mode with backoff, and list_objects_v2 pagination.
No credentials are ever passed in code or written to logs.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import logging
import os
import threading
from collections.abc import Iterator
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


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


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

    def read_range(self, name: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the object (shorter at end of object)."""
        ...

    def read_tail(self, name: str, n: int) -> bytes:
        """The last ``n`` bytes (all of it when the object is shorter)."""
        ...

    def read_all(self, name: str) -> bytes:
        """The whole object."""
        ...

    def put(self, name: str, data: bytes) -> ObjectInfo:
        """Write (overwrite) an object."""
        ...

    def delete(self, name: str) -> None:
        """Remove an object (ObjectNotFound if missing on a local folder; S3 deletes are idempotent)."""
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
        # A cheap, stable etag for local files: size + mtime (content hash would read the file).
        etag = hashlib.md5(f"{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()
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

    def read_range(self, name: str, start: int, end: int) -> bytes:
        _check_range(start, end)
        path = self._path(name)
        if not path.is_file():
            raise ObjectNotFound(f"{self.root_uri}{name}")
        with path.open("rb") as fh:
            fh.seek(start)
            return self._count(fh.read(end - start))

    def read_tail(self, name: str, n: int) -> bytes:
        size = self.head(name).size
        return self.read_range(name, max(0, size - n), size)

    def read_all(self, name: str) -> bytes:
        return self.read_range(name, 0, self.head(name).size)

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


def make_s3_client(settings: S3Settings) -> Any:
    """A boto3 S3 client: endpoint from settings (or AWS_ENDPOINT_URL*), standard retries with backoff.

    Credentials: boto3's default chain (env, profile, roles). Under Airflow, ``settings.aws_conn_id``
    is honoured by the orchestration layer, which puts that connection's credentials in the task's env
    (:func:`orchestration.credentials.export_airflow_aws_credentials`) before anything here runs.
    """
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

    def __init__(self, uri: str, settings: S3Settings | None = None, client: Any = None,
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
    def client(self) -> Any:
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

    def read_range(self, name: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)``. A body cut mid-stream (connection reset, IncompleteRead) is
        resumed with a new ranged GET from the first byte not received, pinned to the first
        response's ETag (``If-Match``: the object may not change in between), at most
        ``body_attempts`` GETs with exponential backoff; then :class:`DownloadError`."""
        _check_range(start, end)
        if end == start:
            return b""
        got = bytearray()
        pinned: dict[str, str] = {}  # {"IfMatch": the first response's ETag}

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
        a cut is kept; ``pinned`` gets the first response's ETag as ``IfMatch``); False when
        ``start`` is beyond the object's end."""
        try:
            with self._not_found_as_missing(name):
                resp = self.client.get_object(Bucket=self.bucket, Key=self._key(name),
                                              Range=f"bytes={start}-{end - 1}", **pinned)
        except ClientError as exc:
            if _error_code(exc) == "InvalidRange":  # start beyond the end of the object
                return False
            if _error_code(exc) in ("PreconditionFailed", "412"):
                raise DownloadError(f"{self.root_uri}{name}: the object changed (ETag no longer "
                                    f"{pinned.get('IfMatch')}) while its bytes from {start} were being "
                                    "resumed; read it again") from exc
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

    def read_tail(self, name: str, n: int) -> bytes:
        if n <= 0:
            return b""
        with self._not_found_as_missing(name):
            resp = self.client.get_object(Bucket=self.bucket, Key=self._key(name), Range=f"bytes=-{n}")
        return self._count(resp["Body"].read())

    def read_all(self, name: str) -> bytes:
        with self._not_found_as_missing(name):
            resp = self.client.get_object(Bucket=self.bucket, Key=self._key(name))
        return self._count(resp["Body"].read())

    def put(self, name: str, data: bytes) -> ObjectInfo:
        self.client.put_object(Bucket=self.bucket, Key=self._key(name), Body=data)
        return self.head(name)

    def delete(self, name: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._key(name))


def open_object_store(uri: str, settings: S3Settings | None = None) -> ObjectStore:
    """The store for ``uri``: S3 for s3:// / s3a:// / s3n://, else a local folder."""
    if is_s3_uri(uri):
        return S3ObjectStore(uri, settings)
    return LocalObjectStore(uri)
