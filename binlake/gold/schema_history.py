"""Schema history of source tables, from the DDL the archive holds (pure; no Spark).

Two layers, each where it is reliable:

* **Statement structure** (which statement, which tables, the items of a column list, the actions
  of an ALTER, RENAME's pairs) by a small hand-written lexer and splitter below. Why not sqlglot
  for that too: checked with sqlglot 30.30, one clause it does not know turns the whole statement
  into an unparsed ``Command`` or an error, and MySQL DDL is full of them: ``RENAME TABLE a TO b,
  …``, ``ALTER ONLINE|IGNORE TABLE``, ``ALTER … RENAME AS``, ``ADD COLUMN (a …, b …)``, ``CONVERT
  TO CHARACTER SET``, every partition clause, ``DISCARD TABLESPACE``; and sqlglot drops
  versioned comments (``/*!50100 … */``, ``/*M!100100 … */``) whose text the server executes.
  The splitter only needs quotes, comments and parentheses to be right; unknown table options,
  index and partition clauses are then skipped one action at a time.
* **Each column definition** (type with length / precision / fsp, UNSIGNED, CHARACTER SET /
  COLLATE, ENUM/SET members, NULL / NOT NULL, DEFAULT, PRIMARY KEY, generated, INVISIBLE) by
  sqlglot (MySQL dialect): a real AST. Type synonyms sqlglot does not know (``SERIAL``, ``INT1``,
  ``NATIONAL CHAR``, ``LONG VARCHAR``, spatial subtypes such as ``POINT``) are rewritten to the
  type MySQL itself stores before it parses; attributes that do not change the shape and that it
  rejects (``COLUMN_FORMAT``, ``STORAGE``, ``COMPRESSED``, ``SRID``, ``WITH[OUT] SYSTEM
  VERSIONING``, MariaDB's ``PERSISTENT`` for ``STORED``) are dropped first.

Whatever is not understood becomes a version with ``schema=None`` and a warning that names the
statement's problem: gold then says it cannot know the table, never guesses. The history is
replayed per source in binlog order (:class:`Coordinates`), starting from an optional seed
(``SHOW CREATE TABLE`` texts) for tables created before the archive starts. Statements on
TEMPORARY tables are skipped: their rows are never in a row-based binlog.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

import sqlglot
from sqlglot import exp

from binlake.gold.errors import DdlError
from binlake.gold.types import MySQLColumn

TableKey = tuple[str, str]  # (db, table)


@dataclass(frozen=True, order=True)
class Coordinates:
    """A binlog position that orders a source's events: numbered file, offset, embedded index."""

    file_seq: int
    pos: int
    payload_index: int = -1
    row_index: int = -1
    file: str = ""


@dataclass(frozen=True)
class TableSchema:
    """A table's columns in table order and its primary key (empty: none known / none)."""

    columns: tuple[MySQLColumn, ...]
    primary_key: tuple[str, ...] = ()

    def index_of(self, name: str) -> int | None:
        folded = name.casefold()  # MySQL column names are case-insensitive
        for i, column in enumerate(self.columns):
            if column.name.casefold() == folded:
                return i
        return None


@dataclass(frozen=True)
class DdlStatement:
    """One statement from ``silver.statements`` (or a seed file) at its coordinates."""

    at: Coordinates
    default_db: str | None
    sql: str
    gtid: str | None = None


@dataclass(frozen=True)
class SchemaVersion:
    """From ``at`` on, ``(db, table)`` has ``schema`` (None: dropped, or unknown if ``warning``)."""

    db: str
    table: str
    version: int
    at: Coordinates
    origin: str  # 'seed' | 'ddl'
    statement: str
    schema: TableSchema | None
    warning: str | None = None
    renames: tuple[tuple[str, str], ...] = ()  # (old, new) column renames done by this version
    #: the table this version's rows came from when the statement renamed it here (RENAME TABLE,
    #: ALTER TABLE ... RENAME): gold follows the rows, not only the schema
    renamed_from: TableKey | None = None
    #: the statement removed every row and kept the schema (TRUNCATE TABLE)
    truncated: bool = False


_GAP = r"(?:\s|/\*(?!!|M!).*?\*/|/\*M?!\d*|\*/|--[^\n]*\n|\#[^\n]*\n)"  # blanks, comments, versioned-comment marks
_TABLE_DDL = re.compile(rf"^{_GAP}*(?:(?:CREATE|ALTER|DROP|RENAME)(?:{_GAP}+(?:OR{_GAP}+REPLACE|TEMPORARY|ONLINE|IGNORE))*"
                        rf"{_GAP}+TABLES?\b|TRUNCATE\b)", re.IGNORECASE | re.DOTALL)
_INT_TYPES = {"TINYINT": "tinyint", "SMALLINT": "smallint", "MEDIUMINT": "mediumint",
              "INT": "int", "BIGINT": "bigint"}
_PLAIN_TYPES = {"DOUBLE": "double", "FLOAT": "float", "BIT": "bit", "YEAR": "year", "DATE": "date",
                "TIME": "time", "DATETIME": "datetime", "TIMESTAMP": "timestamp",
                "TIMESTAMPTZ": "timestamp", "TIMESTAMPLTZ": "timestamp", "CHAR": "char",
                "NCHAR": "char", "VARCHAR": "varchar", "NVARCHAR": "varchar", "BINARY": "binary",
                "VARBINARY": "varbinary", "TINYTEXT": "tinytext", "TEXT": "text",
                "MEDIUMTEXT": "mediumtext", "LONGTEXT": "longtext", "TINYBLOB": "tinyblob",
                "BLOB": "blob", "MEDIUMBLOB": "mediumblob", "LONGBLOB": "longblob", "ENUM": "enum",
                "SET": "set", "JSON": "json", "GEOMETRY": "geometry", "DECIMAL": "decimal",
                "BOOLEAN": "tinyint"}
