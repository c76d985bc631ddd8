"""User-supplied table schemas: column names (and signedness, charsets, ENUM/SET values) for
binlogs written without ``binlog_row_metadata=FULL``.

Without FULL metadata a TABLE_MAP carries only types, so columns are named ``col_1``, ``col_2``...
(1-based, table order). A ``SchemaRegistry`` put in ``DecodeContext.schemas`` fills the gaps;
metadata in the event always wins. A registry entry is used only when its column count equals
the TABLE_MAP's (a stale schema is ignored rather than misapplied).

Sources: ``add_table`` (names or ``ColumnSpec``s), ``add_ddl`` (``CREATE TABLE`` / simple
``ALTER TABLE ... ADD/DROP COLUMN`` text the pipeline has seen), ``load_json`` (a schema file:
``{"db.table": ["id", {"name": "price", "unsigned": true}, {"name": "at", "fsp": 6}, ...]}``).
A plain dict of that shape in ``DecodeContext.schemas`` works too. ``fsp`` matters only for
MariaDB's 5.3-format TIME/DATETIME/TIMESTAMP(n), whose precision the binlog does not carry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from binlog_parser.rows.charsets import COLLATION_CHARSET

_DEFAULT_COLLATION = {}
for _id, _cs in sorted(COLLATION_CHARSET.items(), reverse=True):
    _DEFAULT_COLLATION[_cs] = _id  # lowest id per charset (not important: only the charset is used)
_DEFAULT_COLLATION["utf8mb4"] = 45
_DEFAULT_COLLATION["utf8mb3"] = 33
_DEFAULT_COLLATION["utf8"] = 33
_DEFAULT_COLLATION["latin1"] = 8
_DEFAULT_COLLATION["binary"] = 63


@dataclass(frozen=True, slots=True)
class ColumnSpec:
    name: str
    unsigned: bool | None = None
    charset: str | None = None
    enum_values: tuple[str, ...] | None = None
    set_values: tuple[str, ...] | None = None
    # fractional-second precision of TIME/DATETIME/TIMESTAMP(n): needed only for MariaDB's 5.3
    # format, which the binlog logs with the old type codes and no metadata
    fsp: int | None = None

    def collation_id(self) -> int | None:
        return _DEFAULT_COLLATION.get(self.charset.lower()) if self.charset else None


def _spec(item: Any) -> ColumnSpec:
    if isinstance(item, ColumnSpec):
        return item
    if isinstance(item, str):
        return ColumnSpec(item)
    if isinstance(item, dict):
        return ColumnSpec(
            item["name"], item.get("unsigned"), item.get("charset"),
            tuple(item["enum"]) if item.get("enum") is not None else None,
            tuple(item["set"]) if item.get("set") is not None else None,
            item.get("fsp"))
    raise TypeError(f"bad column spec: {item!r}")


class SchemaRegistry:
    """Column lists per ``schema.table`` (case-sensitive, as the binlog spells them)."""

    def __init__(self, tables: dict[str, Iterable[Any]] | None = None) -> None:
        self._tables: dict[tuple[str, str], list[ColumnSpec]] = {}
        for key, cols in (tables or {}).items():
            db, _, tbl = key.partition(".")
            self.add_table(db, tbl, cols)

    def add_table(self, schema: str, table: str, columns: Iterable[Any]) -> None:
        self._tables[(schema, table)] = [_spec(c) for c in columns]

    def get(self, schema: str, table: str) -> list[ColumnSpec] | None:
        return self._tables.get((schema, table))

    def load_json(self, path: str) -> None:
        with open(path, encoding="utf-8") as f:
            for key, cols in json.load(f).items():
                db, _, tbl = key.partition(".")
                self.add_table(db, tbl, cols)

    def add_ddl(self, sql: str, default_schema: str | None = None) -> bool:
        """Apply a CREATE TABLE or a simple ALTER TABLE ADD/DROP COLUMN. True if understood."""
        return _apply_ddl(self, sql, default_schema)


def lookup_columns(reg: Any, schema: str, table: str, ncols: int) -> list[ColumnSpec] | None:
    if isinstance(reg, SchemaRegistry):
        cols = reg.get(schema, table)
    elif isinstance(reg, dict):
        raw = reg.get(f"{schema}.{table}")
        cols = [_spec(c) for c in raw] if raw is not None else None
    else:
        getter = getattr(reg, "get", None)
        cols = getter(schema, table) if getter else None
    if cols is None or len(cols) != ncols:
        return None
    return list(cols)


# ---------------------------------------------------------------- tiny DDL reader

_IDENT = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_CREATE_RE = re.compile(
    rf"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMPORARY\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?"
    rf"(?P<name>{_IDENT}(?:\s*\.\s*{_IDENT})?)\s*\((?P<body>.*)\)[^)]*$", re.I | re.S)
_ALTER_RE = re.compile(rf"^\s*ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\s+(?P<name>{_IDENT}(?:\s*\.\s*{_IDENT})?)\s+(?P<body>.*)$",
                       re.I | re.S)
_NOT_COLUMN = re.compile(r"^\s*(PRIMARY|KEY|INDEX|UNIQUE|CONSTRAINT|FOREIGN|FULLTEXT|SPATIAL|CHECK|PERIOD)\b", re.I)


def _unquote(ident: str) -> str:
    ident = ident.strip()
    if ident.startswith("`"):
        return ident[1:-1].replace("``", "`")
    return ident


def _split_name(name: str, default_schema: str | None) -> tuple[str | None, str]:
    parts = re.findall(_IDENT, name)
    if len(parts) == 2:
        return _unquote(parts[0]), _unquote(parts[1])
    return default_schema, _unquote(parts[0])


def _split_top(body: str) -> list[str]:
    out: list[str] = []
    cur: list[str] = []
    depth, quote = 0, None
    for ch in body:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = None
            continue
        if ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur))
    return out


def _string_list(s: str) -> tuple[str, ...]:
    return tuple(m.replace("''", "'").replace("\\'", "'")
                 for m in re.findall(r"'((?:[^'\\]|''|\\.)*)'", s))


def _column_def(text: str) -> ColumnSpec | None:
    if _NOT_COLUMN.match(text):
        return None
    m = re.match(rf"\s*({_IDENT})\s+(.*)$", text, re.S)
    if not m:
        return None
    name = _unquote(m.group(1))
    rest = m.group(2)
    up = rest.upper()
    unsigned = None
    if re.match(r"\s*(TINYINT|SMALLINT|MEDIUMINT|INT|INTEGER|BIGINT|DECIMAL|NUMERIC|FLOAT|DOUBLE|REAL)\b", up):
        unsigned = bool(re.search(r"\bUNSIGNED\b", up))
    cs = re.search(r"\b(?:CHARACTER\s+SET|CHARSET)\s+(\w+)", rest, re.I)
    charset = cs.group(1).lower() if cs else None
    if charset is None and re.match(r"\s*(BINARY|VARBINARY|TINYBLOB|BLOB|MEDIUMBLOB|LONGBLOB)\b", up):
        charset = "binary"
    enum_values = set_values = None
    em = re.match(r"\s*(ENUM|SET)\s*\((.*?)\)(?=[^)]*$|\s)", rest, re.I | re.S)
    if em:
        vals = _string_list(em.group(2))
        if em.group(1).upper() == "ENUM":
            enum_values = vals
        else:
            set_values = vals
    fsp = None
    tm = re.match(r"\s*(TIME|DATETIME|TIMESTAMP)\b\s*(?:\(\s*(\d)\s*\))?", up)
    if tm:
        fsp = int(tm.group(2) or 0)
    return ColumnSpec(name, unsigned, charset, enum_values, set_values, fsp)


def _apply_ddl(reg: SchemaRegistry, sql: str, default_schema: str | None) -> bool:
    m = _CREATE_RE.match(sql)
    if m:
        db, tbl = _split_name(m.group("name"), default_schema)
        if db is None:
            return False
        cols = [c for c in (_column_def(p) for p in _split_top(m.group("body"))) if c is not None]
        reg.add_table(db, tbl, cols)
        return True
    m = _ALTER_RE.match(sql)
    if not m:
        return False
    db, tbl = _split_name(m.group("name"), default_schema)
    found = reg.get(db, tbl) if db is not None else None
    if db is None or found is None:
        return False
    cols = list(found)
    for clause in _split_top(m.group("body")):
        am = re.match(r"\s*ADD\s+(?:COLUMN\s+)?(?!INDEX|KEY|PRIMARY|UNIQUE|CONSTRAINT|FOREIGN|FULLTEXT|SPATIAL|CHECK)(.*)$",
                      clause, re.I | re.S)
        dm = re.match(rf"\s*DROP\s+(?:COLUMN\s+)?(?:IF\s+EXISTS\s+)?({_IDENT})\s*$", clause, re.I)
        if am:
            text = am.group(1)
            pos_m = re.search(rf"\s+(FIRST|AFTER\s+({_IDENT}))\s*$", text, re.I)
            if pos_m:
                text = text[:pos_m.start()]
            spec = _column_def(text)
            if spec is None:
                continue
            if pos_m and pos_m.group(1).upper() == "FIRST":
                cols.insert(0, spec)
            elif pos_m:
                after = _unquote(pos_m.group(2))
                idx = next((i for i, c in enumerate(cols) if c.name == after), len(cols) - 1)
                cols.insert(idx + 1, spec)
            else:
                cols.append(spec)
        elif dm:
            name = _unquote(dm.group(1))
            cols = [c for c in cols if c.name != name]
        else:
            return False
    reg.add_table(db, tbl, cols)
    return True
