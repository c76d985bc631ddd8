"""A source table's rows as they were at a moment (``binlake asof``), typed like its gold table.

How: the moment becomes a cut (:func:`binlake.history.moments.resolve`: the last transaction it
includes); the coverage check refuses when reconciliation found a GAP or a broken chain at or before
the cut's file; the schema history is gold's (``binlake.gold.schema_history.build_history`` over the
same DDL), cut at the same place, so the table has the columns it had then and its lineage (rows
renamed into it) is the one it had then. Then, from the nearest state (:func:`_plan`: the one that
reads the fewest rows): gold's own replayer (``binlake.gold.state``) replays the table's TABLE_MAPs
and row changes up to the cut; or gold's table, as its last run left it, has the later changes taken
back (:mod:`binlake.history.unapply`); or gold's ``__history`` table gives the versions valid at the
cut. Same conversions as gold: a moment at the archive's end gives exactly the gold table's rows.

Refusals (each names what and where): the moment is outside the archive or no point of it
(:class:`MomentError`); a GAP / CHAIN_BREAK in ``meta.gtid_reconciliation`` up to the cut, or the file
not reconciled (:class:`CoverageGapError`); DDL binlake cannot follow up to the cut — a statement
whose effect on the columns is unknown (:class:`SchemaChangeError`); the table did not exist then.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from binlake.config import BinlakeConfig
from binlake.gold.schema_history import Coordinates, SchemaVersion, TableSchema, build_history
from binlake.gold.state import StreamItem, TableReplayer, best_table_map, final_schema, lineage
from binlake.history.errors import CoverageGapError, HistoryError, SchemaChangeError
from binlake.history.moments import Moment, Transaction, resolve
from binlake.history.reads import load_ddl, load_reconciliation, load_stream, load_transactions

#: reconciliation findings that mean transactions before a file are missing from the archive
BLOCKING = ("GAP", "CHAIN_BREAK")


@dataclass
class AsOf:
    """The answer: the table's columns and rows (copies of identical rows repeated, as SELECT shows
    them) at ``cut``, the schema they have, how they were computed, and what the replay warned."""

    source: str
    db: str
    table: str
    moment: Moment
    cut: Transaction
    schema: TableSchema
    columns: list[str]
    rows: list[tuple[Any, ...]]
    method: str
    changes: int = 0
    warnings: dict[str, int] = field(default_factory=dict)


def check_coverage(reconciliation: Sequence[dict[str, Any]] | None, last_file: str, source: str) -> None:
    """Refuse when ``meta.gtid_reconciliation`` found transactions missing at or before ``last_file``
    (a GAP or CHAIN_BREAK there), or never checked that file."""
    if reconciliation is None:
        raise CoverageGapError(f"meta.gtid_reconciliation does not exist: the coverage of source {source} was never "
                               "checked (run the nightly's reconcile step first)")
    mine = {r["file"]: r for r in reconciliation}
    if last_file not in mine:
        raise CoverageGapError(f"meta.gtid_reconciliation has not checked file {last_file} of source {source} "
                               "(run the reconcile step after the ingest)")
    limit = mine[last_file]["chain_index"]
    for row in sorted(reconciliation, key=lambda r: r["chain_index"]):
        if row["chain_index"] <= limit and row["status"] in BLOCKING:
            missing = row.get("missing_gtids") or ", ".join(row.get("missing_files") or ()) or row.get("detail")
            raise CoverageGapError(f"the archive of source {source} has a {row['status']} before file {row['file']} "
                                   f"(missing: {missing}): changes up to {last_file} are not all archived")


def _check_followable(versions: Sequence[SchemaVersion], db: str, table: str) -> None:
    for version in versions:
        if version.schema is None and version.warning:
            raise SchemaChangeError(
                f"{db}.{table}: DDL binlake cannot follow at {version.at.file}:{version.at.pos} "
                f"({version.warning}): `{' '.join(version.statement.split())[:200]}`")


def schema_at(versions: Sequence[SchemaVersion], items: Sequence[StreamItem], db: str, table: str) -> TableSchema:
    """The table's schema at the cut: its last DDL version, else its best TABLE_MAP (a table created
    before the archive); :class:`HistoryError` when it did not exist then."""
    final = final_schema(versions, None)
    if final is None and versions and versions[-1].schema is None and versions[-1].warning is None:
        gone = versions[-1]
        raise HistoryError(f"{db}.{table} did not exist at that moment: dropped (or renamed away) at "
                           f"{gone.at.file}:{gone.at.pos} by `{' '.join(gone.statement.split())[:200]}`")
    if final is None:
        maps = [(i.at, json.loads(i.fields or "{}")) for i in items if i.kind == "table_map"]
        final = final_schema(versions, best_table_map(maps))
    if final is None:
        raise HistoryError(f"{db}.{table} is unknown at that moment: no CREATE TABLE and no row change of it "
                           "in the archive up to there")
    return final


def replay_to(source: str, versions: Sequence[SchemaVersion], final: TableSchema,
              items: Sequence[StreamItem]) -> tuple[list[tuple[Any, ...]], TableReplayer]:
    """Gold's replay of ``items`` (the table's stream up to the cut): the rows, copies repeated."""
    replayer = TableReplayer(source, versions, final)
    replayer.feed_all(items)
    width = len(final.columns)
    rows: list[tuple[Any, ...]] = []
    for row in replayer.rows():
        copies = 1 if final.primary_key else int(row[-1])
        rows.extend([tuple(row[:width])] * copies)
    return rows, replayer


@dataclass(frozen=True)
class _Plan:
    """Where the answer starts: gold's table taken back (``gold``), gold's ``__history`` table read at
    the cut (``versions``) or the archive's start (neither), and why."""

    why: str
    gold: Any = None  # binlake.history.unapply.GoldState
    versions: Any = None


