"""Streaming binlog reader: bytes, a path or a binary stream in, typed events out.

The reader owns framing only: magic, version detection, the common header, event
sizes, checksums, the FORMAT_DESCRIPTION bookkeeping and dispatch to body decoders
(``binlog_parser.decoders`` merged with ``binlog_parser.rows.ROW_EVENT_DECODERS``).

Memory is bounded: a stream is read in chunks and only the bytes of the current event
(plus one chunk) are held. Event sizes are checked before anything is allocated.
"""

from __future__ import annotations

import dataclasses
import io
import os
import struct
import zlib
from dataclasses import dataclass
from typing import IO, Any, Callable, Iterator, Union

from binlog_parser.constants import (
    BINLOG_MAGIC,
    CHECKSUM_CRC32,
    CHECKSUM_OFF,
    CHECKSUM_UNDEFINED,
    LOG_EVENT_BINLOG_IN_USE_F,
    EventType,
)
from binlog_parser.context import DecodeContext, Decoder
from binlog_parser.errors import (
    BinlogError,
    ChecksumMismatchError,
    CorruptEventError,
    NotABinlogError,
    TruncatedEventError,
    UnsupportedVersionError,
)
from binlog_parser.events import Event, UnknownEvent
from binlog_parser.header import EventHeader, new_event_header
from binlog_parser.limits import DEFAULT_MAX_EVENT_SIZE
from binlog_parser.wire import ShortBufferError

Source = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, IO[bytes]]

#: Default cap on one event's size (MySQL's max_allowed_packet ceiling, 1 GiB, plus headroom):
#: ``binlog_parser.limits.DEFAULT_MAX_EVENT_SIZE``, re-exported here.
#: Bytes read from a stream at a time.
DEFAULT_CHUNK_SIZE = 1 << 20

_HEADER = struct.Struct("<IBIIIH")  # timestamp, type, server_id, event_size, log_pos, flags
_HEADER_V1 = struct.Struct("<IBII")  # timestamp, type, server_id, event_size
_U32 = struct.Struct("<I")

_FDE = int(EventType.FORMAT_DESCRIPTION)
_START_V3 = int(EventType.START_V3)
_PAYLOAD = int(EventType.TRANSACTION_PAYLOAD)

# Post-header lengths of binlog versions 1 and 3 (MySQL's Format_description_log_event
# constructor for binlog_ver 1/3): index = type_code - 1, for types 1..14.
_V3_POST_HEADER = bytes([56, 11, 0, 8, 0, 18, 0, 4, 4, 4, 4, 18, 0, 0])
_V1_POST_HEADER = bytes([56, 11, 0, 0, 0, 18, 0, 4, 4, 4, 4, 18, 0, 0])

_DECODE_ERRORS = (struct.error, ShortBufferError, IndexError, ValueError, UnicodeDecodeError,
                  OverflowError, KeyError)


# ---------------------------------------------------------------------------
# Server version helpers (checksum presence in FORMAT_DESCRIPTION)
# ---------------------------------------------------------------------------


def server_version_split(version: str) -> tuple[int, int, int]:
    """MySQL's do_server_version_split: ``X.Y.Zabc`` -> (X, Y, Z), ``X.Yabc`` -> (X, Y, 0);
    the first number must be followed by a dot and every number be < 256, else (0, 0, 0)."""
    parts = [0, 0, 0]
    i, n = 0, len(version)
    for k in range(3):
        j = i
        while j < n and "0" <= version[j] <= "9":  # ASCII only: "²".isdigit() is True
            j += 1
        number = int(version[i:j]) if j > i else 0
        nxt = version[j] if j < n else ""
        if number < 256 and (nxt == "." or k != 0):
            parts[k] = number
        else:
            return (0, 0, 0)
        i = j + 1 if nxt == "." else j
    return (parts[0], parts[1], parts[2])


# Pre-GA "-a_drop" trees numbered events differently (MySQL's event_type_permutation).
_DROP_PERMUTATION = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 19, 20, 21, 22, 16, 17, 18)


