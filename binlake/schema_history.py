"""Schema history of source tables, from the DDL the archive holds (pure; no Spark).

Why sqlglot (MySQL dialect) and not hand-written parsing: it gives a real AST for CREATE TABLE
(types with length/precision/fsp, UNSIGNED, CHARACTER SET / COLLATE, ENUM/SET members, NOT NULL,
DEFAULT, PRIMARY KEY) and for ALTER TABLE's ADD / DROP / CHANGE / MODIFY / RENAME COLUMN with
FIRST / AFTER, ADD / DROP PRIMARY KEY and RENAME TO, plus DROP TABLE. Checked gaps (sqlglot
30.30): ``RENAME TABLE a TO b, …`` comes back as an unparsed ``Command`` (handled by a small
pattern below); spatial subtypes (``POINT``) do not parse; ``REAL`` reads as FLOAT. Whatever
does not parse becomes a version with ``schema=None`` and a warning: gold then says it cannot
know the table, never guesses.

The history is replayed per source in binlog order (:class:`Coordinates`), starting from an
optional seed (``SHOW CREATE TABLE`` texts) for tables created before the archive starts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

import sqlglot
from sqlglot import exp

from binlake.errors import BinlakeError
from binlake.gold_types import MySQLColumn

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


class DdlError(BinlakeError, ValueError):
    """A DDL statement that affects a table but could not be understood."""


_RENAME_TABLE = re.compile(r"^\s*RENAME\s+TABLES?\s+(.+)$", re.IGNORECASE | re.DOTALL)
_RENAME_PAIR = re.compile(r"^\s*(\S+)\s+TO\s+(\S+)\s*$", re.IGNORECASE)
_TABLE_DDL = re.compile(r"^\s*(?:(?:/\*.*?\*/|--[^\n]*\n|#[^\n]*\n)\s*)*"  # leading comments
                        r"(CREATE|ALTER|DROP|RENAME)\s+(TEMPORARY\s+)?(ONLINE\s+)?(IGNORE\s+)?TABLES?\b",
                        re.IGNORECASE | re.DOTALL)
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


def is_table_ddl(sql: str) -> bool:
    """Cheap pre-filter: statements that may change a table's shape."""
    return bool(_TABLE_DDL.match(sql))


def _name(identifier: exp.Expression | None) -> str:
    return identifier.name if identifier is not None else ""


def _table_key(table: exp.Table, default_db: str | None) -> TableKey:
    db = table.db or default_db
    if not db:
        raise DdlError(f"table {table.name!r} has no database and the statement no default database")
    return db, table.name


def _int_params(kind: exp.DataType) -> list[int]:
    out = []
    for param in kind.expressions:
        inner = param.this if isinstance(param, exp.DataTypeParam) else param
        if isinstance(inner, exp.Literal) and not inner.is_string:
            out.append(int(inner.this))
    return out


def _literal_default(node: exp.Expression) -> str | None:
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Literal):
        return str(node.this)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        return "-" + str(node.this.this)
    raise DdlError(f"DEFAULT {node.sql('mysql')} is not a constant (old rows' value unknown)")


def _base_type(kind: exp.DataType) -> tuple[str, bool]:
    name = kind.this.name
    unsigned = name.startswith("U") and name[1:] in (*_INT_TYPES, "DECIMAL")
    if unsigned:
        name = name[1:]
    if name in _INT_TYPES:
        return _INT_TYPES[name], unsigned
    if name in _PLAIN_TYPES:
        return _PLAIN_TYPES[name], unsigned
    raise DdlError(f"column type {kind.sql('mysql')} is not one gold maps")


