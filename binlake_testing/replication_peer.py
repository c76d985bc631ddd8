"""A scripted MySQL replication peer on 127.0.0.1: what the archiver's hostile-server tests talk to.

It speaks enough of the MySQL protocol for PyMySQL and binlake's archiver: the v10 handshake
(``mysql_native_password``, any password accepted, no TLS), the text queries the archiver sends
(``SELECT VERSION()...``, ``@@server_uuid``, ``@@gtid_executed``, ``SHOW BINARY LOGS``, ``SET ...``),
``COM_REGISTER_SLAVE`` and ``COM_BINLOG_DUMP``, answered with binlog files built by
:mod:`binlog_parser.writer`: an artificial ROTATE per file (the name can be scripted: a hostile
server), the FORMAT_DESCRIPTION re-sent with log_pos 0 on a mid-file start, then the file's events;
EOF at the end of a non-blocking dump. Scripted faults: drop every session after N transactions.

Why hand-written: no library offers a scriptable replication *server*; a real server cannot send a
ROTATE naming ``../victim/keep.txt`` or come back as another server under the same file names.
"""

from __future__ import annotations

import io
import socket
import struct
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

from binlog_parser.constants import LOG_EVENT_ARTIFICIAL_F, LOG_EVENT_BINLOG_IN_USE_F, EventType
from binlog_parser.replication import BINLOG_DUMP_NON_BLOCK, frame_packets
from binlog_parser.writer import BinlogFileWriter, frame_event, rotate_body

_CAPABILITIES = 0x0001 | 0x0004 | 0x0200 | 0x2000 | 0x8000 | 0x80000  # long pw, long flag, 4.1, txns, secure, plugin auth
_AUTOCOMMIT = 0x0002


def build_files(uuid: str, transactions: list[int], *, base: str = "binlog", first: int = 1, width: int = 6,
                server_id: int = 1, timestamp: int = 1_700_000_000, last_open: bool = True,
                rotate_to: dict[int, str] | None = None) -> dict[str, bytes]:
    """MySQL 8 binlog files with ``transactions[i]`` one-row transactions in file i (GTIDs ``uuid:1..``).
    Every file but the last ends with a ROTATE to the next name (``rotate_to[i]`` overrides it);
    the last is left open (in-use flag set) unless ``last_open`` is False."""
    files: dict[str, bytes] = {}
    gno = 0
    for i, count in enumerate(transactions):
        name = f"{base}.{first + i:0{width}d}"
        buf = io.BytesIO()
        prev = f"{uuid}:1-{gno}" if gno else ""
        w = BinlogFileWriter(buf, server_id=server_id, timestamp=timestamp + i, create_timestamp=timestamp + i,
                             previous_gtids=prev)
        for _ in range(count):
            gno += 1
            w.begin_transaction(f"{uuid}:{gno}", timestamp=timestamp + i, sequence_number=gno)
            w.query(f"INSERT INTO t VALUES ({gno})", "db")
            w.xid()
        last = i == len(transactions) - 1
        if not last:
            w.rotate((rotate_to or {}).get(i, f"{base}.{first + i + 1:0{width}d}"))
        elif not last_open:
            w.rotate(f"{base}.{first + i + 1:0{width}d}")
        files[name] = buf.getvalue()
    return files


def events_of(data: bytes, start: int = 4) -> list[bytes]:
    out, pos = [], start
    while pos + 19 <= len(data):
        size = int.from_bytes(data[pos + 9:pos + 13], "little")
        out.append(data[pos:pos + size])
        pos += size
    return out


def _lenenc_int(n: int) -> bytes:
    if n < 251:
        return bytes((n,))
    if n < 1 << 16:
        return b"\xfc" + struct.pack("<H", n)
    return b"\xfd" + struct.pack("<I", n)[:3] if n < 1 << 24 else b"\xfe" + struct.pack("<Q", n)


def _lenenc_str(value: bytes) -> bytes:
    return _lenenc_int(len(value)) + value


def _ok() -> bytes:
    return b"\x00\x00\x00" + struct.pack("<HH", _AUTOCOMMIT, 0)


