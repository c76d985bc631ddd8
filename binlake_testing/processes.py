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
