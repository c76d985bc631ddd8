"""Spark's own log lines (the JVM's stderr) relayed into Python logging at their real level.

Why: an Airflow task's stderr is logged line by line at ERROR, so every line the in-process
Spark JVM writes ("Setting default log level to WARN", a WARN about native libraries ...) shows
up as a red error in the task log. The JVM inherits the stderr of the process that launches it;
:func:`relay_jvm_stderr` hands it a pipe instead while the session starts, and a daemon thread
reads the pipe and logs each line through the ``spark`` logger at the level log4j printed
(``25/11/23 18:00:00 ERROR Executor: ...`` -> ERROR). Lines without a level (a
continuation of a stack trace, plain prints) keep the level of the line before them. The few WARNs
every healthy run prints (:data:`NOT_FAULTS`) go at INFO: into the task's log, not onto a terminal
where a newcomer would read them as faults.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import threading
from collections.abc import Iterator

log = logging.getLogger("spark")

#: log4j's level names -> Python's
LEVELS = {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
          "WARNING": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}
#: Spark's default console pattern ``%d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n`` (and ISO dates)
LINE = re.compile(r"^\d{2,4}[/-]\d{2}[/-]\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\s+(?P<level>[A-Z]+)\s+(?P<rest>.*)$")


#: WARN lines Spark prints on every healthy local run, relayed at INFO (the task's log file, not the
#: terminal): no native Hadoop library (the Java codecs are used), the session a later step reuses
#: (its static settings are the same config's), a plan's text shortened for a log line.
NOT_FAULTS = (
    re.compile(r"^WARN NativeCodeLoader: Unable to load native-hadoop library"),
    re.compile(r"^WARN SparkSession: Using an existing Spark session; only runtime SQL configurations"),
    re.compile(r"^WARN SparkStringUtils: Truncated the string representation of a plan"),
)


def level_of(line: str, previous: int = logging.INFO) -> tuple[int, str]:
    """The Python level of one JVM stderr line and the line without its timestamp."""
    m = LINE.match(line)
    if m and m.group("level") in LEVELS:
        return LEVELS[m.group("level")], f"{m.group('level')} {m.group('rest')}"
    return previous, line


class _Relay:
    """The reading end of the JVM's stderr pipe.

    Lines read while fd 2 still is the pipe are held back until :meth:`restored` is called: a
    log handler writing to stderr would otherwise feed its own output back into the pipe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: list[tuple[int, str]] = []
        self._open = False
        self._level = logging.INFO

    def line(self, text: str) -> None:
        with self._lock:
            self._level, text = level_of(text, self._level)
            if any(p.match(text) for p in NOT_FAULTS):
                self._level = logging.INFO  # and its continuation lines, if any
            self._held.append((self._level, text))
            if self._open:
                self._flush()

    def restored(self) -> None:
        with self._lock:
            self._open = True
            self._flush()

    def _flush(self) -> None:
        for level, text in self._held:
            log.log(level, "%s", text)
        self._held.clear()

    def pump(self, fd: int) -> None:
        """Read the pipe until every writer (the JVM) closed it."""
        with os.fdopen(fd, "rb", buffering=0) as pipe:
            pending = b""
            while chunk := pipe.read(65536):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for raw in lines:
                    if raw.strip():
                        self.line(raw.decode("utf-8", errors="replace").rstrip())
            if pending.strip():
                self.line(pending.decode("utf-8", errors="replace").rstrip())


@contextlib.contextmanager
def relay_jvm_stderr() -> Iterator[None]:
    """Around the start of a Spark session: the JVM launched inside gets a pipe as its stderr.

    fd 2 of this process points at the pipe only while the block runs (the JVM is started then),
    and is restored afterwards. Does nothing when fd 2 cannot be duplicated.
    """
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    read_fd, write_fd = os.pipe()
    relay = _Relay()
    threading.Thread(target=relay.pump, args=(read_fd,), name="spark-stderr", daemon=True).start()
    sys.stderr.flush()
    os.dup2(write_fd, 2)
    os.close(write_fd)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        relay.restored()
