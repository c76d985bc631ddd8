"""The Spark side of the catalog: the binlake tables registered by name in a session's catalog.

One registration for every caller: ``binlake sql``'s Spark engine (an in-memory catalog, filled at
start), ``binlake catalog sync`` and ``binlake serve`` (the persistent metastore of
:mod:`binlake.lake.catalog`), and gold, which registers the tables it creates as they appear
(:func:`register_gold_tables`) when its session is on the persistent metastore (``[spark.conf]``
``spark.sql.catalogImplementation = "hive"`` with a shared metastore database); on the jobs' default
in-memory catalog that call does nothing, and ``binlake catalog sync`` brings the metastore in step.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from binlake.config import BinlakeConfig
from binlake.lake.catalog import GOLD_TABLES_SQL, HIVE, CatalogEntry, catalog_entries
from binlake.lake.tables import DATABASES, GOLD_DATABASE, META_GOLD_STATUS
from spark_jobs.session import session_of

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from spark_jobs.session import SparkSource

log = logging.getLogger(__name__)


def delta_table_exists(spark: SparkSession, location: str) -> bool:
    """True when ``location`` holds a Delta table (False on a missing folder or bucket)."""
    from delta.tables import DeltaTable

    try:
        return bool(DeltaTable.isDeltaTable(spark, location))
    except Exception:  # noqa: BLE001 - e.g. the bucket does not exist
        return False


def register_tables(spark: SparkSession, cfg: BinlakeConfig) -> list[str]:
    """Register every existing binlake table by name; returns the names registered.

    Tables not written yet are skipped (their database is still created). Re-registering is
    harmless (IF NOT EXISTS); a name pointing at another location (another warehouse) is re-pointed.
    Gold tables (with their histories and union tables) are those ``meta.gold_status`` lists.
    """
    for db in DATABASES:
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {db}")
    registered = [e.full_name for e in catalog_entries(cfg.warehouse) if register(spark, e)]
    if META_GOLD_STATUS.full_name in registered:
        names = [str(row[0]) for row in spark.sql(GOLD_TABLES_SQL).collect()]
        gold = [e for e in catalog_entries(cfg.warehouse, names) if e.spec.database == GOLD_DATABASE]
        registered += [e.full_name for e in gold if register(spark, e)]
    return registered


def register(spark: SparkSession, entry: CatalogEntry) -> bool:
    """Register one table by name if it exists (re-pointing a name registered at another location)."""
    if not delta_table_exists(spark, entry.location):
        return False
    if spark.catalog.tableExists(entry.full_name):
        current = str(spark.sql(f"DESCRIBE DETAIL {entry.full_name}").collect()[0]["location"])
        wanted = entry.location
        if current.rstrip("/") != wanted.rstrip("/") and not current.endswith(wanted.split("://")[-1]):
            spark.sql(f"DROP TABLE {entry.full_name}")
    spark.sql(entry.create_sql())
    return True


def on_metastore(spark: SparkSession) -> bool:
    """True when the session's catalog is a (persistent) Hive metastore, not the in-memory one."""
    return (spark.conf.get("spark.sql.catalogImplementation", "in-memory") or "") == HIVE


def register_gold_tables(spark: SparkSource, cfg: BinlakeConfig, names: Sequence[str]) -> list[str]:
    """Register the gold tables ``names`` (as gold writes their status rows) in the session's
    metastore; nothing on an in-memory catalog (the jobs' default: ``binlake catalog sync`` then).
    A session not started yet is not started for an in-memory catalog: a jobs' session is on one
    unless ``[spark.conf]`` says otherwise or it is a client of ``binlake serve --connect`` (whose
    catalog is the metastore)."""
    from spark_jobs.session import LazySession

    if not names:
        return []
    if isinstance(spark, LazySession) and not spark.started and cfg.spark.mode != "connect" \
            and cfg.spark.extra_conf.get("spark.sql.catalogImplementation") != HIVE:
        return []
    spark = session_of(spark)
    if not on_metastore(spark):
        return []
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {GOLD_DATABASE}")
    entries = [e for e in catalog_entries(cfg.warehouse, names) if e.spec.database == GOLD_DATABASE]
    registered = [e.full_name for e in entries if register(spark, e)]
    log.info("catalog: %d gold table(s) registered", len(registered))
    return registered
