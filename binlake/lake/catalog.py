"""The metastore catalog of the binlake tables: names -> locations, the DDL, the metastore settings.

Why: the tables live in folders or buckets; a user's own ``spark-sql``, a notebook's PySpark session
or a BI tool over JDBC sees folders, not ``silver.row_changes``. Registered by name in a persistent
Hive metastore (``CREATE TABLE IF NOT EXISTS db.t USING delta LOCATION '...'``), every table is
found by name by any Spark session configured with :func:`metastore_conf` (``binlake spark-conf``).

The metastore is embedded Derby under the state folder by default (one JVM at a time: a running
``binlake serve`` holds it); a shared metastore database (Postgres, docker-compose.yml) takes the
``spark.hadoop.javax.jdo.option.*`` keys of ``[spark.conf]``, which override these defaults.

Part of the lake (not of the ``sql`` stage): gold registers the tables it creates here, and gold
may only use the lake. Pure text; the Spark side is :mod:`spark_jobs.catalog`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from binlake.config import BinlakeConfig, to_spark_uri
from binlake.lake.sql_text import sql_string
from binlake.lake.tables import META_GOLD_STATUS, TABLES, TableSpec, gold_table

#: a gold table's name as binlake makes them (``gold_table_name``, a ``[gold] union`` name, ``__history``)
GOLD_NAME = re.compile(r"[a-z0-9_]+")
#: the gold tables (tables, histories, union tables) ``meta.gold_status`` lists: it is their catalog
GOLD_TABLES_SQL = (f"SELECT DISTINCT gold_table FROM {META_GOLD_STATUS.full_name} "
                   "WHERE write_mode <> 'dropped' ORDER BY gold_table")
#: the ``[spark.conf]`` key that says which metastore database holds the catalog
METASTORE_URL_KEY = "spark.hadoop.javax.jdo.option.ConnectionURL"
HIVE = "hive"
JAVA_OPTIONS_KEY = "spark.driver.extraJavaOptions"


@dataclass(frozen=True)
class CatalogEntry:
    """One table of the catalog: its name and its location as Spark spells it (``s3a://``)."""

    spec: TableSpec
    location: str

    @property
    def full_name(self) -> str:
        return self.spec.full_name

    def create_sql(self) -> str:
        """The DDL that registers the table by name (harmless when it is registered already)."""
        return f"CREATE TABLE IF NOT EXISTS {self.full_name} USING delta LOCATION {sql_string(self.location)}"


def gold_specs(names: Iterable[str]) -> list[TableSpec]:
    """The gold tables among ``names`` (``meta.gold_status``'s ``gold_table`` values); others skipped."""
    return [gold_table(name) for name in dict.fromkeys(str(n) for n in names) if GOLD_NAME.fullmatch(name)]


def catalog_entries(warehouse: str, gold_names: Iterable[str] = ()) -> list[CatalogEntry]:
    """Every registered table and the gold tables named, with their locations under ``warehouse``."""
    specs = [*TABLES, *gold_specs(gold_names)]
    return [CatalogEntry(spec, to_spark_uri(spec.location(warehouse))) for spec in specs]


def metastore_dir(cfg: BinlakeConfig) -> Path:
    """The folder of the embedded Derby metastore (``<state_dir>/metastore``)."""
    return Path(cfg.state_dir).resolve() / "metastore"


def derby_url(cfg: BinlakeConfig) -> str:
    """The JDBC URL of the embedded Derby metastore database (created on first use)."""
    return f"jdbc:derby:;databaseName={metastore_dir(cfg) / 'metastore_db'};create=true"


def metastore_conf(cfg: BinlakeConfig) -> dict[str, str]:
    """The Spark settings that put a session on binlake's persistent catalog.

    Embedded Derby under the state folder unless ``[spark.conf]`` names another metastore database
    (its keys win). Derby's log goes under ``<state_dir>/logs`` instead of the working directory.
    """
    state = Path(cfg.state_dir).resolve()
    extra = cfg.spark.extra_conf
    java = " ".join(filter(None, (extra.get(JAVA_OPTIONS_KEY), f"-Dderby.stream.error.file={state / 'logs' / 'derby.log'}")))
    conf = {
        "spark.sql.catalogImplementation": HIVE,
        "spark.sql.warehouse.dir": str(state / "spark-warehouse"),
        METASTORE_URL_KEY: derby_url(cfg),
    }
    conf.update({k: v for k, v in extra.items() if k in conf or "javax.jdo" in k})
    conf[JAVA_OPTIONS_KEY] = java  # the user's options kept, Derby's log added
    return conf


def uses_derby(conf: Mapping[str, str]) -> bool:
    """True when the settings keep the catalog in an embedded Derby database (one JVM at a time)."""
    return conf.get(METASTORE_URL_KEY, "").startswith("jdbc:derby:")


def conf_lines(conf: Mapping[str, str]) -> list[str]:
    """The settings as ``--conf k=v`` arguments of ``pyspark`` / ``spark-sql`` / ``spark-submit``."""
    return [f"--conf {shlex.quote(f'{key}={value}')}" for key, value in conf.items()]


def defaults_block(conf: Mapping[str, str]) -> str:
    """The settings as a ``spark-defaults.conf`` block (key, whitespace, value: one per line)."""
    width = max((len(key) for key in conf), default=0)
    return "".join(f"{key.ljust(width)}  {value}\n" for key, value in conf.items())
