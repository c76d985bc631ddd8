"""Column values -> the text MySQL's SELECT prints (one set of rules for the CLI JSON, the text
view and the Spark jobs' ``map<string,string>`` columns).

``render_value(value, column)`` -> JSON-able: integers as JSON numbers (strings beyond 2**53),
DOUBLE as JSON numbers equal to MySQL's printed value, FLOAT as the shortest number that is the
stored float32 (see ``numbers.format_float``), DECIMAL/dates/times/YEAR/strings/
ENUM/SET/JSON as MySQL's text, binary data (BLOB, BINARY, BIT, GEOMETRY, bytes of unknown
charset that are not UTF-8) as ``0x``-prefixed hex, VECTOR as a list of numbers, NULL as None.

``render_value_text(value, column)`` -> ``str | None``: the same as a string (VECTOR as
MySQL's ``VECTOR_TO_STRING``), NULL -> None.

``render_value_bytes(value, column)`` -> ``bytes | None``: what the server's text protocol sends
(utf8mb4 text, raw bytes for binary data), for comparisons with ``mysql --batch`` output.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from decimal import Decimal
from json.encoder import encode_basestring as _json_str
from typing import Any

from binlog_parser.rows import _native
from binlog_parser.rows.column_types import ColumnType as T
from binlog_parser.rows.decimal import decimal_text
from binlog_parser.rows.json_binary import MySQLJson
from binlog_parser.rows.json_diff import PartialJson, mysql_quote
from binlog_parser.rows.numbers import format_double, format_float, shortest_float32
from binlog_parser.rows.temporal import MySQLDate, MySQLDateTime, MySQLTime, MySQLTimestamp
from binlog_parser.rows.values import Geometry, Vector

_MAX_SAFE = 2 ** 53


def _is_float_col(column) -> bool:
    return column is not None and column.type == T.FLOAT


def _bytes_text(value: bytes, column) -> str:
    if column is not None and (column.is_binary or column.charset is not None):
        return "0x" + value.hex()
    try:  # charset unknown (no FULL metadata, no schema): UTF-8 text if it is valid UTF-8
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + value.hex()


def _vector_text(v: Vector) -> str:
    return "[" + ",".join(f"{x:.5e}" for x in v.values) + "]"


def _partial_json(value: PartialJson) -> Any:
    if value.document is not None:
        return str(value.document)
    return {"partial_json": [d.to_json() for d in value.diffs]}


def render_value(value: Any, column=None) -> Any:
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        if column is not None and column.type == T.YEAR:
            return f"{value:04d}"
        if -_MAX_SAFE <= value <= _MAX_SAFE:
            return value
        return str(value)
    if isinstance(value, float):
        text = format_float(value) if _is_float_col(column) else format_double(value)
        return float(text)
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _bytes_text(bytes(value), column)
    if isinstance(value, Decimal):
        return decimal_text(value, column.scale if column is not None else None)
    if isinstance(value, (MySQLDate, MySQLDateTime, MySQLTime, MySQLTimestamp, MySQLJson)):
        return str(value)
    if isinstance(value, PartialJson):
        return _partial_json(value)
    if isinstance(value, Geometry):
        return "0x" + value.to_bytes().hex()
    if isinstance(value, Vector):
        return [shortest_float32(x) for x in value.values]
    return str(value)


def render_value_text(value: Any, column=None) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        if column is not None and column.type == T.YEAR:
            return f"{value:04d}"
        return str(value)
    if isinstance(value, float):
        return format_float(value) if _is_float_col(column) else format_double(value)
    if isinstance(value, Vector):
        return _vector_text(value)
    if isinstance(value, PartialJson):
        r = _partial_json(value)
        return r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)
    r = render_value(value, column)
    return r if isinstance(r, str) else str(r)


def render_value_bytes(value: Any, column=None) -> bytes | None:
    """The bytes a text-protocol SELECT returns for the value (strings as UTF-8)."""
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, Geometry):
        return value.to_bytes()
    if isinstance(value, str):
        return value.encode("utf-8", errors="surrogateescape")
    return (render_value_text(value, column) or "").encode("utf-8")


def render_value_sql(value: Any, column=None) -> str:
    """A SQL-literal-ish form for the text view: NULL, numbers bare, everything else quoted."""
    if value is None:
        return "NULL"
    r = render_value_text(value, column) or ""
    if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool) and not (
            column is not None and column.type == T.YEAR):
        return r
    if isinstance(value, (bytes, Geometry)) and r.startswith("0x"):
        return r
    return mysql_quote(r)


def render_row(row: dict[str, Any] | None, columns_by_name: dict[str, Any]) -> dict[str, Any] | None:
    if row is None:
        return None
    return {name: render_value(v, columns_by_name.get(name)) for name, v in row.items()}


def render_row_text(row: dict[str, Any] | None, columns_by_name: dict[str, Any]) -> dict[str, str | None] | None:
    """A row as ``{name: text or None}`` (the Spark ``map<string,string>`` form)."""
    if row is None:
        return None
    return {name: render_value_text(v, columns_by_name.get(name)) for name, v in row.items()}


# ---------------------------------------------------------------- both forms in one pass

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str, check_circular=False)
try:  # the C encoder JSONEncoder.encode would build on every call, built once
    from json.encoder import c_make_encoder as _c_make_encoder  # type: ignore[attr-defined]

    _C_ENCODE = _c_make_encoder(None, str, _json_str, None, ":", ",", False, False, True) \
        if _c_make_encoder is not None else None
except ImportError:  # pragma: no cover
    _C_ENCODE = None


def compact_json(value: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)``: the JSON
    of every ``fields`` and row image the ingest stores, with the encoder built once
    (``json.dumps`` builds one per call for non-default options)."""
    if _C_ENCODE is not None:
        return "".join(_C_ENCODE(value, 0))
    return _ENCODER.encode(value)


