"""Replay one source table's row changes, in binlog order, into its current state (pure).

Why a full, ordered replay per table (and not a per-key "latest change wins" merge): MINIMAL /
NOBLOB images carry only some columns, and a primary-key change moves a row to another key, so
a key's state depends on earlier changes of possibly other keys. Replaying the table's whole
history from silver makes the result depend only on *which* changes silver holds, never on the
order or number of runs that put them there: re-runs, out-of-order backfills and a run killed
halfway all end in the same state. The Spark job runs one replay per table on an executor.

Inputs are :class:`StreamItem` s (TABLE_MAPs and row changes, sorted by :class:`Coordinates`)
and the table's :class:`SchemaVersion` s; the output is one tuple per current row in the
order of :attr:`TableReplayer.output_columns`.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from binlake.gold.errors import ConversionError
from binlake.gold.schema_history import Coordinates, SchemaVersion, TableKey, TableSchema
from binlake.gold.seed import SeedTable, SnapshotPosition, silver_form
from binlake.gold.types import (
    PartialJsonUpdate,
    Rendering,
    column_from_table_map,
    convert_value,
    default_value,
    rendering_of,
    spark_type,
)

META_COLUMNS = ("_source", "_op", "_gtid", "_commit_time", "_binlog_file", "_binlog_pos",
                "_binlog_payload_index", "_binlog_row_index")
COPIES_COLUMN = "_copies"  # tables without a primary key: identical rows are counted, not repeated
#: ``gold.<name>__history`` (SCD2): after the source columns, who made each version and who ended it
HISTORY_COLUMNS = ("_source", "_op", "_gtid", "_valid_from", "_valid_from_file", "_valid_from_pos",
                   "_valid_from_payload_index", "_valid_from_row_index", "_valid_to", "_valid_to_gtid",
                   "_valid_to_file", "_valid_to_pos", "_valid_to_payload_index", "_valid_to_row_index",
                   "_ended_by", "_is_current")


@dataclass(frozen=True)
class StreamItem:
    """A TABLE_MAP (``kind='table_map'``, ``fields`` = its JSON) or a row change (``kind='row'``)."""

    at: Coordinates
    kind: str
    fields: str | None = None
    operation: str | None = None
    #: ``silver.row_changes.before`` / ``after``: each image's typed JSON text (None: no image)
    before_json: str | None = None
    after_json: str | None = None
    gtid: str | None = None
    commit_time: _dt.datetime | None = None


@dataclass
class _Version:
    """One version of a row (SCD2): its values from ``start`` (META_COLUMNS values of the change
    that made it) until ``end`` (the change that ended it; None while current)."""

    values: dict[str, Any]
    start: tuple[Any, ...]
    end: tuple[Any, ...] | None = None
    ended_by: str | None = None


@dataclass
class _Row:
    values: dict[str, Any]
    meta: tuple[Any, ...]
    copies: int = 1
    versions: list[_Version] = field(default_factory=list)  # open versions, one per copy (history on)


@dataclass
class ReplayReport:
    """What the replay could not do, counted per reason (becomes ``meta.gold_status.warnings``)."""

    warnings: Counter[str] = field(default_factory=Counter)
    changes: int = 0
    in_snapshot: int = 0  # row changes skipped: their transaction is already in the seed snapshot
    seeded: int = 0  # rows the seed snapshot gave the table
    last: tuple[Any, ...] | None = None  # META_COLUMNS values of the latest change fed (deletes too)


def schema_from_table_map(fields: dict[str, Any]) -> TableSchema:
    """The schema a TABLE_MAP alone gives (``@N`` names without FULL metadata)."""
    columns = tuple(column_from_table_map(c) for c in fields["columns"])
    return TableSchema(columns, tuple(fields.get("primary_key") or ()))


class TableReplayer:
    """Current state of one table, fed in binlog order."""

    def __init__(self, source: str, versions: Sequence[SchemaVersion], final: TableSchema,
                 history: bool = False, snapshot: SnapshotPosition | None = None) -> None:
        self.source = source
        self.snapshot = snapshot
        self._history: list[_Version] | None = [] if history else None
        self.versions = sorted(versions, key=lambda v: v.at)
        self.final = final
        self.report = ReplayReport()
        self._next_version = 0
        self._schema: TableSchema | None = None
        self._schema_from_map = False
        self._table_map: list[dict[str, Any]] | None = None
        self._by_key: dict[tuple[Any, ...], _Row] = {}
        #: when a set: every key a change removed or stored is added (the incremental path MERGEs them)
        self.touched: set[tuple[Any, ...]] | None = None

    @property
    def key_columns(self) -> tuple[str, ...]:
        """The current schema's primary key; all its columns when it has none (full-row identity)."""
        schema = self._schema or self.final
        return schema.primary_key or tuple(c.name for c in schema.columns)

    def feed_all(self, items: Iterable[StreamItem]) -> None:
        for item in items:
            self.feed(item)
        self._advance_schema(None)

    def feed(self, item: StreamItem) -> None:
        self._advance_schema(item.at)
        if item.kind == "table_map":
            fields = json.loads(item.fields or "{}")
            self._table_map = fields.get("columns") or []
            if self._schema is None or self._schema_from_map:
                self._schema_from_map = True
                self.report.warnings["schema from TABLE_MAPs only (no DDL / seed)"] += 1
                # the final schema is the best-informed TABLE_MAP of this shape: convert with it
                same_shape = len(self._table_map) == len(self.final.columns)
                self._schema = self.final if same_shape else schema_from_table_map(fields)
            return
        if self.snapshot is not None and self.snapshot.contains(item.gtid):
            self.report.in_snapshot += 1
            return
        self.report.changes += 1
        try:
            self._apply(item)
        except ConversionError as exc:
            self.report.warnings[f"row change not applied: {exc}"] += 1

    def resume(self, context: Iterable[StreamItem], rows: Iterable[Sequence[Any]]) -> None:
        """Start where an earlier replay of the table stopped, holding ``rows`` (its current rows as
        the gold table holds them, in :attr:`output_columns` order): the incremental path.

        ``context`` is the last TABLE_MAP that replay saw; it and every schema version are passed
        through as that replay did (it applied every version at its end), then the report is reset,
        because that replay counted their warnings already. Each row re-opens its current SCD2
        version (values and start = the row's last change), exactly as that replay left it open.
        Raises :class:`ConversionError` when the state is not one a replay could hold (a TABLE_MAP
        of another shape than the gold table's): the caller replays the table in full instead.
        """
        for item in context:
            self.feed(item)
        self._advance_schema(None)
        if self._schema != self.final:
            raise ConversionError("the last TABLE_MAP before the new changes has another shape than the gold table")
        self.report = ReplayReport()
        names = [c.name for c in self.final.columns]
        width = len(names)
        for held in rows:
            values = dict(zip(names, held[:width]))
            meta = tuple(held[width:width + len(META_COLUMNS)])
            self._by_key[self._key(values)] = row = _Row(values, meta)
            self._open(row, meta)

    def keys_touched_by(self, item: StreamItem) -> list[tuple[Any, ...]]:
        """Every key :meth:`feed` may read or write for ``item`` (a superset), from its images alone.

        ``_apply`` looks a row up by the before image's key and stores the result under the key of
        (the row found, or the DDL defaults) with the after image on top; the row found has the
        before image's key, so both candidates are computable without the state. Why: the Spark job
        fetches just these keys' rows from the gold table before an incremental replay, and a key
        outside this set is neither read nor changed by the replay.
        """
        if item.kind != "row" or (self.snapshot is not None and self.snapshot.contains(item.gtid)):
            return []
        self._advance_schema(item.at)
        keys: list[tuple[Any, ...]] = []
        names = self.key_columns
        try:  # only the key columns are converted: cheap, and a superset all the same
            before, after = self._image(item.before_json, names), self._image(item.after_json, names)
            if before is not None:
                keys.append(self._key(before))
            if after is not None:
                bases = [] if before is None else [before]
                columns = self._schema.columns if self._schema else ()
                bases.append({c.name: default_value(c) for c in columns if c.name in names})
                keys.extend(self._key({**base, **after}) for base in bases)
        except ConversionError:
            pass  # feed() fails on the same conversion before it touches any row
        return keys

    def seed(self, seed: SeedTable) -> None:
        """Start from a snapshot's rows (before any archived change): the schema the seed's
        CREATE TABLE gave (versions before the archive) converts them."""
        self._advance_schema(Coordinates(-1, 1 << 62))
        if self._schema is None:
            self.report.warnings["seed rows for a table whose schema is unknown"] += len(seed.rows)
            return
        columns = list(self._schema.columns)
        by_name = {c.name.casefold(): c for c in columns}
        meta = (self.source, "snapshot", None, None, None, None, None, None)
        for raw in seed.rows:
            names = seed.columns or tuple(c.name for c in columns)
            try:
                if len(raw) != len(names):
                    raise ConversionError(f"seed row has {len(raw)} values for {len(names)} columns")
                values = {c.name: default_value(c) for c in columns}
                for name, value in zip(names, raw):
                    column = by_name[name.casefold()]
                    values[column.name] = convert_value(silver_form(value, spark_type(column) == "BINARY"), column)
            except (ConversionError, KeyError) as exc:
                self.report.warnings[f"seed row not applied: {exc}"] += 1
                continue
            self.report.seeded += 1
            self._insert(values, meta)

    # -- schema versions -------------------------------------------------------------------
    def _advance_schema(self, at: Coordinates | None) -> None:
        while self._next_version < len(self.versions) and (
                at is None or self.versions[self._next_version].at <= at):
            version = self.versions[self._next_version]
            self._next_version += 1
            if version.warning:
                self.report.warnings[f"schema v{version.version}: {version.warning}"] += 1
            self._migrate(version)

    def _migrate(self, version: SchemaVersion) -> None:
        """Carry current rows into the new version: renames, DDL defaults for added columns."""
        new = version.schema
        self._schema_from_map = False
        if version.truncated:  # TRUNCATE TABLE: every row goes, the schema stays
            self._end_all(version.at, "truncate table")
        if new is None:
            if version.warning is None:  # DROP TABLE / renamed away: the rows are gone
                self._end_all(version.at, "drop table")
            self._schema = None
            return
        old_names = {c.name.casefold() for c in self._schema.columns} if self._schema else set()
        renames = {o.casefold(): n for o, n in version.renames}
        added = [c for c in new.columns if c.name.casefold() not in old_names
                 and c.name not in renames.values()]
        for row in self._by_key.values():
            values = {renames.get(k.casefold(), k): v for k, v in row.values.items()}
            for column in added:
                values[column.name] = default_value(column)
            keep = {c.name for c in new.columns}
            row.values = {k: v for k, v in values.items() if k in keep}
            for open_version in row.versions:  # open versions show what SELECT shows now
                open_version.values = row.values
        for closed in self._history or ():  # ended versions keep their values, under new names
            if closed.end is not None:
                closed.values = {renames.get(k.casefold(), k): v for k, v in closed.values.items()}
        self._schema = new
        rows = list(self._by_key.values())
        self._by_key = {}
        for row in rows:  # key columns may have been renamed, added or dropped
            self._by_key[self._key(row.values)] = row

    def _end_all(self, at: Coordinates, ended_by: str) -> None:
        """Every row ends at ``at`` (DROP TABLE, TRUNCATE TABLE): their open versions close there."""
        end = (self.source, None, None, None, at.file, at.pos,
               None if at.payload_index < 0 else at.payload_index, None)
        for row in self._by_key.values():
            self._close(row.versions, end, ended_by, len(row.versions))
            if self.touched is not None:
                self.touched.add(self._key(row.values))
        self._by_key.clear()

    # -- row changes -------------------------------------------------------------------------
    def _image(self, text: str | None, only: tuple[str, ...] | None = None) -> dict[str, Any] | None:
        """A silver JSON image as ``{schema column name: gold value}`` (carried columns only; of
        them, the ``only`` columns when given)."""
        if text is None:
            return None
        raw = json.loads(text)
        schema, table_map = self._schema, self._table_map or []
        if schema is None:
            raise ConversionError("the table's schema is unknown here (see schema warnings)")
        if len(table_map) != len(schema.columns):
            raise ConversionError(f"TABLE_MAP has {len(table_map)} columns, the schema "
                                  f"{len(schema.columns)}: the DDL in between is not in the archive")
        out: dict[str, Any] = {}
        for tm_column, column in zip(table_map, schema.columns):
            name = str(tm_column["name"])
            if name in raw and (only is None or column.name in only):
                rendering: Rendering = rendering_of(tm_column)
                out[column.name] = convert_value(raw[name], column, rendering)
        return out

    def _key(self, values: dict[str, Any]) -> tuple[Any, ...]:
        try:
            return tuple(values[name] for name in self.key_columns)
        except KeyError as exc:
            raise ConversionError(f"image lacks key column {exc.args[0]!r}") from None

    def _apply(self, item: StreamItem) -> None:
        meta = (self.source, item.operation, item.gtid, item.commit_time, item.at.file,
                item.at.pos, None if item.at.payload_index < 0 else item.at.payload_index,
                item.at.row_index)
        self.report.last = meta
        before, after = self._image(item.before_json), self._image(item.after_json)
        old = self._remove(before, meta) if before is not None else None
        if after is None:
            return
        if old is None:
            values = {c.name: default_value(c) for c in (self._schema.columns if self._schema else ())}
            if item.operation == "update":
                self.report.warnings["update of a row gold did not hold (archive starts later; no seed)"] += 1
        else:
            values = dict(old.values)
        for name, value in after.items():
            values[name] = value.apply(values.get(name)) if isinstance(value, PartialJsonUpdate) else value
        self._insert(values, meta)

    def _remove(self, before: dict[str, Any], meta: tuple[Any, ...]) -> _Row | None:
        key = self._key(before)
        row = self._by_key.get(key)
        if row is None:
            self.report.warnings["update/delete of a row gold did not hold"] += 1
            return None
        self._close(row.versions, meta, str(meta[1]), 1)
        if self.touched is not None:
            self.touched.add(key)
        if row.copies > 1:
            row.copies -= 1
            return _Row(dict(row.values), row.meta)
        return self._by_key.pop(key)

    def _insert(self, values: dict[str, Any], meta: tuple[Any, ...]) -> None:
        key = self._key(values)
        existing = self._by_key.get(key)
        if existing is not None and not self.final.primary_key:
            existing.copies += 1
            existing.meta = meta
            self._open(existing, meta)
            return
        if existing is not None:
            self.report.warnings["insert over an existing key (replaced)"] += 1
            self._close(existing.versions, meta, "replaced", len(existing.versions))
        self._by_key[key] = row = _Row(values, meta)
        self._open(row, meta)
        if self.touched is not None:
            self.touched.add(key)

    # -- SCD2 history ------------------------------------------------------------------------
    def _open(self, row: _Row, meta: tuple[Any, ...]) -> None:
        if self._history is not None:
            version = _Version(row.values, meta)
            row.versions.append(version)
            self._history.append(version)

    @staticmethod
    def _close(versions: list[_Version], end: tuple[Any, ...], ended_by: str, count: int) -> None:
        """End the ``count`` newest open versions (a no-key row's copies end one at a time)."""
        for _ in range(min(count, len(versions))):
            version = versions.pop()
            version.end, version.ended_by = end, ended_by

    def history_rows(self) -> Iterator[tuple[Any, ...]]:
        """Every version of every row, in :data:`HISTORY_COLUMNS` order after the final schema's
        columns, oldest first (empty unless the replayer was made with ``history=True``)."""
        names = [c.name for c in self.final.columns]
        for v in self._history or ():
            end = v.end or (None,) * len(META_COLUMNS)
            yield (*(v.values.get(n) for n in names), *v.start[:3], v.start[3], *v.start[4:],
                   end[3], end[2], *end[4:], v.ended_by, v.end is None)

    def held_keys(self) -> set[tuple[Any, ...]]:
        """The keys of the rows held now."""
        return set(self._by_key)

    def rows(self) -> Iterator[tuple[Any, ...]]:
        """The current rows in :attr:`output_columns` order (columns of the final schema)."""
        names = [c.name for c in self.final.columns]
        for row in self._by_key.values():
            extra = () if self.final.primary_key else (row.copies,)
            yield tuple(row.values.get(n) for n in names) + row.meta + extra