def _is_drop_version(v: str) -> bool:
    if len(v) < 13 or v[0] != "5" or v[1] != "." or v[3] != "." or v[5:12] != "-a_drop":
        return False
    return ((v[2] == "1" and "1" <= v[4] <= "5" and v[12] == "5")
            or (v[2] == "1" and v[4] == "4" and v[12] == "6")
            or (v[2] == "2" and "0" <= v[4] <= "2" and v[12] == "6"))


def fde_has_checksum_alg(server_version: str) -> bool:
    """Whether a FORMAT_DESCRIPTION written by this server ends with alg byte + CRC room.

    MySQL >= 5.6.1 (``checksum_version_split``), MariaDB >= 5.3.0.
    """
    split = server_version_split(server_version)
    if "mariadb" in server_version.lower():
        return split >= (5, 3, 0)
    return split >= (5, 6, 1)


def _decode_version(raw: bytes | memoryview) -> str:
    return bytes(raw).split(b"\x00", 1)[0].decode("latin-1")


# ---------------------------------------------------------------------------
# Byte sources
# ---------------------------------------------------------------------------


class _MemorySource:
    """The whole data in memory: slices are zero-copy memoryviews."""

    __slots__ = ("mv", "base", "total")

    def __init__(self, data: bytes | bytearray | memoryview, base: int) -> None:
        self.mv = memoryview(data).cast("B") if not isinstance(data, memoryview) else data.cast("B")
        self.base = base
        self.total = base + len(self.mv)

    def get(self, pos: int, n: int) -> memoryview:
        start = pos - self.base
        return self.mv[start:start + n]

    def close(self) -> None:
        pass


class _StreamSource:
    """A binary stream read forward in chunks; holds at most one event plus one chunk."""

    __slots__ = ("stream", "buf", "mv", "buf_pos", "total", "chunk", "owned", "seekable", "eof")

    def __init__(self, stream: IO[bytes], base: int, total: int | None, chunk: int,
                 owned: bool) -> None:
        self.stream = stream
        self.buf = b""
        self.mv = memoryview(self.buf)
        self.buf_pos = base  # file offset of buf[0]
        self.total = total
        self.chunk = chunk
        self.owned = owned
        self.eof = False
        try:
            self.seekable = bool(stream.seekable())
        except (AttributeError, ValueError, OSError):
            self.seekable = False

    def get(self, pos: int, n: int) -> memoryview:
        start = pos - self.buf_pos
        if start >= 0 and start + n <= len(self.buf):
            return self.mv[start:start + n]
        return self._fill(pos, n)

    def _read(self, n: int) -> bytes:
        out = self.stream.read(n)
        if out is None:  # non-blocking stream with nothing available
            return b""
        return bytes(out) if not isinstance(out, bytes) else out

    def _fill(self, pos: int, n: int) -> memoryview:
        end_of_buf = self.buf_pos + len(self.buf)
        if pos < self.buf_pos:
            raise CorruptEventError(f"reader moved backwards to {pos}", offset=pos)
        if pos >= end_of_buf:
            skip = pos - end_of_buf
            keep = b""
            if skip:
                if self.seekable:
                    self.stream.seek(skip, io.SEEK_CUR)
                else:
                    while skip and not self.eof:
                        piece = self._read(min(skip, self.chunk))
                        if not piece:
                            self.eof = True
                        skip -= len(piece)
        else:
            keep = self.buf[pos - self.buf_pos:]
        pieces = [keep] if keep else []
        have = len(keep)
        want = max(n, self.chunk)
        while have < n and not self.eof:
            # never ask for more than 64 MiB at once: a lying size on a short stream
            # must not allocate the lie.
            piece = self._read(min(want - have, 1 << 26))
            if not piece:
                self.eof = True
                break
            pieces.append(piece)
            have += len(piece)
        self.buf = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        self.mv = memoryview(self.buf)
        self.buf_pos = pos
        return self.mv[0:n]

    def close(self) -> None:
        if self.owned:
            self.stream.close()


