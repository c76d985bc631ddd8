"""What a ``binlake sql`` statement reads and writes, and that it names binlake tables only.

Why: ``binlake sql`` runs statements people type (or paste) against the warehouse the jobs write.
Two things must hold whatever the text: a name never resolves outside the warehouse (Spark reads
``delta.`/any/path``` and ``csv.`file```; a gold name ``../../x`` is a folder two levels up), and a
statement that changes a table is not run by accident nor beside a job's commit. So every statement
is parsed (sqlglot, Spark dialect) before either engine sees it:

* every table it names must be ``db.table`` (or a CTE / temporary view) made of letters, digits and
  ``_`` (:class:`UnsafeStatementError` otherwise), never a file format's path table;
* it is read-only (queries, DESCRIBE, SHOW, EXPLAIN, temporary views) or it writes named binlake
  tables (:attr:`Access.writes`: the Spark engine holds their commit locks while it runs); a
  statement whose effect cannot be told (LOAD DATA, ADD JAR, INSERT ... DIRECTORY, CREATE TABLE)
  is refused. Delta's own commands that sqlglot does not parse (VACUUM, OPTIMIZE, RESTORE, ...)
  are read by their leading words.

Pure text: no pyspark, no DuckDB here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from binlake.errors import BinlakeError

#: data source names Spark reads ``<format>.`<path>``` with (``spark.sql.runSQLOnFiles``)
FILE_FORMATS = frozenset({"delta", "parquet", "csv", "json", "orc", "text", "avro", "binaryfile", "xml", "hive",
                          "jdbc", "libsvm", "image"})
#: the catalog Spark puts binlake's registered tables in (``spark_catalog.meta.x`` = ``meta.x``)
SESSION_CATALOG = "spark_catalog"
_NAME_PART = re.compile(r"[A-Za-z0-9_]+")
_READ_ROOTS = ("Select", "Union", "Intersect", "Except", "Subquery", "Values", "Describe")
_SESSION_ROOTS = {"Set": "SET", "Use": "USE", "Cache": "CACHE", "Uncache": "UNCACHE", "Refresh": "REFRESH",
                  "Analyze": "ANALYZE"}
_WRITE_ROOTS = {"Insert": "INSERT", "Delete": "DELETE", "Update": "UPDATE", "Merge": "MERGE",
                "TruncateTable": "TRUNCATE", "Alter": "ALTER", "Drop": "DROP"}
#: leading words of statements sqlglot does not parse -> (verb, writes the table named next)
_COMMANDS: tuple[tuple[str, str, bool], ...] = (
    (r"VACUUM", "VACUUM", True), (r"OPTIMIZE", "OPTIMIZE", True), (r"REORG\s+TABLE", "REORG", True),
    (r"RESTORE\s+TABLE", "RESTORE", True), (r"RESTORE", "RESTORE", True),
    (r"FSCK\s+REPAIR\s+TABLE", "FSCK", True), (r"CONVERT\s+TO\s+DELTA", "CONVERT", True),
    (r"GENERATE\s+\w+\s+FOR\s+TABLE", "GENERATE", True),
    (r"DESC(?:RIBE)?\s+(?:DETAIL|HISTORY|EXTENDED|FORMATTED|TABLE)", "DESCRIBE", False),
    (r"DESC(?:RIBE)?", "DESCRIBE", False),
    (r"SHOW\s+(?:TBLPROPERTIES|PARTITIONS|CREATE\s+TABLE|COLUMNS\s+(?:IN|FROM))", "SHOW", False),
)
_SHOW = re.compile(r"\s*SHOW\b", re.IGNORECASE)
_EXPLAIN = re.compile(r"\s*EXPLAIN(?:\s+(?:EXTENDED|CODEGEN|COST|FORMATTED))?\s+", re.IGNORECASE)


class UnsafeStatementError(BinlakeError):
    """A statement names something that is not a binlake table under the warehouse (a path, a file
    table, another catalog), or does what ``binlake sql`` cannot check (LOAD DATA, ADD JAR ...)."""


class WriteRefusedError(BinlakeError):
    """A statement would change a table and ``binlake sql`` was not started with ``--allow-writes``."""


@dataclass(frozen=True)
class Access:
    """One statement: its verb, whether it changes nothing, the tables it reads and writes
    (``db.table``, lower-case; a CTE or temporary view is not listed)."""

    verb: str
    read_only: bool
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()

    def refuse_unless(self, allow_writes: bool) -> None:
        """WriteRefusedError for a statement that is not read-only, unless writes are allowed."""
        if self.read_only or allow_writes:
            return
        what = f"writes {', '.join(self.writes)}" if self.writes else "is not a read-only statement"
        raise WriteRefusedError(f"{self.verb} {what}: binlake sql is read-only unless started with --allow-writes")


def analyse(statement: str) -> Access:
    """What ``statement`` reads and writes; UnsafeStatementError for a name outside the warehouse."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError

    text = statement.strip().rstrip(";").strip()
    explain = _EXPLAIN.match(text)
    if explain:  # EXPLAIN runs nothing; what it explains must still name binlake tables only
        inner = analyse(text[explain.end():])
        return Access("EXPLAIN", True, tuple(dict.fromkeys(inner.reads + inner.writes)))
    try:
        tree = sqlglot.parse_one(text, read="spark")
    except ParseError:
        tree = None
    if tree is None or isinstance(tree, exp.Command):
        return _command(text)
    return _parsed(tree)


