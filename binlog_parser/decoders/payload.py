"""TRANSACTION_PAYLOAD (40): a TLV header then the (zstd-compressed) events.

The embedded events are full events (common header included) without checksum
trailers. :func:`iter_payload_events` streams them out of the decompressor with the
same reader machinery (bounded memory), each header carrying ``payload_pos``.
"""

from __future__ import annotations

import dataclasses
from typing import Iterator

from binlog_parser.constants import CHECKSUM_OFF
from binlog_parser.context import DecodeContext, Decoder
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


def iter_payload_events(event: Event, ctx: DecodeContext, *, file_name: str | None,
                        max_event_size: int, dispatch: dict[int, Decoder],
                        max_payload_size: int | None = None) -> Iterator[Event]:
    """Stream the events embedded in a TRANSACTION_PAYLOAD.

    Decompression is bounded: the total output may not exceed the payload's declared
    uncompressed size nor ``max_payload_size`` (default :data:`DEFAULT_MAX_PAYLOAD_SIZE`),
    and no embedded event may claim more than ``min(max_event_size, that total)`` bytes; the
    decompressor is asked for at most one event (in <= 64 MiB pieces) at a time, so a zstd
    bomb stops at the cap instead of filling memory. Breaches raise ``CorruptEventError``
    naming the payload event's offset.
    """
    from binlog_parser.reader import BinlogReader

    assert isinstance(event, TransactionPayloadEvent)
    cap = DEFAULT_MAX_PAYLOAD_SIZE if max_payload_size is None else max_payload_size
    pos = event.header.pos
    usize = event.uncompressed_size
    if usize is not None and usize > cap:
        raise CorruptEventError(
            f"TRANSACTION_PAYLOAD claims {usize} bytes uncompressed, more than the limit of {cap}",
            file=file_name, offset=pos, type_code=40)
    limit = cap if usize is None else usize
    if event.compression_type == COMPRESSION_ZSTD:
        import zstandard

        stream = zstandard.ZstdDecompressor().stream_reader(event.payload, read_across_frames=True)
        source = _CheckedStream(stream, limit, pos, file_name)
    else:
        source = event.payload  # type: ignore[assignment]
    inner_ctx = dataclasses.replace(ctx, checksum_alg=CHECKSUM_OFF)
    inner_ctx.table_maps = ctx.table_maps  # share TABLE_MAPs with the enclosing file
    reader = BinlogReader(source, file_name=file_name, verify_checksum=False, context=inner_ctx,
                          source_offset=0, start_position=0,
                          max_event_size=max(19, min(max_event_size, limit)),
                          expand_payloads=False, dispatch=dispatch,
                          _payload_pos=pos)
    yield from reader


#: Default cap on the decompressed size of one TRANSACTION_PAYLOAD (the sum of its events).
DEFAULT_MAX_PAYLOAD_SIZE = 4 << 30


class _CheckedStream:
    """A zstd stream reader that turns decompression errors into CorruptEventError and
    never yields more than ``limit`` bytes in total (one byte past it is an error)."""

    def __init__(self, stream, limit, pos, file_name):  # type: ignore[no-untyped-def]
        self.stream = stream
        self.limit = limit
        self.pos = pos
        self.file_name = file_name
        self.done = 0

    def read(self, n: int = -1) -> bytes:
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
