"""Progress of a Spark step in its log every few seconds: tasks done of total, the step's files and
bytes (estimated from the share of tasks done), rate and ETA.

Why Spark's status tracker: it is Spark's own account of what its executors finished, read from
the driver without touching the job; a long decode otherwise logs nothing for minutes (the
Airflow task log stays silent until the step ends). A daemon thread polls it while the step
runs; a task process runs one step at a time, so every stage it sees is the step's. A Spark
Connect client has no status tracker: the server's progress reports (the client's progress
handler) give the same figures.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pyspark import StatusTracker
    from pyspark.sql import SparkSession

log = logging.getLogger("binlake.progress")

DEFAULT_INTERVAL = 5.0


@dataclass(frozen=True)
class StepProgress:
    """One look at a running step."""

    step: str
    source: str
    tasks_done: int
    tasks_total: int
    stages: int
    elapsed: float
    files: int = 0
    total_bytes: int = 0

    @property
    def fraction(self) -> float:
        return self.tasks_done / self.tasks_total if self.tasks_total else 0.0

    def line(self) -> str:
        """``decode orders: 12/40 tasks (30%) in 2 stage(s); ~120.0 of 400.0 MB of 4 file(s), 10.2 MB/s, ETA 0:00:27``"""
        parts = [f"{self.step} {self.source}: {self.tasks_done}/{self.tasks_total} tasks "
                 f"({self.fraction:.0%}) in {self.stages} stage(s)"]
        if self.total_bytes:
            done = self.fraction * self.total_bytes
            rate = done / self.elapsed if self.elapsed > 0 else 0.0
            parts.append(f"~{done / 1e6:.1f} of {self.total_bytes / 1e6:.1f} MB of {self.files} file(s), "
                         f"{rate / 1e6:.1f} MB/s")
        if 0 < self.fraction < 1:
            eta = self.elapsed * (1 - self.fraction) / self.fraction
            parts.append(f"ETA {dt.timedelta(seconds=round(eta))}")
        parts.append(f"elapsed {dt.timedelta(seconds=round(self.elapsed))}")
        return "; ".join(parts)


class StageCounter:
    """Tasks of every stage seen since the step began (a finished stage keeps its last count)."""

    def __init__(self, tracker: StatusTracker, ignore: set[int] | None = None) -> None:
        self.tracker = tracker
        self.ignore = set(ignore or ())
        self.stages: dict[int, tuple[int, int]] = {}  # stage id -> (tasks, done)
        # jobs that ran before the step, and the step's jobs already counted once finished
        self.jobs_seen: set[int] = set(tracker.getJobIdsForGroup())

    def _finished_jobs_stages(self) -> None:
        """Stages of the step's jobs that started and ended between two looks (never active when
        polled). A stage that ran no task was skipped (its shuffle output reused): not counted."""
        for jid in self.tracker.getJobIdsForGroup():
            if jid in self.jobs_seen:
                continue
            job = self.tracker.getJobInfo(jid)
            if job is None or job.status == "RUNNING":
                continue
            self.jobs_seen.add(jid)
            for sid in job.stageIds:
                info = None if sid in self.stages or sid in self.ignore else self.tracker.getStageInfo(sid)
                if info is not None and info.numCompletedTasks:
                    self.stages[sid] = (info.numTasks, info.numCompletedTasks)

    def poll(self) -> tuple[int, int, int]:
        """(tasks done, tasks total, stages) now."""
        self._finished_jobs_stages()
        for sid in self.tracker.getActiveStageIds():
            if sid in self.ignore:
                continue
            info = self.tracker.getStageInfo(sid)
            if info is not None:
                self.stages[sid] = (info.numTasks, info.numCompletedTasks)
        for sid, (total, _done) in list(self.stages.items()):
            info = self.tracker.getStageInfo(sid)
            if info is not None:
                self.stages[sid] = (info.numTasks, info.numCompletedTasks)
            elif sid not in self.tracker.getActiveStageIds():
                self.stages[sid] = (total, total)  # dropped from the status store: finished
        return (sum(d for _t, d in self.stages.values()), sum(t for t, _d in self.stages.values()),
                len(self.stages))


class ConnectStageCounter:
    """The same count for a Spark Connect client (no ``sparkContext``, so no status tracker): the
    server reports each operation's stages to the client's progress handler while it runs; the
    counter keeps the last figures of every stage it was told about."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stages: dict[int, tuple[int, int]] = {}  # stage id -> (tasks, done)

    def __call__(self, stages: Iterable[Any] | None, inflight_tasks: int, operation_id: str | None,
                 done: bool) -> None:
        with self.lock:
            for st in stages or ():
                self.stages[st.stage_id] = (st.num_tasks, st.num_completed_tasks)

    def poll(self) -> tuple[int, int, int]:
        with self.lock:
            return (sum(d for _t, d in self.stages.values()), sum(t for t, _d in self.stages.values()),
                    len(self.stages))


def _counter(spark: SparkSession) -> tuple[StageCounter | ConnectStageCounter, Callable[[], None]]:
    """The step's stage counter and what ends it (a Connect client's handler is removed)."""
    from spark_jobs.session import is_connect

    if is_connect(spark):
        connect = ConnectStageCounter()
        spark.registerProgressHandler(connect)  # type: ignore[arg-type]
        return connect, lambda: spark.removeProgressHandler(connect)  # type: ignore[arg-type]
    tracker = spark.sparkContext.statusTracker()
    return StageCounter(tracker, ignore=set(tracker.getActiveStageIds())), lambda: None


@contextlib.contextmanager
def spark_progress(spark: SparkSession, step: str, source: str, *, files: int = 0, total_bytes: int = 0,
                   interval: float = DEFAULT_INTERVAL) -> Iterator[None]:
    """Log the step's progress every ``interval`` seconds while the block runs, and once when it
    ends (so a step shorter than one interval still says what it did)."""
    counter, end = _counter(spark)
    stop = threading.Event()
    t0 = time.monotonic()

    last: tuple[int, int] | None = None  # the figures of the line logged last

    def emit() -> None:
        nonlocal last
        try:
            done, total, stages = counter.poll()
        except Exception as exc:  # noqa: BLE001 - progress must never fail the step
            log.debug("no progress: %s", exc)
            return
        if total and (done, total) != last:
            seen = StepProgress(step, source, done, total, stages, time.monotonic() - t0, files, total_bytes)
            # the object rides along for terminals that draw a bar (the demo); logs get the line
            log.info("%s", seen.line(), extra={"step_progress": seen})
            last = (done, total)

    def report() -> None:
        while not stop.wait(interval):
            emit()

    thread = threading.Thread(target=report, name=f"progress-{step}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=interval + 1)
        emit()  # the last line, also for a step shorter than one interval
        with contextlib.suppress(Exception):  # progress must never fail the step
            end()
