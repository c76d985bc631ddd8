"""GTIDs and GTID sets: MySQL (``uuid[:tag]:gno``) and MariaDB (``domain-server-seq``).

``GtidSet`` is immutable. Per (uuid, tag) it holds a sorted tuple of merged, inclusive
``(start, end)`` intervals. Text is MySQL's canonical form (``Gtid_set::to_string``):
UUIDs sorted, for each UUID its untagged intervals first, then ``:tag:intervals`` per
tag in tag order; intervals sorted and merged; single GNOs printed alone; tags
lower-cased. MySQL's default separator between UUIDs is ``",\\n"``; :meth:`GtidSet.__str__`
prints ``","`` (one line); ``to_string(newlines=True)`` gives the server's exact bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from binlog_parser.errors import GtidParseError
from binlog_parser.intervals import Interval
from binlog_parser.intervals import contains as _contains
from binlog_parser.intervals import difference as _difference
from binlog_parser.intervals import format_intervals as _format_intervals
from binlog_parser.intervals import intersection as _intersection
from binlog_parser.intervals import normalize as _normalize
from binlog_parser.intervals import union as _union
from binlog_parser.serialization import read_varlen_unsigned, write_varlen_unsigned

MAX_GNO = (1 << 63) - 1  # GNO_END - 1 (GNO_END = INT64_MAX)
TAG_MAX_LENGTH = 32

_U64 = struct.Struct("<Q")
_Q2 = struct.Struct("<QQ")
_HEX = frozenset("0123456789abcdefABCDEF")

Key = tuple[str, str]  # (uuid, tag) ; tag "" = untagged


# ---------------------------------------------------------------------------
# UUIDs and tags
# ---------------------------------------------------------------------------


def uuid_from_bytes(raw: bytes | memoryview) -> str:
    h = bytes(raw).hex()
    return f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def uuid_to_bytes(uuid: str) -> bytes:
    return bytes.fromhex(uuid.replace("-", ""))


def normalize_uuid(text: str) -> str:
    """Accept ``8-4-4-4-12`` hex (any case), 32 hex digits or ``{...}``; return lower 8-4-4-4-12."""
    t = text.strip()
    if t.startswith("{") and t.endswith("}"):
        t = t[1:-1]
    if len(t) == 36:
        if t[8] != "-" or t[13] != "-" or t[18] != "-" or t[23] != "-":
            raise GtidParseError(f"invalid UUID {text!r}")
        h = t[0:8] + t[9:13] + t[14:18] + t[19:23] + t[24:36]
    elif len(t) == 32:
        h = t
    else:
        raise GtidParseError(f"invalid UUID {text!r}")
    if not all(c in _HEX for c in h):
        raise GtidParseError(f"invalid UUID {text!r}")
    h = h.lower()
    return f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def normalize_tag(text: str | None) -> str:
    """MySQL's tag rules: ``[a-z_][a-z0-9_]{0,31}`` after lower-casing; "" = no tag."""
    if not text:
        return ""
    t = text.strip()
    if not t:
        return ""
    if len(t) > TAG_MAX_LENGTH:
        raise GtidParseError(f"GTID tag {text!r} is longer than {TAG_MAX_LENGTH} characters")
    for i, c in enumerate(t):
        if not (("a" <= c <= "z") or ("A" <= c <= "Z") or c == "_" or (i > 0 and "0" <= c <= "9")):
            raise GtidParseError(f"invalid GTID tag {text!r}")
    return t.lower()


def _is_tag_start(c: str) -> bool:
    return ("a" <= c <= "z") or ("A" <= c <= "Z") or c == "_"


class _TextJson:
    """JSON form of a GTID value: its text (``events.to_json_value`` calls ``to_json``)."""

    __slots__ = ()

    def to_json(self) -> str:
        return str(self)


# ---------------------------------------------------------------------------
# Gtid
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, order=True)
class Gtid(_TextJson):
    """One MySQL GTID: ``uuid:gno`` or ``uuid:tag:gno``."""

    uuid: str
    gno: int
    tag: str = ""

    def __str__(self) -> str:
        if self.tag:
            return f"{self.uuid}:{self.tag}:{self.gno}"
        return f"{self.uuid}:{self.gno}"

    @classmethod
    def parse(cls, text: str) -> Gtid:
        parts = text.strip().split(":")
        if len(parts) == 2:
            uuid, tag, gno = parts[0], "", parts[1]
        elif len(parts) == 3:
            uuid, tag, gno = parts
        else:
            raise GtidParseError(f"invalid GTID {text!r}")
        return cls(normalize_uuid(uuid), _parse_gno(gno, text), normalize_tag(tag))


