"""python-mysql-replication (PyPI ``mysql-replication``) driven from binlog *file* bytes.

The library only reads from a replication connection: ``BinLogPacketWrapper`` takes a network
packet (an OK byte, then the event) and a control connection. Here each event of the file is
wrapped in a fake packet and a fake control connection answers the two things it asks
(``charset`` and ``_get_dbms()``), so its own event classes decode the file exactly as they would
decode the stream: rows events are fully decoded (``.rows``), with column names from the
TABLE_MAP's optional metadata (``binlog_row_metadata=FULL``).

Events it does not implement (TRANSACTION_PAYLOAD, GTID_TAGGED, ...) come back as its
``NotImplementedEvent``: their content (e.g. compressed transactions) is not decoded.

``python -m bench.peers.pymysqlrepl FILE...`` prints a summary per file.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Iterator
from typing import Any

from pymysqlreplication import event as _ev
from pymysqlreplication import row_event as _rev
from pymysqlreplication.packet import BinLogPacketWrapper

_FDE = 15
_TABLE_MAP = 19
_ROWS = {23, 24, 25, 30, 31, 32, 39}

ALL_EVENTS = frozenset({
    _ev.QueryEvent, _ev.RotateEvent, _ev.FormatDescriptionEvent, _ev.XidEvent, _ev.IntvarEvent,
    _ev.GtidEvent, _ev.PreviousGtidsEvent, _ev.StopEvent, _ev.BeginLoadQueryEvent,
    _ev.ExecuteLoadQueryEvent, _ev.HeartbeatLogEvent, _ev.XAPrepareEvent, _ev.RowsQueryLogEvent,
    _ev.RandEvent, _ev.UserVarEvent, _ev.NotImplementedEvent, _ev.MariadbAnnotateRowsEvent,
    _ev.MariadbBinLogCheckPointEvent, _ev.MariadbGtidEvent, _ev.MariadbGtidListEvent,
    _ev.MariadbStartEncryptionEvent, _rev.UpdateRowsEvent, _rev.WriteRowsEvent,
    _rev.DeleteRowsEvent, _rev.TableMapEvent, _rev.PartialUpdateRowsEvent,
})


class _Packet:
    """What BinLogPacketWrapper reads from: the event bytes behind a 1-byte OK marker."""

    __slots__ = ("_data", "_position")  # pymysql's MysqlPacket attribute names (the library peeks)

    def __init__(self, event_bytes: bytes) -> None:
        self._data = b"\x00" + event_bytes
        self._position = 0

    def read(self, n: int) -> bytes:
        n = int(n)
        b = self._data[self._position:self._position + n]
        self._position += n
        return b

    def advance(self, n: int) -> None:
        self._position += int(n)

    def rewind(self, n: int) -> None:
        self._position -= int(n)


class _Cursor:
    def execute(self, *a: Any, **k: Any) -> None:
        pass

    def fetchall(self) -> list:
        return []

    def fetchone(self) -> None:
        return None

    def close(self) -> None:
        pass


class _Ctl:
    """The control connection: no server here (column names come from FULL metadata)."""

    charset = "utf8mb4"

    def __init__(self, dbms: str = "mysql") -> None:
        self.dbms = dbms

    def _get_dbms(self) -> str:
        return self.dbms

    def cursor(self, *a: Any, **k: Any) -> _Cursor:
        return _Cursor()


class PeerError:
    """An event python-mysql-replication raised on (kept, never dropped)."""

    def __init__(self, pos: int, type_code: int, error: str) -> None:
        self.pos, self.type_code, self.error = pos, type_code, error

    def __repr__(self) -> str:
        return f"PeerError(pos={self.pos}, type={self.type_code}, {self.error})"


def iter_events(data: bytes, *, decode_rows: bool = True) -> Iterator[Any]:
    """Yield python-mysql-replication event objects for every event of one binlog file."""
    if data[:4] != b"\xfebin":
        raise ValueError("not a binlog file")
    ctl = _Ctl()
    table_map: dict[int, Any] = {}
    use_checksum = False
    post_header = None
    version: tuple = (0, 0, 0)
    pos = 4
    n = len(data)
    while pos + 19 <= n:
        type_code = data[pos + 4]
        size = struct.unpack_from("<I", data, pos + 9)[0]
        if size < 19 or pos + size > n:
            break  # truncated tail
        raw = data[pos:pos + size]
        if type_code == _FDE:
            sv = raw[21:71].split(b"\x00", 1)[0].decode("latin-1")
            if "mariadb" in sv.lower():
                ctl.dbms = "mariadb"
            use_checksum = False
        try:
            w = BinLogPacketWrapper(_Packet(raw), table_map, ctl, version, use_checksum, ALL_EVENTS,
                                    None, None, None, None, False, False, False, True, False, False,
                                    post_header)
            ev = w.event
            if type_code in _ROWS and ev is not None and decode_rows:
                ev.rows  # noqa: B018  (decodes every row)
        except Exception as exc:  # the peer's own failure on this event: report, keep going
            yield PeerError(pos, type_code, f"{type(exc).__name__}: {exc}")
            pos += size
            continue
        if type_code == _FDE and ev is not None:
            version = ev.mysql_version
            post_header = ev.post_header_len
            # the algorithm byte: CRC32 trailers follow on every later event
            use_checksum = raw[-5] == 1 if version >= (5, 6, 1) or version[0] >= 10 else False
        elif type_code == _TABLE_MAP and ev is not None:
            table_map[ev.table_id] = ev.get_table()
        if ev is not None:
            yield ev
        pos += size


def decode_file(path: str, *, decode_rows: bool = True) -> dict[str, int]:
    """Decode a whole file; returns counts (events, rows)."""
    with open(path, "rb") as f:
        data = f.read()
    events = rows = errors = 0
    for ev in iter_events(data, decode_rows=decode_rows):
        events += 1
        if isinstance(ev, PeerError):
            errors += 1
        elif decode_rows and isinstance(ev, _rev.RowsEvent):
            rows += len(ev.rows)
    return {"events": events, "rows": rows, "errors": errors, "bytes": len(data)}


def main(argv: list[str] | None = None) -> int:
    for path in (argv if argv is not None else sys.argv[1:]):
        print(path, decode_file(path))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
