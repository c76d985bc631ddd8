"""A pytest plugin that charges each test phase the CPU time it cost: the worker process, the
processes it waited for, and every live descendant (the worker's Spark JVM, a service a fixture
started). Opt-in: ``pytest -p binlake_testing.cpu_report`` with ``BINLAKE_CPU_REPORT=<file>``;
each worker appends ``<cpu seconds>\\t<phase>\\t<nodeid>`` lines.

Why: the suite runs on two busy cores, so a test's wall time says how long it waited as much as
what it cost; ``make test``'s length follows the CPU it burns (docs/testing.md, "Where the time
goes"). ``--durations`` cannot tell a test that waits from one that works.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

_TICKS = os.sysconf("SC_CLK_TCK")


def _children_by_parent() -> dict[int, list[int]]:
    """Parent pid -> child pids, from every process's ``stat``. Why not the kernel's per-thread
    ``children`` lists: a child started by a thread that has ended (a Spark JVM launched from an
    xdist worker's thread) is in none of them."""
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out.setdefault(int(fields[1]), []).append(int(entry))
    return out


def _process_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and the children it waited for (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / _TICKS  # utime stime cutime cstime


def tree_cpu() -> float:
    """CPU seconds of this process, the children it waited for and every live descendant's tree."""
    times = os.times()
    total = times.user + times.system + times.children_user + times.children_system
    children = _children_by_parent()
    stack = list(children.get(os.getpid(), ()))
    while stack:
        pid = stack.pop()
        total += _process_cpu(pid)
        stack.extend(children.get(pid, ()))
    return total


def _phase(item: pytest.Item, phase: str) -> Iterator[None]:
    target = os.environ.get("BINLAKE_CPU_REPORT")
    if not target:
        yield
        return
    before = tree_cpu()
    try:
        yield
    finally:
        spent = tree_cpu() - before
        with open(target, "a", encoding="utf-8") as out:
            out.write(f"{spent:.2f}\t{phase}\t{item.nodeid}\n")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    return (yield from _phase(item, "setup"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    return (yield from _phase(item, "call"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    return (yield from _phase(item, "teardown"))
