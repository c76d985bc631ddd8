"""binlake.gold.state.lineage and TRUNCATE: a gold table's rows follow RENAME TABLE (the swap of an
online schema change), a TRUNCATE empties it, and the incremental plan refuses to resume across
either (pure; the Spark job runs the same replayer over ``lineage_stream``)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from binlake.gold.plan import ReplayState, TableInputs, Versions, replay_reason, schema_digest
from binlake.gold.schema_history import Coordinates, DdlStatement, SchemaVersion, build_history
from binlake.gold.state import Lineage, Segment, StreamItem, TableReplayer, final_schema, lineage

MAP3 = {"columns": [
    {"name": "id", "type": "LONG", "unsigned": False, "nullable": False, "primary_key": True},
    {"name": "owner", "type": "VARCHAR", "charset": "utf8mb4", "length": 40, "nullable": False},
    {"name": "note", "type": "VARCHAR", "charset": "utf8mb4", "length": 100, "nullable": True}],
    "primary_key": ["id"], "has_full_metadata": True}
MAP4 = {**MAP3, "columns": [*MAP3["columns"], {"name": "tier", "type": "VARCHAR", "charset": "utf8mb4",
                                                "length": 8, "nullable": False}]}
CREATE = "CREATE TABLE {} (id INT PRIMARY KEY, owner VARCHAR(40) NOT NULL, note VARCHAR(100)) CHARSET utf8mb4"


def at(pos: int) -> Coordinates:
    return Coordinates(1, pos, file="b.1")


def ddl(pos: int, sql: str) -> DdlStatement:
    return DdlStatement(at(pos), "live", sql)


class Stream:
    """Row changes of several tables in binlog order (each call takes the next position)."""

    def __init__(self) -> None:
        self.items: list[tuple[tuple[str, str], StreamItem]] = []
        self.pos = 1000

    def write(self, table: str, op: str, before: dict[str, Any] | None, after: dict[str, Any] | None,
              fields: dict[str, Any] = MAP3) -> None:
        self.pos += 10
        key = ("live", table)
        self.items.append((key, StreamItem(Coordinates(1, self.pos, file="b.1"), "table_map", json.dumps(fields))))
        self.pos += 10
        self.items.append((key, StreamItem(Coordinates(1, self.pos, -1, 0, "b.1"), "row", None, op,
                                           None if before is None else json.dumps(before),
                                           None if after is None else json.dumps(after), f"0-1-{self.pos}")))

    def of(self, line: Lineage) -> list[StreamItem]:
        return [item for key, item in self.items if any(_holds(seg, key, item.at) for seg in line.segments)]


def _holds(seg: Segment, key: tuple[str, str], at: Coordinates) -> bool:
    """Whether a row change of table ``key`` at ``at`` feeds the gold table through ``seg``: the
    filter ``spark_jobs.gold.tables.lineage_stream`` applies in Spark, for these pure tests."""
    return key == seg.key and (seg.after is None or at > seg.after) and (seg.before is None or at < seg.before)


def _rows(line: Lineage, stream: Stream, history: bool = False) -> tuple[TableReplayer, dict[Any, tuple[Any, ...]]]:
    final = final_schema(line.versions, None)
    assert final is not None
    replayer = TableReplayer("src", line.versions, final, history)
    replayer.feed_all(stream.of(line))
    return replayer, {r[0]: r[:len(final.columns)] for r in replayer.rows()}


def _pt_osc() -> tuple[list[SchemaVersion], Stream]:
    """pt-osc's sequence (the shadow table spelled out, not LIKE: lineage is the point here)."""
    s = Stream()
    statements = [ddl(10, CREATE.format("acct"))]
    s.write("acct", "insert", None, {"id": 1, "owner": "a", "note": "old"})
    s.write("acct", "insert", None, {"id": 2, "owner": "b", "note": None})
    statements.append(ddl(s.pos + 1, CREATE.format("_acct_new")))
    statements.append(ddl(s.pos + 2, "ALTER TABLE _acct_new ADD COLUMN tier VARCHAR(8) NOT NULL DEFAULT 'std'"))
    s.pos += 10
    s.write("_acct_new", "insert", None, {"id": 1, "owner": "a", "note": "old"}, MAP4)  # the copy
    s.write("acct", "update", {"id": 2, "owner": "b", "note": None}, {"id": 2, "owner": "b", "note": "upd"})
    s.write("_acct_new", "insert", None, {"id": 2, "owner": "b", "note": "upd"}, MAP4)  # the trigger's REPLACE
    s.write("acct", "insert", None, {"id": 3, "owner": "c", "note": None})
    s.write("_acct_new", "insert", None, {"id": 3, "owner": "c", "note": None}, MAP4)
    statements.append(ddl(s.pos + 1, "RENAME TABLE acct TO _acct_old, _acct_new TO acct"))
    statements.append(ddl(s.pos + 2, "DROP TABLE IF EXISTS _acct_old"))
    s.pos += 10
    s.write("acct", "update", {"id": 3, "owner": "c", "note": None, "tier": "std"},
            {"id": 3, "owner": "c", "note": None, "tier": "gold"}, MAP4)
    return build_history(statements), s


