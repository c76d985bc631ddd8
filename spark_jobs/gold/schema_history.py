"""Gold's first step: ``silver.schema_history`` rebuilt for a source from the DDL in
``silver.statements`` (and an optional ``SHOW CREATE TABLE`` / dump seed).

The history itself is pure (:func:`binlake.gold.schema_history.build_history`), its input read by
:func:`binlake.gold.reads.load_ddl` (delta-rs); this module writes its rows (one commit per run and
source), and digests each table's part for the input fingerprints (a table whose schema history
changed is replayed again).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from binlake.gold.schema_history import Coordinates, DdlStatement, SchemaVersion, split_dump
from spark_jobs.gold.tables import replace_source_rows

if TYPE_CHECKING:  # pragma: no cover

    from binlake.config import BinlakeConfig
    from spark_jobs.session import SparkSource


def seed_statements(initial_schema_sql: str | None, default_db: str | None = None) -> list[DdlStatement]:
    """A ``SHOW CREATE TABLE`` / ``mysqldump --no-data`` text as seed statements (before the archive)."""
    if not initial_schema_sql:
        return []
    db = default_db
    out = []
    for i, sql in enumerate(split_dump(initial_schema_sql)):
        use = re.match(r"^\s*USE\s+`?(\w+)`?", sql, re.IGNORECASE)
        if use:
            db = use.group(1)
            continue
        out.append(DdlStatement(Coordinates(-1, i, file="<initial schema>"), db, sql))
    return out


def _history_rows(source: str, history: list[SchemaVersion]) -> list[tuple[Any, ...]]:
    rows = []
    for v in history:
        schema = v.schema
        rows.append((source, v.db, v.table, v.version, v.origin, v.at.file or None,
                     v.at.file_seq, v.at.pos, None if v.at.payload_index < 0 else v.at.payload_index,
                     v.statement,
                     None if schema is None else json.dumps([c.to_json() for c in schema.columns]),
                     None if schema is None else list(schema.primary_key),
                     json.dumps(v.renames) if v.renames else None,
                     schema is None and v.warning is None, v.warning))
    return rows


def write_schema_history(spark: SparkSource, cfg: BinlakeConfig, source: str, history: list[SchemaVersion],
                         run_id: str) -> None:
    """Replace the source's rows of silver.schema_history (one commit)."""
    replace_source_rows(spark, cfg, "silver.schema_history", _history_rows(source, history), source, run_id)


def schema_digest_of(source: str, history: list[SchemaVersion]) -> Callable[[tuple[str, str]], str]:
    """A table's schema history digest (part of its input fingerprint)."""
    rows = _history_rows(source, history)

    def digest(key: tuple[str, str]) -> str:
        mine = [row for row in rows if (row[1], row[2]) == key]
        return hashlib.sha1(json.dumps(mine, default=str).encode()).hexdigest()[:16]
    return digest
