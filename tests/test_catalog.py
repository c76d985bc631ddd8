"""The catalog end to end: ``binlake catalog sync`` fills the persistent metastore, and a plain
pyspark session started from ``binlake spark-conf``'s settings alone lists and reads the tables by
name; gold's registration call adds a table it creates to that metastore.

Each step is its own JVM (the embedded Derby metastore is one JVM's at a time), in a subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _catalog_warehouse import build, orders

BINLAKE = Path(sys.executable).parent / "binlake"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def config_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("catalog"))


def _binlake(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BINLAKE), *args], capture_output=True, text=True, timeout=600, cwd=cwd, check=False)


def test_sync_then_a_plain_pyspark_session_reads_every_table_by_name(config_file: Path) -> None:
    root = config_file.parent
    synced = _binlake("catalog", "sync", "--config", str(config_file), cwd=root)
    assert synced.returncode == 0, synced.stderr
    assert synced.stdout.splitlines() == [
        "silver.transactions", "meta.ingested_files", "meta.gold_status", "gold.shop__orders",
        "gold.shop__orders__history", f"5 table(s) registered in {root / 'state' / 'metastore'}"]

    conf_dir = root / "spark-conf"
    conf_dir.mkdir()
    defaults = _binlake("spark-conf", "--format", "defaults", "--config", str(config_file), cwd=root)
    assert defaults.returncode == 0, defaults.stderr
    (conf_dir / "spark-defaults.conf").write_text(defaults.stdout)
    as_args = _binlake("spark-conf", "--format", "conf", "--config", str(config_file), cwd=root).stdout
    assert "--conf spark.sql.catalogImplementation=hive \\\n" in as_args
    assert as_args.count("--conf ") == len(defaults.stdout.splitlines())

    from deltalake import write_deltalake

    write_deltalake(str(root / "warehouse" / "gold" / "shop__customers"), orders(2))  # appears after the sync
    script = textwrap.dedent(f"""
        import json
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.getOrCreate()  # nothing but $SPARK_CONF_DIR/spark-defaults.conf
        out = {{"silver": sorted(r.tableName for r in spark.sql("SHOW TABLES IN silver").collect()),
               "gold": sorted(r.tableName for r in spark.sql("SHOW TABLES IN gold").collect()),
               "count": spark.sql("SELECT count(*) FROM silver.transactions").collect()[0][0],
               "sum": str(spark.sql("SELECT sum(amount) FROM gold.shop__orders").collect()[0][0]),
               "types": [tuple(r)[:2] for r in spark.sql("DESCRIBE gold.shop__orders").collect()]}}
        from binlake.config import load_config
        from spark_jobs.catalog import register_gold_tables

        out["registered"] = register_gold_tables(spark, load_config({str(config_file)!r}), ["shop__customers"])
        out["gold_after"] = sorted(r.tableName for r in spark.sql("SHOW TABLES IN gold").collect())
        out["customers"] = spark.table("gold.shop__customers").count()
        print("RESULT " + json.dumps(out))
        spark.stop()
        """)
    env = {**__import__("os").environ, "SPARK_CONF_DIR": str(conf_dir), "PYSPARK_PYTHON": sys.executable}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, cwd=root,
                         env=env, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(next(line for line in run.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert result["silver"] == ["transactions"]
    assert result["gold"] == ["shop__orders", "shop__orders__history"]
    assert (result["count"], result["sum"]) == (2, "4.50")
    assert result["types"] == [["id", "bigint"], ["amount", "decimal(12,2)"], ["placed", "timestamp_ntz"],
                               ["raw", "binary"]]
    assert result["registered"] == ["gold.shop__customers"]
    assert result["gold_after"] == ["shop__customers", "shop__orders", "shop__orders__history"]
    assert result["customers"] == 2
    assert not (root / "derby.log").exists() and (root / "state" / "logs" / "derby.log").is_file()