def _stream_total(stream: IO[bytes]) -> tuple[int | None, int | None]:
    """(current position, total size) of a stream when it can tell, else (None, None)."""
    try:
        if not stream.seekable():
            return None, None
        here = stream.tell()
        end = stream.seek(0, io.SEEK_END)
        stream.seek(here)
        return here, end
    except (AttributeError, OSError, ValueError):
        return None, None


# ---------------------------------------------------------------------------
# Dispatch table
# ---------------------------------------------------------------------------


def build_dispatch() -> dict[int, Decoder]:
    """Core decoders merged with the rows engineer's (rows decoders win for their codes)."""
    from binlog_parser.decoders import CORE_DECODERS
    from binlog_parser.rows import ROW_EVENT_DECODERS

    table: dict[int, Decoder] = dict(CORE_DECODERS)
    table.update(ROW_EVENT_DECODERS)
    return table


# ---------------------------------------------------------------------------
# The reader
# ---------------------------------------------------------------------------


class BinlogReader:
    """Iterate the events of one binlog (or of a range of it).

    ``source``: a path, ``bytes``/``bytearray``/``memoryview``, or a binary stream.

    Without ``context`` the source must start at the magic ``\\xfebin`` (file offset 0);
    events before ``start_position`` are read for their FORMAT_DESCRIPTION but not
    yielded (a seekable source jumps straight there after the first one).

    With ``context`` (e.g. from :func:`read_format_description` on the file's head)
    no magic is expected: the source starts at file offset ``source_offset`` (for a
    path: the reader seeks to ``start_position``, default 4; for bytes without
    ``source_offset``: the bytes are the whole file; for a stream: its current
    position, or ``source_offset`` when given). This is how a task decodes a file
    split at event boundaries.

    ``lenient``: a checksum mismatch sets ``header.checksum_ok = False`` instead of
    raising. Every other error still raises. Errors are :class:`BinlogError` subclasses
    naming file, offset and event type; events before an error have been yielded.

    Hostile input is bounded: no event may exceed ``max_event_size`` (also the cap on a
    MariaDB compressed event's uncompressed size), and a TRANSACTION_PAYLOAD may not
    decompress to more than its declared uncompressed size nor ``max_payload_size``
    (default ``binlog_parser.decoders.payload.DEFAULT_MAX_PAYLOAD_SIZE``, 4 GiB; only one
    embedded event is held in memory at a time).
    """

    def __init__(
        self,
        source: Source,
        *,
        file_name: str | None = None,
        verify_checksum: bool = True,
        lenient: bool = False,
        start_position: int | None = None,
        stop_position: int | None = None,
        context: DecodeContext | None = None,
        source_offset: int | None = None,
        max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
        expand_payloads: bool = True,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        dispatch: dict[int, Decoder] | None = None,
        _payload_pos: int | None = None,
        max_payload_size: int | None = None,
    ) -> None:
        self.verify_checksum = verify_checksum
        self.lenient = lenient
        self.start_position = start_position
        self.stop_position = stop_position
        self.max_event_size = max_event_size
        self.max_payload_size = max_payload_size
        self.expand_payloads = expand_payloads
        self.chunk_size = chunk_size
        self.dispatch = dispatch if dispatch is not None else build_dispatch()
        self._payload_pos = _payload_pos
        self._source = source
        self._given_context = context
        self._source_offset = source_offset
        if file_name is None and isinstance(source, (str, os.PathLike)):
            file_name = os.fspath(source)
        if file_name is None:
            file_name = getattr(source, "name", None) if not isinstance(
                source, (bytes, bytearray, memoryview)) else None
            if not isinstance(file_name, str):
                file_name = None
        self.file_name = file_name
        self.context: DecodeContext = context if context is not None else DecodeContext(file=file_name)
        if self.context.file is None:
            self.context.file = file_name
        # decoders cap decompressed sizes (MariaDB compressed events) by the same limit
        self.context.max_event_size = max_event_size
        #: offset of the next event to read (after iteration: where it stopped)
        self.position: int = 0
        #: every FORMAT_DESCRIPTION seen, in order
        self.format_descriptions: list[Event] = []

    # -- source setup ---------------------------------------------------------

    def _open(self) -> tuple[Any, int]:
        """Return (byte source, first position to read)."""
        src = self._source
        ctx_mode = self._given_context is not None
        if isinstance(src, (str, os.PathLike)):
            f = open(src, "rb", buffering=0)
            try:
                total = os.fstat(f.fileno()).st_size
                if ctx_mode:
                    first = self.start_position if self.start_position is not None else 4
                    f.seek(first)
                else:
                    first = 0
                return _StreamSource(f, first, total, self.chunk_size, True), first
            except BaseException:
                f.close()
                raise
        if isinstance(src, (bytes, bytearray, memoryview)):
            if ctx_mode:
                if self._source_offset is None:
                    first = self.start_position if self.start_position is not None else 4
                    return _MemorySource(src, 0), first
                first = self._source_offset
                return _MemorySource(src, first), max(first, self.start_position or first)
            return _MemorySource(src, 0), 0
        # a stream
        here, end = _stream_total(src)  # type: ignore[arg-type]
        if ctx_mode:
            base = self._source_offset if self._source_offset is not None else (here or 0)
        else:
            base = 0
        total = None
        if end is not None and here is not None:
            total = base + (end - here)
        first = base
        if ctx_mode and self.start_position is not None and self.start_position > base:
            first = self.start_position
        return _StreamSource(src, base, total, self.chunk_size, False), first  # type: ignore[arg-type]

    def _err(self, cls: type[BinlogError], msg: str, offset: int | None,
             type_code: int | None = None) -> BinlogError:
        off = offset
        if self._payload_pos is not None:
            msg = f"in TRANSACTION_PAYLOAD at {self._payload_pos}, payload offset {offset}: {msg}"
            off = self._payload_pos
        return cls(msg, file=self.file_name, offset=off, type_code=type_code)

    # -- iteration ------------------------------------------------------------

    def __iter__(self) -> Iterator[Event]:
        src, pos = self._open()
        try:
            yield from self._run(src, pos)
        finally:
            src.close()

    def _run(self, src: Any, pos: int) -> Iterator[Event]:
        ctx = self.context
        need_detect = self._given_context is None
        if need_detect:
            magic = src.get(0, 4)
            if len(magic) < 4:
                if magic and bytes(magic) == BINLOG_MAGIC[: len(magic)]:
                    raise self._err(TruncatedEventError,
                                    f"file ends inside the magic header ({len(magic)} bytes)", 0)
                raise self._err(NotABinlogError, "not a binlog: no \\xfebin magic", 0)
            if bytes(magic) != BINLOG_MAGIC:
                raise self._err(NotABinlogError,
                                f"not a binlog: magic is {bytes(magic).hex()}, expected fe62696e", 0)
            pos = 4
            self._detect_version(src)
        elif pos == 0:
            magic = src.get(0, 4)
            if bytes(magic) == BINLOG_MAGIC:
                pos = 4

        start = self.start_position
        stop = self.stop_position
        total = src.total
        max_size = self.max_event_size
        verify = self.verify_checksum
        lenient = self.lenient
        dispatch = self.dispatch
        payload_pos = self._payload_pos
        unpack19 = _HEADER.unpack_from
        new_header = new_event_header
        crc32 = zlib.crc32
        u32 = _U32.unpack_from
        jumped = not need_detect

        while True:
            self.position = pos
            if stop is not None and pos >= stop:
                return
            v1 = ctx.binlog_version == 1
            min_hdr = 13 if v1 else 19
            head = src.get(pos, min_hdr)
            hl = len(head)
            if hl == 0:
                return
            if hl < min_hdr:
                raise self._err(TruncatedEventError,
                                f"truncated event header: {hl} of {min_hdr} bytes before end of data",
                                pos)
            if v1:
                timestamp, type_code, server_id, size = _HEADER_V1.unpack_from(head, 0)
                log_pos, flags = 0, 0
            else:
                timestamp, type_code, server_id, size, log_pos, flags = unpack19(head, 0)
            raw_type = None
            perm = ctx.event_type_permutation
            if perm is not None and type_code < len(perm):
                raw_type, type_code = type_code, perm[type_code]
            is_fde = type_code == _FDE
            header_len = 19 if is_fde else ctx.header_length
            if size < header_len:
                raise self._err(CorruptEventError,
                                f"event size {size} is smaller than its header ({header_len} bytes)",
                                pos, type_code)
            if total is not None and pos + size > total:
                raise self._err(TruncatedEventError,
                                f"truncated event: header says {size} bytes, only {total - pos} remain",
                                pos, type_code)
            if size > max_size:
                raise self._err(CorruptEventError,
                                f"event size {size} exceeds the limit of {max_size} bytes", pos, type_code)
            raw = src.get(pos, size)
            if len(raw) < size:
                raise self._err(TruncatedEventError,
                                f"truncated event: header says {size} bytes, only {len(raw)} remain",
                                pos, type_code)

            # checksum
            checksum_ok = None
            if is_fde:
                alg = self._fde_alg(raw, pos)
                has_trailer = alg is not None
                if alg is None:
                    alg = CHECKSUM_UNDEFINED
                if has_trailer and size < 19 + 57 + 5:
                    raise self._err(CorruptEventError, f"FORMAT_DESCRIPTION too short ({size} bytes)",
                                    pos, type_code)
                end = size - 4 if has_trailer else size
                if alg == CHECKSUM_CRC32 and verify:
                    c = crc32(raw[:17])
                    c = crc32(bytes((raw[17] & ~LOG_EVENT_BINLOG_IN_USE_F & 0xFF, raw[18])), c)
                    c = crc32(raw[19:end], c)
                    checksum_ok = c == u32(raw, end)[0]
            else:
                alg = ctx.checksum_alg
                if alg == CHECKSUM_CRC32:
                    end = size - 4
                    if end < header_len:
                        raise self._err(CorruptEventError,
                                        f"event size {size} leaves no room for its checksum",
                                        pos, type_code)
                    if verify:
                        checksum_ok = crc32(raw[:end]) == u32(raw, end)[0]
                else:
                    end = size
            if checksum_ok is False and not lenient:
                raise self._err(ChecksumMismatchError,
                                f"CRC32 mismatch in {_type_name(type_code)} event of {size} bytes",
                                pos, type_code)

            next_pos = pos + size
            header = new_header(pos, next_pos, timestamp, type_code, server_id, size, log_pos,
                                 flags, checksum_ok, payload_pos,
                                 raw_type if raw_type != type_code else None)
            body = raw[header_len:end]

            if start is not None and pos < start and not is_fde and type_code != _START_V3:
                pos = next_pos
                continue

            decoder = dispatch.get(type_code)
            if decoder is None:
                event: Event = UnknownEvent.from_body(header, body)
            else:
                try:
                    event = decoder(header, body, ctx)
                except BinlogError as exc:
                    if exc.offset is None:
                        exc.offset = pos if payload_pos is None else payload_pos
                    if exc.file is None:
                        exc.file = self.file_name
                    if exc.type_code is None:
                        exc.type_code = type_code
                    raise
                except Exception as exc:  # any decoder failure is a typed error (cause kept)
                    raise self._err(CorruptEventError,
                                    f"cannot decode {_type_name(type_code)} event: {exc}",
                                    pos, type_code) from exc
            if is_fde:
                self._apply_fde(event, pos)
            del raw, body
            if start is None or pos >= start:
                yield event
                if type_code == _PAYLOAD and self.expand_payloads:
                    yield from self._expand(event)
            pos = next_pos
            if not jumped and start is not None and pos < start and (is_fde or type_code == _START_V3):
                # seek straight to the requested position after the first FORMAT_DESCRIPTION
                jumped = True
                pos = start

    # -- helpers --------------------------------------------------------------

    def _detect_version(self, src: Any) -> None:
        """Binlog version rules: FORMAT_DESCRIPTION => 4; START_V3 of 13+56 => 1,
        of 19+56 => 3 (binlog_version field 2 => unsupported); else unsupported."""
        ctx = self.context
        head = src.get(4, 19)
        if len(head) < 13:
            raise self._err(TruncatedEventError,
                            f"truncated first event: {len(head)} bytes of header", 4)
        type_code = head[4]
        size = _U32.unpack_from(head, 9)[0]
        if type_code == _FDE:
            ctx.binlog_version = 4
            return
        if type_code == _START_V3:
            body_at = 4 + (13 if size == 13 + 56 else 19)
            ver_raw = src.get(body_at, 2)
            if size not in (13 + 56, 19 + 56):
                raise self._err(UnsupportedVersionError,
                                f"START_EVENT_V3 of {size} bytes: neither binlog v1 (69) nor v3 (75)",
                                4, type_code)
            if len(ver_raw) < 2:
                raise self._err(TruncatedEventError, "truncated START_EVENT_V3", 4, type_code)
            declared = ver_raw[0] | (ver_raw[1] << 8)
            version = 1 if size == 13 + 56 else 3
            if declared != version:
                raise self._err(UnsupportedVersionError,
                                f"unsupported binlog version {declared} (START_EVENT_V3 of {size} bytes)",
                                4, type_code)
            ctx.binlog_version = version
            ctx.header_length = 13 if version == 1 else 19
            ctx.post_header_lengths = _V1_POST_HEADER if version == 1 else _V3_POST_HEADER
            ctx.checksum_alg = CHECKSUM_OFF
            sv = src.get(body_at + 2, 50)
            ctx.server_version = _decode_version(sv)
            return
        raise self._err(UnsupportedVersionError,
                        f"first event is {_type_name(type_code)}, not FORMAT_DESCRIPTION or "
                        "START_EVENT_V3: unknown binlog version", 4, type_code)

    def _fde_alg(self, raw: memoryview, pos: int) -> int | None:
        """The checksum algorithm a FORMAT_DESCRIPTION declares (None: no alg byte)."""
        if len(raw) < 19 + 57:
            raise self._err(CorruptEventError, f"FORMAT_DESCRIPTION too short ({len(raw)} bytes)",
                            pos, _FDE)
        version = _decode_version(raw[21:71])
        if not fde_has_checksum_alg(version):
            return None
        alg = raw[len(raw) - 5]
        if alg not in (CHECKSUM_OFF, CHECKSUM_CRC32, CHECKSUM_UNDEFINED):
            raise self._err(CorruptEventError,
                            f"FORMAT_DESCRIPTION declares unknown checksum algorithm {alg}", pos, _FDE)
        return alg

    def _apply_fde(self, event: Event, pos: int) -> None:
        ctx = self.context
        bv = getattr(event, "binlog_version", None)
        if bv != 4:
            raise self._err(UnsupportedVersionError,
                            f"FORMAT_DESCRIPTION declares binlog version {bv}; only 4 is defined",
                            pos, _FDE)
        hl = event.header_length  # type: ignore[attr-defined]
        if hl < 19:
            raise self._err(CorruptEventError, f"FORMAT_DESCRIPTION header length {hl} < 19", pos, _FDE)
        ctx.binlog_version = 4
        ctx.server_version = event.server_version  # type: ignore[attr-defined]
        ctx.header_length = hl
        post = event.post_header_lengths  # type: ignore[attr-defined]
        ctx.event_type_permutation = None
        if _is_drop_version(ctx.server_version):
            if len(post) != 22:
                raise self._err(UnsupportedVersionError,
                                f"pre-GA server {ctx.server_version} with {len(post)} event types "
                                "(22 expected)", pos, _FDE)
            perm = _DROP_PERMUTATION
            tmp = bytearray(22)
            for i in range(1, 23):
                tmp[perm[i] - 1] = post[i - 1]
            post = bytes(tmp)
            ctx.event_type_permutation = perm
        ctx.post_header_lengths = post
        alg = event.checksum_alg  # type: ignore[attr-defined]
        ctx.checksum_alg = CHECKSUM_CRC32 if alg == CHECKSUM_CRC32 else CHECKSUM_OFF
        self.format_descriptions.append(event)

    def _expand(self, event: Event) -> Iterator[Event]:
        from binlog_parser.decoders.payload import iter_payload_events

        yield from iter_payload_events(event, self.context, file_name=self.file_name,
                                       max_event_size=self.max_event_size, dispatch=self.dispatch,
                                       max_payload_size=self.max_payload_size)


