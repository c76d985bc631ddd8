"""``binlake catalog sync`` and ``binlake spark-conf``: the tables by name for any Spark session.

``catalog sync`` registers every binlake table of the warehouse (bronze, silver, meta, gold with
its histories and union tables) in the persistent metastore (:mod:`binlake.lake.catalog`); run it
once on an existing warehouse, after a night whose jobs ran on the in-memory catalog (the default),
or let ``binlake serve`` do it at start. ``spark-conf`` prints the settings with which a plain
``pyspark`` / ``spark-sql`` session finds those tables by name and reads them (jars, Delta, S3A,
the metastore).
"""

from __future__ import annotations

import fcntl
import os
import sys
from pathlib import Path
from typing import TextIO

from binlake.config import BinlakeConfig, load_config
from binlake.errors import BinlakeError
from binlake.lake.catalog import conf_lines, defaults_block, metastore_dir, uses_derby


class MetastoreBusyError(BinlakeError):
    """The embedded Derby metastore is open in another JVM (Derby allows one at a time)."""


def catalog_conf(cfg: BinlakeConfig) -> dict[str, str]:
    """Every Spark setting of a session on binlake's catalog (``binlake spark-conf`` prints them)."""
    from spark_jobs.session import spark_conf

    return spark_conf(cfg, catalog=True)


def check_metastore_free(cfg: BinlakeConfig, conf: dict[str, str]) -> None:
    """Refuse early, in plain words, when another JVM holds the embedded Derby metastore.

    Why: Spark's own failure is a page of DataNucleus/Hive stack trace about a session catalog.
    Derby holds a file lock on ``dbex.lck`` while it has the database booted.
    """
    if not uses_derby(conf):
        return
    lock = metastore_dir(cfg) / "metastore_db" / "dbex.lck"
    if not lock.exists():
        return
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1)
        fcntl.lockf(fd, fcntl.LOCK_UN, 1)
    except OSError:
        raise MetastoreBusyError(
            f"the catalog's Derby metastore {lock.parent} is open in another process (a running `binlake serve` "
            "or a session with `binlake spark-conf`'s settings); stop it, or keep the catalog in a shared "
            "metastore database (docs/sql.md, \"The catalog\")") from None
    finally:
        os.close(fd)


def prepare(cfg: BinlakeConfig) -> dict[str, str]:
    """The catalog settings, with the folders they name made and the metastore checked free."""
    conf = catalog_conf(cfg)
    for folder in (metastore_dir(cfg), Path(cfg.state_dir) / "logs"):
        folder.mkdir(parents=True, exist_ok=True)
    check_metastore_free(cfg, conf)
    return conf


def sync_catalog(cfg: BinlakeConfig, out: TextIO = sys.stdout) -> list[str]:
    """Register every existing table of the warehouse in the metastore; returns the names."""
    from spark_jobs.catalog import register_tables
    from spark_jobs.session import spark_session
    from spark_jobs.sql_engine import quiet_pyspark_sql_errors, stderr_to_file

    prepare(cfg)
    quiet_pyspark_sql_errors()
    with stderr_to_file(Path(cfg.state_dir) / "logs" / "binlake-catalog-spark.log"), \
            spark_session(cfg, "binlake-catalog", ui=False, catalog=True) as spark:
        names = register_tables(spark, cfg)
    for name in names:
        print(name, file=out)
    print(f"{len(names)} table(s) registered in {metastore_where(cfg)}", file=out)
    return names


def metastore_where(cfg: BinlakeConfig) -> str:
    conf = catalog_conf(cfg)
    return str(metastore_dir(cfg)) if uses_derby(conf) else "the metastore database of [spark.conf]"


def print_spark_conf(config: str | None, output: str = "both", out: TextIO = sys.stdout) -> int:
    """Print the settings as ``--conf`` lines, a spark-defaults.conf block, or both."""
    cfg = load_config(config)
    conf = catalog_conf(cfg)
    if output in ("conf", "both"):
        if output == "both":
            print("# as arguments: pyspark / spark-sql / spark-submit", file=out)
        print(" \\\n".join(conf_lines(conf)), file=out)
    if output in ("defaults", "both"):
        if output == "both":
            print("\n# as $SPARK_CONF_DIR/spark-defaults.conf", file=out)
        print(defaults_block(conf), end="", file=out)
    if uses_derby(conf):
        print(f"# the catalog is the embedded Derby metastore {metastore_dir(cfg)}: one JVM at a time; "
              "fill it with `binlake catalog sync`", file=sys.stderr)
    return 0