_TEXTUAL = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set"}
_SPATIAL = {"POINT", "LINESTRING", "POLYGON", "MULTIPOINT", "MULTILINESTRING", "MULTIPOLYGON",
            "GEOMETRYCOLLECTION", "GEOMCOLLECTION"}
#: one-word type synonyms MySQL accepts and stores as another type (what SHOW CREATE TABLE shows)
_SYNONYMS = {"INT1": "TINYINT", "INT2": "SMALLINT", "INT3": "MEDIUMINT", "MIDDLEINT": "MEDIUMINT",
             "INT4": "INT", "INTEGER": "INT", "INT8": "BIGINT", "BOOL": "BOOLEAN", "DEC": "DECIMAL",
             "NUMERIC": "DECIMAL", "FIXED": "DECIMAL", "REAL": "DOUBLE", "FLOAT4": "FLOAT",
             "FLOAT8": "DOUBLE", "CHARACTER": "CHAR", "SERIAL": "BIGINT UNSIGNED NOT NULL AUTO_INCREMENT UNIQUE"}
#: bytes per character of the charsets whose columns CONVERT TO may widen (TEXT -> MEDIUMTEXT)
_MBMAXLEN = {"latin1": 1, "ascii": 1, "binary": 1, "cp1250": 1, "cp1251": 1, "cp1252": 1, "latin2": 1,
             "greek": 1, "hebrew": 1, "koi8r": 1, "swe7": 1, "utf8": 3, "utf8mb3": 3, "utf8mb4": 4,
             "ucs2": 2, "utf16": 4, "utf16le": 4, "utf32": 4, "gbk": 2, "big5": 2, "sjis": 2,
             "ujis": 3, "euckr": 2, "gb2312": 2, "gb18030": 4, "cp932": 2, "eucjpms": 3}
_TEXT_SIZES = (("tinytext", 255), ("text", 65535), ("mediumtext", 16777215), ("longtext", 4294967295))
_BLOB_SIZES = (("tinyblob", 255), ("blob", 65535), ("mediumblob", 16777215), ("longblob", 4294967295))
#: ALTER actions (first word) that never change the columns, their order or the primary key
_SHAPELESS = frozenset({
    "ALGORITHM", "LOCK", "ENGINE", "TYPE", "AUTO_INCREMENT", "COMMENT", "ROW_FORMAT", "KEY_BLOCK_SIZE",
    "STATS_AUTO_RECALC", "STATS_PERSISTENT", "STATS_SAMPLE_PAGES", "PACK_KEYS", "CHECKSUM",
    "TABLE_CHECKSUM", "DELAY_KEY_WRITE", "MAX_ROWS", "MIN_ROWS", "AVG_ROW_LENGTH", "ENCRYPTION",
    "ENCRYPTED", "ENCRYPTION_KEY_ID", "COMPRESSION", "PAGE_COMPRESSED", "PAGE_COMPRESSION_LEVEL",
    "PAGE_CHECKSUM", "TRANSACTIONAL", "INSERT_METHOD", "UNION", "DATA", "INDEX", "TABLESPACE",
    "STORAGE", "FORCE", "ORDER", "DISCARD", "IMPORT", "ENABLE", "DISABLE", "PARTITION", "PARTITIONS",
    "SUBPARTITION", "REMOVE", "UPGRADE", "COALESCE", "REORGANIZE", "EXCHANGE", "ANALYZE", "CHECK",
    "OPTIMIZE", "REBUILD", "REPAIR", "TRUNCATE", "WITH", "WITHOUT", "SECONDARY_ENGINE",
    "SECONDARY_ENGINE_ATTRIBUTE", "ENGINE_ATTRIBUTE", "AUTOEXTEND_SIZE", "CONNECTION", "PASSWORD",
    "IETF_QUOTES", "SEQUENCE", "WAIT", "NOWAIT", "START", "STATS_SAMPLE_PERCENT", "ATTRIBUTE",
    "SECONDARY_LOAD", "SECONDARY_UNLOAD", "ADD_CHECK"})
#: what follows ADD / DROP when the action is about an index, key, constraint or partition
_NOT_A_COLUMN = frozenset({"INDEX", "KEY", "UNIQUE", "FULLTEXT", "SPATIAL", "FOREIGN", "CONSTRAINT",
                           "CHECK", "PARTITION", "PERIOD", "VECTOR"})
#: column attributes sqlglot rejects and that do not change the shape: (word, tokens it takes)
_DROPPED_ATTRIBUTES = {"COLUMN_FORMAT": 1, "STORAGE": 1, "SRID": 1, "ENGINE_ATTRIBUTE": 1,
                       "SECONDARY_ENGINE_ATTRIBUTE": 1, "VISIBLE": 0}


def is_table_ddl(sql: str) -> bool:
    """Cheap pre-filter: statements that may change a table's shape, name or rows (TRUNCATE)."""
    return bool(_TABLE_DDL.match(sql))


# ------------------------------------------------------------------ lexer

class _Tok(NamedTuple):
    kind: str  # 'id' (bare word) | 'qid' (`quoted`) | 'str' | 'num' | 'op'
    text: str

    @property
    def word(self) -> str:
        """The keyword this token may be (bare words only), upper case; '' otherwise."""
        return self.text.upper() if self.kind == "id" else ""

    @property
    def ident(self) -> str:
        """The identifier this token names (backquotes removed)."""
        return self.text[1:-1].replace("``", "`") if self.kind == "qid" else self.text


