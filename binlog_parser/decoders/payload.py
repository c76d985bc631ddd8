"""TRANSACTION_PAYLOAD (40): a TLV header then the (zstd-compressed) events.

The embedded events are full events (common header included) without checksum
trailers. :func:`open_payload` gives a bounded readable of the uncompressed bytes; the
framing core (``binlog_parser.framing``) decodes the embedded events from it with the same
machinery as a file (bounded memory), each header carrying ``payload_pos``.
"""

from __future__ import annotations

from typing import Any, Protocol

import zstandard

from binlog_parser.context import DecodeContext
from binlog_parser.decoders.codec import decode_tlv
from binlog_parser.errors import CorruptEventError
from binlog_parser.events import Event, TransactionPayloadEvent
from binlog_parser.header import EventHeader

OTW_PAYLOAD_SIZE_FIELD = 1
OTW_PAYLOAD_COMPRESSION_TYPE_FIELD = 2
OTW_PAYLOAD_UNCOMPRESSED_SIZE_FIELD = 3

COMPRESSION_ZSTD = 0
COMPRESSION_NONE = 255
COMPRESSION_NAMES = {COMPRESSION_ZSTD: "ZSTD", COMPRESSION_NONE: "NONE"}


def decode_transaction_payload(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    fields = decode_tlv(body, raw_fields=frozenset())
    end = fields[-1]
    size = fields.get(OTW_PAYLOAD_SIZE_FIELD)
    ctype = fields.get(OTW_PAYLOAD_COMPRESSION_TYPE_FIELD)
    if size is None or ctype is None:
        raise CorruptEventError("TRANSACTION_PAYLOAD header lacks payload size or compression type")
    assert isinstance(size, int) and isinstance(ctype, int)
    if ctype not in COMPRESSION_NAMES:
        raise CorruptEventError(f"TRANSACTION_PAYLOAD compression type {ctype} unknown")
    if size > len(body) - end:  # type: ignore[operator]
        raise CorruptEventError(
            f"TRANSACTION_PAYLOAD payload size {size} exceeds the {len(body) - end} bytes present")  # type: ignore[operator]
    usize = fields.get(OTW_PAYLOAD_UNCOMPRESSED_SIZE_FIELD)
    payload = bytes(body[end:end + size])  # type: ignore[index,operator]
    return TransactionPayloadEvent(h, ctype, COMPRESSION_NAMES[ctype], size,
                                   usize if isinstance(usize, int) else None, payload)


def open_payload(event: TransactionPayloadEvent, *, file_name: str | None,
                 max_payload_size: int | None = None) -> tuple[BinaryReadable | bytes, int]:
    """The uncompressed bytes of a TRANSACTION_PAYLOAD as a bounded readable, and its size cap.

    Decompression is bounded: the total output may not exceed the payload's declared
    uncompressed size nor ``max_payload_size`` (default :data:`DEFAULT_MAX_PAYLOAD_SIZE`);
    the caller asks for at most one event at a time, so a zstd bomb stops at the cap instead
    of filling memory. Breaches raise ``CorruptEventError`` naming the payload event's offset.
    """
    cap = DEFAULT_MAX_PAYLOAD_SIZE if max_payload_size is None else max_payload_size
    pos = event.header.pos
    usize = event.uncompressed_size
    if usize is not None and usize > cap:
        raise CorruptEventError(
            f"TRANSACTION_PAYLOAD claims {usize} bytes uncompressed, more than the limit of {cap}",
            file=file_name, offset=pos, type_code=40)
    limit = cap if usize is None else usize
    if event.compression_type != COMPRESSION_ZSTD:
        return event.payload, limit
    stream = zstandard.ZstdDecompressor().stream_reader(event.payload, read_across_frames=True)
    return _CheckedStream(stream, limit, pos, file_name), limit


#: Default cap on the decompressed size of one TRANSACTION_PAYLOAD (the sum of its events).
DEFAULT_MAX_PAYLOAD_SIZE = 4 << 30


class BinaryReadable(Protocol):
    """What the framing core pulls uncompressed payload bytes from."""

    def read(self, n: int = -1) -> bytes: ...


class _CheckedStream:
    """A zstd stream reader that turns decompression errors into CorruptEventError and
    never yields more than ``limit`` bytes in total (one byte past it is an error)."""

    def __init__(self, stream: Any, limit: int, pos: int, file_name: str | None) -> None:
        self.stream = stream
        self.limit = limit
        self.pos = pos
        self.file_name = file_name
        self.done = 0

    def read(self, n: int | None = -1) -> bytes:
        room = self.limit - self.done + 1  # ask for one byte more than allowed to detect excess
        if n is None or n < 0 or n > room:
            n = room
        try:
            out = self.stream.read(n)
        except Exception as exc:  # zstandard.ZstdError
            raise CorruptEventError(f"TRANSACTION_PAYLOAD zstd: {exc}", file=self.file_name,
                                    offset=self.pos, type_code=40) from exc
        self.done += len(out)
        if self.done > self.limit:
            raise CorruptEventError(
                f"TRANSACTION_PAYLOAD decompresses past {self.limit} bytes (its declared "
                "uncompressed size or the payload limit)",
                file=self.file_name, offset=self.pos, type_code=40)
        return out

    def seekable(self) -> bool:
        return False

    def close(self) -> None:
        self.stream.close()
