"""The sans-I/O framing core: bytes in, events or "need more data" out (in the way of h11).

:class:`EventFramer` never reads a file or a socket. The caller hands it bytes with
:meth:`EventFramer.receive_data` (and :meth:`EventFramer.receive_eof` at the end) and asks
for :meth:`EventFramer.next_event`, which returns an :class:`~binlog_parser.events.Event`,
a :class:`NeedData` (which bytes are missing, and where) or :data:`END`. The path/stream
reader (``binlog_parser.reader``), the head/tail probe (``binlog_parser.probe``) and the replication stream all
drive this one core, so framing rules (magic, binlog version, common header, sizes,
checksums, FORMAT_DESCRIPTION bookkeeping, dispatch to body decoders) exist once. A caller that
would only pass each request on to a :class:`~binlog_parser.feeding.StreamFeeder` (the path and
stream readers) hands the feeder over instead (pull mode): the core then asks it for the bytes
itself and yields events only, one generator fewer between the core and the consumer.

Memory is bounded by the caller's feeding: the core keeps only the bytes from the current
event on (older bytes are dropped when new data arrives) and checks event sizes before asking
for a body. Events are decoded from zero-copy memoryviews into the buffer it was given.
"""

from __future__ import annotations

import dataclasses
import struct
import zlib
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Any, Final, NoReturn, cast

from binlog_parser._native_framing import event_types
from binlog_parser.constants import (
    BINLOG_MAGIC,
    CHECKSUM_CRC32,
    CHECKSUM_OFF,
    CHECKSUM_UNDEFINED,
    LOG_EVENT_BINLOG_IN_USE_F,
    EventType,
    event_type_name,
)
from binlog_parser.context import DecodeContext, Decoder
from binlog_parser.decoders.payload import open_payload
from binlog_parser.errors import (
    BinlogError,
    BinlogValueError,
    ChecksumMismatchError,
    CorruptEventError,
    NotABinlogError,
    TruncatedEventError,
    UnsupportedVersionError,
)
from binlog_parser.events import (
    Event,
    FormatDescriptionEvent,
    TransactionPayloadEvent,
    UnknownEvent,
)
from binlog_parser.feeding import StreamFeeder
from binlog_parser.header import COMMON_HEADER, new_event_header
from binlog_parser.limits import DEFAULT_MAX_EVENT_SIZE
from binlog_parser.server_version import (
    DROP_PERMUTATION,
    decode_version,
    fde_has_checksum_alg,
    is_drop_version,
)

_HEADER = COMMON_HEADER
_HEADER_V1 = struct.Struct("<IBII")  # timestamp, type, server_id, event_size
_U32 = struct.Struct("<I")

_FDE = int(EventType.FORMAT_DESCRIPTION)
_START_V3 = int(EventType.START_V3)
_PAYLOAD = int(EventType.TRANSACTION_PAYLOAD)
_NO_LIMIT = 1 << 63  # max_event_size as the compiled loop takes it (u64)
#: type code -> is it an event type some server writes (the resync scan's first filter)
_KNOWN_TYPES = bytes(1 if code and code in {int(t) for t in EventType} else 0 for code in range(256))



def event_size_at(data: bytes | bytearray | memoryview, pos: int) -> int | None:
    """The ``event_size`` field of the common header starting at ``pos`` (None when the bytes
    end before it): how far the event reaches, without decoding anything else."""
    if pos + 13 > len(data):
        return None
    return int(_U32.unpack_from(data, pos + 9)[0])


def crc32_trailer_ok(raw: bytes | bytearray | memoryview) -> bool:
    """Whether an event's last 4 bytes are the CRC32 of the bytes before them (a checksummed
    event other than a FORMAT_DESCRIPTION, whose in-use flag the CRC does not cover)."""
    end = len(raw) - 4
    return end >= 0 and zlib.crc32(raw[:end]) == _U32.unpack_from(raw, end)[0]


# Post-header lengths of binlog versions 1 and 3 (MySQL's Format_description_log_event
# constructor for binlog_ver 1/3): index = type_code - 1, for types 1..14.
_V3_POST_HEADER = bytes([56, 11, 0, 8, 0, 18, 0, 4, 4, 4, 4, 18, 0, 0])
_V1_POST_HEADER = bytes([56, 11, 0, 0, 0, 18, 0, 4, 4, 4, 4, 18, 0, 0])