def column_from_def(coldef: exp.ColumnDef, table_charset: str | None) -> tuple[MySQLColumn, bool]:
    """A sqlglot column definition as a :class:`MySQLColumn`, and whether it is a PRIMARY KEY."""
    kind = coldef.args.get("kind")
    if not isinstance(kind, exp.DataType):
        raise DdlError(f"column {coldef.name!r} has no type")
    base, unsigned = _base_type(kind)
    params = _int_params(kind)
    charset, nullable, default, is_pk = None, True, None, False
    for constraint in coldef.args.get("constraints") or []:
        ckind = constraint.args.get("kind")
        if isinstance(ckind, exp.CharacterSetColumnConstraint):
            charset = _name(ckind.this).lower()
        elif isinstance(ckind, exp.CollateColumnConstraint) and charset is None:
            charset = _name(ckind.this).lower().split("_")[0]
        elif isinstance(ckind, exp.BinaryColumnConstraint):
            pass  # VARCHAR ... BINARY: a binary collation of the charset, still text
        elif isinstance(ckind, exp.NotNullColumnConstraint):
            nullable = bool(ckind.args.get("allow_null"))
        elif isinstance(ckind, exp.DefaultColumnConstraint):
            default = _literal_default(ckind.this)
        elif isinstance(ckind, exp.PrimaryKeyColumnConstraint):
            is_pk, nullable = True, False
    members = tuple(str(e.this) for e in kind.expressions if isinstance(e, exp.Literal) and e.is_string)
    if base in _TEXTUAL:
        charset = charset or table_charset
    elif base in ("binary", "varbinary") or base.endswith("blob"):
        charset = "binary"
    column = MySQLColumn(
        name=coldef.name, type=base, unsigned=unsigned,
        length=params[0] if params and base in ("char", "varchar", "binary", "varbinary", "bit") else None,
        precision=(params[0] if params else 10) if base == "decimal" else None,
        scale=(params[1] if len(params) > 1 else 0) if base == "decimal" else None,
        fsp=(params[0] if params else 0) if base in ("time", "datetime", "timestamp") else None,
        charset=charset, members=members, nullable=nullable, default=default)
    if base == "tinyint" and kind.this.name == "BOOLEAN":
        column = replace(column, length=1)
    return column, is_pk


def _table_charset(create: exp.Create) -> str | None:
    props = create.args.get("properties")
    for prop in props.expressions if props is not None else []:
        if isinstance(prop, exp.CharacterSetProperty):
            return _name(prop.this).lower()
        if isinstance(prop, exp.CollateProperty):
            return _name(prop.this).lower().split("_")[0]
    return None


def schema_from_create(create: exp.Create) -> TableSchema:
    """The table a parsed ``CREATE TABLE (…)`` defines."""
    body = create.this
    if not isinstance(body, exp.Schema):
        raise DdlError("CREATE TABLE without a column list (LIKE / AS SELECT): columns unknown")
    charset = _table_charset(create)
    columns: list[MySQLColumn] = []
    pk: list[str] = []
    for item in body.expressions:
        if isinstance(item, exp.ColumnDef):
            column, is_pk = column_from_def(item, charset)
            columns.append(column)
            if is_pk:
                pk.append(column.name)
        elif isinstance(item, exp.PrimaryKey):
            pk = [_name(e.this if isinstance(e, exp.Ordered) else e) for e in item.expressions]
    schema = TableSchema(tuple(columns))
    return _with_pk(schema, pk)


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


def _place(columns: list[MySQLColumn], column: MySQLColumn, position: exp.Expression | None) -> None:
    if position is None:
        columns.append(column)
        return
    if position.args.get("position") == "FIRST":
        columns.insert(0, column)
        return
    after = _name(position.this).casefold()
    for i, existing in enumerate(columns):
        if existing.name.casefold() == after:
            columns.insert(i + 1, column)
            return
    raise DdlError(f"AFTER names unknown column {position.this.name!r}")


def _pop(columns: list[MySQLColumn], name: str) -> MySQLColumn:
    for i, existing in enumerate(columns):
        if existing.name.casefold() == name.casefold():
            return columns.pop(i)
    raise DdlError(f"unknown column {name!r}")


