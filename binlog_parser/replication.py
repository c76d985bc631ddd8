"""The replication side of the binlog format, sans I/O: the dump commands and the dump stream framing.

A replica asks for binlogs with ``COM_REGISTER_SLAVE`` then ``COM_BINLOG_DUMP`` (file + position) or
``COM_BINLOG_DUMP_GTID`` (MySQL, by GTID set); the server answers with a stream of MySQL packets whose
payload is ``00`` + one event as on disk, ``FE`` (EOF, non-blocking dump at the end) or ``FF`` (ERR,
e.g. 1236 "could not find first log file"). Besides the on-disk events the stream carries events the
server makes up: the artificial ROTATE that names the file first (``LOG_EVENT_ARTIFICIAL_F``, log_pos 0),
heartbeats, the FORMAT_DESCRIPTION re-sent on a reconnect (log_pos 0), MariaDB's fake GTID_LIST.
:class:`StreamEvent` tells them apart so an archiver can write exactly the on-disk bytes.

Byte layouts: the seeds' network-stream page and, where they disagree, the server source (MySQL
``sql/rpl_source.cc``/``rpl_replica.cc``, ``include/my_command.h``):
- ``COM_REGISTER_SLAVE`` is command 0x15 (``my_command.h``: COM_CONNECT_OUT = 20, COM_REGISTER_SLAVE
  = 21); the seed's table says ``[14]``, which is COM_CONNECT_OUT.
- ``COM_BINLOG_DUMP_GTID``: the server reads the 4-byte data size and the SID block unconditionally and
  the SID block starts with an 8-byte ``n_sids`` (``Gtid_set::encode``: ``int8store``); the seed shows
  the size as conditional on ``BINLOG_THROUGH_GTID`` and ``n_sids`` as 4 bytes. MySQL's own replica
  always sets ``BINLOG_THROUGH_GTID``, so with that flag both readings give the same bytes.

Why hand-written: no maintained library exposes these packets as pure functions (python-mysql-
replication builds them inline inside its socket loop); they are a few dozen bytes of fixed layout.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from binlog_parser.constants import LOG_EVENT_ARTIFICIAL_F, EventType
from binlog_parser.errors import ReplicationProtocolError
from binlog_parser.header import COMMON_HEADER

COM_BINLOG_DUMP = 0x12
COM_REGISTER_SLAVE = 0x15
COM_BINLOG_DUMP_GTID = 0x1E

#: COM_BINLOG_DUMP flags (MySQL ``binlog.h``; MariaDB ``sql_repl.h``)
BINLOG_DUMP_NON_BLOCK = 0x01
BINLOG_SEND_ANNOTATE_ROWS_EVENT = 0x02  # MariaDB: send ANNOTATE_ROWS as is
BINLOG_THROUGH_POSITION = 0x02  # MySQL COM_BINLOG_DUMP_GTID
BINLOG_THROUGH_GTID = 0x04  # MySQL COM_BINLOG_DUMP_GTID

#: MariaDB ``@mariadb_slave_capability``: 4 = understands GTID events (no dummy replacements)
MARIA_SLAVE_CAPABILITY_GTID = 4

MAX_PACKET_PAYLOAD = 0xFFFFFF  # a payload this long continues in the next packet
EVENT_HEADER_LEN = 19
ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236

_HEARTBEATS = (int(EventType.HEARTBEAT), int(EventType.HEARTBEAT_V2))


# --- command packets --------------------------------------------------------------------------


def register_slave_payload(server_id: int, hostname: str = "", user: str = "", password: str = "",
                           port: int = 0, master_id: int = 0) -> bytes:
    """``COM_REGISTER_SLAVE``: makes the replica visible in ``SHOW SLAVE HOSTS`` under ``server_id``."""
    parts = [struct.pack("<BI", COM_REGISTER_SLAVE, server_id)]
    for text in (hostname, user, password):
        raw = text.encode()
        if len(raw) > 255:
            raise ValueError(f"COM_REGISTER_SLAVE field longer than 255 bytes: {text[:20]!r}...")
        parts.append(struct.pack("<B", len(raw)) + raw)
    parts.append(struct.pack("<HII", port, 0, master_id))  # port, replication rank (ignored), master id
    return b"".join(parts)


def binlog_dump_payload(server_id: int, filename: str, position: int, flags: int = 0) -> bytes:
    """``COM_BINLOG_DUMP``: stream from ``filename`` at ``position`` (empty name: the first binlog)."""
    if not 0 <= position <= 0xFFFFFFFF:
        raise ValueError(f"COM_BINLOG_DUMP position {position} does not fit in 4 bytes")
    return struct.pack("<BIHI", COM_BINLOG_DUMP, position, flags, server_id) + filename.encode()


@dataclass(frozen=True)
class SidIntervals:
    """One source UUID of a MySQL GTID set with its ``[start, end)`` intervals (end exclusive)."""

    sid: uuid.UUID
    intervals: tuple[tuple[int, int], ...]


def encode_gtid_set(sids: Sequence[SidIntervals]) -> bytes:
    """MySQL's ``Gtid_set::encode`` (untagged): 8-byte n_sids, per SID 16 bytes + 8-byte n_intervals
    + (8-byte start, 8-byte end exclusive) each."""
    out = [struct.pack("<Q", len(sids))]
    for entry in sids:
        out.append(entry.sid.bytes + struct.pack("<Q", len(entry.intervals)))
        for start, end in entry.intervals:
            if not 0 < start < end:
                raise ValueError(f"bad GTID interval [{start}, {end}) for {entry.sid}")
            out.append(struct.pack("<qq", start, end))
    return b"".join(out)


def parse_mysql_gtid_set(text: str) -> list[SidIntervals]:
    """``uuid:1-5:7,uuid2:3`` (MySQL ``gtid_executed`` text) as :class:`SidIntervals`, end exclusive."""
    out: list[SidIntervals] = []
    for chunk in (c.strip() for c in text.replace("\n", "").split(",")):
        if not chunk:
            continue
        sid_text, *ranges = chunk.split(":")
        intervals = []
        for r in ranges:
            lo, _, hi = r.partition("-")
            intervals.append((int(lo), int(hi or lo) + 1))
        out.append(SidIntervals(uuid.UUID(sid_text), tuple(intervals)))
    return out


def binlog_dump_gtid_payload(server_id: int, gtid_set: Sequence[SidIntervals], filename: str = "",
                             position: int = 4, flags: int = BINLOG_THROUGH_GTID) -> bytes:
    """``COM_BINLOG_DUMP_GTID`` (MySQL 5.6+): stream everything not in ``gtid_set``."""
    name = filename.encode()
    data = encode_gtid_set(gtid_set)
    return (struct.pack("<BHII", COM_BINLOG_DUMP_GTID, flags, server_id, len(name)) + name
            + struct.pack("<QI", position, len(data)) + data)


def frame_packets(payload: bytes, sequence_id: int = 0) -> bytes:
    """The payload as MySQL packets (3-byte length, 1-byte sequence id), split at 16 MiB - 1."""
    out = []
    seq = sequence_id
    offset = 0
    while True:
        chunk = payload[offset:offset + MAX_PACKET_PAYLOAD]
        out.append(struct.pack("<I", len(chunk))[:3] + bytes([seq & 0xFF]) + chunk)
        offset += len(chunk)
        seq += 1
        if len(chunk) < MAX_PACKET_PAYLOAD:
            return b"".join(out)


# --- stream items -----------------------------------------------------------------------------


class _HeaderField:
    """A common header field of a stream event, read from its raw bytes (field ``index`` of
    :data:`binlog_parser.header.COMMON_HEADER`)."""

    def __init__(self, index: int) -> None:
        self.index = index

    def __get__(self, event: StreamEvent, owner: type | None = None) -> int:
        return int(COMMON_HEADER.unpack_from(event.raw)[self.index])


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One binlog event from the dump stream (``raw`` = the event bytes, without the OK byte); its
    common header fields are read from ``raw`` (:data:`binlog_parser.header.COMMON_HEADER`)."""

    raw: bytes

    timestamp = _HeaderField(0)
    type_code = _HeaderField(1)
    server_id = _HeaderField(2)
    event_size = _HeaderField(3)
    log_pos = _HeaderField(4)
    flags = _HeaderField(5)

    @property
    def is_heartbeat(self) -> bool:
        return self.type_code in _HEARTBEATS

    @property
    def is_artificial(self) -> bool:
        """Made up by the dump thread, never on disk: flag ARTIFICIAL, a heartbeat, or log_pos 0
        (the artificial ROTATE, the re-sent FORMAT_DESCRIPTION, MariaDB's fake GTID_LIST)."""
        return bool(self.flags & LOG_EVENT_ARTIFICIAL_F) or self.is_heartbeat or self.log_pos == 0

    @property
    def is_rotate(self) -> bool:
        return self.type_code == EventType.ROTATE

    def rotate_target(self, checksum_len: int) -> tuple[str, int]:
        """(next file name, position) of a ROTATE event."""
        if not self.is_rotate or len(self.raw) < EVENT_HEADER_LEN + 8:
            raise ReplicationProtocolError(f"not a ROTATE event (type {self.type_code})")
        (position,) = struct.unpack_from("<Q", self.raw, EVENT_HEADER_LEN)
        end = len(self.raw) - checksum_len
        return self.raw[EVENT_HEADER_LEN + 8:end].decode("utf-8", "replace"), position


