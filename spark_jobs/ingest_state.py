"""The ingestion state read through Spark: the same answer as ``binlake.ingest.state.load_known_files``.

``binlake`` reads ``meta.ingested_files`` / ``meta.binlog_files`` without Spark (discovery runs in
the Airflow worker); this Spark twin lives in the Spark layer and is what the tests compare it with.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from delta.tables import DeltaTable

from binlake.config import to_spark_uri
from binlake.discovery.discover import KnownFile
from binlake.ingest.state import _FACT_COLS, _INGESTED_COLS, BINLOG_FILES, INGESTED_FILES, _known_from_rows
from binlake.lake.tables import table_location


def known_files_spark(spark: Any, cfg: Any, source: str) -> dict[str, KnownFile]:
    """The same as :func:`load_known_files`, through Spark."""
    def rows(name: str, cols: Sequence[str]) -> list[dict[str, Any]]:
        path = to_spark_uri(table_location(cfg.warehouse, name))
        if not DeltaTable.isDeltaTable(spark, path):
            return []
        df = spark.read.format("delta").load(path)
        return [r.asDict() for r in df.where(df.source == source).select(*[c for c in cols if c in df.columns]).collect()]

    return _known_from_rows(rows(INGESTED_FILES, _INGESTED_COLS), rows(BINLOG_FILES, _FACT_COLS), source)
