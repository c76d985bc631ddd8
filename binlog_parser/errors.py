"""Typed errors. Every one names the file, the byte offset and (when known) the event type."""

from __future__ import annotations


class BinlogError(Exception):
    """Base class: a binlog could not be read as written.

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
