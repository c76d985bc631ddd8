"""Typed errors: every exception of binlog_parser (decoder, rows decoder, writer), under one root.

Why one module: a caller catches :class:`BinlogError` to tell "these bytes are not a readable (or
writable) binlog" from a bug. Errors about a file name the file, the byte offset and (when known)
the event type; the value-level ones (a field, a JSON document, a value to encode) have no file
of their own, the framing core adds it when it reports the event they were in.
"""

from __future__ import annotations


class BinlogError(Exception):
    """Base class: a binlog could not be read as written (or, for the writer, written).

    ``file`` is the file name (or None for anonymous bytes), ``offset`` the byte position
    of the event (or structure) at fault, ``type_code`` the event type when known.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        offset: int | None = None,
        type_code: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.offset = offset
        self.type_code = type_code

    def __str__(self) -> str:
        if self.file is None and self.offset is None:  # text, not a file: nothing to point at
            return self.message
        where = f"{self.file or '<bytes>'}:{self.offset if self.offset is not None else '?'}"
        return f"{where}: {self.message}"


class NotABinlogError(BinlogError):
    """The bytes do not start with the binlog magic (or a relay/network framing we know)."""


class UnsupportedVersionError(BinlogError):
    """Binlog version 2 or an unknown version: refused rather than guessed."""


class TruncatedEventError(BinlogError):
    """The data ends inside an event (normal at the tail of a file still being written)."""


class ChecksumMismatchError(BinlogError):
    """An event's CRC32 trailer does not match its bytes."""


class CorruptEventError(BinlogError):
    """An event's header or body is impossible (absurd length, bad field, loop...)."""


class GtidParseError(BinlogError, ValueError):
    """A GTID or GTID set text (or binary encoding) is not valid."""


class ReplicationProtocolError(BinlogError, ValueError):
    """The dump stream broke the protocol (bad sequence id, truncated event, unknown packet)."""


# --- inside an event body: values and fields --------------------------------------------------
# ValueError stays a second base of these: they are "a bad value", and callers inside the parser
# (gtid.py's tag read, table_map.py's metadata read, the rows decoder's bad-value pass) and
# outside it (binlake.gold.types) catch them as ValueError. When one leaves a body decoder, the
# framing core reports the event as a CorruptEventError ("cannot decode ... event: <this>").


class BinlogValueError(BinlogError, ValueError):
    """A field or value inside an event body that cannot be read, or a value that cannot be written."""


class ShortBufferError(BinlogValueError):
    """A field runs past the end of the buffer it is read from."""


class JsonDecodeError(BinlogValueError):
    """The bytes are not a valid binary JSON document."""


class JsonDiffError(BinlogValueError):
    """A diff cannot be read or cannot be applied to the before document."""


class ImpossibleTemporalValue(BinlogValueError):
    """An old-format TIME/DATETIME whose digits no server writes: the bytes are not that type
    (typically a MariaDB 5.3-format TIME/DATETIME(n) decoded without its fsp)."""


class UnsupportedColumnType(BinlogValueError):
    """A column type whose value size cannot be known: decoding must stop, never guess."""


class RowsLayoutError(BinlogValueError):
    """A rows event's images cannot be delimited (a bitmap or image past the end of the body, a
    column count that disagrees with the TABLE_MAP); the rows decoder reports it as the event's
    CorruptEventError, naming the column where it can."""


# --- the writer ---------------------------------------------------------------------------------


class EncodeError(BinlogValueError):
    """An event (or value) that cannot be written in the requested format."""


class ValueEncodeError(BinlogValueError):
    """A value that cannot be stored in its column."""


class JsonSmallFormatOverflow(BinlogError):
    """A JSON container's offsets do not fit the small (16-bit) format: the writer catches it and
    writes the large one (never seen by a caller)."""