_LEX = re.compile(r"""
    (?P<ws>\s+|--(?:\s[^\n]*)?(?:\n|$)|\#[^\n]*|/\*(?!!|M!).*?\*/)
  | (?P<vopen>/\*M?!\d*)
  | (?P<vclose>\*/)
  | (?P<qid>`(?:[^`]|``)*`)
  | (?P<str>(?:[nNbBxX]|_\w+)?'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
  | (?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w$]))
  | (?P<id>[\w$]+)
  | (?P<op><=>|<>|<=|>=|!=|:=|\|\||&&|<<|>>|->>|->|.)
""", re.VERBOSE | re.DOTALL)


def _lex(sql: str) -> list[_Tok]:
    """The statement's tokens; comments dropped, versioned comments' text kept (the server runs
    ``/*!NNNNN …*/`` on every version a binlog comes from, and MariaDB ``/*M!NNNNNN …*/``)."""
    out: list[_Tok] = []
    versioned = 0
    for m in _LEX.finditer(sql):
        kind = m.lastgroup or "op"
        if kind == "ws":
            continue
        if kind == "vopen":
            versioned += 1
        elif kind == "vclose" and versioned:
            versioned -= 1
        elif kind == "vclose":
            out += [_Tok("op", "*"), _Tok("op", "/")]
        else:
            out.append(_Tok(kind, m.group()))
    return out


def _text(toks: Sequence[_Tok]) -> str:
    return " ".join(t.text for t in toks)


def _close(toks: Sequence[_Tok], i: int) -> int:
    """The index of the ``)`` matching the ``(`` at ``i``."""
    depth = 0
    for j in range(i, len(toks)):
        if toks[j].kind == "op" and toks[j].text == "(":
            depth += 1
        elif toks[j].kind == "op" and toks[j].text == ")":
            depth -= 1
            if depth == 0:
                return j
    raise DdlError("unbalanced parentheses")


def _split(toks: Sequence[_Tok], sep: str = ",") -> list[list[_Tok]]:
    """``toks`` cut at the top-level ``sep`` tokens."""
    parts: list[list[_Tok]] = [[]]
    depth = 0
    for t in toks:
        if t.kind == "op" and t.text == "(":
            depth += 1
        elif t.kind == "op" and t.text == ")":
            depth -= 1
        if depth == 0 and t.kind == "op" and t.text == sep:
            parts.append([])
        else:
            parts[-1].append(t)
    return [p for p in parts if p]


class _Cursor:
    """A position in a token list, with keyword look-ahead."""

    def __init__(self, toks: Sequence[_Tok], i: int = 0) -> None:
        self.toks, self.i = toks, i

    def word(self, ahead: int = 0) -> str:
        j = self.i + ahead
        return self.toks[j].word if j < len(self.toks) else ""

    def accept(self, *words: str) -> bool:
        """Step over ``words`` when they come next, in order."""
        if all(self.word(k) == w for k, w in enumerate(words)):
            self.i += len(words)
            return True
        return False

    def op(self, text: str) -> bool:
        return self.i < len(self.toks) and self.toks[self.i].kind == "op" and self.toks[self.i].text == text

    def take(self) -> _Tok:
        if self.i >= len(self.toks):
            raise DdlError("statement ends too early")
        self.i += 1
        return self.toks[self.i - 1]

    def table(self, default_db: str | None) -> TableKey:
        """A ``[db.]table`` name."""
        first = self.take()
        if self.op("."):
            self.i += 1
            return first.ident, self.take().ident
        if not default_db:
            raise DdlError(f"table {first.ident!r} has no database and the statement no default database")
        return default_db, first.ident

    def rest(self) -> list[_Tok]:
        return list(self.toks[self.i:])


# ------------------------------------------------------------------ column definitions

def _name(identifier: exp.Expression | None) -> str:
    return identifier.name if identifier is not None else ""


def _int_params(kind: exp.DataType) -> list[int]:
    out = []
    for param in kind.expressions:
        inner = param.this if isinstance(param, exp.DataTypeParam) else param
        if isinstance(inner, exp.Literal) and not inner.is_string:
            out.append(int(inner.this))
    return out


def _literal_default(node: exp.Expr) -> str | None:
    """The DEFAULT as the value the server shows; DdlError for an expression (evaluated by the
    server when the row is written: the archive does not record its value)."""
    if isinstance(node, exp.Paren):
        return _literal_default(node.this)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Literal):
        return str(node.this)
    if isinstance(node, exp.Boolean):
        return "1" if node.this else "0"
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        return "-" + str(node.this.this)
    if isinstance(node, exp.BitString):
        return str(int(str(node.this) or "0", 2))
    if isinstance(node, exp.HexString):
        return "0x" + str(node.this).lower()
    if isinstance(node, exp.Introducer) and isinstance(node.expression, exp.Literal):
        return str(node.expression.this)
    raise DdlError(f"DEFAULT {node.sql('mysql')} is not a constant (old rows' value unknown)")


def _base_type(kind: exp.DataType) -> tuple[str, bool]:
    name = kind.this.name
    unsigned = name.startswith("U") and name[1:] in (*_INT_TYPES, "DECIMAL", "DOUBLE", "FLOAT")
    if unsigned:
        name = name[1:]
    if name in _INT_TYPES:
        return _INT_TYPES[name], unsigned
    if name in _PLAIN_TYPES:
        return _PLAIN_TYPES[name], unsigned
    raise DdlError(f"column type {kind.sql('mysql')} is not one gold maps")


def _sized(base: str, length: int | None, charset: str | None) -> str:
    """``TEXT(n)`` / ``BLOB(n)``: the smallest type that holds ``n`` characters / bytes."""
    if length is None or base not in ("text", "blob"):
        return base
    sizes = _TEXT_SIZES if base == "text" else _BLOB_SIZES
    need = length * (_MBMAXLEN.get(charset or "", 4) if base == "text" else 1)
    return next(name for name, size in sizes if need <= size)


