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

Scale-out: ``--master spark://host:7077`` runs the ingest on that cluster instead of local[2];
``--cluster-workers 1,2`` starts a loopback standalone cluster (``binlake.testing.spark_cluster``,
1 core / ``--worker-memory`` per worker) once per count, ingests the same archive on each, and
prints wall time, executor CPU-seconds (all processes under the workers: executor JVMs and their
Python workers) and the throughput ratio against the first count.
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
            for _ in range(10):
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


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    p.add_argument("--size-mib", type=int, default=1024)
    p.add_argument("--files", type=int, default=8)
    p.add_argument("--workdir", default="/tmp/binlake-bench")
    p.add_argument("--driver-memory", default="4g")
    p.add_argument("--split-threshold-mib", type=int, default=96,
                   help="files larger than this are cut at transaction starts into ~split-target ranges")
    p.add_argument("--split-target-mib", type=int, default=64)
    p.add_argument("--skip-ceiling", action="store_true")
    p.add_argument("--master", default=None, help="run on this Spark master (e.g. spark://127.0.0.1:7077)")
    p.add_argument("--cluster-workers", default=None,
                   help="comma-separated worker counts, e.g. 1,2: start a loopback cluster per count")
    p.add_argument("--worker-memory", default="2g")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.cluster_workers:
        return scaling(args)

    work = Path(args.workdir)
    archive = work / "archive" / "bench"
    paths = generate(archive, args.size_mib, args.files)
    total = sum(p.stat().st_size for p in paths)
    mb = total / 1e6

    from binlake.config import config_from_dict
    from spark_jobs.ingest import BinlogObject, run_ingest
    from spark_jobs.reconcile import run_reconcile
    from spark_jobs.session import build_spark_session

    wh = work / "warehouse"
    shutil.rmtree(wh, ignore_errors=True)
    cfg = config_from_dict({
        "pipeline": {"warehouse": str(wh), "state_dir": str(work / "state"),
                     "jars_dir": os.environ.get("BINLAKE_JARS_DIR", str(REPO / ".jars"))},
        "sources": [{"name": "bench", "uri": str(archive)}],
        "spark": {"master": args.master or "local[2]", "shuffle_partitions": 2, "ui_enabled": False,
                  "jars_on_workers": True,
                  "driver_memory": args.driver_memory,
                  # private scratch space: a shared /tmp may be cleaned under a long run
                  "conf": {"spark.local.dir": str(work / "spark-local")}},
    }, base=REPO, env={})
    spark = build_spark_session(cfg, "binlake-bench", ui=False)
    _ship_packages(spark, work)
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


def _ship_packages(spark, work: Path) -> None:
    """On a cluster, the executors' Python workers import binlake's packages from a --py-files zip."""
    if spark.sparkContext.master.startswith("spark://"):
        from binlake.testing.spark_cluster import package_zip

        spark.sparkContext.addPyFile(str(package_zip(REPO, work / "binlake-py.zip")))


def _cluster_cpu_seconds(cluster) -> float:
    """CPU-seconds of every live process under the cluster's workers (executors + Python workers)."""
    import psutil

    total = 0.0
    for proc in cluster._workers:
        try:
            for p in psutil.Process(proc.pid).children(recursive=True):
                try:
                    t = p.cpu_times()
                    total += t.user + t.system
                except psutil.Error:
                    pass
        except psutil.Error:
            pass
    return total


def scaling(args: argparse.Namespace) -> int:
    """Ingest the same archive on a loopback cluster of 1, 2, ... workers; print the ratio."""
    from binlake.config import config_from_dict
    from binlake.testing.spark_cluster import SparkStandaloneCluster
    from spark_jobs.ingest import BinlogObject, run_ingest
    from spark_jobs.session import build_spark_session

    work = Path(args.workdir)
    archive = work / "archive" / "bench"
    paths = generate(archive, args.size_mib, args.files)
    total = sum(p.stat().st_size for p in paths)
    objs = [BinlogObject(source="bench", uri=str(p), size=p.stat().st_size, etag=str(p.stat().st_mtime_ns))
            for p in paths]
    rows = []
    for n in [int(x) for x in args.cluster_workers.split(",")]:
        wh = work / f"warehouse-{n}w"
        shutil.rmtree(wh, ignore_errors=True)
        with SparkStandaloneCluster(work / f"cluster-{n}w", workers=n, cores=1, memory=args.worker_memory) as cl:
            cfg = config_from_dict({
                "pipeline": {"warehouse": str(wh), "state_dir": str(work / "state"),
                             "jars_dir": os.environ.get("BINLAKE_JARS_DIR", str(REPO / ".jars"))},
                "sources": [{"name": "bench", "uri": str(archive)}],
                "spark": {"master": cl.master_url, "shuffle_partitions": 2, "ui_enabled": False,
                          "driver_memory": args.driver_memory, "jars_on_workers": True,
                          "conf": {"spark.local.dir": str(work / "spark-local"),
                                   "spark.executor.memory": "1g", "spark.executor.cores": "1"}},
            }, base=REPO, env={})
            spark = build_spark_session(cfg, f"binlake-bench-{n}w", ui=False)
            _ship_packages(spark, work)
            cpu0, t = _cluster_cpu_seconds(cl), time.time()
            r = run_ingest(spark, cfg, objs, f"bench-{n}w", force=True,
                           split_threshold=args.split_threshold_mib << 20, split_target=args.split_target_mib << 20)
            wall, cpu = time.time() - t, _cluster_cpu_seconds(cl) - cpu0
            spark.stop()
        rows.append({"workers": n, "wall_seconds": wall, "executor_cpu_seconds": cpu, "decode_seconds": r.decode_seconds,
                     "write_seconds": r.write_seconds, "tasks": r.tasks, "mb_per_s": total / 1e6 / wall,
                     "load_avg": os.getloadavg()[0]})
    print(f"\narchive: {len(paths)} files, {total / 1e6:.0f} MB; loopback standalone cluster, 1 core per worker")
    for row in rows:
        print(f"  {row['workers']} worker(s): wall {row['wall_seconds']:7.1f}s  {row['mb_per_s']:6.2f} MB/s  "
              f"executor CPU {row['executor_cpu_seconds']:7.1f}s  (decode {row['decode_seconds']:.0f}s, "
              f"writes {row['write_seconds']:.0f}s, {row['tasks']} tasks, load avg {row['load_avg']:.1f})  "
              f"x{row['mb_per_s'] / rows[0]['mb_per_s']:.2f}")
    (work / "scaling.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
