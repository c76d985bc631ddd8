"""binlake.schema_history: DDL (sqlglot MySQL dialect) replayed into schema versions."""

from __future__ import annotations

from binlake.schema_history import (
    Coordinates,
    DdlStatement,
    SchemaTracker,
    build_history,
    split_dump,
)


def _stmt(pos: int, sql: str, db: str | None = "d") -> DdlStatement:
    return DdlStatement(Coordinates(1, pos, file="binlog.000001"), db, sql)


def _names(tracker: SchemaTracker, db: str, table: str) -> list[str]:
    schema = tracker.catalog[(db, table)]
    assert schema is not None
    return [c.name for c in schema.columns]


def test_create_table_types() -> None:
    history = build_history([_stmt(4, """CREATE TABLE t (
        id BIGINT UNSIGNED NOT NULL, d DECIMAL(65,30), v VARCHAR(10) CHARACTER SET latin1 DEFAULT 'x',
        e ENUM('a','b'), s SET('x','y'), b BIT(64), tm TIME(6), ts TIMESTAMP(3) NULL, j JSON,
        c CHAR(3) COLLATE latin1_bin, bl BLOB, PRIMARY KEY (id)) DEFAULT CHARSET=utf8mb4""")])
    (version,) = history
    assert version.schema is not None and version.warning is None
    cols = {c.name: c for c in version.schema.columns}
    assert version.schema.primary_key == ("id",)
    assert cols["id"].unsigned and cols["id"].type == "bigint" and not cols["id"].nullable
    assert (cols["d"].precision, cols["d"].scale) == (65, 30)
    assert cols["v"].charset == "latin1" and cols["v"].default == "x" and cols["v"].length == 10
    assert cols["e"].members == ("a", "b") and cols["s"].members == ("x", "y")
    assert cols["b"].length == 64 and cols["tm"].fsp == 6 and cols["ts"].fsp == 3
    assert cols["c"].charset == "latin1" and cols["bl"].charset == "binary"
    assert cols["j"].type == "json"


def test_alter_add_change_modify_positions() -> None:
    tracker = SchemaTracker()
    tracker.apply(_stmt(1, "CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT)"))
    tracker.apply(_stmt(2, "ALTER TABLE t ADD COLUMN c VARCHAR(5) NOT NULL DEFAULT 'new' AFTER id"))
    assert _names(tracker, "d", "t") == ["id", "c", "a", "b"]
    tracker.apply(_stmt(3, "ALTER TABLE t ADD z INT FIRST, DROP COLUMN b"))
    assert _names(tracker, "d", "t") == ["z", "id", "c", "a"]
    tracker.apply(_stmt(4, "ALTER TABLE t CHANGE COLUMN a a2 BIGINT UNSIGNED"))
    tracker.apply(_stmt(5, "ALTER TABLE t MODIFY c VARCHAR(20) FIRST"))
    tracker.apply(_stmt(6, "ALTER TABLE t RENAME COLUMN id TO pk"))
    assert _names(tracker, "d", "t") == ["c", "z", "pk", "a2"]
    last = tracker.history[-1]
    assert last.schema is not None and last.schema.primary_key == ("pk",)
    assert tracker.history[3].renames == (("a", "a2"),)
    assert last.renames == (("id", "pk"),)


def test_rename_and_drop_table() -> None:
    history = build_history([
        _stmt(1, "CREATE TABLE d.t (id INT PRIMARY KEY)"),
        _stmt(2, "RENAME TABLE t TO u"),
        _stmt(3, "ALTER TABLE u RENAME TO other.v"),
        _stmt(4, "DROP TABLE IF EXISTS other.v"),
    ])
    rows = [(v.db, v.table, v.version, v.schema is not None) for v in history]
    assert rows == [("d", "t", 0, True), ("d", "t", 1, False), ("d", "u", 0, True),
                    ("d", "u", 1, False), ("other", "v", 0, True), ("other", "v", 1, False)]
    assert all(v.warning is None for v in history)


def test_what_cannot_be_known_is_said() -> None:
    history = build_history([
        _stmt(1, "ALTER TABLE t ADD COLUMN x INT"),                   # CREATE predates the archive
        _stmt(2, "CREATE TABLE p (id INT PRIMARY KEY, g POINT)"),     # sqlglot cannot parse POINT
        _stmt(3, "CREATE TABLE q LIKE p"),                            # no column list
        _stmt(4, "CREATE TABLE r (id INT, d DATETIME DEFAULT CURRENT_TIMESTAMP)"),
        _stmt(5, "INSERT INTO t VALUES (1)"),                         # not table DDL: ignored
    ])
    assert [(v.table, v.schema is None) for v in history] == [("t", True), ("p", True), ("q", True), ("r", True)]
    assert "unknown" in (history[0].warning or "")
    assert history[1].warning and history[2].warning and "LIKE" in history[2].warning
    assert "not a constant" in (history[3].warning or "")


def test_seed_then_ddl() -> None:
    seed = [DdlStatement(Coordinates(-1, i), "shop", sql) for i, sql in enumerate(split_dump(
        "/* dump */ CREATE TABLE `orders` (`id` int(11) NOT NULL, `amount` decimal(12,2) DEFAULT NULL,"
        " PRIMARY KEY (`id`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;\n"))]
    history = build_history([_stmt(1, "ALTER TABLE orders ADD note TEXT", db="shop")], seed)
    assert [v.origin for v in history] == ["seed", "ddl"]
    assert history[-1].schema is not None
    assert [c.name for c in history[-1].schema.columns] == ["id", "amount", "note"]
