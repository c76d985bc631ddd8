"""Helpers shared by the body decoders."""

from __future__ import annotations

import struct

from binlog_parser.errors import CorruptEventError

U16 = struct.Struct("<H")
U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")
I64 = struct.Struct("<q")
F64 = struct.Struct("<d")


def text(raw: bytes | memoryview) -> str:
    """Decode server text: UTF-8 when valid, else Latin-1 (lossless byte-per-char)."""
    b = bytes(raw)
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return b.decode("latin-1")


def need(body: memoryview, n: int, what: str) -> None:
    if len(body) < n:
        raise CorruptEventError(f"{what}: body of {len(body)} bytes, need at least {n}")


def nul_string(raw: bytes | memoryview) -> bytes:
    b = bytes(raw)
    i = b.find(b"\x00")
    return b if i < 0 else b[:i]


_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def decimal_bin_size(precision: int, scale: int) -> int:
    intg = precision - scale
    return (intg // 9) * 4 + _DIG2BYTES[intg % 9] + (scale // 9) * 4 + _DIG2BYTES[scale % 9]


def decode_decimal(raw: bytes | memoryview, precision: int, scale: int) -> str:
    """MySQL's binary DECIMAL (strings/decimal.cc bin2decimal) as exact text."""
    if precision <= 0 or scale < 0 or scale > precision or precision > 65:
        raise ValueError(f"invalid DECIMAL({precision},{scale})")
    size = decimal_bin_size(precision, scale)
    if len(raw) < size:
        raise ValueError(f"DECIMAL({precision},{scale}) needs {size} bytes, got {len(raw)}")
    b = bytearray(raw[:size])
    negative = not (b[0] & 0x80)
    b[0] ^= 0x80
    if negative:
        for i in range(size):
            b[i] ^= 0xFF
    intg = precision - scale
    intg0, intg0x = divmod(intg, 9)
    frac0, frac0x = divmod(scale, 9)
    off = 0
    int_digits = ""
    if intg0x:
        n = _DIG2BYTES[intg0x]
        int_digits += str(int.from_bytes(b[off:off + n], "big"))
        off += n
    for _ in range(intg0):
        int_digits += f"{int.from_bytes(b[off:off + 4], 'big'):09d}"
        off += 4
    frac_digits = ""
    for _ in range(frac0):
        frac_digits += f"{int.from_bytes(b[off:off + 4], 'big'):09d}"
        off += 4
    if frac0x:
        n = _DIG2BYTES[frac0x]
        frac_digits += str(int.from_bytes(b[off:off + n], "big")).zfill(frac0x)
        off += n
    int_digits = int_digits.lstrip("0") or "0"
    out = int_digits + ("." + frac_digits if scale else "")
    return "-" + out if negative else out