def _type_name(type_code: int) -> str:
    from binlog_parser.constants import event_type_name

    return event_type_name(type_code)


# ---------------------------------------------------------------------------
# Functional API
# ---------------------------------------------------------------------------


def read_events(
    source: Source,
    *,
    file_name: str | None = None,
    verify_checksum: bool = True,
    lenient: bool = False,
    start_position: int | None = None,
    stop_position: int | None = None,
    context: DecodeContext | None = None,
    source_offset: int | None = None,
    max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
    expand_payloads: bool = True,
    max_payload_size: int | None = None,
) -> Iterator[Event]:
    """Lazily yield the events of ``source`` (see :class:`BinlogReader`)."""
    return iter(
        BinlogReader(
            source,
            file_name=file_name,
            verify_checksum=verify_checksum,
            lenient=lenient,
            start_position=start_position,
            stop_position=stop_position,
            context=context,
            source_offset=source_offset,
            max_event_size=max_event_size,
            expand_payloads=expand_payloads,
            max_payload_size=max_payload_size,
        )
    )


def read_format_description(head: Source, *, file_name: str | None = None,
                            verify_checksum: bool = True) -> DecodeContext:
    """Decode a file's head (magic + first event(s)) into a :class:`DecodeContext`.

    ``head`` is the file (path/stream) or its first bytes: enough to cover the first
    FORMAT_DESCRIPTION (a few hundred bytes; 64 KiB is always plenty). The returned
    context is what :func:`read_events` needs to decode from an offset inside the file.
    The context is fresh (no TABLE_MAPs): a split must start at a transaction boundary.
    """
    reader = BinlogReader(head, file_name=file_name, verify_checksum=verify_checksum,
                          expand_payloads=False)
    it = iter(reader)
    try:
        for event in it:
            if event.header.type_code in (_FDE, _START_V3):
                break
    finally:
        close = getattr(it, "close", None)
        if close:
            close()
    if reader.context.binlog_version == 4 and not reader.format_descriptions:
        raise NotABinlogError("no FORMAT_DESCRIPTION event at the head of the file",
                              file=reader.file_name, offset=4)
    ctx = reader.context
    ctx.table_maps = {}
    ctx.table_map_cache = {}
    return ctx


