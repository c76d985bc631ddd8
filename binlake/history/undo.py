"""The SQL that undoes what some transactions did to one table (``binlake flashback``).

Which transactions: a GTID range ``A..B`` (MariaDB ``d-s-a..d-s-b`` of one domain, MySQL
``uuid[:tag]:a..uuid[:tag]:b`` or a GTID set), a commit-time window, or GTIDs one by one. Each of the
table's row changes in them becomes its inverse — an insert a DELETE, a delete an INSERT of the
before image, an update an UPDATE back to the before image — keyed by the primary key the table had
(no key: every column, NULL-safe, ``LIMIT 1``), in reverse binlog order, values from silver's images
(:mod:`binlake.history.literals`). Optionally wrapped in one transaction.

Refused (:class:`SchemaChangeError`, :class:`CoverageGapError`, :class:`HistoryError`): DDL on the
table or a TRUNCATE between the first and the last transaction (the undo would run against other
columns), GTIDs of the range the archive lacks or a GAP that reconciliation found inside it, images
that lack columns (``binlog_row_image`` MINIMAL / NOBLOB: the before image cannot be put back), a
partial JSON update. Warned: later transactions that changed the same rows — running the undo would
overwrite what they did (each is named with the key it touched).
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from binlake.config import BinlakeConfig
from binlake.gold.schema_history import Coordinates, SchemaVersion, TableSchema, build_history
from binlake.gold.state import StreamItem, lineage
from binlake.gold.types import rendering_of
from binlake.history.asof import BLOCKING, schema_at
from binlake.history.errors import CoverageGapError, HistoryError, MomentError, SchemaChangeError
from binlake.history.literals import SESSION_SETUP, identifier, literal
from binlake.history.moments import GtidMembership, Transaction, binlog_order, parse_time
from binlake.history.reads import load_ddl, load_reconciliation, load_stream, load_transactions
from binlake.reconcile.coverage import GtidTextError, parse_mariadb_gtid


@dataclass(frozen=True)
class Selection:
    """Which transactions to undo: ``kind`` ``gtid-range``, ``time`` or ``transactions``."""

    kind: str
    text: str
    gtids: frozenset[str] = frozenset()
    start: _dt.datetime | None = None
    end: _dt.datetime | None = None
    mariadb_range: tuple[int, int, int] | None = None  # domain, first seq, last seq
    members: GtidMembership | None = None

    def includes(self, txn: Transaction) -> bool:
        if self.kind == "time":
            return txn.commit_time is not None and self._in_window(txn.commit_time)
        if self.kind == "transactions":
            return txn.gtid in self.gtids
        if self.mariadb_range is not None:
            domain, first, last = self.mariadb_range
            try:
                d, _server, seq = parse_mariadb_gtid(txn.gtid or "")
            except GtidTextError:
                return False
            return d == domain and first <= seq <= last
        return self.members is not None and self.members.contains(txn.gtid)

    def _in_window(self, moment: _dt.datetime) -> bool:
        return (self.start is None or moment >= self.start) and (self.end is None or moment <= self.end)

    def __str__(self) -> str:
        return f"{self.kind} {self.text}"


def gtid_range(text: str) -> Selection:
    """``A..B`` (both ends included) or a MySQL GTID set (``uuid:5-9``)."""
    first, sep, last = text.partition("..")
    if not sep:
        members = GtidMembership(text)
        if members.mariadb:
            raise MomentError(f"{text!r}: a MariaDB range is written first..last (0-1-5..0-1-9)")
        return Selection("gtid-range", text, members=members)
    try:
        a, b = parse_mariadb_gtid(first), parse_mariadb_gtid(last)
    except GtidTextError:
        a = b = None  # type: ignore[assignment]
    if a is not None and b is not None:
        if a[0] != b[0] or a[2] > b[2]:
            raise MomentError(f"{text!r}: a range's ends must be of one domain, first <= last")
        return Selection("gtid-range", text, mariadb_range=(a[0], a[2], b[2]))
    sid_a, _, gno_a = first.strip().rpartition(":")
    sid_b, _, gno_b = last.strip().rpartition(":")
    if sid_a.lower() != sid_b.lower() or not (gno_a.isdigit() and gno_b.isdigit()) or int(gno_a) > int(gno_b):
        raise MomentError(f"{text!r}: a range is GTID..GTID of one server (uuid[:tag]:a..uuid[:tag]:b, d-s-a..d-s-b)")
    return Selection("gtid-range", text, members=GtidMembership(f"{sid_a}:{gno_a}-{gno_b}"))


def time_window(start: str | None, end: str | None) -> Selection:
    if start is None and end is None:
        raise MomentError("a time window needs --from-time, --to-time or both")
    return Selection("time", f"{start or '...'} .. {end or '...'}", start=parse_time(start) if start else None,
                     end=parse_time(end) if end else None)


def transactions(gtids: Sequence[str]) -> Selection:
    return Selection("transactions", ", ".join(gtids), gtids=frozenset(g.strip() for g in gtids))


@dataclass
class Conflict:
    """A transaction after the range that changed a row the undo changes back."""

    gtid: str | None
    at: Coordinates
    key: tuple[Any, ...]
    inside: bool = False  # between two chosen transactions (a --transaction pick), not after the range

    def __str__(self) -> str:
        where = "between the chosen transactions" if self.inside else "after the range"
        return (f"{where}, {self.gtid or 'a transaction without GTID'} at {self.at.file}:{self.at.pos} changed "
                f"the row {self.key!r}")


@dataclass
class Undo:
    """The undo statements (reverse binlog order) and what the caller must be told."""

    source: str
    db: str
    table: str
    selection: Selection
    undone: list[Transaction]
    statements: list[str]
    conflicts: list[Conflict] = field(default_factory=list)

    def script(self, single_transaction: bool = False) -> str:
        """The statements as one SQL script (session setup first; optionally one transaction)."""
        body = [*SESSION_SETUP, *(["START TRANSACTION"] if single_transaction else []), *self.statements,
                *(["COMMIT"] if single_transaction else [])]
        return "".join(s + ";\n" for s in body)


def _missing_in_range(selection: Selection, chosen: Sequence[Transaction]) -> list[str]:
    """GTIDs a range names that the archive does not hold (a MariaDB range: each seq; a MySQL set:
    each GNO), at most a few spelled out."""
    have = {t.gtid for t in chosen}
    if selection.mariadb_range is not None:
        domain, first, last = selection.mariadb_range
        seqs = {parse_mariadb_gtid(g)[2] for g in have if g}
        return [f"{domain}-*-{s}" for s in range(first, last + 1) if s not in seqs][:5]
    if selection.members is not None:
        out = []
        for sid, tag, a, b in selection.members.intervals.iter_intervals():
            prefix = f"{sid}:{tag}:" if tag else f"{sid}:"
            out += [f"{prefix}{g}" for g in range(a, min(b, a + 10_000) + 1)
                    if f"{prefix}{g}" not in {x.lower() for x in have if x}]
        return out[:5]
    return [g for g in sorted(selection.gtids) if g not in have][:5]


def check_range_coverage(reconciliation: Sequence[dict[str, Any]] | None, first: str, last: str,
                         source: str) -> None:
    """Refuse when reconciliation found transactions missing between files ``first`` and ``last``."""
    if reconciliation is None:
        raise CoverageGapError(f"meta.gtid_reconciliation does not exist: the coverage of source {source} was never "
                               "checked (run the nightly's reconcile step first)")
    index = {r["file"]: r["chain_index"] for r in reconciliation}
    if first not in index or last not in index:
        raise CoverageGapError(f"meta.gtid_reconciliation has not checked files {first}..{last} of source {source}")
    for row in reconciliation:
        if index[first] < row["chain_index"] <= index[last] and row["status"] in BLOCKING:
            raise CoverageGapError(f"the range crosses a {row['status']} of source {source} before file "
                                   f"{row['file']} (missing: {row.get('missing_gtids') or row.get('detail')})")


def _ddl_inside(history: Sequence[SchemaVersion], key: tuple[str, str], first: Transaction,
                last: Transaction) -> SchemaVersion | None:
    inside = [v for v in history if (v.db, v.table) == key or v.renamed_from == key]
    return next((v for v in inside if first.start <= v.at < last.end), None)


def choose(cfg: BinlakeConfig, source: str, selection: Selection) -> list[Transaction]:
    """The archived transactions ``selection`` picks, in binlog order; refusals for none / holes."""
    ordered = binlog_order(load_transactions(cfg, source))
    chosen = [t for t in ordered if selection.includes(t)]
    if not chosen:
        raise HistoryError(f"no archived transaction of source {source} matches {selection}")
    missing = _missing_in_range(selection, chosen)
    if missing:
        raise CoverageGapError(f"{selection} names transactions the archive of source {source} does not hold: "
                               f"{', '.join(missing)}")
    return chosen


class _Images:
    """One table's row images as ``{column: raw silver value}`` in the schema's names, with the
    TABLE_MAP in effect (it says how the decoder rendered each value)."""

    def __init__(self, schema: TableSchema, db: str, table: str) -> None:
        self.schema, self.name = schema, f"{db}.{table}"
        self.table_map: list[dict[str, Any]] = []

    def image(self, text: str | None, item: StreamItem) -> dict[str, tuple[Any, Any]] | None:
        """``{column name: (raw value, rendering)}``; None for no image."""
        if text is None:
            return None
        raw = json.loads(text)
        if len(self.table_map) != len(self.schema.columns):
            raise SchemaChangeError(f"{self.name}: the TABLE_MAP at {item.at.file}:{item.at.pos} has "
                                    f"{len(self.table_map)} columns, the schema {len(self.schema.columns)}")
        out = {}
        for tm_column, column in zip(self.table_map, self.schema.columns):
            if str(tm_column["name"]) in raw:
                out[column.name] = (raw[str(tm_column["name"])], rendering_of(tm_column))
        return out

    def full(self, image: dict[str, tuple[Any, Any]], item: StreamItem, which: str) -> dict[str, tuple[Any, Any]]:
        lacking = [c.name for c in self.schema.columns if c.name not in image]
        if lacking:
            raise HistoryError(f"{self.name}: the {which} image of {item.gtid} at {item.at.file}:{item.at.pos} lacks "
                               f"{', '.join(lacking[:5])} (binlog_row_image MINIMAL / NOBLOB): the undo needs FULL images")
        return image

    def key_columns(self) -> tuple[str, ...]:
        return self.schema.primary_key or tuple(c.name for c in self.schema.columns)


def _values(images: _Images, image: dict[str, tuple[Any, Any]], names: Sequence[str]) -> list[str]:
    by_name = {c.name: c for c in images.schema.columns}
    return [literal(image[n][0], by_name[n], image[n][1]) for n in names]


def _where(images: _Images, image: dict[str, tuple[Any, Any]]) -> str:
    names = images.key_columns()
    values = _values(images, image, names)
    if images.schema.primary_key:
        return " AND ".join(f"{identifier(n)} = {v}" for n, v in zip(names, values))
    return " AND ".join(f"{identifier(n)} <=> {v}" for n, v in zip(names, values)) + " LIMIT 1"


def inverse(images: _Images, item: StreamItem, target: str) -> str:
    """The statement undoing one row change."""
    before = images.image(item.before_json, item)
    after = images.image(item.after_json, item)
    writable = [c.name for c in images.schema.columns if not c.generated]
    if before is None and after is not None:  # an insert: delete the row it made
        return f"DELETE FROM {target} WHERE {_where(images, images.full(after, item, 'after'))}"
    if before is not None and after is None:  # a delete: put the row back
        full = images.full(before, item, "before")
        return (f"INSERT INTO {target} ({', '.join(identifier(n) for n in writable)}) "
                f"VALUES ({', '.join(_values(images, full, writable))})")
    assert before is not None and after is not None
    full = images.full(before, item, "before")
    current = {**full, **after}  # the row as the update left it
    sets = ", ".join(f"{identifier(n)} = {v}" for n, v in zip(writable, _values(images, full, writable)))
    return f"UPDATE {target} SET {sets} WHERE {_where(images, current)}"


def _key(images: _Images, image: dict[str, tuple[Any, Any]] | None) -> tuple[Any, ...] | None:
    if image is None or any(n not in image for n in images.key_columns()):
        return None
    return tuple(image[n][0] for n in images.key_columns())


def _statements(items: Sequence[StreamItem], images: _Images, chosen: Sequence[Transaction],
                target: str) -> tuple[list[str], set[tuple[Any, ...]], list[Conflict]]:
    """The inverse of every row change of ``chosen`` (binlog order), the keys they leave, and the
    transactions in between (not chosen) that changed one of those rows after a chosen one did."""
    spans = [(t.start, t.end) for t in chosen]
    out: list[str] = []
    keys: set[tuple[Any, ...]] = set()
    between: list[Conflict] = []
    for item in items:
        if item.kind == "table_map":
            images.table_map = json.loads(item.fields or "{}").get("columns") or []
            continue
        if not any(start <= item.at < end for start, end in spans):
            if keys:
                between.extend(_conflicts([item], images, keys, inside=True))
            continue
        out.append(inverse(images, item, target))
        before = images.image(item.before_json, item)
        after = images.image(item.after_json, item)
        for key in (_key(images, before), _key(images, {**(before or {}), **(after or {})} if after else None)):
            if key is not None:
                keys.add(key)
    return out, keys, list({c.gtid: c for c in reversed(between)}.values())[::-1]


def _conflicts(later: Sequence[StreamItem], images: _Images, keys: set[tuple[Any, ...]],
               inside: bool = False) -> list[Conflict]:
    """The later transactions whose row changes read or wrote one of ``keys`` (first change each)."""
    found: dict[str | None, Conflict] = {}
    for item in later:
        if item.kind == "table_map":
            images.table_map = json.loads(item.fields or "{}").get("columns") or []
            continue
        try:
            before, after = images.image(item.before_json, item), images.image(item.after_json, item)
        except HistoryError:
            continue  # another shape later: its keys cannot be compared (the DDL check names it)
        for key in (_key(images, before), _key(images, after)):
            if key is not None and key in keys and item.gtid not in found:
                found[item.gtid] = Conflict(item.gtid, item.at, key, inside)
    return list(found.values())


def flashback(cfg: BinlakeConfig, source: str, db: str, table: str, selection: Selection, *,
              coverage_check: bool = True) -> Undo:
    """The undo of ``selection``'s changes to ``db.table`` of ``source`` (see the module doc)."""
    chosen = choose(cfg, source, selection)
    first, last = chosen[0], chosen[-1]
    if coverage_check:
        check_range_coverage(load_reconciliation(cfg, source), first.file, last.file, source)
    history = build_history(load_ddl(cfg, source))
    ddl = _ddl_inside(history, (db, table), first, last)
    if ddl is not None:
        what = "TRUNCATE" if ddl.truncated else "DDL"
        raise SchemaChangeError(f"{db}.{table}: {what} at {ddl.at.file}:{ddl.at.pos} inside {selection} "
                                f"(`{' '.join(ddl.statement.split())[:200]}`): the undo would run against "
                                "another table shape; undo the ranges before and after it separately")
    line = lineage([v for v in history if v.at < first.start], (db, table))
    start = Coordinates(first.file_seq, first.start_pos - 1, file="")
    items = load_stream(cfg, source, line.segments, after=start, until=last.end)
    schema = schema_at(line.versions, items, db, table)
    images = _Images(schema, db, table)
    target = f"{identifier(db)}.{identifier(table)}"
    statements, keys, between = _statements(items, images, chosen, target)
    if not statements:
        raise HistoryError(f"{selection} made no row change to {db}.{table} of source {source} "
                           f"({len(chosen)} transaction(s) chosen)")
    later = load_stream(cfg, source, lineage(history, (db, table)).segments, after=last.end)
    return Undo(source, db, table, selection, chosen, statements[::-1], between + _conflicts(later, images, keys))
