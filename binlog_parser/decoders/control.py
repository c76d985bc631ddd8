"""Control events: FORMAT_DESCRIPTION, START_V3, STOP, ROTATE, XID, INCIDENT,
HEARTBEAT(_V2), IGNORABLE, ROWS_QUERY."""

from __future__ import annotations

from binlog_parser.constants import (
    CHECKSUM_UNDEFINED,
    LOG_EVENT_ARTIFICIAL_F,
    LOG_EVENT_BINLOG_IN_USE_F,
    EventType,
)
from binlog_parser.context import DecodeContext
from binlog_parser.decoders.codec import decode_tlv
from binlog_parser.decoders.common import U16, U32, U64, need, nul_string, text
from binlog_parser.errors import CorruptEventError
from binlog_parser.events import (
    Event,
    FormatDescriptionEvent,
    HeartbeatEvent,
    HeartbeatV2Event,
    IgnorableEvent,
    IncidentEvent,
    LargeTransactionHeaderEvent,
    RotateEvent,
    RowsQueryEvent,
    StartEventV3,
    StopEvent,
    XidEvent,
)
from binlog_parser.header import EventHeader
from binlog_parser.server_version import fde_has_checksum_alg


def decode_format_description(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    # body: after the 19-byte header; the reader stripped the 4-byte CRC room when the
    # server version writes one, so the alg byte (if any) is the last byte.
    need(body, 57, "FORMAT_DESCRIPTION")
    binlog_version = U16.unpack_from(body, 0)[0]
    server_version = nul_string(body[2:52]).decode("latin-1")
    created = U32.unpack_from(body, 52)[0]
    header_length = body[56]
    if fde_has_checksum_alg(server_version):
        if len(body) < 58:
            raise CorruptEventError("FORMAT_DESCRIPTION without its checksum algorithm byte")
        post = bytes(body[57:len(body) - 1])
        alg = body[len(body) - 1]
    else:
        post = bytes(body[57:])
        alg = CHECKSUM_UNDEFINED
    return FormatDescriptionEvent(h, binlog_version, server_version, created, header_length, post,
                                  alg, bool(h.flags & LOG_EVENT_BINLOG_IN_USE_F))


def decode_start_v3(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    need(body, 56, "START_EVENT_V3")
    return StartEventV3(h, U16.unpack_from(body, 0)[0], nul_string(body[2:52]).decode("latin-1"),
                        U32.unpack_from(body, 52)[0])


def decode_stop(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    return StopEvent(h)


def decode_rotate(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    ph = ctx.post_header_length(EventType.ROTATE)
    if ph:
        need(body, 8, "ROTATE")
        position = U64.unpack_from(body, 0)[0]
    else:
        position = 4
    ident = bytes(body[ph:])
    if not ident:
        raise CorruptEventError("ROTATE without a file name")
    return RotateEvent(h, position, text(ident[:511]), bool(h.flags & LOG_EVENT_ARTIFICIAL_F))


def decode_xid(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    ph = ctx.post_header_length(EventType.XID)
    need(body, ph + 8, "XID")
    return XidEvent(h, U64.unpack_from(body, ph)[0])


INCIDENT_NAMES = {0: "NONE", 1: "LOST_EVENTS"}


def decode_incident(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    need(body, 2, "INCIDENT")
    number = U16.unpack_from(body, 0)[0]
    ph = max(ctx.post_header_length(EventType.INCIDENT), 2)
    message = ""
    if len(body) > ph:
        length = body[ph]
        raw = body[ph + 1:ph + 1 + length]
        if len(raw) < length:
            raise CorruptEventError(f"INCIDENT message of {length} bytes, {len(raw)} present")
        message = text(raw)
    return IncidentEvent(h, number, INCIDENT_NAMES.get(number, f"UNKNOWN_{number}"), message)


def decode_heartbeat(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    return HeartbeatEvent(h, text(body[:511]))


def decode_heartbeat_v2(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    fields = decode_tlv(body)
    name = fields.get(1)
    pos = fields.get(2)
    return HeartbeatV2Event(h, text(bytes(name)) if isinstance(name, (bytes, bytearray)) else None,
                            pos if isinstance(pos, int) else None)


def decode_ignorable(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    return IgnorableEvent(h, bytes(body))


def decode_rows_query(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    ph = ctx.post_header_length(EventType.ROWS_QUERY)
    # a 1-byte length (truncated at 255) precedes the text; the text runs to the end
    return RowsQueryEvent(h, text(body[ph + 1:]) if len(body) > ph else "")


def decode_large_transaction_header(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    ph = ctx.post_header_length(EventType.LARGE_TRANSACTION_HEADER)
    need(body, ph + 1, "LARGE_TRANSACTION_HEADER")
    b = body[ph:]
    version = b[0]
    offset = U64.unpack_from(b, 1)[0] if len(b) >= 9 else None
    ttype = b[9] if len(b) >= 10 else None
    return LargeTransactionHeaderEvent(h, version, offset, ttype, max(len(b) - 10, 0))