def _parse_gno(text: str, whole: str) -> int:
    t = text.strip()
    if not t.isdigit() or not t.isascii():
        raise GtidParseError(f"invalid GNO {text!r} in {whole!r}")
    v = int(t)
    if v < 1 or v > MAX_GNO:
        raise GtidParseError(f"GNO {v} out of range 1..{MAX_GNO} in {whole!r}")
    return v


# ---------------------------------------------------------------------------
# GtidSet
# ---------------------------------------------------------------------------


class GtidSet(_TextJson):
    """An immutable MySQL GTID set (tagged GTIDs included)."""

    __slots__ = ("_data", "_hash")

    def __init__(self, data: dict[Key, tuple[Interval, ...]] | None = None) -> None:
        # data must already be normalized (sorted, merged, no empty entries)
        self._data: dict[Key, tuple[Interval, ...]] = dict(sorted(data.items())) if data else {}
        self._hash: int | None = None

    # -- construction ---------------------------------------------------------

    @classmethod
    def empty(cls) -> GtidSet:
        return cls()

    @classmethod
    def from_intervals(cls, items: Iterable[tuple[str, str | None, int, int]]) -> GtidSet:
        """From ``(uuid, tag, start, end_inclusive)`` tuples (any order, may overlap)."""
        acc: dict[Key, list[Interval]] = {}
        for uuid, tag, start, end in items:
            if start < 1 or end < start or end > MAX_GNO:
                raise GtidParseError(f"invalid interval {start}-{end}")
            acc.setdefault((normalize_uuid(uuid), normalize_tag(tag)), []).append((start, end))
        return cls({k: _normalize(v) for k, v in acc.items()})

    @classmethod
    def from_gtids(cls, gtids: Iterable[Any]) -> GtidSet:
        """Fast builder from :class:`Gtid` objects, ``"uuid[:tag]:gno"`` strings,
        ``(uuid, tag, gno)`` tuples or GTID events (anything with ``uuid``/``tag``/``gno``)."""
        acc: dict[Key, list[int]] = {}
        norm_cache: dict[tuple[str, str], Key] = {}
        for g in gtids:
            if isinstance(g, str):
                g = Gtid.parse(g)
            if isinstance(g, tuple):
                uuid, tag, gno = g
            else:
                uuid, tag, gno = g.uuid, g.tag, g.gno
            raw_key = (uuid, tag or "")
            key = norm_cache.get(raw_key)
            if key is None:
                key = (normalize_uuid(uuid), normalize_tag(tag))
                norm_cache[raw_key] = key
            if not 1 <= gno <= MAX_GNO:
                raise GtidParseError(f"GNO {gno} out of range")
            acc.setdefault(key, []).append(gno)
        data: dict[Key, tuple[Interval, ...]] = {}
        for key, gnos in acc.items():
            gnos.sort()
            out: list[Interval] = []
            s = e = gnos[0]
            for g in gnos[1:]:
                if g <= e + 1:
                    if g > e:
                        e = g
                else:
                    out.append((s, e))
                    s = e = g
            out.append((s, e))
            data[key] = tuple(out)
        return cls(data)

    @classmethod
    def from_text(cls, text: str) -> GtidSet:
        """Parse MySQL's text: ``uuid:1-5:7,uuid:tag:1-2`` (whitespace and newlines allowed)."""
        acc: dict[Key, list[Interval]] = {}
        t = text.strip()
        if not t:
            return cls()
        for part in t.split(","):
            part = part.strip()
            if not part:
                raise GtidParseError(f"empty element in GTID set {text!r}")
            pieces = part.split(":")
            uuid = normalize_uuid(pieces[0])
            tag = ""
            acc.setdefault((uuid, tag), [])
            for piece in pieces[1:]:
                p = piece.strip()
                if not p:
                    raise GtidParseError(f"empty interval in {part!r}")
                if _is_tag_start(p[0]):
                    tag = normalize_tag(p)
                    acc.setdefault((uuid, tag), [])
                    continue
                if "-" in p:
                    a, _, b = p.partition("-")
                    s, e = _parse_gno(a, text), _parse_gno(b, text)
                    if e < s:
                        raise GtidParseError(f"interval {p!r} ends before it starts in {text!r}")
                else:
                    s = e = _parse_gno(p, text)
                acc[(uuid, tag)].append((s, e))
        return cls({k: _normalize(v) for k, v in acc.items() if v})

    @classmethod
    def parse(cls, text: str) -> GtidSet:
        return cls.from_text(text)

    # -- binary (PREVIOUS_GTIDS) ------------------------------------------------

    @classmethod
    def decode(cls, buf: bytes | memoryview) -> tuple[GtidSet, bool]:
        """Decode MySQL's ``Gtid_set::encode`` bytes; returns ``(set, tagged_format)``.

        Untagged: n_sids(8) then per SID: uuid(16) n_intervals(8) [start, end) pairs.
        Tagged (8.4+): byte 0 = 1, bytes 1-6 = n_tsids, byte 7 = 1; per TSID the uuid,
        then the tag as a varlen-length-prefixed string, then the intervals.
        Intervals on disk are end-exclusive.
        """
        mv = memoryview(buf)
        n = len(mv)
        if n < 8:
            raise GtidParseError(f"GTID set encoding of {n} bytes (< 8)")
        tagged = mv[7] == 1
        if tagged:
            if mv[0] != 1:
                raise GtidParseError(f"tagged GTID set with format byte {mv[0]}")
            n_sids = int.from_bytes(mv[1:7], "little")
        else:
            n_sids = _U64.unpack_from(mv, 0)[0]
        off = 8
        # each SID needs at least 16 + 8 (+1 tag length) bytes: refuse absurd counts early
        if n_sids * 24 > n - off:
            raise GtidParseError(f"GTID set claims {n_sids} SIDs in {n} bytes")
        acc: dict[Key, list[Interval]] = {}
        for _ in range(n_sids):
            if off + 16 > n:
                raise GtidParseError("GTID set encoding ends inside a UUID")
            uuid = uuid_from_bytes(mv[off:off + 16])
            off += 16
            tag = ""
            if tagged:
                try:
                    length, off = _read_varlen(mv, off)
                except ValueError as exc:  # ShortBufferError: the tag length runs past the end
                    raise GtidParseError(f"GTID set encoding ends inside a tag length: {exc}") from None
                if length > TAG_MAX_LENGTH or off + length > n:
                    raise GtidParseError(f"invalid tag length {length}")
                raw_tag = bytes(mv[off:off + length])
                off += length
                try:
                    tag = normalize_tag(raw_tag.decode("ascii")) if raw_tag else ""
                except UnicodeDecodeError as exc:
                    raise GtidParseError(f"invalid tag bytes {raw_tag.hex()}") from exc
            if off + 8 > n:
                raise GtidParseError("GTID set encoding ends inside an interval count")
            n_iv = _U64.unpack_from(mv, off)[0]
            off += 8
            if n_iv * 16 > n - off:
                raise GtidParseError(f"GTID set claims {n_iv} intervals, too few bytes remain")
            lst = acc.setdefault((uuid, tag), [])
            for _ in range(n_iv):
                s, e = _Q2.unpack_from(mv, off)
                off += 16
                if s < 1 or e <= s or e - 1 > MAX_GNO:
                    raise GtidParseError(f"invalid interval [{s}, {e}) for {uuid}")
                lst.append((s, e - 1))
        if off != n:
            raise GtidParseError(f"{n - off} trailing bytes after the GTID set encoding")
        return cls({k: _normalize(v) for k, v in acc.items() if v}), tagged

    def encode(self, tagged: bool | None = None) -> bytes:
        """MySQL's encoding (the PREVIOUS_GTIDS body); tagged format if any tag or asked."""
        if tagged is None:
            tagged = any(tag for (_, tag) in self._data)
        if not tagged and any(tag for (_, tag) in self._data):
            raise ValueError("a set with tags needs the tagged format")
        out = bytearray()
        n = len(self._data)
        if tagged:
            out += b"\x01" + n.to_bytes(6, "little") + b"\x01"
        else:
            out += _U64.pack(n)
        for (uuid, tag), ivs in self._data.items():
            out += uuid_to_bytes(uuid)
            if tagged:
                out += _write_varlen(len(tag)) + tag.encode("ascii")
            out += _U64.pack(len(ivs))
            for s, e in ivs:
                out += _Q2.pack(s, e + 1)
        return bytes(out)

    # -- algebra --------------------------------------------------------------

    def _combine(self, other: GtidSet, op: Any, keep_left_only: bool,
                 keep_right_only: bool) -> GtidSet:
        if not isinstance(other, GtidSet):
            other = _coerce(other)
        out: dict[Key, tuple[Interval, ...]] = {}
        for key in self._data.keys() | other._data.keys():
            a = self._data.get(key)
            b = other._data.get(key)
            if a is None:
                if keep_right_only:
                    out[key] = b  # type: ignore[assignment]
                continue
            if b is None:
                if keep_left_only:
                    out[key] = a
                continue
            r = op(a, b)
            if r:
                out[key] = r
        return GtidSet(out)

    def union(self, *others: Any) -> GtidSet:
        r = self
        for o in others:
            r = r._combine(o, _union, True, True)
        return r

    def intersection(self, other: Any) -> GtidSet:
        return self._combine(other, _intersection, False, False)

    def difference(self, other: Any) -> GtidSet:
        return self._combine(other, _difference, True, False)

    def symmetric_difference(self, other: Any) -> GtidSet:
        other = _coerce(other)
        return (self - other) | (other - self)

    __or__ = union
    __and__ = intersection
    __sub__ = difference
    __xor__ = symmetric_difference

    def __ror__(self, other: Any) -> GtidSet:
        return _coerce(other) | self

    def __rsub__(self, other: Any) -> GtidSet:
        return _coerce(other) - self

    def __rand__(self, other: Any) -> GtidSet:
        return _coerce(other) & self

    def add(self, uuid: str, tag: str | None, gno: int) -> GtidSet:
        """A new set with one more GTID."""
        if not 1 <= gno <= MAX_GNO:
            raise GtidParseError(f"GNO {gno} out of range")
        key = (normalize_uuid(uuid), normalize_tag(tag))
        ivs = self._data.get(key, ())
        if ivs and _contains(ivs, gno):
            return self
        data = dict(self._data)
        data[key] = _normalize(ivs + ((gno, gno),))
        return GtidSet(data)

    def add_gtid(self, gtid: Gtid | str) -> GtidSet:
        g = Gtid.parse(gtid) if isinstance(gtid, str) else gtid
        return self.add(g.uuid, g.tag, g.gno)

    # -- queries --------------------------------------------------------------

    def contains(self, item: Any) -> bool:
        """A GTID (``Gtid``, text ``uuid[:tag]:gno`` or ``(uuid, tag, gno)``) or a whole set."""
        if isinstance(item, GtidSet):
            return item.issubset(self)
        if isinstance(item, str):
            if "," in item or item.count(":") == 0:
                return GtidSet.from_text(item).issubset(self)
            try:
                item = Gtid.parse(item)
            except GtidParseError:
                return GtidSet.from_text(item).issubset(self)
        if isinstance(item, tuple):
            uuid, tag, gno = item
            key = (normalize_uuid(uuid), normalize_tag(tag))
        else:
            key = (normalize_uuid(item.uuid), normalize_tag(item.tag))
            gno = item.gno
        ivs = self._data.get(key)
        return bool(ivs) and _contains(ivs, gno)  # type: ignore[arg-type]

    __contains__ = contains

    def issubset(self, other: Any) -> bool:
        other = _coerce(other)
        for key, ivs in self._data.items():
            o = other._data.get(key)
            if o is None or _difference(ivs, o):
                return False
        return True

    def issuperset(self, other: Any) -> bool:
        return _coerce(other).issubset(self)

    __le__ = issubset
    __ge__ = issuperset

    def __lt__(self, other: Any) -> bool:
        o = _coerce(other)
        return self.issubset(o) and self != o

    def __gt__(self, other: Any) -> bool:
        o = _coerce(other)
        return o.issubset(self) and self != o

    def isdisjoint(self, other: Any) -> bool:
        return (self & _coerce(other)).is_empty

    @property
    def is_empty(self) -> bool:
        return not self._data

    def __bool__(self) -> bool:
        return bool(self._data)

    def count(self) -> int:
        return sum(e - s + 1 for ivs in self._data.values() for s, e in ivs)

    def __len__(self) -> int:
        return self.count()

    def __iter__(self) -> Iterator[tuple[str, str, int, int]]:
        """``(uuid, tag, start, end_inclusive)`` in canonical order (tag "" = untagged)."""
        for (uuid, tag), ivs in self._data.items():
            for s, e in ivs:
                yield uuid, tag, s, e

    def intervals(self, uuid: str, tag: str | None = None) -> tuple[Interval, ...]:
        return self._data.get((normalize_uuid(uuid), normalize_tag(tag)), ())

    def uuids(self) -> list[str]:
        return sorted({u for (u, _) in self._data})

    def tsids(self) -> list[Key]:
        return list(self._data)

    def gtids(self) -> Iterator[Gtid]:
        """Every GTID, one by one (can be huge: prefer interval iteration)."""
        for uuid, tag, s, e in self:
            for g in range(s, e + 1):
                yield Gtid(uuid, g, tag)

    # -- text -----------------------------------------------------------------

    def to_string(self, newlines: bool = False) -> str:
        sep = ",\n" if newlines else ","
        parts: list[str] = []
        cur_uuid = None
        cur: list[str] = []
        for (uuid, tag), ivs in self._data.items():
            if uuid != cur_uuid:
                if cur:
                    parts.append("".join(cur))
                cur = [uuid]
                cur_uuid = uuid
            if tag:
                cur.append(f":{tag}")
            cur.append(":" + _format_intervals(ivs))
        if cur:
            parts.append("".join(cur))
        return sep.join(parts)

    def __str__(self) -> str:
        return self.to_string()

    def __repr__(self) -> str:
        return f"GtidSet({self.to_string()!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            try:
                other = GtidSet.from_text(other)
            except GtidParseError:
                return False
        if not isinstance(other, GtidSet):
            return NotImplemented
        return self._data == other._data

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(tuple(self._data.items()))
        return self._hash