def _alter_action(schema: TableSchema, action: exp.Expression, charset: str | None,
                  renames: list[tuple[str, str]]) -> TableSchema:
    columns = list(schema.columns)
    pk = list(schema.primary_key)
    if isinstance(action, exp.ColumnDef):  # ADD [COLUMN]
        column, is_pk = column_from_def(action, charset)
        _place(columns, column, action.args.get("position"))
        pk += [column.name] if is_pk else []
    elif isinstance(action, exp.Drop) and str(action.args.get("kind", "")).upper() == "COLUMN":
        for target in action.args.get("tables") or [action.this]:
            _pop(columns, target.name)
            pk = [p for p in pk if p.casefold() != target.name.casefold()]
    elif isinstance(action, exp.ModifyColumn):  # CHANGE old new … / MODIFY col …
        coldef = action.this
        old = _name(action.args.get("rename_from")) or coldef.name
        index = TableSchema(tuple(columns)).index_of(old)
        previous = _pop(columns, old)
        column, _ = column_from_def(coldef, previous.charset if previous.charset != "binary" else charset)
        position = coldef.args.get("position")
        if position is None:
            columns.insert(index or 0, column)
        else:
            _place(columns, column, position)
        pk = [column.name if p.casefold() == old.casefold() else p for p in pk]
        if column.name != old:
            renames.append((old, column.name))
    elif isinstance(action, exp.RenameColumn):
        old, new = _name(action.this), _name(action.args.get("to"))
        i = schema.index_of(old)
        if i is None:
            raise DdlError(f"RENAME COLUMN names unknown column {old!r}")
        columns[i] = replace(columns[i], name=new)
        renames.append((old, new))
        pk = [new if p.casefold() == old.casefold() else p for p in pk]
    elif isinstance(action, exp.AddConstraint):
        for item in action.expressions:
            if isinstance(item, exp.PrimaryKey):
                pk = [_name(e.this if isinstance(e, exp.Ordered) else e) for e in item.expressions]
    elif isinstance(action, exp.DropPrimaryKey):
        pk = []
    return _with_pk(TableSchema(tuple(columns)), pk)