_INF = float("inf")


def _float_json(f: float) -> str:
    """A float as the JSON encoder writes it (``float.__repr__``; NaN / Infinity allowed)."""
    if f != f:
        return "NaN"
    if f == _INF:
        return "Infinity"
    if f == -_INF:
        return "-Infinity"
    return float.__repr__(f)


# Each ``_pair_*`` gives ``(compact_json(render_value(v, c)), render_value_text(v, c))`` of one
# type. Temporal and DECIMAL texts are digits, signs, '-', ':', '.' and spaces: quoted as they are.

def _pair_float(v: float, c: Any) -> tuple[str, str]:
    text = format_float(v) if _is_float_col(c) else format_double(v)
    return _float_json(float(text)), text


def _pair_temporal(v: Any, c: Any) -> tuple[str, str]:
    s = str(v)
    return '"' + s + '"', s


def _pair_json_doc(v: Any, c: Any) -> tuple[str, str]:
    s = str(v)
    return _json_str(s), s


def _pair_bytes(v: Any, c: Any) -> tuple[str, str]:
    s = _bytes_text(bytes(v), c)
    return _json_str(s), s


def _pair_decimal(v: Decimal, c: Any) -> tuple[str, str]:
    s = decimal_text(v, c.scale if c is not None else None)
    return '"' + s + '"', s


def _pair_bool(v: bool, c: Any) -> tuple[str, str]:
    return ("1", "1") if v else ("0", "0")


def _pair_int(v: int, c: Any) -> tuple[str, str]:
    if c is not None and c.type == _YEAR:
        s = f"{v:04d}"
        return '"' + s + '"', s
    s = int.__repr__(v)
    return (s, s) if -_MAX_SAFE <= v <= _MAX_SAFE else ('"' + s + '"', s)


def _pair_other(v: Any, c: Any) -> tuple[str, str | None]:
    """VECTOR, partial JSON, GEOMETRY, subclasses: the two renderers and the encoder."""
    return compact_json(render_value(v, c)), render_value_text(v, c)


_PAIRS = {
    float: _pair_float, bytes: _pair_bytes, bytearray: _pair_bytes, memoryview: _pair_bytes,
    Decimal: _pair_decimal, bool: _pair_bool, int: _pair_int, MySQLDate: _pair_temporal,
    MySQLDateTime: _pair_temporal, MySQLTime: _pair_temporal, MySQLTimestamp: _pair_temporal,
    MySQLJson: _pair_json_doc,
}
_YEAR = T.YEAR
_TEMPORALS = (MySQLDate, MySQLDateTime, MySQLTime, MySQLTimestamp)


def _pair_any(v: Any, c: Any) -> tuple[str, str | None]:
    """``(compact_json(render_value(v, c)), render_value_text(v, c))`` of any value."""
    if type(v) is str:
        return _json_str(v), v
    if v is None:
        return "null", None
    return _PAIRS.get(type(v), _pair_other)(v, c)


def _fast_kind(v: Any, c: Any) -> Any:
    """How a column whose values look like ``v`` is rendered inline: ``"s"`` (str), ``"i"``
    (int, not YEAR), ``("d", scale)`` (Decimal), ``"t"`` (temporal), else None (:func:`_pair_any`)."""
    tp = type(v)
    if tp is str:
        return "s"
    if tp is int:
        return "i" if c is None or c.type != _YEAR else None
    if tp is Decimal:
        return "d", (c.scale if c is not None else None)
    if tp in _TEMPORALS:
        return "t"
    return None


