"""The other way to a moment: the gold table as its last run left it, with the row changes after the
moment taken back, newest first (``asof`` chooses it when it is the closer state).

Taking a change back needs what it replaced: an update's or a delete's *before* image, in full. So
the gold state serves only when (each checked; else :class:`Unusable` says why and ``asof`` replays
from the start instead):

* ``meta.gold_status`` has the table with its replay mark W (``replayed_through``) and Delta version,
  and W is at or after the moment (a gold table behind the moment would need a forward replay too);
* no DDL of the table lies between the moment and W (the rows would have other columns);
* every change between them has full images (``binlog_row_image=FULL``; no partial JSON), and each
  row it made is in the state when taken back (a key gold does not hold means the state is not the
  one those changes left).

Values are converted as gold's replay converts them (``binlake.gold.types.convert_value``; FLOAT
rounded to the float32 gold stores), so rows taken back and rows read from gold compare equal.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from binlake.config import BinlakeConfig
from binlake.gold.errors import ConversionError
from binlake.gold.plan import coordinates_of
from binlake.gold.schema_history import Coordinates, SchemaVersion, TableSchema
from binlake.gold.state import COPIES_COLUMN, StreamItem
from binlake.gold.types import PartialJsonUpdate, convert_value, rendering_of
from binlake.history.errors import HistoryError
from binlake.lake.delta_tables import open_delta_table
from binlake.lake.tables import gold_table_name


class Unusable(HistoryError):
    """The gold state cannot be taken back to the moment (the message says why)."""


@dataclass(frozen=True)
class GoldState:
    """What ``meta.gold_status`` says about a gold table: where it is, its Delta version, its W."""

    name: str
    location: str
    version: int | None
    through: Coordinates
    rows: int


def gold_state(cfg: BinlakeConfig, source: str, db: str, table: str, suffix: str = "") -> GoldState:
    """The table's gold state from ``meta.gold_status`` (:class:`Unusable` when there is none);
    ``suffix="__history"``: its SCD2 table's."""
    import pyarrow.dataset as ds

    from binlake.history.reads import read_rows

    name = gold_table_name(source, db, table) + suffix
    rows = read_rows(cfg, "meta.gold_status", (ds.field("source") == source) & (ds.field("gold_table") == name),
                     ("location", "table_version", "replayed_through", "rows", "write_mode"))
    row = rows[0] if rows else None
    if row is None or row["write_mode"] == "dropped":
        raise Unusable(f"no gold table gold.{name} in meta.gold_status")
    through = coordinates_of(row["replayed_through"])
    if through is None:
        raise Unusable(f"gold.{name} has no replay mark (replayed_through) in meta.gold_status")
    return GoldState(name, row["location"], row["table_version"], through, int(row["rows"]))


def read_gold(cfg: BinlakeConfig, state: GoldState, schema: TableSchema,
              extra: Sequence[str] | None = None) -> list[tuple[Any, ...]]:
    """The gold table's rows at the version its status row describes: the schema's columns (and
    ``_copies`` for a table without a primary key, or the ``extra`` columns), values as gold's
    replay makes them."""
    import pyarrow as pa

    table = open_delta_table(state.location, cfg.s3)
    if table is None:
        raise Unusable(f"gold.{state.name} is not at {state.location}")
    if state.version is not None and int(table.version()) != state.version:
        table.load_as_version(state.version)
    if extra is None:
        extra = [] if schema.primary_key else [COPIES_COLUMN]
    names = [c.name for c in schema.columns] + list(extra)
    try:
        data = pa.table(table.to_pyarrow_table(columns=names))
    except Exception as exc:  # noqa: BLE001 - any reader refusal (a deletion vector ...) means: replay instead
        raise Unusable(f"gold.{state.name} cannot be read without Spark here ({type(exc).__name__}: "
                       f"{str(exc).splitlines()[0][:200]})") from None
    columns = [data.column(n).to_pylist() for n in names]
    return [tuple(values) for values in zip(*columns)] if columns else []


def _gold_value(raw: Any, column: Any, rendering: Any) -> Any:
    value = convert_value(raw, column, rendering)
    if isinstance(value, PartialJsonUpdate):
        raise Unusable(f"column {column.name}: a partial JSON update cannot be taken back")
    if column.type == "float" and value is not None:
        return struct.unpack("<f", struct.pack("<f", value))[0]
    return value


