"""DATE/TIME/DATETIME/TIMESTAMP/YEAR in the old and fractional encodings."""

from __future__ import annotations

import pytest

from binlog_parser.rows import temporal as t


def _time2(text_bytes: str, fsp: int):
    return t.make_time2_decoder(fsp)(bytes.fromhex(text_bytes), 0)


def _pack_time2(neg: bool, h: int, m: int, s: int, usec: int, fsp: int) -> bytes:
    """Test-side encoder, the inverse of my_time_packed_from_binary."""
    hms = h << 12 | m << 6 | s
    if fsp == 0:
        return ((-hms if neg else hms) + 0x800000).to_bytes(3, "big")
    if fsp <= 4:
        unit, width, span = (10000, 1, 0x100) if fsp <= 2 else (100, 2, 0x10000)
        frac = usec // unit
        if not neg:
            return (hms + 0x800000).to_bytes(3, "big") + frac.to_bytes(width, "big")
        if frac:
            return (-hms - 1 + 0x800000).to_bytes(3, "big") + (span - frac).to_bytes(width, "big")
        return (-hms + 0x800000).to_bytes(3, "big") + b"\0" * width
    packed = (hms << 24) + usec
    return ((-packed if neg else packed) + 0x800000000000).to_bytes(6, "big")


@pytest.mark.parametrize("fsp", [0, 1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("neg,h,m,s,usec", [
    (False, 8, 30, 0, 250000), (True, 12, 0, 0, 0), (False, 838, 59, 59, 0), (True, 838, 59, 59, 0),
    (True, 0, 0, 0, 500000), (False, 0, 0, 0, 0), (True, 1, 2, 3, 456789), (False, 100, 0, 1, 999999),
])
def test_time2_round_trip(fsp, neg, h, m, s, usec):
    usec = (usec // 10 ** (6 - fsp)) * 10 ** (6 - fsp) if fsp else 0
    if not (h or m or s or usec):
        neg = False
    data = _pack_time2(neg, h, m, s, usec, fsp)
    value, pos = t.make_time2_decoder(fsp)(data, 0)
    assert pos == len(data) == 3 + (fsp + 1) // 2
    assert value == t.MySQLTime(neg, h, m, s, usec, fsp)


def test_time2_text_exact():
    # -12:00:00.00 as MariaDB 10.11 wrote it (TIME(2))
    assert str(_time2("7f400000", 2)[0]) == "-12:00:00.00"
    assert str(_time2("80878019", 2)[0]) == "08:30:00.25"
    assert str(_time2("b46efb00", 2)[0]) == "838:59:59.00"
    # TIME(6) keeps microseconds (no rounding to milliseconds)
    v = t.MySQLTime(False, 1, 2, 3, 123456, 6)
    assert str(v) == "01:02:03.123456"
    assert str(t.MySQLTime(True, 0, 0, 1, 0, 0)) == "-00:00:01"


def test_datetime2_and_timestamp2():
    dec = t.make_datetime2_decoder(6)
    # 2025-05-27 01:06:53.569478
    ym = 2025 * 13 + 5
    intpart = ((ym << 5 | 27) << 17) | (1 << 12 | 6 << 6 | 53)
    data = (intpart + 0x8000000000).to_bytes(5, "big") + (569478).to_bytes(3, "big")
    v, pos = dec(data, 0)
    assert pos == 8 and str(v) == "2025-05-27 01:06:53.569478"
    assert v.to_python().microsecond == 569478
    zero, _ = t.make_datetime2_decoder(0)((0x8000000000).to_bytes(5, "big"), 0)
    assert str(zero) == "0000-00-00 00:00:00" and zero.is_zero and zero.to_python() is None
    ts, pos = t.make_timestamp2_decoder(3)((2147483647).to_bytes(4, "big") + (999 * 10).to_bytes(2, "big"), 0)
    assert str(ts) == "2038-01-19 03:14:07.999" and pos == 6
    z, _ = t.make_timestamp2_decoder(0)(b"\0\0\0\0", 0)
    assert str(z) == "0000-00-00 00:00:00" and z.to_python() is None


def test_old_encodings():
    d, _ = t.make_date_decoder()((2000 << 9 | 2 << 5 | 29).to_bytes(3, "little"), 0)
    assert str(d) == "2000-02-29"
    zd, _ = t.make_date_decoder()(b"\0\0\0", 0)
    assert str(zd) == "0000-00-00" and zd.is_zero and zd.to_python() is None
    part, _ = t.make_date_decoder()((2024 << 9 | 0 << 5 | 10).to_bytes(3, "little"), 0)
    assert str(part) == "2024-00-10" and part.to_python() is None
    tm, _ = t.make_time_decoder()((-8385959).to_bytes(3, "little", signed=True), 0)
    assert str(tm) == "-838:59:59"
    dt, _ = t.make_datetime_decoder()((20260122101112).to_bytes(8, "little"), 0)
    assert str(dt) == "2026-01-22 10:11:12"
    ts, _ = t.make_timestamp_decoder()((1).to_bytes(4, "little"), 0)
    assert str(ts) == "1970-01-01 00:00:01"
    y, _ = t.make_year_decoder()(bytes([0]), 0)
    y2, _ = t.make_year_decoder()(bytes([255]), 0)
    assert (y, y2) == (0, 2155)
