"""binlake.gold.schema_history: DDL (sqlglot MySQL dialect) replayed into schema versions."""

from __future__ import annotations

from binlake.gold.schema_history import (
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
        _stmt(2, "CREATE TABLE p (id INT PRIMARY KEY, g POINT)"),     # POINT: known (sqlglot alone failed)
        _stmt(3, "CREATE TABLE q LIKE nowhere"),                      # LIKE a table not in the archive
        _stmt(4, "CREATE TABLE r (id INT, d DATETIME DEFAULT CURRENT_TIMESTAMP)"),  # new rows only: fine
        _stmt(5, "INSERT INTO t VALUES (1)"),                         # not table DDL: ignored
        _stmt(6, "CREATE TABLE s SELECT * FROM r"),                   # statement-logged CTAS: unknown
        _stmt(7, "ALTER TABLE r ADD COLUMN z TIMESTAMP DEFAULT CURRENT_TIMESTAMP"),
        _stmt(8, "ALTER TABLE p ADD SYSTEM VERSIONING"),
        _stmt(9, "CREATE TABLE u (id INET6)"),
    ])
    assert [(v.table, v.schema is None) for v in history] == [
        ("t", True), ("p", False), ("q", True), ("r", False), ("s", True), ("r", False), ("p", True),
        ("u", True)]
    assert "unknown" in (history[0].warning or "")
    assert history[1].warning is None and history[1].schema is not None
    assert history[1].schema.columns[1].type == "point"
    assert "LIKE" in (history[2].warning or "") and "unknown" in (history[2].warning or "")
    assert history[3].warning is None
    assert "SELECT" in (history[4].warning or "")
    assert "rows older than it" in (history[5].warning or "")  # schema known, old rows' value not
    assert "SYSTEM VERSIONING" in (history[6].warning or "")
    assert "INET6" in (history[7].warning or "").upper()


def test_like_copies_the_current_version() -> None:
    tracker = SchemaTracker()
    tracker.apply(_stmt(1, "CREATE TABLE src (id INT NOT NULL, a VARCHAR(5) DEFAULT 'x', PRIMARY KEY (id)) "
                           "DEFAULT CHARSET=latin1"))
    tracker.apply(_stmt(2, "ALTER TABLE src ADD b INT NOT NULL DEFAULT 7 AFTER id"))
    tracker.apply(_stmt(3, "CREATE TABLE IF NOT EXISTS other.cp LIKE d.src"))
    tracker.apply(_stmt(4, "ALTER TABLE other.cp ADD c TEXT"))
    cp = tracker.catalog[("other", "cp")]
    assert cp is not None and cp.primary_key == ("id",)
    assert [(c.name, c.default, c.charset) for c in cp.columns] == [
        ("id", "0", None), ("b", "7", None), ("a", "x", "latin1"), ("c", None, "latin1")]  # NOT NULL: implicit 0


def test_online_schema_change_swap() -> None:
    """pt-online-schema-change's and gh-ost's sequence: shadow LIKE, ALTER, swap, drop."""
    tracker = SchemaTracker()
    for i, sql in enumerate([
            "CREATE TABLE live.acct (id INT PRIMARY KEY, v INT)",
            "CREATE TABLE `live`.`_acct_new` LIKE `live`.`acct`",
            "ALTER TABLE `live`.`_acct_new` ADD COLUMN note VARCHAR(20) NOT NULL DEFAULT ''",
            "RENAME TABLE `live`.`acct` TO `live`.`_acct_old`, `live`.`_acct_new` TO `live`.`acct`",
            "DROP TABLE IF EXISTS `live`.`_acct_old`"]):
        tracker.apply(_stmt(i, sql, db=None))
    assert _names(tracker, "live", "acct") == ["id", "v", "note"]
    moves = [(v.table, v.schema is not None, v.renamed_from) for v in tracker.history[3:7]]
    assert moves == [("acct", False, None), ("_acct_old", True, ("live", "acct")),
                     ("_acct_new", False, None), ("acct", True, ("live", "_acct_new"))]
    assert tracker.catalog[("live", "_acct_old")] is None
    assert all(v.warning is None for v in tracker.history)


def test_truncate_keeps_the_schema() -> None:
    history = build_history([_stmt(1, "CREATE TABLE t (id INT PRIMARY KEY)"), _stmt(2, "TRUNCATE TABLE t"),
                             _stmt(3, "TRUNCATE d.x")])
    assert [(v.table, v.truncated, v.schema is not None, v.warning is None) for v in history] == [
        ("t", False, True, True), ("t", True, True, True), ("x", True, False, False)]
    assert history[1].schema == history[0].schema


