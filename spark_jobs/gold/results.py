"""What a gold run reports: per gold table, per union part, per source (:class:`GoldResult`).

Why a module of its own: the replay, the union writes, the status table and the run itself all
read or make these; the step turns a :class:`GoldResult` into its hand-over document
(:class:`binlake.step_results.GoldStepResult`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from binlake.gold.plan import NONE
from binlake.gold.schema_history import Coordinates
from spark_jobs.gold.tables import HISTORY_SUFFIX

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

#: write modes of a gold table that mean "written by this run" (an Airflow asset event each)
WRITTEN_MODES = frozenset({"merge", "overwrite"})
#: ... and of a union part
UNION_WRITTEN_MODES = frozenset({"union", "merge", "removed"})


def last_change(meta: tuple[Any, ...]) -> tuple[Any, ...]:
    """A replayed change's ``META_COLUMNS`` (``binlake.gold.state``) as a result's ``last_change``:
    (file, pos, gtid, commit_time), the order of ``meta.gold_status``' ``last_*`` columns."""
    return meta[4], meta[5], meta[2], meta[3]


@dataclass(frozen=True)
class GoldTableResult:
    """One gold table written by a run."""

    name: str
    db: str
    table: str
    location: str
    rows: int
    changes: int
    write_mode: str  # 'merge' | 'overwrite' (new schema) | 'unchanged' (inputs as last run) | 'dropped'
    warnings: tuple[tuple[str, int], ...]
    last_change: tuple[Any, ...] | None = None  # (file, pos, gtid, commit_time) of the latest change
    fingerprint: str | None = None
    history_rows: int | None = None  # versions in gold.<name>__history; None: no history kept
    replay: str = NONE  # 'full' | 'incremental' | 'none' (nothing replayed: unchanged, dropped)
    replay_reason: str | None = None  # why full
    replayed: int = 0  # row changes fed to the replay by this run
    through: Coordinates | None = None  # the last TABLE_MAP / row change of the table the gold table includes
    table_version: int | None = None  # Delta version of the gold table after the run
    history_version: int | None = None  # ... of its __history table
    schema_digest: str | None = None  # of the schema rows were converted with
    previous_fingerprint: str | None = None  # the table's fingerprint before an incremental run
    table_map: str | None = None  # a table without DDL: its best-informed TABLE_MAP and where (JSON)
    touched: DataFrame | None = field(default=None, compare=False, repr=False)  # incremental: the touched keys (DataFrame)
    schema_status: str | None = None  # why the table's schema is unknown (None: known)


@dataclass(frozen=True)
class GoldUnionResult:
    """The source's part of one union table after a run. ``write_mode``: ``union`` (its rows
    replaced), ``removed`` (its rows deleted: the table was dropped), ``unchanged`` or ``failed``."""

    name: str
    db: str
    table: str
    location: str
    rows: int
    write_mode: str
    fingerprint: str | None  # the gold table's input fingerprint its rows were copied at
    error: str | None = None


@dataclass(frozen=True)
class GoldResult:
    """What :func:`run_gold` did for one source."""

    source: str
    run_id: str
    tables: tuple[GoldTableResult, ...]
    schema_versions: int
    seconds: float
    unions: tuple[GoldUnionResult, ...] = ()
    left_unions: tuple[str, ...] = ()  # union tables the source's rows were removed from (config)

    def written(self) -> tuple[str, ...]:
        """Every gold table (``gold.<name>``) this run wrote: one Airflow asset event each."""
        names = set(self.left_unions)
        for t in self.tables:
            if t.write_mode in WRITTEN_MODES:
                names.add(t.name)
                if t.history_rows is not None:
                    names.add(t.name + HISTORY_SUFFIX)
        names.update(u.name for u in self.unions if u.write_mode in UNION_WRITTEN_MODES)
        return tuple(f"gold.{name}" for name in sorted(names))
