"""Archiver throughput: ``binlake archive`` vs ``mariadb-binlog --read-from-remote-server --raw``.

    PYTHONPATH=$PWD .venv/bin/python bench/archive.py [--mb 100]

Starts a throw-away MariaDB on 127.0.0.1, writes about ``--mb`` MB of binlog (multi-row inserts of
~1 KB rows, one FLUSH BINARY LOGS per ~25 MB), then streams the whole history three ways, each as a
child process from the first binlog to the end (non-blocking dump) and each checked byte for byte
against the server's files:

- ``mariadb-binlog --read-from-remote-server --raw --to-last-log`` into a folder (the C peer),
- ``binlake archive --stop-at-end`` into a local folder (the archiver's own ceiling),
- ``binlake archive --stop-at-end`` into the loopback S3 server (moto, in this process: its CPU is
  not the archiver's; the S3 figure is bounded by moto, not by the network or by AWS).

Reported: MB of binlog, wall seconds, child CPU seconds, MB/s (wall) and per CPU-second (steadier than
wall time on a shared machine), and the ratios to the peer; the load average around the run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from binlake_testing.mariadb_server import REPL_PASSWORD, REPL_USER, MariaDBServer, which
from binlake_testing.s3server import DUMMY_AWS_ENV, S3Server

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Run:
    name: str
    mb: float
    wall_s: float
    cpu_s: float
    stream_mb_per_s: float | None = None  # the archiver's own figure (status.json): no process start-up

    @property
    def mb_per_s(self) -> float:
        return self.mb / self.wall_s


def make_workload(db: MariaDBServer, mb: int) -> None:
    db.query("CREATE DATABASE b; CREATE TABLE b.t (id INT PRIMARY KEY AUTO_INCREMENT, k INT, v TEXT) ENGINE=InnoDB")
    batch = 5000  # rows of ~1 KB: ~5 MB of row events per statement
    for i in range(max(1, mb // 5)):
        db.query("SET SESSION max_recursive_iterations = 1000000; "
                 f"INSERT INTO b.t(k, v) WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM s "
                 f"WHERE n<{batch}) SELECT n, REPEAT(MD5(n + {i}), 32) FROM s")
        if i % 5 == 4:
            db.query("FLUSH BINARY LOGS")
    db.query("FLUSH BINARY LOGS")
    time.sleep(1.0)  # let the BINLOG_CHECKPOINT of the last rotation land


def timed(name: str, cmd: list[str], env: dict[str, str], mb: float) -> Run:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"{name} failed ({r.returncode}): {r.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Run(name, mb, wall, cpu)


def with_status(run: Run, spool: Path) -> Run:
    status = json.loads((spool / "bench" / "status.json").read_text())
    return Run(run.name, run.mb, run.wall_s, run.cpu_s, float(status["mb_per_s"]))


def check_identical(db: MariaDBServer, folder: Path, name: str, objects: dict[str, bytes] | None = None) -> None:
    for f in db.binlog_files()[:-1]:
        got = objects[f.name] if objects is not None else (folder / f.name).read_bytes()
        if got != f.read_bytes():
            raise SystemExit(f"{name}: {f.name} differs from the server's file")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100, help="binlog MB to write and stream")
    args = parser.parse_args()
    client = which("mariadb-binlog", "mysqlbinlog")
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    base = Path(tempfile.mkdtemp(prefix="binlake-bench-archive-"))
    db = MariaDBServer(base).start()
    s3 = S3Server(mode="thread").start()
    try:
        make_workload(db, args.mb)
        files = db.binlog_files()
        mb = sum(f.stat().st_size for f in files) / 1e6
        env = dict(os.environ, PYTHONPATH=str(REPO), BINLAKE_ARCHIVE_PASSWORD=REPL_PASSWORD, **DUMMY_AWS_ENV)
        peer_dir = base / "peer"
        peer_dir.mkdir()
        runs = [timed("mariadb-binlog --raw", [
            str(client), "--no-defaults", "--read-from-remote-server", "--raw", "--to-last-log",
            "--host=127.0.0.1", f"--port={db.port}", f"--user={REPL_USER}", f"--password={REPL_PASSWORD}",
            f"--result-file={peer_dir}/", files[0].name], env, mb)]
        check_identical(db, peer_dir, "mariadb-binlog")
        archive = [sys.executable, "-c", ("import sys; from binlake_cli.archive import archive_command; "
                   "sys.exit(archive_command(sys.argv[1:]))"), "--source", "bench", "--host", "127.0.0.1",
                   "--port", str(db.port), "--user", REPL_USER, "--stop-at-end", "--upload-bytes", str(64 << 20),
                   "--upload-interval-s", "30"]
        runs.append(with_status(timed("binlake archive -> folder", [
            *archive, "--dest", str(base / "local"), "--spool-dir", str(base / "spool-local")], env, mb),
            base / "spool-local"))
        check_identical(db, base / "local", "binlake archive (folder)")
        s3.client().create_bucket(Bucket="bench")
        runs.append(with_status(timed("binlake archive -> S3 (moto)", [
            *archive, "--dest", "s3://bench/binlogs/bench/", "--spool-dir", str(base / "spool-s3"),
            "--s3-endpoint-url", s3.endpoint_url], env, mb), base / "spool-s3"))
        c = s3.client()
        objects = {f.name: c.get_object(Bucket="bench", Key=f"binlogs/bench/{f.name}")["Body"].read()
                   for f in files[:-1]}
        check_identical(db, base, "binlake archive (S3)", objects)
        t0 = time.perf_counter()
        for f in files:  # the store's own ceiling: one put_object per file, nothing else
            c.put_object(Bucket="bench", Key=f"ceiling/{f.name}", Body=f.read_bytes())
        runs.append(Run("boto3 put_object only (moto ceiling)", mb, time.perf_counter() - t0, 0.0))
    finally:
        s3.stop()
        db.stop()
        shutil.rmtree(base, ignore_errors=True)
    print(f"archiver benchmark, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, {len(files)} binlogs, every file checked byte for byte")
    print(f"load average before/after: {load_before} / {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| streamer | MB | wall s | child CPU s | MB/s (wall) | vs mariadb-binlog (wall) | MB per CPU s | "
          "CPU s vs mariadb-binlog | MB/s streaming only |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        streaming = f"{r.stream_mb_per_s:.1f}" if r.stream_mb_per_s else "-"
        per_cpu = f"{r.mb / r.cpu_s:.0f}" if r.cpu_s else "-"
        cpu_ratio = f"{r.cpu_s / runs[0].cpu_s:.1f}x" if r.cpu_s else "-"
        print(f"| {r.name} | {r.mb:.1f} | {r.wall_s:.2f} | {r.cpu_s:.2f} | {r.mb_per_s:.1f} | "
              f"{r.mb_per_s / runs[0].mb_per_s:.2f} | {per_cpu} | {cpu_ratio} | {streaming} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