@dataclass(frozen=True)
class _ColumnFacts:
    column: MySQLColumn
    primary_key: bool
    computed_default: bool  # DEFAULT is an expression (or AUTO_INCREMENT / generated): old rows unknown


def _column_facts(coldef: exp.ColumnDef, table_charset: str | None,
                  real_type: str | None = None, national: bool = False) -> _ColumnFacts:
    kind = coldef.args.get("kind")
    if not isinstance(kind, exp.DataType):
        raise DdlError(f"column {coldef.name!r} has no type")
    base, unsigned = _base_type(kind)
    params = _int_params(kind)
    charset, nullable, default, is_pk, computed = "utf8mb3" if national else None, True, None, False, False
    generated: str | None = None
    invisible = False
    for constraint in coldef.args.get("constraints") or []:
        ckind = constraint.args.get("kind")
        if isinstance(ckind, exp.CharacterSetColumnConstraint):
            charset = _name(ckind.this).lower()
        elif isinstance(ckind, exp.CollateColumnConstraint) and charset is None:
            charset = _name(ckind.this).lower().split("_")[0]
        elif isinstance(ckind, exp.NotNullColumnConstraint):
            nullable = bool(ckind.args.get("allow_null"))
        elif isinstance(ckind, exp.DefaultColumnConstraint):
            try:
                default = _literal_default(ckind.this)
            except DdlError:
                computed = True
        elif isinstance(ckind, exp.PrimaryKeyColumnConstraint):
            is_pk, nullable = True, False
        elif isinstance(ckind, exp.AutoIncrementColumnConstraint):
            computed = True
        elif isinstance(ckind, exp.ComputedColumnConstraint):
            generated, computed = ("STORED" if ckind.args.get("persisted") else "VIRTUAL"), True
        elif isinstance(ckind, exp.InvisibleColumnConstraint):
            invisible = True
    if base in _TEXTUAL:
        charset = charset or table_charset
    elif base in ("binary", "varbinary") or base.endswith("blob"):
        charset = "binary"
    if charset == "utf8":
        charset = "utf8mb3"
    if base in ("float", "double") and len(params) == 1 and params[0] > 24:
        base = "double"  # FLOAT(p): p > 24 is a DOUBLE
    base = real_type or _sized(base, params[0] if params else None, charset)
    column = MySQLColumn(
        name=coldef.name, type=base, unsigned=unsigned,
        length=(params[0] if params else 1) if base in ("char", "varchar", "binary", "varbinary", "bit") else None,
        precision=(params[0] if params else 10) if base == "decimal" else None,
        scale=(params[1] if len(params) > 1 else 0) if base == "decimal" else None,
        fsp=(params[0] if params else 0) if base in ("time", "datetime", "timestamp") else None,
        charset=charset, members=tuple(str(e.this) for e in kind.expressions
                                       if isinstance(e, exp.Literal) and e.is_string),
        nullable=nullable, default=default, generated=generated, invisible=invisible)
    if base == "tinyint" and kind.this.name == "BOOLEAN":
        column = replace(column, length=1)
    if not nullable and default is None and not computed:
        column = replace(column, default=_implicit_default(column))
    return _ColumnFacts(column, is_pk, computed)


def _implicit_default(column: MySQLColumn) -> str | None:
    """The value a NOT NULL column without DEFAULT gets on rows that predate it (the server's
    implicit default): 0, '', the first ENUM member, the zero date / time."""
    t = column.type
    if t in _INT_TYPES.values() or t in ("decimal", "float", "double", "bit", "year"):
        return "0"
    if t in ("char", "varchar", "set") or t.endswith("text"):
        return ""
    if t == "enum":
        return column.members[0] if column.members else None
    fraction = "." + "0" * column.fsp if column.fsp else ""
    return {"date": "0000-00-00", "time": "00:00:00" + fraction,
            "datetime": "0000-00-00 00:00:00" + fraction}.get(t)


def _normalized_type(toks: list[_Tok]) -> tuple[list[_Tok], str | None, bool]:
    """The column definition (name first) with its type spelled the way sqlglot parses it, the
    spatial type it stands for, and whether it is a NATIONAL (utf8mb3) character type."""
    name, rest = toks[0], toks[1:]
    words = [t.word for t in rest[:3]] + ["", "", ""]
    national = words[0] in ("NATIONAL", "NCHAR", "NVARCHAR")
    if words[0] == "NATIONAL":
        rest, words = rest[1:], words[1:]
    replacement: str | None = None
    size = 1
    if words[0] == "LONG":
        size, replacement = (2, "MEDIUMBLOB") if words[1] == "VARBINARY" else (1, "MEDIUMTEXT")
        if words[1] in ("VARCHAR", "VARBINARY"):
            size = 2
        elif words[1:3] == ["CHAR", "VARYING"]:
            size = 3
    elif words[0] in ("CHAR", "CHARACTER", "NCHAR") and words[1] == "VARYING":
        size, replacement = 2, "VARCHAR"
    elif words[0] == "DOUBLE" and words[1] == "PRECISION":
        size, replacement = 2, "DOUBLE"
    elif words[0] == "NCHAR" and words[1] == "VARCHAR":
        size, replacement = 2, "VARCHAR"
    elif words[0] in ("NCHAR", "NVARCHAR"):
        replacement = words[0][1:]
    elif words[0] in _SYNONYMS:
        replacement = _SYNONYMS[words[0]]
    elif words[0] in _SPATIAL:
        return [name, _Tok("id", "GEOMETRY"), *rest[1:]], words[0].lower(), False
    if replacement is None:
        return [name, *rest], None, national
    return [name, *(_Tok("id", w) for w in replacement.split()), *rest[size:]], None, national