@dataclass(frozen=True, slots=True)
class HeaderInfo:
    """One event found by :func:`scan_headers`: its position, size and type only."""

    pos: int
    next_pos: int
    type_code: int
    event_size: int
    timestamp: int
    server_id: int
    flags: int


def scan_headers(source: Source, *, file_name: str | None = None,
                 start_position: int | None = None, stop_position: int | None = None,
                 verify_checksum: bool = False,
                 max_event_size: int = DEFAULT_MAX_EVENT_SIZE) -> Iterator[EventHeader]:
    """Header-only fast scan: yields each event's :class:`EventHeader`, decoding no body.

    FORMAT_DESCRIPTIONs are still decoded (they define the header length and checksum
    alg); checksums are verified only when ``verify_checksum``. Used to benchmark raw
    framing and to split files at transaction boundaries (GTID / XID positions).
    """
    from binlog_parser.decoders import CORE_DECODERS

    skip_all: dict[int, Decoder] = {_FDE: CORE_DECODERS[_FDE], _START_V3: CORE_DECODERS[_START_V3]}

    def _header_only(header: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
        return _HeaderEvent(header)

    # every code a header byte can hold (a plain dict: its .get is not a Python call per event)
    dispatch: dict[int, Decoder] = {code: skip_all.get(code, _header_only) for code in range(256)}

    reader = BinlogReader(source, file_name=file_name, verify_checksum=verify_checksum,
                          start_position=start_position, stop_position=stop_position,
                          max_event_size=max_event_size, expand_payloads=False,
                          dispatch=dispatch)
    for event in reader:
        yield event.header


@dataclass(frozen=True, slots=True)
class _HeaderEvent(Event):
    pass