@dataclass(frozen=True, slots=True)
class NeedData:
    """The core cannot go on before it holds ``size`` more bytes starting at file ``offset``.

    ``offset`` is the end of what the core holds, or further on when it skips ahead (a
    ``start_position`` jump): the caller then seeks there or reads and drops the gap.
    """

    offset: int
    size: int


@dataclass(frozen=True, slots=True)
class EndOfData:
    """No more events: the data ended at an event boundary or ``stop_position`` was reached."""


#: The one :class:`EndOfData` value :meth:`EventFramer.next_event` returns.
END: Final = EndOfData()

#: ``on_error`` values: stop at the first bad event, or step over it and go on.
ON_ERROR_RAISE: Final = "raise"
ON_ERROR_RESYNC: Final = "resync"
#: At most this many bytes of a skipped range are kept in :attr:`SkippedBytes.head`.
MAX_SKIPPED_HEAD = 64 << 10


@dataclass(frozen=True, slots=True)
class SkippedBytes:
    """File bytes ``[start, end)`` a resynchronising reader could not decode and stepped over.

    Yielded in place of the bad event (``on_error="resync"``), so that nothing is skipped
    silently: ``error`` says why (file, offset, event type), ``head`` holds the first bytes of
    the range (at most :data:`MAX_SKIPPED_HEAD`) and ``found_by`` how the next event boundary
    was found: ``"event_size"`` (the bad event's own size: exactly one event skipped),
    ``"next_position"`` (its header's next-position field), ``"scan"`` (the first later offset
    holding a header whose type, size, next-position and CRC32 check out), ``"end_of_data"``
    (none: everything to the end is skipped) or ``"payload"`` (the rest of a
    TRANSACTION_PAYLOAD whose embedded events stopped decoding; the payload event itself
    was yielded).
    """

    start: int
    end: int
    error: BinlogError
    head: bytes
    found_by: str

    @property
    def size(self) -> int:
        return self.end - self.start


#: The checked common header of the event being framed: (timestamp, type_code, server_id,
#: size, log_pos, flags, raw_type, header_len). A tuple, not a dataclass: it is built once
#: per event in the hot loop.
_RawHeader = tuple[int, int, int, int, int, int, "int | None", int]


