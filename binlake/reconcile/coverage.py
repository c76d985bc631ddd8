"""GTID coverage and chain reconciliation over per-file facts. Pure Python, no Spark.

Ingestion (``binlake.ingest.records``) leaves one small summary per archived binlog object in
``meta.binlog_files`` (a :class:`FileFacts`): what the file says precedes it (MySQL
PREVIOUS_GTIDS or MariaDB GTID_LIST), which GTIDs it contains, how it ends (ROTATE to which
name, STOP, or nothing because it is truncated / still active). This module turns those
facts into

* :func:`coverage` - per source and per GTID key (MySQL ``uuid`` + ``tag``, MariaDB domain),
  the merged GNO intervals the archive holds, with the first/last file of each interval;
* :func:`reconcile` - per file, in ROTATE-chain order, the file's PREVIOUS_GTIDS compared with
  what the archive says should precede it (predecessor's PREVIOUS_GTIDS + its contained GTIDs):
  ``OK``, ``GAP`` (missing GTIDs or a missing file), ``OVERLAP``/``DUPLICATE`` (extra GTIDs,
  a duplicate upload, GTIDs logged twice) or ``CHAIN_BREAK`` (RESET, restart on a new chain).

GTID sets are handled by :class:`GtidIntervals`, an interval map keyed by ``(sid, tag)``:
for MySQL ``sid`` is the server UUID (lower case) and ``tag`` the GTID tag ('' when
untagged); its text is MySQL's canonical GTID-set text (``uuid:1-5:7,uuid2:1-3:tag:1-2``:
UUIDs sorted, untagged intervals first, then tags sorted). MariaDB GTIDs
(``domain-server-seq``) are mapped to ``sid`` = the domain id (as text) and tag '': a
GTID_LIST entry ``0-7-10`` means "domain 0 has seq 1..10", and the text is
``0:1-10,1:1-5`` (domains in numeric order). A GTID_LIST only names the last seq, so where a
domain first shows up as GTIDs (not in a list), the seqs below its first GTID are taken as the
archive's starting point, never as missing (see :func:`_unseen_domain_floor`). The core
decoder's ``GtidSet`` prints the same MySQL text; both use the one interval-set arithmetic of
:mod:`binlog_parser.intervals` (this class adds the MariaDB domain keys and runs on per-file
summaries, never on events).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from binlake.discovery.chain import follow_chain
from binlake.discovery.series import missing_between, parse_series_name
from binlake.errors import BinlakeError
from binlog_parser.intervals import difference, holes, intersection, normalize, size

MYSQL = "mysql"
MARIADB = "mariadb"

STATUS_OK = "OK"
STATUS_GAP = "GAP"
STATUS_OVERLAP = "OVERLAP"
STATUS_DUPLICATE = "DUPLICATE"
STATUS_CHAIN_BREAK = "CHAIN_BREAK"
# Severity order used when one file shows several findings.
_SEVERITY = {STATUS_OK: 0, STATUS_OVERLAP: 1, STATUS_DUPLICATE: 2, STATUS_GAP: 3, STATUS_CHAIN_BREAK: 4}

_INTERVAL_RE = re.compile(r"^(\d+)(?:-(\d+))?$")
_TAG_RE = re.compile(r"^[a-z_][a-z0-9_]{0,31}$", re.IGNORECASE)


class GtidTextError(BinlakeError, ValueError):
    """A GTID-set text that cannot be parsed."""


Key = tuple[str, str]  # (sid, tag)


class GtidIntervals:
    """An immutable set of GTIDs as merged inclusive intervals per ``(sid, tag)`` key."""

    __slots__ = ("flavor", "_map")

    def __init__(self, mapping: Mapping[Key, Iterable[tuple[int, int]]] | None = None,
                 flavor: str = MYSQL) -> None:
        self.flavor = flavor
        m: dict[Key, tuple[tuple[int, int], ...]] = {}
        for key, ivs in (mapping or {}).items():
            merged = normalize(ivs)
            if merged:
                m[key] = merged
        self._map = m

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def empty(cls, flavor: str = MYSQL) -> GtidIntervals:
        return cls({}, flavor)

    @classmethod
    def from_text(cls, text: str | None, flavor: str = MYSQL) -> GtidIntervals:
        """Parse canonical text (MySQL syntax; for MariaDB, ``domain:1-10`` per domain)."""
        if text is None:
            return cls.empty(flavor)
        acc: dict[Key, list[tuple[int, int]]] = {}
        for part in text.replace("\n", "").split(","):
            part = part.strip()
            if not part:
                continue
            tokens = [t.strip() for t in part.split(":")]
            sid = tokens[0].lower()
            if not sid:
                raise GtidTextError(f"empty UUID/domain in GTID text {text!r}")
            tag = ""
            acc.setdefault((sid, tag), [])
            for tok in tokens[1:]:
                m = _INTERVAL_RE.match(tok)
                if m:
                    start = int(m.group(1))
                    end = int(m.group(2)) if m.group(2) else start
                    if start < 1 or end < start:
                        raise GtidTextError(f"bad interval {tok!r} in {text!r}")
                    acc.setdefault((sid, tag), []).append((start, end))
                elif _TAG_RE.match(tok):
                    tag = tok.lower()
                    acc.setdefault((sid, tag), [])
                else:
                    raise GtidTextError(f"bad token {tok!r} in GTID text {text!r}")
        return cls(acc, flavor)

    @classmethod
    def from_mariadb_list(cls, entries: Iterable[tuple[int, int, int]] | str | None) -> GtidIntervals:
        """A MariaDB GTID_LIST / gtid_binlog_pos (``domain-server-seq`` entries) as a set.

        Each domain's state is "every seq up to the highest listed", i.e. ``1..max(seq)``.
        """
        if entries is None:
            return cls.empty(MARIADB)
        if isinstance(entries, str):
            entries = [parse_mariadb_gtid(p) for p in entries.split(",") if p.strip()]
        acc: dict[Key, list[tuple[int, int]]] = {}
        for domain, _server, seq in entries:
            if seq >= 1:
                acc.setdefault((str(domain), ""), []).append((1, seq))
        return cls(acc, MARIADB)

    # ---- set algebra --------------------------------------------------------------------
    def _combine(self, other: GtidIntervals, op: str) -> GtidIntervals:
        keys = set(self._map) | set(other._map)
        out: dict[Key, tuple[tuple[int, int], ...]] = {}
        for k in keys:
            a = self._map.get(k, ())
            b = other._map.get(k, ())
            if op == "|":
                out[k] = a + b
            elif op == "-":
                out[k] = difference(a, b)
            else:
                out[k] = intersection(a, b)
        return GtidIntervals(out, self.flavor)

    def __or__(self, other: GtidIntervals) -> GtidIntervals:
        return self._combine(other, "|")

    def __sub__(self, other: GtidIntervals) -> GtidIntervals:
        return self._combine(other, "-")

    def __and__(self, other: GtidIntervals) -> GtidIntervals:
        return self._combine(other, "&")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GtidIntervals) and self._map == other._map

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._map.items())))

    def __bool__(self) -> bool:
        return bool(self._map)

    def is_empty(self) -> bool:
        return not self._map

    def issubset(self, other: GtidIntervals) -> bool:
        return (self - other).is_empty()

    def count(self) -> int:
        return sum(size(ivs) for ivs in self._map.values())

    def keys(self) -> list[Key]:
        return sorted(self._map, key=self._sort_key)

    def intervals(self, key: Key) -> tuple[tuple[int, int], ...]:
        return self._map.get(key, ())

    def iter_intervals(self) -> Iterator[tuple[str, str, int, int]]:
        for k in self.keys():
            for s, e in self._map[k]:
                yield k[0], k[1], s, e

    def holes(self) -> GtidIntervals:
        """GNOs missing between each key's smallest and largest GNO."""
        out: dict[Key, list[tuple[int, int]]] = {}
        for k, ivs in self._map.items():
            gaps = holes(ivs)
            if gaps:
                out[k] = list(gaps)
        return GtidIntervals(out, self.flavor)

    # ---- text ---------------------------------------------------------------------------
    def _sort_key(self, key: Key) -> tuple:
        sid, tag = key
        if self.flavor == MARIADB and sid.isdigit():
            return (0, int(sid), "", tag != "", tag)
        return (1, 0, sid, tag != "", tag)

    def __str__(self) -> str:
        parts: list[str] = []
        current_sid = None
        for sid, tag in self.keys():
            ivs = ":".join(f"{s}" if s == e else f"{s}-{e}" for s, e in self._map[(sid, tag)])
            chunk = f"{tag}:{ivs}" if tag else ivs
            if sid != current_sid:
                parts.append(f"{sid}:{chunk}")
                current_sid = sid
            else:
                parts[-1] += f":{chunk}"
        return ",".join(parts)

    def __repr__(self) -> str:
        return f"GtidIntervals({self.flavor}, {str(self)!r})"

    def to_json(self) -> str:
        return str(self)