STARTS = ("nearest", "replay", "gold", "history")


def _gold_usable(cfg: BinlakeConfig, source: str, key: tuple[str, str], cut: Transaction,
                 versions_then: Sequence[SchemaVersion], history: Sequence[SchemaVersion]) -> tuple[Any, int, int]:
    """Gold's state, and the row changes before the cut and after it up to gold's mark; raises
    :class:`~binlake.history.unapply.Unusable` saying why gold's tables cannot serve this moment."""
    from binlake.history.reads import count_changes
    from binlake.history.unapply import Unusable, ddl_between, gold_state

    now = lineage(history, key)
    if now.segments != lineage(versions_then, key).segments:
        raise Unusable("the table was renamed or re-created after the moment")
    ddl = ddl_between(now.versions, cut.end, Coordinates(1 << 62, 0))
    if ddl is not None:
        raise Unusable(f"DDL after the moment at {ddl.at.file}:{ddl.at.pos}: `{' '.join(ddl.statement.split())[:120]}`")
    if final_schema(versions_then, None) is None:
        raise Unusable("the table's schema comes from TABLE_MAPs only")
    state = gold_state(cfg, source, *key)
    before, after, missing = count_changes(cfg, source, now.segments, cut.end, state.through)
    if missing:
        raise Unusable(f"gold.{state.name} is behind the moment: {missing} row change(s) after its last run's "
                       f"{state.through.file}:{state.through.pos}")
    return state, before, after


