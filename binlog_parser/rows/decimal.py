"""DECIMAL(M,D) binary format (``strings/decimal.cc``: ``bin2decimal``) -> exact ``decimal.Decimal``.

Digits are grouped in base-10^9 words of 4 bytes, big-endian; the leading/trailing partial
groups use 1-4 bytes (``dig2bytes``). The sign is the top bit of the first byte (set for
non-negative numbers); negative numbers have every byte inverted. The result keeps the
column's scale: DECIMAL(12,2) 12.5 decodes to ``Decimal('12.50')``.
"""

from __future__ import annotations

from decimal import Decimal

DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def decimal_binary_size(precision: int, scale: int) -> int:
    intg = precision - scale
    return (intg // 9) * 4 + DIG2BYTES[intg % 9] + (scale // 9) * 4 + DIG2BYTES[scale % 9]


def make_decimal_decoder(precision: int, scale: int):
    intg = precision - scale
    intg0, intg0x = divmod(intg, 9)
    frac0, frac0x = divmod(scale, 9)
    size = decimal_binary_size(precision, scale)
    # (byte length, digits) for each group in order
    groups: list[tuple[int, int, bool]] = []  # (nbytes, ndigits, is_frac)
    if intg0x:
        groups.append((DIG2BYTES[intg0x], intg0x, False))
    groups += [(4, 9, False)] * intg0
    groups += [(4, 9, True)] * frac0
    if frac0x:
        groups.append((DIG2BYTES[frac0x], frac0x, True))
    groups_t = tuple(groups)

    def dec(buf, pos):
        raw = bytearray(buf[pos:pos + size])
        if len(raw) != size:
            raise ValueError("decimal runs past the end of the row")
        negative = not (raw[0] & 0x80)
        raw[0] ^= 0x80
        if negative:
            raw = bytearray(b ^ 0xFF for b in raw)
        ip = []
        fp = []
        off = 0
        for nbytes, ndigits, is_frac in groups_t:
            v = int.from_bytes(raw[off:off + nbytes], "big")
            off += nbytes
            if is_frac:
                fp.append(f"{v:0{ndigits}d}")
            else:
                ip.append(str(v) if not ip else f"{v:0{ndigits}d}")
        istr = "".join(ip).lstrip("0") or "0"
        text = istr + ("." + "".join(fp) if scale else "")
        return Decimal(("-" if negative else "") + text), pos + size
    return dec


def decode_decimal(buf: bytes, precision: int, scale: int) -> Decimal:
    """Decode one DECIMAL(precision, scale) value from the start of ``buf``."""
    return make_decimal_decoder(precision, scale)(buf, 0)[0]


def decimal_text(value: Decimal, scale: int | None = None) -> str:
    """MySQL's text of a DECIMAL: plain notation, exactly ``scale`` fraction digits, no ``-0``."""
    if scale is None:
        exp = value.as_tuple().exponent
        scale = -exp if isinstance(exp, int) and exp < 0 else 0
    text = f"{value:.{scale}f}"
    if text.startswith("-") and not value:
        text = text[1:]
    return text
