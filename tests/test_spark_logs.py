"""spark_jobs.spark_logs: a child process started inside ``relay_jvm_stderr`` (as the Spark JVM is)
writes log4j lines to its stderr; they arrive in the ``spark`` logger at their own level."""

from __future__ import annotations

import logging
import os
import subprocess
import time

import pytest

from spark_jobs.spark_logs import level_of, relay_jvm_stderr

SPARK_LINES = [
    "Setting default log level to \"WARN\".",
    "25/11/23 18:00:00 WARN NativeCodeLoader: Unable to load native-hadoop library for your platform",
    "25/11/23 18:00:01 INFO SparkContext: Running Spark version 4.2.0",
    "25/11/23 18:00:02 ERROR Executor: Exception in task 0.0 in stage 1.0 (TID 1)",
    "\tat org.apache.spark.executor.Executor.run(Executor.scala:620)",
    "25/11/23 18:00:03 WARN SparkSession: Using an existing Spark session; only runtime SQL configurations will "
    "take effect.",
    "25/11/23 18:00:04 WARN TaskSetManager: Lost task 0.0 in stage 1.0 (TID 1)",
]


def test_levels_of_spark_lines() -> None:
    assert level_of(SPARK_LINES[0]) == (logging.INFO, SPARK_LINES[0])
    assert level_of(SPARK_LINES[1]) == (logging.WARNING, "WARN NativeCodeLoader: Unable to load native-hadoop "
                                        "library for your platform")
    assert level_of(SPARK_LINES[3], logging.INFO)[0] == logging.ERROR
    assert level_of(SPARK_LINES[4], logging.ERROR) == (logging.ERROR, SPARK_LINES[4])  # a stack trace line
    assert level_of("2026-11-23 18:00:00,123 DEBUG Foo: x") == (logging.DEBUG, "DEBUG Foo: x")


def test_a_child_started_inside_writes_into_the_spark_logger(caplog: pytest.LogCaptureFixture) -> None:
    before = os.fstat(2)
    script = "; ".join(f"echo '{line}' >&2" for line in SPARK_LINES[:3]) + "; sleep 0.3; " + \
        "; ".join(f"printf '%s\\n' '{line}' >&2" for line in SPARK_LINES[3:])
    with caplog.at_level(logging.DEBUG, logger="spark"):
        with relay_jvm_stderr():
            child = subprocess.Popen(["sh", "-c", script])
        assert (os.fstat(2).st_ino, os.fstat(2).st_dev) == (before.st_ino, before.st_dev)  # fd 2 restored
        child.wait(timeout=10)
        deadline = time.monotonic() + 5
        while len([r for r in caplog.records if r.name == "spark"]) < 7 and time.monotonic() < deadline:
            time.sleep(0.05)
    got = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "spark"]
    assert got == [
        ("INFO", 'Setting default log level to "WARN".'),
        # a WARN every healthy run prints goes at INFO (the task's log, not the terminal): not a fault
        ("INFO", "WARN NativeCodeLoader: Unable to load native-hadoop library for your platform"),
        ("INFO", "INFO SparkContext: Running Spark version 4.2.0"),
        ("ERROR", "ERROR Executor: Exception in task 0.0 in stage 1.0 (TID 1)"),
        ("ERROR", "\tat org.apache.spark.executor.Executor.run(Executor.scala:620)"),
        ("INFO", "WARN SparkSession: Using an existing Spark session; only runtime SQL configurations will take "
                 "effect."),
        ("WARNING", "WARN TaskSetManager: Lost task 0.0 in stage 1.0 (TID 1)"),  # a real warning stays one
    ]