def best_table_map(candidates: Sequence[tuple[Coordinates, dict[str, Any]]]) -> dict[str, Any] | None:
    """Among a table's TABLE_MAPs (with where they were seen), the one that says most about
    the latest shape: same column count as the last one; FULL metadata first, then the most
    columns with a known charset / signedness, then the latest."""
    if not candidates:
        return None
    ordered = sorted(candidates, key=lambda c: c[0])
    width = len(ordered[-1][1].get("columns") or [])

    def score(entry: tuple[Coordinates, dict[str, Any]]) -> tuple[Any, ...]:
        columns = entry[1].get("columns") or []
        known = sum(1 for c in columns if c.get("charset") is not None or c.get("unsigned") is not None)
        return bool(entry[1].get("has_full_metadata")), known, entry[0]

    return max((c for c in ordered if len(c[1].get("columns") or []) == width), key=score)[1]


def final_schema(versions: Sequence[SchemaVersion], last_table_map: dict[str, Any] | None
                 ) -> TableSchema | None:
    """The schema gold's table has: the last DDL version, else what the best-informed
    TABLE_MAP (:func:`best_table_map`) says."""
    ordered = sorted(versions, key=lambda v: v.at)
    if ordered and ordered[-1].schema is not None:
        return ordered[-1].schema
    if ordered and ordered[-1].warning is None:
        return None  # dropped
    if last_table_map is not None:
        return schema_from_table_map(last_table_map)
    return None


