"""Benchmark: binlake's ingest next to a plain byte copy, on one generated archive, in CPU-seconds.

    nice -n 10 .venv/bin/python bench/pipeline.py --size 300MiB [--files 4] [--small 24MiB]
        [--workdir /tmp/binlake-bench]

``--size`` (bytes, with an optional KiB / MiB / GiB suffix, or KB / MB / GB) generates the archive
when it is not already in the workdir and measures it in the same command:

1. Generates a ROTATE chain of MySQL 8.0 binlogs with GTIDs with ``binlog_parser.writer``:
   transactions of 10-row INSERTs on a 6-column table, every 5th with an UPDATE, as a busy OLTP
   server writes them; and a small archive (``--small``, same shape) to show the task packing.
2. On ``local[2]``, after an unmeasured warm-up (a copy and an ingest of one file, then a copy of
   the whole large archive: :func:`_warm_up`), for the small archive then the large one: the
   plain copy (a Spark job that
   only copies the files' bytes into a Delta table, ``binaryFile`` -> Delta: the ceiling), then
   ``spark_jobs.ingest.run_ingest`` (decode on the executors, every bronze / silver / meta table).
   Each is measured as wall time and CPU-seconds of the whole process tree (this driver, its JVM
   and every Python worker, including workers that exited: see :class:`TreeCpu`).
   Then the gold step (``spark_jobs.gold.job.run_gold``: schema history, the ordered replay of the
   archive's table, its typed gold table, meta.gold_status) on the large archive, measured alike.
   ``--gold-incremental``: then a second night: one more file of the archive's shape (the next
   GTIDs and ids: inserts, every 5th transaction with an update) is generated, ingested and gold
   run again (the incremental path: only the new file's changes replayed), and the same gold
   forced to replay the whole history (what every night cost before): the point is that the
   second night's gold costs in proportion to the new file, not the archive.
3. The split of the ingest's CPU: decode (``binlog_parser`` alone) and build (records, Arrow
   batches and the Parquet data files: the executors' whole task minus the decode) are measured
   in this process on the archive's first file and scaled by bytes; write (the Delta commits, the
   Spark jobs and the driver around them) is the rest.

``--rounds N`` measures the large archive's copy and ingest N times, each round into a warehouse
of its own in the same Spark session (so every round does the same work: the first ingest of the
archive's files); the table shows every round and the last line is the median of the rounds'
ratios. On a shared machine one round's ratio moves by tens of percent with the load of the
moment; a copy and an ingest measured one after the other share it, so their ratio is steadier
than either, and the median of several steadier still.

Prints the table and the machine's load; the last line reads ``ratio ingest/copy CPU: N.NN``;
``results.json`` in the workdir holds the figures.

Scale-out: ``--master spark://host:7077`` runs on that cluster instead of local[2];
``--cluster-workers 1,2`` starts a loopback standalone cluster (``binlake_testing.spark_cluster``,
1 core / ``--worker-memory`` per worker) once per count, ingests the same archive on each, and
prints wall time, executor CPU-seconds (all processes under the workers: executor JVMs and their
Python workers) and the throughput ratio against the first count.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import multiprocessing as mp
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.tree_cpu import TreeCpu  # noqa: E402

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


def generate(archive: Path, size: int, files: int) -> list[Path]:
    """The archive of ``files`` binlogs of about ``size`` bytes in all (generated once, reused)."""
    archive.mkdir(parents=True, exist_ok=True)
    per_file = max(1, size // files // BYTES_PER_TRX)
    jobs = []
    for i in range(files):
        path = archive / f"binlog.{i + 1:06d}"
        if not path.exists():
            jobs.append((str(path), i + 1, i * per_file + 1, per_file, i == files - 1))
    if jobs:
        t = time.time()
        with mp.get_context("fork").Pool(min(2, len(jobs))) as pool:
            for done, done_size in pool.imap_unordered(write_file, jobs):
                print(f"  generated {Path(done).name}: {done_size / 2**20:.1f} MiB", flush=True)
        print(f"generated {len(jobs)} files in {time.time() - t:.0f}s", flush=True)
    return sorted(archive.glob("binlog.*[0-9]"))


_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1 << 10, "m": 10**6, "mb": 10**6, "mib": 1 << 20,
          "g": 10**9, "gb": 10**9, "gib": 1 << 30}


def parse_size(text: str) -> int:
    """``300MiB`` -> 314572800 (also KiB / GiB, KB / MB / GB, or plain bytes)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    if m is None or m.group(2).lower() not in _UNITS:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 300MiB, 1GiB, 50MB)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="binlake ingest vs a plain byte copy, CPU-seconds and wall")
    p.add_argument("--size", type=parse_size, default=parse_size("300MiB"),
                   help="archive size to generate and measure, e.g. 300MiB or 1GiB (default 300MiB)")
    p.add_argument("--size-mib", dest="size", type=lambda text: int(text) << 20,
                   help="the same in MiB (kept for the Makefile's cluster demo)")
    p.add_argument("--files", type=int, default=4, help="files in the archive (default 4)")
    p.add_argument("--small", type=parse_size, default=parse_size("24MiB"),
                   help="size of the small archive (4 files) that shows the packing; 0: skip it")
    p.add_argument("--workdir", default="/tmp/binlake-bench")
    p.add_argument("--driver-memory", default="4g")
    p.add_argument("--split-threshold-mib", type=int, default=128,
                   help="files larger than this are cut at transaction starts into ~split-target ranges")
    p.add_argument("--split-target-mib", type=int, default=64)
    p.add_argument("--master", default=None, help="run on this Spark master (e.g. spark://127.0.0.1:7077)")
    p.add_argument("--cluster-workers", default=None,
                   help="comma-separated worker counts, e.g. 1,2: start a loopback cluster per count")
    p.add_argument("--worker-memory", default="2g")
    p.add_argument("--rounds", type=int, default=1,
                   help="measure the large archive's copy and ingest this many times (each into a fresh "
                        "warehouse); the last line is the median of the rounds' ratios (default 1)")
    p.add_argument("--no-gold", action="store_true",
                   help="measure the copy and the ingest only (gold costs several times the ingest)")
    p.add_argument("--gold-incremental", action="store_true",
                   help="then a second night: one more file ingested, gold incremental vs. a forced full replay")
    return p


