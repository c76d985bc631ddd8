"""Little-endian integer and length-encoded readers over ``bytes``/``memoryview``.

Every reader takes ``(buf, offset)`` and returns ``(value, next_offset)`` or the value alone;
none of them copies more than it returns. Bounds are checked by the caller's slicing:
``struct`` raises ``struct.error`` on short input, which decoders turn into
``CorruptEventError``/``TruncatedEventError``.
"""

from __future__ import annotations

import struct

from binlog_parser.errors import ShortBufferError

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


def uint(buf: bytes | memoryview, offset: int, size: int) -> int:
    """Unsigned little-endian integer of ``size`` bytes at ``offset``."""
    end = offset + size
    if end > len(buf) or offset < 0:
        raise ShortBufferError(f"need {size} bytes at {offset}, have {len(buf) - offset}")
    return int.from_bytes(buf[offset:end], "little")


def uint16(buf: bytes | memoryview, offset: int) -> int:
    return _U16.unpack_from(buf, offset)[0]


def uint32(buf: bytes | memoryview, offset: int) -> int:
    return _U32.unpack_from(buf, offset)[0]


def uint64(buf: bytes | memoryview, offset: int) -> int:
    return _U64.unpack_from(buf, offset)[0]


def packed_int(buf: bytes | memoryview, offset: int) -> tuple[int | None, int]:
    """MySQL length-encoded ("packed") integer: 1, 3, 4 or 9 bytes. 0xfb means NULL.

    Returns ``(value, next_offset)``; value is None for the NULL marker.
    """
    if offset >= len(buf):
        raise ShortBufferError(f"packed integer at {offset} past end {len(buf)}")
    first = buf[offset]
    if first < 0xFB:
        return first, offset + 1
    if first == 0xFB:
        return None, offset + 1
    if first == 0xFC:
        return uint(buf, offset + 1, 2), offset + 3
    if first == 0xFD:
        return uint(buf, offset + 1, 3), offset + 4
    if first == 0xFE:
        return uint(buf, offset + 1, 8), offset + 9
    raise ShortBufferError(f"invalid packed integer prefix 0xff at {offset}")


def encode_packed_int(value: int) -> bytes:
    """Inverse of :func:`packed_int` (used by the writer)."""
    if value < 0xFB:
        return bytes((value,))
    if value < 1 << 16:
        return b"\xfc" + value.to_bytes(2, "little")
    if value < 1 << 24:
        return b"\xfd" + value.to_bytes(3, "little")
    return b"\xfe" + value.to_bytes(8, "little")


def cstring(buf: bytes | memoryview, offset: int, limit: int | None = None) -> tuple[bytes, int]:
    """NUL-terminated string; returns ``(bytes, offset after the NUL)``.

    Without a NUL before ``limit`` (default: end of buffer) the rest is returned.
    """
    end_limit = len(buf) if limit is None else min(limit, len(buf))
    data = bytes(buf[offset:end_limit])
    nul = data.find(b"\x00")
    if nul < 0:
        return data, end_limit
    return data[:nul], offset + nul + 1
