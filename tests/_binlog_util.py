"""Builders for synthetic binlog bytes (used by the parser tests)."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
BINLOGS = FIXTURES / "binlogs"
MAGIC = b"\xfebin"

# MySQL 8.0 post-header lengths (41 types: 1..41)
POST_HEADER_80 = bytes([0, 13, 0, 8, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0,
                        0, 2, 0, 0, 0, 10, 10, 10, 42, 42, 0, 18, 52, 0, 10, 40, 0])


def event(type_code: int, body: bytes, *, pos: int, timestamp: int = 1700000000,
          server_id: int = 1, flags: int = 0, crc: bool = True, bad_crc: bool = False) -> bytes:
    size = 19 + len(body) + (4 if crc else 0)
    head = struct.pack("<IBIIIH", timestamp, type_code, server_id, size, pos + size, flags)
    raw = head + body
    if crc:
        c = zlib.crc32(raw)
        if bad_crc:
            c ^= 1
        raw += struct.pack("<I", c)
    return raw


def fde(*, version: str = "8.0.40", alg: int = 1, flags: int = 0, pos: int = 4,
        post: bytes = POST_HEADER_80, header_length: int = 19) -> bytes:
    body = struct.pack("<H", 4) + version.encode().ljust(50, b"\x00") + struct.pack("<I", 0)
    body += bytes([header_length]) + post + bytes([alg])
    size = 19 + len(body) + 4
    head = struct.pack("<IBIIIH", 1700000000, 15, 1, size, pos + size, flags)
    # the server computes the CRC with the in-use flag cleared
    clean = struct.pack("<IBIIIH", 1700000000, 15, 1, size, pos + size, flags & ~1)
    return head + body + struct.pack("<I", zlib.crc32(clean + body))


class Builder:
    """Append events to a binlog image, tracking positions."""

    def __init__(self, *, crc: bool = True, version: str = "8.0.40", fde_flags: int = 0) -> None:
        self.crc = crc
        self.data = bytearray(MAGIC)
        self.data += fde(version=version, alg=1 if crc else 0, flags=fde_flags)

    @property
    def pos(self) -> int:
        return len(self.data)

    def add(self, type_code: int, body: bytes, **kw) -> int:  # type: ignore[no-untyped-def]
        at = self.pos
        self.data += event(type_code, body, pos=at, crc=self.crc, **kw)
        return at

    def bytes(self) -> bytes:
        return bytes(self.data)


def query_body(query: str, schema: str = "test", status: bytes = b"", thread_id: int = 7,
               exec_time: int = 0, error_code: int = 0) -> bytes:
    s = schema.encode()
    return (struct.pack("<IIBHH", thread_id, exec_time, len(s), error_code, len(status)) + status
            + s + b"\x00" + query.encode())


def xid_body(xid: int) -> bytes:
    return struct.pack("<Q", xid)


def rotate_body(name: str, position: int = 4) -> bytes:
    return struct.pack("<Q", position) + name.encode()


#: A real MySQL 5.6 binlog with CRC32 trailers, 303 events (60 QUERY), rows of several tables.
CRC32_SAMPLE = BINLOGS / "osheroff__mysql-binlog-connector-java" / "src__test__resources__mysql-bin.checksum-crc32"


def corrupt_middle_query(data: bytes, *, lie_about_size: bool = False) -> tuple[bytes, int, int]:
    """A copy of a real binlog whose middle QUERY event claims 0xFFFF bytes of status
    variables (past the event), its CRC32 recomputed so that the decoder, not the checksum,
    finds the fault: (bytes, the event's pos, its next_pos).

    ``lie_about_size``: the event's size and next-position fields are garbage too (and the
    CRC no longer matches), so only a scan finds where the next event starts.
    """
    from binlog_parser import scan_headers

    queries = [h for h in scan_headers(data) if h.type_code == 2]
    h = queries[len(queries) // 2]
    out = bytearray(data)
    struct.pack_into("<H", out, h.pos + 19 + 11, 0xFFFF)
    struct.pack_into("<I", out, h.next_pos - 4, zlib.crc32(bytes(out[h.pos:h.next_pos - 4])))
    if lie_about_size:
        struct.pack_into("<II", out, h.pos + 9, 0x7FFF_FFF0, 0x0000_0101)
    return bytes(out), h.pos, h.next_pos
