"""Start-up cost of a one-shot ``binlake sql`` query: the JVM-free fast path vs Spark.

Runs the installed console script as a user would (``binlake sql --config C "SELECT ..."``) a few
times per engine and reports wall seconds and CPU seconds (user+sys of the process tree, JVM
included, which is what a shared machine pays). With no ``--config``, a small warehouse (meta.ingested_files, 1,000
rows written by delta-rs) is created in a temporary folder.

    .venv/bin/python bench/sql_startup.py [--config FILE] [--repeat 3] [--query SQL] [--engines fast]
        [--imports 12]

``--imports N`` lists the N largest top-level imports of one fast-path run (``python -X importtime``):
a one-shot fast query is mostly imports, so that list says what to make lazy.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
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
    """A config whose warehouse holds one Delta table written by delta-rs."""
    import pyarrow as pa
    from deltalake import write_deltalake

    rows = 1000
    table = pa.table({"source": [f"s{i % 3}" for i in range(rows)], "file": [f"binlog.{i:06d}" for i in range(rows)],
                      "size": list(range(rows))})
    write_deltalake(str(folder / "wh" / "meta" / "ingested_files"), table)
    config = folder / "binlake.toml"
    config.write_text(f'[pipeline]\nwarehouse = "wh"\nstate_dir = "state"\njars_dir = "{REPO / ".jars"}"\n'
                      '[spark]\nui_enabled = false\n')
    return config


def run_once(config: Path, engine: str, query: str) -> Timing:
    """One run; CPU = user+sys of the script and every descendant (the JVM too), sampled by psutil.

    (``RUSAGE_CHILDREN`` misses the JVM: pyspark does not wait for it, so it is never reaped by us.)
    """
    import psutil

    start = time.perf_counter()
    proc = subprocess.Popen([str(BINLAKE), "sql", "--config", str(config), "--engine", engine, "--format", "csv",
                             query], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    cpu_by_pid: dict[int, float] = {}
    root = psutil.Process(proc.pid)
    while proc.poll() is None:
        with contextlib.suppress(psutil.Error):
            for member in [root, *root.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    times = member.cpu_times()
                    cpu_by_pid[member.pid] = times.user + times.system
        time.sleep(0.1)
    _, stderr = proc.communicate()
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{engine}: exit {proc.returncode}: {stderr.strip()}")
    return Timing(wall=wall, cpu=sum(cpu_by_pid.values()))


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--query", default="SELECT source, count(*) AS files FROM meta.ingested_files GROUP BY source")
    parser.add_argument("--engines", default="fast,spark", help="comma-separated: fast, spark")
    parser.add_argument("--imports", type=int, default=0, help="list this many of the fast path's largest imports")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="binlake-sql-bench-") as tmp:
        config = args.config or small_warehouse(Path(tmp))
        print(f"binlake sql start-up, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
              f"load average {' '.join(f'{x:.1f}' for x in __import__('os').getloadavg())}")
        print("| engine | runs | median wall s | median CPU s |\n|---|---|---|---|")
        medians = {}
        for engine in args.engines.split(","):
            timings = [run_once(config, engine, args.query) for _ in range(args.repeat)]
            medians[engine] = statistics.median(t.wall for t in timings)
            print(f"| {engine} | {len(timings)} | {medians[engine]:.2f} | "
                  f"{statistics.median(t.cpu for t in timings):.2f} |")
        if {"fast", "spark"} <= set(medians):
            print(f"ratio spark/fast (wall): {medians['spark'] / medians['fast']:.1f}")
        if args.imports:
            print("largest imports of one fast run (cumulative s):")
            for seconds, name in largest_imports(config, args.query, args.imports):
                print(f"  {seconds:6.3f}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
