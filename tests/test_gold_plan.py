"""binlake.gold.plan: when a gold table may be brought up to date incrementally, and why not (pure)."""

from __future__ import annotations

from dataclasses import replace

from binlake.gold.plan import (
    ReplayState,
    TableInputs,
    Versions,
    coordinates_of,
    coordinates_text,
    fingerprint,
    replay_reason,
    schema_digest,
    stream_order,
)
from binlake.gold.schema_history import Coordinates, DdlStatement, SchemaVersion, TableSchema, build_history

DDL = [DdlStatement(Coordinates(1, 4, file="b.000001"), "shop",
                    "CREATE TABLE orders (id INT PRIMARY KEY, amount DECIMAL(12,2), ratio FLOAT)")]
VERSIONS = [v for v in build_history(DDL) if v.table == "orders"]
_FINAL = VERSIONS[-1].schema
assert _FINAL is not None
FINAL: TableSchema = _FINAL
W = Coordinates(1, 900, -1, 3, "b.000001")
STATE = ReplayState(fingerprint(10, 1234, "s1"), W, 7, schema_digest(FINAL), None, 10, {}, None)
INPUTS = TableInputs(fingerprint(12, 1500, "s1"), fingerprint(10, 1234, "s1"), Coordinates(2, 4, -1, 0, "b.000002"))
NOW = Versions(7, None)


def reason(state: ReplayState | None = STATE, inputs: TableInputs = INPUTS, now: Versions = NOW, *,
           final: TableSchema = FINAL, versions: list[SchemaVersion] = VERSIONS, history: bool = False,
           force: bool = False) -> str | None:
    return replay_reason(state, inputs, versions, final, now, keep_history=history, force=force)


def test_only_new_changes_on_an_untouched_table_are_incremental() -> None:
    assert reason() is None
    assert reason(state=replace(STATE, history_version=3), now=Versions(7, 3), history=True) is None


def test_every_rule_names_its_reason() -> None:
    assert reason(force=True) == "forced"
    assert reason(state=None) == "no earlier replay of the table in meta.gold_status"
    assert reason(state=replace(STATE, through=None)) == "its status row has no replay state (written before incremental gold)"
    assert reason(now=Versions(None, None)) == "the gold table is missing"
    assert reason(now=Versions(8, None)) == ("the gold table is at version 8, its status row says 7 "
                                             "(a run stopped after writing it?)")
    assert reason(now=Versions(7, 4), state=replace(STATE, history_version=3), history=True) == (
        "the __history table is at version 4, its status row says 3 (a run stopped after writing it?)")
    assert reason(history=True) == "the __history table is missing"
    keyless = replace(FINAL, primary_key=())
    assert reason(final=keyless, state=replace(STATE, schema_digest=schema_digest(keyless))) == \
        "no primary key (rows are keyed by their full contents)"
    float_key = replace(FINAL, primary_key=("id", "ratio"))
    assert reason(final=float_key, state=replace(STATE, schema_digest=schema_digest(float_key))) == \
        "key column ratio is FLOAT (its float32 value read back from Delta is not the replay's)"
    assert reason(inputs=replace(INPUTS, fingerprint=fingerprint(12, 1500, "s2"))) == "schema history or seed changed (DDL)"
    assert reason(inputs=replace(INPUTS, fingerprint=fingerprint(12, 1500, "s1", "dump2"))) == \
        "schema history or seed changed (DDL)"
    assert reason(state=replace(STATE, schema_digest="other")) == \
        "the schema rows are converted with changed (best-informed TABLE_MAP)"
    assert reason(inputs=replace(INPUTS, old_fingerprint=fingerprint(11, 1300, "s1"))) == (
        "changes at or before the last replayed one differ (an older file backfilled or a file re-ingested)")
    assert reason(inputs=replace(INPUTS, first_new=None)) == "no new changes after the last replayed one"
    late = [*DDL, DdlStatement(Coordinates(3, 4, file="b.000003"), "shop", "ALTER TABLE orders ADD note TEXT")]
    versions = [v for v in build_history(late) if v.table == "orders"]
    assert reason(versions=versions) == "schema version 1 lies after the first new change"


def test_a_small_table_is_replayed_in_full_where_incremental_would_be_exact() -> None:
    """``[gold] incremental_min_changes``: the floor counts every row change silver holds for the
    table (12 here), and applies only where the incremental path is exact (a broken rule's reason wins)."""
    def floored(minimum: int, state: ReplayState | None = STATE) -> str | None:
        return replay_reason(state, INPUTS, VERSIONS, FINAL, NOW, keep_history=False, min_changes=minimum)
    assert floored(12) is None and floored(0) is None
    assert floored(13) == ("a small table: 12 row changes, fewer than [gold] incremental_min_changes (13), "
                           "so the full replay costs less")
    assert floored(13, state=None) == "no earlier replay of the table in meta.gold_status"


def test_coordinates_round_trip_and_stream_order() -> None:
    assert coordinates_text(W) == '[1, "b.000001", 900, -1, 3]'
    assert coordinates_of(coordinates_text(W)) == W and coordinates_of(None) is None
    a, b = Coordinates(0, 900, file="x-a"), Coordinates(0, 100, file="x-b")
    assert stream_order(a) < stream_order(b) and a > b  # the stream sorts by file before pos


def test_schema_digest_sees_what_conversion_depends_on() -> None:
    """Same Spark types, other conversion: a charset, ENUM members, a default change the digest."""
    def schema(columns: str) -> TableSchema:
        ddl = [DdlStatement(Coordinates(1, 4, file="b"), "shop", f"CREATE TABLE t (id INT PRIMARY KEY, {columns})")]
        out = build_history(ddl)[-1].schema
        assert out is not None
        return out

    base = schema("v VARCHAR(9) CHARSET utf8mb4, e ENUM('a','b'), d INT DEFAULT 1")
    assert schema_digest(base) == schema_digest(schema("v VARCHAR(9) CHARSET utf8mb4, e ENUM('a','b'), d INT DEFAULT 1"))
    for other in ("v VARCHAR(9) CHARSET latin1, e ENUM('a','b'), d INT DEFAULT 1",
                  "v VARCHAR(9) CHARSET utf8mb4, e ENUM('a','c'), d INT DEFAULT 1",
                  "v VARCHAR(9) CHARSET utf8mb4, e ENUM('a','b'), d INT DEFAULT 2"):
        assert schema_digest(schema(other)) != schema_digest(base), other
    assert schema_digest(replace(FINAL, primary_key=())) != schema_digest(FINAL)
