"""A small warehouse for the catalog tests, written by delta-rs (no JVM): two registry tables, the
gold status and two gold tables of typed columns, with the config file that points at it.

Why delta-rs: the catalog tests start their own JVMs (``binlake catalog sync``, a plain pyspark
session, ``binlake serve``); building the tables with Spark would cost another.
"""

from __future__ import annotations

import datetime
import decimal
import os
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

REPO_ROOT = Path(__file__).resolve().parent.parent
GOLD = ("shop__orders", "shop__orders__history")


def orders(rows: int = 3) -> pa.Table:
    """A gold table's rows: a key with a comment, a decimal, a timestamp_ntz, bytes."""
    schema = pa.schema([pa.field("id", pa.int64(), metadata={"comment": "order id"}),
                        pa.field("amount", pa.decimal128(12, 2)), pa.field("placed", pa.timestamp("us")),
                        pa.field("raw", pa.binary())])
    return pa.Table.from_pylist([{"id": i, "amount": decimal.Decimal(f"{i}.50"),
                                  "placed": datetime.datetime(2024, 1, i + 1), "raw": bytes([i])}
                                 for i in range(rows)], schema=schema)


def build(root: Path) -> Path:
    """Write the warehouse under ``root`` and return its config file (state under ``root/state``)."""
    wh = root / "warehouse"
    write_deltalake(str(wh / "silver" / "transactions"), pa.table({
        "source": ["demo", "demo"], "file": ["binlog.000001", "binlog.000002"], "pos": [4, 120]}))
    write_deltalake(str(wh / "meta" / "ingested_files"), pa.table({
        "source": ["demo", "demo", "other"], "file": ["binlog.000001", "binlog.000002", "binlog.000001"]}))
    write_deltalake(str(wh / "meta" / "gold_status"), pa.table({
        "source": ["demo", "demo", "demo"], "gold_table": [*GOLD, "shop__gone"],
        "write_mode": ["merge", "merge", "dropped"]}))
    for name in GOLD:
        write_deltalake(str(wh / "gold" / name), orders())
    jars = os.environ.get("BINLAKE_JARS_DIR", str(REPO_ROOT / ".jars"))
    config = root / "binlake.toml"
    config.write_text("\n".join([
        "[pipeline]", f'warehouse = "{wh}"', f'state_dir = "{root / "state"}"', f'jars_dir = "{jars}"', "",
        "[spark]", 'master = "local[1]"', "shuffle_partitions = 1", "ui_enabled = false", 'driver_memory = "1g"',
        "", "[spark.conf]", '"spark.driver.extraJavaOptions" = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"', ""]))
    return config
