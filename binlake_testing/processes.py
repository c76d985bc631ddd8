"""Ending the helper processes the test servers start (mariadbd, moto in its own process)."""

from __future__ import annotations

import subprocess


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