def _without_ignored_attributes(toks: list[_Tok]) -> list[_Tok]:
    """Drop the column attributes sqlglot rejects that do not change the shape."""
    out: list[_Tok] = []
    i = 0
    while i < len(toks):
        word = toks[i].word if i > 1 else ""
        if word in _DROPPED_ATTRIBUTES:
            i += 1 + _DROPPED_ATTRIBUTES[word]
            if word in ("ENGINE_ATTRIBUTE", "SECONDARY_ENGINE_ATTRIBUTE") and toks[i - 1].text == "=":
                i += 1
            continue
        if word == "COMPRESSED":
            i += 3 if i + 1 < len(toks) and toks[i + 1].text == "=" else 1
            continue
        if word in ("WITH", "WITHOUT") and i + 2 < len(toks) and toks[i + 1].word == "SYSTEM":
            i += 3
            continue
        if word == "BYTE" and len(out) > 1 and out[1].word == "CHAR":  # CHAR(n) BYTE is BINARY(n)
            out[1] = _Tok("id", "BINARY")
            i += 1
            continue
        out.append(_Tok("id", "STORED") if word == "PERSISTENT" else toks[i])
        i += 1
    return out


def _position(toks: list[_Tok]) -> tuple[list[_Tok], tuple[str, str] | None]:
    """A trailing ``FIRST`` / ``AFTER col`` cut off the definition."""
    if toks and toks[-1].word == "FIRST":
        return toks[:-1], ("FIRST", "")
    if len(toks) > 2 and toks[-2].word == "AFTER":
        return toks[:-2], ("AFTER", toks[-1].ident)
    return toks, None


def _parse_column(toks: list[_Tok], table_charset: str | None) -> _ColumnFacts:
    """One column definition (name, type, attributes; no position) through sqlglot."""
    if len(toks) < 2:
        raise DdlError(f"column definition {_text(toks)!r} has no type")
    toks, spatial, national = _normalized_type(toks)
    toks = _without_ignored_attributes(toks)
    name = "`" + toks[0].ident.replace("`", "``") + "`"
    sql = f"CREATE TABLE _t ({name} {_text(toks[1:])})"
    try:
        tree = sqlglot.parse_one(sql, read="mysql")
    except sqlglot.errors.SqlglotError as exc:
        raise DdlError(f"column definition {_text(toks)!r} does not parse: "
                       f"{str(exc).splitlines()[0]}") from None
    body = tree.this if isinstance(tree, exp.Create) else None
    coldefs = [e for e in body.expressions if isinstance(e, exp.ColumnDef)] if isinstance(body, exp.Schema) else []
    if len(coldefs) != 1:
        raise DdlError(f"column definition {_text(toks)!r} not understood")
    return _column_facts(coldefs[0], table_charset, spatial, national)


def _key_columns(toks: list[_Tok]) -> list[str]:
    """The column names of an index's ``(a, b(10) DESC, …)`` part (the first parentheses)."""
    for i, t in enumerate(toks):
        if t.kind == "op" and t.text == "(":
            inner = toks[i + 1:_close(toks, i)]
            return [part[0].ident for part in _split(inner) if part]
    raise DdlError(f"key {_text(toks)!r} names no columns")


def _primary_key_of(toks: list[_Tok]) -> list[str] | None:
    """``[CONSTRAINT [name]] PRIMARY KEY … (cols)``: its columns; None for any other index."""
    cur = _Cursor(toks)
    if cur.accept("CONSTRAINT"):
        if cur.word() != "PRIMARY":
            cur.take()  # the constraint's name
    return _key_columns(cur.rest()) if cur.word() == "PRIMARY" else None


# ------------------------------------------------------------------ tables

def _with_pk(schema: TableSchema, pk: Iterable[str]) -> TableSchema:
    names: list[str] = []
    cols = list(schema.columns)
    for name in pk:
        i = schema.index_of(name)
        if i is None:
            raise DdlError(f"PRIMARY KEY names unknown column {name!r}")
        names.append(cols[i].name)
        cols[i] = replace(cols[i], nullable=False)
    return TableSchema(tuple(cols), tuple(names))


def _table_charset(toks: Sequence[_Tok]) -> str | None:
    """``[DEFAULT] CHARSET|CHARACTER SET [=] x`` / ``COLLATE [=] x`` among table options."""
    charset = None
    depth = 0
    for i, t in enumerate(toks):
        depth += (t.text == "(") - (t.text == ")") if t.kind == "op" else 0
        if depth or i + 1 >= len(toks):
            continue
        j = i + 1 + (t.word == "CHARACTER" and toks[i + 1].word == "SET")
        if t.word in ("CHARSET", "CHARACTER", "COLLATE") and j < len(toks):
            j += toks[j].text == "="
            if j < len(toks) and t.word != "COLLATE":
                charset = toks[j].ident.lower()
            elif j < len(toks) and charset is None:
                charset = toks[j].ident.lower().split("_")[0]
    return "utf8mb3" if charset == "utf8" else charset