def _parsed(tree: Any) -> Access:
    """Access of a statement sqlglot parsed."""
    from sqlglot import exp

    kind = type(tree).__name__
    if kind in _READ_ROOTS:
        return Access("DESCRIBE" if kind == "Describe" else "SELECT", True, _tables(tree))
    if kind in _SESSION_ROOTS:
        return Access(_SESSION_ROOTS[kind], False, _tables(tree))
    if isinstance(tree, exp.Create):
        return _create(tree)
    if isinstance(tree, exp.Drop) and str(tree.args.get("kind") or "").upper() == "VIEW":
        return Access("DROP", True)  # views binlake sql made: temporary, in its session only
    if kind not in _WRITE_ROOTS:
        raise UnsafeStatementError(f"{kind.upper()} statements are not run by binlake sql (it runs queries, "
                                   "DESCRIBE, SHOW, EXPLAIN, and with --allow-writes changes to binlake tables)")
    verb = _WRITE_ROOTS[kind]
    targets = (tree.expressions if isinstance(tree, exp.TruncateTable)
               else tree.args.get("tables") or [] if isinstance(tree, exp.Drop) else [tree.this])
    written = [t if isinstance(t, exp.Table) else t.find(exp.Table) for t in targets if t is not None]
    writes = tuple(dict.fromkeys(_written_name(verb, t) for t in written if t is not None))
    if not writes:
        raise UnsafeStatementError(f"{verb}: binlake sql cannot tell which table this statement writes")
    reads = tuple(name for name in _tables(tree, skip={id(t) for t in written}) if name not in writes)
    return Access(verb, False, reads, writes)


def _create(tree: Any) -> Access:
    """CREATE TEMPORARY VIEW ... AS <query> is a read; every other CREATE is refused."""
    from sqlglot import exp

    if tree.find(exp.LocationProperty) is not None:
        raise UnsafeStatementError("CREATE ... LOCATION: binlake sql makes no table outside the warehouse")
    temporary = tree.find(exp.TemporaryProperty) is not None
    if str(tree.args.get("kind") or "").upper() == "VIEW" and temporary and tree.expression is not None:
        return Access("CREATE TEMPORARY VIEW", True, _tables(tree.expression))
    raise UnsafeStatementError("CREATE: binlake sql makes no tables (its tables are made by the jobs, a new one "
                               "would live outside the warehouse); CREATE TEMPORARY VIEW ... AS SELECT works")


def _written_name(verb: str, table: Any) -> str:
    name = checked_name(table, set())
    if name is None or "." not in name:
        raise UnsafeStatementError(f"{verb} writes {table.sql(dialect='spark')}, which is not a binlake table "
                                   "(db.table)")
    return name