# -- lineage: which source tables' row changes feed a gold table --------------------------------

@dataclass(frozen=True)
class Segment:
    """The row changes of source table ``(db, table)`` strictly after ``after`` and strictly
    before ``before`` (None: unbounded) feed the gold table."""

    db: str
    table: str
    after: Coordinates | None = None
    before: Coordinates | None = None

    @property
    def key(self) -> TableKey:
        return self.db, self.table


@dataclass(frozen=True)
class Lineage:
    """A gold table's segments (oldest first; the last is the table under its own name) and the
    schema versions its replay goes through, in history order."""

    segments: tuple[Segment, ...]
    versions: tuple[SchemaVersion, ...]

    @property
    def renamed(self) -> bool:
        """Rows came from another table (a RENAME TABLE / ALTER TABLE ... RENAME moved them here)."""
        return len(self.segments) > 1


def _gone(version: SchemaVersion) -> bool:
    """Dropped or renamed away (not: unknown, which keeps the rows)."""
    return version.schema is None and version.warning is None and not version.truncated


def lineage(history: Sequence[SchemaVersion], key: TableKey) -> Lineage:
    """Which row changes make up ``key``'s table as it is at the end of ``history``.

    Why: the server moves rows with a table's name (pt-online-schema-change and gh-ost fill a
    shadow table, then ``RENAME TABLE t TO _t_old, _t_new TO t``): after the swap, ``t`` holds the
    rows the shadow table held, and the old ``t``'s rows went to ``_t_old``. So walking ``key``'s
    versions back from the end: the latest version that renamed rows here (``renamed_from``) starts
    the last segment, and the table they came from is followed the same way, up to that statement;
    the latest DROP (or rename away) before it starts the table afresh. ``history`` is in the order
    the tracker applied it (a multi-pair RENAME's records share its coordinates).
    """
    return _lineage(history, key, len(history), None)


def _lineage(history: Sequence[SchemaVersion], key: TableKey, end: int, end_at: Coordinates | None) -> Lineage:
    mine = [i for i in range(end) if (history[i].db, history[i].table) == key]
    if end_at is not None and mine and _gone(history[mine[-1]]) and history[mine[-1]].at == end_at:
        mine.pop()  # the rename that moved these rows to the table asking
    for j in reversed(mine):
        version = history[j]
        if version.renamed_from is not None and version.renamed_from != key:
            earlier = _lineage(history, version.renamed_from, j, version.at)
            own = tuple(history[i] for i in mine if i >= j)
            return Lineage((*earlier.segments, Segment(*key, version.at, end_at)), earlier.versions + own)
        if _gone(version):
            return Lineage((Segment(*key, version.at, end_at),), tuple(history[i] for i in mine if i > j))
    return Lineage((Segment(*key, None, end_at),), tuple(history[i] for i in mine))
