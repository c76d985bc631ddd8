"""Byte-level helpers for discovery / DAG tests: patch a real binlog's closing ROTATE, open a file.

They work on real fixture files (tests/fixtures/mariadb-10.11/, CRC32 checksums) and keep every
checksum valid, so only the intended change is visible to discovery.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
MARIADB_CHAIN = FIXTURES / "mariadb-10.11"
MARIADB_FILES = tuple(f"binlog.00000{i}" for i in range(1, 5))
_HDR = struct.Struct("<IBIIIH")


def read_fixture(name: str) -> bytes:
    return (MARIADB_CHAIN / name).read_bytes()


def write_mariadb_chain(folder: Path) -> Path:
    """``folder`` (created) holding a copy of the four-file MariaDB chain: an archive to discover."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in MARIADB_FILES:
        (folder / name).write_bytes(read_fixture(name))
    return folder


def last_event_pos(data: bytes) -> int:
    """Offset of the last top-level event (walks the headers from the FORMAT_DESCRIPTION)."""
    pos = 4
    last = 4
    while pos < len(data):
        size = struct.unpack_from("<I", data, pos + 9)[0]
        last = pos
        pos += size
    assert pos == len(data), "fixture does not end on an event boundary"
    return last


def rotate_event(name: bytes, pos: int, *, timestamp: int = 1795325284, server_id: int = 7,
                 position: int = 4, crc: bool = True) -> bytes:
    body = struct.pack("<Q", position) + name
    size = 19 + len(body) + (4 if crc else 0)
    raw = _HDR.pack(timestamp, 4, server_id, size, pos + size, 0) + body
    if crc:
        raw += struct.pack("<I", zlib.crc32(raw) & 0xFFFFFFFF)
    return raw


def with_rotate_to(data: bytes, name: str | bytes) -> bytes:
    """``data`` (ending with ROTATE or STOP) with its last event replaced by ROTATE -> ``name``."""
    pos = last_event_pos(data)
    raw_name = name.encode() if isinstance(name, str) else name
    return data[:pos] + rotate_event(raw_name, pos)


def set_in_use(data: bytes, in_use: bool = True) -> bytes:
    """Set/clear LOG_EVENT_BINLOG_IN_USE_F in the FORMAT_DESCRIPTION (its CRC excludes the flag)."""
    flags = struct.unpack_from("<H", data, 4 + 17)[0]
    flags = (flags | 1) if in_use else (flags & ~1)
    return data[:21] + struct.pack("<H", flags) + data[23:]


def make_open(data: bytes) -> bytes:
    """The file as it looks while still being written: last (closing) event gone, in-use flag set."""
    return set_in_use(data[:last_event_pos(data)], True)


def sparse_binlog(path: Path, head_src: bytes, size: int, rotate_to: str | None) -> None:
    """A ``size``-byte file: the first 4 KiB of ``head_src``, a hole, then a ROTATE -> ``rotate_to``
    (or a STOP when None) ending exactly at ``size``.

    Discovery reads only heads and tails, so the hole (never read, no disk used) stands for the
    body of a large binlog; the closing event's log_pos and CRC are right for its offset.
    """
    head = head_src[:4096]
    if rotate_to is not None:
        n = 19 + 8 + len(rotate_to) + 4
        tail = rotate_event(rotate_to.encode(), size - n)
    else:
        raw = _HDR.pack(1795325284, 3, 7, 23, size, 0)
        tail = raw + struct.pack("<I", zlib.crc32(raw) & 0xFFFFFFFF)
    with path.open("wb") as fh:
        fh.write(head)
        fh.seek(size - len(tail))
        fh.write(tail)
