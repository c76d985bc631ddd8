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

    def slow(buf, pos):
        raw = bytearray(buf[pos:pos + size])
        if len(raw) != size:
            raise ValueError("decimal runs past the end of the row")
        negative = not (raw[0] & 0x80)
        raw[0] ^= 0x80
        if negative:
            raw = bytearray(b ^ 0xFF for b in raw)
        ip: list[str] = []
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

    if size == 0:
        return slow
    # Fast path: the whole value as one big-endian integer, groups peeled off from the low end
    # (last group first) and folded into one integer of all the digits. A group holding more
    # than its digits (never written by a server) takes the exact slow path above.
    sign_bit = 1 << (8 * size - 1)
    all_ones = (1 << (8 * size)) - 1
    peel = tuple((8 * nbytes, (1 << (8 * nbytes)) - 1, 10 ** ndigits)
                 for nbytes, ndigits, _f in reversed(groups_t))
    from_bytes = int.from_bytes

    def dec(buf, pos):
        end = pos + size
        v = from_bytes(buf[pos:end], "big")
        if end > len(buf):
            raise ValueError("decimal runs past the end of the row")
        if v & sign_bit:
            v ^= sign_bit
            sign = ""
        else:
            v ^= all_ones ^ sign_bit
            sign = "-"
        n = 0
        mul = 1
        for shift, mask, limit in peel:
            g = v & mask
            if g >= limit:
                return slow(buf, pos)
            n += g * mul
            mul *= limit
            v >>= shift
        if scale:
            t = str(n)
            if len(t) <= scale:
                t = "0" * (scale + 1 - len(t)) + t
            return Decimal(sign + t[:-scale] + "." + t[-scale:]), end
        return Decimal(sign + str(n)), end
    return dec


def decode_decimal(buf: bytes, precision: int, scale: int) -> Decimal:
    """Decode one DECIMAL(precision, scale) value from the start of ``buf``."""
    return make_decimal_decoder(precision, scale)(buf, 0)[0]


def decimal_text(value: Decimal, scale: int | None = None) -> str:
    """MySQL's text of a DECIMAL: plain notation, exactly ``scale`` fraction digits, no ``-0``.

    ``str(value)`` is that text whenever it is plain and has ``scale`` fraction digits (what
    the decoder builds: a Decimal of exactly ``scale`` digits), and is much cheaper than the
    ``.{scale}f`` formatting, which is kept for the other values."""
    if scale is None:
        exp = value.as_tuple().exponent
        scale = -exp if isinstance(exp, int) and exp < 0 else 0
    text = str(value)
    dot = text.find(".")
    if ((len(text) - dot - 1 != scale) if dot >= 0 else scale != 0) or "E" in text or "e" in text:
        text = f"{value:.{scale}f}"
    if text[0] == "-" and not value:
        text = text[1:]
    return text