def _coerce(x: Any) -> GtidSet:
    if isinstance(x, GtidSet):
        return x
    if isinstance(x, str):
        return GtidSet.from_text(x)
    if isinstance(x, Gtid):
        return GtidSet.from_gtids([x])
    return GtidSet.from_gtids(x)


# MySQL's serialization varlen integer (libs/mysql/serialization/variable_length_integers.h):
# the number of trailing 1-bits in the first byte (plus one) gives the byte count.


_read_varlen = read_varlen_unsigned
_write_varlen = write_varlen_unsigned


# ---------------------------------------------------------------------------
# MariaDB
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, order=True)
class MariaGtid(_TextJson):
    """A MariaDB GTID ``domain-server-seq``."""

    domain_id: int
    server_id: int
    seq_no: int

    def __str__(self) -> str:
        return f"{self.domain_id}-{self.server_id}-{self.seq_no}"

    @classmethod
    def parse(cls, text: str) -> MariaGtid:
        parts = text.strip().split("-")
        if len(parts) != 3 or not all(p.isdigit() and p.isascii() for p in parts):
            raise GtidParseError(f"invalid MariaDB GTID {text!r}")
        d, s, n = (int(p) for p in parts)
        if d >= 1 << 32 or s >= 1 << 32 or n >= 1 << 64:
            raise GtidParseError(f"MariaDB GTID {text!r} out of range")
        return cls(d, s, n)


