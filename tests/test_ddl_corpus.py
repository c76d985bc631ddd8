"""The DDL corpus (``tests/fixtures/ddl_corpus/corpus.sql``): every table shape the schema history
computes, checked against a real MariaDB server's ``information_schema``.

The corpus is statements assembled from public material (MySQL's and MariaDB's own test suites,
the DDL pt-online-schema-change and gh-ost emit, statements quoted in CDC tools' DDL-parser bug
reports), grouped in cases. Each server-checked case runs in its own database on one MariaDB
(one server for the module); the tracker is then fed **what the server wrote to its binlog** (the
QUERY events, read back with ``binlog_parser``: versioned comments kept, ``CREATE TABLE … SELECT``
as row-based logging writes it), exactly what the archive would hold, and every table's columns
(order, type, unsigned, charset when the DDL states one, nullability, constant default, generated /
invisible) and primary key must equal ``information_schema.COLUMNS`` / ``STATISTICS``. Cases of
MySQL 8-only syntax (marked ``-- mysql8``) are checked against the expectations written in the
corpus (``-- expect t: …``), from MySQL's documentation.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import pymysql
import pytest
from test_mariadb_server import running_mariadb

from binlake.gold.schema_history import Coordinates, DdlStatement, SchemaTracker, TableSchema
from binlake.gold.types import MySQLColumn
from binlog_parser.events import QueryEvent
from binlog_parser.reader import read_events

CORPUS = Path(__file__).parent / "fixtures" / "ddl_corpus" / "corpus.sql"
_INT = ("tinyint", "smallint", "mediumint", "int", "bigint")


@dataclass
class Case:
    name: str
    source: str
    statements: list[str] = field(default_factory=list)
    mysql8: bool = False
    expect: dict[str, str] = field(default_factory=dict)  # table -> described schema (mysql8 cases)
    unknown: set[str] = field(default_factory=set)  # tables the tracker must call unknown

    @property
    def db(self) -> str:
        return "c_" + self.name


def load_corpus() -> list[Case]:
    cases: list[Case] = []
    pending: list[str] = []
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        head = re.match(r"^-- case: (\w+)\s*\|\s*source: (.+)$", line)
        if head:
            cases.append(Case(head.group(1), head.group(2).strip()))
            continue
        if line.startswith("-- mysql8"):
            cases[-1].mysql8 = True
        elif line.startswith("-- expect "):
            table, _, text = line[len("-- expect "):].partition(":")
            cases[-1].expect[table.strip()] = text.strip()
        elif line.startswith("-- unknown: "):
            cases[-1].unknown.update(t.strip() for t in line[len("-- unknown: "):].split(","))
        elif line.startswith("--") or not line.strip():
            continue
        else:
            pending.append(line)
            if line.rstrip().endswith(";"):
                cases[-1].statements.append("\n".join(pending).rstrip()[:-1])
                pending = []
    assert not pending, f"statement without a closing ';': {pending}"
    return cases


CASES = load_corpus()


# ------------------------------------------------------------------ one description for both sides

def _canonical_type(column_type: str) -> str:
    """A COLUMN_TYPE without what the binlog never shows (int display widths, ZEROFILL, float
    (M,D), YEAR(4))."""
    text = re.sub(r"\s*/\*.*?\*/", "", column_type.lower()).replace(" zerofill", "")
    base = text.split("(")[0].split(" ")[0]
    if base in _INT or base in ("float", "double", "year"):
        text = re.sub(r"\(\d+(,\d+)?\)", "", text)
    return text


def _quote_members(members: tuple[str, ...]) -> str:
    return ",".join("'" + m.replace("\\", "\\\\").replace("'", "''") + "'" for m in members)


def describe_column(c: MySQLColumn) -> str:
    """The tracker's column as a COLUMN_TYPE-like text plus its facts."""
    t = c.type
    if t in ("char", "varchar", "binary", "varbinary", "bit"):
        t += f"({c.length})"
    elif t == "decimal":
        t += f"({c.precision},{c.scale})"
    elif t in ("time", "datetime", "timestamp") and c.fsp:
        t += f"({c.fsp})"
    elif t in ("enum", "set"):
        t += f"({_quote_members(c.members)})"
    elif t == "json":
        t = "longtext"  # MariaDB's JSON is LONGTEXT with a CHECK (json_valid)
    if c.unsigned:
        t += " unsigned"
    return t


