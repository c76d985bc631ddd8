"""Seeding gold from a consistent snapshot: a logical dump taken at a known GTID position (pure).

An archive rarely starts at a table's creation. A dump made with ``--single-transaction`` holds
every table as it was at one instant, and (with ``--master-data``/``--source-data`` and, for
MariaDB, ``--gtid``) the GTID position of that instant. Gold then starts each table from the
dump's rows and applies only the archived changes whose GTID is *not* in the snapshot: a
transaction at or before the position is already in the dump, whatever file it is in.

Accepted form (docs/gold.md, "Seeding from a snapshot"): the text of

* ``mariadb-dump --single-transaction --master-data=2 --gtid --hex-blob [--databases …]``: the
  position is the ``SET GLOBAL gtid_slave_pos='d-s-n,…'`` line (commented or not): per domain,
  every sequence number up to ``n`` is in the snapshot;
* ``mysqldump --single-transaction --set-gtid-purged=ON --hex-blob …`` (MySQL 5.7 / 8.x): the
  ``SET @@GLOBAL.GTID_PURGED='uuid:1-n,…'`` line: exactly that GTID set is in the snapshot.

``--hex-blob`` is required for binary columns (without it the dump holds their raw bytes inside
a text file). ``INSERT`` statements with or without a column list (``--complete-insert``) are
read; ``CREATE TABLE`` statements become the tables' seed schema. Parsed with sqlglot's MySQL
dialect (the project's SQL parser: MySQL string escapes, hex / bit literals, charset
introducers); every value goes through the SQL parser on the driver, so very large tables are
better seeded another way (not built yet: Parquet/CSV exports with their GTID set).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import expressions as exp

from binlake.gold.errors import SnapshotError
from binlog_parser.gtid import GtidSet, MariaGtidList

_MARIA_POSITION = re.compile(r"gtid_slave_pos\s*=\s*'([^']*)'", re.IGNORECASE)
_TABLE_LOCKS = re.compile(r"^\s*(?:UN)?LOCK TABLES[^;]*;", re.IGNORECASE | re.MULTILINE)  # no data, no parse
_MYSQL_PURGED = re.compile(r"GTID_PURGED\s*=\s*(?:/\*!80000\s*'\+'\s*\*/\s*)?'([^']*)'", re.IGNORECASE)


@dataclass(frozen=True)
class SnapshotPosition:
    """The GTID position / set a snapshot reflects."""

    text: str
    flavor: str  # 'mariadb' (per-domain position) | 'mysql' (GTID set)

    def contains(self, gtid: str | None) -> bool:
        """Whether the transaction ``gtid`` is already in the snapshot (never for ANONYMOUS / NULL)."""
        if not gtid or gtid == "ANONYMOUS":
            return False
        if self.flavor == "mariadb":
            return "-" in gtid and MariaGtidList.from_text(self.text).contains(gtid)
        return ":" in gtid and GtidSet.from_text(self.text).contains(gtid)


@dataclass(frozen=True)
class SeedTable:
    """One table's rows in the dump: ``columns`` (None: the CREATE TABLE's order) and values as
    text (strings, numbers), bytes (hex / bit / ``_binary`` literals) or None (NULL)."""

    db: str
    table: str
    columns: tuple[str, ...] | None
    rows: tuple[tuple[Any, ...], ...]


@dataclass(frozen=True)
class Snapshot:
    """A parsed dump: its position, its CREATE TABLE statements (``USE db;`` lines kept, the
    form ``run_gold(initial_schema_sql=…)`` reads) and its rows per table."""

    position: SnapshotPosition
    schema_sql: str
    tables: tuple[SeedTable, ...]

    def rows_of(self, db: str, table: str) -> SeedTable | None:
        for seed in self.tables:
            if (seed.db.casefold(), seed.table.casefold()) == (db.casefold(), table.casefold()):
                return seed
        return None

    def digest(self) -> str:
        """Changes when the snapshot does (part of gold's input fingerprint)."""
        text = repr((self.position, self.schema_sql, self.tables))
        return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def dump_position(text: str) -> SnapshotPosition:
    """The GTID position the dump records (SnapshotError when it records none)."""
    maria = _MARIA_POSITION.findall(text)
    if maria:
        return SnapshotPosition(maria[-1].strip(), "mariadb")
    mysql = _MYSQL_PURGED.findall(text)
    if mysql:
        return SnapshotPosition(mysql[-1].replace("\n", "").strip(), "mysql")
    raise SnapshotError("the dump records no GTID position: take it with mariadb-dump --master-data=2 --gtid "
                        "(MariaDB) or mysqldump --set-gtid-purged=ON (MySQL)")


def literal_value(node: exp.Expression) -> Any:
    """A dump literal: text for strings and numbers, bytes for hex / bit / ``_binary`` literals."""
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Neg):
        inner = literal_value(node.this)
        return "-" + str(inner)
    if isinstance(node, exp.HexString):
        return bytes.fromhex(str(node.this))
    if isinstance(node, exp.BitString):
        bits = str(node.this) or "0"
        return int(bits, 2).to_bytes((len(bits) + 7) // 8, "big")
    if isinstance(node, exp.Introducer):  # _binary '…' (mysqldump without --hex-blob)
        return str(node.expression.this).encode("utf-8", "surrogateescape")
    if isinstance(node, exp.Literal):
        return str(node.this)
    if isinstance(node, exp.Boolean):
        return int(bool(node.this))
    raise SnapshotError(f"dump value {node.sql('mysql')[:80]!r} is not a literal")


def _insert_rows(insert: exp.Insert, db: str | None) -> SeedTable:
    target = insert.this
    columns = None
    if isinstance(target, exp.Schema):
        columns = tuple(c.name for c in target.expressions)
        target = target.this
    values = insert.expression
    if not isinstance(target, exp.Table) or not isinstance(values, exp.Values):
        raise SnapshotError(f"dump INSERT not understood: {insert.sql('mysql')[:120]!r}")
    table_db = target.db or db
    if not table_db:
        raise SnapshotError(f"dump INSERT into {target.name!r} with no database (no USE before it)")
    rows = tuple(tuple(literal_value(v) for v in row.expressions) for row in values.expressions)
    return SeedTable(table_db, target.name, columns, rows)


def parse_dump(text: str) -> Snapshot:
    """A ``mariadb-dump`` / ``mysqldump`` text (see module doc) as a :class:`Snapshot`."""
    position = dump_position(text)
    db: str | None = None
    schema: list[str] = []
    rows: dict[tuple[str, str], SeedTable] = {}
    try:
        statements = sqlglot.parse(_TABLE_LOCKS.sub("", text), read="mysql")
    except sqlglot.errors.ParseError as exc:
        raise SnapshotError(f"the dump does not parse as MySQL SQL: {str(exc)[:300]}") from None
    for statement in statements:
        if isinstance(statement, exp.Use):
            db = statement.this.name
            schema.append(f"USE `{db}`;")
        elif isinstance(statement, exp.Create) and statement.kind == "TABLE":
            schema.append(statement.sql("mysql", comments=False) + ";")
        elif isinstance(statement, exp.Insert):
            seed = _insert_rows(statement, db)
            key = (seed.db, seed.table)
            before = rows.get(key)
            rows[key] = seed if before is None else SeedTable(seed.db, seed.table, seed.columns,
                                                               before.rows + seed.rows)
    return Snapshot(position, "\n".join(schema), tuple(rows.values()))


def silver_form(value: Any, binary_column: bool) -> Any:
    """A dump value as silver renders a decoded value of its column: binary columns as
    ``0x<hex>`` (a quoted string in a binary column is its bytes: ``--hex-blob`` leaves empty
    values as ``''``), text from bytes decoded as UTF-8."""
    if isinstance(value, bytes):
        return "0x" + value.hex() if binary_column else value.decode("utf-8", errors="replace")
    if isinstance(value, str) and binary_column:
        return "0x" + value.encode("utf-8", "surrogateescape").hex()
    return value