Renderer = Callable[[dict[str, Any], tuple[Any, ...]], tuple[str, dict[str, str | None]]]
#: (column names, fast kinds) -> compiled ``render(row, cols)`` (see :func:`_compile_renderer`)
_RENDERERS: dict[tuple[Any, ...], Renderer] = {}


def _column_source(i: int, kind: Any, ns: dict[str, Any]) -> list[str]:
    """Lines rendering ``v{i}`` into ``j{i}`` (JSON) and ``t{i}`` (text): the value's type
    checked, then rendered inline; any other value (NULL, another type) by :func:`_pair_any`."""
    generic = [f"        j{i}, t{i} = _pair_any(v{i}, cols[{i}])"]
    if kind == "s":
        fast = [f"    if type(v{i}) is _str:", f"        t{i} = v{i}; j{i} = _q(v{i})"]
    elif kind == "i":
        fast = [f"    if type(v{i}) is _int and -_MAX <= v{i} <= _MAX:", f"        j{i} = t{i} = _int_repr(v{i})"]
    elif kind == "t":
        fast = [f"    if type(v{i}) in _TEMPORALS:", f"        t{i} = _str(v{i}); j{i} = '\"' + t{i} + '\"'"]
    elif isinstance(kind, tuple):
        ns[f"sc{i}"] = kind[1]
        fast = [f"    if type(v{i}) is _Decimal:", f"        t{i} = _dec(v{i}, sc{i}); j{i} = '\"' + t{i} + '\"'"]
    else:
        return [generic[0][4:]]
    return [*fast, "    else:", *generic]


def _compile_renderer(names: tuple[Any, ...], kinds: tuple[Any, ...]) -> Renderer:
    """``render(row, cols) -> (JSON, text map)`` for images of exactly ``names``, as straight-line
    code: each value of its column's usual type (``kinds``) rendered inline, any other by
    :func:`_pair_any`; the JSON one %-format of the names' template. Column names are bound as
    variables, never written into the source (as ``rows_event._compile_image_reader``)."""
    n = len(names)
    keys = [compact_json({k: None})[1:-5].replace("%", "%%") for k in names]  # "name": as encoded
    ns: dict[str, Any] = {"_pair_any": _pair_any, "_q": _json_str, "_str": str, "_int": int,
                          "_int_repr": int.__repr__, "_MAX": _MAX_SAFE, "_TEMPORALS": _TEMPORALS,
                          "_Decimal": Decimal, "_dec": decimal_text,
                          "_T": "{" + ",".join(k + "%s" for k in keys) + "}"}
    lines = ["def render(row, cols):"]
    if n:
        lines.append("    " + ", ".join(f"v{i}" for i in range(n)) + ", = row.values()")
    for i, kind in enumerate(kinds):
        ns[f"k{i}"] = names[i]
        lines += _column_source(i, kind, ns)
    lines.append("    return _T % (" + "".join(f"j{i}, " for i in range(n)) + "), {"
                 + ", ".join(f"k{i}: t{i}" for i in range(n)) + "}")
    exec(compile("\n".join(lines), f"<row renderer, {n} columns>", "exec"), ns)
    renderer: Renderer = ns["render"]
    return renderer


#: one rendered change: (before JSON, after JSON), each None for no image
RenderedChange = tuple[str | None, str | None]


class ImageSink:
    """Rendered images as flat columns, appended to change by change
    (:meth:`ImageRenderer.render_changes_into`): per side, each image's typed JSON text (None
    for no image), what ``silver.row_changes.before`` / ``after`` hold.

    The pure-Python form of the extension's ``ImageColumns`` (``native/src/columns.rs``), which
    keeps the same columns as Arrow buffers; both have ``len``, :meth:`append` and
    :meth:`truncate`, and :func:`new_image_sink` gives the one to use."""

    __slots__ = ("before_json", "after_json")

    def __init__(self) -> None:
        self.before_json: list[str | None] = []
        self.after_json: list[str | None] = []

    def __len__(self) -> int:
        """Changes appended."""
        return len(self.before_json)

    def append(self, before: str | None, after: str | None) -> None:
        """One change's images: each side's JSON text (None: no image)."""
        self.before_json.append(before)
        self.after_json.append(after)

    def truncate(self, changes: int) -> None:
        """Back to the first ``changes`` changes."""
        del self.before_json[changes:], self.after_json[changes:]