class SchemaTracker:
    """Replays DDL in binlog order over a catalog ``(db, table) -> TableSchema | None``."""

    def __init__(self, seed: Mapping[TableKey, TableSchema] | None = None) -> None:
        self.catalog: dict[TableKey, TableSchema | None] = dict(seed or {})
        self.versions: dict[TableKey, int] = {k: 0 for k in self.catalog}
        self.history: list[SchemaVersion] = []

    def _record(self, key: TableKey, stmt: DdlStatement, origin: str,
                schema: TableSchema | None, warning: str | None = None,
                renames: tuple[tuple[str, str], ...] = ()) -> None:
        self.catalog[key] = schema
        version = self.versions.get(key, -1) + 1
        self.versions[key] = version
        self.history.append(SchemaVersion(key[0], key[1], version, stmt.at, origin, stmt.sql,
                                          schema, warning, renames))

    def seed(self, stmt: DdlStatement) -> None:
        self.apply(stmt, origin="seed")

    def apply(self, stmt: DdlStatement, origin: str = "ddl") -> None:
        """Apply one statement; anything affecting a table that cannot be understood is
        recorded as an unknown schema with a warning (the statement text is kept)."""
        if not is_table_ddl(stmt.sql):
            return
        renamed = _RENAME_TABLE.match(stmt.sql)
        if renamed:
            self._rename_tables(stmt, renamed.group(1), origin)
            return
        try:
            tree = sqlglot.parse_one(stmt.sql, read="mysql")
        except sqlglot.errors.SqlglotError as exc:
            self._unknown(stmt, origin, f"DDL does not parse: {str(exc).splitlines()[0]}")
            return
        try:
            self._apply_tree(tree, stmt, origin)
        except DdlError as exc:
            self._unknown(stmt, origin, str(exc))

    def _apply_tree(self, tree: exp.Expr, stmt: DdlStatement, origin: str) -> None:
        if isinstance(tree, exp.Create) and str(tree.args.get("kind", "")).upper() == "TABLE":
            table = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
            key = _table_key(table, stmt.default_db)
            if tree.args.get("exists") and self.catalog.get(key) is not None:
                return
            try:
                self._record(key, stmt, origin, schema_from_create(tree))
            except DdlError as exc:
                self._record(key, stmt, origin, None, str(exc))
        elif isinstance(tree, exp.Alter) and str(tree.args.get("kind", "")).upper() == "TABLE":
            self._alter(tree, stmt, origin)
        elif isinstance(tree, exp.Drop) and str(tree.args.get("kind", "")).upper() == "TABLE":
            for table in tree.args.get("tables") or [tree.this]:
                key = _table_key(table, stmt.default_db)
                if key in self.catalog:
                    self._record(key, stmt, origin, None)
        else:
            raise DdlError(f"table DDL not understood ({type(tree).__name__})")

    def _alter(self, tree: exp.Alter, stmt: DdlStatement, origin: str) -> None:
        key = _table_key(tree.this, stmt.default_db)
        schema = self.catalog.get(key)
        if schema is None:
            self._record(key, stmt, origin, None, "ALTER TABLE on a table whose schema is unknown")
            return
        new_key = key
        renames: list[tuple[str, str]] = []
        try:
            for action in tree.args.get("actions") or []:
                if isinstance(action, exp.AlterRename):
                    new_key = _table_key(action.this, key[0])
                else:
                    schema = _alter_action(schema, action, None, renames)
        except DdlError as exc:
            self._record(key, stmt, origin, None, str(exc))
            return
        if new_key != key:
            self._record(key, stmt, origin, None, None)
        self._record(new_key, stmt, origin, schema, None, tuple(renames))

    def _rename_tables(self, stmt: DdlStatement, pairs: str, origin: str) -> None:
        moves: list[tuple[TableKey, TableKey]] = []
        for pair in pairs.split(","):
            match = _RENAME_PAIR.match(pair)
            if not match:
                self._unknown(stmt, origin, f"RENAME TABLE part {pair.strip()!r} not understood")
                return
            moves.append((self._key_text(match.group(1), stmt), self._key_text(match.group(2), stmt)))
        for old, new in moves:  # RENAME TABLE applies its pairs left to right
            schema = self.catalog.get(old)
            self._record(old, stmt, origin, None)
            self._record(new, stmt, origin, schema,
                         None if schema is not None else "renamed from a table whose schema is unknown")

    @staticmethod
    def _key_text(text: str, stmt: DdlStatement) -> TableKey:
        parts = [p.strip("`") for p in text.split(".")]
        if len(parts) == 2:
            return parts[0], parts[1]
        if not stmt.default_db:
            raise DdlError(f"table {text!r} has no database")
        return stmt.default_db, parts[0]

    def _unknown(self, stmt: DdlStatement, origin: str, warning: str) -> None:
        """Mark the tables a not-understood statement names as unknown from here on."""
        keys = self._mentioned_tables(stmt)
        for key in keys:
            self._record(key, stmt, origin, None, warning)

    def _mentioned_tables(self, stmt: DdlStatement) -> list[TableKey]:
        try:
            tables = list(sqlglot.parse_one(stmt.sql, read="mysql").find_all(exp.Table))
            if tables:
                return [_table_key(tables[0], stmt.default_db)]
        except (sqlglot.errors.SqlglotError, DdlError):
            pass
        match = re.search(r"TABLE\s+(?:IF\s+(?:NOT\s+)?EXISTS\s+)?([`\w.]+)", stmt.sql, re.IGNORECASE)
        try:
            return [self._key_text(match.group(1), stmt)] if match else []
        except DdlError:
            return []


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
    """The statements of a ``SHOW CREATE TABLE`` / ``mysqldump --no-data`` file (``;``-separated,
    comments and ``/*!…*/`` version wrappers removed by sqlglot's tokenizer)."""
    return [e.sql("mysql", comments=False) for e in sqlglot.parse(text, read="mysql") if e is not None]
