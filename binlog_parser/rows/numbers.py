"""FLOAT / DOUBLE as MySQL prints them (``strings/dtoa.cc``: ``my_gcvt``).

MySQL prints a DOUBLE with the shortest digits that round-trip (``dtoa`` mode 4 with a wide
field), a FLOAT with at most 6 significant digits (``FLT_DIG``), and chooses between fixed and
exponent notation like ``%g`` but with its own limits: fixed when the decimal exponent is in
[-14, 15] (or the number has digits after the point), else ``1e300`` / ``1.5e-20`` (no ``+``,
no exponent padding).
"""

from __future__ import annotations

import struct

_MAX_DECPT_FOR_F_FORMAT = 15  # DBL_DIG

_F32 = struct.Struct("<f")


def _digits_double(x: float) -> tuple[str, int]:
    """Shortest round-trip digits and decimal-point position of |x| (x finite, non-zero)."""
    r = repr(abs(x))  # Python's repr is the shortest round-trip form (David Gay's algorithm)
    if "e" in r or "E" in r:
        mant, exp = r.lower().split("e")
        exp = int(exp)
    else:
        mant, exp = r, 0
    if "." in mant:
        ip, fp = mant.split(".")
    else:
        ip, fp = mant, ""
    if fp == "0":
        fp = ""
    digits = ip + fp
    decpt = len(ip) + exp
    stripped = digits.lstrip("0")
    decpt -= len(digits) - len(stripped)
    digits = stripped.rstrip("0") or "0"
    return digits, decpt


def _digits_precision(x: float, ndigits: int) -> tuple[str, int]:
    """|x| rounded to ``ndigits`` significant digits (correctly rounded), trailing zeros dropped."""
    s = f"{abs(x):.{ndigits - 1}e}"
    mant, exp = s.split("e")
    digits = mant.replace(".", "").rstrip("0") or "0"
    return digits, int(exp) + 1


def _layout(negative: bool, digits: str, decpt: int) -> str:
    n = len(digits)
    sign = "-" if negative else ""
    if decpt >= -_MAX_DECPT_FOR_F_FORMAT + 1 and (decpt <= _MAX_DECPT_FOR_F_FORMAT or n > decpt):
        if decpt <= 0:
            return sign + "0." + "0" * (-decpt) + digits
        if decpt < n:
            return sign + digits[:decpt] + "." + digits[decpt:]
        return sign + digits + "0" * (decpt - n)
    exp = decpt - 1
    mant = digits[0] + ("." + digits[1:] if n > 1 else "")
    return f"{sign}{mant}e{'-' if exp < 0 else ''}{abs(exp)}"


def format_double(x: float) -> str:
    """A DOUBLE value as MySQL's SELECT prints it."""
    if x != x or x in (float("inf"), float("-inf")):
        return "0"  # my_gcvt's overflow answer; servers never store these
    if x == 0:
        return "-0" if str(x).startswith("-") else "0"
    digits, decpt = _digits_double(x)
    return _layout(x < 0, digits, decpt)


def format_float(x: float) -> str:
    """A FLOAT column value (a float32 widened to double) as MySQL's SELECT prints it."""
    if x != x or x in (float("inf"), float("-inf")):
        return "0"
    if x == 0:
        return "-0" if str(x).startswith("-") else "0"
    sd, sp = _digits_double(x)
    if len(sd) <= 6:
        digits, decpt = sd, sp
    else:
        digits, decpt = _digits_precision(x, 6)
    return _layout(x < 0, digits, decpt)


def shortest_float32(x: float) -> float:
    """The shortest decimal that reads back as the same float32, as a Python float."""
    if x != x or x in (float("inf"), float("-inf")) or x == 0:
        return x
    target = _F32.pack(x)
    for nd in range(1, 10):
        s = f"{x:.{nd - 1}e}"
        try:
            if _F32.pack(float(s)) == target:
                return float(s)
        except OverflowError:
            continue
    return x
