"""``BinlogFileWriter``: one binlog file as a MySQL 8.0 / 8.4 / 9.x server writes it.

magic, FORMAT_DESCRIPTION (LOG_EVENT_BINLOG_IN_USE_F set while the file is open and cleared in
place on close, as the server does), PREVIOUS_GTIDS (tagged format when a tag is present), then
transactions: GTID / GTID_TAGGED / ANONYMOUS_GTID with logical clocks, commit timestamps and the
transaction length, QUERY(BEGIN), TABLE_MAP, rows v2 events split at ``max_rows_event_size``
(STMT_END_F on a statement's last), XID; or a DDL QUERY with its ``ddl_xid``. Optionally the
transaction body goes into one zstd TRANSACTION_PAYLOAD. The file ends with ROTATE or STOP (or
nothing, for a file still in use / a crash). Every event carries its end position in ``log_pos``
and, with ``checksum=True``, a CRC32 trailer.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from binlog_parser.constants import (
    BINLOG_MAGIC,
    CHECKSUM_CRC32,
    CHECKSUM_OFF,
    LOG_EVENT_BINLOG_IN_USE_F,
    LOG_EVENT_IGNORABLE_F,
    LOG_EVENT_SUPPRESS_USE_F,
    EventType,
)
from binlog_parser.context import DecodeContext
from binlog_parser.errors import EncodeError
from binlog_parser.gtid import Gtid, GtidSet
from binlog_parser.header import EventHeader
from binlog_parser.rows.table_map import decode_table_map
from binlog_parser.writer import events as wire
from binlog_parser.writer.payload import compress_events, transaction_payload_body
from binlog_parser.writer.rows import (
    DELETE_ROWS_V2,
    STMT_END_F,
    UPDATE_ROWS_V2,
    WRITE_ROWS_V2,
    RowsEncoder,
    Table,
    table_map_body,
)

_QUERY = int(EventType.QUERY)
_XID = int(EventType.XID)
_TABLE_MAP = int(EventType.TABLE_MAP)
_ZERO_UUID = "00000000-0000-0000-0000-000000000000"

#: sql_mode of a default MySQL 8.0 server (ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,
#: NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION)
DEFAULT_SQL_MODE = 1168113696


def default_status_vars(*, charset: int = 255, ddl_xid: int | None = None,
                        db: str | None = None) -> dict[str, Any]:
    """QUERY status variables as an 8.0 server writes them for BEGIN (or a DDL with ``ddl_xid``)."""
    sv: dict[str, Any] = {
        "flags2": 0,
        "sql_mode": DEFAULT_SQL_MODE,
        "catalog": "std",
        "charset": {"client": charset, "connection": charset, "server": 255},
    }
    if ddl_xid is not None:
        sv["updated_db_names"] = [db] if db else []
        sv["ddl_xid"] = ddl_xid
    sv["default_collation_for_utf8mb4"] = 255
    if ddl_xid is not None:
        sv["sql_require_primary_key"] = 0
    return sv


@dataclass
class _Pending:
    """Events of the open transaction: (type, body, flags, timestamp)."""

    gtid: Gtid | None
    gtid_kwargs: dict[str, Any]
    timestamp: int
    events: list[tuple[int, bytes, int, int]] = field(default_factory=list)
    mapped: set[int] = field(default_factory=set)
    rows: dict[str, int] = field(default_factory=dict)


@dataclass
class _TableEntry:
    body: bytes
    table_map: Any  # TableMapEvent
    encoder: RowsEncoder


def _as_gtid(g: Any) -> Gtid | None:
    if g is None or isinstance(g, Gtid):
        return g
    if isinstance(g, str):
        return Gtid.parse(g)
    if isinstance(g, tuple):
        if len(g) == 2:
            return Gtid(g[0], g[1])
        return Gtid(g[0], g[2], g[1] or "")
    raise TypeError(f"not a GTID: {g!r}")


class BinlogFileWriter:
    """Write one binlog file to ``stream`` (binary, ideally seekable)."""

    def __init__(self, stream: IO[bytes], *, server_version: str = "8.0.40", server_id: int = 1,
                 checksum: bool = True, timestamp: int = 0, create_timestamp: int = 0,
                 previous_gtids: GtidSet | str | None = None, compression: str | None = None,
                 compression_level: int = 3, mark_in_use: bool = True,
                 max_rows_event_size: int = 8192, thread_id: int = 1) -> None:
        self.stream = stream
        self.server_version = server_version
        self.server_id = server_id
        self.checksum = checksum
        self.compression = compression
        self.compression_level = compression_level
        self.max_rows_event_size = max_rows_event_size
        self.thread_id = thread_id
        self.version_id = wire.server_version_id(server_version)
        self.timestamp = timestamp
        self.pos = 0
        self.closed = False
        self.closing_event: str | None = None
        self.gtids: list[Gtid] = []
        self.transactions = 0
        self.rows_by_table: dict[str, int] = {}
        self.events_written = 0
        self._pending: _Pending | None = None
        self._tables: dict[Table, _TableEntry] = {}
        self._ph = wire.post_header_lengths(server_version)
        self._ctx: DecodeContext | None = None
        if isinstance(previous_gtids, str):
            previous_gtids = GtidSet.from_text(previous_gtids)
        self.previous_gtids = previous_gtids if previous_gtids is not None else GtidSet()
        self._in_use = mark_in_use
        self._write(BINLOG_MAGIC)
        self.pos = 4
        fde = wire.format_description_body(server_version, create_timestamp,
                                           checksum_alg=CHECKSUM_CRC32 if checksum else CHECKSUM_OFF)
        # the FORMAT_DESCRIPTION always carries a CRC32 (of its bytes, in-use flag cleared)
        self._fde_pos = self.pos
        self._emit(int(EventType.FORMAT_DESCRIPTION), fde, LOG_EVENT_BINLOG_IN_USE_F if mark_in_use else 0,
                   timestamp, force_checksum=True)
        self._emit(int(EventType.PREVIOUS_GTIDS), wire.previous_gtids_body(self.previous_gtids),
                   LOG_EVENT_IGNORABLE_F, timestamp)

    # -- low level -------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        self.stream.write(data)

    def _emit(self, type_code: int, body: bytes, flags: int, timestamp: int,
              force_checksum: bool = False) -> int:
        ck = self.checksum or force_checksum
        size = wire.HEADER_LEN + len(body) + (4 if ck else 0)
        data = wire.frame_event(type_code, body, timestamp=timestamp, server_id=self.server_id,
                                log_pos=self.pos + size, flags=flags, checksum=ck)
        self._write(data)
        self.pos += size
        self.events_written += 1
        return size

    def _check_open(self) -> None:
        if self.closed:
            raise EncodeError("the binlog file is closed")

    # -- tables ------------------------------------------------------------------

    def _table(self, table: Table) -> _TableEntry:
        entry = self._tables.get(table)
        if entry is None:
            body = table_map_body(table)
            if self._ctx is None:
                self._ctx = DecodeContext(server_version=self.server_version,
                                          post_header_lengths=self._ph)
            h = EventHeader(0, 0, 0, _TABLE_MAP, self.server_id, 0, 0, 0)
            tmev = decode_table_map(h, memoryview(body), self._ctx)
            entry = _TableEntry(body, tmev, RowsEncoder(tmev))
            self._tables[table] = entry
        return entry

    def table_map_event(self, table: Table) -> Any:
        """The decoded ``TableMapEvent`` the writer uses for ``table``."""
        return self._table(table).table_map

    # -- transactions --------------------------------------------------------------

    def begin_transaction(self, gtid: Any = None, *, last_committed: int = 0,
                          sequence_number: int = 1, timestamp: int | None = None,
                          commit_timestamp: int | None = None,
                          original_commit_timestamp: int | None = None, gtid_flags: int = 0,
                          original_server_version: int | None = None,
                          commit_group_ticket: int | None = None, begin: bool = True,
                          schema: str = "") -> None:
        """Open a transaction: ``gtid`` (``"uuid:gno"``, ``"uuid:tag:gno"``, a ``Gtid``, or None
        for ANONYMOUS_GTID), logical clock, ``timestamp`` (s) and ``commit_timestamp`` (µs).
        ``begin`` writes QUERY(BEGIN) (False for a DDL: then call :meth:`query` once)."""
        self._check_open()
        if self._pending is not None:
            raise EncodeError("a transaction is already open")
        ts = self.timestamp if timestamp is None else timestamp
        self.timestamp = ts
        g = _as_gtid(gtid)
        self._pending = _Pending(g, dict(
            flags=gtid_flags, last_committed=last_committed, sequence_number=sequence_number,
            immediate_commit_timestamp=commit_timestamp if commit_timestamp is not None else ts * 1000000,
            original_commit_timestamp=original_commit_timestamp,
            immediate_server_version=self.version_id,
            original_server_version=original_server_version,
            commit_group_ticket=commit_group_ticket), ts)
        if begin:
            self.query("BEGIN", schema, flags=LOG_EVENT_SUPPRESS_USE_F)

    def query(self, sql: str, schema: str = "", *, status_vars: dict[str, Any] | None = None,
              flags: int = 0, exec_time: int = 0, error_code: int = 0) -> None:
        p = self._require()
        sv = default_status_vars() if status_vars is None else status_vars
        body = wire.query_body(sql, schema, thread_id=self.thread_id, exec_time=exec_time,
                               error_code=error_code, status_vars=sv)
        p.events.append((_QUERY, body, flags, p.timestamp))

    def table_map(self, table: Table) -> Any:
        """Log ``table``'s TABLE_MAP for the next statement (done automatically by the rows
        methods: every statement starts with the TABLE_MAPs it uses, like the server);
        returns the decoded ``TableMapEvent``."""
        p = self._require()
        entry = self._table(table)
        if table.table_id not in p.mapped:
            p.events.append((_TABLE_MAP, entry.body, 0, p.timestamp))
            p.mapped.add(table.table_id)
        return entry.table_map

    def _rows(self, type_code: int, table: Table, rows: Sequence[Any]) -> None:
        p = self._require()
        if not rows:
            return
        self.table_map(table)
        enc = self._table(table).encoder
        # split like the server (binlog_row_event_max_size): STMT_END_F on the last event
        limit = self.max_rows_event_size
        chunks: list[list[Any]] = []
        cur: list[Any] = []
        size = 0
        if type_code == UPDATE_ROWS_V2:
            bb = enc.bitmap_of(rows[0][0])
            ab = enc.bitmap_of(rows[0][1])
            pb, pa = enc._plan(bb), enc._plan(ab)
            images = [enc.image(b, pb) + enc.image(a, pa) for b, a in rows]
            prefix_bitmaps = bb + ab
        else:
            bm = enc.bitmap_of(rows[0])
            plan = enc._plan(bm)
            images = [enc.image(r, plan) for r in rows]
            prefix_bitmaps = bm
        for img in images:
            if cur and size + len(img) > limit:
                chunks.append(cur)
                cur, size = [], 0
            cur.append(img)
            size += len(img)
        chunks.append(cur)
        tid = table.table_id.to_bytes(6, "little")
        width = enc._width_bytes
        for i, chunk in enumerate(chunks):
            flags = STMT_END_F if i == len(chunks) - 1 else 0
            body = tid + flags.to_bytes(2, "little") + b"\x02\x00" + width + prefix_bitmaps \
                + b"".join(chunk)
            p.events.append((type_code, body, 0, p.timestamp))
        # STMT_END_F releases the statement's table maps (readers drop their table-id map, as
        # the server's applier does): the next statement logs its TABLE_MAPs again
        p.mapped.clear()
        key = f"{table.schema}.{table.name}"
        p.rows[key] = p.rows.get(key, 0) + len(rows)

    def write_rows(self, table: Table, rows: Sequence[Any]) -> None:
        """INSERT: rows as dicts (name -> value) or sequences in column order."""
        self._rows(WRITE_ROWS_V2, table, rows)

    def update_rows(self, table: Table, pairs: Sequence[tuple[Any, Any]]) -> None:
        """UPDATE: ``(before, after)`` image pairs."""
        self._rows(UPDATE_ROWS_V2, table, pairs)

    def delete_rows(self, table: Table, rows: Sequence[Any]) -> None:
        self._rows(DELETE_ROWS_V2, table, rows)

    def xid(self, xid: int | None = None) -> None:
        """Commit the open transaction with an XID event."""
        p = self._require()
        p.events.append((_XID, wire.xid_body(self.transactions + 1 if xid is None else xid), 0,
                         p.timestamp))
        self._commit()

    def commit(self) -> None:
        """Commit the open transaction as logged so far (a DDL, or a non-transactional
        statement ending with its own QUERY)."""
        self._require()
        self._commit()

    def ddl(self, sql: str, schema: str, gtid: Any = None, *, ddl_xid: int | None = None,
            **kwargs: Any) -> None:
        """A whole DDL transaction: GTID + QUERY(sql) with the atomic-DDL status variables."""
        self.begin_transaction(gtid, begin=False, **kwargs)
        xid = self.transactions + 1 if ddl_xid is None else ddl_xid
        self.query(sql, schema, status_vars=default_status_vars(ddl_xid=xid, db=schema))
        self._commit()

    def _require(self) -> _Pending:
        if self._pending is None:
            raise EncodeError("no open transaction: call begin_transaction() first")
        return self._pending

    def _commit(self) -> None:
        p = self._pending
        assert p is not None
        self._pending = None
        ck = 4 if self.checksum else 0
        g = p.gtid
        kw = p.gtid_kwargs
        if g is None:
            type_code = int(EventType.ANONYMOUS_GTID)
        elif g.tag:
            type_code = int(EventType.GTID_TAGGED)
        else:
            type_code = int(EventType.GTID)

        def gbody(trx_len: int) -> bytes:
            if type_code == EventType.GTID_TAGGED:
                assert g is not None
                return wire.gtid_tagged_body(uuid=g.uuid, gno=g.gno, tag=g.tag, transaction_length=trx_len,
                                             **kw)
            return wire.gtid_body(uuid=g.uuid if g else _ZERO_UUID, gno=g.gno if g else 0,
                                  transaction_length=trx_len, **kw)

        # like the server, only transactional DML is compressed (not DDL, not empty transactions)
        if self.compression and any(t in (WRITE_ROWS_V2, UPDATE_ROWS_V2, DELETE_ROWS_V2)
                                    for t, _b, _f, _ts in p.events):
            inner = b"".join(wire.frame_event(t, b, timestamp=ts, server_id=self.server_id, log_pos=0,
                                              flags=f, checksum=False) for t, b, f, ts in p.events)
            payload_body = transaction_payload_body(
                compress_events(inner, self.compression_level), len(inner))
            events = [(int(EventType.TRANSACTION_PAYLOAD), payload_body, 0, p.timestamp)]
        else:
            events = p.events
        rest = sum(wire.HEADER_LEN + len(b) + ck for _t, b, _f, _ts in events)
        trx_len = rest + wire.HEADER_LEN + ck + len(gbody(0))
        while True:
            body = gbody(trx_len)
            total = rest + wire.HEADER_LEN + ck + len(body)
            if total == trx_len:
                break
            trx_len = total
        self._emit(type_code, body, 0, p.timestamp)
        for t, b, f, ts in events:
            self._emit(t, b, f, ts)
        if g is not None:
            self.gtids.append(g)
        self.transactions += 1
        for k, n in p.rows.items():
            self.rows_by_table[k] = self.rows_by_table.get(k, 0) + n

    # -- file end ------------------------------------------------------------------

    def rotate(self, next_file: str, *, timestamp: int | None = None) -> None:
        """End the file with ROTATE(next_file) and close it."""
        self._end_check()
        self._emit(int(EventType.ROTATE), wire.rotate_body(next_file), 0,
                   self.timestamp if timestamp is None else timestamp)
        self.closing_event = "ROTATE"
        self.close()

    def stop(self, *, timestamp: int | None = None) -> None:
        """End the file with STOP (clean shutdown) and close it."""
        self._end_check()
        self._emit(int(EventType.STOP), b"", 0, self.timestamp if timestamp is None else timestamp)
        self.closing_event = "STOP"
        self.close()

    def _end_check(self) -> None:
        self._check_open()
        if self._pending is not None:
            raise EncodeError("a transaction is still open")

    def close(self, *, in_use: bool = False) -> None:
        """Close the file. ``in_use=True`` leaves LOG_EVENT_BINLOG_IN_USE_F set (a file still
        being written, or a crash); otherwise the flag is cleared in place, as the server does
        (the FORMAT_DESCRIPTION's CRC was computed without it)."""
        if self.closed:
            return
        if self._pending is not None and not in_use:
            raise EncodeError("a transaction is still open")
        self.closed = True
        if self._in_use and not in_use:
            flags_at = self._fde_pos + 17
            if hasattr(self.stream, "getbuffer"):
                self.stream.getbuffer()[flags_at] &= ~LOG_EVENT_BINLOG_IN_USE_F & 0xFF
            else:
                here = self.stream.tell()
                self.stream.seek(flags_at)
                self.stream.write(bytes((0,)))
                self.stream.seek(here)
            self._in_use = False

    @property
    def gtid_set(self) -> GtidSet:
        """The GTIDs this file contains."""
        return GtidSet.from_gtids(self.gtids)

    @property
    def in_use(self) -> bool:
        return self._in_use


def write_binlog_bytes(build: Any, **kwargs: Any) -> bytes:
    """Run ``build(writer)`` on a fresh in-memory writer and return the file bytes."""
    buf = io.BytesIO()
    w = BinlogFileWriter(buf, **kwargs)
    build(w)
    return buf.getvalue()