def test_rows_follow_the_swap() -> None:
    history, stream = _pt_osc()
    line = lineage(history, ("live", "acct"))
    assert [(seg.table, seg.after is None, seg.before is None) for seg in line.segments] == [
        ("_acct_new", True, False), ("acct", False, True)]
    assert line.segments[0].before == line.segments[1].after  # the RENAME's coordinates
    assert [(v.table, v.version) for v in line.versions] == [("_acct_new", 0), ("_acct_new", 1), ("acct", 2)]
    _, rows = _rows(line, stream)
    assert rows == {1: (1, "a", "old", "std"), 2: (2, "b", "upd", "std"), 3: (3, "c", None, "gold")}


def test_the_old_table_and_the_shadow_are_gone() -> None:
    history, _ = _pt_osc()
    old = lineage(history, ("live", "_acct_old"))  # renamed from acct, then dropped
    assert old.segments[0].after is not None and old.versions == ()
    assert final_schema(old.versions, None) is None
    shadow = lineage(history, ("live", "_acct_new"))  # renamed away
    assert final_schema(shadow.versions, None) is None
    before_swap = lineage(history[:3], ("live", "_acct_new"))  # a night ending mid-copy
    assert len(before_swap.segments) == 1 and final_schema(before_swap.versions, None) is not None


def test_a_swap_through_a_third_name_and_a_recreated_shadow() -> None:
    statements = [ddl(10, CREATE.format("a")), ddl(20, CREATE.format("b")),
                  ddl(30, "RENAME TABLE a TO tmp, b TO a, tmp TO b"),
                  ddl(40, "DROP TABLE b"), ddl(50, CREATE.format("b"))]
    history = build_history(statements)
    a, b = lineage(history, ("live", "a")), lineage(history, ("live", "b"))
    assert [(s.table, s.after, s.before) for s in a.segments] == [("b", None, at(30)), ("a", at(30), None)]
    assert [(s.table, s.after, s.before) for s in b.segments] == [("b", at(40), None)]  # re-created: afresh
    tmp = lineage(history[:-2], ("live", "b"))  # before the DROP: b holds a's rows, through tmp
    assert [s.table for s in tmp.segments] == ["a", "tmp", "b"]


def _truncated(history: list[SchemaVersion], pos: int) -> list[SchemaVersion]:
    """A TRUNCATE TABLE acct version, made by hand (the tracker's own is another change)."""
    last = [v for v in history if v.table == "acct"][-1]
    return [*history, replace(last, version=last.version + 1, at=at(pos), statement="TRUNCATE TABLE acct",
                              renamed_from=None, truncated=True, renames=())]


def test_truncate_removes_every_row_and_history_says_so() -> None:
    history, stream = _pt_osc()
    history = _truncated(history, stream.pos + 5)
    stream.pos += 10
    stream.write("acct", "insert", None, {"id": 9, "owner": "z", "note": None, "tier": "std"}, MAP4)
    replayer, rows = _rows(lineage(history, ("live", "acct")), stream, history=True)
    assert rows == {9: (9, "z", None, "std")}
    ended = [v for v in replayer.history_rows() if v[-2] == "truncate table"]
    assert sorted(v[0] for v in ended) == [1, 2, 3]


def test_incremental_refuses_to_resume_across_a_truncate_or_a_rename() -> None:
    history, stream = _pt_osc()
    line = lineage(history, ("live", "acct"))
    final = final_schema(line.versions, None)
    assert final is not None
    swap = line.segments[-1].after
    assert swap is not None
    fp = "5:99:digest"

    def reason(through: Coordinates, versions: tuple[SchemaVersion, ...]) -> str | None:
        state = ReplayState(fp, through, 3, schema_digest(final))
        inputs = TableInputs(fp.replace("5:", "6:", 1).replace(":99", ":100"), fp, at(stream.pos + 100))
        return replay_reason(state, inputs, versions, final, Versions(3, None), keep_history=False)

    assert reason(at(stream.pos), line.versions) is None  # after the swap: resumable
    before_swap = replace(swap, pos=swap.pos - 1)
    assert reason(before_swap, line.versions) == "a rename from live._acct_new lies after the last replayed change"
    truncated = lineage(_truncated(history, stream.pos + 5), ("live", "acct")).versions
    assert reason(at(stream.pos), truncated) == "TRUNCATE TABLE lies after the last replayed change"
    assert reason(at(stream.pos + 6), truncated) is None


def test_a_segment_holds_only_its_range() -> None:
    seg = Segment("live", "t", at(10), at(20))
    assert _holds(seg, ("live", "t"), at(15)) and not _holds(seg, ("live", "t"), at(25))
    assert not _holds(seg, ("live", "u"), at(15)) and not _holds(seg, ("live", "t"), at(10))


def test_the_trackers_own_truncate_empties_the_table() -> None:
    """``TRUNCATE TABLE`` as ``schema_history`` records it (a ``truncated`` version)."""
    s = Stream()
    statements = [ddl(10, CREATE.format("acct"))]
    s.write("acct", "insert", None, {"id": 1, "owner": "a", "note": None})
    statements.append(ddl(s.pos + 1, "TRUNCATE TABLE acct"))
    s.pos += 10
    s.write("acct", "insert", None, {"id": 2, "owner": "b", "note": None})
    history = build_history(statements)
    assert [v.truncated for v in history] == [False, True]
    _, rows = _rows(lineage(history, ("live", "acct")), s)
    assert rows == {2: (2, "b", None)}
