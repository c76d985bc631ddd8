"""Starting and ending the helper processes the tests run (mariadbd, moto in its own process,
``binlake serve``)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: The ``binlake`` command of the venv the tests run in.
BINLAKE = Path(sys.executable).parent / "binlake"


def wait_or_kill(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait ``timeout`` seconds for ``proc`` (asked to stop already) to exit, then kill it: a server
    that ignores its shutdown must not outlive the test session."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


#: JVM options for short-lived JVMs (test sessions, a test's master, workers and drivers): the C1
#: compiler alone and the serial collector. Such a JVM runs many small, different jobs, where C2's
#: compiles do not pay back, on a few shared cores where G1's concurrent threads compete with the
#: work (docs/operations.md, docs/testing.md). Not for production runs: long and hot, where the
#: JVM's defaults are right.
SHORT_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@contextmanager
def binlake_serve(args: list[str], cwd: Path, wait_seconds: float) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """``binlake serve <args>`` until its endpoints are up (the ``Spark's log`` line it prints last),
    yielding the process and the lines it printed; stopped as an operator would (SIGTERM), then
    waited for (killed after two minutes). One helper, because a test that starts its own server
    must not leave a JVM behind when its assertion fails half-way."""
    proc = subprocess.Popen([str(BINLAKE), "serve", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=cwd)
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + wait_seconds
        while time.monotonic() < deadline and not any(line.startswith("Spark's log") for line in lines):
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip("\n"))
        assert any(line.startswith("Spark's log") for line in lines), (lines, proc.poll())
        yield proc, lines
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