@dataclass(frozen=True)
class ServerColumn:
    name: str
    column_type: str
    nullable: bool
    charset: str | None
    default: str | None
    extra: str


def _same_default(ours: str | None, server: str | None, nullable: bool) -> bool:
    if server is None or server == "NULL":
        return ours is None or not nullable  # NOT NULL without DEFAULT: the implicit default
    if "(" in server and not server.startswith("'") or server.startswith("b'"):
        return True  # an expression (current_timestamp(), …) or a BIT literal: not compared
    if ours is None:
        return False
    if server.startswith("'"):
        server = server[1:-1].replace("''", "'")
    if server == ours:
        return True
    try:
        return Decimal(server) == Decimal(ours)
    except InvalidOperation:
        return False


def compare(schema: TableSchema, server_cols: list[ServerColumn], server_pk: list[str]) -> list[str]:
    """The differences between the tracker's table and the server's, in words (empty: equal)."""
    problems = []
    ours = [c.name for c in schema.columns]
    theirs = [c.name for c in server_cols]
    if ours != theirs:
        return [f"columns {ours} != server {theirs}"]
    for c, s in zip(schema.columns, server_cols, strict=True):
        if describe_column(c) != _canonical_type(s.column_type):
            problems.append(f"{c.name}: type {describe_column(c)!r} != {_canonical_type(s.column_type)!r}")
        if c.nullable != s.nullable:
            problems.append(f"{c.name}: nullable {c.nullable} != {s.nullable}")
        if c.charset is not None and c.type != "json" and s.charset is not None and c.charset != s.charset:
            problems.append(f"{c.name}: charset {c.charset} != {s.charset}")
        generated = ("VIRTUAL" if "VIRTUAL" in s.extra else "STORED" if "STORED" in s.extra else None)
        if c.generated != generated or c.invisible != ("INVISIBLE" in s.extra):
            problems.append(f"{c.name}: generated/invisible {c.generated}/{c.invisible} != {s.extra!r}")
        if generated is None and not _same_default(c.default, s.default, s.nullable):
            problems.append(f"{c.name}: default {c.default!r} != {s.default!r}")
    if list(schema.primary_key) != server_pk:
        problems.append(f"primary key {list(schema.primary_key)} != server {server_pk}")
    return problems


def describe_schema(schema: TableSchema) -> str:
    """``a int NOT NULL, b varchar(5) | pk a``: what a ``-- expect`` line says."""
    cols = ", ".join(f"{c.name} {describe_column(c)}{'' if c.nullable else ' NOT NULL'}"
                     f"{' ' + c.generated if c.generated else ''}{' INVISIBLE' if c.invisible else ''}"
                     for c in schema.columns)
    return f"{cols} | pk {','.join(schema.primary_key)}" if schema.primary_key else cols


# ------------------------------------------------------------------ the server run (one per module)

