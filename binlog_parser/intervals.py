"""Interval-set arithmetic: sorted, merged, inclusive ``(start, end)`` integer intervals.

The one implementation behind :class:`binlog_parser.gtid.GtidSet` (GNO ranges per UUID/tag)
and binlake's reconciliation (MySQL GTID sets, MariaDB domain sets, coverage). An interval set
is a plain ``tuple[Interval, ...]``: sorted by start, non-overlapping and non-adjacent (what
:func:`normalize` returns), so the functions below can merge in one linear pass.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable

Interval = tuple[int, int]
IntervalSet = tuple[Interval, ...]


def normalize(intervals: Iterable[Interval]) -> IntervalSet:
    """Sort and merge overlapping or adjacent intervals; empty ones (start > end) are dropped."""
    out: list[list[int]] = []
    for s, e in sorted(intervals):
        if s > e:
            continue
        if out and s <= out[-1][1] + 1:
            if e > out[-1][1]:
                out[-1][1] = e
        else:
            out.append([s, e])
    return tuple((s, e) for s, e in out)


def union(a: IntervalSet, b: IntervalSet) -> IntervalSet:
    if not a:
        return b
    if not b:
        return a
    return normalize(a + b)


def intersection(a: IntervalSet, b: IntervalSet) -> IntervalSet:
    out: list[Interval] = []
    i = j = 0
    while i < len(a) and j < len(b):
        s = max(a[i][0], b[j][0])
        e = min(a[i][1], b[j][1])
        if s <= e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def difference(a: IntervalSet, b: IntervalSet) -> IntervalSet:
    """What of ``a`` is not in ``b``."""
    if not b:
        return a
    out: list[Interval] = []
    j = 0
    for s, e in a:
        cur = s
        while j < len(b) and b[j][1] < cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] <= e:
            bs, be = b[k]
            if bs > cur:
                out.append((cur, bs - 1))
            cur = max(cur, be + 1)
            if cur > e:
                break
            k += 1
        if cur <= e:
            out.append((cur, e))
    return tuple(out)


def contains(ivs: IntervalSet, value: int) -> bool:
    i = bisect_right(ivs, (value, math.inf)) - 1
    return i >= 0 and ivs[i][1] >= value


def holes(ivs: IntervalSet) -> IntervalSet:
    """The values missing between the smallest and the largest of the set."""
    return tuple((ivs[i][1] + 1, ivs[i + 1][0] - 1) for i in range(len(ivs) - 1))


def size(ivs: IntervalSet) -> int:
    """How many values the set holds."""
    return sum(e - s + 1 for s, e in ivs)


def format_intervals(ivs: IntervalSet) -> str:
    """MySQL's text form: ``1-5:7:9-10``."""
    return ":".join(str(s) if s == e else f"{s}-{e}" for s, e in ivs)