def _tables(tree: Any, skip: Iterable[int] = ()) -> tuple[str, ...]:
    """The ``db.table`` names ``tree`` reads, in order, each checked; CTEs and table functions left out."""
    from sqlglot import exp

    skipped = set(skip)
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    names = [checked_name(t, ctes) for t in tree.find_all(exp.Table, bfs=False) if id(t) not in skipped]
    return tuple(dict.fromkeys(n for n in names if n is not None))


def checked_name(table: Any, ctes: set[str]) -> str | None:
    """``db.table`` (lower-case) of a sqlglot Table, ``name`` for an unqualified one, None for a CTE
    or a table function; UnsafeStatementError when it is not a name under the warehouse."""
    from sqlglot import exp

    if not isinstance(table.this, exp.Identifier):
        function = table.this.sql(dialect="spark").split("(", 1)[0].strip().lower()
        if function.startswith("read_") or isinstance(table.this, exp.ReadCSV):
            raise UnsafeStatementError(f"{function}(...) reads files: binlake sql reads only the tables under "
                                       "the warehouse, by name")
        return None
    catalog, db, name = (str(table.catalog), str(table.db), str(table.name))
    if not db and not catalog and name.lower() in ctes:
        return None
    unsafe = (not all(_NAME_PART.fullmatch(part) for part in (catalog, db, name) if part)
              or db.lower() in FILE_FORMATS or catalog.lower() not in ("", SESSION_CATALOG))
    if unsafe:
        raise UnsafeStatementError(f"{_display(table)} is not a binlake table name: binlake sql reads and writes "
                                   "only the tables under the warehouse, by name (db.table: letters, digits, '_')")
    return f"{db}.{name}".lower() if db else name.lower()


def _display(table: Any) -> str:
    from sqlglot import exp

    parts = [table.args.get(k) for k in ("catalog", "db", "this")]
    return ".".join(p.sql(dialect="spark") if isinstance(p, exp.Identifier) else str(p) for p in parts if p)


def _command(text: str) -> Access:
    """Access of a statement sqlglot does not parse, by its leading words (Delta's commands, DESCRIBE/SHOW)."""
    for pattern, verb, writes in _COMMANDS:
        match = re.match(rf"\s*{pattern}\s+", text, re.IGNORECASE)
        if match:
            table = _leading_table(text[match.end():])
            if table is None:
                break
            name = _written_name(verb, table) if writes else checked_name(table, set())
            names = (name,) if name else ()
            return Access(verb, not writes, () if writes else names, names if writes else ())
    if _SHOW.match(text):
        return Access("SHOW", True)  # SHOW TABLES / DATABASES / FUNCTIONS ...: no table named
    verb = (text.split() or ["(empty)"])[0].upper()
    raise UnsafeStatementError(f"binlake sql cannot tell what this {verb} statement reads or writes, so it does "
                               "not run it (it runs queries, DESCRIBE, SHOW, EXPLAIN, and with --allow-writes "
                               "INSERT/DELETE/UPDATE/MERGE/ALTER/VACUUM/OPTIMIZE/RESTORE of binlake tables)")


def _leading_table(rest: str) -> Any:
    """The table named at the start of ``rest`` (``db.table``, back-quoted parts kept), or None."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import TokenError
    from sqlglot.tokens import TokenType

    try:
        tokens = sqlglot.tokenize(rest, read="spark")
    except TokenError:
        return None
    parts: list[exp.Identifier] = []
    i = 0
    while i < len(tokens) and tokens[i].token_type not in (TokenType.DOT, TokenType.L_PAREN, TokenType.STRING):
        parts.append(exp.Identifier(this=tokens[i].text, quoted=tokens[i].token_type == TokenType.IDENTIFIER))
        if i + 1 < len(tokens) and tokens[i + 1].token_type == TokenType.DOT:
            i += 2
            continue
        break
    if not parts or len(parts) > 3:
        return None
    catalog, db, name = ([None] * (3 - len(parts)) + parts)[-3:]
    return exp.Table(this=name, db=db, catalog=catalog)
