"""Streaming binlog reader: bytes, a path or a binary stream in, typed events out.

A thin driver of the sans-I/O core :class:`binlog_parser.framing.EventFramer`: it resolves
the source (bytes are handed over whole and zero-copy; a stream is read forward in chunks by
:class:`binlog_parser.feeding.StreamFeeder`; a path is opened by
:func:`binlog_parser.files.open_binlog_file`) and hands the core the feeder that answers its
data requests (pull mode: no per-event Python code between the core and the consumer).

Memory is bounded: a stream is read in chunks and only the bytes of the current event
(plus one chunk) are held. Event sizes are checked before anything is allocated.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import IO, TypedDict, Union, Unpack, cast

from binlog_parser.constants import EventType
from binlog_parser.context import DecodeContext, Decoder
from binlog_parser.decoders.header_only import HEADER_ONLY_DISPATCH
from binlog_parser.dispatch import build_dispatch
from binlog_parser.errors import NotABinlogError
from binlog_parser.events import Event
from binlog_parser.feeding import DEFAULT_CHUNK_SIZE, StreamFeeder, stream_extent
from binlog_parser.files import open_binlog_file
from binlog_parser.framing import ON_ERROR_RAISE, ON_ERROR_RESYNC, EventFramer, SkippedBytes
from binlog_parser.header import EventHeader
from binlog_parser.limits import DEFAULT_MAX_EVENT_SIZE
from binlog_parser.probe import head_context
from binlog_parser.server_version import fde_has_checksum_alg, server_version_split

Source = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, IO[bytes]]

__all__ = [
    "DEFAULT_CHUNK_SIZE", "DEFAULT_MAX_EVENT_SIZE", "BinlogReader", "SkippedBytes", "Source",
    "build_dispatch", "fde_has_checksum_alg", "read_events", "read_format_description",
    "read_records", "scan_headers", "server_version_split",
]

_FDE = int(EventType.FORMAT_DESCRIPTION)
_START_V3 = int(EventType.START_V3)


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

    ``on_error="resync"`` (iterate :meth:`records`): a bad event does not end the file. It
    is replaced by a :class:`~binlog_parser.framing.SkippedBytes` (its bytes, its error) and
    decoding goes on at the next event boundary: the bad event's own size or next-position
    when the bytes there check out, else the first later header whose type, size,
    next-position and CRC32 check out, else the end of the data (everything skipped is in
    the record; a truncated tail still raises :class:`TruncatedEventError`). This is
    ``mysqlbinlog --force-read``, with the skipped bytes accounted for.
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
        max_payload_size: int | None = None,
        on_error: str = ON_ERROR_RAISE,
    ) -> None:
        self.on_error = on_error
        self.verify_checksum = verify_checksum
        self.lenient = lenient
        self.start_position = start_position
        self.stop_position = stop_position
        self.max_event_size = max_event_size
        self.max_payload_size = max_payload_size
        self.expand_payloads = expand_payloads
        self.chunk_size = chunk_size
        self.dispatch = dispatch if dispatch is not None else build_dispatch()
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
        self._framing: EventFramer | None = None
        #: the framer yields each event's header in place of the event (set by scan_headers)
        self._headers_only = False
        #: with it, the event types whose headers are yielded (None: all)
        self._header_types: frozenset[int] | None = None
        #: with those, no header of an event before this offset is wanted (HeaderScan.skip_to)
        self._header_from = 0
        #: every FORMAT_DESCRIPTION seen, in order
        self.format_descriptions: list[Event] = []

    def _framer(self, first: int, total: int | None, feeder: StreamFeeder | None = None) -> EventFramer:
        framer = EventFramer(
            self.context, self.dispatch, expect_magic=self._given_context is None,
            first_position=first, file_name=self.file_name, total_size=total,
            verify_checksum=self.verify_checksum, lenient=self.lenient,
            start_position=self.start_position, stop_position=self.stop_position,
            max_event_size=self.max_event_size, expand_payloads=self.expand_payloads,
            max_payload_size=self.max_payload_size, on_error=self.on_error, feeder=feeder,
            headers_only=self._headers_only, header_types=self._header_types)
        framer.header_from = self._header_from
        self.format_descriptions = framer.format_descriptions
        self._framing = framer
        return framer

    @property
    def position(self) -> int:
        """Offset of the next event to read (after iteration: where it stopped)."""
        return self._framing.position if self._framing is not None else 0

    def _first_position(self, base: int) -> int:
        """Where decoding starts in context mode, for data beginning at file offset ``base``."""
        if self.start_position is not None and self.start_position > base:
            return self.start_position
        return base

    # -- iteration ------------------------------------------------------------

    def __iter__(self) -> Iterator[Event]:
        if self.on_error == ON_ERROR_RESYNC:
            raise ValueError("on_error='resync' yields SkippedBytes records too: iterate .records()")
        return cast(Iterator[Event], self.records())

    def records(self) -> Iterator[Event | SkippedBytes]:
        """Events, and with ``on_error="resync"`` a :class:`SkippedBytes` for each bad event."""
        src = self._source
        if isinstance(src, (bytes, bytearray, memoryview)):
            return self._iter_bytes(src)
        if isinstance(src, (str, os.PathLike)):
            return self._iter_path(src)
        return self._iter_stream(src)

    def _iter_bytes(self, src: bytes | bytearray | memoryview) -> Iterator[Event | SkippedBytes]:
        """Bytes are handed over whole (zero-copy)."""
        if self._given_context is None:
            base, first = 0, 0
        elif self._source_offset is None:
            base, first = 0, (self.start_position if self.start_position is not None else 4)
        else:
            base = self._source_offset
            first = max(base, self.start_position or base)
        framer = self._framer(first, base + len(src))
        framer.receive_data(src, base)
        framer.receive_eof()
        # complete bytes: the core never yields NeedData (no per-event check on this path)
        return cast(Iterator[Event | SkippedBytes], framer.records())

    def _iter_path(self, path: str | os.PathLike[str]) -> Iterator[Event | SkippedBytes]:
        """The file is opened at the first ``next()`` and closed at the end, on an error or
        when the iterator is closed; the framer reads it through its feeder (pull mode)."""
        first = 0
        if self._given_context is not None:
            first = self.start_position if self.start_position is not None else 4
        stream, total = open_binlog_file(path, first)
        try:
            feeder = StreamFeeder(stream, position=first, chunk=self.chunk_size)
            yield from self._pulled(self._framer(first, total, feeder))
        finally:
            stream.close()

    def _iter_stream(self, src: IO[bytes]) -> Iterator[Event | SkippedBytes]:
        here, end = stream_extent(src)
        base = 0
        first = 0
        if self._given_context is not None:
            base = self._source_offset if self._source_offset is not None else (here or 0)
            first = self._first_position(base)
        total = base + (end - here) if end is not None and here is not None else None
        feeder = StreamFeeder(src, position=base, chunk=self.chunk_size)
        yield from self._pulled(self._framer(first, total, feeder))

    @staticmethod
    def _pulled(framer: EventFramer) -> Iterator[Event | SkippedBytes]:
        """The records of a framer in pull mode (it has a feeder): it answers its own data
        requests, so no :class:`~binlog_parser.framing.NeedData` comes out and the reader's
        generator passes its events on with ``yield from``, with no Python code per event (a
        generator that filtered the requests out was a visible share of a compiled decode)."""
        return cast(Iterator[Event | SkippedBytes], framer.records())

# ---------------------------------------------------------------------------
# Functional API
# ---------------------------------------------------------------------------


class ReadOptions(TypedDict, total=False):
    """The :class:`BinlogReader` options :func:`read_events` and :func:`read_records` pass on (their
    defaults are the reader's)."""

    file_name: str | None
    verify_checksum: bool
    lenient: bool
    start_position: int | None
    stop_position: int | None
    context: DecodeContext | None
    source_offset: int | None
    max_event_size: int
    expand_payloads: bool
    max_payload_size: int | None


def read_events(source: Source, **options: Unpack[ReadOptions]) -> Iterator[Event]:
    """Lazily yield the events of ``source`` (see :class:`BinlogReader`)."""
    return iter(BinlogReader(source, **options))


def read_records(source: Source, *, on_error: str = ON_ERROR_RESYNC,
                 **options: Unpack[ReadOptions]) -> Iterator[Event | SkippedBytes]:
    """Like :func:`read_events`, resynchronising by default: bad events come out as
    :class:`~binlog_parser.framing.SkippedBytes` records (see :class:`BinlogReader`)."""
    return BinlogReader(source, on_error=on_error, **options).records()


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
    return head_context(reader.context)


class HeaderScan:
    """:func:`scan_headers` as an object whose consumer may say, while iterating, that it needs
    no header of an event before some offset (:meth:`skip_to`; only with ``types``): those are
    then passed over without a header built, as the types not asked for are. The ingest's
    split point scan wants one transaction start per cut, not every one a large file holds.
    """

    def __init__(self, source: Source, *, file_name: str | None = None,
                 start_position: int | None = None, stop_position: int | None = None,
                 verify_checksum: bool = False, max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
                 types: Iterable[int] | None = None) -> None:
        self._reader = BinlogReader(source, file_name=file_name, verify_checksum=verify_checksum,
                                    start_position=start_position, stop_position=stop_position,
                                    max_event_size=max_event_size, expand_payloads=False,
                                    dispatch=HEADER_ONLY_DISPATCH)
        self._reader._headers_only = True
        self._reader._header_types = None if types is None else frozenset(types)

    def __iter__(self) -> Iterator[EventHeader]:
        return cast(Iterator[EventHeader], self._reader.records())

    def skip_to(self, position: int) -> None:
        """No header of an event before ``position`` is wanted from now on. A hint: some may
        still come (those the compiled loop framed before it was given); none at or after it
        is left out. Raise it only."""
        self._reader._header_from = position
        if self._reader._framing is not None:
            self._reader._framing.header_from = position


def scan_headers(source: Source, *, file_name: str | None = None,
                 start_position: int | None = None, stop_position: int | None = None,
                 verify_checksum: bool = False,
                 max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
                 types: Iterable[int] | None = None) -> Iterator[EventHeader]:
    """Header-only fast scan: yields each event's :class:`EventHeader`, decoding no body;
    with ``types``, only the headers of those event types (the others are passed over
    without a header built).

    FORMAT_DESCRIPTIONs are still decoded (they define the header length and checksum
    alg); checksums are verified only when ``verify_checksum``. Used to benchmark raw
    framing and to split files at transaction boundaries (GTID / XID positions): the ingest
    plans the splits of large files with it (as a :class:`HeaderScan`), on the executors.

    The framer hands out the headers itself (``EventFramer(headers_only=True)``) and the
    compiled framing loop recognises ``decode_header_only``, so with the extension no Python
    code runs per event (why it is much cheaper than a full compiled decode of small-event binlogs).
    """
    yield from HeaderScan(source, file_name=file_name, start_position=start_position, stop_position=stop_position,
                          verify_checksum=verify_checksum, max_event_size=max_event_size, types=types)
