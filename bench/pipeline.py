"""Benchmark: ingest a generated ~1 GiB binlog archive on local[2], next to the ceiling.

    .venv/bin/python bench/pipeline.py [--size-mib 1024] [--files 8] [--workdir /tmp/binlake-bench]

1. Generates (once; reused when present) a ROTATE chain of MySQL 8.0 binlogs with GTIDs with
   ``binlog_parser.writer``: transactions of 10-row INSERTs on a 6-column table, every 5th with
   an UPDATE, as a busy OLTP server writes them.
2. Ceiling: a plain Spark job that only copies the same files' bytes into a Delta table
   (``binaryFile`` -> Delta): what this machine does with no decoding at all.
3. The pipeline: ``spark_jobs.ingest.run_ingest`` (decode on the executors, all bronze /
   silver / meta tables) and ``spark_jobs.reconcile.run_reconcile``.

Prints MB/s and minutes side by side, and writes ``results.json`` in the workdir.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import multiprocessing as mp
import os
import shutil
import sys
import time
from decimal import Decimal
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
BYTES_PER_TRX = 1100  # measured: ~1.1 KB per generated transaction (10-row insert, 1/5 update)


def _table():
    from binlog_parser.writer import Column, Table

    return Table("shop", "orders", (
        Column("id", "BIGINT", nullable=False, primary_key=True), Column("customer", "INT UNSIGNED"),
        Column("amount", "DECIMAL(12,2)"), Column("placed", "DATETIME(6)"),
        Column("status", "VARCHAR(16)"), Column("note", "VARCHAR(255)")), table_id=90)


def write_file(args: tuple[str, int, int, int, bool]) -> tuple[str, int]:
    """Write binlog number ``index`` holding GNOs ``first..first+count-1``."""
    from binlog_parser.writer import BinlogFileWriter

    path, index, first, count, last = args
    orders = _table()
    prev = f"{UUID}:1-{first - 1}" if first > 1 else ""
    tmp = path + ".tmp"
    with open(tmp, "wb") as fh:
        w = BinlogFileWriter(fh, server_version="8.0.40", server_id=1, previous_gtids=prev)
        rid = (first - 1) * 10
        base = dt.datetime(2026, 1, 1)
        for gno in range(first, first + count):
            ts = 1767225600 + gno // 50
            w.begin_transaction(f"{UUID}:{gno}", last_committed=gno - 1, sequence_number=gno, timestamp=ts)
            rows = []
            for i in range(10):
                rid += 1
                rows.append({"id": rid, "customer": rid % 997, "amount": Decimal(rid % 100000) / 100,
                             "placed": base + dt.timedelta(microseconds=rid * 7919),
                             "status": "new", "note": f"order {rid} " + "x" * (rid % 40)})
            w.write_rows(orders, rows)
            if gno % 5 == 0:
                w.update_rows(orders, [(rows[0], dict(rows[0], status="paid"))])
            w.xid()
        if last:
            w.close(in_use=True)  # the active file: no ROTATE yet
        else:
            w.rotate(f"binlog.{index + 1:06d}")
            w.close()
    os.replace(tmp, path)
    return path, os.path.getsize(path)


def generate(archive: Path, size_mib: int, files: int) -> list[Path]:
    archive.mkdir(parents=True, exist_ok=True)
    per_file = (size_mib << 20) // files // BYTES_PER_TRX
    jobs = []
    for i in range(files):
        path = archive / f"binlog.{i + 1:06d}"
        if not path.exists():
            jobs.append((str(path), i + 1, i * per_file + 1, per_file, i == files - 1))
    if jobs:
        t = time.time()
        with mp.get_context("fork").Pool(min(2, len(jobs))) as pool:
            for path, size in pool.imap_unordered(write_file, jobs):
                print(f"  generated {Path(path).name}: {size / 2**20:.1f} MiB", flush=True)
        print(f"generated {len(jobs)} files in {time.time() - t:.0f}s", flush=True)
    return sorted(archive.glob("binlog.*[0-9]"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--size-mib", type=int, default=1024)
    p.add_argument("--files", type=int, default=8)
    p.add_argument("--workdir", default="/tmp/binlake-bench")
    p.add_argument("--driver-memory", default="4g")
    p.add_argument("--split-threshold-mib", type=int, default=96,
                   help="files larger than this are cut at transaction starts into ~split-target ranges")
    p.add_argument("--split-target-mib", type=int, default=64)
    p.add_argument("--skip-ceiling", action="store_true")
    args = p.parse_args(argv)

    work = Path(args.workdir)
    archive = work / "archive" / "bench"
    paths = generate(archive, args.size_mib, args.files)
    total = sum(p.stat().st_size for p in paths)
    mb = total / 1e6

    from binlake.config import config_from_dict
    from binlake.spark import build_spark_session
    from spark_jobs.ingest import BinlogObject, run_ingest
    from spark_jobs.reconcile import run_reconcile

    wh = work / "warehouse"
    shutil.rmtree(wh, ignore_errors=True)
    cfg = config_from_dict({
        "pipeline": {"warehouse": str(wh), "state_dir": str(work / "state"),
                     "jars_dir": os.environ.get("BINLAKE_JARS_DIR", str(REPO / ".jars"))},
        "sources": [{"name": "bench", "uri": str(archive)}],
        "spark": {"master": "local[2]", "shuffle_partitions": 2, "ui_enabled": False,
                  "driver_memory": args.driver_memory,
                  # private scratch space: a shared /tmp may be cleaned under a long run
                  "conf": {"spark.local.dir": str(work / "spark-local")}},
    }, base=REPO, env={})
    spark = build_spark_session(cfg, "binlake-bench", ui=False)
    results: dict[str, object] = {"archive_bytes": total, "files": len(paths), "cores": os.cpu_count(),
                                  "load_avg_start": os.getloadavg()}

    if not args.skip_ceiling:
        t = time.time()
        (spark.read.format("binaryFile").load(str(archive))
         .select("path", "length", "content")
         .write.format("delta").mode("overwrite").save(str(wh / "bench" / "copy_ceiling")))
        results["ceiling_seconds"] = time.time() - t

    objs = [BinlogObject(source="bench", uri=str(p), size=p.stat().st_size, etag=str(p.stat().st_mtime_ns))
            for p in paths]
    t = time.time()
    r = run_ingest(spark, cfg, objs, "bench-1", force=True,
                   split_threshold=args.split_threshold_mib << 20, split_target=args.split_target_mib << 20)
    results["ingest_seconds"] = time.time() - t
    results["ingest"] = r.as_dict()
    t = time.time()
    rr = run_reconcile(spark, cfg, "bench-1")
    results["reconcile_seconds"] = time.time() - t
    results["reconcile_statuses"] = rr.statuses
    results["load_avg_end"] = os.getloadavg()
    spark.stop()

    def line(name: str, secs: float) -> str:
        return f"  {name:<34} {secs / 60:6.2f} min  {mb / secs:8.2f} MB/s"

    print(f"\narchive: {len(paths)} files, {mb:.0f} MB ({total / 2**30:.2f} GiB), local[2], "
          f"load avg at start {results['load_avg_start'][0]:.1f}")
    if "ceiling_seconds" in results:
        print(line("ceiling: copy bytes -> Delta", results["ceiling_seconds"]))  # type: ignore[arg-type]
    print(line("binlake ingest (all tables)", results["ingest_seconds"]))  # type: ignore[arg-type]
    print(f"    decode+stage {r.decode_seconds:.0f}s, table writes {r.write_seconds:.0f}s, "
          f"{r.tasks} tasks, {r.split_files} files split; rows: "
          + ", ".join(f"{k}={v}" for k, v in sorted(r.rows.items())))
    print(f"  reconcile: {results['reconcile_seconds']:.1f}s, statuses {rr.statuses}")
    (work / "results.json").write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
