"""MariaDB events: ANNOTATE_ROWS (160), BINLOG_CHECKPOINT (161), GTID (162),
GTID_LIST (163), START_ENCRYPTION (164). Compressed QUERY (165) is in statement.py."""

from __future__ import annotations

from binlog_parser.context import DecodeContext
from binlog_parser.decoders.common import U32, U64, need, text
from binlog_parser.errors import CorruptEventError
from binlog_parser.events import (
    AnnotateRowsEvent,
    BinlogCheckpointEvent,
    Event,
    MariaGtidEvent,
    MariaGtidListEvent,
    StartEncryptionEvent,
)
from binlog_parser.gtid import MariaGtid, MariaGtidList
from binlog_parser.header import EventHeader

FL_STANDALONE = 1
FL_GROUP_COMMIT_ID = 2
FL_TRANSACTIONAL = 4
FL_ALLOW_PARALLEL = 8
FL_WAITED = 16
FL_DDL = 32
FL_PREPARED_XA = 64
FL_COMPLETED_XA = 128

FL_EXTRA_MULTI_ENGINE_E1 = 1
FL_START_ALTER_E1 = 2
FL_COMMIT_ALTER_E1 = 4
FL_ROLLBACK_ALTER_E1 = 8


def decode_annotate_rows(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    return AnnotateRowsEvent(h, text(body))


def decode_binlog_checkpoint(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    need(body, 4, "BINLOG_CHECKPOINT")
    n = U32.unpack_from(body, 0)[0]
    if 4 + n > len(body):
        raise CorruptEventError(f"BINLOG_CHECKPOINT name of {n} bytes runs past the event")
    return BinlogCheckpointEvent(h, text(body[4:4 + n]))


def decode_maria_gtid(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    """seq_no(8) domain_id(4) flags2(1); then commit_id(8) if FL_GROUP_COMMIT_ID, or the
    XID (format_id 4, gtrid_len 1, bqual_len 1, data) if FL_PREPARED_XA|FL_COMPLETED_XA;
    then (10.8+) flags_extra(1) [+ extra_engines(1)] [+ sa_seq_no(8)]."""
    need(body, 13, "MariaDB GTID")
    seq_no = U64.unpack_from(body, 0)[0]
    domain_id = U32.unpack_from(body, 8)[0]
    flags = body[12]
    off = 13
    n = len(body)
    commit_id = None
    xa_fmt = xa_gtrid = xa_bqual = None
    if flags & FL_GROUP_COMMIT_ID:
        need(body, off + 8, "MariaDB GTID commit_id")
        commit_id = U64.unpack_from(body, off)[0]
        off += 8
    elif flags & (FL_PREPARED_XA | FL_COMPLETED_XA):
        need(body, off + 6, "MariaDB GTID XID")
        xa_fmt = U32.unpack_from(body, off)[0]
        gl = body[off + 4]
        bl = body[off + 5]
        off += 6
        if gl > 64 or bl > 64:
            raise CorruptEventError(f"MariaDB GTID XID lengths {gl}/{bl}")
        need(body, off + gl + bl, "MariaDB GTID XID data")
        xa_gtrid = bytes(body[off:off + gl])
        xa_bqual = bytes(body[off + gl:off + gl + bl])
        off += gl + bl
    flags_extra = extra_engines = sa_seq_no = None
    if off < n:
        flags_extra = body[off]
        off += 1
        if flags_extra & FL_EXTRA_MULTI_ENGINE_E1 and off < n:
            extra_engines = body[off]
            off += 1
        if flags_extra & (FL_COMMIT_ALTER_E1 | FL_ROLLBACK_ALTER_E1) and off + 8 <= n:
            sa_seq_no = U64.unpack_from(body, off)[0]
            off += 8
    gtid = f"{domain_id}-{h.server_id}-{seq_no}"
    return MariaGtidEvent(h, gtid, domain_id, seq_no, flags, commit_id, xa_fmt, xa_gtrid, xa_bqual,
                          flags_extra, extra_engines, sa_seq_no)


def decode_maria_gtid_list(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    """count (low 28 bits) | flags (high 4 bits) in 4 bytes, then (domain 4, server 4, seq 8)."""
    need(body, 4, "MariaDB GTID_LIST")
    word = U32.unpack_from(body, 0)[0]
    count = word & 0x0FFFFFFF
    flags = word >> 28
    if 4 + count * 16 > len(body):
        raise CorruptEventError(f"GTID_LIST claims {count} GTIDs in {len(body)} bytes")
    gtids = []
    off = 4
    for _ in range(count):
        d = U32.unpack_from(body, off)[0]
        s = U32.unpack_from(body, off + 4)[0]
        q = U64.unpack_from(body, off + 8)[0]
        gtids.append(MariaGtid(d, s, q))
        off += 16
    return MariaGtidListEvent(h, MariaGtidList(gtids), flags)


def decode_start_encryption(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    need(body, 17, "START_ENCRYPTION")
    return StartEncryptionEvent(h, body[0], U32.unpack_from(body, 1)[0], bytes(body[5:17]))