@dataclass(frozen=True, slots=True)
class StreamEnd:
    """EOF packet: a non-blocking dump reached the end of the last binlog."""


@dataclass(frozen=True, slots=True)
class StreamError:
    """ERR packet: the server ended the dump (1236: the requested binlog/GTIDs are purged or unknown)."""

    code: int
    sql_state: str
    message: str


StreamItem = StreamEvent | StreamEnd | StreamError


def parse_event(raw: bytes) -> StreamEvent:
    """The common header of one event (bytes without the OK byte)."""
    if len(raw) < EVENT_HEADER_LEN:
        raise ReplicationProtocolError(f"event of {len(raw)} bytes is shorter than the 19-byte header")
    _timestamp, type_code, _server_id, size, log_pos, _flags = COMMON_HEADER.unpack_from(raw)
    if size != len(raw):
        raise ReplicationProtocolError(
            f"event header says {size} bytes but the packet carries {len(raw)} (type {type_code}, "
            f"log_pos {log_pos})")
    return StreamEvent(raw)


def classify_payload(payload: bytes) -> StreamItem:
    """One logical dump-stream payload (after reassembly) as an event, the end or an error."""
    if not payload:
        raise ReplicationProtocolError("empty packet in the binlog dump stream")
    marker = payload[0]
    if marker == 0x00:
        return parse_event(payload[1:])
    if marker == 0xFE and len(payload) < 9:
        return StreamEnd()
    if marker == 0xFF:
        return _parse_err(payload)
    raise ReplicationProtocolError(f"unexpected packet type 0x{marker:02x} in the binlog dump stream")