class _Shape:
    """A table's columns, key and default charset while a statement changes them.

    ``origins`` holds each column's name before the statement (None: added by it): an ALTER's
    DROP / CHANGE / MODIFY / RENAME COLUMN name the table's columns as they were before it (the
    server rejects ``ADD c …, DROP c``), while AFTER names the new column list."""

    def __init__(self, schema: TableSchema, charset: str | None) -> None:
        self.columns = list(schema.columns)
        self.origins: list[str | None] = [c.name for c in schema.columns]
        self.pk = list(schema.primary_key)
        self.charset = charset
        self.renames: list[tuple[str, str]] = []
        self.notes: list[str] = []

    def index(self, name: str) -> int | None:
        return TableSchema(tuple(self.columns)).index_of(name)

    def find(self, name: str) -> int | None:
        """The index of the column the table had as ``name`` before the statement."""
        folded = name.casefold()
        return next((i for i, o in enumerate(self.origins) if o is not None and o.casefold() == folded), None)

    def place(self, column: MySQLColumn, position: tuple[str, str] | None, at: int | None = None,
              origin: str | None = None) -> None:
        if position is None:
            i = len(self.columns) if at is None else at
        elif position[0] == "FIRST":
            i = 0
        else:
            after = self.index(position[1])
            if after is None:
                raise DdlError(f"AFTER names unknown column {position[1]!r}")
            i = after + 1
        self.columns.insert(i, column)
        self.origins.insert(i, origin)

    def pop(self, name: str) -> tuple[int, MySQLColumn, str | None]:
        i = self.find(name)
        if i is None:
            raise DdlError(f"unknown column {name!r}")
        return i, self.columns.pop(i), self.origins.pop(i)

    def schema(self) -> TableSchema:
        return _with_pk(TableSchema(tuple(self.columns)), self.pk)

    def add(self, toks: list[_Tok], if_not_exists: bool = False) -> None:
        toks, position = _position(toks)
        if if_not_exists and self.index(toks[0].ident) is not None:
            return
        facts = _parse_column(toks, self.charset)
        self.place(facts.column, position)
        self.pk += [facts.column.name] if facts.primary_key else []
        if facts.computed_default:
            self.notes.append(f"column {facts.column.name!r} added with a value the server computes "
                              f"(DEFAULT expression, AUTO_INCREMENT or generated): rows older than it "
                              f"are not known to hold it")

    def change(self, old: str, toks: list[_Tok], if_exists: bool = False) -> None:
        toks, position = _position(toks)
        if if_exists and self.find(old) is None:
            return
        at, previous, origin = self.pop(old)
        charset = self.charset or (previous.charset if previous.charset != "binary" else None)
        column = _parse_column(toks, charset).column
        self.place(column, position, at, origin)
        self.pk = [column.name if p.casefold() == previous.name.casefold() else p for p in self.pk]
        if column.name != previous.name:
            self.renames.append((previous.name, column.name))

    def convert(self, charset: str) -> None:
        """``CONVERT TO CHARACTER SET``: every text column's charset; TEXT types widen to hold
        as many characters as before (the server does the same)."""
        for i, col in enumerate(self.columns):
            if col.type not in _TEXTUAL or col.charset == charset:
                continue
            new = replace(col, charset=charset)
            sizes = dict(_TEXT_SIZES)
            if col.type in sizes:
                chars = sizes[col.type] // _MBMAXLEN.get(col.charset or "", 1)
                need = chars * _MBMAXLEN.get(charset, 4)
                new = replace(new, type=next(n for n, s in _TEXT_SIZES if need <= s and s >= sizes[col.type]))
            self.columns[i] = new
        self.charset = charset


def _alter_add(shape: _Shape, cur: _Cursor) -> bool:
    """``ADD …``: True when it changed the shape."""
    column = cur.accept("COLUMN")
    exists = cur.accept("IF", "NOT", "EXISTS")
    if not column and cur.word() in ("SYSTEM",):
        raise DdlError("ADD SYSTEM VERSIONING adds hidden columns gold does not model")
    if not column and (cur.word() in _NOT_A_COLUMN or cur.word() == "PRIMARY"):
        pk = _primary_key_of(cur.rest())
        if pk is not None:
            shape.pk = pk
        return pk is not None
    if cur.op("("):
        inner = cur.toks[cur.i + 1:_close(cur.toks, cur.i)]
        for part in _split(inner):
            pk = _primary_key_of(part) if part[0].word in (*_NOT_A_COLUMN, "PRIMARY") else None
            if pk is not None:
                shape.pk = pk
            elif part[0].word not in (*_NOT_A_COLUMN, "PRIMARY"):
                shape.add(part, exists)
        return True
    shape.add(cur.rest(), exists)
    return True


def _alter_drop(shape: _Shape, cur: _Cursor) -> bool:
    if cur.accept("PRIMARY", "KEY"):
        shape.pk = []
        return True
    if cur.word() == "SYSTEM":
        raise DdlError("DROP SYSTEM VERSIONING removes hidden columns gold does not model")
    column = cur.accept("COLUMN")
    if not column and cur.word() in _NOT_A_COLUMN | {"FOREIGN"}:
        return False
    exists = cur.accept("IF", "EXISTS")
    name = cur.take().ident
    if exists and shape.find(name) is None:
        return False
    _, dropped, _ = shape.pop(name)
    shape.pk = [p for p in shape.pk if p.casefold() != dropped.name.casefold()]
    return True


def _alter_column_attr(shape: _Shape, cur: _Cursor) -> bool:
    """``ALTER [COLUMN] c SET DEFAULT … | DROP DEFAULT | SET [IN]VISIBLE``."""
    if cur.word() in ("INDEX", "KEY", "CONSTRAINT", "CHECK"):
        return False
    cur.accept("COLUMN")
    cur.accept("IF", "EXISTS")
    name = cur.take().ident
    i = shape.find(name)
    if i is None:
        raise DdlError(f"ALTER COLUMN names unknown column {name!r}")
    col = shape.columns[i]
    if cur.accept("DROP", "DEFAULT"):
        shape.columns[i] = replace(col, default=None)
    elif cur.accept("SET", "DEFAULT"):
        text = _text(cur.rest())
        try:
            shape.columns[i] = replace(col, default=_literal_default(sqlglot.parse_one(text, read="mysql")))
        except (sqlglot.errors.SqlglotError, DdlError):
            shape.columns[i] = replace(col, default=None)
            shape.notes.append(f"column {name!r}: DEFAULT {text} is not a constant")
    elif cur.accept("SET", "VISIBLE") or cur.accept("SET", "INVISIBLE"):
        shape.columns[i] = replace(col, invisible=cur.toks[cur.i - 1].word == "INVISIBLE")
    else:
        raise DdlError(f"ALTER COLUMN {_text(cur.rest())!r} not understood")
    return shape.columns[i] != col


