"""Numbered binlog file names: the one rule for "which file comes next" and "what is missing".

The rule (MySQL names its files ``<basename>.<number>``, zero-padded, e.g. ``binlog.000042``):
the **number** of a name is its last run of digits; the text before it (the *prefix*) and after
it (the *suffix*) together name the **series**. So ``binlog.000002.bak`` is number 2 of the
series ``binlog.…​.bak``: it sorts next to ``binlog.000002`` (reconciliation lines it up with
the file it copies) but it is neither that file's successor nor its predecessor, and the next
name after it is ``binlog.000003.bak``. A name without digits has no number and no successor.
Only the base name counts (``a/b/binlog.000002`` is ``binlog.000002``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NUMBERED = re.compile(r"^(.*?)(\d+)(\D*)$")

#: Beyond this many missing names, :func:`missing_between` gives a range instead of a list.
MAX_LISTED_MISSING = 1000


@dataclass(frozen=True, slots=True)
class SeriesName:
    """A file name split around its number (``number`` None: the name has no digits)."""

    prefix: str
    number: int | None
    width: int
    suffix: str

    @property
    def series(self) -> tuple[str, str]:
        """What two names of one series share: (prefix, suffix)."""
        return self.prefix, self.suffix

    def with_number(self, number: int) -> str:
        """The name of ``number`` in this series, zero-padded to this name's width."""
        return f"{self.prefix}{number:0{self.width}d}{self.suffix}"


def parse_series_name(name: str) -> SeriesName:
    base = name.rsplit("/", 1)[-1]
    m = _NUMBERED.match(base)
    if not m:
        return SeriesName(base, None, 0, "")
    return SeriesName(m.group(1), int(m.group(2)), len(m.group(2)), m.group(3))


def next_in_series(name: str) -> str | None:
    """The next file name of a numbered series (``binlog.000999`` -> ``binlog.001000``)."""
    s = parse_series_name(name)
    return None if s.number is None else s.with_number(s.number + 1)


def series_sort_key(name: str) -> tuple[str, str, int, str]:
    """Names grouped by series, then by number (names without a number first), then by text."""
    s = parse_series_name(name)
    return (s.prefix, s.suffix, s.number if s.number is not None else -1, name)


def missing_between(first: str, last: str) -> list[str]:
    """The names skipped between two names of one series (``[]`` when not of one series).

    More than :data:`MAX_LISTED_MISSING` names are given as one ``"a .. b"`` range.
    """
    a, b = parse_series_name(first), parse_series_name(last)
    if a.number is None or b.number is None or a.series != b.series or b.number <= a.number + 1:
        return []
    if b.number - a.number > MAX_LISTED_MISSING:
        return [f"{a.with_number(a.number + 1)} .. {a.with_number(b.number - 1)}"]
    return [a.with_number(n) for n in range(a.number + 1, b.number)]
