"""`binlake sql`: tables registered by name, one-shot query and interactive prompt."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from binlake.config import REPO_ROOT
from binlake.sql_cli import _split_statements, format_table, main, register_tables
from binlake.tables import DATABASES, TABLES, table, table_location


@pytest.fixture()
def warehouse_config(tmp_path: Path, spark: Any) -> Path:
    warehouse = tmp_path / "wh"
    spark.createDataFrame([("s1", "binlog.000001", 10), ("s1", "binlog.000002", 20), ("s2", "b.1", 5)],
                          "source STRING, file STRING, size BIGINT") \
        .write.format("delta").save(table_location(str(warehouse), "meta.ingested_files"))
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[pipeline]\nwarehouse = "{warehouse}"\nstate_dir = "{tmp_path / "state"}"\n'
                   f'jars_dir = "{REPO_ROOT / ".jars"}"\n[spark]\nui_enabled = false\n')
    return cfg


@pytest.mark.spark
def test_sql_query_by_table_name(warehouse_config: Path) -> None:
    out = io.StringIO()
    rc = main(["--config", str(warehouse_config),
               "SELECT source, count(*) AS files FROM meta.ingested_files GROUP BY source ORDER BY source"], out=out)
    text = out.getvalue()
    assert rc == 0, text
    assert "| source | files |" in text and "| s1     | 2     |" in text and "2 rows" in text


@pytest.mark.spark
def test_sql_interactive_prompt(warehouse_config: Path) -> None:
    out = io.StringIO()
    stdin = io.StringIO("SELECT sum(size) AS total\n  FROM meta.ingested_files;\nSELECT nope FROM x;\nexit\n")
    rc = main(["--config", str(warehouse_config)], out=out, stdin=stdin)
    text = out.getvalue()
    assert rc == 0
    assert "registered: meta.ingested_files" in text
    assert "| 35    |" in text
    assert "ERROR:" in text  # a bad statement keeps the prompt alive


@pytest.mark.spark
def test_register_skips_missing_tables(spark: Any, tmp_path: Path) -> None:
    from binlake.config import config_from_dict

    cfg = config_from_dict({"pipeline": {"warehouse": str(tmp_path / "empty")}}, base=tmp_path, env={})
    assert register_tables(spark, cfg) == []
    dbs = {r[0] for r in spark.sql("SHOW DATABASES").collect()}
    assert set(DATABASES) <= dbs


def test_table_registry() -> None:
    names = [t.full_name for t in TABLES]
    assert len(names) == len(set(names))
    for required in ("bronze.events", "bronze.quarantine", "silver.transactions", "silver.row_changes",
                     "silver.statements", "meta.ingested_files", "meta.gtid_coverage", "meta.gtid_reconciliation"):
        assert required in names
    assert table("silver.row_changes").location("s3a://b/wh/") == "s3a://b/wh/silver/row_changes"


def test_format_and_split() -> None:
    text = format_table(["a", "b"], [(1, None), ("x" * 100, b"\x00\x01")], max_width=10)
    assert "NULL" in text and "xxxxxxx..." in text and "0x0001" in text
    assert _split_statements("SELECT ';' AS a; SELECT 2;") == ["SELECT ';' AS a", "SELECT 2"]


def test_console_script_installed() -> None:
    exe = Path(sys.executable).parent / "binlake"
    assert exe.is_file(), "console script `binlake` missing: run make setup"
    proc = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "sql [QUERY]" in proc.stdout
