"""``meta.gold_status``: what the previous run says of each gold table (read at the start of a
run with :func:`binlake.gold.reads.gold_status_rows`: skip, resume or replay in full), and the
source's rows written at its end.

One row per gold table, ``__history`` table and union part. Written after every table: the
recorded ``table_version`` then proves the next run that nothing wrote the table since
(``binlake.gold.plan``), and a table written after its status row falls back to the full replay.
"""

from __future__ import annotations

import datetime as _dt
import json
from typing import TYPE_CHECKING, Any

from binlake.gold.plan import NONE, ReplayState, coordinates_of, coordinates_text
from binlake.gold.reads import coverage_text, reconciled_gap
from binlake.gold.schema_history import Coordinates, SchemaVersion
from binlake.lake.leases import CommitFence
from binlake.lake.sql_text import sql_identifier, sql_string
from binlake.lake.tables import gold_table_name
from spark_jobs.catalog import register_gold_tables
from spark_jobs.gold.results import GoldTableResult, GoldUnionResult
from spark_jobs.gold.tables import HISTORY_SUFFIX, gold_location, replace_source_rows
from spark_jobs.lake import committed_write, delta_log, ensure_table
from spark_jobs.schemas import spec
from spark_jobs.session import session_of

if TYPE_CHECKING:  # pragma: no cover

    from binlake.config import BinlakeConfig
    from spark_jobs.session import SparkSource


def unchanged_result(previous: dict[str, Any], history: dict[str, Any] | None) -> GoldTableResult:
    """A table whose inputs are those of its last run: its status row carried over, nothing replayed."""
    warnings = tuple(sorted(json.loads(previous["warnings"]).items())) if previous["warnings"] else ()
    last = (previous["last_file"], previous["last_pos"], previous["last_gtid"],
            previous["last_commit_time"])
    state = ReplayState.from_status(previous, history)
    return GoldTableResult(previous["gold_table"], previous["db"], previous["table_name"],
                           previous["location"], previous["rows"], previous["changes"], "unchanged",
                           warnings, last, previous["input_fingerprint"],
                           None if history is None else history["rows"], NONE, None, 0, state.through,
                           state.table_version, state.history_version, state.schema_digest, table_map=state.table_map,
                           schema_status=previous.get("schema_status"))


def gold_names(source: str, previous: dict[str, dict[str, Any]]) -> dict[str, tuple[str, str]]:
    """The previous status rows of the source's own gold tables (not __history, not unions): name -> key."""
    return {name: (row["db"], row["table_name"]) for name, row in previous.items()
            if name == gold_table_name(source, row["db"], row["table_name"])}


def replay_marks(previous: dict[str, dict[str, Any]]) -> dict[tuple[str, str], Coordinates]:
    """Per table: the W its status row says its gold table includes (``replayed_through``)."""
    out = {}
    for name, row in previous.items():
        at = coordinates_of(row.get("replayed_through"))
        if at is not None and not name.endswith(HISTORY_SUFFIX) and "__" in name:
            out[(row["db"], row["table_name"])] = at
    return out


def _replay_columns(r: GoldTableResult, version: int | None, silver: int | None) -> tuple[Any, ...]:
    """The status row's replay columns (``replay`` … ``schema_status``) for table ``r`` at ``version``."""
    return (r.replay, r.replay_reason, r.replayed, coordinates_text(r.through), version, r.schema_digest, silver,
            r.table_map, r.schema_status)


def write_status(spark: SparkSource, cfg: BinlakeConfig, source: str, results: list[GoldTableResult],
                 history: list[SchemaVersion], seeded: bool, run_id: str,
                 unions: tuple[GoldUnionResult, ...] = (), silver_version: int | None = None,
                 registered: frozenset[str] = frozenset()) -> None:
    """Replace the source's rows of meta.gold_status: one per gold table, history table and union
    part (a union table has one row per source: its rows there, and what they were copied at).
    Written after every table: the recorded ``table_version`` then proves the next run that
    nothing wrote the table since (``binlake.gold.plan``). The gold tables not in ``registered``
    (the names of the previous status rows: registered when they appeared) are registered in a
    persistent catalog (:func:`spark_jobs.catalog.register_gold_tables`)."""
    complete, since = reconciled_gap(cfg, source)
    gtids = coverage_text(cfg, source)
    now = _dt.datetime.now(_dt.UTC)
    rows = []
    for r in results:
        last = r.last_change or (None, None, None, None)
        versions = [v.version for v in history if (v.db, v.table) == (r.db, r.table)]
        shared = (max(versions) if versions else None, *last, gtids, complete, since, seeded)
        warnings = json.dumps(dict(r.warnings)) if r.warnings else None
        tail = (r.write_mode, warnings, r.fingerprint, run_id, now)
        rows.append((source, r.name, r.db, r.table, r.location, r.rows, r.changes, *shared, *tail,
                     *_replay_columns(r, r.table_version, silver_version)))
        if r.history_rows is not None:  # the status row is the history table's catalog entry too
            name = r.name + HISTORY_SUFFIX
            rows.append((source, name, r.db, r.table, gold_location(cfg, name), r.history_rows, r.changes,
                         *shared, *tail, *_replay_columns(r, r.history_version, silver_version)))
        for u in unions:
            if (u.db, u.table) == (r.db, r.table):
                rows.append((source, u.name, u.db, u.table, u.location, u.rows, r.changes, *shared,
                             u.write_mode, u.error and json.dumps({u.error: 1}), u.fingerprint, run_id, now,
                             *_replay_columns(r, None, silver_version)))
    _ensure_columns(spark, cfg, "meta.gold_status")
    replace_source_rows(spark, cfg, "meta.gold_status", rows, source, run_id)
    mode = spec("meta.gold_status").column_names.index("write_mode")  # the status rows are the catalog's too
    register_gold_tables(spark, cfg, [row[1] for row in rows if row[mode] != "dropped" and row[1] not in registered])


def _ensure_columns(spark: SparkSource, cfg: BinlakeConfig, full_name: str) -> None:
    """Add the registry's columns a table written by an older binlake lacks (appended at the end,
    as the registry appends new columns), so the replace below finds the schema it writes."""
    path = ensure_table(spark, cfg, full_name)
    wanted = spec(full_name)
    held = _column_names(cfg, path)
    missing = [c for c in wanted.table.columns if c.name not in held]
    if not missing:
        return
    columns = ", ".join(f"{sql_identifier(c.name)} {c.type} COMMENT {sql_string(c.comment)}" for c in missing)

    def alter(fence: CommitFence) -> None:
        now_held = _column_names(cfg, path)
        if all(c.name in now_held for c in missing):
            return  # another source's gold task added them meanwhile
        fence.check()
        session_of(spark).sql(f"ALTER TABLE delta.{sql_identifier(path)} ADD COLUMNS ({columns})")

    committed_write(path, cfg.s3, alter, f"add columns to {full_name}")


def _column_names(cfg: BinlakeConfig, path: str) -> set[str]:
    table = delta_log(cfg, path)
    return set() if table is None else {f.name for f in table.schema().fields}