@dataclasses.dataclass(frozen=True)
class Measured:
    """One measured job: wall seconds and process-tree CPU-seconds."""

    name: str
    wall_s: float
    cpu_s: float
    mb: float
    tasks: int | None = None
    #: CPU-seconds by kind of process (`TreeCpu.by_process`)
    processes: Mapping[str, float] = dataclasses.field(default_factory=dict)


def measure(name: str, mb: float, job: Callable[[], int | None]) -> Measured:
    with TreeCpu() as cpu:
        t0 = time.perf_counter()
        tasks = job()
        wall = time.perf_counter() - t0
    return Measured(name, wall, cpu.seconds, mb, tasks, cpu.by_process())


@dataclasses.dataclass(frozen=True)
class DecodeSplit:
    """CPU-seconds per byte of decoding alone and of the executors' whole decode step."""

    sample: str
    decode_s_per_byte: float
    decode_build_s_per_byte: float


def decode_split(path: Path, work: Path) -> DecodeSplit:
    """Measured in this process on one file: ``binlog_parser`` alone, reading as the ingest reads
    (row images kept as their bytes: ``DecodeContext.rows_as_bytes``), then the ingest's executor
    task (decode + records + Arrow batches + Parquet data files) on the same bytes, as it runs for
    new files: every table's rows written as data files into its (here scratch) folder. Each is
    run twice and the second run measured: a Python worker runs many tasks, so imports and
    per-layout caches are paid once per worker, not per file (measured cold, they made the
    estimate larger than the whole ingest's CPU)."""
    from binlake.ingest.layout import KIND_TO_TABLE
    from binlake.ingest.parquet_parts import DirectTable
    from binlake.lake.tables import table
    from binlog_parser import BinlogReader
    from spark_jobs.ingest import TaskSettings, decode_task

    size = path.stat().st_size
    piece = {"source": "bench", "file": path.name, "uri": str(path), "size": size, "etag": None,
             "start": 0, "end": size, "range_index": 0, "n_ranges": 1}
    staging = work / "split-staging"
    direct = {kind: DirectTable(str(staging / kind), table(name).partition_by, table(name).stats_columns)
              for kind, name in KIND_TO_TABLE.items()}
    decode = whole = 0.0
    for _ in range(2):
        c0 = time.process_time()
        reader = BinlogReader(str(path))
        reader.context.rows_as_bytes = True
        for _ev in reader:
            pass
        decode = time.process_time() - c0
        c0 = time.process_time()
        decode_task((0, [piece]), TaskSettings(str(staging), None, False, "bench", direct=direct))
        whole = time.process_time() - c0
        shutil.rmtree(staging, ignore_errors=True)
    return DecodeSplit(path.name, decode / size, whole / size)


