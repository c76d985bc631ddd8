"""The Spark engine of ``binlake sql``: writes, DDL and ``--engine spark`` go through Spark SQL.

Why it exists next to the JVM-free fast path (binlake.sql.fast): statements that change tables or use
Spark-only syntax need Spark and Delta's own writer. The tables live in folders or buckets, not in
a metastore, so every existing table of :mod:`binlake.lake.tables` is registered by name first
(:func:`spark_jobs.catalog.register_tables`, in the session's in-memory catalog).

Every statement is checked first (:mod:`binlake.sql.guard`): names outside the warehouse are refused,
and Spark's ``<format>.`<path>``` tables are off (``spark.sql.runSQLOnFiles``) while a statement runs.
A statement that changes tables runs only when the engine allows writes (``--allow-writes``), and
then under the same per-table commit locks as the jobs' writes
(:func:`binlake.lake.leases.table_commit_lock`, taken in location order for the tables it writes).

Spark's own stderr (the JVM's log4j lines: "Setting default log level", NativeCodeLoader warnings)
goes to ``<state_dir>/logs/binlake-sql-spark.log`` instead of the terminal, so results stay clean.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from binlake.config import BinlakeConfig
from binlake.lake.tables import TableSpec, table
from binlake.sql.fast import (
    QueryResult,
    TableNotFoundError,
    missing_table_hint,
    show_result,
    show_statement,
)
from binlake.sql.guard import analyse
from spark_jobs.catalog import delta_table_exists, register_tables

__all__ = ["SparkSqlEngine", "delta_table_exists", "register_tables", "run_query"]

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from binlake.lake.leases import CommitFence

_MISSING_TABLE = re.compile(r"TABLE_OR_VIEW_NOT_FOUND.*?`([^`]+)`(?:\.`([^`]+)`)?", re.DOTALL)


@contextlib.contextmanager
def stderr_to_file(path: Path) -> Iterator[None]:
    """Point file descriptor 2 at ``path`` while the JVM starts (the child keeps it), then restore ours."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def quiet_pyspark_sql_errors() -> None:
    """pyspark logs every failed statement as a JSON stack trace; binlake prints a one-line error instead."""
    import logging

    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)


def run_query(spark: SparkSession, statement: str, max_rows: int = 0) -> QueryResult:
    """Run one statement on ``spark``: at most ``max_rows`` rows (0: all), as canonical values."""
    from binlake.sql.values import arrow_rows

    frame = spark.sql(statement)
    if not frame.columns:
        return QueryResult(columns=[], rows=[])
    table = (frame.limit(max_rows + 1) if max_rows > 0 else frame).toArrow()
    truncated = 0 < max_rows < table.num_rows
    if truncated:
        table = table.slice(0, max_rows)
    return QueryResult(columns=list(frame.columns), rows=arrow_rows(table), truncated=truncated)


@contextlib.contextmanager
def no_sql_on_files(spark: SparkSession) -> Iterator[None]:
    """Spark's path tables (``delta.`/any/path```) off while a statement runs, then as they were
    (the session may be shared: in-process Airflow tasks, tests)."""
    key = "spark.sql.runSQLOnFiles"
    before = spark.conf.get(key, "true") or "true"
    spark.conf.set(key, "false")
    try:
        yield
    finally:
        spark.conf.set(key, before)


class CommitLocks(contextlib.ExitStack):
    """Held commit locks (entered); :meth:`check` fences the statement's commit, as the jobs do."""

    def __init__(self) -> None:
        super().__init__()
        self.held: list[CommitFence] = []

    def check(self) -> None:
        """LockLostError when any lock was lost (a stalled heartbeat): call right before the commit."""
        for lock in self.held:
            lock.check()


def commit_locks(cfg: BinlakeConfig, names: tuple[str, ...]) -> CommitLocks:
    """The commit locks of the tables ``names`` (``db.table``), entered in location order (two
    statements writing the same two tables never wait for each other crosswise)."""
    from binlake.lake.leases import table_commit_lock

    locations = []
    for name in names:
        try:
            locations.append(table(name).location(cfg.warehouse))
        except KeyError:
            raise TableNotFoundError(f"{name} is not a binlake table (written tables must be binlake's)") from None
    stack = CommitLocks()
    try:
        for location in sorted(set(locations)):
            stack.held.append(stack.enter_context(table_commit_lock(location, cfg.s3)))
    except BaseException:
        stack.close()
        raise
    return stack


class SparkSqlEngine:
    """A SparkSession with the binlake tables registered; started on first use (it costs a JVM).

    ``allow_writes``: run statements that change tables (under their commit locks); else refuse them.
    """

    def __init__(self, cfg: BinlakeConfig, allow_writes: bool = False) -> None:
        self.cfg = cfg
        self.allow_writes = allow_writes
        self._stack = contextlib.ExitStack()
        self._spark: SparkSession | None = None
        self.registered: list[str] = []
        self.log_path = Path(cfg.state_dir) / "logs" / "binlake-sql-spark.log"

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            from spark_jobs.session import spark_session

            quiet_pyspark_sql_errors()
            with stderr_to_file(self.log_path):
                self._spark = self._stack.enter_context(spark_session(self.cfg, "binlake-sql", ui=False))
            self.registered = register_tables(self._spark, self.cfg)
        return self._spark

    def existing_tables(self) -> list[TableSpec]:
        _ = self.spark
        return [table(name) for name in self.registered]

    def run(self, statement: str, max_rows: int = 0) -> QueryResult:
        """Run one statement; at most ``max_rows`` rows (0: all), as canonical values."""
        from pyspark.errors import AnalysisException

        show = show_statement(statement)
        if show is not None:
            return show_result(show[0], show[1], self.existing_tables())
        access = analyse(statement)
        access.refuse_unless(self.allow_writes)
        spark = self.spark
        try:
            with commit_locks(self.cfg, access.writes) as locks, no_sql_on_files(spark):
                locks.check()  # fence: still ours right before the statement's commit
                return run_query(spark, statement, max_rows)
        except AnalysisException as exc:
            match = _MISSING_TABLE.search(str(exc))
            if match:
                name = ".".join(part for part in match.groups() if part)
                raise TableNotFoundError(missing_table_hint(name, self.cfg, self.existing_tables())) from None
            raise

    def columns(self, spec: TableSpec) -> list[str]:
        return list(self.spark.table(spec.full_name).columns)

    def cancel(self) -> None:
        if self._spark is not None:
            self._spark.sparkContext.cancelAllJobs()

    def close(self) -> None:
        self._stack.close()
