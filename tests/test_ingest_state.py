"""meta.ingested_files as the source of truth: the no-Spark Delta reader, known files, ingest plans."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from binlake.discovery.discover import KnownFile, discover_source
from binlake.ingest.state import (
    _known_from_rows,
    load_known_files,
    plan_ingest,
    read_table_rows,
)
from binlake.lake.storage import LocalObjectStore
from tests._chain_util import MARIADB_FILES, write_mariadb_chain


def _archive(tmp_path: Path) -> LocalObjectStore:
    return LocalObjectStore(write_mariadb_chain(tmp_path / "archive"))


def test_plan_modes(tmp_path: Path) -> None:
    store = _archive(tmp_path)
    first = discover_source(store, "s")
    known = {f.file: KnownFile(etag=f.etag, size=f.size, closing_event=f.closing_event, next_file=f.next_file)
             for f in first.closed_files}
    # nightly with nothing known: everything; with everything known: nothing
    assert [f["file"] for f in plan_ingest(first).files] == list(MARIADB_FILES)
    again = discover_source(store, "s", known=known)
    nightly = plan_ingest(again)
    assert nightly.files == [] and nightly.skipped == list(MARIADB_FILES)
    # backfill, only missing, over a range: nothing (all ingested)
    assert plan_ingest(again, "missing", from_file="binlog.000002", to_file="binlog.000003").files == []
    # backfill reprocess over a range: exactly the range, forced
    rp = plan_ingest(again, "reprocess", from_file="binlog.000002", to_file="binlog.000003")
    assert rp.force and [f["file"] for f in rp.files] == ["binlog.000002", "binlog.000003"]
    assert rp.reasons == {"binlog.000002": "reprocess", "binlog.000003": "reprocess"}
    # a changed object (new etag) is planned again, also by a 'missing' backfill
    known["binlog.000003"] = KnownFile(etag="stale", size=known["binlog.000003"].size)
    changed = discover_source(store, "s", known=known)
    assert [f["file"] for f in plan_ingest(changed, "missing").files] == ["binlog.000003"]
    assert plan_ingest(changed).reasons == {"binlog.000003": "changed"}
    with pytest.raises(ValueError):
        plan_ingest(changed, "everything")


def test_known_rows_use_facts_only_for_the_same_bytes() -> None:
    ingested = [{"source": "s", "file": "a.1", "etag": "e1", "size": 10, "status": "ok"},
                {"source": "s", "file": "a.2", "etag": "e2", "size": 10, "status": "failed"},
                {"source": "t", "file": "a.1", "etag": "x", "size": 1, "status": "ok"}]
    facts = [{"source": "s", "file": "a.1", "etag": "e1", "closing_event": "ROTATE", "next_file": "a.2"},
             {"source": "s", "file": "a.2", "etag": "OLD", "closing_event": "ROTATE", "next_file": "a.3"}]
    known = _known_from_rows(ingested, facts, "s")
    assert known["a.1"] == KnownFile(etag="e1", size=10, status="ok", closing_event="ROTATE", next_file="a.2")
    assert known["a.2"].closing_event is None and known["a.2"].status == "failed"
    assert set(known) == {"a.1", "a.2"}


@pytest.mark.spark
def test_delta_reader_matches_spark(spark: Any, binlake_config: Any, tmp_path: Path) -> None:
    """The no-Spark reader (delta-rs) sees the same rows as Spark, across overwrites and a checkpoint."""
    import dataclasses

    from spark_jobs.lake import ensure_table, rows_df, table_path, write_replace

    cfg = dataclasses.replace(binlake_config, warehouse=str(tmp_path / "wh"))
    path = ensure_table(spark, cfg, "meta.ingested_files")
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.checkpointInterval' = '2')")

    def row(file: str, etag: str, status: str = "ok") -> dict[str, Any]:
        return {"source": "s", "file": file, "file_seq": int(file.rsplit(".", 1)[1]), "uri": f"/x/{file}",
                "size": 100, "etag": etag, "run_id": "r", "status": status, "events": 1, "transactions": 0,
                "row_changes": 0, "statements": 0, "quarantined": 0}

    for i, (files, etag) in enumerate([(["b.000001", "b.000002"], "e1"), (["b.000002"], "e2"),
                                       (["b.000003"], "e3"), (["b.000001"], "e4")]):
        pred = "source = 's' AND file IN (" + ", ".join(f"'{f}'" for f in files) + ")"
        write_replace(rows_df(spark, "meta.ingested_files", [row(f, etag) for f in files]), path, pred,
                      s3=None, run_id=f"r{i}", job="test")
    log_dir = Path(path) / "_delta_log"
    assert list(log_dir.glob("*.checkpoint.parquet")), "expected a checkpoint to exercise its replay"

    mine = read_table_rows(cfg, "meta.ingested_files", ["source", "file", "etag", "status"])
    assert mine is not None
    theirs = [r.asDict() for r in spark.read.format("delta").load(table_path(cfg, "meta.ingested_files"))
              .select("source", "file", "etag", "status").collect()]
    key = lambda r: (r["source"], r["file"])  # noqa: E731
    assert sorted(mine, key=key) == sorted(theirs, key=key)
    assert {r["file"]: r["etag"] for r in mine} == {"b.000001": "e4", "b.000002": "e2", "b.000003": "e3"}
    assert load_known_files(cfg, "s") == {f: KnownFile(etag=e, size=100, status="ok")
                                          for f, e in (("b.000001", "e4"), ("b.000002", "e2"), ("b.000003", "e3"))}
    assert read_table_rows(cfg, "meta.binlog_files") == []