def test_shapeless_statements_make_no_version() -> None:
    tracker = SchemaTracker()
    tracker.apply(_stmt(1, "CREATE TABLE t (id INT PRIMARY KEY, a INT) /*!50100 PARTITION BY HASH (id) */"))
    for i, sql in enumerate([
            "ALTER TABLE t ADD INDEX ia (a), ALGORITHM=INPLACE, LOCK=NONE",
            "ALTER TABLE t ENGINE=InnoDB", "ALTER TABLE t COMMENT 'x', AUTO_INCREMENT=5",
            "ALTER TABLE t ADD PARTITION (PARTITION p3 VALUES LESS THAN (30))",
            "ALTER TABLE t DROP INDEX ia", "ALTER TABLE t MODIFY a INT", "ALTER TABLE t FORCE",
            "ALTER TABLE t /*!50100 PARTITION BY KEY (id) PARTITIONS 4 */", "OPTIMIZE TABLE t",
            "ALTER TABLE t RENAME INDEX x TO y, ALTER INDEX y INVISIBLE",
            "CREATE TEMPORARY TABLE t (z INT)", "DROP TEMPORARY TABLE IF EXISTS t"], start=2):
        tracker.apply(_stmt(i, sql))
    assert len(tracker.history) == 1, [v.statement for v in tracker.history[1:]]
    tracker.apply(_stmt(20, "ALTER ONLINE TABLE t /*M!100301 WAIT 5 */ ADD COLUMN (b INT, c INT), ADD z INT FIRST, "
                            "DROP PRIMARY KEY, ADD PRIMARY KEY (a, id)"))
    last = tracker.history[-1]
    assert last.schema is not None and last.warning is None
    assert [c.name for c in last.schema.columns] == ["z", "id", "a", "b", "c"]
    assert last.schema.primary_key == ("a", "id")


def test_generated_invisible_convert_and_quoted_names() -> None:
    tracker = SchemaTracker()
    tracker.apply(_stmt(1, "CREATE TABLE `ünï` (`ç d` INT NOT NULL, t TEXT CHARACTER SET latin1, "
                           "g INT AS (`ç d` + 1) VIRTUAL, s BIGINT GENERATED ALWAYS AS (`ç d` * 2) STORED, "
                           "h INT INVISIBLE DEFAULT 3, PRIMARY KEY (`ç d`))"))
    tracker.apply(_stmt(2, "ALTER TABLE `ünï` CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"))
    schema = tracker.catalog[("d", "ünï")]
    assert schema is not None and schema.primary_key == ("ç d",)
    cols = {c.name: c for c in schema.columns}
    assert (cols["t"].type, cols["t"].charset) == ("mediumtext", "utf8mb4")  # 65535 chars need 4 bytes each
    assert (cols["g"].generated, cols["s"].generated, cols["h"].invisible) == ("VIRTUAL", "STORED", True)
    assert tracker.history[-1].warning is None


def test_seed_then_ddl() -> None:
    seed = [DdlStatement(Coordinates(-1, i), "shop", sql) for i, sql in enumerate(split_dump(
        "/* dump */ CREATE TABLE `orders` (`id` int(11) NOT NULL, `amount` decimal(12,2) DEFAULT NULL,"
        " PRIMARY KEY (`id`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;\n"))]
    history = build_history([_stmt(1, "ALTER TABLE orders ADD note TEXT", db="shop")], seed)
    assert [v.origin for v in history] == ["seed", "ddl"]
    assert history[-1].schema is not None
    assert [c.name for c in history[-1].schema.columns] == ["id", "amount", "note"]


def test_split_dump_keeps_what_sqlglot_lost() -> None:
    """A mariadb-dump: versioned comments are run, a spatial column and a trigger body do not
    stop the split (sqlglot's parser failed on the whole file)."""
    statements = split_dump(
        "/*!40101 SET NAMES utf8mb4 */;\nUSE `shop`;\nCREATE TABLE `geo` (`id` int(11) NOT NULL, `p` point NOT NULL,"
        " `v` varchar(5) /*!100301 COMPRESSED*/ DEFAULT 'a;b', PRIMARY KEY (`id`)) /*!50100 PARTITION BY HASH (`id`) */;\n"
        "DELIMITER ;;\n/*!50003 CREATE*/ /*!50003 TRIGGER `t` BEFORE INSERT ON `geo` FOR EACH ROW SET NEW.v = 'x' */;;\n"
        "DELIMITER ;\n")
    assert statements[1] == "USE `shop`"
    history = build_history([], [DdlStatement(Coordinates(-1, i), "shop", s) for i, s in enumerate(statements)])
    (version,) = history
    assert version.schema is not None and version.warning is None
    assert [(c.name, c.type, c.default) for c in version.schema.columns] == [
        ("id", "int", "0"), ("p", "point", None), ("v", "varchar", "a;b")]
