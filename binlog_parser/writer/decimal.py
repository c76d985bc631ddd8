"""MySQL's binary DECIMAL encoding (``decimal2bin``), shared by the column and JSON encoders."""

from __future__ import annotations

from decimal import Decimal, localcontext
from typing import Any

from binlog_parser.errors import ValueEncodeError
from binlog_parser.rows.decimal import DIG2BYTES


def encode_decimal(value: Any, precision: int, scale: int) -> bytes:
    """MySQL's binary DECIMAL(precision, scale) (``decimal2bin``)."""
    if not isinstance(value, Decimal):
        value = Decimal(str(value))
    with localcontext() as ctx:
        ctx.prec = 100
        q = value.quantize(Decimal(1).scaleb(-scale)) if scale else value.quantize(Decimal(1))
    sign, digits, exp = q.as_tuple()
    s = "".join(map(str, digits))
    if exp < 0:
        s = s.rjust(-exp + 1, "0")
        ip, fp = s[:exp], s[exp:]
    else:
        ip, fp = s + "0" * exp, ""
    fp = fp.ljust(scale, "0")[:scale]
    intg = precision - scale
    ip = ip.lstrip("0")
    if len(ip) > intg:
        raise ValueEncodeError(f"{value} does not fit DECIMAL({precision},{scale})")
    ip = ip.rjust(intg, "0")
    intg0, intg0x = divmod(intg, 9)
    frac0, frac0x = divmod(scale, 9)
    out = bytearray()
    pos = 0
    if intg0x:
        out += int(ip[:intg0x]).to_bytes(DIG2BYTES[intg0x], "big")
        pos = intg0x
    for _ in range(intg0):
        out += int(ip[pos:pos + 9]).to_bytes(4, "big")
        pos += 9
    pos = 0
    for _ in range(frac0):
        out += int(fp[pos:pos + 9]).to_bytes(4, "big")
        pos += 9
    if frac0x:
        out += int(fp[pos:pos + frac0x]).to_bytes(DIG2BYTES[frac0x], "big")
    negative = bool(sign) and any(digits)
    if negative:
        out = bytearray(b ^ 0xFF for b in out)
    out[0] ^= 0x80
    return bytes(out)