def append_images(sink: Any, images: Sequence[RenderedChange]) -> None:
    """Rendered changes appended to a sink (:func:`new_image_sink`): all, or on an exception
    none (a value the extension's columns cannot hold, such as a JSON text that is not a str)."""
    mark = len(sink)
    try:
        for image in images:
            sink.append(*image)
    except BaseException:
        sink.truncate(mark)
        raise


def new_image_sink() -> Any:
    """Where :meth:`ImageRenderer.render_changes_into` appends: the extension's
    ``ImageColumns`` (Arrow buffers filled in Rust) when it is built, else an :class:`ImageSink`."""
    sink = _native.image_columns()
    return sink if sink is not None else ImageSink()


class ImageRenderer:
    """Renders the row images of one table (one ``columns_by_name``) as
    ``(compact_json(render_row(row)), render_row_text(row))``.

    Why not the two renderers and the JSON encoder: rendering the row images is most of the
    ingest's CPU (issue 13). :meth:`render_changes_into` renders a whole rows event in the
    compiled extension when it is built (``native/src/render.rs``: strings, ints, bytes, DECIMALs
    and temporals there, any other value by :func:`_pair_any`). Without it, each set of column
    names gets a compiled Python renderer (:func:`_compile_renderer`, shared by every table with
    those names and value types): each value rendered once for both forms, inline for its
    column's usual type, and the JSON one %-format of a template instead of a dict walked by the
    encoder. ``tests/test_rows_fastpaths.py`` and ``tests/test_native_render.py`` hold both
    equal to the renderers and the encoder.
    """

    __slots__ = ("columns_by_name", "_layouts", "_native_layouts")

    def __init__(self, columns_by_name: dict[str, Any]) -> None:
        self.columns_by_name = columns_by_name
        #: the names of an image -> (its renderer, its columns)
        self._layouts: dict[tuple[Any, ...], tuple[Renderer, tuple[Any, ...]]] = {}
        #: the names of an image -> the extension's layout (None: not renderable there)
        self._native_layouts: dict[tuple[Any, ...], Any] = {}

    def render(self, row: dict[str, Any] | None) -> tuple[str | None, dict[str, str | None] | None]:
        if row is None:
            return None, None
        names = tuple(row)
        layout = self._layouts.get(names)
        if layout is None:
            layout = self._layouts[names] = self._layout(names, row)
        return layout[0](row, layout[1])

    def render_changes(self, changes: Sequence[Any]) -> list[RenderedChange]:
        """Every change of a rows event (``before`` / ``after`` images) rendered, image by image
        (:meth:`render`): each image's JSON text, the one form ``silver.row_changes`` stores."""
        render = self.render
        images: list[RenderedChange] = []
        append = images.append
        for change in changes:
            append((render(change.before)[0], render(change.after)[0]))
        return images

    def render_changes_into(self, changes: Sequence[Any], sink: Any) -> int:
        """:meth:`render_changes` appended to ``sink`` (:func:`new_image_sink`; the extension
        renders into its own ``ImageColumns``); returns the number of changes. On an exception
        the sink is as it was."""
        if changes and not isinstance(sink, ImageSink):
            layouts = self.native_layouts(changes)  # RowImages: its columns, nothing decoded
            if layouts is None:
                first = changes[0]
                names = tuple(n if n is None else tuple(n) for n in (first.before, first.after))
                layouts = self._native_layout(names[0], type(first)), self._native_layout(names[1], type(first))
            n = _native.render_changes_into(changes, *layouts, sink)
            if n is not None:
                return n
        images = self.render_changes(changes)  # may raise: nothing appended yet
        append_images(sink, images)
        return len(images)

    def native_layouts(self, changes: Any) -> tuple[Any, Any] | None:
        """The extension's layouts :meth:`render_changes_into` renders the before and after
        images of ``changes`` with when they are kept as bytes (``RowImages``); None for other
        changes."""
        names = getattr(changes, "image_names", None)
        if names is None:
            return None
        change_type = changes.change_type
        return self._native_layout(names[0], change_type), self._native_layout(names[1], change_type)

    def _native_layout(self, names: tuple[Any, ...] | None, change_type: type) -> Any:
        """The extension's layout of images of the columns ``names`` (None: no image, or the
        Python renderer's). ``change_type``: the changes' class (``rows_event.RowChange``, which
        imports this module's callers: taken from the changes, the import graph stays acyclic)."""
        if names is None:
            return None
        try:
            return self._native_layouts[names]
        except KeyError:
            pass
        get_col = self.columns_by_name.get
        specs = []
        for name in names:
            c = get_col(name)
            scale = getattr(c, "scale", None) if c is not None else None
            specs.append((name, compact_json({name: None})[1:-5], c is not None and c.type == _YEAR,
                          scale if type(scale) is int and scale >= 0 else -1,
                          c is not None and bool(c.is_binary or c.charset is not None), c))
        try:
            layout = _native.image_layout(specs, _pair_any, change_type)
        except (TypeError, ValueError):  # names that are not str: the Python renderer
            layout = None
        self._native_layouts[names] = layout
        return layout

    def _layout(self, names: tuple[Any, ...], row: dict[str, Any]) -> tuple[Renderer, tuple[Any, ...]]:
        get_col = self.columns_by_name.get
        cols = tuple(get_col(k) for k in names)
        kinds = tuple(_fast_kind(v, c) for v, c in zip(row.values(), cols))
        key = (names, kinds)
        fn = _RENDERERS.get(key)
        if fn is None:
            if len(_RENDERERS) >= 1024:
                _RENDERERS.clear()
            fn = _RENDERERS[key] = _compile_renderer(names, kinds)
        return fn, cols