class GtidIntervalsBuilder:
    """Accumulate GTIDs one at a time (cheap for the usual increasing GNOs)."""

    def __init__(self, flavor: str = MYSQL) -> None:
        self.flavor = flavor
        self._acc: dict[Key, list[list[int]]] = {}
        self.duplicates: dict[Key, list[tuple[int, int]]] = {}
        self.n = 0

    def add(self, sid: str, gno: int, tag: str = "") -> None:
        key = (str(sid).lower(), (tag or "").lower())
        self.n += 1
        ivs = self._acc.get(key)
        if ivs is None:
            self._acc[key] = [[gno, gno]]
            return
        last = ivs[-1]
        if gno == last[1] + 1:
            last[1] = gno
        elif last[0] <= gno <= last[1]:
            self.duplicates.setdefault(key, []).append((gno, gno))
        else:
            # Out of order: check every interval for duplicates (rare path).
            if any(s <= gno <= e for s, e in ivs):
                self.duplicates.setdefault(key, []).append((gno, gno))
            else:
                ivs.append([gno, gno])
                if gno < last[0]:
                    ivs.sort()
                    merged = normalize((s, e) for s, e in ivs)
                    self._acc[key] = [[s, e] for s, e in merged]

    def add_run(self, sid: str, first: int, last: int, tag: str = "") -> None:
        """GTIDs ``first`` to ``last`` of one ``sid`` and ``tag``: what adding each in turn does,
        in one step when they extend the last interval (a decoded range hands its transactions'
        GTIDs over as such runs)."""
        key = (str(sid).lower(), (tag or "").lower())
        ivs = self._acc.get(key)
        if first <= last and (ivs is None or first == ivs[-1][1] + 1):
            if ivs is None:
                self._acc[key] = [[first, last]]
            else:
                ivs[-1][1] = last
            self.n += last - first + 1
            return
        for gno in range(first, last + 1):
            self.add(sid, gno, tag)

    def build(self) -> GtidIntervals:
        return GtidIntervals({k: [(s, e) for s, e in v] for k, v in self._acc.items()}, self.flavor)

    def build_duplicates(self) -> GtidIntervals:
        return GtidIntervals(self.duplicates, self.flavor)