def _alter_action(shape: _Shape, toks: list[_Tok], key: TableKey) -> tuple[bool, TableKey]:
    """Apply one ALTER action; (did it change the shape, the table's name after it)."""
    cur = _Cursor(toks)
    first = cur.word()
    cur.i += 1
    if first == "ADD":
        return _alter_add(shape, cur), key
    if first == "DROP":
        return _alter_drop(shape, cur), key
    if first in ("MODIFY", "CHANGE"):
        cur.accept("COLUMN")
        exists = cur.accept("IF", "EXISTS")
        old = cur.take().ident if first == "CHANGE" else cur.toks[cur.i].ident
        shape.change(old, cur.rest(), exists)
        return True, key
    if first == "RENAME":
        if cur.word() in ("INDEX", "KEY"):
            return False, key
        if cur.accept("COLUMN"):
            old = cur.take().ident
            cur.accept("TO")
            new = cur.take().ident
            at, col, origin = shape.pop(old)
            shape.place(replace(col, name=new), None, at, origin)
            shape.pk = [new if p.casefold() == old.casefold() else p for p in shape.pk]
            shape.renames.append((col.name, new))
            return True, key
        cur.accept("TO") or cur.accept("AS")
        return False, cur.table(key[0])
    if first == "ALTER":
        return _alter_column_attr(shape, cur), key
    if first == "CONVERT" and cur.accept("TO"):
        charset = _table_charset(cur.rest())
        if charset is None:
            raise DdlError(f"CONVERT TO {_text(cur.rest())!r} names no charset")
        before = list(shape.columns)
        shape.convert(charset)
        return shape.columns != before, key
    if first in ("DEFAULT", "CHARSET", "CHARACTER", "COLLATE") or first in _SHAPELESS:
        shape.charset = _table_charset(toks) or shape.charset
        return False, key
    raise DdlError(f"ALTER TABLE action {_text(toks)[:80]!r} not understood")


# ------------------------------------------------------------------ the tracker

def _selects(toks: Sequence[_Tok]) -> bool:
    """Whether a CREATE TABLE's tail (after its column list) holds a SELECT."""
    return any(t.word == "SELECT" for t in toks)


