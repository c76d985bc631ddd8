"""Run a command and give the CPU-seconds of its whole process tree, the JVMs included.

Why: ``/usr/bin/time`` counts only the children a process waits for; the JVM a pytest session starts
through py4j is not among them, so a test module's Spark work is missing from its figure. This
samples the tree (every 0.5 s: a process that lives less than that, and the last interval of each,
may be missed; fine for runs of minutes, not for a one-second command) and sums each
process's user + system time as last seen, by process name.

    .venv/bin/python bench/tree_cpu.py -- .venv/bin/python -m pytest tests/test_gold_mysql8.py -q
"""

from __future__ import annotations

import subprocess
import sys
import time

import psutil


def tree_cpu(argv: list[str], interval: float = 0.5) -> tuple[int, float, dict[str, float]]:
    """(exit status, wall seconds, CPU-seconds by process name) of ``argv`` and its descendants."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv)
    root = psutil.Process(proc.pid)
    seen: dict[tuple[int, float], tuple[str, float]] = {}
    while proc.poll() is None:
        try:
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            procs = []
        for p in procs:
            try:
                t = p.cpu_times()
                seen[(p.pid, p.create_time())] = (p.name(), t.user + t.system)
            except psutil.Error:
                pass
        time.sleep(interval)
    by_name: dict[str, float] = {}
    for name, cpu in seen.values():
        by_name[name] = by_name.get(name, 0.0) + cpu
    return proc.returncode, time.monotonic() - t0, by_name


def main() -> int:
    argv = sys.argv[1:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    rc, wall, by_name = tree_cpu(argv)
    load = " ".join(f"{x:.1f}" for x in psutil.getloadavg())
    parts = ", ".join(f"{n} {c:.1f}" for n, c in sorted(by_name.items(), key=lambda kv: -kv[1]) if c >= 0.05)
    print(f"[tree_cpu] exit {rc}, wall {wall:.1f} s, CPU {sum(by_name.values()):.1f} s ({parts}); load {load}",
          file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