def render_row_json_text(row: dict[str, Any] | None, columns_by_name: dict[str, Any]
                         ) -> tuple[str | None, dict[str, str | None] | None]:
    """``(compact_json(render_row(row)), render_row_text(row))`` in one pass over the values
    (:class:`ImageRenderer`, for one image)."""
    return ImageRenderer(columns_by_name).render(row)


# ---------------------------------------------------------------- mysqlbinlog -vv comments

_INT_TYPE_NAMES = {T.TINY: "TINYINT", T.SHORT: "SHORTINT", T.INT24: "MEDIUMINT", T.LONG: "INT",
                   T.LONGLONG: "LONGINT"}
_PLAIN_TYPE_NAMES = {T.FLOAT: "FLOAT", T.DOUBLE: "DOUBLE", T.TIMESTAMP: "TIMESTAMP", T.DATETIME: "DATETIME",
                     T.TIME: "TIME", T.YEAR: "YEAR", T.DATE: "DATE", T.NEWDATE: "DATE", T.GEOMETRY: "GEOMETRY",
                     T.JSON: "JSON", T.NULL: "NULL"}
_FSP_TYPE_NAMES = {T.TIMESTAMP2: "TIMESTAMP", T.DATETIME2: "DATETIME", T.TIME2: "TIME"}
_BLOB_TYPE_NAMES = {1: "TINYBLOB/TINYTEXT", 2: "BLOB/TEXT", 3: "MEDIUMBLOB/MEDIUMTEXT", 4: "LONGBLOB/LONGTEXT"}


def binlog_type_name(column: Any) -> str:
    """The column's type as ``mysqlbinlog -vv`` names it in its ``/* TYPE meta=... */`` comments.

    From the binlog's own type and metadata only (``log_event_print_value``): ``LONGINT`` for
    BIGINT, ``VARSTRING(64)`` with the byte length, ``DECIMAL(65,30)``, ``DATETIME(0)``...
    """
    t, meta = column.type, column.meta
    if t in _INT_TYPE_NAMES:
        return _INT_TYPE_NAMES[t]
    if t in _PLAIN_TYPE_NAMES:
        return _PLAIN_TYPE_NAMES[t]
    if t in _FSP_TYPE_NAMES:
        return f"{_FSP_TYPE_NAMES[t]}({meta})"
    if t == T.NEWDECIMAL:
        return f"DECIMAL({meta >> 8},{meta & 0xFF})"
    if t == T.BIT:
        return f"BIT({(meta >> 8) * 8 + (meta & 0xFF)})"
    if t == T.ENUM:
        return "ENUM(1 byte)" if column.length == 1 else "ENUM(2 bytes)"
    if t == T.SET:
        return f"SET({column.length} bytes)"
    if t in (T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB):
        return _BLOB_TYPE_NAMES.get(meta, f"BLOB({meta})")
    if t in (T.VARCHAR, T.VAR_STRING):
        return f"VARSTRING({meta})"
    if t == T.STRING:
        return f"STRING({column.length})"
    if t == T.VECTOR:
        return f"VECTOR({column.vector_dimensions or meta})"
    return f"TYPE{t}"


def column_label(column: Any) -> str:
    """``@N`` as mysqlbinlog names a column, unless the binlog or a schema gave its name."""
    if column.name_from == "fallback":
        return f"@{column.index + 1}"
    return column.name
