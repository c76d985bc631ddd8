"""Run a command and give the CPU-seconds of its whole process tree, the JVMs included.

Why: ``/usr/bin/time`` counts only the children a process waits for; the JVM a pytest session starts
through py4j is not among them, so a test module's Spark work is missing from its figure. This
samples the tree (every 0.5 s: a process that lives less than that, and the last interval of each,
may be missed; fine for runs of minutes, not for a one-second command) and sums each
process's user + system time as last seen, by process name.

    .venv/bin/python bench/tree_cpu.py -- .venv/bin/python -m pytest tests/test_gold_mysql8.py -q
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import psutil

#: a process of the tree: (pid, start time), so a reused pid is another process
ProcessKey = tuple[int, float]


class TreeCpu:
    """User + system CPU-seconds of a process (this one by default) and all its descendants, each
    sampled every ``interval`` seconds by a thread, as a context manager.

    Why sampling: a descendant that exits keeps the CPU it had at its last sample, while its parent's
    ``children_user`` / ``children_system`` need not ever hold it (the Python workers of ``mapInArrow``
    exited uncounted: reading the tree at the start and the end alone missed a third of the old
    ingest's CPU). A process alive at the start counts from what it had then; the sampler thread's own
    CPU is left out of :attr:`seconds` (when the root is this process, where it runs). The one
    sampler of ``bench/``: pipeline.py (a job's CPU, by kind of process), fleet.py (a night's, by
    :meth:`snapshot` / :meth:`between`) and this script."""

    def __init__(self, interval: float = 0.25, root: psutil.Process | None = None, *,
                 children_only: bool = False, kind_of: Callable[[psutil.Process], str] | None = None) -> None:
        self.interval = interval
        #: names each process's part of the tree (fleet.py: services, tasks, the Spark server), asked at
        #: every sample: a forked process takes its title (``setproctitle``) after it is first seen
        self.kind_of = kind_of
        self._kinds: dict[ProcessKey, str] = {}
        self.root = root or psutil.Process()
        self.children_only = children_only  # leave the root out (a harness measuring what it started)
        self._cpu: dict[ProcessKey, list[float]] = {}  # [CPU at the start (0 if born since), last seen]
        self._names: dict[ProcessKey, str] = {}  # as first seen: a process that exited has none
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._sampler_cpu = 0.0

    def _sample(self, first: bool = False) -> None:
        try:
            procs = [*([] if self.children_only else [self.root]), *self.root.children(recursive=True)]
        except psutil.Error:
            return
        for p in procs:
            try:
                with p.oneshot():
                    key, t, name = (p.pid, p.create_time()), p.cpu_times(), p.name()
                kind = self.kind_of(p) if self.kind_of is not None else None
            except psutil.Error:
                continue
            cpu = t.user + t.system
            with self._lock:
                self._names.setdefault(key, name)
                self._cpu.setdefault(key, [cpu if first else 0.0, cpu])[1] = cpu
                if kind is not None:
                    self._kinds[key] = kind

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()
        self._sampler_cpu = time.thread_time()

    def __enter__(self) -> TreeCpu:
        self._sample(first=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    @property
    def _sampler_in_tree(self) -> float:
        """The sampler thread's CPU where the tree counts it: only when the root is this process."""
        return 0.0 if self.children_only or self.root.pid != os.getpid() else self._sampler_cpu

    @property
    def seconds(self) -> float:
        return sum(last - start for start, last in self._cpu.values()) - self._sampler_in_tree

    def snapshot(self) -> dict[ProcessKey, float]:
        """Each process's CPU-seconds now (sampled now): two snapshots' :meth:`between` is what
        the tree used in between."""
        self._sample()
        with self._lock:
            return {key: last for key, (_start, last) in self._cpu.items()}

    @staticmethod
    def between(before: dict[ProcessKey, float], after: dict[ProcessKey, float]) -> float:
        return sum(v - before.get(k, 0.0) for k, v in after.items())

    def between_by_kind(self, before: dict[ProcessKey, float], after: dict[ProcessKey, float]) -> dict[str, float]:
        """:meth:`between` split by ``kind_of``'s last answer for each process."""
        out: dict[str, float] = {}
        with self._lock:
            kinds = dict(self._kinds)
        for key, v in after.items():
            kind = kinds.get(key, "other")
            out[kind] = out.get(kind, 0.0) + v - before.get(key, 0.0)
        return out

    def by_name(self) -> dict[str, float]:
        """CPU-seconds by process name (``java``, ``python3.11``, ...)."""
        out: dict[str, float] = {}
        for key, (start, last) in self._cpu.items():
            name = self._names[key]
            out[name] = out.get(name, 0.0) + last - start
        return out

    def by_process(self) -> dict[str, float]:
        """The CPU-seconds by kind of process: ``driver`` (the root process, less the sampler),
        ``JVM``, ``Python workers`` (the daemon and the workers it forks); and ``Python
        processes``, how many of those used CPU."""
        out = dict.fromkeys(("driver", "JVM", "Python workers", "Python processes"), 0.0)
        for key, (start, last) in self._cpu.items():
            if key[0] == self.root.pid:
                out["driver"] += last - start - self._sampler_in_tree
            elif "java" in self._names[key]:
                out["JVM"] += last - start
            else:  # the Python daemon and the workers it forks (gone ones: only those come and go)
                out["Python workers"] += last - start
                out["Python processes"] += last > start
        return out


def tree_cpu(argv: list[str], interval: float = 0.5) -> tuple[int, float, dict[str, float]]:
    """(exit status, wall seconds, CPU-seconds by process name) of ``argv`` and its descendants."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv)
    with TreeCpu(interval, root=psutil.Process(proc.pid)) as cpu:
        proc.wait()
    return proc.returncode, time.monotonic() - t0, cpu.by_name()


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