class EventFramer:
    """Frame and decode the events of one binlog from bytes fed in by the caller.

    ``expect_magic``: the data starts at file offset 0 with ``\\xfebin`` and the binlog
    version is detected from the first event; otherwise ``context`` (from the file's head)
    says how to decode and the data starts at ``first_position``. ``total_size``, when
    known, turns an event running past the end into a clear "only N remain" error before
    any body is asked for. The other options are :class:`binlog_parser.reader.BinlogReader`'s.

    ``feeder``: the framer answers its own data requests from it (``feeder.supply``) instead of
    yielding a :class:`NeedData`: the pull mode of a caller that would only pass each request on
    (the path and stream readers). Its events then reach the consumer through one generator
    fewer (one Python frame per event, which shows on binlogs of small events). The framer
    itself still never reads: the feeder does.

    ``headers_only``: yield each event's :class:`~binlog_parser.header.EventHeader` in place of
    the event (bodies are still decoded by ``dispatch``, and their errors raised): what
    :func:`binlog_parser.reader.scan_headers` wants, with no wrapper object to build and unwrap
    per event (a fifth of a compiled header scan). ``header_types``: with ``headers_only``, only
    the headers of these event types are yielded; the others are framed and passed over
    without a header built (FORMAT_DESCRIPTIONs still take effect): a scan for split points
    wants only transaction starts and XIDs, and (``header_from``) none before its next cut.
    """

    def __init__(
        self,
        context: DecodeContext,
        dispatch: dict[int, Decoder],
        *,
        expect_magic: bool,
        first_position: int,
        file_name: str | None = None,
        total_size: int | None = None,
        verify_checksum: bool = True,
        lenient: bool = False,
        start_position: int | None = None,
        stop_position: int | None = None,
        max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
        expand_payloads: bool = True,
        max_payload_size: int | None = None,
        payload_pos: int | None = None,
        on_error: str = ON_ERROR_RAISE,
        feeder: StreamFeeder | None = None,
        headers_only: bool = False,
        header_types: frozenset[int] | None = None,
    ) -> None:
        if on_error not in (ON_ERROR_RAISE, ON_ERROR_RESYNC):
            raise ValueError(f"on_error must be {ON_ERROR_RAISE!r} or {ON_ERROR_RESYNC!r}, not {on_error!r}")
        self.on_error = on_error
        self.context = context
        self.dispatch = dispatch
        self.file_name = file_name
        self.total_size = total_size
        self.verify_checksum = verify_checksum
        self.lenient = lenient
        self.start_position = start_position
        self.stop_position = stop_position
        self.max_event_size = max_event_size
        self.expand_payloads = expand_payloads
        self.max_payload_size = max_payload_size
        self._payload_pos = payload_pos
        self._expect_magic = expect_magic
        self._feeder = feeder
        self.headers_only = headers_only
        #: the event types whose headers are yielded (None: all); only with ``headers_only``
        self.header_types = header_types if headers_only else None
        #: with ``header_types``, the headers of events before this offset are passed over
        #: too. A consumer that needs no header before some offset may raise it while
        #: iterating (a hint: the compiled loop sees it when it next starts, at the latest
        #: when the framer is given more bytes)
        self.header_from = 0
        #: the same, one byte per type code, for the compiled loop
        self._header_type_table = (None if self.header_types is None
                                   else bytes(t in self.header_types for t in range(256)))
        #: offset of the next event to frame (after the end: where it stopped)
        self.position: int = first_position
        #: every FORMAT_DESCRIPTION seen, in order
        self.format_descriptions: list[Event] = []
        self._buf: bytes | memoryview = b""
        self._mv = memoryview(b"")
        self._buf_pos = first_position  # file offset of _buf[0]
        self._eof = False
        self._native = event_types()
        self._frames = (self._run_resync(first_position) if on_error == ON_ERROR_RESYNC and payload_pos is None
                        else self._run(first_position))

    # -- the sans-I/O interface ------------------------------------------------

    def receive_data(self, data: bytes | bytearray | memoryview, offset: int | None = None) -> None:
        """Hand over file bytes starting at ``offset`` (default: the end of what is held).

        Bytes before the event being framed are dropped; a gap (``offset`` past the end of
        what is held, after a :class:`NeedData` asking for it) drops everything held. The data
        is not copied when nothing is held: keep it unchanged while the core uses it.
        """
        mv = data.cast("B") if isinstance(data, memoryview) else memoryview(data)
        end = self._buf_pos + len(self._buf)
        if offset is None:
            offset = end
        if not len(self._buf) or offset > end:
            self._buf, self._buf_pos = (data if isinstance(data, bytes) else mv), offset
        elif offset == end:
            keep_from = max(self._buf_pos, min(self.position, end)) - self._buf_pos
            keep = self._buf[keep_from:]
            if len(keep):
                self._buf = b"".join((keep, mv))
            else:
                self._buf = data if isinstance(data, bytes) else mv
            self._buf_pos += keep_from
        else:
            raise ValueError(f"data at offset {offset} overlaps the {len(self._buf)} bytes held "
                             f"from offset {self._buf_pos}")
        self._mv = memoryview(self._buf)

    def receive_eof(self) -> None:
        """No more bytes will come: a short event is now truncated, not pending."""
        self._eof = True

    def next_event(self) -> Event | SkippedBytes | NeedData | EndOfData:
        """The next event, what data is missing for it, or :data:`END` (and, with
        ``on_error="resync"``, a :class:`SkippedBytes` in place of each bad event)."""
        return next(self._frames, END)

    def events(self) -> Iterator[Event | NeedData]:
        """Events and :class:`NeedData` requests until the end (feed before resuming)."""
        if self.on_error == ON_ERROR_RESYNC:
            raise ValueError("on_error='resync' yields SkippedBytes records too: iterate .records()")
        return cast(Iterator[Event | NeedData], self._frames)

    def records(self) -> Iterator[Event | SkippedBytes | NeedData]:
        """:meth:`events`, plus a :class:`SkippedBytes` for each bad event with ``on_error="resync"``."""
        return self._frames

    # -- buffer access -----------------------------------------------------------

    def _get(self, pos: int, n: int) -> memoryview | None:
        """Bytes ``[pos, pos + n)``: None when not all held yet (short only after EOF)."""
        start = pos - self._buf_pos
        if start >= 0 and start + n <= len(self._buf):
            return self._mv[start:start + n]
        if start < 0:
            raise CorruptEventError(f"reader moved backwards to {pos}", offset=pos)
        if self._eof:
            return self._mv[start:start + n]
        return None

    def _need(self, pos: int, n: int) -> NeedData:
        end = self._buf_pos + len(self._buf)
        if pos >= end:
            return NeedData(pos, n)
        return NeedData(end, pos + n - end)

    def _fetch(self, pos: int, n: int) -> Iterator[NeedData]:
        """``yield from`` this, then read the bytes with :meth:`_held`."""
        while self._get(pos, n) is None:
            yield from self._ask(self._need(pos, n))

    def _ask(self, need: NeedData) -> Iterator[NeedData]:
        """``yield from`` this to get the bytes ``need`` names: the request goes to the caller,
        or, in pull mode, straight to the feeder (it hands the bytes, or the EOF, to the framer)."""
        if self._feeder is None:
            yield need
        else:
            self._feeder.supply(self, need.offset, need.size)

    def _held(self, pos: int, n: int) -> memoryview:
        got = self._get(pos, n)
        assert got is not None
        return got

    def _err(self, cls: type[BinlogError], msg: str, offset: int | None,
             type_code: int | None = None) -> BinlogError:
        off = offset
        if self._payload_pos is not None:
            msg = f"in TRANSACTION_PAYLOAD at {self._payload_pos}, payload offset {offset}: {msg}"
            off = self._payload_pos
        return cls(msg, file=self.file_name, offset=off, type_code=type_code)

    # -- the framing loop ----------------------------------------------------------

    def _run_resync(self, pos: int) -> Iterator[Event | SkippedBytes | NeedData]:
        """The framing loop of ``on_error="resync"``: a bad event becomes a :class:`SkippedBytes`
        and framing goes on at the next boundary. Errors before the first FORMAT_DESCRIPTION,
        in one, or a truncated tail with nothing decodable after it still raise."""
        pos = yield from self._start(pos)
        while True:
            try:
                yield from self._run(pos, started=True)
                return
            except BinlogError as exc:
                if exc.type_code == _FDE or (self._expect_magic and not self.format_descriptions
                                             and self.context.binlog_version == 4):
                    raise  # nothing (or nothing trusted) says how to frame what follows
                skip = yield from self._resync(self.position, exc)
                if skip is None:
                    raise
                if self.start_position is None or skip.end > self.start_position:
                    yield skip  # (bytes wholly before start_position were not asked for)
                pos = skip.end

    def _run(self, pos: int, started: bool = False) -> Iterator[Event | SkippedBytes | NeedData]:
        if not started:
            pos = yield from self._start(pos)
        ctx = self.context
        start, stop = self.start_position, self.stop_position
        get, header_of, checksum_of, dispatch = self._get, self._header, self._checksum, self.dispatch
        payload_pos, headers_only, header_types = self._payload_pos, self.headers_only, self.header_types
        verify = self.verify_checksum
        jumped = not self._expect_magic
        while True:
            frames = self._native_frames(pos)
            if frames is not None:  # the compiled loop, while the events are plain
                yield from frames
                pos = frames.pos
                del frames  # (it holds the buffer it framed)
            self.position = pos
            if stop is not None and pos >= stop:
                return
            min_hdr = 13 if ctx.binlog_version == 1 else 19
            head = get(pos, min_hdr)
            while head is None:
                yield from self._ask(self._need(pos, min_hdr))
                head = get(pos, min_hdr)
            if len(head) < min_hdr:
                if not head:
                    return
                raise self._err(TruncatedEventError,
                                f"truncated event header: {len(head)} of {min_hdr} bytes before end of data",
                                pos)
            timestamp, type_code, server_id, size, log_pos, flags, raw_type, header_len = header_of(head, pos)
            raw = get(pos, size)
            while raw is None:
                yield from self._ask(self._need(pos, size))
                raw = get(pos, size)
            if len(raw) < size:
                raise self._err(TruncatedEventError,
                                f"truncated event: header says {size} bytes, only {len(raw)} remain",
                                pos, type_code)
            is_fde = type_code == _FDE
            if is_fde:
                end, checksum_ok = checksum_of(raw, pos, size, type_code, header_len, True)
            elif ctx.checksum_alg != CHECKSUM_CRC32:
                end, checksum_ok = size, None
            elif not verify and size - 4 >= header_len:  # CRC room, not verified (header scans)
                end, checksum_ok = size - 4, None
            else:
                end, checksum_ok = checksum_of(raw, pos, size, type_code, header_len, False)
            next_pos = pos + size
            # before the start, or of a type whose header is not wanted: framed, not decoded
            passed_over = header_types is not None and (type_code not in header_types or pos < self.header_from)
            if (passed_over or (start is not None and pos < start)) and not is_fde and type_code != _START_V3:
                pos = next_pos
                continue
            header = new_event_header(pos, next_pos, timestamp, type_code, server_id, size, log_pos,
                                      flags, checksum_ok, payload_pos,
                                      raw_type if raw_type != type_code else None)
            decoder = dispatch.get(type_code)
            if decoder is None:
                event: Event = UnknownEvent.from_body(header, raw[header_len:end])
            else:
                try:
                    event = decoder(header, raw[header_len:end], ctx)
                except Exception as exc:  # any decoder failure is a typed error (cause kept)
                    self._raise_decoder_failed(exc, pos, type_code)
            if is_fde:
                self._apply_fde(event, pos)
            del raw
            if (start is None or pos >= start) and not passed_over:
                yield header if headers_only else event
                if type_code == _PAYLOAD and self.expand_payloads:
                    yield from self._expand_guarded(event, pos, next_pos)
            pos = next_pos
            if not jumped and start is not None and pos < start and (is_fde or type_code == _START_V3):
                # go straight to the requested position after the first FORMAT_DESCRIPTION
                jumped = True
                pos = start

    def _native_frames(self, pos: int) -> Any:
        """The compiled framing loop from ``pos`` on (``binlog_parser._native_framing``): an
        iterator of events whose ``pos`` is where it stopped. None: no extension, or framing
        the Python loop alone does (skipping to ``start_position``, a pre-GA server's type
        permutation)."""
        native, ctx, start = self._native, self.context, self.start_position
        if native is None or ctx.event_type_permutation is not None or (start is not None and pos < start):
            return None
        return native.frames(self, self._mv, self._buf_pos, pos, ctx, self.dispatch, self.stop_position,
                             self.total_size, self.verify_checksum, min(self.max_event_size, _NO_LIMIT),
                             self.expand_payloads, self._payload_pos, self.headers_only,
                             self._header_type_table, self.header_from)

    def _start(self, pos: int) -> Generator[NeedData, None, int]:
        """Check the magic and detect the binlog version; the generator's value: first event."""
        if not self._expect_magic:
            if pos == 0:
                yield from self._fetch(0, 4)
                if bytes(self._held(0, 4)) == BINLOG_MAGIC:
                    return 4
            return pos
        yield from self._fetch(0, 4)
        magic = bytes(self._held(0, 4))
        if len(magic) < 4:
            if magic and magic == BINLOG_MAGIC[: len(magic)]:
                raise self._err(TruncatedEventError,
                                f"file ends inside the magic header ({len(magic)} bytes)", 0)
            raise self._err(NotABinlogError, "not a binlog: no \\xfebin magic", 0)
        if magic != BINLOG_MAGIC:
            raise self._err(NotABinlogError,
                            f"not a binlog: magic is {magic.hex()}, expected fe62696e", 0)
        yield from self._detect_version()
        return 4

    def _header(self, head: memoryview, pos: int) -> _RawHeader:
        """Unpack and check the common header of the event at ``pos``."""
        ctx = self.context
        if ctx.binlog_version == 1:
            timestamp, type_code, server_id, size = _HEADER_V1.unpack_from(head, 0)
            log_pos, flags = 0, 0
        else:
            timestamp, type_code, server_id, size, log_pos, flags = _HEADER.unpack_from(head, 0)
        raw_type = None
        perm = ctx.event_type_permutation
        if perm is not None and type_code < len(perm):
            raw_type, type_code = type_code, perm[type_code]
        header_len = 19 if type_code == _FDE else ctx.header_length
        if size < header_len:
            raise self._err(CorruptEventError,
                            f"event size {size} is smaller than its header ({header_len} bytes)",
                            pos, type_code)
        total = self.total_size
        if total is not None and pos + size > total:
            raise self._err(TruncatedEventError,
                            f"truncated event: header says {size} bytes, only {total - pos} remain",
                            pos, type_code)
        if size > self.max_event_size:
            raise self._err(CorruptEventError,
                            f"event size {size} exceeds the limit of {self.max_event_size} bytes",
                            pos, type_code)
        return timestamp, type_code, server_id, size, log_pos, flags, raw_type, header_len

    def _checksum(self, raw: memoryview, pos: int, size: int, type_code: int, header_len: int,
                  is_fde: bool) -> tuple[int, bool | None]:
        """(end of the body, checksum verdict): raises on a mismatch unless lenient."""
        verify = self.verify_checksum
        checksum_ok = None
        if is_fde:
            alg = self._fde_alg(raw, pos)
            has_trailer = alg is not None
            if has_trailer and size < 19 + 57 + 5:
                raise self._err(CorruptEventError, f"FORMAT_DESCRIPTION too short ({size} bytes)",
                                pos, type_code)
            end = size - 4 if has_trailer else size
            if alg == CHECKSUM_CRC32 and verify:
                c = zlib.crc32(raw[:17])
                c = zlib.crc32(bytes((raw[17] & ~LOG_EVENT_BINLOG_IN_USE_F & 0xFF, raw[18])), c)
                c = zlib.crc32(raw[19:end], c)
                checksum_ok = c == _U32.unpack_from(raw, end)[0]
        elif self.context.checksum_alg == CHECKSUM_CRC32:
            end = size - 4
            if end < header_len:
                raise self._err(CorruptEventError, f"event size {size} leaves no room for its checksum",
                                pos, type_code)
            if verify:
                checksum_ok = crc32_trailer_ok(raw[:size])
        else:
            end = size
        if checksum_ok is False and not self.lenient:
            raise self._err(ChecksumMismatchError,
                            f"CRC32 mismatch in {event_type_name(type_code)} event of {size} bytes",
                            pos, type_code)
        return end, checksum_ok

    def _raise_decoder_failed(self, exc: Exception, pos: int, type_code: int) -> NoReturn:
        """Raise a body decoder's failure as what it is reported as: its own framing-level
        BinlogError completed with the file and offset, anything else (a bad field or value inside
        the body, a decoder bug) a CorruptEventError naming the event, caused by ``exc``."""
        if isinstance(exc, BinlogError) and not isinstance(exc, BinlogValueError):
            raise self._located(exc, pos, type_code)
        raise self._err(CorruptEventError, f"cannot decode {event_type_name(type_code)} event: {exc}",
                        pos, type_code) from exc

    def _located(self, exc: BinlogError, pos: int, type_code: int) -> BinlogError:
        """A decoder's error completed with the file, offset and event type it lacks."""
        if exc.offset is None:
            exc.offset = pos if self._payload_pos is None else self._payload_pos
        if exc.file is None:
            exc.file = self.file_name
        if exc.type_code is None:
            exc.type_code = type_code
        return exc

    # -- resynchronising after a bad event ------------------------------------------------

    def _resync(self, pos: int, exc: BinlogError) -> Generator[NeedData, None, SkippedBytes | None]:
        """Where framing can go on after the bad event at ``pos``, as a :class:`SkippedBytes`.

        Tried in order: the event's own size, its next-position field, then a scan for the
        first later offset holding a header that checks out (:meth:`_boundary_ok`), else the
        end of the data. None for a truncated tail with no event after it: that stays a
        truncation (a file still being written), not a skip.
        """
        hl = self.context.header_length if self.context.binlog_version != 1 else 13
        yield from self._fetch_contiguous(pos, MAX_SKIPPED_HEAD)
        first = bytes(self._held(pos, MAX_SKIPPED_HEAD))  # kept before the scan drops bytes
        head = first[:hl]
        candidates: list[tuple[int, str]] = []
        if len(head) >= 13:
            size = _U32.unpack_from(head, 9)[0]
            if hl <= size <= self.max_event_size:
                candidates.append((pos + size, "event_size"))
            if len(head) >= 17 and self.context.binlog_version != 1:
                log_pos = _U32.unpack_from(head, 13)[0]
                if log_pos > pos + hl and log_pos != pos + size:
                    candidates.append((log_pos, "next_position"))
        for at, how in candidates:
            if (yield from self._boundary_ok(at)):
                return self._skipped(pos, at, exc, how, first)
        found = yield from self._scan_for_header(pos + 1)
        if found is None:
            if isinstance(exc, TruncatedEventError):
                return None
            return self._skipped(pos, self._buf_pos + len(self._buf), exc, "end_of_data", first)
        return self._skipped(pos, found, exc, "scan", first)

    def _fetch_contiguous(self, pos: int, n: int) -> Iterator[NeedData]:
        """:meth:`_fetch` without gaps: the bytes up to ``pos + n`` are asked for from the end of
        what is held, so a look ahead never makes the feeder drop bytes the scan still needs (a
        forward-only stream cannot go back). Costs at most the looked-at event's declared size,
        as framing that event would."""
        while self._get(pos, n) is None:
            end = self._buf_pos + len(self._buf)
            yield from self._ask(NeedData(end, pos + n - end))

    def _skipped(self, start: int, end: int, exc: BinlogError, how: str, first: bytes) -> SkippedBytes:
        """The record of a skip (its first bytes kept, bounded); framing moves to ``end``."""
        if exc.offset is None:
            exc.offset = start
        if exc.file is None:
            exc.file = self.file_name
        self.position = end
        return SkippedBytes(start, end, exc, first[:end - start], how)

    def _scan_for_header(self, pos: int) -> Generator[NeedData, None, int | None]:
        """The first offset from ``pos`` on whose header checks out, None at the end of data.

        A byte-by-byte scan, cheap per offset (type code, size and next-position first; the
        CRC32 only when those agree): it only runs after a bad event whose size is a lie. A
        relay log's events carry their source's next-positions: there only the bad event's own
        size (CRC32-checked) can resynchronise.
        """
        hl = self.context.header_length
        known, max_size, total = _KNOWN_TYPES, self.max_event_size, self.total_size
        if self.context.binlog_version == 1:
            return None  # no next-position field: nothing to tell a header from data
        v3 = self.context.binlog_version == 3
        while True:
            self.position = pos  # bytes before the cursor may be dropped
            yield from self._fetch_contiguous(pos, hl)
            if len(self._held(pos, hl)) < hl:
                return None
            mv, base = self._mv, self._buf_pos
            last = len(mv) - hl
            k = pos - base
            while k <= last:
                if known[mv[k + 4]]:
                    size = _U32.unpack_from(mv, k + 9)[0]
                    at = base + k
                    if hl <= size <= max_size and (total is None or at + size <= total):
                        log_pos = _U32.unpack_from(mv, k + 13)[0]
                        if log_pos == at + size or (v3 and log_pos == at):
                            break
                k += 1
            else:
                pos = base + last + 1
                continue
            at = base + k
            if (yield from self._boundary_ok(at)):
                return at
            pos = at + 1

    def _boundary_ok(self, at: int) -> Generator[NeedData, None, bool]:
        """Is ``at`` an event boundary: the end of the data, or a header whose type is known and
        whose size fits, and then whose CRC32 matches (checksummed files: the next-position may
        be anything, as in a relay log) or whose next-position is ``at + size`` (v3 also: ``at``)."""
        ctx = self.context
        hl = ctx.header_length if ctx.binlog_version != 1 else 13
        yield from self._fetch_contiguous(at, hl)
        head = self._held(at, hl)
        if not len(head):  # the exact end of the data is a boundary; past it is not
            return self._eof and at == self._buf_pos + len(self._buf)
        if len(head) < hl or not _KNOWN_TYPES[head[4]]:
            return False
        size = _U32.unpack_from(head, 9)[0]
        if size < hl or size > self.max_event_size or (self.total_size is not None and at + size > self.total_size):
            return False
        if not (ctx.checksum_alg == CHECKSUM_CRC32 and head[4] != _FDE):
            if ctx.binlog_version == 1:
                return True  # no next-position, no CRC: type and size are all there is
            log_pos = _U32.unpack_from(head, 13)[0]
            return log_pos == at + size or (ctx.binlog_version == 3 and log_pos == at)
        yield from self._fetch_contiguous(at, size)
        raw = self._held(at, size)
        return len(raw) == size and crc32_trailer_ok(raw)

    def _expand_guarded(self, event: Event, pos: int, next_pos: int) -> Iterator[Event | SkippedBytes]:
        """:meth:`_expand`; in resync mode an error inside the payload skips the rest of it."""
        if self.on_error != ON_ERROR_RESYNC:
            yield from self._expand(event)
            return
        try:
            yield from self._expand(event)
        except BinlogError as exc:
            raw = self._get(pos, min(next_pos - pos, MAX_SKIPPED_HEAD))
            yield SkippedBytes(pos, next_pos, exc, bytes(raw) if raw is not None else b"", "payload")

    # -- version, FORMAT_DESCRIPTION, payloads -----------------------------------------

    def _detect_version(self) -> Iterator[NeedData]:
        """Binlog version rules: FORMAT_DESCRIPTION => 4; START_V3 of 13+56 => 1,
        of 19+56 => 3 (binlog_version field 2 => unsupported); else unsupported."""
        ctx = self.context
        yield from self._fetch(4, 19)
        head = self._held(4, 19)
        if len(head) < 13:
            raise self._err(TruncatedEventError, f"truncated first event: {len(head)} bytes of header", 4)
        type_code = head[4]
        size = _U32.unpack_from(head, 9)[0]
        if type_code == _FDE:
            ctx.binlog_version = 4
            return
        if type_code != _START_V3:
            raise self._err(UnsupportedVersionError,
                            f"first event is {event_type_name(type_code)}, not FORMAT_DESCRIPTION or "
                            "START_EVENT_V3: unknown binlog version", 4, type_code)
        body_at = 4 + (13 if size == 13 + 56 else 19)
        yield from self._fetch(body_at, 52)
        ver_raw = self._held(body_at, 2)
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
        ctx.server_version = decode_version(self._held(body_at + 2, 50))

    def _fde_alg(self, raw: memoryview, pos: int) -> int | None:
        """The checksum algorithm a FORMAT_DESCRIPTION declares (None: no alg byte)."""
        if len(raw) < 19 + 57:
            raise self._err(CorruptEventError, f"FORMAT_DESCRIPTION too short ({len(raw)} bytes)",
                            pos, _FDE)
        if not fde_has_checksum_alg(decode_version(raw[21:71])):
            return None
        alg = raw[len(raw) - 5]
        if alg not in (CHECKSUM_OFF, CHECKSUM_CRC32, CHECKSUM_UNDEFINED):
            raise self._err(CorruptEventError,
                            f"FORMAT_DESCRIPTION declares unknown checksum algorithm {alg}", pos, _FDE)
        return alg

    def _apply_fde(self, event: Event, pos: int) -> None:
        ctx = self.context
        bv = getattr(event, "binlog_version", None)
        if bv != 4 or not isinstance(event, FormatDescriptionEvent):
            raise self._err(UnsupportedVersionError,
                            f"FORMAT_DESCRIPTION declares binlog version {bv}; only 4 is defined",
                            pos, _FDE)
        hl = event.header_length
        if hl < 19:
            raise self._err(CorruptEventError, f"FORMAT_DESCRIPTION header length {hl} < 19", pos, _FDE)
        ctx.binlog_version = 4
        ctx.server_version = event.server_version
        ctx.header_length = hl
        post = event.post_header_lengths
        ctx.event_type_permutation = None
        if is_drop_version(ctx.server_version):
            if len(post) != 22:
                raise self._err(UnsupportedVersionError,
                                f"pre-GA server {ctx.server_version} with {len(post)} event types "
                                "(22 expected)", pos, _FDE)
            tmp = bytearray(22)
            for i in range(1, 23):
                tmp[DROP_PERMUTATION[i] - 1] = post[i - 1]
            post = bytes(tmp)
            ctx.event_type_permutation = DROP_PERMUTATION
        ctx.post_header_lengths = post
        ctx.checksum_alg = CHECKSUM_CRC32 if event.checksum_alg == CHECKSUM_CRC32 else CHECKSUM_OFF
        self.format_descriptions.append(event)

    def _expand(self, event: Event) -> Iterator[Event]:
        """The events inside a TRANSACTION_PAYLOAD, framed by a nested core (no checksums)."""
        assert isinstance(event, TransactionPayloadEvent)
        readable, limit = open_payload(event, file_name=self.file_name,
                                       max_payload_size=self.max_payload_size)
        inner_ctx = dataclasses.replace(self.context, checksum_alg=CHECKSUM_OFF)
        inner_ctx.table_maps = self.context.table_maps  # share TABLE_MAPs with the enclosing file
        feeder = None if isinstance(readable, bytes) else StreamFeeder(readable, position=0, seekable=False)
        inner = EventFramer(inner_ctx, self.dispatch, expect_magic=False, first_position=0,
                            file_name=self.file_name, verify_checksum=False, start_position=0,
                            max_event_size=max(19, min(self.max_event_size, limit)),
                            expand_payloads=False, payload_pos=event.header.pos, feeder=feeder,
                            headers_only=self.headers_only)
        if isinstance(readable, bytes):
            inner.receive_data(readable, 0)
            inner.receive_eof()
        yield from cast(Iterator[Event], inner.events())  # all held, or pull mode: no NeedData
