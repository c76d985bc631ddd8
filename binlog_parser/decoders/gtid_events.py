"""GTID (33), ANONYMOUS_GTID (34), GTID_TAGGED (42), PREVIOUS_GTIDS (35),
TRANSACTION_CONTEXT (36), VIEW_CHANGE (37), XA_PREPARE (38)."""

from __future__ import annotations

from binlog_parser.constants import EventType
from binlog_parser.context import DecodeContext
from binlog_parser.decoders.common import U16, U32, U64, need, nul_string, text
from binlog_parser.errors import CorruptEventError
from binlog_parser.events import (
    Event,
    GtidEvent,
    PreviousGtidsEvent,
    TransactionContextEvent,
    ViewChangeEvent,
    XaPrepareEvent,
)
from binlog_parser.gtid import (
    MAX_GNO,
    GtidParseError,
    GtidSet,
    normalize_tag,
    uuid_from_bytes,
)
from binlog_parser.header import EventHeader
from binlog_parser.serialization import (
    read_string,
    read_varlen_signed,
    read_varlen_unsigned,
)
from binlog_parser.wire import packed_int

LOGICAL_TIMESTAMP_TYPECODE = 2
_TS_FLAG = 1 << 55
_VER_FLAG = 1 << 31


def decode_gtid(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    """Gtid_event's fixed layout (control_events.cpp), fields read while bytes remain."""
    need(body, 25, "GTID")
    flags = body[0]
    uuid = uuid_from_bytes(body[1:17])
    gno = U64.unpack_from(body, 17)[0]
    anonymous = h.type_code == EventType.ANONYMOUS_GTID
    if anonymous:
        if gno != 0:
            raise CorruptEventError(f"ANONYMOUS_GTID with GNO {gno} (must be 0)")
    elif not 1 <= gno < MAX_GNO:
        raise CorruptEventError(f"invalid GNO {gno}")
    n = len(body)
    off = 25
    last_committed = sequence_number = None
    imm_ts = orig_ts = trx_len = imm_ver = orig_ver = ticket = None
    if off + 1 <= n:
        lt = body[off]
        off += 1
        if lt == LOGICAL_TIMESTAMP_TYPECODE and off + 16 <= n:
            last_committed = U64.unpack_from(body, off)[0]
            sequence_number = U64.unpack_from(body, off + 8)[0]
            off += 16
            if off + 7 <= n:
                imm_ts = int.from_bytes(body[off:off + 7], "little")
                off += 7
                if imm_ts & _TS_FLAG:
                    imm_ts &= ~_TS_FLAG
                    if off + 7 > n:
                        raise CorruptEventError("GTID original_commit_timestamp missing")
                    orig_ts = int.from_bytes(body[off:off + 7], "little")
                    off += 7
                else:
                    orig_ts = imm_ts
                if off + 1 <= n:
                    trx_len, off = packed_int(body, off)
                if off + 4 <= n:
                    imm_ver = U32.unpack_from(body, off)[0]
                    off += 4
                    if imm_ver & _VER_FLAG:
                        imm_ver &= ~_VER_FLAG
                        if off + 4 > n:
                            raise CorruptEventError("GTID original_server_version missing")
                        orig_ver = U32.unpack_from(body, off)[0]
                        off += 4
                    else:
                        orig_ver = imm_ver
                    if off + 8 <= n:
                        ticket = U64.unpack_from(body, off)[0]
                        off += 8
    gtid = None if anonymous else f"{uuid}:{gno}"
    return GtidEvent(h, gtid, flags, uuid, None, gno, last_committed, sequence_number, imm_ts,
                     orig_ts, trx_len, imm_ver, orig_ver, ticket)


def decode_previous_gtids(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    ph = ctx.post_header_length(EventType.PREVIOUS_GTIDS)
    try:
        gs, tagged = GtidSet.decode(body[ph:])
    except GtidParseError as exc:
        raise CorruptEventError(f"PREVIOUS_GTIDS: {exc}") from exc
    return PreviousGtidsEvent(h, gs, tagged)


def decode_transaction_context(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    need(body, 18, "TRANSACTION_CONTEXT")
    uuid_len = body[0]
    thread_id = U32.unpack_from(body, 1)[0]
    gtid_specified = bool(body[5])
    snap_len = U32.unpack_from(body, 6)[0]
    ws_len = U32.unpack_from(body, 10)[0]
    rs_len = U32.unpack_from(body, 14)[0]
    off = max(ctx.post_header_length(EventType.TRANSACTION_CONTEXT), 18)
    b = bytes(body)
    if off + uuid_len + snap_len > len(b):
        raise CorruptEventError("TRANSACTION_CONTEXT fields run past the event")
    server_uuid = text(b[off:off + uuid_len])
    off += uuid_len
    snapshot = b[off:off + snap_len]
    off += snap_len

    def read_set(count: int, off: int) -> tuple[tuple[bytes, ...], int]:
        if count * 2 > len(b) - off:
            raise CorruptEventError(f"TRANSACTION_CONTEXT set of {count} items runs past the event")
        items = []
        for _ in range(count):
            ln = U16.unpack_from(b, off)[0]
            off += 2
            if off + ln > len(b):
                raise CorruptEventError("TRANSACTION_CONTEXT item runs past the event")
            items.append(b[off:off + ln])
            off += ln
        return tuple(items), off

    ws, off = read_set(ws_len, off)
    rs, off = read_set(rs_len, off)
    return TransactionContextEvent(h, server_uuid, thread_id, gtid_specified, snapshot, ws, rs)


ENCODED_VIEW_ID_MAX_LEN = 40


def decode_view_change(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    need(body, ENCODED_VIEW_ID_MAX_LEN + 12, "VIEW_CHANGE")
    b = bytes(body)
    view_id = text(nul_string(b[:ENCODED_VIEW_ID_MAX_LEN]))
    if not view_id:
        raise CorruptEventError("VIEW_CHANGE with an empty view id")
    seq = U64.unpack_from(b, 40)[0]
    count = U32.unpack_from(b, 48)[0]
    off = max(ctx.post_header_length(EventType.VIEW_CHANGE), 52)
    if count * 6 > len(b) - off:
        raise CorruptEventError(f"VIEW_CHANGE claims {count} certification entries")
    cert: dict[str, bytes] = {}
    for _ in range(count):
        kl = U16.unpack_from(b, off)[0]
        off += 2
        key = text(b[off:off + kl])
        off += kl
        vl = U32.unpack_from(b, off)[0]
        off += 4
        if off + vl > len(b):
            raise CorruptEventError("VIEW_CHANGE value runs past the event")
        cert[key] = b[off:off + vl]
        off += vl
    return ViewChangeEvent(h, view_id, seq, cert)


def decode_xa_prepare(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    ph = ctx.post_header_length(EventType.XA_PREPARE)
    need(body, ph + 13, "XA_PREPARE")
    one_phase = bool(body[ph])
    fmt = U32.unpack_from(body, ph + 1)[0]
    gl = U32.unpack_from(body, ph + 5)[0]
    bl = U32.unpack_from(body, ph + 9)[0]
    if fmt >= 1 << 31:
        fmt -= 1 << 32
    if gl > 64 or bl > 64:
        raise CorruptEventError(f"invalid XID lengths gtrid={gl} bqual={bl}")
    off = ph + 13
    need(body, off + gl + bl, "XA_PREPARE data")
    return XaPrepareEvent(h, one_phase, fmt, bytes(body[off:off + gl]),
                          bytes(body[off + gl:off + gl + bl]))


# ---------------------------------------------------------------------------
# GTID_TAGGED (42): MySQL serialization-library message (Gtid_event::define_fields)
# ---------------------------------------------------------------------------

# field id -> (name, kind): "u" varlen unsigned, "s" varlen signed (zig-zag),
# "uuid" 16 varlen-unsigned bytes, "str" varlen length + bytes
_TAGGED_FIELDS = (
    ("flags", "u"),
    ("uuid", "uuid"),
    ("gno", "s"),
    ("tag", "str"),
    ("last_committed", "s"),
    ("sequence_number", "s"),
    ("immediate_commit_timestamp", "u"),
    ("original_commit_timestamp", "u"),
    ("transaction_length", "u"),
    ("immediate_server_version", "u"),
    ("original_server_version", "u"),
    ("commit_group_ticket", "u"),
)


def decode_serialized_message(body: memoryview, fields: tuple[tuple[str, str], ...],
                              what: str) -> dict[str, object]:
    """Decode ``<version> <size> <last_non_ignorable_id> {<id> <data>}`` per ``fields``."""
    _version, off = read_varlen_unsigned(body, 0)
    size, off = read_varlen_unsigned(body, off)
    if size > len(body) or size < off:
        raise CorruptEventError(f"{what}: message size {size} but {len(body)} bytes present")
    last_non_ignorable, off = read_varlen_unsigned(body, off)
    end = size
    buf = body[:end]
    out: dict[str, object] = {}
    prev = -1
    while off < end:
        fid, off = read_varlen_unsigned(buf, off)
        if fid <= prev:
            raise CorruptEventError(f"{what}: field id {fid} after {prev}")
        prev = fid
        if fid >= len(fields):
            if fid <= last_non_ignorable:
                raise CorruptEventError(f"{what}: unknown non-ignorable field {fid}")
            break  # unknown ignorable fields: the rest of the message is skipped
        name, kind = fields[fid]
        if kind == "u":
            out[name], off = read_varlen_unsigned(buf, off)
        elif kind == "s":
            out[name], off = read_varlen_signed(buf, off)
        elif kind == "uuid":
            raw = bytearray()
            for _ in range(16):
                v, off = read_varlen_unsigned(buf, off)
                if v > 255:
                    raise CorruptEventError(f"{what}: UUID byte {v}")
                raw.append(v)
            out[name] = bytes(raw)
        else:
            out[name], off = read_string(buf, off)
    return out


def decode_gtid_tagged(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    f = decode_serialized_message(body, _TAGGED_FIELDS, "GTID_TAGGED")
    if "uuid" not in f or "gno" not in f:
        raise CorruptEventError("GTID_TAGGED without UUID or GNO")
    uuid = uuid_from_bytes(f["uuid"])  # type: ignore[arg-type]
    gno = f["gno"]
    assert isinstance(gno, int)
    if not 1 <= gno < MAX_GNO:
        raise CorruptEventError(f"invalid GNO {gno}")
    raw_tag = f.get("tag", b"")
    try:
        if raw_tag and not isinstance(raw_tag, (bytes, bytearray)):
            raise CorruptEventError(f"GTID_TAGGED: tag field is not a string ({raw_tag!r})")
        tag = normalize_tag(raw_tag.decode("ascii")) if isinstance(raw_tag, (bytes, bytearray)) else ""
    except (UnicodeDecodeError, GtidParseError) as exc:
        raise CorruptEventError(f"GTID_TAGGED: invalid tag {raw_tag!r}") from exc
    imm_ts = f.get("immediate_commit_timestamp")
    orig_ts = f.get("original_commit_timestamp", imm_ts)
    imm_ver = f.get("immediate_server_version")
    orig_ver = f.get("original_server_version", imm_ver)
    gtid = f"{uuid}:{tag}:{gno}" if tag else f"{uuid}:{gno}"
    return GtidEvent(h, gtid, f.get("flags", 0), uuid, tag or None, gno,  # type: ignore[arg-type]
                     f.get("last_committed"), f.get("sequence_number"),  # type: ignore[arg-type]
                     imm_ts, orig_ts, f.get("transaction_length"), imm_ver, orig_ver,  # type: ignore[arg-type]
                     f.get("commit_group_ticket"))  # type: ignore[arg-type]
