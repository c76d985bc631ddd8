"""FLOAT / DOUBLE as MySQL prints them (``strings/dtoa.cc``: ``my_gcvt``).

MySQL prints a DOUBLE with the shortest digits that round-trip (``dtoa`` mode 4 with a wide
field), a FLOAT with at most 6 significant digits (``FLT_DIG``; binlake instead prints the
shortest digits that round-trip the float32, see :func:`format_float`), and chooses between
fixed and exponent notation like ``%g`` but with its own limits: fixed when the decimal exponent is in
[-14, 15] (or the number has digits after the point), else ``1e300`` / ``1.5e-20`` (no ``+``,
no exponent padding).
"""

from __future__ import annotations

import math
import struct

_MAX_DECPT_FOR_F_FORMAT = 15  # DBL_DIG

_F32 = struct.Struct("<f")


def _digits_double(x: float) -> tuple[str, int]:
    """Shortest round-trip digits and decimal-point position of |x| (x finite, non-zero)."""
    r = repr(abs(x))  # Python's repr is the shortest round-trip form (David Gay's algorithm)
    exp = 0
    mant = r
    if "e" in r or "E" in r:
        mant, exp_text = r.lower().split("e")
        exp = int(exp_text)
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
    if not math.isfinite(x):
        return "0"  # my_gcvt's overflow answer; servers never store these
    if x == 0:
        return "-0" if str(x).startswith("-") else "0"
    digits, decpt = _digits_double(x)
    return _layout(x < 0, digits, decpt)


def format_float(x: float) -> str:
    """A FLOAT column value (a float32 widened to double): the shortest text that is that float32.

    Why not MySQL's SELECT text: the server prints a FLOAT declared without ``(M,D)`` with 6
    significant digits (``FLT_DIG``) and a ``FLOAT(M,D)`` with ``D`` decimals, but the binlog
    carries neither (the table map holds only the storage size), and the stored float32 is
    exact. So binlake prints the shortest decimal that reads back as the same float32, in the
    server's fixed/exponent layout: ``1234.567`` where a FLOAT(7,3) SELECT prints ``1234.567``
    and a plain FLOAT SELECT ``1234.57`` (a different float32). :func:`format_float_select`
    is the server's 6-digit text.
    """
    if not math.isfinite(x):
        return "0"
    if x == 0:
        return "-0" if str(x).startswith("-") else "0"
    digits, decpt = _digits_float32(x)
    return _layout(x < 0, digits, decpt)


def format_float_select(x: float) -> str:
    """A FLOAT declared without ``(M,D)`` as MySQL/MariaDB's SELECT prints it (6 digits, lossy)."""
    if not math.isfinite(x):
        return "0"
    if x == 0:
        return "-0" if str(x).startswith("-") else "0"
    sd, sp = _digits_double(x)
    if len(sd) <= 6:
        digits, decpt = sd, sp
    else:
        digits, decpt = _digits_precision(x, 6)
    return _layout(x < 0, digits, decpt)


def _digits_float32(x: float) -> tuple[str, int]:
    """Shortest digits and decimal-point position of |x| that read back as the same float32.

    ``x`` is finite and non-zero. The correctly rounded ``n``-digit form round-trips for every
    ``n`` from the shortest on (the n+1-digit rounding is never farther from x than the n-digit
    one) and always at 9 digits, so a binary search over n = 1..9 finds it in ~3 tries.
    Python's float parsing is correctly rounded, and packing to float32 rounds once more as the
    server's ``(float)`` cast does.
    """
    ax = abs(x)
    target = _F32.pack(ax)
    lo, hi = 1, 9
    best = f"{ax:.8e}"
    while lo < hi:
        nd = (lo + hi) // 2
        text = f"{ax:.{nd - 1}e}"
        try:
            ok = _F32.pack(float(text)) == target
        except OverflowError:  # rounded past FLT_MAX
            ok = False
        if ok:
            hi, best = nd, text
        else:
            lo = nd + 1
    mant, exp = best.split("e")
    return mant.replace(".", "").rstrip("0") or "0", int(exp) + 1


def shortest_float32(x: float) -> float:
    """The shortest decimal that reads back as the same float32, as a Python float."""
    if not math.isfinite(x) or x == 0:
        return x
    digits, decpt = _digits_float32(x)
    return float(f"{'-' if x < 0 else ''}0.{digits}e{decpt}")
