"""Types of the optional compiled extension built from ``native/`` (Rust + PyO3; docs/native.md).

mypy reads this file instead of the built library, so the seams that call the extension
(``binlog_parser.rows._native``, ``binlog_parser._native_framing``, ``binlog_parser._native_loader``)
are checked against what it takes and gives. ``tests/test_native_sink_layout.py`` holds this
file's names equal to the built module's, and the module's ``VALUE_KINDS`` and ``SINK_LAYOUT``
equal to the Python side's, so the stub, the Rust source and Python cannot drift apart unseen.
Objects the extension passes through without looking at them (events, headers, decoders) are
``object``; what it builds of Python's own classes is ``Any``.
"""

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, final

#: the interface version (``binlog_parser._native_loader.ABI`` must equal it)
ABI: int
#: the rows decoder's column kinds and text conversions by name (``K_*``, ``C_*`` of
#: ``binlog_parser.rows._native``)
VALUE_KINDS: dict[str, int]
#: ``(role, table, [(column, kind), ...])`` of each buffer ``EventSink`` appends to, in its order
SINK_LAYOUT: list[tuple[str, str, list[tuple[str, str]]]]

@final
class ValueTypes:
    """The classes of the values the decoder builds."""

    def __new__(cls, decimal: Callable[..., Any], date: type, datetime: type, time: type, timestamp: type,
                row_change: type) -> ValueTypes: ...

@final
class ImageReader:
    """The reader of one row image plan: ``(name, kind, a, b, c, obj)`` per present column."""

    def __new__(cls, types: ValueTypes, specs: Sequence[tuple[str, int, int, int, int, object]]) -> ImageReader: ...
    def __len__(self) -> int: ...

@final
class RowImages(Sequence[Any]):
    """A rows event's images kept as bytes, read as the ``RowChange`` s they decode to."""

    def __len__(self) -> int: ...
    def __getitem__(self, index: Any) -> Any: ...
    def __iter__(self) -> Iterator[Any]: ...
    @property
    def image_names(self) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]: ...
    @property
    def change_type(self) -> type: ...

@final
class SlotsConstructor:
    """A frozen slots dataclass's constructor without its ``__init__`` (positional values only)."""

    def __new__(cls, target: type) -> SlotsConstructor: ...
    def __call__(self, *args: object) -> Any: ...

@final
class Frames:
    """The events of one run of the compiled framing loop."""

    @property
    def pos(self) -> int: ...
    def __iter__(self) -> Iterator[Any]: ...
    def __next__(self) -> Any: ...

@final
class EventTypes:
    """The event classes and decoders the compiled framing loop builds events with."""

    def __new__(cls, classes: tuple[type, type, type, type, type, type, type],
                decoders: tuple[object, object, object, object, object, object],
                unknown: Callable[..., Any]) -> EventTypes: ...
    def frames(self, framer: object, mv: object, base: int, pos: int, ctx: object, dispatch: Mapping[int, object],
               stop: int | None, total: int, verify: bool, max_event_size: int | None, expand: bool,
               payload_pos: object, headers: bool, header_types: object, header_from: int) -> Frames | None: ...

def decode_rows(data: bytes, pos: int, kind: int, first: ImageReader,
                second: ImageReader | None = None) -> tuple[Any, ...] | None: ...
def decode_rows_event(make_event: SlotsConstructor, header: object, type_code: int, body: object,
                      post_header_lengths: bytes, table_maps: dict[int, Any]) -> Any | None: ...

@final
class ImageLayout:
    """How one image's columns are rendered (names, JSON keys, per-column conversions)."""

    def __new__(cls, types: ValueTypes, specs: Sequence[tuple[str, str, bool, int, bool, object]],
                pair_any: Callable[..., Any]) -> ImageLayout: ...

@final
class ArrowBuffer:
    """A column buffer handed over as it was filled (read-only buffer protocol)."""

    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

@final
class ImageColumns:
    """The row image columns (each image's typed JSON text, before and after) as Arrow buffers."""

    def __new__(cls) -> ImageColumns: ...
    def __len__(self) -> int: ...
    def append(self, before: str | None, after: str | None) -> None: ...
    def truncate(self, changes: int) -> None: ...
    def take(self) -> tuple[Any, Any]: ...

@final
class RowColumns:
    """A table's columns appended a row at a time; ``kinds``: ``int64``, ``int32``, ``bool``,
    ``utf8``, ``binary``, ``words``, ``object`` (``*_sequence`` for a counting column)."""

    def __new__(cls, kinds: Sequence[str], names: Sequence[str]) -> RowColumns: ...
    def __len__(self) -> int: ...
    def append(self, *values: object) -> list[str] | None: ...
    def append_repeated(self, n: int, *values: object) -> list[str] | None: ...
    def take(self) -> list[Any]: ...

@final
class EventSink:
    """Takes the top-level events of plain transactions inside the compiled framing loop and
    appends their rows to the buffers it was given (``SINK_LAYOUT``)."""

    pending_base: int
    @property
    def seen(self) -> int: ...
    @property
    def from_bytes(self) -> int: ...
    def __new__(cls, tables: tuple[RowColumns, RowColumns, RowColumns, RowColumns], images: ImageColumns,
                fields: Mapping[int, FieldsLayout], names: Mapping[int, str], operations: Mapping[int, str],
                batch_rows: int, max_pending: int) -> EventSink: ...
    def open(self, gtid: object, trx_pos: object) -> None: ...
    def close(self) -> None: ...
    def remember_table_map(self, table_id: int, columns: object, fields_json: str, db: object, table: object,
                           event: object = None) -> None: ...
    def remember_rows(self, table_id: int, type_code: int, flags: int, extra_data: object, columns: object,
                      head_json: str, names: tuple[object, object, object, object, object],
                      before: ImageLayout | None, after: ImageLayout | None, event: object = None) -> None: ...
    def take(self) -> tuple[Any, Any, Any]: ...

def render_changes_into(changes: object, before: ImageLayout | None, after: ImageLayout | None,
                        sink: ImageColumns) -> int | None: ...

@final
class FieldsLayout:
    """The fields of an event class (a frozen slots dataclass) as JSON keys."""

    def __new__(cls, target: type, keys_json: Sequence[str], fallback: Callable[[Any], str]) -> FieldsLayout: ...

def fields_json(event: object, layout: FieldsLayout) -> str | None: ...
