"""MySQL column types -> gold's Spark SQL types, and silver's typed-JSON values -> those types.

Pure (no Spark): the Spark side (``spark_jobs/gold/tables.py``) turns :func:`spark_type` strings into
schemas and calls :func:`convert_value` per cell. Why a module of its own: the mapping is the
contract users query against (documented in ``docs/gold.md``), and it must be testable without
a JVM.

What gold reads: ``silver.row_changes.before`` / ``after`` (typed JSON, one value per
column the image carried) plus, per rows event, the TABLE_MAP's column facts from
``bronze.events.fields``. The TABLE_MAP says *how the decoder rendered* each value
(:class:`Rendering`): with a known charset text is already decoded; with an unknown charset
(``binlog_row_metadata`` MINIMAL/NO_LOG) the decoder emitted the raw bytes as UTF-8 text when
they were valid UTF-8 and as ``0x<hex>`` otherwise, which :func:`raw_bytes_of` undoes exactly.
"""

from __future__ import annotations

import datetime as _dt
import enum
import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from binlake.gold.errors import ConversionError
from binlog_parser.rows.charsets import make_text_decoder
from binlog_parser.rows.json_binary import MySQLJson, json_to_text
from binlog_parser.rows.json_diff import JsonDiff, JsonDiffError, apply_json_diffs

# Spark's DECIMAL holds at most 38 digits; MySQL's up to 65.
SPARK_MAX_DECIMAL_PRECISION = 38

INTEGER_BITS = {"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "bigint": 64}
_SIGNED_INT = {"tinyint": "TINYINT", "smallint": "SMALLINT", "mediumint": "INT", "int": "INT",
               "bigint": "BIGINT"}
_UNSIGNED_INT = {"tinyint": "SMALLINT", "smallint": "INT", "mediumint": "INT", "int": "BIGINT",
                 "bigint": "DECIMAL(20,0)"}
TEXT_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})
BINARY_TYPES = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob",
                          "bit", "geometry", "point", "linestring", "polygon", "multipoint",
                          "multilinestring", "multipolygon", "geometrycollection"})
STRING_TYPES = frozenset({"time", "enum", "set", "json"})


@dataclass(frozen=True)
class PartialJsonUpdate:
    """A MySQL 8 partial JSON update (``binlog_row_value_options=PARTIAL_JSON``) whose before
    image lacked the document: silver holds only the diffs (``{"partial_json": [{op, path,
    value}]}``, value as JSON text). Gold applies them to the document it holds for the row."""

    diffs: tuple[tuple[str, str, str | None], ...]

    @classmethod
    def from_silver(cls, value: dict[str, Any]) -> PartialJsonUpdate:
        return cls(tuple((d["op"], d["path"], d.get("value")) for d in value["partial_json"]))

    def apply(self, document: str | None) -> str:
        """The new JSON text: the diffs applied (MySQL's rules) to ``document``."""
        if document is None:
            raise ConversionError("partial JSON update of a document gold does not hold")
        diffs = tuple(JsonDiff(op, path, None if text is None else MySQLJson(json.loads(text)))
                      for op, path, text in self.diffs)
        try:
            return json_to_text(apply_json_diffs(json.loads(document), diffs))
        except (JsonDiffError, ValueError) as exc:
            raise ConversionError(f"partial JSON update does not apply: {exc}") from exc