@pytest.fixture(scope="module")
def server_run() -> Iterator[dict[str, Any]]:
    cases = [c for c in CASES if not c.mysql8]
    with running_mariadb("binlake-ddl-corpus-") as db:
        conn = pymysql.connect(unix_socket=str(db.sock), user="root", charset="utf8mb4", autocommit=True)
        failures = []
        with conn.cursor() as cur:
            cur.execute("FLUSH BINARY LOGS")
            for case in cases:
                cur.execute(f"CREATE DATABASE `{case.db}`")
                cur.execute(f"USE `{case.db}`")
                for sql in case.statements:
                    try:
                        cur.execute(sql)
                    except pymysql.MySQLError as exc:
                        failures.append(f"{case.name}: {sql[:100]!r}: {exc}")
            names = "','".join(c.db for c in cases)
            cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, "
                        "CHARACTER_SET_NAME, COLUMN_DEFAULT, EXTRA FROM information_schema.COLUMNS "
                        f"WHERE TABLE_SCHEMA IN ('{names}') ORDER BY 1, 2, ORDINAL_POSITION")
            columns: dict[tuple[str, str], list[ServerColumn]] = {}
            for r in cur.fetchall():
                columns.setdefault((r[0], r[1]), []).append(ServerColumn(r[2], r[3], r[4] == "YES", r[5], r[6], r[7]))
            cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME FROM information_schema.STATISTICS "
                        f"WHERE TABLE_SCHEMA IN ('{names}') AND INDEX_NAME = 'PRIMARY' ORDER BY 1, 2, SEQ_IN_INDEX")
            pks: dict[tuple[str, str], list[str]] = {}
            for r in cur.fetchall():
                pks.setdefault((r[0], r[1]), []).append(r[2])
            cur.execute("FLUSH BINARY LOGS")
        conn.close()
        logged = []
        for path in db.binlog_files()[1:]:
            for ev in read_events(str(path)):
                if isinstance(ev, QueryEvent) and ev.schema.startswith("c_"):
                    logged.append((ev.schema, ev.query))
        yield {"failures": failures, "columns": columns, "pks": pks, "logged": logged, "cases": cases}


def test_corpus_size() -> None:
    total = sum(len(c.statements) for c in CASES)
    checked = sum(len(c.statements) for c in CASES if not c.mysql8)
    print(f"\nDDL corpus: {len(CASES)} cases, {total} statements, {checked} checked against MariaDB "
          f"({checked / total:.0%}), {total - checked} against documented MySQL 8 expectations")
    assert total >= 300 and checked / total >= 0.8


def test_every_server_statement_runs(server_run: dict[str, Any]) -> None:
    assert server_run["failures"] == [], "\n".join(server_run["failures"])


def test_tracker_equals_server(server_run: dict[str, Any]) -> None:
    """Fed the server's own binlog, the tracker's tables equal information_schema's."""
    tracker = SchemaTracker()
    for i, (db, sql) in enumerate(server_run["logged"]):
        tracker.apply(DdlStatement(Coordinates(1, i), db, sql))
    problems: list[str] = []
    checked = 0
    for case in server_run["cases"]:
        server_tables = {t for (d, t) in server_run["columns"] if d == case.db}
        ours = {t: s for (d, t), s in tracker.catalog.items() if d == case.db and s is not None}
        unknown = {v.table for v in tracker.history if v.db == case.db and v.schema is None and v.warning
                   and tracker.catalog.get((v.db, v.table)) is None}
        if unknown != case.unknown:
            warnings = [v.warning for v in tracker.history if v.db == case.db and v.warning]
            problems.append(f"{case.name}: unknown tables {sorted(unknown)} != expected {sorted(case.unknown)}: {warnings}")
        for table in sorted(server_tables - case.unknown):
            if table not in ours:
                problems.append(f"{case.name}: {table} is on the server, not in the tracker")
                continue
            diff = compare(ours[table], server_run["columns"][(case.db, table)],
                           server_run["pks"].get((case.db, table), []))
            problems += [f"{case.name}.{table}: {d}" for d in diff]
            checked += 1
        problems += [f"{case.name}: {t} is in the tracker, not on the server" for t in set(ours) - server_tables]
    print(f"\n{checked} tables compared with information_schema")
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("case", [c for c in CASES if c.mysql8], ids=lambda c: c.name)
def test_mysql8_only_syntax(case: Case) -> None:
    """Syntax MariaDB rejects, against the expectations the corpus documents."""
    tracker = SchemaTracker()
    for i, sql in enumerate(case.statements):
        tracker.apply(DdlStatement(Coordinates(1, i), case.db, sql))
    for table, expected in case.expect.items():
        schema = tracker.catalog.get((case.db, table))
        assert schema is not None, [v.warning for v in tracker.history]
        assert describe_schema(schema) == expected
