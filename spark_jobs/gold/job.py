"""Gold: one typed current-state Delta table per source table, plus silver.schema_history and
meta.gold_status (see docs/gold.md). :func:`run_gold` runs the stage for one source.

The stage reads in this order (the pure rules in ``binlake/gold/``, the Spark side here):

1. ``spark_jobs.gold.schema_history``: ``silver.schema_history`` rebuilt for the source from the
   DDL in ``silver.statements`` (plus an optional ``SHOW CREATE TABLE`` / seed dump), one commit;
2. ``binlake.gold.reads`` (``meta.gold_status``) and ``spark_jobs.gold.inputs``: what the last run recorded,
   and per table the input fingerprint of its row changes; a table whose inputs are those of its
   last run is skipped;
3. ``spark_jobs.gold.replay``: every other table brought up to date, incrementally when
   ``binlake.gold.plan`` proves it exact (``spark_jobs.gold.incremental``: the changes after the
   last one the gold table includes, replayed on the rows they touch and MERGEd back), else by the
   full replay of its TABLE_MAPs and row changes (``binlake.gold.state``), MERGEd on the primary key
   or overwritten with a new schema;
4. ``spark_jobs.gold.unions``: the source's part of every ``[gold.union]`` table its tables belong to;
5. ``spark_jobs.gold.status`` (write): the source's rows of ``meta.gold_status``.

Every output is a function of what silver holds, so re-runs, out-of-order backfills and a run
killed halfway (each Delta commit is atomic; a table written after its status row falls back to
the full replay) converge to the same tables.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from binlake.gold.plan import ReplayState, TableInputs
from binlake.gold.reads import gold_status_rows, load_ddl
from binlake.gold.schema_history import SchemaVersion, TableKey, build_history
from binlake.gold.seed import Snapshot, parse_dump
from binlake.gold.state import Lineage, lineage
from binlake.lake.tables import check_gold_names, gold_table_name
from spark_jobs.errors import GoldUnionError
from spark_jobs.gold.inputs import input_fingerprints, previous_base
from spark_jobs.gold.replay import TableTask, build_table
from spark_jobs.gold.results import GoldResult, GoldTableResult, GoldUnionResult
from spark_jobs.gold.schema_history import schema_digest_of, seed_statements, write_schema_history
from spark_jobs.gold.status import gold_names, replay_marks, unchanged_result, write_status
from spark_jobs.gold.tables import (
    HISTORY_SUFFIX,
    gold_location,
    gold_schema_ddl,
    history_schema_ddl,
    is_delta,
)
from spark_jobs.gold.unions import replace_union_rows, update_unions

if TYPE_CHECKING:  # pragma: no cover

    from binlake.config import BinlakeConfig
    from spark_jobs.session import SparkSource

#: what other packages and the tests import from here (the stage's entry point)
__all__ = ["HISTORY_SUFFIX", "GoldResult", "GoldTableResult", "GoldUnionError", "GoldUnionResult", "gold_location",
           "gold_schema_ddl", "gold_table_name", "history_schema_ddl", "replace_union_rows", "run_gold",
           "seed_statements", "write_status"]

log = logging.getLogger(__name__)


def _say_unknown(name: str, problem: str | None) -> None:
    """Tell the operator how to give a table whose schema cannot be known its schema."""
    if problem:
        log.warning("gold.%s: %s. Seed it from a dump: [gold] seed_dumps = { <source> = \"<mysqldump file>\" } "
                    "(docs/gold.md, \"Seeding from a snapshot\"), or give run_gold its SHOW CREATE TABLE text "
                    "(initial_schema_sql)", name, problem)


def _snapshot(cfg: BinlakeConfig, source: str, seed_dump: str | None) -> Snapshot | None:
    """The source's seed snapshot: ``seed_dump`` text, else the ``[gold] seed_dumps`` file."""
    if seed_dump is None:
        path = cfg.gold.seed_dumps.get(source)
        if path is None:
            return None
        with open(path, encoding="utf-8") as dump:
            seed_dump = dump.read()
    return parse_dump(seed_dump)


def _is_current(cfg: BinlakeConfig, before: dict[str, Any] | None, before_history: dict[str, Any] | None,
                fingerprint: str, keep_history: bool) -> bool:
    """The table's inputs are those of its last run and its tables (history too, if kept) exist."""
    if before is None or before["input_fingerprint"] != fingerprint or not is_delta(cfg, before["location"]):
        return False
    return keep_history == (before_history is not None and is_delta(cfg, before_history["location"]))