def _session(args: argparse.Namespace, work: Path, sources: list[tuple[str, Path]]) -> tuple[Any, Any]:
    from spark_jobs.session import build_spark_session

    cfg = _config(args, work, sources, work / "warehouse")
    spark = build_spark_session(cfg, "binlake-bench", ui=False)
    _ship_packages(spark, work)
    return spark, cfg


def _config(args: argparse.Namespace, work: Path, sources: list[tuple[str, Path]], wh: Path) -> Any:
    """The bench's configuration, writing into the (emptied) warehouse ``wh``."""
    from binlake.config import config_from_dict

    shutil.rmtree(wh, ignore_errors=True)
    return config_from_dict({
        "pipeline": {"warehouse": str(wh), "state_dir": str(work / "state"),
                     "jars_dir": os.environ.get("BINLAKE_JARS_DIR", str(REPO / ".jars"))},
        "sources": [{"name": name, "uri": str(folder)} for name, folder in sources],
        "spark": {"master": args.master or "local[2]", "shuffle_partitions": 2, "ui_enabled": False,
                  "jars_on_workers": True, "driver_memory": args.driver_memory,
                  # private scratch space: a shared /tmp may be cleaned under a long run
                  "conf": {"spark.local.dir": str(work / "spark-local")}},
    }, base=REPO, env={})


def copy_bytes(spark: Any, paths: list[Path], out: Path) -> int:
    """The plain copy: the files' bytes (``binaryFile``) into a Delta table at ``out``; its
    tasks."""
    df = spark.read.format("binaryFile").load([str(p) for p in paths]).select("path", "length", "content")
    df.write.format("delta").mode("overwrite").save(str(out))
    return int(df.rdd.getNumPartitions())


def _copy_and_ingest(spark: Any, cfg: Any, args: argparse.Namespace, source: str,
                     paths: list[Path], label: str | None = None) -> tuple[Measured, Measured, Any]:
    from spark_jobs.ingest import BinlogObject, run_ingest

    mb = sum(p.stat().st_size for p in paths) / 1e6

    def copy() -> int:
        return copy_bytes(spark, paths, Path(cfg.warehouse) / "copy" / source)

    objs = [BinlogObject(source=source, uri=str(p), size=p.stat().st_size, etag=str(p.stat().st_mtime_ns))
            for p in paths]
    holder: dict[str, Any] = {}

    def ingest() -> int:
        holder["r"] = run_ingest(spark, cfg, objs, f"bench-{source}", force=True,
                                 split_threshold=args.split_threshold_mib << 20,
                                 split_target=args.split_target_mib << 20)
        return int(holder["r"].tasks)

    c = measure(f"copy bytes -> Delta ({label or source})", mb, copy)
    i = measure(f"binlake ingest ({label or source})", mb, ingest)
    return c, i, holder["r"]


