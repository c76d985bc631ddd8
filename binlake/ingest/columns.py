"""Column buffers of the ingest tables, one Arrow batch per table.

Why: the executors' decoder used to build one dict per output row and have ``pa.array`` walk the
dicts into one wide staging batch whose five struct columns were four-fifths NULL; that cost ten
times the decoding itself (issue 13). Here the decoder appends each value to its column, and the
columns become Arrow arrays once per batch, in the table's batch schema
(:func:`binlake.ingest.layout.batch_schema`: its columns, some as dictionaries). With the
compiled extension the columns are Arrow buffers filled in Rust (``RowColumns``,
``ImageColumns``: ``native/src/columns.rs``), which are wrapped as they are; without it, one
Python list per column and ``pa.array`` (a C loop).

What keeps the per-row work small:

* timestamps are appended as integer microseconds since the epoch (None = NULL), never as
  datetime objects; date columns are not appended at all but cast from their timestamp column
  (:data:`DATE_SOURCES`);
* each row is one call (:attr:`TableColumns.row`), not one call per column, and the rows of a
  rows event, which share its columns, are one call for all (:attr:`TableColumns.repeated`);
* text Arrow cannot hold (lone surrogates of names decoded with ``surrogateescape``) is stored
  escaped (:func:`arrow_array`) rather than failing the batch;
* columns equal for every row a decoder makes (``source``, ``file``, ...) are given once as
  ``constants``: a one-word dictionary and a zero index per row for the string ones
  (:data:`binlake.ingest.layout.DICTIONARY_COLUMNS`), repeated by Arrow for the others;
* string columns of few distinct values (names, kinds, a transaction's GTID:
  :data:`binlake.ingest.layout.WORD_COLUMNS`) are dictionaries too, their words found as the rows
  are appended (kind ``words``), so the rows of a rows event repeat an index, not a string;
* the row image columns (``before`` and ``after``, each image once as its typed JSON text) are
  one sink the renderer appends to (``binlog_parser.rows.render.new_image_sink``): with the
  extension, Arrow buffers filled in Rust and wrapped here as they are (:func:`image_arrays`),
  with no Python ``str`` per value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from binlake.errors import BinlakeError
from binlake.ingest.layout import DICTIONARY_COLUMNS, batch_schema, row_kinds
from binlake.lake import tables
from binlog_parser.rows import _native
from binlog_parser.rows.render import ImageSink

if TYPE_CHECKING:
    import pyarrow as pa

    from binlog_parser._native_ext import ImageColumns, RowColumns

#: date column -> the timestamp columns it is the UTC date of (the first non-NULL one)
DATE_SOURCES: dict[str, tuple[str, ...]] = {
    "bronze.events.event_date": ("event_time",),
    "silver.statements.event_date": ("event_time",),
    "silver.row_changes.commit_date": ("commit_time",),
    "silver.transactions.commit_date": ("commit_time", "begin_time"),
}


def arrow_array(values: list[Any], arrow_type: pa.DataType) -> pa.Array:
    """``pa.array(values, arrow_type)``; a ``str`` with lone surrogates (a name decoded with
    ``surrogateescape`` from bytes that are not UTF-8) stored as ``s.encode("utf-8",
    "backslashreplace")`` writes it (``\\udcff``), as the extension's buffers store it: no Arrow
    string holds a surrogate, and in a JSON text that is the escape of the same character."""
    import pyarrow as pa

    try:
        return pa.array(values, arrow_type)
    except UnicodeEncodeError:
        return pa.array([_escaped(v) for v in values], arrow_type)


def _escaped(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, (list, tuple)):
        return [_escaped(v) for v in value]
    return value


def image_arrays(sink: ImageColumns | ImageSink, types: Sequence[pa.DataType]) -> list[pa.Array]:
    """The Arrow arrays of a row image sink's columns (before JSON, after JSON; ``types``: their
    Arrow types), and the sink emptied. An extension ``ImageColumns`` hands over Arrow buffers,
    wrapped without a pass over the values; an ``ImageSink`` lists."""
    if isinstance(sink, ImageSink):
        out = [arrow_array(sink.before_json, types[0]), arrow_array(sink.after_json, types[1])]
        sink.truncate(0)
        return out
    before, after = sink.take()
    return [_utf8_from_buffers(before, types[0]), _utf8_from_buffers(after, types[1])]


def _utf8_from_buffers(parts: tuple[Any, ...], arrow_type: pa.DataType) -> pa.Array:
    """``(rows, nulls, validity bitmap or None, i32 offsets, UTF-8 data)`` as a string array."""
    import pyarrow as pa

    rows, nulls, validity, offsets, data = parts
    return pa.Array.from_buffers(arrow_type, rows, [_validity(validity), pa.py_buffer(offsets), pa.py_buffer(data)],
                                 null_count=nulls)


def _validity(bitmap: bytes | None) -> pa.Buffer | None:
    """A validity bitmap as an Arrow buffer (None: every value valid)."""
    import pyarrow as pa

    return None if bitmap is None else pa.py_buffer(bitmap)


def array_from_parts(parts: Any, arrow_type: pa.DataType) -> pa.Array:
    """One ``RowColumns.take`` column as an Arrow array: its buffers wrapped as they are, or
    (kind ``object``) its Python values converted."""
    import pyarrow as pa

    if isinstance(parts, list):  # kind "object": the Python values
        return arrow_array(parts, arrow_type)
    if pa.types.is_string(arrow_type) or pa.types.is_binary(arrow_type):
        return _utf8_from_buffers(parts, arrow_type)
    if pa.types.is_dictionary(arrow_type):  # kind "words": indices and the batch's words
        rows, nulls, validity, indices, words = parts
        # the extension's indices are in range by construction: not checked again (safe=False)
        return pa.DictionaryArray.from_arrays(
            pa.Array.from_buffers(pa.int32(), rows, [_validity(validity), pa.py_buffer(indices)], null_count=nulls),
            _utf8_from_buffers(words, pa.string()), safe=False)
    rows, nulls, validity, values = parts
    return pa.Array.from_buffers(arrow_type, rows, [_validity(validity), pa.py_buffer(values)], null_count=nulls)


#: the integer kinds of ``row_kind``: (lowest, highest, the column's words in a misfit's message)
_INT_RANGES = {"int64": (-(2 ** 63), 2 ** 63 - 1, "a BIGINT (int64)"),
               "int32": (-(2 ** 31), 2 ** 31 - 1, "an INT (int32)")}


class ColumnRangeError(BinlakeError, ValueError):
    """An integer the binlog holds that does not fit its column's type (a flipped byte in an
    XID, say): stored as NULL, the row kept, and quarantined with scope ``value``."""


class NotNullError(BinlakeError, ValueError):
    """A NULL in a column its table declares NOT NULL: a fault of the ingest, never of the
    binlog (what the binlog may lack is nullable). Refused here, named, before it reaches a data
    file: Spark would refuse it at its write, and the Parquet writer at the ``required``
    column (:func:`binlake.ingest.layout.batch_schema`)."""


class _RowLists:
    """The pure-Python form of ``RowColumns``: one list per column, appended a row at a time;
    ``kinds`` and ``names`` as ``RowColumns`` takes them. Integers are checked against their
    column's range as they are appended, as the extension does: one that does not fit is
    stored as NULL and named in the answer."""

    __slots__ = ("lists", "sequences", "ints", "names")

    def __init__(self, kinds: Sequence[str], names: Sequence[str]) -> None:
        self.lists: list[list[Any]] = [[] for _ in kinds]
        self.names = list(names)
        self.sequences = frozenset(i for i, k in enumerate(kinds) if k.endswith("_sequence"))
        self.ints = [(i, *_INT_RANGES[k.removesuffix("_sequence")]) for i, k in enumerate(kinds)
                     if k.removesuffix("_sequence") in _INT_RANGES]

    def __len__(self) -> int:
        return len(self.lists[0]) if self.lists else 0

    def _fit(self, values: tuple[Any, ...]) -> tuple[tuple[Any, ...], list[str] | None]:
        if len(values) != len(self.lists):
            raise TypeError(f"a row has {len(self.lists)} values, not {len(values)}")
        misfits = None
        for i, low, high, what in self.ints:
            v = values[i]
            if isinstance(v, int) and not low <= v <= high:
                misfits = (misfits or []) + [f"{self.names[i]}: {v!r} does not fit {what} column"]
                values = values[:i] + (None,) + values[i + 1:]
        return values, misfits

    def append(self, *values: Any) -> list[str] | None:
        values, misfits = self._fit(values)
        for column, value in zip(self.lists, values):
            column.append(value)
        return misfits

    def append_repeated(self, n: int, *values: Any) -> list[str] | None:
        if n == 0:
            return None
        values, misfits = self._fit(values)
        for i, (column, value) in enumerate(zip(self.lists, values)):
            if i in self.sequences and value is not None:
                column.extend(range(value, value + n))
            else:
                column.extend([value] * n)
        return misfits

    def take(self) -> list[list[Any]]:
        out, self.lists = self.lists, [[] for _ in self.lists]
        return out


def _row_buffers(table: str, columns: Sequence[str], sequences: Iterable[str] = ()) -> RowColumns | _RowLists:
    """A ``RowColumns`` of the extension for ``columns`` (Arrow buffers), or :class:`_RowLists`."""
    kinds = row_kinds(table, tuple(columns), tuple(sequences))
    names = [f"{table}.{c}" for c in columns]
    native = _native.row_columns(kinds, names)
    return native if native is not None else _RowLists(kinds, names)


class TableColumns:
    """The rows of one table being built, column by column.

    :attr:`row` takes one row, one value per :attr:`row_columns` column in that (the schema's)
    order; :attr:`repeated` takes ``n`` and one row, and appends it ``n`` times (a rows event's
    columns, shared by its row images), counting up in the ``sequence_columns`` (``row_index``).
    Both answer None, or the misfits: integers that do not fit their column, stored as NULL
    (:class:`ColumnRangeError`). They are the extension's ``RowColumns`` methods when it is built
    (the values go straight into Arrow buffers), or Python lists per column. ``late_columns`` (``commit_time``, known when
    the transaction ends) are appended apart, through :attr:`late` (``n``, then one value
    each), and must catch up before a batch is taken. :meth:`take_batch` turns the buffers into
    one ``pyarrow.RecordBatch`` and empties them (the bound methods stay valid).
    """

    def __init__(self, table: str, constants: Mapping[str, Any] | None = None,
                 images: ImageColumns | ImageSink | None = None,
                 image_columns: Sequence[str] = (), row_columns: Sequence[str] | None = None,
                 late_columns: Sequence[str] = (), sequence_columns: Iterable[str] = ()) -> None:
        ts = tables.table(table)
        self.table = table
        self.schema = batch_schema(table)
        self.constants = dict(constants or {})
        self.dates = {c: DATE_SOURCES[f"{table}.{c}"] for c in ts.column_names if f"{table}.{c}" in DATE_SOURCES}
        #: the row image sink (:func:`image_arrays`) and the two columns it holds, in its order
        self.images = images
        self.image_columns = tuple(image_columns) if images is not None else ()
        self.late_columns = tuple(late_columns)
        apart = {*self.constants, *self.dates, *self.image_columns, *self.late_columns}
        #: the columns :attr:`row` takes, in order
        self.row_columns: tuple[str, ...] = tuple(c for c in ts.column_names if c not in apart)
        if row_columns is not None and tuple(row_columns) != self.row_columns:
            raise ValueError(f"{table}: rows are appended as {self.row_columns}, not {tuple(row_columns)}")
        coded = [c for c in self.row_columns if c in DICTIONARY_COLUMNS]
        if coded:  # a batch holds them as one word each: not given by row
            raise ValueError(f"{table}: {', '.join(coded)} must be given as constants")
        self._rows = _row_buffers(table, self.row_columns, sequence_columns)
        self._late = _row_buffers(table, self.late_columns) if self.late_columns else None
        self.row: Callable[..., list[str] | None] = self._rows.append
        self.repeated: Callable[..., list[str] | None] = self._rows.append_repeated
        self.late: Callable[..., list[str] | None] = (self._late.append_repeated if self._late is not None
                                                      else self._no_late)
        self._scalars: dict[str, Any] | None = None
        #: what holds one value per row: its length is the rows appended since the last batch
        self.row_buffer: RowColumns | _RowLists = self._rows
        #: what holds the late columns (None: the table has none)
        self.late_buffer: RowColumns | _RowLists | None = self._late

    def __len__(self) -> int:
        """Rows appended since the last batch."""
        return len(self._rows)

    def _no_late(self, n: int, *values: Any) -> list[str] | None:
        raise TypeError(f"{self.table} has no late columns")

    def take_batch(self) -> pa.RecordBatch:
        """The buffered rows as one RecordBatch in the table's schema; the buffers are emptied."""
        import pyarrow as pa

        n = len(self._rows)
        lengths = {"rows": n}
        if self._late is not None:
            lengths["late columns"] = len(self._late)
        if self.images is not None:
            lengths["row images"] = len(self.images)
        if set(lengths.values()) != {n}:
            raise ValueError(f"{self.table}: columns of unequal length {lengths}")
        arrays: dict[str, pa.Array] = {}
        if self.images is not None:
            types = [self.schema.field(c).type for c in self.image_columns]
            arrays.update(zip(self.image_columns, image_arrays(self.images, types), strict=True))
        for names, buffers in ((self.row_columns, self._rows), (self.late_columns, self._late)):
            if buffers is not None:
                for name, parts in zip(names, buffers.take(), strict=True):
                    arrays[name] = array_from_parts(parts, self.schema.field(name).type)
        for name, scalar in self._constant_scalars().items():
            arrays[name] = _repeated(scalar, n)
        if self.dates:
            import pyarrow.compute as pc

            for name, sources in self.dates.items():
                ts = arrays[sources[0]]
                for other in sources[1:]:
                    ts = pc.coalesce(ts, arrays[other])
                arrays[name] = utc_dates(ts)
        nulls = [f.name for f in self.schema if not f.nullable and arrays[f.name].null_count]
        if nulls:
            raise NotNullError(f"{self.table}: NULL in NOT NULL column(s) {', '.join(nulls)} of a batch of {n} "
                               "rows; nothing of the batch is written")
        return pa.RecordBatch.from_arrays([arrays[f.name] for f in self.schema], schema=self.schema)

    def _constant_scalars(self) -> dict[str, Any]:
        """The constants as Arrow scalars of their columns' types (made once); a dictionary
        column's value as its one-word dictionary."""
        if self._scalars is None:
            import pyarrow as pa

            self._scalars = {}
            for f in self.schema:
                if f.name not in self.constants:
                    continue
                value = self.constants[f.name]
                if pa.types.is_dictionary(f.type) and value is not None:
                    self._scalars[f.name] = pa.array([value], f.type.value_type)
                else:
                    self._scalars[f.name] = pa.scalar(value, f.type)
        return self._scalars


def _repeated(scalar: pa.Scalar | pa.Array, n: int) -> pa.Array:
    """A constant column of ``n`` rows: a scalar repeated, or a dictionary column whose one word
    (``scalar``: a one-value array) every row points at; its indices are zeros, made without a
    pass over them."""
    import numpy as np
    import pyarrow as pa

    if isinstance(scalar, pa.Array):
        zeros = pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(np.zeros(n, np.int32))])
        return pa.DictionaryArray.from_arrays(zeros, scalar, safe=False)
    return pa.repeat(scalar, n)


#: microseconds in a day
_DAY_US = 86_400_000_000


def utc_dates(timestamps: pa.Array) -> pa.Array:
    """The UTC date of each ``timestamp[us, UTC]`` (NULL stays NULL), as ``date32``.

    The day is the microseconds floor-divided by a day's, over the array's own value buffer,
    its validity bitmap kept as it is: Arrow's cast to ``date32`` goes through the time zone for
    every value, and ``pyarrow.compute``'s divide and casts cost about six times this per batch
    (both are the same days: ``test_columns``)."""
    import numpy as np
    import pyarrow as pa

    if timestamps.offset:  # a slice: its bitmap does not start at its first value
        timestamps = pa.concat_arrays([timestamps])
    validity, values = timestamps.buffers()
    micros = np.frombuffer(values, dtype=np.int64, count=len(timestamps))
    days = (micros // _DAY_US).astype(np.int32)  # a NULL's value is whatever: masked
    return pa.Array.from_buffers(pa.date32(), len(timestamps), [validity, pa.py_buffer(days)],
                                 null_count=timestamps.null_count)
