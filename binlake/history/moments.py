"""Where in a source's archive a moment falls: a GTID / GTID set, a commit time or a file:position,
resolved against the source's transactions (``silver.transactions``) in binlog order (pure).

Why every moment becomes one transaction (the *cut*: the last transaction the moment includes) and
the answer is "every change up to the cut's end in binlog order": that is the state a server that
executed exactly those transactions shows, and it is the one question a replay can answer from an
archive that holds transactions in binlog order. A GTID set that is not a prefix of that order (it
leaves out a transaction the archive has before one it includes) names no such state, and is refused
with the transaction that breaks it. A commit time includes everything up to the last transaction
committed at or before it (binlog timestamps are whole seconds on MariaDB and before MySQL 8.0.1's
``original_commit_timestamp``; the transactions of one second are all in or all out).
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Sequence
from dataclasses import dataclass

from binlake.gold.schema_history import Coordinates
from binlake.history.errors import MomentError
from binlake.reconcile.coverage import GtidIntervals, GtidTextError, parse_mariadb_gtid

_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_MARIADB = re.compile(r"^\s*\d+-\d+-\d+(\s*,\s*\d+-\d+-\d+)*\s*$")
_MYSQL_GTID = re.compile(rf"^({_UUID})(?::([A-Za-z_][A-Za-z0-9_]{{0,31}}))?:(\d+)$")
_POSITION = re.compile(r"^(?P<file>[^:\s]+):(?P<pos>\d+)$")


@dataclass(frozen=True)
class Transaction:
    """One archived transaction of the source: where it is, its GTID and commit time (UTC, naive)."""

    file: str
    file_seq: int
    start_pos: int
    end_pos: int
    gtid: str | None
    commit_time: _dt.datetime | None

    @property
    def end(self) -> Coordinates:
        """Just past the transaction: every change of it (and before it) orders below this."""
        return Coordinates(self.file_seq, self.end_pos, -1, -1, self.file)

    @property
    def start(self) -> Coordinates:
        return Coordinates(self.file_seq, self.start_pos, -1, -1, self.file)

    def describe(self) -> str:
        when = "" if self.commit_time is None else f", committed {self.commit_time.isoformat(sep=' ')} UTC"
        return f"{self.gtid or 'transaction without GTID'} ({self.file}:{self.start_pos}{when})"


def binlog_order(transactions: Sequence[Transaction]) -> list[Transaction]:
    return sorted(transactions, key=lambda t: (t.file_seq, t.file, t.start_pos))


class GtidMembership:
    """Whether a transaction's GTID is in a GTID set: a MariaDB position (``d-s-n,...``: per domain
    every seq up to n) or a MySQL GTID set (``uuid[:tag]:a-b,...``); one GTID is the set up to it."""

    def __init__(self, text: str) -> None:
        self.text = text.strip()
        self.mariadb = bool(_MARIADB.match(self.text))
        self.domains: dict[int, int] = {}
        try:
            if self.mariadb:
                for part in self.text.split(","):
                    domain, _server, seq = parse_mariadb_gtid(part)
                    self.domains[domain] = max(seq, self.domains.get(domain, 0))
                self.named = [p.strip() for p in self.text.split(",")]
            else:
                if not all(re.match(_UUID + r"(:|$)", part.strip()) for part in self.text.split(",")):
                    raise GtidTextError("every part must start with a server UUID")
                single = _MYSQL_GTID.match(self.text)
                # one MySQL GTID means "everything up to here": uuid[:tag]:1-gno
                spelled = (f"{single.group(1)}{':' + single.group(2) if single.group(2) else ''}:1-{single.group(3)}"
                           if single else self.text)
                self.intervals = GtidIntervals.from_text(spelled)
                self.named = [f"{sid}{':' + tag if tag else ''}:{end}" for sid, tag, _start, end
                              in self.intervals.iter_intervals()]
        except GtidTextError as exc:
            raise MomentError(f"{text!r} is neither a MariaDB GTID position (domain-server-seq[,...]) nor a "
                              f"MySQL GTID set (uuid[:tag]:a-b[,...]): {exc}") from None
        if not self.named:
            raise MomentError(f"the GTID set {text!r} is empty")

    def contains(self, gtid: str | None) -> bool:
        if not gtid or gtid == "ANONYMOUS":
            return False
        if self.mariadb:
            try:
                domain, _server, seq = parse_mariadb_gtid(gtid)
            except GtidTextError:
                return False
            return seq <= self.domains.get(domain, 0)
        parts = gtid.split(":")
        if len(parts) not in (2, 3) or not parts[-1].isdigit():
            return False
        key = (parts[0].lower(), parts[1].lower() if len(parts) == 3 else "")
        gno = int(parts[-1])
        return any(a <= gno <= b for a, b in self.intervals.intervals(key))


@dataclass(frozen=True)
class Moment:
    """A moment as the user gave it: ``kind`` is ``gtid``, ``time`` or ``position``."""

    kind: str
    text: str

    def __str__(self) -> str:
        return f"{self.kind} {self.text}"


def parse_time(text: str) -> _dt.datetime:
    """An ISO-8601 date-time (``2026-11-28 14:03:27[.ffffff]``, ``...T...Z``, ``+02:00``) as naive UTC;
    without an offset it is UTC, as every time in binlake's tables is."""
    try:
        moment = _dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise MomentError(f"{text!r} is not a date-time (YYYY-MM-DD HH:MM:SS[.ffffff][+HH:MM], UTC by default)"
                          ) from None
    return moment.astimezone(_dt.UTC).replace(tzinfo=None) if moment.tzinfo else moment


