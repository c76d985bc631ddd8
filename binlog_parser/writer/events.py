"""Event encoders and file framing: the inverse of ``binlog_parser.decoders``.

``frame_event`` wraps a body in the 19-byte common header and (optionally) the CRC32 trailer;
``encode_body`` turns one decoded event dataclass back into its body bytes; ``encode_event`` does
both from the event's own header (timestamp, server id, flags, log_pos). Re-encoding an event the
reader decoded from a MySQL 8.x / 9.x file gives back the file's bytes.

Layouts: MySQL ``libs/mysql/binlog/event/{control,statement}_events.cpp`` (as the decoders
document them). The FORMAT_DESCRIPTION's CRC is computed with LOG_EVENT_BINLOG_IN_USE_F cleared
(the server clears the flag in place when it closes the file, without re-checksumming).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import Any

from binlog_parser.constants import (
    CHECKSUM_CRC32,
    CHECKSUM_UNDEFINED,
    LOG_EVENT_BINLOG_IN_USE_F,
    EventType,
)
from binlog_parser.errors import EncodeError
from binlog_parser.events import (
    Event,
    FormatDescriptionEvent,
    GtidEvent,
    IncidentEvent,
    IntvarEvent,
    PreviousGtidsEvent,
    QueryEvent,
    RandEvent,
    RotateEvent,
    RowsQueryEvent,
    StopEvent,
    TransactionPayloadEvent,
    UnknownEvent,
    XidEvent,
)
from binlog_parser.gtid import GtidSet, uuid_to_bytes
from binlog_parser.header import COMMON_HEADER
from binlog_parser.rows import RowsEvent, TableMapEvent
from binlog_parser.serialization import write_varlen_signed, write_varlen_unsigned
from binlog_parser.server_version import server_version_split
from binlog_parser.wire import encode_packed_int
from binlog_parser.writer.payload import transaction_payload_body
from binlog_parser.writer.rows import rows_body_from_event, table_map_body_from_event

HEADER = COMMON_HEADER
HEADER_LEN = 19
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_crc32 = zlib.crc32


# ---------------------------------------------------------------------------
# Server versions: the FORMAT_DESCRIPTION post-header table a server writes
# ---------------------------------------------------------------------------

# Index = type code - 1. Observed on real servers (fixtures): 8.0.26 (40 types), 8.0.28-8.2
# (41 types: + HEARTBEAT_V2), 8.3+/8.4/9.x (42 types: + GTID_TAGGED, and 0 for the v1 rows
# events the server no longer writes).
_PH_80_26 = bytes.fromhex("000d0008000000000400040000006100041a08000000080808020000000a0a0a2a2a001234000a28")
_PH_80_28 = bytes.fromhex("000d0008000000000400040000006200041a08000000080808020000000a0a0a2a2a001234000a2800")
_PH_84 = bytes.fromhex("000d0008000000000400040000006300041a08000000000000020000000a0a0a2a2a001234000a280000")
# The FORMAT_DESCRIPTION's own entry (index 14) is 57 + the number of types (0x61 / 0x62 / 0x63):
# readers (mysql-binlog-connector-java) find the checksum algorithm byte with it.


def version_tuple(server_version: str) -> tuple[int, int, int]:
    return server_version_split(server_version)


def post_header_lengths(server_version: str) -> bytes:
    """The post-header length table a MySQL server of this version writes."""
    v = version_tuple(server_version)
    if v >= (8, 3, 0):
        return _PH_84
    if v >= (8, 0, 27):
        return _PH_80_28
    if v >= (8, 0, 0):
        return _PH_80_26
    raise EncodeError(f"the writer emits MySQL 8.0+ files, not {server_version!r}")


def server_version_id(server_version: str) -> int:
    """``8.0.40`` -> 80040 (the GTID event's server version field)."""
    x, y, z = version_tuple(server_version)
    return x * 10000 + y * 100 + z


# ---------------------------------------------------------------------------
# Framing
# ---------------------------------------------------------------------------


def frame_event(type_code: int, body: bytes, *, timestamp: int, server_id: int, log_pos: int,
                flags: int = 0, checksum: bool = True, header_length: int = HEADER_LEN) -> bytes:
    """Common header + body (+ CRC32 of both). ``log_pos`` is written as given."""
    size = header_length + len(body) + (4 if checksum else 0)
    head = HEADER.pack(timestamp, type_code, server_id, size, log_pos, flags)
    if header_length > HEADER_LEN:
        head += b"\x00" * (header_length - HEADER_LEN)
    if not checksum:
        return head + body
    if type_code == EventType.FORMAT_DESCRIPTION and flags & LOG_EVENT_BINLOG_IN_USE_F:
        clean = HEADER.pack(timestamp, type_code, server_id, size, log_pos,
                            flags & ~LOG_EVENT_BINLOG_IN_USE_F)
        crc = _crc32(body, _crc32(clean))
    else:
        crc = _crc32(body, _crc32(head))
    return head + body + _U32.pack(crc)


def event_size(body_len: int, checksum: bool = True) -> int:
    return HEADER_LEN + body_len + (4 if checksum else 0)


# ---------------------------------------------------------------------------
# Control events
# ---------------------------------------------------------------------------


def format_description_body(server_version: str, create_timestamp: int = 0, *,
                            checksum_alg: int = CHECKSUM_CRC32, binlog_version: int = 4,
                            header_length: int = HEADER_LEN,
                            post_header: bytes | None = None) -> bytes:
    """FORMAT_DESCRIPTION body without its CRC trailer (which ``frame_event`` adds)."""
    sv = server_version.encode("latin-1")
    if len(sv) > 50:
        raise EncodeError("server version longer than 50 bytes")
    ph = post_header_lengths(server_version) if post_header is None else post_header
    out = (_U16.pack(binlog_version) + sv.ljust(50, b"\x00") + _U32.pack(create_timestamp)
           + bytes((header_length,)) + ph)
    if checksum_alg != CHECKSUM_UNDEFINED:
        out += bytes((checksum_alg,))
    return out


def _fde_body(ev: FormatDescriptionEvent) -> bytes:
    return format_description_body(ev.server_version, ev.create_timestamp,
                                   checksum_alg=ev.checksum_alg, binlog_version=ev.binlog_version,
                                   header_length=ev.header_length,
                                   post_header=ev.post_header_lengths)


def rotate_body(next_file: str, position: int = 4) -> bytes:
    return _U64.pack(position) + next_file.encode("utf-8")


def xid_body(xid: int) -> bytes:
    return _U64.pack(xid)


def previous_gtids_body(gtid_set: Any, tagged: bool | None = None) -> bytes:
    if isinstance(gtid_set, str):
        gtid_set = GtidSet.from_text(gtid_set)
    return gtid_set.encode(tagged=tagged)


# ---------------------------------------------------------------------------
# GTID events
# ---------------------------------------------------------------------------

_TS_FLAG = 1 << 55
_VER_FLAG = 1 << 31


def gtid_body(*, uuid: str, gno: int, flags: int = 1, last_committed: int | None = 0,
              sequence_number: int | None = 1, immediate_commit_timestamp: int | None = None,
              original_commit_timestamp: int | None = None, transaction_length: int | None = None,
              immediate_server_version: int | None = None,
              original_server_version: int | None = None,
              commit_group_ticket: int | None = None) -> bytes:
    """GTID (33) / ANONYMOUS_GTID (34) body: the fixed layout, fields written while present."""
    out = bytearray()
    out.append(flags)
    out += uuid_to_bytes(uuid)
    out += _U64.pack(gno)
    if last_committed is None or sequence_number is None:
        return bytes(out)
    out.append(2)  # LOGICAL_TIMESTAMP_TYPECODE
    out += _U64.pack(last_committed) + _U64.pack(sequence_number)
    if immediate_commit_timestamp is None:
        return bytes(out)
    orig = immediate_commit_timestamp if original_commit_timestamp is None else original_commit_timestamp
    if orig != immediate_commit_timestamp:
        out += (immediate_commit_timestamp | _TS_FLAG).to_bytes(7, "little")
        out += orig.to_bytes(7, "little")
    else:
        out += immediate_commit_timestamp.to_bytes(7, "little")
    if transaction_length is None:
        return bytes(out)
    out += encode_packed_int(transaction_length)
    if immediate_server_version is None:
        return bytes(out)
    over = immediate_server_version if original_server_version is None else original_server_version
    if over != immediate_server_version:
        out += _U32.pack(immediate_server_version | _VER_FLAG) + _U32.pack(over)
    else:
        out += _U32.pack(immediate_server_version)
    if commit_group_ticket is not None:
        out += _U64.pack(commit_group_ticket)
    return bytes(out)


def gtid_tagged_body(*, uuid: str, gno: int, tag: str, flags: int = 1, last_committed: int = 0,
                     sequence_number: int = 1, immediate_commit_timestamp: int = 0,
                     original_commit_timestamp: int | None = None, transaction_length: int = 0,
                     immediate_server_version: int = 0, original_server_version: int | None = None,
                     commit_group_ticket: int | None = None) -> bytes:
    """GTID_TAGGED (42): a serialization-library message (``Gtid_event::define_fields``).

    ``<version=1> <size> <last_non_ignorable_id=0> {<field id> <value>}``; the optional fields
    (original timestamp / server version equal to the immediate ones, unset ticket) are omitted.
    """
    wu, ws = write_varlen_unsigned, write_varlen_signed
    parts = [wu(0), wu(flags), wu(1)]
    parts += [wu(b) for b in uuid_to_bytes(uuid)]
    tb = tag.encode("ascii")
    parts += [wu(2), ws(gno), wu(3), wu(len(tb)), tb, wu(4), ws(last_committed),
              wu(5), ws(sequence_number), wu(6), wu(immediate_commit_timestamp)]
    if original_commit_timestamp is not None and original_commit_timestamp != immediate_commit_timestamp:
        parts += [wu(7), wu(original_commit_timestamp)]
    parts += [wu(8), wu(transaction_length), wu(9), wu(immediate_server_version)]
    if original_server_version is not None and original_server_version != immediate_server_version:
        parts += [wu(10), wu(original_server_version)]
    if commit_group_ticket is not None:
        parts += [wu(11), wu(commit_group_ticket)]
    fields = b"".join(parts)
    head_rest = wu(0)  # last_non_ignorable_field_id
    version = wu(1)
    size = len(version) + len(head_rest) + len(fields) + 1
    while True:
        total = len(version) + len(wu(size)) + len(head_rest) + len(fields)
        if total == size:
            break
        size = total
    return version + wu(size) + head_rest + fields


def _gtid_event_body(ev: GtidEvent) -> bytes:
    if ev.header.type_code == EventType.GTID_TAGGED:
        return gtid_tagged_body(
            uuid=ev.uuid, gno=ev.gno, tag=ev.tag or "", flags=ev.gtid_flags,
            last_committed=ev.last_committed or 0, sequence_number=ev.sequence_number or 0,
            immediate_commit_timestamp=ev.immediate_commit_timestamp or 0,
            original_commit_timestamp=ev.original_commit_timestamp,
            transaction_length=ev.transaction_length or 0,
            immediate_server_version=ev.immediate_server_version or 0,
            original_server_version=ev.original_server_version,
            commit_group_ticket=ev.commit_group_ticket)
    return gtid_body(uuid=ev.uuid, gno=ev.gno, flags=ev.gtid_flags,
                     last_committed=ev.last_committed, sequence_number=ev.sequence_number,
                     immediate_commit_timestamp=ev.immediate_commit_timestamp,
                     original_commit_timestamp=ev.original_commit_timestamp,
                     transaction_length=ev.transaction_length,
                     immediate_server_version=ev.immediate_server_version,
                     original_server_version=ev.original_server_version,
                     commit_group_ticket=ev.commit_group_ticket)


# ---------------------------------------------------------------------------
# QUERY
# ---------------------------------------------------------------------------


def _lstr(s: str) -> bytes:
    b = s.encode("utf-8")
    if len(b) > 255:
        raise EncodeError("status variable string longer than 255 bytes")
    return bytes((len(b),)) + b


def _sv_updated_db_names(v: Any) -> bytes:
    if v is None:
        return b"\x0c\xfe"  # OVER_MAX_DBS_IN_EVENT_MTS
    return b"\x0c" + bytes((len(v),)) + b"".join(n.encode("utf-8") + b"\x00" for n in v)


_STATUS_ENCODERS: dict[str, Callable[[Any], bytes]] = {
    "flags2": lambda v: b"\x00" + _U32.pack(v),
    "sql_mode": lambda v: b"\x01" + _U64.pack(v),
    "catalog": lambda v: b"\x06" + _lstr(v),  # Q_CATALOG_NZ_CODE (what 5.0.4+ servers write)
    "auto_increment": lambda v: b"\x03" + _U16.pack(v["increment"]) + _U16.pack(v["offset"]),
    "charset": lambda v: b"\x04" + _U16.pack(v["client"]) + _U16.pack(v["connection"])
    + _U16.pack(v["server"]),
    "time_zone": lambda v: b"\x05" + _lstr(v),
    "lc_time_names": lambda v: b"\x07" + _U16.pack(v),
    "charset_database": lambda v: b"\x08" + _U16.pack(v),
    "table_map_for_update": lambda v: b"\x09" + _U64.pack(v),
    "master_data_written": lambda v: b"\x0a" + _U32.pack(v),
    "invoker": lambda v: b"\x0b" + _lstr(v["user"]) + _lstr(v["host"]),
    "updated_db_names": _sv_updated_db_names,
    "microseconds": lambda v: b"\x0d" + v.to_bytes(3, "little"),
    "commit_ts": lambda v: b"\x0e" + _U64.pack(v),
    "commit_ts2": lambda v: b"\x0f" + _U64.pack(v),
    "explicit_defaults_ts": lambda v: b"\x10" + bytes((1 if v else 0,)),
    "ddl_xid": lambda v: b"\x11" + _U64.pack(v),
    "default_collation_for_utf8mb4": lambda v: b"\x12" + _U16.pack(v),
    "sql_require_primary_key": lambda v: b"\x13" + bytes((v,)),
    "default_table_encryption": lambda v: b"\x14" + bytes((v,)),
    "hrnow": lambda v: b"\x80" + v.to_bytes(3, "little"),
    "xid": lambda v: b"\x81" + _U64.pack(v),
    "gtid_flags3": lambda v: b"\x82" + bytes((v,)),
    "character_set_collations": lambda v: b"\x83" + bytes((len(v),)) + b"".join(
        _U16.pack(p["charset"]) + _U16.pack(p["collation"]) for p in v),
}


def encode_status_vars(status_vars: dict[str, Any]) -> bytes:
    out = []
    for name, value in status_vars.items():
        enc = _STATUS_ENCODERS.get(name)
        if enc is None:
            raise EncodeError(f"unknown QUERY status variable {name!r}")
        out.append(enc(value))
    return b"".join(out)


def query_body(query: str | bytes, schema: str = "", *, thread_id: int = 0, exec_time: int = 0,
               error_code: int = 0, status_vars: dict[str, Any] | None = None) -> bytes:
    sv = encode_status_vars(status_vars or {})
    db = schema.encode("utf-8")
    q = query.encode("utf-8") if isinstance(query, str) else query
    return (_U32.pack(thread_id) + _U32.pack(exec_time) + bytes((len(db),)) + _U16.pack(error_code)
            + _U16.pack(len(sv)) + sv + db + b"\x00" + q)


def _query_event_body(ev: QueryEvent) -> bytes:
    if ev.compressed:
        raise EncodeError("MariaDB compressed QUERY events are not written")
    if ev.unknown_status_var is not None:
        raise EncodeError("QUERY with an undecodable status variable cannot be re-encoded")
    return query_body(ev.query, ev.schema, thread_id=ev.thread_id, exec_time=ev.exec_time,
                      error_code=ev.error_code, status_vars=ev.status_vars)


# ---------------------------------------------------------------------------
# Misc statement / control events
# ---------------------------------------------------------------------------


def _incident_body(ev: IncidentEvent) -> bytes:
    m = ev.message.encode("utf-8")
    return _U16.pack(ev.incident) + bytes((len(m),)) + m


def _rows_query_body(ev: RowsQueryEvent) -> bytes:
    q = ev.query.encode("utf-8")
    return bytes((min(len(q), 255),)) + q


# ---------------------------------------------------------------------------
# Dispatch
# ---------------------------------------------------------------------------


def encode_body(event: Event) -> bytes:
    """The body bytes (after the common header, before the CRC) of a decoded event."""
    if isinstance(event, FormatDescriptionEvent):
        return _fde_body(event)
    if isinstance(event, GtidEvent):
        return _gtid_event_body(event)
    if isinstance(event, QueryEvent):
        return _query_event_body(event)
    if isinstance(event, XidEvent):
        return xid_body(event.xid)
    if isinstance(event, RotateEvent):
        return rotate_body(event.next_file, event.next_position)
    if isinstance(event, PreviousGtidsEvent):
        return previous_gtids_body(event.gtid_set, event.tagged_format)
    if isinstance(event, StopEvent):
        return b""
    if isinstance(event, IntvarEvent):
        return bytes((event.intvar_type,)) + _U64.pack(event.value)
    if isinstance(event, RandEvent):
        return _U64.pack(event.seed1) + _U64.pack(event.seed2)
    if isinstance(event, IncidentEvent):
        return _incident_body(event)
    if isinstance(event, RowsQueryEvent):
        return _rows_query_body(event)
    if isinstance(event, TransactionPayloadEvent):
        return transaction_payload_body(event.payload, event.uncompressed_size,
                                        event.compression_type)
    if isinstance(event, UnknownEvent):
        return event.body
    if isinstance(event, TableMapEvent):
        return table_map_body_from_event(event)
    if isinstance(event, RowsEvent):
        return rows_body_from_event(event)
    raise EncodeError(f"no encoder for {type(event).__name__} ({event.name})")


def encode_event(event: Event, *, checksum: bool | None = None, log_pos: int | None = None) -> bytes:
    """Header + body (+ CRC32) of a decoded event, from its own header fields.

    ``checksum``: by default a CRC32 trailer is written when the event came from a checksummed
    file (``header.checksum_ok`` is not None: the reader verified one) and is not embedded in a
    TRANSACTION_PAYLOAD; a FORMAT_DESCRIPTION of a 5.6.1+ server always has one. Pass it
    explicitly for events built by hand or decoded with ``verify_checksum=False``.
    """
    h = event.header
    if checksum is None:
        if isinstance(event, FormatDescriptionEvent):
            checksum = event.checksum_alg != CHECKSUM_UNDEFINED
        else:
            checksum = h.checksum_ok is not None and h.payload_pos is None
    type_code = h.raw_type_code if h.raw_type_code is not None else h.type_code
    return frame_event(type_code, encode_body(event), timestamp=h.timestamp,
                       server_id=h.server_id, log_pos=h.log_pos if log_pos is None else log_pos,
                       flags=h.flags, checksum=checksum)
