"""The catalog on a Postgres metastore, end to end: ``binlake catalog sync`` fills a Hive metastore
whose database is a real PostgreSQL cluster (started here on loopback, in a temp folder), and a
plain pyspark session from ``binlake spark-conf``'s settings alone lists and reads the tables by
name; while that session is open a second JVM syncs again (Postgres, unlike the embedded Derby, is
many JVMs' at once) and the open session sees the table that sync added.

Optional like the go/java peers: skipped, also under CI, where Debian's postgresql is not installed.
The JDBC driver comes from conf/pom.xml (``make setup``); a jars dir without it is a required part
missing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from _catalog_warehouse import build

from binlake_testing import postgres_server
from binlake_testing.postgres_server import METASTORE_PASSWORD, METASTORE_USER, PostgresServer

BINLAKE = Path(sys.executable).parent / "binlake"
JARS = Path(os.environ.get("BINLAKE_JARS_DIR", str(Path(__file__).resolve().parent.parent / ".jars")))

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    why = postgres_server.missing()
    if why:
        pytest.skip(why)
    if not list(JARS.glob("postgresql-*.jar")):
        pytest.skip(f"the PostgreSQL JDBC driver is not in the jars dir {JARS}: run make setup (conf/pom.xml)")
    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="module")
def config_file(postgres: PostgresServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    config = build(tmp_path_factory.mktemp("catalog-pg"))
    metastore = {  # docs/sql.md, "Alternative: a Postgres metastore"
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.javax.jdo.option.ConnectionURL": postgres.jdbc_url,
        "spark.hadoop.javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
        "spark.hadoop.javax.jdo.option.ConnectionUserName": METASTORE_USER,
        "spark.hadoop.javax.jdo.option.ConnectionPassword": METASTORE_PASSWORD,
        "spark.hadoop.datanucleus.schema.autoCreateTables": "true",
        "spark.hadoop.datanucleus.schema.autoCreateColumns": "true",
        "spark.hadoop.datanucleus.schema.autoCreateConstraints": "false",
        "spark.hadoop.hive.metastore.schema.verification": "false",
    }
    with config.open("a") as out:  # build() ends with the [spark.conf] table
        out.writelines(f'"{key}" = "{value}"\n' for key, value in metastore.items())
    return config


def _binlake(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BINLAKE), *args], capture_output=True, text=True, timeout=600, cwd=cwd, check=False)


def test_sync_fills_postgres_and_sessions_share_it(postgres: PostgresServer, config_file: Path) -> None:
    root = config_file.parent
    synced = _binlake("catalog", "sync", "--config", str(config_file), cwd=root)
    assert synced.returncode == 0, synced.stderr[-3000:]
    assert synced.stdout.splitlines() == [
        "silver.transactions", "meta.ingested_files", "meta.gold_status", "gold.shop__orders",
        "gold.shop__orders__history", "5 table(s) registered in the metastore database of [spark.conf]"]
    in_postgres = postgres.sql('SELECT d."NAME" || \'.\' || t."TBL_NAME" FROM "TBLS" t JOIN "DBS" d '
                               'ON d."DB_ID" = t."DB_ID" ORDER BY 1', database="metastore")
    assert in_postgres.split() == ["gold.shop__orders", "gold.shop__orders__history", "meta.gold_status",
                                   "meta.ingested_files", "silver.transactions"]
    assert not (root / "state" / "metastore" / "metastore_db").exists()  # no Derby beside it

    conf_dir = root / "spark-conf"
    conf_dir.mkdir()
    defaults = _binlake("spark-conf", "--format", "defaults", "--config", str(config_file), cwd=root)
    assert defaults.returncode == 0, defaults.stderr
    settings = dict(line.split(None, 1) for line in defaults.stdout.splitlines())
    assert settings["spark.hadoop.javax.jdo.option.ConnectionURL"] == postgres.jdbc_url
    (conf_dir / "spark-defaults.conf").write_text(defaults.stdout)

    script = textwrap.dedent(f"""
        import json, subprocess
        import pyarrow as pa
        from deltalake import write_deltalake
        from pyspark.sql import SparkSession
        import _catalog_warehouse

        spark = SparkSession.builder.getOrCreate()  # nothing but $SPARK_CONF_DIR/spark-defaults.conf
        out = {{"silver": sorted(r.tableName for r in spark.sql("SHOW TABLES IN silver").collect()),
               "count": spark.sql("SELECT count(*) FROM silver.transactions").collect()[0][0],
               "sum": str(spark.sql("SELECT sum(amount) FROM gold.shop__orders").collect()[0][0]),
               "types": [tuple(r)[:2] for r in spark.sql("DESCRIBE gold.shop__orders").collect()]}}
        # a gold table appears with its status row; another JVM syncs while this session holds the metastore
        write_deltalake({str(root / "warehouse" / "gold" / "shop__customers")!r}, _catalog_warehouse.orders(2))
        write_deltalake({str(root / "warehouse" / "meta" / "gold_status")!r}, pa.table({{
            "source": ["demo"], "gold_table": ["shop__customers"], "write_mode": ["merge"]}}), mode="append")
        sync = subprocess.run([{str(BINLAKE)!r}, "catalog", "sync", "--config", {str(config_file)!r}],
                              capture_output=True, text=True, env={{k: v for k, v in __import__("os").environ.items()
                                                                    if k != "SPARK_CONF_DIR"}})
        out["second_sync"] = [sync.returncode, sync.stdout.splitlines()[-1:], sync.stderr[-2000:]]
        out["gold_after"] = sorted(r.tableName for r in spark.sql("SHOW TABLES IN gold").collect())
        out["customers"] = spark.table("gold.shop__customers").count() if "shop__customers" in out["gold_after"] else 0
        print("RESULT " + json.dumps(out))
        spark.stop()
        """)
    env = {**os.environ, "SPARK_CONF_DIR": str(conf_dir), "PYSPARK_PYTHON": sys.executable,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parent), os.environ.get("PYTHONPATH")]))}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=900, cwd=root,
                         env=env, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(next(line for line in run.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert result["silver"] == ["transactions"]
    assert (result["count"], result["sum"]) == (2, "4.50")
    assert result["types"] == [["id", "bigint"], ["amount", "decimal(12,2)"], ["placed", "timestamp_ntz"],
                               ["raw", "binary"]]
    assert result["second_sync"][:2] == [0, ["6 table(s) registered in the metastore database of [spark.conf]"]], \
        result["second_sync"][2]
    assert result["gold_after"] == ["shop__customers", "shop__orders", "shop__orders__history"]
    assert result["customers"] == 2
