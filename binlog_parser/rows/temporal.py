"""DATE / TIME / DATETIME / TIMESTAMP / YEAR values, in the old and the fractional (*2) encodings.

Values are small frozen dataclasses rather than ``datetime`` objects because MySQL allows what
``datetime`` cannot: zero dates (``0000-00-00``), zero parts (``2024-00-10``), negative TIME and
TIME beyond 24 h (``-838:59:59``). ``str(value)`` is exactly what MySQL's SELECT prints for the
column's fractional precision (``fsp``); ``to_python()`` gives a ``datetime`` object or None when
the value has no such representation.

Source: MySQL ``sql-common/my_time.cc`` (``my_time_packed_from_binary``,
``my_datetime_packed_from_binary``, ``my_timestamp_from_binary``, ``TIME_from_longlong_*``) and
``sql/field.cc`` (old DATE/TIME/DATETIME/TIMESTAMP storage).
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

from binlog_parser._fast import slots_constructor
from binlog_parser.errors import ImpossibleTemporalValue

_UTC = _dt.UTC
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_UTC)


_TS_TEXT_MEMO: tuple = (None, "")  # (seconds, text) of the last MySQLTimestamp printed


# The texts are %-formatted: for the ints these fields hold it is the same text as an f-string
# with the same widths, and cheaper (rendering row images is most of the ingest's CPU).

#: ``"%02d" % i`` for 0..127 and ``"%04d" % year`` (filled as met): a DATETIME's parts are
#: looked up, a fraction of the cost of formatting them
_D2 = tuple("%02d" % i for i in range(128))  # noqa: UP031
_YEARS: dict[int, str] = {}


def _frac(usec: int, fsp: int) -> str:
    if fsp <= 0:
        return ""
    return "." + ("%06d" % usec)[:fsp]  # noqa: UP031


@dataclass(frozen=True, slots=True)
class MySQLDate:
    year: int
    month: int
    day: int

    def __str__(self) -> str:
        return "%04d-%02d-%02d" % (self.year, self.month, self.day)  # noqa: UP031

    @property
    def is_zero(self) -> bool:
        return self.year == 0 and self.month == 0 and self.day == 0

    def to_python(self) -> _dt.date | None:
        try:
            return _dt.date(self.year, self.month, self.day)
        except ValueError:
            return None


@dataclass(frozen=True, slots=True)
class MySQLDateTime:
    year: int
    month: int
    day: int
    hour: int
    minute: int
    second: int
    microsecond: int = 0
    fsp: int = 0

    def __str__(self) -> str:
        mo, d, h, mi, s = self.month, self.day, self.hour, self.minute, self.second
        if 0 <= (mo | d | h | mi | s) < 128:  # every part in the lookup table
            y = self.year
            ys = _YEARS.get(y)
            if ys is None:
                ys = "%04d" % y  # noqa: UP031
                if 0 <= y <= 9999:
                    _YEARS[y] = ys
            d2 = _D2
            text = f"{ys}-{d2[mo]}-{d2[d]} {d2[h]}:{d2[mi]}:{d2[s]}"
        else:
            text = "%04d-%02d-%02d %02d:%02d:%02d" % (self.year, mo, d, h, mi, s)  # noqa: UP031
        fsp = self.fsp
        if fsp > 0:
            return text + _frac(self.microsecond, fsp)
        return text

    @property
    def is_zero(self) -> bool:
        return self.year == 0 and self.month == 0 and self.day == 0 and self.hour == 0 \
            and self.minute == 0 and self.second == 0 and self.microsecond == 0

    def to_python(self) -> _dt.datetime | None:
        try:
            return _dt.datetime(self.year, self.month, self.day, self.hour, self.minute,
                                self.second, self.microsecond)
        except ValueError:
            return None


@dataclass(frozen=True, slots=True)
class MySQLTimestamp:
    """Seconds since the epoch (UTC) as the binlog stores them; 0 is the zero timestamp.

    ``str()`` renders in UTC (the binlog carries no session time zone).
    """

    seconds: int
    microsecond: int = 0
    fsp: int = 0

    @property
    def is_zero(self) -> bool:
        return self.seconds == 0 and self.microsecond == 0

    def to_python(self) -> _dt.datetime | None:
        if self.is_zero:
            return None
        return _EPOCH + _dt.timedelta(seconds=self.seconds, microseconds=self.microsecond)

    def __str__(self) -> str:
        global _TS_TEXT_MEMO
        if self.is_zero:
            return "0000-00-00 00:00:00" + _frac(0, self.fsp)
        seconds = self.seconds
        memo = _TS_TEXT_MEMO  # rows of one statement / second share their timestamp
        if memo[0] == seconds and type(seconds) is int:
            text = memo[1]
        else:
            d = _EPOCH + _dt.timedelta(seconds=seconds)
            text = f"{d.year:04d}-{d.month:02d}-{d.day:02d} {d.hour:02d}:{d.minute:02d}:{d.second:02d}"
            _TS_TEXT_MEMO = (seconds, text)
        return text + _frac(self.microsecond, self.fsp)


@dataclass(frozen=True, slots=True)
class MySQLTime:
    """A TIME value: sign, hours (0..838+), minutes, seconds, microseconds."""

    negative: bool
    hours: int
    minutes: int
    seconds: int
    microsecond: int = 0
    fsp: int = 0

    def __str__(self) -> str:
        sign = "-" if self.negative else ""
        return "%s%02d:%02d:%02d" % (sign, self.hours, self.minutes, self.seconds) + _frac(self.microsecond, self.fsp)  # noqa: UP031

    def to_python(self) -> _dt.timedelta:
        td = _dt.timedelta(hours=self.hours, minutes=self.minutes, seconds=self.seconds,
                           microseconds=self.microsecond)
        return -td if self.negative else td


# ---------------------------------------------------------------- decoders: (buf, pos) -> (value, pos)

_new_date = slots_constructor(MySQLDate)              # (year, month, day)
_new_time = slots_constructor(MySQLTime)              # (negative, hours, minutes, seconds, us, fsp)
_new_timestamp = slots_constructor(MySQLTimestamp)    # (seconds, microsecond, fsp)
_new_datetime = slots_constructor(MySQLDateTime)      # (year, month, day, h, m, s, us, fsp)


def frac_bytes(fsp: int) -> int:
    return (fsp + 1) // 2


def _read_frac(buf, pos: int, fsp: int) -> int:
    """Big-endian fraction of fsp digits -> microseconds."""
    if fsp <= 0:
        return 0
    if fsp <= 2:
        return buf[pos] * 10000
    if fsp <= 4:
        return ((buf[pos] << 8) | buf[pos + 1]) * 100
    return (buf[pos] << 16) | (buf[pos + 1] << 8) | buf[pos + 2]


def make_date_decoder():
    def dec(buf, pos):
        v = buf[pos] | (buf[pos + 1] << 8) | (buf[pos + 2] << 16)
        return _new_date(v >> 9, (v >> 5) & 15, v & 31), pos + 3
    return dec


def make_time_decoder():
    """Old TIME: 3-byte signed little-endian integer [-]HHMMSS."""
    def dec(buf, pos):
        v = int.from_bytes(buf[pos:pos + 3], "little", signed=True)
        neg = v < 0
        v = -v if neg else v
        t = _new_time(neg, v // 10000, (v // 100) % 100, v % 100, 0, 0)
        if t.minutes > 59 or t.seconds > 59 or t.hours > 838:
            raise ImpossibleTemporalValue(f"impossible old-format TIME {bytes(buf[pos:pos + 3]).hex()}")
        return t, pos + 3
    return dec


def make_datetime_decoder():
    """Old DATETIME: 8-byte little-endian integer YYYYMMDDhhmmss."""
    def dec(buf, pos):
        v = int.from_bytes(buf[pos:pos + 8], "little")
        d, t = divmod(v, 1000000)
        dt_ = _new_datetime(d // 10000, (d // 100) % 100, d % 100,
                            t // 10000, (t // 100) % 100, t % 100, 0, 0)
        if (dt_.year > 9999 or dt_.month > 12 or dt_.day > 31 or dt_.hour > 23 or dt_.minute > 59
                or dt_.second > 59):
            raise ImpossibleTemporalValue(
                f"impossible old-format DATETIME {bytes(buf[pos:pos + 8]).hex()}")
        return dt_, pos + 8
    dec.inline = ("datetime_old", _new_datetime)  # type: ignore[attr-defined]  # see rows_event
    return dec


def make_timestamp_decoder():
    def dec(buf, pos):
        return _new_timestamp(int.from_bytes(buf[pos:pos + 4], "little"), 0, 0), pos + 4
    dec.inline = ("timestamp_old", _new_timestamp)  # type: ignore[attr-defined]
    return dec


def make_timestamp2_decoder(fsp: int):
    n = 4 + frac_bytes(fsp)

    def dec(buf, pos):
        sec = int.from_bytes(buf[pos:pos + 4], "big")
        return _new_timestamp(sec, _read_frac(buf, pos + 4, fsp), fsp), pos + n
    return dec


_DATETIMEF_INT_OFS = 0x8000000000


_FRAC_MULT = (1, 10000, 10000, 100, 100, 1, 1)  # fraction bytes -> microseconds, by fsp


def make_datetime2_decoder(fsp: int):
    slow = _make_datetime2_decoder(fsp)
    if not 0 <= fsp <= 6:
        return slow
    fb = frac_bytes(fsp)
    n = 5 + fb
    fshift = 8 * fb
    fmask = (1 << fshift) - 1
    mult = _FRAC_MULT[fsp]
    from_bytes = int.from_bytes
    make = _new_datetime

    def dec(buf, pos):
        end = pos + n
        if end > len(buf):
            return slow(buf, pos)  # the exact error / short-read behaviour
        v = from_bytes(buf[pos:end], "big")
        intpart = (v >> fshift) - _DATETIMEF_INT_OFS
        if intpart < 0:  # not produced by real servers; keep the magnitude
            intpart = -intpart
        ymd = intpart >> 17
        ym = ymd >> 5
        hms = intpart & 0x1FFFF
        return make(ym // 13, ym % 13, ymd & 31, hms >> 12, (hms >> 6) & 63, hms & 63,
                    (v & fmask) * mult, fsp), end
    # lets the rows decoder inline this decoder (same arithmetic, same constructor)
    dec.inline = ("datetime2", n, fshift, fmask, mult, fsp, make)  # type: ignore[attr-defined]
    return dec


def _make_datetime2_decoder(fsp: int):
    n = 5 + frac_bytes(fsp)

    def dec(buf, pos):
        intpart = int.from_bytes(buf[pos:pos + 5], "big") - _DATETIMEF_INT_OFS
        usec = _read_frac(buf, pos + 5, fsp)
        if intpart < 0:  # not produced by real servers; keep the magnitude
            intpart = -intpart
        ymd = intpart >> 17
        ym = ymd >> 5
        hms = intpart & 0x1FFFF
        return MySQLDateTime(ym // 13, ym % 13, ymd & 31, hms >> 12, (hms >> 6) & 63, hms & 63,
                             usec, fsp), pos + n
    return dec


_TIMEF_INT_OFS = 0x800000
_TIMEF_OFS = 0x800000000000


def make_time2_decoder(fsp: int):
    n = 3 + frac_bytes(fsp)

    def dec(buf, pos):
        if fsp <= 0:
            packed = (int.from_bytes(buf[pos:pos + 3], "big") - _TIMEF_INT_OFS) << 24
        elif fsp <= 2:
            # negative values keep the fraction in reverse order: (0x100 - frac)
            intpart = int.from_bytes(buf[pos:pos + 3], "big") - _TIMEF_INT_OFS
            frac = buf[pos + 3]
            if intpart < 0 and frac:
                intpart += 1
                frac -= 0x100
            packed = (intpart << 24) + frac * 10000
        elif fsp <= 4:
            intpart = int.from_bytes(buf[pos:pos + 3], "big") - _TIMEF_INT_OFS
            frac = (buf[pos + 3] << 8) | buf[pos + 4]
            if intpart < 0 and frac:
                intpart += 1
                frac -= 0x10000
            packed = (intpart << 24) + frac * 100
        else:
            packed = int.from_bytes(buf[pos:pos + 6], "big") - _TIMEF_OFS
        neg = packed < 0
        if neg:
            packed = -packed
        hms = packed >> 24
        usec = packed & 0xFFFFFF
        return _new_time(neg, (hms >> 12) & 0x3FF, (hms >> 6) & 63, hms & 63, usec, fsp), pos + n
    return dec


# MariaDB 5.3 "hires" TIME(n) / DATETIME(n) / TIMESTAMP(n), n = 1..6: the format MariaDB
# 5.3-10.0 used for fractional temporals, still written by MariaDB for such tables (and for new
# ones with mysql56_temporal_format=OFF). The binlog gives them the *old* type codes 11/12/7
# with no metadata, so the fsp (and the value size) must come from the table's definition
# (a SchemaRegistry entry / tracked DDL: ``ColumnSpec.fsp``). Source: MariaDB sql/field.cc
# (Field_time_hires, Field_datetime_hires, Field_timestamp_hires), sql-common/my_time.c
# (pack_time / unpack_time), include/my_time.h (sec_part_shift).
_TIME_HIRES_BYTES = (3, 4, 4, 5, 5, 5, 6)
_DATETIME_HIRES_BYTES = (5, 6, 6, 7, 7, 7, 8)
_SEC_PART_BYTES = (0, 1, 1, 2, 2, 3, 3)
_TIME_MAX_VALUE_SECONDS = 838 * 3600 + 59 * 60 + 59


def hires_size(type_code: int, fsp: int) -> int:
    """Bytes of a MariaDB 5.3 hires value (type code 11 TIME, 12 DATETIME, 7 TIMESTAMP)."""
    if type_code == 11:
        return _TIME_HIRES_BYTES[fsp]
    if type_code == 12:
        return _DATETIME_HIRES_BYTES[fsp]
    return 4 + _SEC_PART_BYTES[fsp]


def make_time_hires_decoder(fsp: int):
    """Big-endian ``sec_part_shift(pack_time(t), fsp) + zero_point``; pack_time is the signed
    number of microseconds (hours * 3600 + ...) * 10^6 + usec."""
    n = _TIME_HIRES_BYTES[fsp]
    unit = 10 ** (6 - fsp)
    zero_point = (_TIME_MAX_VALUE_SECONDS + 1) * 1000000 // unit

    def dec(buf, pos):
        usec = (int.from_bytes(buf[pos:pos + n], "big") - zero_point) * unit
        neg = usec < 0
        secs, us = divmod(-usec if neg else usec, 1000000)
        mins, s = divmod(secs, 60)
        h, m = divmod(mins, 60)
        return MySQLTime(neg, h, m, s, us, fsp), pos + n
    return dec


def make_datetime_hires_decoder(fsp: int):
    """Big-endian ``sec_part_shift(pack_time(dt), fsp)``: pack_time is
    ((((((year*13+month)*32+day)*24+hour)*60+minute)*60+second)*10^6 + usec."""
    n = _DATETIME_HIRES_BYTES[fsp]
    unit = 10 ** (6 - fsp)

    def dec(buf, pos):
        v = int.from_bytes(buf[pos:pos + n], "big") * unit
        v, us = divmod(v, 1000000)
        v, s = divmod(v, 60)
        v, mi = divmod(v, 60)
        v, h = divmod(v, 24)
        v, d = divmod(v, 32)
        y, mo = divmod(v, 13)
        return MySQLDateTime(y, mo, d, h, mi, s, us, fsp), pos + n
    return dec


def make_timestamp_hires_decoder(fsp: int):
    """Big-endian seconds (4 bytes), then the big-endian ``usec / 10^(6-fsp)``."""
    nf = _SEC_PART_BYTES[fsp]
    unit = 10 ** (6 - fsp)

    def dec(buf, pos):
        sec = int.from_bytes(buf[pos:pos + 4], "big")
        us = int.from_bytes(buf[pos + 4:pos + 4 + nf], "big") * unit
        return MySQLTimestamp(sec, us, fsp), pos + 4 + nf
    return dec


def make_year_decoder():
    def dec(buf, pos):
        v = buf[pos]
        return (v + 1900 if v else 0), pos + 1
    return dec