def parse_mariadb_gtid(text: str) -> tuple[int, int, int]:
    """``"0-7-10"`` -> ``(0, 7, 10)``."""
    parts = text.strip().split("-")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise GtidTextError(f"bad MariaDB GTID {text!r}")
    return int(parts[0]), int(parts[1]), int(parts[2])


def split_series(name: str) -> tuple[str, int | None]:
    """``"binlog.000012"`` -> ``("binlog.", 12)``: the prefix and number of a file name
    (:mod:`binlake.discovery.series`: ``"mysql-bin.000002.bak"`` -> ``("mysql-bin.", 2)``)."""
    s = parse_series_name(name)
    return s.prefix, s.number


# ---------------------------------------------------------------------------------------
# Per-file facts and result rows
# ---------------------------------------------------------------------------------------


@dataclass
class FileFacts:
    """What reconciliation needs to know about one archived binlog object.

    ``previous_gtids``: canonical text of the PREVIOUS_GTIDS (MySQL) or of the GTID_LIST
    mapped to domain intervals (MariaDB); None when the file has no such event.
    ``contained_gtids``: canonical text of the GTIDs of the transactions inside the file.
    ``duplicate_gtids``: GTIDs that occur more than once inside the file.
    ``closing_event``: 'ROTATE', 'STOP' or None (truncated, or the active file).
    """

    source: str
    file: str
    flavor: str = MYSQL
    seq: int | None = None
    size: int | None = None
    etag: str | None = None
    fingerprint: str | None = None
    server_id: int | None = None
    server_version: str | None = None
    previous_gtids: str | None = None
    previous_gtids_raw: str | None = None
    contained_gtids: str = ""
    duplicate_gtids: str = ""
    first_gtid: str | None = None
    last_gtid: str | None = None
    closing_event: str | None = None
    next_file: str | None = None
    truncated: bool = False
    transactions: int = 0

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> FileFacts:
        names = set(cls.__dataclass_fields__)
        kwargs = {k: row[k] for k in row.keys() if k in names}
        if kwargs.get("seq") is None and row.get("file_seq") is not None:
            kwargs["seq"] = row["file_seq"]
        if kwargs.get("contained_gtids") is None:
            kwargs["contained_gtids"] = ""
        if kwargs.get("duplicate_gtids") is None:
            kwargs["duplicate_gtids"] = ""
        kwargs["truncated"] = bool(kwargs.get("truncated") or False)
        kwargs["transactions"] = int(kwargs.get("transactions") or 0)
        if not kwargs.get("flavor"):
            kwargs["flavor"] = MYSQL
        return cls(**kwargs)

    def gtids(self, attr: str) -> GtidIntervals | None:
        text = getattr(self, attr)
        if text is None:
            return None
        return GtidIntervals.from_text(text, self.flavor)

    def identity(self) -> tuple:
        """Equal for two uploads of the same bytes (content fingerprint when known)."""
        if self.fingerprint:
            return ("fp", self.fingerprint)
        return ("facts", self.size, self.server_id, self.previous_gtids, self.contained_gtids,
                self.first_gtid, self.last_gtid, self.closing_event, self.next_file, self.truncated,
                self.transactions)