def measure_gold(spark: Any, cfg: Any, source: str, mb: float) -> Measured:
    """The gold step of ``source`` after its ingest (a first run: every table replayed and written)."""
    from spark_jobs.gold.job import run_gold

    return measure(f"binlake gold ({source})", mb, lambda: len(run_gold(spark, cfg, source, f"bench-gold-{source}").tables))


def next_file(archive: Path, size: int, files: int) -> Path:
    """The night after the archive: file ``files + 1`` with the next GTIDs (as many as one archive
    file), in a folder of its own so the archive itself stays as generated."""
    per_file = max(1, size // files // BYTES_PER_TRX)
    folder = archive.parent / f"{archive.name}-next"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"binlog.{files + 1:06d}"
    if not path.exists():
        write_file((str(path), files + 1, files * per_file + 1, per_file, True))
    return path


def measure_second_night(spark: Any, cfg: Any, path: Path, archive_mb: float) -> list[Measured]:
    """Ingest one more file, then gold (incremental) and gold forced to replay everything; the
    gold rows' last column is the row changes the run replayed."""
    from spark_jobs.gold.job import run_gold
    from spark_jobs.ingest import BinlogObject, run_ingest

    mb = path.stat().st_size / 1e6
    obj = BinlogObject(source="bench", uri=str(path), size=path.stat().st_size, etag=str(path.stat().st_mtime_ns))
    ingest = measure("binlake ingest (night 2)", mb, lambda: int(run_ingest(spark, cfg, [obj], "bench-night-2").tasks))

    def gold(force: bool) -> int:
        res = run_gold(spark, cfg, "bench", f"bench-gold-night-2{'-full' if force else ''}", force=force)
        print(f"  gold night 2{' forced' if force else ''}: " + ", ".join(
            f"{t.name} {t.replay} ({t.replay_reason or 'new changes only'})" for t in res.tables), flush=True)
        return sum(t.replayed for t in res.tables)

    return [ingest, measure("binlake gold, incremental (night 2)", mb, lambda: gold(False)),
            measure("binlake gold, full replay (night 2)", archive_mb + mb, lambda: gold(True))]


def _warm_up(spark: Any, cfg: Any, args: argparse.Namespace, first: list[Path], archive: list[Path]) -> None:
    """Unmeasured: a copy and an ingest of ``first``'s first file, then a copy of the whole
    ``archive``. The JVM's class loading and JIT, the Python workers' imports and the Delta
    tables' creation are paid here, not by whichever job happens to be measured first. The copy
    warms on the whole archive: warmed by one file, its CPU still fell by a quarter to a third
    from the first measured round to the third (1 GiB: 15.6-20.5, then 11.6-13.2 CPU-s), while
    the ingest's, the Python workers' work, did not."""
    _copy_and_ingest(spark, cfg, args, "warm-up", first[:1])
    copy_bytes(spark, archive, Path(cfg.warehouse) / "copy" / "warm-up")


def main(argv: list[str] | None = None) -> int:
    from spark_jobs.session import stop_session

    args = _parser().parse_args(argv)
    if args.cluster_workers:
        return scaling(args)
    work = Path(args.workdir)
    paths = generate(work / "archive" / f"bench-{args.size}-{args.files}", args.size, args.files)
    small = generate(work / "archive" / f"small-{args.small}", args.small, 4) if args.small else []
    split = decode_split(paths[0], work)
    load_start = os.getloadavg()
    spark, cfg = _session(args, work, [("bench", paths[0].parent)])
    _warm_up(spark, cfg, args, small or paths, paths)
    results: list[tuple[Measured, Measured, Any]] = []
    if small:
        results.append(_copy_and_ingest(spark, cfg, args, "small", small))
    sources = [("bench", paths[0].parent)]
    for r in range(args.rounds):
        if r:  # a fresh warehouse: the same first ingest of the archive's files every round
            shutil.rmtree(Path(cfg.warehouse), ignore_errors=True)
            cfg = _config(args, work, sources, work / f"warehouse-round-{r + 1}")
        results.append(_copy_and_ingest(spark, cfg, args, "bench", paths,
                                        label=f"bench, round {r + 1}" if args.rounds > 1 else None))
    gold = None if args.no_gold else measure_gold(spark, cfg, "bench", results[-1][1].mb)
    night = measure_second_night(spark, cfg, next_file(paths[0].parent, args.size, args.files),
                                 results[-1][1].mb) if args.gold_incremental else []
    parallelism = spark.sparkContext.defaultParallelism
    stop_session(spark)
    load_end = os.getloadavg()
    print(report(results, split, parallelism, load_start, load_end, gold, night, rounds=args.rounds))
    (work / "results.json").write_text(json.dumps({
        "runs": [{"copy": dataclasses.asdict(c), "ingest": dataclasses.asdict(i), "result": r.as_dict()}
                 for c, i, r in results], "rounds": args.rounds,
        "median_ratio_cpu": median_ratio(results[-args.rounds:]), "gold": dataclasses.asdict(gold) if gold else None,
        "night_2": [dataclasses.asdict(m) for m in night],
        "split": dataclasses.asdict(split), "load_start": load_start, "load_end": load_end,
        "cores": os.cpu_count(), "default_parallelism": parallelism}, indent=1, default=str))
    return 0


def report(results: list[tuple[Measured, Measured, Any]], split: DecodeSplit, parallelism: int,
           load_start: tuple[float, float, float], load_end: tuple[float, float, float],
           gold: Measured | None = None, night: list[Measured] | None = None, rounds: int = 1) -> str:
    """The table (the gold step's row after the last archive's, when measured, then the second
    night's rows: its ingest, and gold incremental vs. full, the last column being the row changes
    replayed); the last line is ``ratio ingest/copy CPU: N.NN`` of the last (large) archive: the
    median of its ``rounds`` (the last entries of ``results``)."""
    lines = [f"machine: {os.cpu_count()} cores, local[2] (defaultParallelism {parallelism}); load avg "
             f"{load_start[0]:.1f} / {load_start[1]:.1f} at start, {load_end[0]:.1f} / {load_end[1]:.1f} at end",
             f"{'job':<34} {'MB':>8} {'wall s':>8} {'CPU-s':>8} {'MB/CPU-s':>9} {'tasks':>6}"]
    for copy, ingest, r in results:
        for m in (copy, ingest):
            lines.append(f"{m.name:<34} {m.mb:8.1f} {m.wall_s:8.1f} {m.cpu_s:8.1f} {m.mb / m.cpu_s:9.2f} "
                         f"{m.tasks if m.tasks is not None else '':>6}")
        lines.append(f"  ingest: {r.files} files, {r.split_files} split, decode+stage {r.decode_seconds:.1f}s wall, "
                     f"table writes {r.write_seconds:.1f}s wall; ratio CPU {ingest.cpu_s / copy.cpu_s:.2f}, "
                     f"wall {ingest.wall_s / copy.wall_s:.2f}")
        lines += [f"  {m.name} CPU-s by process: " + ", ".join(
            f"{k} {v:.0f}" if k == "Python processes" else f"{k} {v:.1f}" for k, v in m.processes.items())
                  for m in (copy, ingest)]
    if gold is not None:  # tasks column: the gold tables written
        lines.append(f"{gold.name:<34} {gold.mb:8.1f} {gold.wall_s:8.1f} {gold.cpu_s:8.1f} "
                     f"{gold.mb / gold.cpu_s:9.2f} {gold.tasks:>6}")
    if night:
        lines.append("second night (one more file; last column: tasks / row changes replayed):")
        lines += [f"{m.name:<34} {m.mb:8.1f} {m.wall_s:8.1f} {m.cpu_s:8.1f} {m.mb / m.cpu_s:9.2f} {m.tasks:>8}"
                  for m in night]
    copy, ingest, _r = results[-1]
    nbytes = ingest.mb * 1e6
    decode = split.decode_s_per_byte * nbytes
    build = (split.decode_build_s_per_byte - split.decode_s_per_byte) * nbytes
    lines += [f"split of the ingest's {ingest.cpu_s:.1f} CPU-s (decode and build measured in-process on "
              f"{split.sample}, scaled by bytes):",
              f"  decode (binlog_parser)           {decode:8.1f} CPU-s  {nbytes / 1e6 / decode:7.2f} MB/CPU-s",
              f"  build (records, Arrow, Parquet)  {build:8.1f} CPU-s",
              f"  write (commits, Spark, driver)   {ingest.cpu_s - decode - build:8.1f} CPU-s (the rest)",
              f"ratio ingest/copy wall: {ingest.wall_s / copy.wall_s:.2f}"]
    if rounds > 1:
        last = results[-rounds:]
        lines.append(f"{rounds} rounds: ratio ingest/copy CPU " + ", ".join(f"{i.cpu_s / c.cpu_s:.2f}" for c, i, _ in last)
                     + f"; ingest CPU-s {', '.join(f'{i.cpu_s:.1f}' for _, i, _ in last)}"
                     + f"; copy CPU-s {', '.join(f'{c.cpu_s:.1f}' for c, _, _ in last)}; the median below")
    lines += marginal_lines(results)
    lines.append(f"ratio ingest/copy CPU: {median_ratio(results[-rounds:]):.2f}")
    return "\n".join(lines)


def marginal_lines(results: list[tuple[Measured, Measured, Any]]) -> list[str]:
    """The fixed part and the per-byte (marginal) ingest/copy ratio, from the small archive (the
    first entry) and the large one (the last): each job's CPU as ``fixed + slope * MB`` through the
    two points. Why: the fixed part (session, Delta commits of seven tables, tasks' start) weighs on
    a small archive and not on a night's; the per-byte ratio is what a larger archive tends to."""
    if len(results) < 2 or results[-1][1].mb <= results[0][1].mb:
        return []
    (c0, i0, _), (c1, i1, _) = results[0], results[-1]
    slope_c = (c1.cpu_s - c0.cpu_s) / (c1.mb - c0.mb)
    slope_i = (i1.cpu_s - i0.cpu_s) / (i1.mb - i0.mb)
    fixed_c, fixed_i = c0.cpu_s - slope_c * c0.mb, i0.cpu_s - slope_i * i0.mb
    per_byte = f"{slope_i / slope_c:.2f}" if slope_c > 0 else "n/a"
    return [f"fixed part: ingest {fixed_i:.1f} CPU-s, copy {fixed_c:.1f} CPU-s; per MB: ingest {slope_i:.3f}, "
            f"copy {slope_c:.3f} CPU-s ({i0.mb:.0f} and {i1.mb:.0f} MB archives)",
            f"ratio ingest/copy CPU per byte (marginal): {per_byte}"]


def median_ratio(rounds: list[tuple[Measured, Measured, Any]]) -> float:
    """The median of the rounds' ingest/copy CPU ratios (each round's copy and ingest measured one
    after the other, under the same load)."""
    import statistics

    return statistics.median(i.cpu_s / c.cpu_s for c, i, _ in rounds)


def _ship_packages(spark, work: Path) -> None:
    """On a cluster, the executors' Python workers import binlake's packages from a --py-files zip."""
    if spark.sparkContext.master.startswith("spark://"):
        from binlake_testing.spark_cluster import package_zip

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
    from binlake_testing.spark_cluster import SparkStandaloneCluster
    from spark_jobs.ingest import BinlogObject, run_ingest
    from spark_jobs.session import build_spark_session, stop_session

    work = Path(args.workdir)
    archive = work / "archive" / "bench"
    paths = generate(archive, args.size, args.files)
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
            stop_session(spark)
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
