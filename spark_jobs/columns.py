"""Column buffers of the ingest tables: one Python list per column, one Arrow batch per table.

Why: the executors' decoder used to build one dict per output row and have ``pa.array`` walk the
dicts into one wide staging batch whose five struct columns were four-fifths NULL; that cost ten
times the decoding itself (issue 13). Here the decoder appends each value to its column's list,
and each list becomes an Arrow array once per batch (``pa.array(values, type)``, a C loop), in the
table's own schema (:meth:`spark_jobs.schemas.TableSpec.arrow_schema`).

What keeps the per-row work small:

* timestamps are appended as integer microseconds since the epoch (None = NULL), never as
  datetime objects; date columns are not appended at all but cast from their timestamp column
  (:data:`DATE_SOURCES`);
* columns equal for every row a decoder makes (``source``, ``file``, ...) are given once as
  ``constants`` and repeated by Arrow;
* ``group_columns`` are appended once per group of rows (a rows event's columns, shared by its
  row images) and expanded with ``take``;
* a map column is kept as flat keys and values plus one offset per row (:class:`MapColumn`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import SimpleNamespace
from typing import Any

from binlog_parser.rows.render import append_image_side
from spark_jobs.schemas import spec

#: date column -> the timestamp columns it is the UTC date of (the first non-NULL one)
DATE_SOURCES: dict[str, tuple[str, ...]] = {
    "bronze.events.event_date": ("event_time",),
    "silver.statements.event_date": ("event_time",),
    "silver.row_changes.commit_date": ("commit_time",),
    "silver.transactions.commit_date": ("commit_time", "begin_time"),
}

class MapColumn:
    """A ``map<string,string>`` column as flat keys and values, one end offset per row."""

    __slots__ = ("keys", "values", "offsets", "nulls")

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.values: list[str | None] = []
        self.offsets: list[int] = [0]
        self.nulls: list[bool] = []

    def __len__(self) -> int:
        return len(self.nulls)

    def append(self, image: Mapping[str, str | None] | None) -> None:
        """One row: a mapping (its items in order), or None for a NULL map."""
        self.extend((image,))

    def extend(self, images: Iterable[Mapping[str, str | None] | None]) -> None:
        """Rows, as :meth:`append` (a rows event's images in one call)."""
        keys, values, nulls, offsets = self.keys, self.values, self.nulls, self.offsets
        for image in images:
            append_image_side(image, keys, values, offsets, nulls)

    def array(self, arrow_type: Any) -> Any:
        import pyarrow as pa

        mask = pa.array(self.nulls, pa.bool_()) if any(self.nulls) else None
        return pa.MapArray.from_arrays(pa.array(self.offsets, pa.int32()), pa.array(self.keys, pa.string()),
                                       pa.array(self.values, pa.string()), type=arrow_type, mask=mask)

    def clear(self) -> None:
        self.keys.clear()
        self.values.clear()
        self.nulls.clear()
        del self.offsets[1:]


class TableColumns:
    """The rows of one table being built, column by column.

    ``add`` has one attribute per appended column, the bound ``append`` of its buffer (bind it
    once, call it per row): ``add.pos(123)``. :meth:`take_batch` turns the buffers into one
    ``pyarrow.RecordBatch`` and empties them (the bound appends stay valid).
    """

    def __init__(self, table: str, constants: Mapping[str, Any] | None = None,
                 group_columns: Iterable[str] = (), map_columns: Iterable[str] = ()) -> None:
        ts = spec(table)
        self.table = table
        self.schema = ts.arrow_schema
        self.constants = dict(constants or {})
        self.group_columns = frozenset(group_columns)
        self.dates = {c: DATE_SOURCES[f"{table}.{c}"] for c in ts.column_names if f"{table}.{c}" in DATE_SOURCES}
        maps = frozenset(map_columns)
        self.buffers: dict[str, Any] = {
            c: MapColumn() if c in maps else [] for c in ts.column_names
            if c not in self.constants and c not in self.dates}
        self.add = SimpleNamespace(**{c: b.append for c, b in self.buffers.items()})
        #: per row, the index of its group (only when there are group columns)
        self.group_of_row: list[int] = []
        self._groups = 0
        #: a row-level buffer: its length is the number of rows appended since the last batch
        self.row_buffer = next(b for c, b in self.buffers.items() if c not in self.group_columns)

    def __len__(self) -> int:
        """Rows appended since the last batch."""
        return len(self.row_buffer)

    def end_group(self, rows: int) -> None:
        """The group just begun (one value per group column, some maybe appended later) holds
        the last ``rows`` rows."""
        self.group_of_row.extend([self._groups] * rows)
        self._groups += 1

    def take_batch(self) -> Any:
        """The buffered rows as one RecordBatch in the table's schema; the buffers are emptied."""
        import pyarrow as pa

        n = len(self)
        lengths = {c: len(b) for c, b in self.buffers.items()}
        rows = {v for c, v in lengths.items() if c not in self.group_columns}
        groups = {lengths[c] for c in self.group_columns}
        if rows != {n} or (self.group_columns and (groups != {self._groups} or len(self.group_of_row) != n)):
            raise ValueError(f"{self.table}: columns of unequal length {lengths} "
                             f"({self._groups} groups, {len(self.group_of_row)} grouped rows)")
        take = pa.array(self.group_of_row, pa.int32()) if self.group_columns else None
        arrays: dict[str, Any] = {}
        for field in self.schema:
            name = field.name
            if name in self.constants:
                arrays[name] = pa.repeat(pa.scalar(self.constants[name], field.type), n)
            elif name in self.buffers:
                buf = self.buffers[name]
                arr = buf.array(field.type) if isinstance(buf, MapColumn) else pa.array(buf, field.type)
                arrays[name] = arr.take(take) if name in self.group_columns else arr
        for name, sources in self.dates.items():
            ts = arrays[sources[0]]
            for other in sources[1:]:
                import pyarrow.compute as pc

                ts = pc.coalesce(ts, arrays[other])
            arrays[name] = ts.cast(pa.date32())
        for buf in self.buffers.values():
            buf.clear()
        self.group_of_row.clear()
        self._groups = 0
        return pa.RecordBatch.from_arrays([arrays[f.name] for f in self.schema], schema=self.schema)
