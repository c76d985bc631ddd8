"""Gold over the committed MariaDB 10.11 chain (tests/fixtures/mariadb-10.11): four binlogs with
FULL metadata, CREATE TABLE / ALTER TABLE ... ADD COLUMN ... DEFAULT ... AFTER in the archive, and
each table's final contents as the server's ``mariadb --batch`` printed them. Every gold cell,
printed back as MySQL text (with the fsp / scale the schema history knows), must equal the
server's bytes. Needs no server: it runs wherever the suite runs.
"""

from __future__ import annotations

import datetime as _dt
import json
import shutil
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from conftest import make_test_config

from binlog_parser.rows.numbers import format_double, format_float
from spark_jobs.gold import gold_location, gold_table_name, run_gold
from spark_jobs.ingest import BinlogObject, run_ingest

FIX = Path(__file__).parent / "fixtures" / "mariadb-10.11"
SOURCE = "fixture-maria"


def _unescape(b: bytes) -> bytes:
    """``mariadb --batch`` escaping undone (\\0 \\n \\t \\\\ …)."""
    out = bytearray()
    i = 0
    while i < len(b):
        if b[i] == 0x5C and i + 1 < len(b):
            n = chr(b[i + 1])
            out += {"0": b"\0", "n": b"\n", "t": b"\t", "\\": b"\\", "b": b"\b", "r": b"\r",
                    "Z": b"\x1a"}.get(n, n.encode())
            i += 2
        else:
            out.append(b[i])
            i += 1
    return bytes(out)


def _expected(table: str) -> tuple[list[str], list[list[bytes | None]]]:
    lines = (FIX / f"table.shop.{table}.tsv").read_bytes().rstrip(b"\n").split(b"\n")
    header = lines[0].decode().split("\t")
    return header, [[None if v == b"NULL" else _unescape(v) for v in ln.split(b"\t")] for ln in lines[1:]]


def _fraction(moment: _dt.datetime, fsp: int) -> str:
    return ("." + f"{moment.microsecond:06d}"[:fsp]) if fsp else ""


def mysql_text(value: Any, column: dict[str, Any]) -> bytes | None:
    """A gold value printed as the server prints its column (the inverse of the type table)."""
    if value is None:
        return None
    kind, fsp = column["type"], column.get("fsp") or 0
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if kind == "timestamp":
        moment = value.astimezone(_dt.UTC)
        return (moment.strftime("%Y-%m-%d %H:%M:%S") + _fraction(moment, fsp)).encode()
    if kind == "datetime":
        return (value.strftime("%Y-%m-%d %H:%M:%S") + _fraction(value, fsp)).encode()
    if kind == "year":
        return f"{value:04d}".encode()
    if kind == "float":
        return format_float(value).encode()
    if kind == "double":
        return format_double(value).encode()
    if isinstance(value, Decimal):
        return format(value, "f").encode()
    return str(value).encode()


@pytest.fixture(scope="module")
def gold(spark: Any, tmp_path_factory: pytest.TempPathFactory, s3_server: Any) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("gold-fixture")
    objects = []
    for p in sorted(FIX.glob("binlog.0*")):
        shutil.copyfile(p, root / p.name)
        objects.append(BinlogObject(source=SOURCE, uri=str(root / p.name), size=p.stat().st_size, etag="1"))
    cfg = make_test_config(root, s3_server.endpoint_url)
    run_ingest(spark, cfg, objects, "fixture-ingest")
    result = run_gold(spark, cfg, SOURCE, "fixture-gold")
    return {"cfg": cfg, "result": result}


@pytest.mark.parametrize("table", ["customer", "orders"])
def test_gold_prints_what_the_server_printed(spark: Any, gold: dict[str, Any], table: str) -> None:
    cfg = gold["cfg"]
    header, rows = _expected(table)
    history = (spark.read.format("delta").load(f"{cfg.warehouse}/silver/schema_history")
               .where(f"source = '{SOURCE}' AND table_name = '{table}'").orderBy("version").collect())
    columns = {c["name"]: c for c in json.loads(history[-1]["columns"])}
    df = spark.read.format("delta").load(gold_location(cfg, gold_table_name(SOURCE, "shop", table)))
    assert df.columns[: len(header)] == header
    got = sorted(([mysql_text(r[n], columns[n]) for n in header] for r in df.collect()), key=repr)
    assert got == sorted(rows, key=repr)
    (status,) = [t for t in gold["result"].tables if t.table == table]
    assert status.warnings == ()
    print(f"{table}: {len(rows) * len(header)} cells equal the server's printout", file=sys.stderr)


def test_binlake_sql_sees_the_gold_tables(spark: Any, gold: dict[str, Any]) -> None:
    """silver.schema_history, meta.gold_status and every gold table are in the registry that
    ``binlake sql`` reads: both engines list them and return the same rows."""
    from binlake.sql_fast import FastWarehouse
    from spark_jobs.sql_engine import register_tables, run_query

    cfg = gold["cfg"]
    gold_names = {f"gold.{gold_table_name(SOURCE, 'shop', t)}" for t in ("customer", "orders")}
    fast = FastWarehouse(cfg)
    listed = {spec.full_name for spec in fast.existing_tables()}
    assert {"silver.schema_history", "meta.gold_status"} | gold_names <= listed
    assert gold_names <= set(register_tables(spark, cfg))
    for name in sorted({"silver.schema_history", "meta.gold_status"} | gold_names):
        got = fast.run(f"SELECT * FROM {name}")
        want = run_query(spark, f"SELECT * FROM {name}", max_rows=100_000)
        assert got.columns == want.columns, name
        assert got.rows and sorted(got.rows, key=repr) == sorted(want.rows, key=repr), name
    status = fast.run("SELECT gold_table FROM meta.gold_status")
    assert {f"gold.{name}" for (name,) in status.rows} == {n for n in listed if n.startswith("gold.")}
