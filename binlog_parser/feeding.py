"""Feed a framing core from a binary stream read forward in chunks.

The one place where bytes are pulled from a file-like object for
:class:`binlog_parser.framing.EventFramer` (a file, a socket's file, a decompressor): it
answers each :class:`~binlog_parser.framing.NeedData` by seeking or reading past a gap, then
reading at least the missing bytes (one chunk ahead), so at most one event plus one chunk is
held. Reads are capped at 64 MiB each: a lying event size on a short stream must not
allocate the lie.
"""

from __future__ import annotations

import io
from typing import Any, Protocol

#: Bytes read from a stream at a time.
DEFAULT_CHUNK_SIZE = 1 << 20
_MAX_READ = 1 << 26


class Readable(Protocol):
    """A binary stream: only ``read`` is required (``seek``/``seekable`` are used when there)."""

    def read(self, n: int, /) -> Any: ...


class DataSink(Protocol):
    """What is fed: :class:`binlog_parser.framing.EventFramer`'s sans-I/O input side."""

    def receive_data(self, data: bytes, offset: int | None = None) -> None: ...

    def receive_eof(self) -> None: ...


class StreamFeeder:
    """Answers a framing core's data requests from ``stream`` (positioned at ``position``)."""

    __slots__ = ("stream", "position", "chunk", "seekable")

    def __init__(self, stream: Readable, *, position: int, seekable: bool | None = None,
                 chunk: int = DEFAULT_CHUNK_SIZE) -> None:
        self.stream = stream
        self.position = position  # file offset of the stream's next byte
        self.chunk = chunk
        self.seekable = is_seekable(stream) if seekable is None else seekable

    def _read(self, n: int) -> bytes:
        out = self.stream.read(n)
        if out is None:  # non-blocking stream with nothing available
            return b""
        return out if isinstance(out, bytes) else bytes(out)

    def _skip_to(self, offset: int) -> bool:
        """Move the stream to ``offset``; False when it ends first."""
        skip = offset - self.position
        if self.seekable:
            self.stream.seek(skip, io.SEEK_CUR)  # type: ignore[attr-defined]
            self.position = offset
            return True
        while skip:
            piece = self._read(min(skip, self.chunk))
            if not piece:
                return False
            skip -= len(piece)
            self.position += len(piece)
        return True

    def supply(self, framer: DataSink, offset: int, size: int) -> None:
        """Feed ``framer`` at least ``size`` bytes from file ``offset`` (or the EOF):
        the answer to a ``NeedData(offset, size)``."""
        if offset > self.position and not self._skip_to(offset):
            framer.receive_eof()
            return
        pieces: list[bytes] = []
        have = 0
        want = max(size, self.chunk)
        while have < size:
            piece = self._read(min(want - have, _MAX_READ))
            if not piece:
                break
            pieces.append(piece)
            have += len(piece)
        if pieces:
            framer.receive_data(pieces[0] if len(pieces) == 1 else b"".join(pieces), offset)
            self.position = offset + have
        if have < size:
            framer.receive_eof()


def is_seekable(stream: Any) -> bool:
    try:
        return bool(stream.seekable())
    except (AttributeError, ValueError, OSError):
        return False


def stream_extent(stream: Any) -> tuple[int | None, int | None]:
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