def _plan(cfg: BinlakeConfig, source: str, key: tuple[str, str], cut: Transaction, versions_then: Sequence[SchemaVersion],
          history: Sequence[SchemaVersion], start: str) -> _Plan:
    """The nearest state: a replay from the start (the row changes before the cut), gold's table
    taken back (its rows plus the changes after the cut) or its ``__history`` table (its versions),
    whichever reads fewer rows. ``start`` forces one (``replay`` / ``gold`` / ``history``; the last
    two raise :class:`~binlake.history.unapply.Unusable` when they cannot serve)."""
    from binlake.history.unapply import Unusable, gold_state

    if start not in STARTS:
        raise HistoryError(f"start from {start!r}? {', '.join(STARTS)}")
    if start == "replay":
        return _Plan("asked for a replay from the start")
    try:
        state, before, after = _gold_usable(cfg, source, key, cut, versions_then, history)
        versions = None
        if start != "gold":
            try:
                versions = gold_state(cfg, source, *key, suffix="__history")
            except Unusable:
                if start == "history":
                    raise
    except Unusable as exc:
        if start != "nearest":
            raise Unusable(f"{key[0]}.{key[1]}: gold's state cannot serve: {exc}") from None
        return _Plan(f"gold's state cannot serve: {exc}")
    costs = {"replay": before, "gold": state.rows + after, "history": versions.rows if versions else 1 << 62}
    best = start if start != "nearest" else min(costs, key=lambda k: costs[k])
    others = f"a replay from the start works through {before} row change(s), gold.{state.name} has {state.rows} " \
             f"row(s) and {after} later change(s) to take back" + (
                 f", gold.{versions.name} {versions.rows} version(s)" if versions else "")
    if best == "gold":
        return _Plan(f"took back {after} later row change(s) from gold.{state.name} ({others})", state)
    if best == "history" and versions is not None:
        return _Plan(f"read the versions valid then from gold.{versions.name} ({others})", versions=versions)
    return _Plan(f"nearest start: the archive's ({others})")


def _from_gold(cfg: BinlakeConfig, source: str, plan: _Plan, cut: Transaction, versions: Sequence[SchemaVersion],
               segments: Sequence[Any], key: tuple[str, str], file_seq: dict[str, int]
               ) -> tuple[TableSchema, list[tuple[Any, ...]], int]:
    from binlake.history.unapply import read_gold, take_back, versions_at

    final = schema_at(versions, (), *key)
    if plan.versions is not None:
        return final, versions_at(cfg, plan.versions, final, cut.end, file_seq), 0
    state = plan.gold
    after = Coordinates(cut.file_seq, cut.end_pos - 1, file="")
    through = state.through
    until = Coordinates(through.file_seq, through.pos, through.payload_index, through.row_index + 1, through.file)
    items = load_stream(cfg, source, segments, after=after, until=until)
    rows = take_back(final, read_gold(cfg, state, final), items)
    return final, rows, sum(1 for i in items if i.kind == "row")


def table_as_of(cfg: BinlakeConfig, source: str, db: str, table: str, moment: Moment, *,
                coverage_check: bool = True, start: str = "nearest") -> AsOf:
    """``db.table`` of ``source`` at ``moment`` (see the module doc for how and the refusals);
    ``start``: ``nearest`` (the nearest state), ``replay``, ``gold`` or ``history`` (see :func:`_plan`)."""
    transactions = load_transactions(cfg, source)
    cut = resolve(moment, transactions, source)
    if coverage_check:
        check_coverage(load_reconciliation(cfg, source), cut.file, source)
    everything = build_history(load_ddl(cfg, source))
    history = [v for v in everything if v.at < cut.end]
    line = lineage(history, (db, table))
    _check_followable(line.versions, db, table)
    plan = _plan(cfg, source, (db, table), cut, history, everything, start)
    if plan.gold is not None or plan.versions is not None:
        from binlake.history.unapply import Unusable

        try:
            file_seq = {t.file: t.file_seq for t in transactions}
            final, rows, changes = _from_gold(cfg, source, plan, cut, line.versions, line.segments, (db, table),
                                              file_seq)
        except Unusable as exc:
            if start != "nearest":
                raise
            plan = _Plan(f"gold's state cannot serve: {exc}")
    warnings: dict[str, int] = {}
    if plan.gold is None and plan.versions is None:
        items = load_stream(cfg, source, line.segments, until=cut.end)
        final = schema_at(line.versions, items, db, table)
        rows, replayer = replay_to(source, line.versions, final, items)
        changes, warnings = replayer.report.changes, dict(replayer.report.warnings)
    rows.sort(key=repr)
    how = plan.why if plan.gold or plan.versions else f"{plan.why}; replayed {changes} row change(s) from the archive's start"
    return AsOf(source, db, table, moment, cut, final, [c.name for c in final.columns], rows, how, changes, warnings)