class MariaGtidList(_TextJson):
    """A MariaDB GTID list / position: ``0-1-10,1-2-5`` (order kept as given)."""

    __slots__ = ("gtids",)

    def __init__(self, gtids: Iterable[MariaGtid] = ()) -> None:
        self.gtids: tuple[MariaGtid, ...] = tuple(gtids)

    @classmethod
    def from_text(cls, text: str) -> MariaGtidList:
        t = text.strip()
        if not t:
            return cls()
        return cls(MariaGtid.parse(p) for p in t.split(","))

    parse = from_text

    def __str__(self) -> str:
        return ",".join(str(g) for g in self.gtids)

    def __repr__(self) -> str:
        return f"MariaGtidList({str(self)!r})"

    def __iter__(self) -> Iterator[MariaGtid]:
        return iter(self.gtids)

    def __len__(self) -> int:
        return len(self.gtids)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            other = MariaGtidList.from_text(other)
        if not isinstance(other, MariaGtidList):
            return NotImplemented
        return self.gtids == other.gtids

    def __hash__(self) -> int:
        return hash(self.gtids)

    def domains(self) -> dict[int, MariaGtid]:
        """The GTID position per domain: for each domain the GTID with the highest seq_no."""
        out: dict[int, MariaGtid] = {}
        for g in self.gtids:
            cur = out.get(g.domain_id)
            if cur is None or g.seq_no > cur.seq_no:
                out[g.domain_id] = g
        return out

    def contains(self, gtid: MariaGtid | str) -> bool:
        """Whether ``gtid`` is at or before this position in its domain (by seq_no)."""
        g = MariaGtid.parse(gtid) if isinstance(gtid, str) else gtid
        cur = self.domains().get(g.domain_id)
        return cur is not None and g.seq_no <= cur.seq_no

    __contains__ = contains

    def advance(self, gtid: MariaGtid) -> MariaGtidList:
        """A new position where ``gtid`` replaces the entry of its (domain, server)."""
        kept = [g for g in self.gtids if (g.domain_id, g.server_id) != (gtid.domain_id, gtid.server_id)]
        kept.append(gtid)
        return MariaGtidList(sorted(kept))