class SchemaTracker:
    """Replays DDL in binlog order over a catalog ``(db, table) -> TableSchema | None``."""

    def __init__(self, seed: Mapping[TableKey, TableSchema] | None = None) -> None:
        self.catalog: dict[TableKey, TableSchema | None] = dict(seed or {})
        self.charsets: dict[TableKey, str | None] = {}  # the table's default charset, when stated
        self.versions: dict[TableKey, int] = {k: 0 for k in self.catalog}
        self.history: list[SchemaVersion] = []

    def _record(self, key: TableKey, stmt: DdlStatement, origin: str,
                schema: TableSchema | None, warning: str | None = None,
                renames: tuple[tuple[str, str], ...] = (), *, renamed_from: TableKey | None = None,
                truncated: bool = False) -> None:
        self.catalog[key] = schema
        version = self.versions.get(key, -1) + 1
        self.versions[key] = version
        self.history.append(SchemaVersion(key[0], key[1], version, stmt.at, origin, stmt.sql,
                                          schema, warning, renames, renamed_from, truncated))

    def seed(self, stmt: DdlStatement) -> None:
        self.apply(stmt, origin="seed")

    def apply(self, stmt: DdlStatement, origin: str = "ddl") -> None:
        """Apply one statement; anything affecting a table that cannot be understood is
        recorded as an unknown schema with a warning (the statement text is kept)."""
        if not is_table_ddl(stmt.sql):
            return
        toks = _lex(stmt.sql)
        cur = _Cursor(toks)
        verb = cur.word()
        cur.i += 1
        try:
            if verb == "CREATE":
                self._create(cur, stmt, origin)
            elif verb == "ALTER":
                self._alter(cur, stmt, origin)
            elif verb == "DROP":
                self._drop(cur, stmt, origin)
            elif verb == "RENAME":
                self._rename_tables(cur, stmt, origin)
            elif verb == "TRUNCATE":
                self._truncate(cur, stmt, origin)
        except DdlError as exc:
            self._unknown(stmt, origin, str(exc))

    def _create(self, cur: _Cursor, stmt: DdlStatement, origin: str) -> None:
        replacing = cur.accept("OR", "REPLACE")
        if cur.accept("TEMPORARY") or not cur.accept("TABLE"):
            return
        exists = cur.accept("IF", "NOT", "EXISTS")
        key = cur.table(stmt.default_db)
        if exists and self.catalog.get(key) is not None:
            return
        if replacing and self.catalog.get(key) is not None:
            self._record(key, stmt, origin, None)  # the old table and its rows are gone
        like = cur.accept("LIKE") or (cur.op("(") and cur.word(1) == "LIKE" and bool(cur.take()) and cur.accept("LIKE"))
        if like:
            source = cur.table(stmt.default_db)
            schema = self.catalog.get(source)
            self.charsets[key] = self.charsets.get(source)
            self._record(key, stmt, origin, schema, None if schema is not None else
                         f"CREATE TABLE … LIKE {source[0]}.{source[1]}, a table whose schema is unknown")
            return
        try:
            schema, charset = self._create_body(cur)
        except DdlError as exc:
            self._record(key, stmt, origin, None, str(exc))
            return
        self.charsets[key] = charset
        self._record(key, stmt, origin, schema)

    def _create_body(self, cur: _Cursor) -> tuple[TableSchema, str | None]:
        if not cur.op("("):
            raise DdlError("CREATE TABLE … SELECT without a column list (statement-based logging): "
                           "the columns are unknown")
        end = _close(cur.toks, cur.i)
        items = _split(cur.toks[cur.i + 1:end])
        tail = cur.toks[end + 1:]
        if _selects(tail):
            raise DdlError("CREATE TABLE … SELECT (statement-based logging): the columns the SELECT "
                           "adds are unknown")
        charset = _table_charset(tail)
        shape = _Shape(TableSchema(()), charset)
        for item in items:
            if item[0].kind == "id" and item[0].word in (*_NOT_A_COLUMN, "PRIMARY"):
                pk = _primary_key_of(item)
                shape.pk = pk if pk is not None else shape.pk
                continue
            facts = _parse_column(item, charset)
            shape.columns.append(facts.column)
            shape.pk += [facts.column.name] if facts.primary_key else []
        return shape.schema(), charset

    def _alter(self, cur: _Cursor, stmt: DdlStatement, origin: str) -> None:
        cur.accept("ONLINE")
        cur.accept("IGNORE")
        if not cur.accept("TABLE"):
            return
        cur.accept("IF", "EXISTS")
        key = cur.table(stmt.default_db)
        if cur.accept("WAIT"):
            cur.take()
        cur.accept("NOWAIT")
        known = self.catalog.get(key)
        shape = _Shape(known or TableSchema(()), self.charsets.get(key))
        new_key, changed = key, False
        try:
            for action in _split(cur.rest()):
                did, new_key = _alter_action(shape, action, new_key)
                changed = changed or did
                if did and known is None:
                    raise DdlError("ALTER TABLE on a table whose schema is unknown")
            schema = shape.schema() if known is not None else None
        except DdlError as exc:
            self._record(key, stmt, origin, None, str(exc))
            return
        self.charsets[new_key] = shape.charset
        if new_key != key:
            self._record(key, stmt, origin, None)
            self._record(new_key, stmt, origin, schema, None if schema is not None else
                         "renamed from a table whose schema is unknown", tuple(shape.renames),
                         renamed_from=key)
        elif changed and schema != known:
            self._record(key, stmt, origin, schema, "; ".join(shape.notes) or None, tuple(shape.renames))

    def _drop(self, cur: _Cursor, stmt: DdlStatement, origin: str) -> None:
        if cur.accept("TEMPORARY") or not (cur.accept("TABLE") or cur.accept("TABLES")):
            return
        exists = cur.accept("IF", "EXISTS")
        for part in _split(cur.rest()):
            key = _Cursor(part).table(stmt.default_db)
            if not exists or key in self.catalog:
                self._record(key, stmt, origin, None)

    def _rename_tables(self, cur: _Cursor, stmt: DdlStatement, origin: str) -> None:
        if not (cur.accept("TABLE") or cur.accept("TABLES")):
            return
        exists = cur.accept("IF", "EXISTS")
        moves: list[tuple[TableKey, TableKey]] = []
        for part in _split(cur.rest()):
            pair = _Cursor(part)
            old = pair.table(stmt.default_db)
            if pair.accept("WAIT"):
                pair.take()
            pair.accept("NOWAIT")
            if not pair.accept("TO"):
                raise DdlError(f"RENAME TABLE part {_text(part)!r} not understood")
            moves.append((old, pair.table(stmt.default_db)))
        for old, new in moves:  # RENAME TABLE applies its pairs left to right (swaps work)
            if exists and old not in self.catalog:
                continue  # MariaDB's IF EXISTS: a table the archive never saw is taken as absent
            schema = self.catalog.get(old)
            self.charsets[new] = self.charsets.pop(old, None)
            self._record(old, stmt, origin, None)
            self._record(new, stmt, origin, schema,
                         None if schema is not None else "renamed from a table whose schema is unknown",
                         renamed_from=old)

    def _truncate(self, cur: _Cursor, stmt: DdlStatement, origin: str) -> None:
        cur.accept("TABLE")
        key = cur.table(stmt.default_db)
        schema = self.catalog.get(key)
        self._record(key, stmt, origin, schema, None if schema is not None else
                     "TRUNCATE of a table whose schema is unknown (its rows are gone)", truncated=True)

    def _unknown(self, stmt: DdlStatement, origin: str, warning: str) -> None:
        """Mark the table a not-understood statement names as unknown from here on."""
        match = re.search(r"TABLE\s+(?:IF\s+(?:NOT\s+)?EXISTS\s+)?((?:`[^`]+`|[\w$]+)(?:\.(?:`[^`]+`|[\w$]+))?)",
                          stmt.sql, re.IGNORECASE)
        if not match:
            return
        try:
            key = _Cursor(_lex(match.group(1))).table(stmt.default_db)
        except DdlError:
            return
        self._record(key, stmt, origin, None, f"{warning} (in: {stmt.sql[:120]})")


def build_history(statements: Iterable[DdlStatement],
                  seed_statements: Iterable[DdlStatement] = ()) -> list[SchemaVersion]:
    """Every schema version of every table, seeds first, then DDL in binlog order."""
    tracker = SchemaTracker()
    for stmt in seed_statements:
        tracker.seed(stmt)
    for stmt in sorted(statements, key=lambda s: s.at):
        tracker.apply(stmt)
    return tracker.history


def split_dump(text: str) -> list[str]:
    """The statements of a ``SHOW CREATE TABLE`` / ``mysqldump --no-data`` file, split at the
    ``;`` outside quotes and comments (versioned comments' text kept, as the server runs it)."""
    out: list[str] = []
    current: list[_Tok] = []
    for tok in _lex(text):
        if tok.kind == "op" and tok.text == ";":
            if current and current[0].word != "DELIMITER":
                out.append(_text(current))
            current = []
        else:
            current.append(tok)
    if current and current[0].word != "DELIMITER":
        out.append(_text(current))
    return out