def _includes_by_gtid(moment: Moment, ordered: Sequence[Transaction], source: str) -> list[bool]:
    members = GtidMembership(moment.text)
    archived = {t.gtid for t in ordered if t.gtid}
    for named in members.named:
        if named not in archived and not (members.mariadb is False and _before_archive(named, ordered)):
            raise MomentError(f"GTID {named} (of {moment.text}) is not in the archive of source {source}: "
                              f"its transactions run from {ordered[0].describe()} to {ordered[-1].describe()}")
    return [members.contains(t.gtid) for t in ordered]


def _before_archive(named: str, ordered: Sequence[Transaction]) -> bool:
    """Whether a MySQL set's last GNO the archive lacks lies before an archived GNO of the same
    UUID (the set ends inside or before the archive: fine; a hole is reconciliation's GAP) rather
    than after the archive's last (a moment the archive does not reach yet: refused)."""
    sid = named.rsplit(":", 1)[0].lower()
    gno = int(named.rsplit(":", 1)[1])
    later = [t for t in ordered if t.gtid and t.gtid.rsplit(":", 1)[0].lower() == sid
             and int(t.gtid.rsplit(":", 1)[1]) > gno]
    return bool(later)


def _includes_by_position(moment: Moment, ordered: Sequence[Transaction], source: str) -> list[bool]:
    match = _POSITION.match(moment.text.strip())
    if not match:
        raise MomentError(f"{moment.text!r} is not a binlog position (file:pos, e.g. binlog.000042:1234)")
    name, pos = match.group("file"), int(match.group("pos"))
    files = list(dict.fromkeys(t.file for t in ordered))
    if name not in files:
        raise MomentError(f"file {name} holds no transaction of source {source} in the archive "
                          f"(files with transactions: {', '.join(files[:3])}{' ...' if len(files) > 3 else ''}"
                          f"{', ' + files[-1] if len(files) > 3 else ''})")
    index = files.index(name)
    return [files.index(t.file) < index or (t.file == name and t.end_pos <= pos) for t in ordered]


def _includes_by_time(moment: Moment, ordered: Sequence[Transaction]) -> list[bool]:
    at = parse_time(moment.text)
    last = max((i for i, t in enumerate(ordered) if t.commit_time is not None and t.commit_time <= at), default=-1)
    return [i <= last for i in range(len(ordered))]


def resolve(moment: Moment, transactions: Sequence[Transaction], source: str) -> Transaction:
    """The cut: the last transaction (in binlog order) the moment includes. :class:`MomentError`
    when the archive holds none, the moment precedes its first transaction, or a GTID set skips an
    archived transaction before one it includes."""
    ordered = binlog_order(transactions)
    if not ordered:
        raise MomentError(f"the archive of source {source} holds no transactions (nothing ingested?)")
    if moment.kind == "gtid":
        included = _includes_by_gtid(moment, ordered, source)
    elif moment.kind == "position":
        included = _includes_by_position(moment, ordered, source)
    elif moment.kind == "time":
        included = _includes_by_time(moment, ordered)
    else:
        raise MomentError(f"unknown kind of moment {moment.kind!r} (gtid, time or position)")
    if not any(included):
        raise MomentError(f"{moment} precedes the archive of source {source}: its first transaction is "
                          f"{ordered[0].describe()}")
    cut = max(i for i, inside in enumerate(included) if inside)
    skipped = next((t for t, inside in zip(ordered[:cut], included[:cut]) if not inside), None)
    if skipped is not None:
        raise MomentError(f"{moment} is not a point of the archive of source {source}: it includes "
                          f"{ordered[cut].describe()} but not {skipped.describe()}, which comes before it "
                          f"in binlog order")
    return ordered[cut]
