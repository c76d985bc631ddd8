"""spark_jobs.progress: the progress line's figures, and a real Spark job's tasks counted by Spark's
status tracker while it runs."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from spark_jobs.progress import StepProgress, spark_progress


def test_the_progress_line() -> None:
    p = StepProgress("decode", "orders", tasks_done=12, tasks_total=40, stages=2, elapsed=12.0, files=4,
                     total_bytes=400_000_000)
    assert p.line() == ("decode orders: 12/40 tasks (30%) in 2 stage(s); ~120.0 of 400.0 MB of 4 file(s), "
                        "10.0 MB/s; ETA 0:00:28; elapsed 0:00:12")
    done = StepProgress("reconcile", "orders", tasks_done=3, tasks_total=3, stages=1, elapsed=2.4)
    assert done.line() == "reconcile orders: 3/3 tasks (100%) in 1 stage(s); elapsed 0:00:02"


@pytest.mark.spark
def test_a_running_job_is_reported(spark: Any, caplog: pytest.LogCaptureFixture) -> None:
    def slow(x: int) -> int:
        import time as t

        t.sleep(1.5 if x else 0.1)
        return x

    with caplog.at_level(logging.INFO, logger="binlake.progress"):
        with spark_progress(spark, "decode", "orders", files=2, total_bytes=2_000_000, interval=0.3):
            assert spark.sparkContext.parallelize(range(4), 4).map(slow).sum() == 6
            time.sleep(0.7)  # one more look after the job ended
    lines = [r.getMessage() for r in caplog.records if r.name == "binlake.progress"]
    assert lines, "no progress logged"
    assert all(line.startswith("decode orders: ") and "/4 tasks" in line for line in lines), lines
    assert lines[-1].startswith("decode orders: 4/4 tasks (100%) in 1 stage(s); ~2.0 of 2.0 MB of 2 file(s)")


def test_a_step_shorter_than_one_interval_still_logs_its_end(spark: Any, caplog: pytest.LogCaptureFixture) -> None:
    """The last line comes when the block ends, not only on the poller's clock: a quick step (a
    small night) must still show in the task log what it did."""
    with caplog.at_level(logging.INFO, logger="binlake.progress"):
        with spark_progress(spark, "reconcile", "orders", interval=3600):
            assert spark.sparkContext.parallelize(range(3), 3).sum() == 3
    lines = [r.getMessage() for r in caplog.records if r.name == "binlake.progress"]
    assert len(lines) == 1 and lines[0].startswith("reconcile orders: 3/3 tasks (100%) in 1 stage(s)"), lines