def _parse_err(payload: bytes) -> StreamError:
    code = struct.unpack_from("<H", payload, 1)[0] if len(payload) >= 3 else 0
    rest = payload[3:]
    state = ""
    if rest[:1] == b"#":
        state, rest = rest[1:6].decode("ascii", "replace"), rest[6:]
    return StreamError(code, state, rest.decode("utf-8", "replace"))


@dataclass
class DumpStreamDecoder:
    """Bytes from the socket in, :data:`StreamItem` out.

    Reassembles payloads split over several packets (each 0xFFFFFF bytes long) and checks the
    sequence ids, which count up from ``first_sequence_id`` modulo 256 (the command took 0).
    """

    first_sequence_id: int = 1
    _buffer: bytearray = field(default_factory=bytearray)
    _pending: list[bytes] = field(default_factory=list)
    _next_seq: int = -1

    def __post_init__(self) -> None:
        self._next_seq = self.first_sequence_id & 0xFF

    def feed(self, data: bytes) -> list[StreamItem]:
        """Consume ``data``; return every item it completed (possibly none: need more data)."""
        self._buffer += data
        items: list[StreamItem] = []
        buf = self._buffer
        offset = 0
        while len(buf) - offset >= 4:
            length = buf[offset] | buf[offset + 1] << 8 | buf[offset + 2] << 16
            if len(buf) - offset - 4 < length:
                break
            seq = buf[offset + 3]
            if seq != self._next_seq:
                raise ReplicationProtocolError(
                    f"packet sequence id {seq}, expected {self._next_seq}: the dump stream lost a packet")
            self._next_seq = (seq + 1) & 0xFF
            chunk = bytes(buf[offset + 4:offset + 4 + length])
            offset += 4 + length
            if length == MAX_PACKET_PAYLOAD:
                self._pending.append(chunk)
                continue
            if self._pending:
                chunk = b"".join(self._pending) + chunk
                self._pending.clear()
            items.append(classify_payload(chunk))
        del buf[:offset]
        return items

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a complete item."""
        return len(self._buffer) + sum(len(p) for p in self._pending)


def decode_stream(chunks: Iterable[bytes], first_sequence_id: int = 1) -> list[StreamItem]:
    """All items of a captured stream (tests, tools)."""
    decoder = DumpStreamDecoder(first_sequence_id)
    out: list[StreamItem] = []
    for chunk in chunks:
        out.extend(decoder.feed(chunk))
    return out


# --- transaction boundaries -------------------------------------------------------------------

_MARIA_FL_STANDALONE = 0x01
_TXN_END_QUERIES = (b"COMMIT", b"ROLLBACK")


def checksum_len_of_fde(raw: bytes) -> int:
    """4 when a FORMAT_DESCRIPTION says events carry CRC32, else 0 (the algorithm byte sits 5 bytes
    before the end of a checksum-aware server's FDE)."""
    if len(raw) < EVENT_HEADER_LEN + 57 + 5:
        return 0
    return 4 if raw[-5] == 1 else 0


def query_text_prefix(raw: bytes, checksum_len: int, limit: int = 16) -> bytes:
    """The first ``limit`` bytes of a QUERY event's statement (post-header: 4 thread id, 4 exec
    time, 1 db length, 2 error code, 2 status-vars length; then status vars, db, NUL, statement)."""
    base = EVENT_HEADER_LEN
    if len(raw) < base + 13:
        return b""
    db_len = raw[base + 8]
    (status_len,) = struct.unpack_from("<H", raw, base + 11)
    start = base + 13 + status_len + db_len + 1
    return raw[start:min(start + limit, len(raw) - checksum_len)]


@dataclass
class TransactionTracker:
    """Tells after which event a transaction (or a lone non-transaction event) is complete.

    Why: an archive file is only ever cut, fsynced or uploaded at such a point, so a resumed or
    half-uploaded file never ends inside a transaction. MariaDB: GTID (standalone flag: DDL, ends
    at its one QUERY; else ends at XID or QUERY COMMIT/ROLLBACK). MySQL: GTID then QUERY BEGIN ...
    XID/COMMIT, or GTID then one DDL QUERY; a TRANSACTION_PAYLOAD holds a whole transaction.
    Outside a transaction (FDE, ROTATE, GTID_LIST, ...) every event is complete by itself.
    """

    checksum_len: int = 4
    in_transaction: bool = False
    _standalone: bool = False
    _mariadb: bool = False
    _queries_seen: int = 0

    def observe(self, event: StreamEvent) -> bool:
        """Feed one on-disk event; True when a transaction boundary follows it."""
        t = event.type_code
        if t == EventType.FORMAT_DESCRIPTION:
            self.checksum_len = checksum_len_of_fde(event.raw)
        if t in (EventType.MARIA_GTID, EventType.GTID, EventType.ANONYMOUS_GTID, EventType.GTID_TAGGED):
            self.in_transaction = True
            self._queries_seen = 0
            self._mariadb = t == EventType.MARIA_GTID
            self._standalone = (self._mariadb and len(event.raw) > 31
                                and bool(event.raw[31] & _MARIA_FL_STANDALONE))
            return False
        if not self.in_transaction:
            return True
        if t in (EventType.XID, EventType.TRANSACTION_PAYLOAD, EventType.XA_PREPARE):
            self.in_transaction = False
        elif t in (EventType.QUERY, EventType.MARIA_QUERY_COMPRESSED):
            self._queries_seen += 1
            text = query_text_prefix(event.raw, self.checksum_len) if t == EventType.QUERY else b""
            word = text.strip().upper()
            # MariaDB's non-standalone GTID implies BEGIN; MySQL's DDL is GTID + one non-BEGIN QUERY.
            mysql_ddl = not self._mariadb and self._queries_seen == 1 and word != b"BEGIN"
            if self._standalone or word in _TXN_END_QUERIES or mysql_ddl:
                self.in_transaction = False
        return not self.in_transaction


def gtid_of(event: StreamEvent) -> str | None:
    """The GTID an event starts, as text: MariaDB ``domain-server-seq``, MySQL ``uuid:gno``."""
    raw = event.raw
    if event.type_code == EventType.MARIA_GTID and len(raw) >= 31:
        seq, domain = struct.unpack_from("<QI", raw, EVENT_HEADER_LEN)
        return f"{domain}-{event.server_id}-{seq}"
    if event.type_code == EventType.GTID and len(raw) >= EVENT_HEADER_LEN + 25:
        sid = uuid.UUID(bytes=raw[EVENT_HEADER_LEN + 1:EVENT_HEADER_LEN + 17])
        (gno,) = struct.unpack_from("<q", raw, EVENT_HEADER_LEN + 17)
        return f"{sid}:{gno}"
    return None


def gtid_list_state(event: StreamEvent) -> str | None:
    """MariaDB GTID_LIST (the GTID state when the file was opened) as ``d-s-n,...``; None otherwise.

    Body: 4-byte count (low 28 bits; the high 4 are flags), then per entry domain (4), server (4),
    seq_no (8). It names the last GTID before a file that holds none yet.
    """
    if event.type_code != EventType.MARIA_GTID_LIST or len(event.raw) < EVENT_HEADER_LEN + 4:
        return None
    (count,) = struct.unpack_from("<I", event.raw, EVENT_HEADER_LEN)
    count &= 0x0FFFFFFF
    entries = []
    for i in range(count):
        offset = EVENT_HEADER_LEN + 4 + 16 * i
        if offset + 16 > len(event.raw):
            break
        domain, server, seq = struct.unpack_from("<IIQ", event.raw, offset)
        entries.append(f"{domain}-{server}-{seq}")
    return ",".join(entries) or None
