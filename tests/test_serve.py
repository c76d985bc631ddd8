"""``binlake serve``: one server per module (its start is a JVM with the Hive metastore), reached
with real clients: beeline from the pip pyspark (JDBC, HiveServer2 protocol) runs docs/sql.md's
example queries, pyspark's Spark Connect client reads the same names, and the embedded metastore is
refused to a second process while the server holds it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _catalog_warehouse import build

from binlake_testing.processes import BINLAKE, binlake_serve
from binlake_testing.s3server import free_port

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


class Served:
    def __init__(self, config: Path, port: int, connect_port: int, lines: list[str]) -> None:
        self.config, self.port, self.connect_port, self.lines = config, port, connect_port, lines


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    config = build(tmp_path_factory.mktemp("serve"))
    port, connect_port = free_port(), free_port()
    args = ["--config", str(config), "--port", str(port), "--connect", "--connect-port", str(connect_port)]
    with binlake_serve(args, cwd=config.parent, wait_seconds=600) as (proc, lines):
        yield Served(config, port, connect_port, lines)
    assert proc.returncode == 0


def _documented_queries() -> list[str]:
    text = (REPO / "docs" / "sql.md").read_text().split("### Example queries", 1)[1]
    block = re.search(r"```sql\n(.*?)```", text, re.DOTALL)
    assert block is not None
    return [q.strip() for q in block.group(1).split(";") if q.strip()]


def test_serve_prints_its_endpoints(served: Served) -> None:
    assert served.lines[0].startswith("binlake serve: 5 table(s) of ")
    assert served.lines[1:3] == [f"JDBC: jdbc:hive2://127.0.0.1:{served.port}/default",
                                 f"Spark Connect: sc://127.0.0.1:{served.connect_port}"]


def test_beeline_runs_the_documented_queries(served: Served) -> None:
    import pyspark

    beeline = Path(pyspark.__file__).parent / "bin" / "beeline"
    queries = _documented_queries()
    assert len(queries) == 4
    sql = served.config.parent / "queries.sql"
    sql.write_text("".join(f"{q};\n" for q in queries))
    run = subprocess.run([str(beeline), "-u", f"jdbc:hive2://127.0.0.1:{served.port}/default", "--silent=true",
                          "--outputformat=tsv2", "--showHeader=true", "-f", str(sql)],
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    # beeline 2.3 in silent mode prints a "null" for each info message it leaves out
    lines = [re.sub(r"^(null\s*)+", "", line).split("\t") for line in run.stdout.splitlines()]
    assert [line for line in lines if line != [""]] == [
        ["namespace", "tableName", "isTemporary"], ["silver", "transactions", "false"],
        ["source", "files"], ["demo", "2"], ["other", "1"],
        ["gold_table", "write_mode"], ["shop__gone", "dropped"], ["shop__orders", "merge"],
        ["shop__orders__history", "merge"],
        ["col_name", "data_type", "comment"], ["id", "bigint", "order id"], ["amount", "decimal(12,2)", "NULL"],
        ["placed", "timestamp_ntz", "NULL"], ["raw", "binary", "NULL"]]


CONNECT_CLIENT = """
import json, sys
from pyspark.sql import SparkSession

spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
gold = sorted(r.tableName for r in spark.sql("SHOW TABLES IN gold").collect())
counts = {r["source"]: r["count"] for r in spark.table("meta.ingested_files").groupBy("source").count().collect()}
spark.stop()
print("RESULT " + json.dumps({"gold": gold, "counts": counts}))
"""


def test_spark_connect_reads_the_same_names(served: Served) -> None:
    """A notebook's client, in its own process: a process that already runs a classic Spark
    session (a pytest worker that ran Spark tests) cannot open a Spark Connect one."""
    run = subprocess.run([sys.executable, "-c", CONNECT_CLIENT, f"sc://127.0.0.1:{served.connect_port}"],
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(next(line for line in run.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert result["gold"] == ["shop__orders", "shop__orders__history"]
    assert result["counts"] == {"demo": 2, "other": 1}


def test_a_second_process_is_refused_the_metastore_in_plain_words(served: Served) -> None:
    run = subprocess.run([str(BINLAKE), "catalog", "sync", "--config", str(served.config)], capture_output=True,
                         text=True, timeout=120, check=False, env={**os.environ})
    assert run.returncode == 1
    assert run.stderr.startswith("binlake: error: the catalog's Derby metastore ")
    assert "is open in another process (a running `binlake serve`" in run.stderr