@dataclass(frozen=True)
class MySQLColumn:
    """One column of a source table as DDL / TABLE_MAP metadata describe it.

    ``type`` is the lower-case MySQL base type (``int``, ``decimal``, ``varchar``, ``enum``...);
    ``charset`` is the MySQL charset name for text columns (``None`` = not known);
    ``members`` the ENUM/SET members in definition order; ``default`` the DDL default as the
    value MySQL would show (text), used for rows that predate an ``ADD COLUMN``.
    """

    name: str
    type: str
    unsigned: bool = False
    length: int | None = None
    precision: int | None = None
    scale: int | None = None
    fsp: int | None = None
    charset: str | None = None
    members: tuple[str, ...] = ()
    nullable: bool = True
    default: str | None = None
    #: 'VIRTUAL' | 'STORED' for a generated column (both are in the row images: see docs/gold.md)
    generated: str | None = None
    #: an INVISIBLE column (not in SELECT *, but in the row images)
    invisible: bool = False

    def to_json(self) -> dict[str, Any]:
        """A compact JSON-able form (None / empty facts left out) for silver.schema_history."""
        out: dict[str, Any] = {"name": self.name, "type": self.type}
        for key in ("length", "precision", "scale", "fsp", "charset", "default"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.unsigned:
            out["unsigned"] = True
        if self.members:
            out["members"] = list(self.members)
        out["nullable"] = self.nullable
        if self.generated:
            out["generated"] = self.generated
        if self.invisible:
            out["invisible"] = True
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MySQLColumn:
        return cls(name=data["name"], type=data["type"], unsigned=bool(data.get("unsigned")),
                   length=data.get("length"), precision=data.get("precision"),
                   scale=data.get("scale"), fsp=data.get("fsp"), charset=data.get("charset"),
                   members=tuple(data.get("members") or ()), nullable=data.get("nullable", True),
                   default=data.get("default"), generated=data.get("generated"),
                   invisible=bool(data.get("invisible")))


class Rendering(enum.Enum):
    """How the decoder rendered a text/binary value into silver's typed JSON."""

    DECODED = "decoded"        # charset known: the text itself (binary columns: 0x<hex>)
    RAW_OR_HEX = "raw_or_hex"  # charset unknown: the bytes as UTF-8 if valid, else 0x<hex>


def spark_type(column: MySQLColumn) -> str:
    """The Spark SQL type (DDL text) gold stores ``column`` as; see docs/gold.md for why."""
    t = column.type
    if t in INTEGER_BITS:
        return (_UNSIGNED_INT if column.unsigned else _SIGNED_INT)[t]
    if t == "decimal":
        p, s = column.precision or 10, column.scale or 0
        return f"DECIMAL({p},{s})" if p <= SPARK_MAX_DECIMAL_PRECISION else "STRING"
    simple = {"float": "FLOAT", "double": "DOUBLE", "year": "INT", "date": "DATE",
              "datetime": "TIMESTAMP_NTZ", "timestamp": "TIMESTAMP", "vector": "ARRAY<FLOAT>"}
    if t in simple:
        return simple[t]
    if t in BINARY_TYPES or (t in TEXT_TYPES and column.charset == "binary"):
        return "BINARY"
    if t in TEXT_TYPES or t in STRING_TYPES:
        return "STRING"
    raise ConversionError(f"column {column.name!r}: MySQL type {t!r} has no gold mapping")


def raw_bytes_of(rendered: str) -> bytes:
    """Undo the decoder's unknown-charset rendering exactly.

    The decoder writes ``0x<hex>`` only when the bytes are *not* valid UTF-8, so a ``0x…``
    string whose hex decodes to valid UTF-8 must be literal text that happened to look so.
    """
    if rendered.startswith("0x") and len(rendered) % 2 == 0:
        try:
            data = bytes.fromhex(rendered[2:])
        except ValueError:
            return rendered.encode("utf-8")
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return data
    return rendered.encode("utf-8")


def _hex_bytes(rendered: str, column: MySQLColumn) -> bytes:
    if not rendered.startswith("0x"):
        raise ConversionError(f"column {column.name!r}: binary value {rendered[:40]!r} is not 0x<hex>")
    return bytes.fromhex(rendered[2:])


def _integer(value: Any, column: MySQLColumn) -> int | Decimal:
    number = int(value)
    if column.unsigned and number < 0:  # decoded signed: the TABLE_MAP had no SIGNEDNESS
        number += 1 << INTEGER_BITS[column.type]
    return Decimal(number) if column.unsigned and column.type == "bigint" else number


def _date(text: str) -> _dt.date | None:
    try:
        return _dt.date.fromisoformat(text)
    except ValueError:
        return None  # zero date / zero-in-date parts: no Spark DATE holds them


def _datetime(text: str) -> _dt.datetime | None:
    try:
        return _dt.datetime.fromisoformat(text)
    except ValueError:
        return None


def _text(value: Any, column: MySQLColumn, rendering: Rendering) -> str | bytes:
    if not isinstance(value, str):
        raise ConversionError(f"column {column.name!r}: text value {value!r} is not a string")
    if rendering is Rendering.DECODED:
        return value
    data = raw_bytes_of(value)
    decode = make_text_decoder(column.charset or "utf8mb4")
    decoded = decode(data) if decode is not None else data
    return decoded if isinstance(decoded, str) else data.decode("utf-8", errors="replace")


def _binary(value: Any, column: MySQLColumn, rendering: Rendering) -> bytes:
    if not isinstance(value, str):
        raise ConversionError(f"column {column.name!r}: binary value {value!r} is not a string")
    if rendering is Rendering.DECODED or column.type in ("bit", "geometry"):
        data = _hex_bytes(value, column)
    else:
        data = raw_bytes_of(value)
    if column.type == "binary" and column.length and len(data) < column.length:
        data = data.ljust(column.length, b"\0")  # the binlog drops BINARY(n)'s trailing \0s
    return data


def _members(value: Any, column: MySQLColumn) -> str:
    if isinstance(value, str):
        return value
    index = int(value)  # the decoder had no member names: ENUM index / SET bitmask
    if not column.members:
        return str(index)
    if column.type == "enum":
        if not 0 <= index <= len(column.members):
            raise ConversionError(f"column {column.name!r}: ENUM index {index} beyond "
                                  f"{len(column.members)} members")
        return "" if index == 0 else column.members[index - 1]
    return ",".join(m for i, m in enumerate(column.members) if index >> i & 1)


def convert_value(value: Any, column: MySQLColumn, rendering: Rendering = Rendering.DECODED) -> Any:
    """One silver typed-JSON value (after ``json.loads``) as the Python value of its gold type."""
    if value is None:
        return None
    t = column.type
    try:
        if t in INTEGER_BITS:
            return _integer(value, column)
        if t == "decimal":
            text = str(value)
            return Decimal(text) if (column.precision or 10) <= SPARK_MAX_DECIMAL_PRECISION else text
        if t in ("float", "double"):
            return float(value)
        if t == "year":
            return int(value)
        if t == "date":
            return _date(str(value))
        if t == "datetime":
            return _datetime(str(value))
        if t == "timestamp":
            moment = _datetime(str(value))  # the decoder renders TIMESTAMP in UTC
            return None if moment is None else moment.replace(tzinfo=_dt.UTC)
        if t in ("enum", "set"):
            return _members(value, column)
        if t == "json" and isinstance(value, dict) and "partial_json" in value:
            return PartialJsonUpdate.from_silver(value)
        if t == "vector":
            return [float(x) for x in value]
        if spark_type(column) == "BINARY":
            return _binary(value, column, rendering)
        if t in TEXT_TYPES:
            return _text(value, column, rendering)
        return value if isinstance(value, str) else str(value)
    except (ValueError, TypeError, ArithmeticError) as exc:
        if isinstance(exc, ConversionError):
            raise
        raise ConversionError(f"column {column.name!r} ({t}): cannot convert {value!r}: {exc}") from exc


def default_value(column: MySQLColumn) -> Any:
    """The DDL default as gold's value (what the server shows on rows older than the column)."""
    if column.default is None:
        return None
    rendering = Rendering.DECODED
    if spark_type(column) == "BINARY" and not column.default.startswith("0x"):
        return column.default.encode("utf-8")
    return convert_value(column.default, column, rendering)


_TABLE_MAP_TYPES = {
    "TINY": "tinyint", "SHORT": "smallint", "INT24": "mediumint", "LONG": "int",
    "LONGLONG": "bigint", "DECIMAL": "decimal", "NEWDECIMAL": "decimal", "FLOAT": "float",
    "DOUBLE": "double", "BIT": "bit", "YEAR": "year", "DATE": "date", "NEWDATE": "date",
    "TIME": "time", "TIME2": "time", "DATETIME": "datetime", "DATETIME2": "datetime",
    "TIMESTAMP": "timestamp", "TIMESTAMP2": "timestamp", "ENUM": "enum", "SET": "set",
    "JSON": "json", "GEOMETRY": "geometry", "VECTOR": "vector",
}
_TABLE_MAP_STRINGS = frozenset({"VARCHAR", "VAR_STRING", "STRING"})
_TABLE_MAP_BLOBS = frozenset({"BLOB", "TINY_BLOB", "MEDIUM_BLOB", "LONG_BLOB"})


def table_map_name(column: dict[str, Any]) -> str:
    """The column's name as the TABLE_MAP knows it; ``@N`` (1-based) when it does not."""
    if column.get("name_from") == "fallback":
        name = str(column.get("name", ""))
        return "@" + name[4:] if name.startswith("col_") else "@" + name
    return str(column["name"])


def rendering_of(column: dict[str, Any]) -> Rendering:
    """How the decoder rendered this TABLE_MAP column's string/blob values (see module doc)."""
    if column.get("type") in _TABLE_MAP_STRINGS | _TABLE_MAP_BLOBS and column.get("charset") is None:
        return Rendering.RAW_OR_HEX
    return Rendering.DECODED


def column_from_table_map(column: dict[str, Any]) -> MySQLColumn:
    """What one TABLE_MAP column (``bronze.events.fields`` JSON) alone says about a column.

    Without FULL metadata the name is ``@N`` and, for strings/blobs without a charset, text vs
    binary is unknown: such a column is typed ``blob`` (its bytes kept exactly), never guessed.
    """
    kind = str(column.get("type"))
    charset = column.get("charset")
    if kind in _TABLE_MAP_STRINGS:
        base = "varchar" if charset not in (None, "binary") else "varbinary"
    elif kind in _TABLE_MAP_BLOBS:
        base = "text" if charset not in (None, "binary") else "blob"
    elif kind in _TABLE_MAP_TYPES:
        base = _TABLE_MAP_TYPES[kind]
    else:
        raise ConversionError(f"column {column.get('name')!r}: binlog type {kind} has no gold mapping")
    members = column.get("enum_values") or column.get("set_values") or ()
    return MySQLColumn(
        name=table_map_name(column), type=base, unsigned=bool(column.get("unsigned")),
        length=column.get("length") if base in ("varchar", "varbinary") else column.get("bits"),
        precision=column.get("precision"), scale=column.get("scale"), fsp=column.get("fsp"),
        charset=charset, members=tuple(members), nullable=bool(column.get("nullable", True)))