@dataclass
class ReconciliationRow:
    source: str
    chain_index: int
    file: str
    seq: int | None
    flavor: str
    server_id: int | None
    status: str
    previous_file: str | None
    expected_file: str | None
    previous_gtids: str | None
    expected_gtids: str | None
    missing_gtids: str
    extra_gtids: str
    contained_gtids: str
    missing_files: list[str] = field(default_factory=list)
    duplicate_of: str | None = None
    truncated: bool = False
    closing_event: str | None = None
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class CoverageRow:
    source: str
    flavor: str
    sid: str
    tag: str
    gno_start: int
    gno_end: int
    transactions: int
    first_file: str
    last_file: str
    gtid_set: str
    files: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------------------
# Chain order
# ---------------------------------------------------------------------------------------


def _sort_key(f: FileFacts) -> tuple:
    base, seq = split_series(f.file)
    if f.seq is not None:
        seq = f.seq
    return (base, seq is None, seq if seq is not None else 0, len(f.file), f.file)


def _basename(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def chain_order(files: list[FileFacts]) -> tuple[list[FileFacts], dict[str, FileFacts]]:
    """Order one source's files along the ROTATE chain; split off identical re-uploads.

    Returns ``(ordered, duplicates)`` where ``duplicates`` maps a re-uploaded file's name to
    the file it copies. Among identical uploads the one a ROTATE names is canonical (else
    the lowest-sorted name). The walk follows ``next_file``; where the chain breaks (file
    missing, STOP, truncated tail) it resumes at the lowest remaining file of the series.
    """
    pointed = {f.next_file for f in files if f.next_file}
    groups: dict[tuple, list[FileFacts]] = {}
    for f in files:
        groups.setdefault(f.identity(), []).append(f)
    duplicates: dict[str, FileFacts] = {}
    canonical: list[FileFacts] = []
    for group in groups.values():
        group.sort(key=lambda f: (_basename(f.file) not in pointed, _sort_key(f)))
        canonical.append(group[0])
        for dup in group[1:]:
            duplicates[dup.file] = group[0]
    remaining = sorted(canonical, key=_sort_key)
    index_of: dict[str, int] = {}
    for i, f in enumerate(remaining):
        index_of.setdefault(_basename(f.file), i)

    def successor(i: int) -> int | None:
        nxt = remaining[i].next_file
        return index_of.get(_basename(nxt)) if nxt else None

    ordered: list[FileFacts] = []
    placed: set[int] = set()
    for i in range(len(remaining)):  # where the chain breaks, resume at the lowest remaining file
        ordered.extend(remaining[j] for j in follow_chain(i, successor, placed))
    return ordered, duplicates


def _missing_series_names(pred: FileFacts, f: FileFacts) -> list[str]:
    """Names skipped in a numbered series between ``pred`` and ``f``."""
    return missing_between(pred.file, f.file)


# ---------------------------------------------------------------------------------------
# Reconciliation
# ---------------------------------------------------------------------------------------


def _unseen_domain_floor(contained: GtidIntervals, known: GtidIntervals) -> GtidIntervals:
    """MariaDB: seqs ``1..first-1`` of each domain ``contained`` starts and ``known`` lacks.

    Why: a GTID_LIST names only the last seq per domain, which this module reads as
    ``1..seq``; but a domain need not start at seq 1 (``gtid_seq_no``, a promoted replica,
    an archive that begins mid-history). The seqs before the first GTID the archive holds
    of a domain that no GTID_LIST walked so far names are the archive's starting point, as
    a MySQL archive's first PREVIOUS_GTIDS is, not GTIDs it lost.
    """
    out: dict[Key, list[tuple[int, int]]] = {}
    met: set[Key] = set()
    for sid, tag, first, _last in contained.iter_intervals():
        key = (sid, tag)
        if key not in met and not known.intervals(key) and first > 1:
            out[key] = [(1, first - 1)]
        met.add(key)
    return GtidIntervals(out, MARIADB)


@dataclass
class _FileCheck:
    """What walking one file found: the findings and the GTID sets they name."""

    missing: GtidIntervals
    extra: GtidIntervals
    findings: list[tuple[str, str]] = field(default_factory=list)
    chain_break: bool = False
    whole_duplicate: bool = False  # an older copy of GTIDs already walked: the chain skips it

    def status(self) -> str:
        """The most severe status among the findings (OK when none)."""
        status = STATUS_OK
        for st, _msg in self.findings:
            if _SEVERITY[st] > _SEVERITY[status]:
                status = st
        return status


def _missing_files(pred: FileFacts, f: FileFacts) -> list[str]:
    """Files the predecessor's ROTATE names, or the numbering skips, that are not ``f``."""
    if pred.next_file and _basename(pred.next_file) != _basename(f.file):
        named = _basename(pred.next_file)
        return [named, *(n for n in _missing_series_names(pred, f) if n != named)]
    if not pred.next_file:
        return _missing_series_names(pred, f)
    return []


def _check_previous_gtids(check: _FileCheck, actual: GtidIntervals, expected: GtidIntervals,
                          contained: GtidIntervals, seen: GtidIntervals) -> None:
    """The file's PREVIOUS_GTIDS / GTID_LIST against what the walk says precedes it."""
    check.missing = actual - expected
    check.extra = expected - actual
    if actual.is_empty() and not expected.is_empty():
        check.chain_break = True
        check.findings.append((STATUS_CHAIN_BREAK, "PREVIOUS_GTIDS empty after a non-empty history (RESET?)"))
    elif check.missing and check.extra:
        check.chain_break = True
        check.findings.append((STATUS_CHAIN_BREAK, "PREVIOUS_GTIDS unrelated to the predecessor's history"))
    elif check.missing:
        check.findings.append((STATUS_GAP, f"GTIDs executed before this file but not in the archive: {check.missing}"))
    elif check.extra:
        if contained and contained.issubset(seen):
            check.whole_duplicate = True
            check.findings.append((STATUS_DUPLICATE, "file repeats GTIDs of an earlier file"))
        else:
            check.findings.append((STATUS_OVERLAP, f"predecessor's GTIDs not recorded as preceding: {check.extra}"))


def _check_contents(check: _FileCheck, f: FileFacts, flavor: str, actual: GtidIntervals | None,
                    expected: GtidIntervals | None, seen: GtidIntervals
                    ) -> tuple[GtidIntervals, GtidIntervals]:
    """GNO holes opened inside the file and GTIDs logged twice (``flavor``: the source's); returns
    (MariaDB domain floor, GTIDs walked so far: emptied when a new history starts here)."""
    empty = GtidIntervals.empty(flavor)
    contained = f.gtids("contained_gtids") or empty
    # MariaDB: a domain met for the first time starts where the archive starts.
    floor = empty
    if flavor == MARIADB:
        known = (actual or empty) if check.chain_break else (expected or empty) | (actual or empty)
        floor = _unseen_domain_floor(contained, known)
    if check.chain_break:
        seen = empty  # a new history starts here
        base = (actual or empty) | floor
    elif actual is not None:
        base = actual | (expected or empty) | floor
    else:
        base = (expected or empty) | floor
    new_holes = (base | contained).holes() - base.holes()
    if new_holes:
        check.missing = check.missing | new_holes
        check.findings.append((STATUS_GAP, f"GNO gap inside the file: {new_holes}"))
    again = empty
    if actual is not None:
        again = again | (contained & actual)
    again = again | (contained & seen) | (f.gtids("duplicate_gtids") or empty)
    if again:
        check.extra = check.extra | again
        check.findings.append((STATUS_DUPLICATE, f"GTIDs logged more than once: {again}"))
    return floor, seen


def _series_seq(f: FileFacts) -> int | None:
    return f.seq if f.seq is not None else split_series(f.file)[1]


def _duplicate_rows(files: list[FileFacts], duplicates: dict[str, FileFacts], flavor: str,
                    first_index: int) -> list[ReconciliationRow]:
    """Identical re-uploads, reported after the chain, each pointing at the original."""
    rows = []
    for index, name in enumerate(sorted(duplicates, key=lambda n: _sort_key(next(f for f in files if f.file == n))),
                                 first_index):
        f = next(x for x in files if x.file == name)
        orig = duplicates[name]
        contained = f.gtids("contained_gtids") or GtidIntervals.empty(flavor)
        rows.append(ReconciliationRow(
            source=f.source, chain_index=index, file=f.file, seq=_series_seq(f),
            flavor=f.flavor, server_id=f.server_id, status=STATUS_DUPLICATE,
            previous_file=None, expected_file=None, previous_gtids=f.previous_gtids,
            expected_gtids=None, missing_gtids="", extra_gtids=str(contained),
            contained_gtids=str(contained), missing_files=[], duplicate_of=orig.file,
            truncated=f.truncated, closing_event=f.closing_event,
            detail=f"same content as {orig.file} (uploaded twice)",
        ))
    return rows


def reconcile_source(files: list[FileFacts]) -> list[ReconciliationRow]:
    """Reconcile the files of one source (see module docstring for the statuses)."""
    if not files:
        return []
    flavor = files[0].flavor
    ordered, duplicates = chain_order(files)
    rows: list[ReconciliationRow] = []
    empty = GtidIntervals.empty(flavor)
    seen = empty                      # GTIDs contained in files already walked
    state: GtidIntervals | None = None  # what should precede the next file
    pred: FileFacts | None = None
    for index, f in enumerate(ordered):
        actual = f.gtids("previous_gtids")
        contained = f.gtids("contained_gtids") or empty
        expected = state
        check = _FileCheck(missing=empty, extra=empty)
        missing_files = _missing_files(pred, f) if pred is not None else []
        if missing_files:
            check.findings.append((STATUS_GAP, "file(s) not in the archive: " + ", ".join(missing_files)))
        if pred is not None and actual is not None and expected is not None:
            _check_previous_gtids(check, actual, expected, contained, seen)
        elif pred is None and actual is not None:
            check.findings.append((STATUS_OK, f"archive starting point: {actual}"))
        floor, seen = _check_contents(check, f, flavor, actual, expected, seen)
        status = check.status()
        if f.truncated:
            check.findings.append((STATUS_OK, "file truncated mid-event (tail cut or still being written)"))
        rows.append(ReconciliationRow(
            source=f.source, chain_index=index, file=f.file, seq=_series_seq(f),
            flavor=f.flavor, server_id=f.server_id, status=status,
            previous_file=pred.file if pred is not None else None,
            expected_file=pred.next_file if pred is not None else None,
            previous_gtids=f.previous_gtids, expected_gtids=str(expected) if expected is not None else None,
            missing_gtids=str(check.missing), extra_gtids=str(check.extra), contained_gtids=str(contained),
            missing_files=missing_files, duplicate_of=None, truncated=f.truncated,
            closing_event=f.closing_event, detail="; ".join(m for _s, m in check.findings),
        ))
        if check.whole_duplicate:
            continue  # an older copy: the chain goes on from its predecessor
        # Advance: what should precede the next file.
        if status == STATUS_CHAIN_BREAK or actual is not None:
            base_next = actual if actual is not None else empty
        else:
            base_next = expected or empty
        state = base_next | contained | check.missing | floor
        seen = seen | contained
        pred = f
    return rows + _duplicate_rows(files, duplicates, flavor, len(rows))


def _by_source(files: Iterable[FileFacts]) -> dict[str, list[FileFacts]]:
    """The files of each source, in the order given (each source is reconciled on its own)."""
    by_source: dict[str, list[FileFacts]] = {}
    for f in files:
        by_source.setdefault(f.source, []).append(f)
    return by_source


def reconcile(files: Iterable[FileFacts]) -> list[ReconciliationRow]:
    """Reconcile every source's files; rows grouped by source, in chain order."""
    by_source = _by_source(files)
    out: list[ReconciliationRow] = []
    for source in sorted(by_source):
        out.extend(reconcile_source(by_source[source]))
    return out


def coverage(files: Iterable[FileFacts]) -> list[CoverageRow]:
    """Per source and GTID key, the merged GNO intervals the archive contains."""
    by_source = _by_source(files)
    out: list[CoverageRow] = []
    for source in sorted(by_source):
        flist = by_source[source]
        flavor = flist[0].flavor
        ordered, dups = chain_order(flist)
        ordered = ordered + [f for f in flist if f.file in dups]
        per_file = [(f, f.gtids("contained_gtids") or GtidIntervals.empty(flavor)) for f in ordered]
        total = GtidIntervals.empty(flavor)
        for _f, g in per_file:
            total = total | g
        for sid, tag, start, end in total.iter_intervals():
            first_file = last_file = None
            first_pos = last_pos = None
            nfiles = 0
            for f, g in per_file:
                hit = False
                for s, e in g.intervals((sid, tag)):
                    if e < start or s > end:
                        continue
                    hit = True
                    if first_pos is None or s < first_pos:
                        first_pos, first_file = s, f.file
                    if last_pos is None or e > last_pos:
                        last_pos, last_file = e, f.file
                nfiles += hit
            one = GtidIntervals({(sid, tag): [(start, end)]}, flavor)
            out.append(CoverageRow(source=source, flavor=flavor, sid=sid, tag=tag, gno_start=start,
                                   gno_end=end, transactions=end - start + 1,
                                   first_file=first_file or "", last_file=last_file or "",
                                   gtid_set=str(one), files=nfiles))
    return out