def run_gold(spark: SparkSource, cfg: BinlakeConfig, source: str, run_id: str, *,
             initial_schema_sql: str | None = None,
             only_tables: frozenset[tuple[str, str]] | None = None,
             force: bool = False, seed_dump: str | None = None) -> GoldResult:
    """Build (or bring up to date) every gold table of ``source`` from silver; see module doc.

    ``initial_schema_sql``: ``SHOW CREATE TABLE`` texts for tables created before the archive.
    ``seed_dump``: a dump taken at a GTID position (``binlake.gold.seed``; default: the
    ``[gold] seed_dumps`` file of the source): its tables start from its rows, and only
    changes (and DDL) whose GTID is not in its position apply.
    ``force``: replay every table in full, even when its inputs are unchanged since the last run.
    ``only_tables``: rebuild just these ``(db, table)`` (status rows of the others are kept
    out of this run's ``meta.gold_status`` rows, so use it for repairs, not routinely).
    ``spark`` is asked for its session only by the paths that need one (a large table, an
    incremental MERGE, a union, a table delta-rs may not write): a small night starts none.
    """
    t0 = time.time()
    snapshot = _snapshot(cfg, source, seed_dump)
    seeds = seed_statements("\n".join(text for text in (initial_schema_sql, snapshot.schema_sql if snapshot else None)
                                       if text))
    ddl = [d for d in load_ddl(cfg, source) or () if snapshot is None or not snapshot.position.contains(d.gtid)]
    history = build_history(ddl, seeds)
    write_schema_history(spark, cfg, source, history, run_id)
    previous = gold_status_rows(cfg, source)
    seed = snapshot.digest() if snapshot else None
    marks, names = replay_marks(previous), gold_names(source, previous)
    version, inputs, how = input_fingerprints(spark, cfg, source, schema_digest_of(source, history),
                                              previous_base(previous, names), marks, seed)
    log.info("source %s: input fingerprints of %d table(s) from %s", source, len(inputs), how)
    seeded_tables = {(t.db, t.table) for t in snapshot.tables} if snapshot else set()
    check_gold_names(source, set(inputs) | seeded_tables | _renamed_into(history) | set(names.values()),
                     cfg.gold.keeps_history)
    lineages = {key: lineage(history, key) for key in set(inputs) | seeded_tables | _renamed_into(history)}
    changes = {key: sum(inputs[seg.key].changes for seg in line.segments if seg.key in inputs)
               for key, line in lineages.items()}
    inputs = _lineage_inputs(inputs, lineages, schema_digest_of(source, history))
    results = []
    try:
        for db, table in sorted(lineages):
            if only_tables is None or (db, table) in only_tables:
                line = lineages[(db, table)]
                task = TableTask(source, db, table, line.versions, run_id, None, cfg.gold.keeps_history(db, table),
                                 snapshot, force=force, segments=line.segments, changes_fed=changes[(db, table)])
                results.append(_table(spark, cfg, task, inputs.get((db, table)), previous, seed))
        unions, left = update_unions(spark, cfg, source, results, previous, run_id, every_table=only_tables is None)
        write_status(spark, cfg, source, results, history, bool(seeds), run_id, unions,
                     version if only_tables is None else None, registered=frozenset(previous))
    finally:
        for r in results:
            if r.touched is not None:
                r.touched.unpersist()
    failed = [u.error for u in unions if u.error]
    if failed:
        raise GoldUnionError("\n".join(failed))
    return GoldResult(source, run_id, tuple(replace(r, touched=None) for r in results), len(history),
                      time.time() - t0, unions, left)


def _renamed_into(history: list[SchemaVersion]) -> set[tuple[str, str]]:
    """Tables rows were renamed into (RENAME TABLE, ALTER TABLE ... RENAME): each has a gold table
    even without row changes under its own name (a swap after the last change)."""
    return {(v.db, v.table) for v in history if v.renamed_from is not None}


def _lineage_inputs(inputs: dict[tuple[str, str], TableInputs], lineages: dict[tuple[str, str], Lineage],
                    schema_of: Callable[[TableKey], str]) -> dict[TableKey, TableInputs]:
    """Per gold table, its inputs: its own table's, and when rows were renamed into it, a digest of
    every other segment's table's fingerprint appended (``:lineage <digest>``). Why appended: the
    count and hash sum in front stay the table's own (what ``gold_inputs`` adds a night's files to),
    and a change in a table the rows came from changes the schema part, so the table is replayed in
    full rather than skipped or resumed."""
    out = dict(inputs)
    for key, line in lineages.items():
        if not line.renamed:
            continue
        parts = [[*seg.key, inputs[seg.key].fingerprint if seg.key in inputs else "no changes:" + schema_of(seg.key)]
                 for seg in line.segments[:-1]]
        parts.append(["segments", *(str(seg) for seg in line.segments)])
        suffix = ":lineage " + hashlib.sha1(json.dumps(parts).encode()).hexdigest()[:16]
        own = inputs.get(key) or TableInputs("no changes:" + schema_of(key))
        out[key] = replace(own, fingerprint=own.fingerprint + suffix)
    return out


def _table(spark: SparkSource, cfg: BinlakeConfig, task: TableTask, inputs: TableInputs | None,
           previous: dict[str, dict[str, Any]], seed: str | None) -> GoldTableResult:
    """One table of the run: skipped when its inputs are those of its last run, else built."""
    name = gold_table_name(task.source, task.db, task.table)
    fingerprint = inputs.fingerprint if inputs else "no changes" + (f":seed {seed}" if seed else "")
    before, before_history = previous.get(name), previous.get(name + HISTORY_SUFFIX)
    if not task.force and _is_current(cfg, before, before_history, fingerprint, task.history):
        assert before is not None
        return unchanged_result(before, before_history)
    state = None if before is None else ReplayState.from_status(before, before_history)
    result = build_table(spark, cfg, replace(task, fingerprint=fingerprint, state=state, inputs=inputs))
    _say_unknown(result.name, result.schema_status)
    return result
