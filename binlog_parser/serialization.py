"""MySQL's serialization-library primitives (``libs/mysql/serialization``).

Used by GTID_TAGGED_LOG_EVENT and the tagged PREVIOUS_GTIDS encoding. Variable-length
integers: the number of trailing 1-bits of the first byte, plus one, is the byte count;
values are little-endian; nine bytes carry a full 64-bit value. Signed integers are
zig-zag encoded (sign in the lowest bit).
"""

from __future__ import annotations

from binlog_parser.errors import ShortBufferError


def read_varlen_unsigned(buf: bytes | memoryview, off: int) -> tuple[int, int]:
    """Returns ``(value, next_offset)``."""
    if off >= len(buf):
        raise ShortBufferError(f"varlen integer at {off} past end {len(buf)}")
    first = buf[off]
    # count trailing ones
    n = 1
    b = first
    while b & 1 and n < 9:
        n += 1
        b >>= 1
    if off + n > len(buf):
        raise ShortBufferError(f"varlen integer of {n} bytes at {off} past end {len(buf)}")
    if n == 1:
        return first >> 1, off + 1
    rest = int.from_bytes(buf[off + 1:off + n], "little")
    if n == 9:
        return rest, off + 9
    value = (first >> n) | (rest << (8 - n))
    return value, off + n


def read_varlen_signed(buf: bytes | memoryview, off: int) -> tuple[int, int]:
    u, off = read_varlen_unsigned(buf, off)
    if u & 1:
        return -(u >> 1) - 1, off
    return u >> 1, off


def write_varlen_unsigned(value: int) -> bytes:
    if value < 0 or value >= 1 << 64:
        raise ValueError(f"varlen unsigned out of range: {value}")
    bits = value.bit_length()
    n = ((bits * 575) >> 12) + 1
    first = ((1 << (n - 1)) - 1) | ((value << n) & 0xFF)
    if n == 1:
        return bytes((first,))
    shift = 8 - n + ((n + 7) >> 4)
    rest = (value >> shift).to_bytes(n - 1, "little")
    return bytes((first,)) + rest


def write_varlen_signed(value: int) -> bytes:
    u = ((-(value + 1)) << 1) | 1 if value < 0 else value << 1
    return write_varlen_unsigned(u)


def read_string(buf: bytes | memoryview, off: int) -> tuple[bytes, int]:
    """A serialization-library string: varlen length then the bytes."""
    length, off = read_varlen_unsigned(buf, off)
    if off + length > len(buf):
        raise ShortBufferError(f"string of {length} bytes at {off} past end {len(buf)}")
    return bytes(buf[off:off + length]), off + length