class Unapplier:
    """Rows keyed like gold's replay (primary key; all columns and a count without one), from which
    changes are taken back newest first."""

    def __init__(self, schema: TableSchema, rows: Sequence[tuple[Any, ...]]) -> None:
        self.schema = schema
        self.names = [c.name for c in schema.columns]
        self.key_at = [self.names.index(k) for k in (schema.primary_key or self.names)]
        self.by_key: dict[tuple[Any, ...], list[Any]] = {}
        width = len(self.names)
        for row in rows:
            copies = 1 if schema.primary_key else int(row[width])
            self._add(tuple(row[:width]), copies)
        self.table_map: list[dict[str, Any]] = []

    def _key(self, values: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(values[i] for i in self.key_at)

    def _add(self, values: tuple[Any, ...], copies: int = 1) -> None:
        held = self.by_key.get(self._key(values))
        if held is not None and not self.schema.primary_key:
            held[1] += copies
        else:
            self.by_key[self._key(values)] = [values, copies]

    def _image(self, text: str | None, item: StreamItem) -> dict[str, Any] | None:
        if text is None:
            return None
        raw = json.loads(text)
        if len(self.table_map) != len(self.schema.columns):
            raise Unusable(f"the TABLE_MAP at {item.at.file}:{item.at.pos} has another shape than the gold table")
        try:
            return {c.name: _gold_value(raw[str(tm["name"])], c, rendering_of(tm))
                    for tm, c in zip(self.table_map, self.schema.columns) if str(tm["name"]) in raw}
        except ConversionError as exc:
            raise Unusable(f"change at {item.at.file}:{item.at.pos}: {exc}") from None

    def _full(self, image: dict[str, Any], item: StreamItem) -> tuple[Any, ...]:
        if len(image) != len(self.names):
            raise Unusable(f"the before image at {item.at.file}:{item.at.pos} is not full (binlog_row_image "
                           "MINIMAL / NOBLOB): what it replaced is not in the archive")
        return tuple(image[n] for n in self.names)

    def take_back(self, item: StreamItem, table_map: list[dict[str, Any]]) -> None:
        self.table_map = table_map
        before, after = self._image(item.before_json, item), self._image(item.after_json, item)
        old = None if before is None else self._full(before, item)
        if after is not None:
            made = self._full({**(before or {}), **after}, item)
            held = self.by_key.get(self._key(made))
            if held is None:
                raise Unusable(f"the row {item.gtid} at {item.at.file}:{item.at.pos} made is not in the gold state")
            held[1] -= 1
            if held[1] == 0:
                del self.by_key[self._key(made)]
        if old is not None:
            self._add(old)

    def rows(self) -> list[tuple[Any, ...]]:
        return [values for values, copies in self.by_key.values() for _ in range(copies)]


def take_back(schema: TableSchema, gold_rows: Sequence[tuple[Any, ...]], items: Sequence[StreamItem]) -> list[tuple[Any, ...]]:
    """``gold_rows`` with the row changes of ``items`` (binlog order; TABLE_MAPs included) taken
    back, newest first."""
    unapplier = Unapplier(schema, gold_rows)
    table_map: list[dict[str, Any]] = []
    paired = []
    for item in items:
        if item.kind == "table_map":
            table_map = json.loads(item.fields or "{}").get("columns") or []
        else:
            paired.append((item, table_map))
    for item, mapping in reversed(paired):
        unapplier.take_back(item, mapping)
    return unapplier.rows()


def ddl_between(versions: Sequence[SchemaVersion], start: Coordinates, end: Coordinates) -> SchemaVersion | None:
    return next((v for v in versions if start <= v.at <= end), None)


#: where a ``__history`` version starts and ends (``binlake.gold.state.HISTORY_COLUMNS``)
VERSION_BOUNDS = ("_valid_from_file", "_valid_from_pos", "_valid_from_payload_index", "_valid_from_row_index",
                  "_valid_to_file", "_valid_to_pos", "_valid_to_payload_index", "_valid_to_row_index")


def _bound(where: Sequence[Any], file_seq: dict[str, int]) -> Coordinates | None:
    file, pos, payload, row = where
    if file is None or pos is None:
        return None
    from binlake.reconcile.coverage import split_series

    seq = file_seq.get(file, split_series(file)[1] or 0)
    return Coordinates(seq, pos, -1 if payload is None else payload, -1 if row is None else row, file)


def versions_at(cfg: BinlakeConfig, state: GoldState, schema: TableSchema, cut: Coordinates,
                file_seq: dict[str, int]) -> list[tuple[Any, ...]]:
    """The rows of gold's ``__history`` table (SCD2) valid at ``cut``: versions started before it
    (or by a seed snapshot) and not ended before it; one row per version (a table without a key
    keeps a version per copy)."""
    width = len(schema.columns)
    out = []
    for row in read_gold(cfg, state, schema, VERSION_BOUNDS):
        start = _bound(row[width:width + 4], file_seq)
        end = _bound(row[width + 4:width + 8], file_seq)
        if (start is None or start < cut) and (end is None or end >= cut):
            out.append(tuple(row[:width]))
    return out