def _err(code: int, message: str, state: str = "HY000") -> bytes:
    return b"\xff" + struct.pack("<H", code) + b"#" + state.encode() + message.encode()


def _eof() -> bytes:
    return b"\xfe" + struct.pack("<HH", 0, _AUTOCOMMIT)


def _with_crc(event: bytes) -> bytes:
    return event[:-4] + struct.pack("<I", zlib.crc32(event[:-4]) & 0xFFFFFFFF)


@dataclass
class ReplicationPeer:
    """The peer's script: its files (in order) and identity; start() listens on 127.0.0.1."""

    files: dict[str, bytes]
    server_uuid: str = "11111111-1111-1111-1111-111111111111"
    server_id: int = 1
    version: str = "8.0.40-peer"
    #: the name the artificial ROTATE announces for a file (a hostile server), by real name
    announce: dict[str, str] = field(default_factory=dict)
    #: close the connection after this many transactions in one dump session (None: never)
    transactions_per_session: int | None = None
    #: called with the peer when a client connects (a script step: fail over, purge, ...)
    on_connect: Callable[[ReplicationPeer], None] | None = None
    connections: int = 0
    dumps: list[tuple[str, int]] = field(default_factory=list)
    port: int = 0
    _sock: socket.socket | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _clients: list[socket.socket] = field(default_factory=list)

    def start(self) -> ReplicationPeer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(16)
        sock.settimeout(0.2)
        self._sock, self.port = sock, sock.getsockname()[1]
        self._spawn(self._accept_loop)
        return self

    def stop(self) -> None:
        self._stop.set()
        for client in list(self._clients):
            with _quiet():
                client.shutdown(socket.SHUT_RDWR)
            client.close()
        for t in self._threads:
            t.join(timeout=5)
        if self._sock is not None:
            self._sock.close()

    def __enter__(self) -> ReplicationPeer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)
        t.start()
        self._threads.append(t)

    def _accept_loop(self) -> None:
        assert self._sock is not None
        while not self._stop.is_set():
            try:
                client, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            if self.on_connect is not None:
                self.on_connect(self)
            self._clients.append(client)
            self._spawn(self._serve, client)

    # --- one connection -------------------------------------------------------------------------

    def _serve(self, client: socket.socket) -> None:
        try:
            client.settimeout(30)
            self._handshake(client)
            while not self._stop.is_set():
                payload = _read_packet(client)
                if payload is None or payload[:1] == b"\x01":
                    return
                if not self._command(client, payload):
                    return
        except OSError:
            return
        finally:
            with _quiet():
                client.close()

    def _handshake(self, client: socket.socket) -> None:
        salt = b"abcdefgh" + b"ijklmnopqrst"
        greeting = (b"\x0a" + self.version.encode() + b"\x00" + struct.pack("<I", 7) + salt[:8] + b"\x00"
                    + struct.pack("<H", _CAPABILITIES & 0xFFFF) + b"\xff" + struct.pack("<H", _AUTOCOMMIT)
                    + struct.pack("<H", _CAPABILITIES >> 16) + bytes((21,)) + bytes(10) + salt[8:] + b"\x00"
                    + b"mysql_native_password\x00")
        client.sendall(frame_packets(greeting, 0))
        _read_packet(client)  # the client's answer: any password is fine
        client.sendall(frame_packets(_ok(), 2))

    def _command(self, client: socket.socket, payload: bytes) -> bool:
        cmd = payload[0]
        if cmd == 0x03:
            self._query(client, payload[1:].decode("utf-8", "replace"))
        elif cmd in (0x0E, 0x15):  # PING, REGISTER_SLAVE
            client.sendall(frame_packets(_ok(), 1))
        elif cmd == 0x12:
            return self._dump(client, payload)
        else:
            client.sendall(frame_packets(_err(1047, "Unknown command"), 1))
        return True

    def _query(self, client: socket.socket, sql: str) -> None:
        text = sql.strip().upper()
        rows: list[tuple[str, ...]] | None = None
        if "VERSION()" in text:
            rows = [(self.version, "CRC32")]
        elif "SERVER_UUID" in text:
            rows = [(str(self.server_id), self.server_uuid)]
        elif "GTID_EXECUTED" in text:
            rows = [("",)]
        elif text.startswith("SHOW BINARY LOGS"):
            rows = [(name, str(len(data))) for name, data in self.files.items()]
        elif text.startswith("SET "):
            client.sendall(frame_packets(_ok(), 1))
            return
        if rows is None:
            client.sendall(frame_packets(_err(1064, f"the scripted peer does not know {sql!r}"), 1))
            return
        ncols = len(rows[0]) if rows else 1
        packets = [_lenenc_int(ncols)]
        for i in range(ncols):
            packets.append(b"".join(_lenenc_str(x) for x in (b"def", b"", b"", b"", f"c{i}".encode(), b""))
                           + b"\x0c" + struct.pack("<HIBHB", 33, 255, 0xFD, 0, 0) + b"\x00\x00")
        packets.append(_eof())
        packets += [b"".join(_lenenc_str(v.encode()) for v in row) for row in rows]
        packets.append(_eof())
        client.sendall(b"".join(frame_packets(p, 1 + i) for i, p in enumerate(packets)))

    def _dump(self, client: socket.socket, payload: bytes) -> bool:
        position, flags, _server_id = struct.unpack_from("<IHI", payload, 1)
        name = payload[11:].decode("utf-8", "replace") or next(iter(self.files))
        self.dumps.append((name, position))
        seq = [1]

        def send(body: bytes) -> None:
            client.sendall(frame_packets(body, seq[0] & 0xFF))
            seq[0] += 1

        if name not in self.files:
            send(_err(1236, "Could not find first log file name in binary log index file"))
            return True
        names = list(self.files)
        sent = 0
        for i, fname in enumerate(names[names.index(name):]):
            start = position if i == 0 else 4
            send(b"\x00" + frame_event(EventType.ROTATE, rotate_body(self.announce.get(fname, fname), start),
                                       timestamp=0, server_id=self.server_id, log_pos=0,
                                       flags=LOG_EVENT_ARTIFICIAL_F))
            events = events_of(self.files[fname])
            if start > 4:
                fde = bytearray(events[0])
                fde[13:17] = bytes(4)  # log_pos 0
                fde[17] &= ~LOG_EVENT_BINLOG_IN_USE_F & 0xFF
                fde[19 + 52:19 + 56] = bytes(4)  # created 0
                send(b"\x00" + _with_crc(bytes(fde)))
            for event in events_of(self.files[fname], start):
                if event[4] == EventType.FORMAT_DESCRIPTION:
                    event = event[:17] + bytes((event[17] & ~LOG_EVENT_BINLOG_IN_USE_F & 0xFF,)) + event[18:]
                send(b"\x00" + event)
                if event[4] == EventType.XID:
                    sent += 1
                    if self.transactions_per_session and sent >= self.transactions_per_session:
                        return False  # drop the connection
            if events_of(self.files[fname])[-1][4] not in (EventType.ROTATE, EventType.STOP):
                break  # the active file: nothing follows it yet
        if flags & BINLOG_DUMP_NON_BLOCK:
            send(_eof())
            return True
        while not self._stop.wait(0.5):  # a blocking dump: heartbeats until stopped, as a server sends
            send(b"\x00" + frame_event(EventType.HEARTBEAT, fname.encode(), timestamp=0, server_id=self.server_id,
                                       log_pos=len(self.files[fname]), flags=LOG_EVENT_ARTIFICIAL_F))
        return False


def _read_packet(client: socket.socket) -> bytes | None:
    head = _read_exact(client, 4)
    if head is None:
        return None
    length = int.from_bytes(head[:3], "little")
    return _read_exact(client, length) if length else b""


def _read_exact(client: socket.socket, n: int) -> bytes | None:
    out = bytearray()
    while len(out) < n:
        chunk = client.recv(n - len(out))
        if not chunk:
            return None
        out += chunk
    return bytes(out)


class _quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return True
