"""Start-up cost of a one-shot ``binlake sql`` query: the JVM-free fast path vs Spark.

Runs the installed console script as a user would (``binlake sql --config C "SELECT ..."``) a few
times per engine and reports wall seconds and CPU seconds (user+sys of the process tree, JVM
included, which is what a shared machine pays), beside two floors measured in the same run: Python
itself (``python -c pass``) and the fast path's two engines (``python -c "import duckdb, deltalake"``);
what the fast path costs above the second is binlake's own. With no ``--config``, a small warehouse
(``silver.row_changes`` partitioned by source and commit_date as ingest writes it, 3,000 rows, and
``meta.ingested_files``, written by delta-rs) is created in a temporary folder.

    .venv/bin/python bench/sql_startup.py [--config FILE] [--repeat 5] [--query SQL] [--engines fast]
        [--imports 12]

``--imports N`` lists the N largest top-level imports of one fast-path run (``python -X importtime``):
a one-shot fast query is mostly imports, so that list says what to make lazy.
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BINLAKE = Path(sys.executable).parent / "binlake"


@dataclass(frozen=True)
class Timing:
    """One run of the console script."""

    wall: float
    cpu: float


def small_warehouse(folder: Path) -> Path:
    """A config whose warehouse holds two small Delta tables written by delta-rs."""
    import datetime

    import pyarrow as pa
    from deltalake import write_deltalake

    rows = 1000
    table = pa.table({"source": [f"s{i % 3}" for i in range(rows)], "file": [f"binlog.{i:06d}" for i in range(rows)],
                      "size": list(range(rows))})
    write_deltalake(str(folder / "wh" / "meta" / "ingested_files"), table)
    changes = 3 * rows
    write_deltalake(str(folder / "wh" / "silver" / "row_changes"), pa.table({
        "source": [f"s{i % 3}" for i in range(changes)],
        "commit_date": [datetime.date(2026, 11, 1 + i % 7) for i in range(changes)],
        "db": ["shop"] * changes, "tbl": [f"t{i % 5}" for i in range(changes)], "seq": list(range(changes))}),
        partition_by=["source", "commit_date"])
    config = folder / "binlake.toml"
    config.write_text(f'[pipeline]\nwarehouse = "wh"\nstate_dir = "state"\njars_dir = "{REPO / ".jars"}"\n'
                      '[spark]\nui_enabled = false\n')
    return config


#: The floors: what any Python command costs, and what importing the fast path's engines costs.
FLOORS = {"python -c pass": "pass", "import duckdb, deltalake": "import duckdb, deltalake"}


def run_once(config: Path, engine: str, query: str) -> Timing:
    """One run of ``binlake sql`` on ``engine``; see :func:`run_command`."""
    return run_command([str(BINLAKE), "sql", "--config", str(config), "--engine", engine, "--format", "csv", query],
                       engine, sample=engine == "spark")


def run_command(argv: list[str], label: str, sample: bool = False) -> Timing:
    """One run; wall from start to the process's exit; CPU = user+sys of the command and every
    descendant (the JVM too), sampled by psutil in a thread while it runs and taken from the reaped
    process at its end.

    (``RUSAGE_CHILDREN`` misses the JVM: pyspark does not wait for it, so it is never reaped by us.)
    The wall clock stops when ``communicate`` returns, not at a sampler's tick: a poll loop in this
    thread rounded every run up to its next 0.1 s tick (``python -c pass`` read 0.10 s). Only a
    command that leaves a process nobody reaps (``sample``: the Spark engine's JVM) is sampled; for
    the others the reaped figure is exact and a sampler would only share the two cores with the run.
    """
    import psutil

    cpu_by_pid: dict[int, float] = {}
    done = threading.Event()

    def sample_tree(root: psutil.Process) -> None:
        while not done.is_set():
            with contextlib.suppress(psutil.Error):
                for member in [root, *root.children(recursive=True)]:
                    with contextlib.suppress(psutil.Error):
                        times = member.cpu_times()
                        cpu_by_pid[member.pid] = times.user + times.system
            done.wait(0.1)

    start = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = threading.Thread(target=sample_tree, args=(psutil.Process(proc.pid),), daemon=True) if sample else None
    if sampler is not None:
        sampler.start()
    _, stderr = proc.communicate()
    wall = time.perf_counter() - start
    done.set()
    if sampler is not None:
        sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{label}: exit {proc.returncode}: {stderr.strip()}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    reaped = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # reaped: exact for the command and the children it waited for (a sub-second run may end between
    # two samples); sampled: the JVM too, which nobody reaps
    return Timing(wall=wall, cpu=max(reaped, sum(cpu_by_pid.values())))


def largest_imports(config: Path, query: str, top: int) -> list[tuple[float, str]]:
    """The top-level imports of one fast-path run with their cumulative seconds, largest first."""
    code = f"from binlake_cli.app import main; main(['sql', '--config', {str(config)!r}, '--engine', 'fast', {query!r}])"
    run = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, check=True)
    rows = []
    for line in run.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit() and not parts[2].startswith("  "):
            rows.append((int(parts[1]) / 1e6, parts[2].strip()))
    return sorted(rows, reverse=True)[:top]


def _row(label: str, timings: list[Timing]) -> float:
    """Print one row of the table; returns the median wall seconds."""
    wall = statistics.median(t.wall for t in timings)
    print(f"| {label} | {len(timings)} | {wall:.2f} | {statistics.median(t.cpu for t in timings):.2f} |")
    return wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--query", default="SELECT count(*) FROM silver.row_changes")
    parser.add_argument("--engines", default="fast,spark", help="comma-separated: fast, spark")
    parser.add_argument("--imports", type=int, default=0, help="list this many of the fast path's largest imports")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="binlake-sql-bench-") as tmp:
        config = args.config or small_warehouse(Path(tmp))
        print(f"binlake sql start-up, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
              f"load average {' '.join(f'{x:.1f}' for x in __import__('os').getloadavg())}")
        print(f"query: {args.query}")
        print("| run | runs | median wall s | median CPU s |\n|---|---|---|---|")
        medians = {}
        for label, code in FLOORS.items():
            _row(label, [run_command([sys.executable, "-c", code], label) for _ in range(args.repeat)])
        for engine in args.engines.split(","):
            medians[engine] = _row(f"binlake sql, {engine}", [run_once(config, engine, args.query)
                                                              for _ in range(args.repeat)])
        if {"fast", "spark"} <= set(medians):
            print(f"ratio spark/fast (wall): {medians['spark'] / medians['fast']:.1f}")
        if args.imports:
            print("largest imports of one fast run (cumulative s):")
            for seconds, name in largest_imports(config, args.query, args.imports):
                print(f"  {seconds:6.3f}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
