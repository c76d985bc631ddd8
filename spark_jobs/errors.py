"""The errors the Spark jobs raise on purpose, under one root.

Why one module: a caller (a step, the CLI, an Airflow task) tells a Spark job's explained failure
from a bug by its root, :class:`SparkJobError` (itself a :class:`binlake.errors.BinlakeError`), and
finds every such error in one place.
"""

from __future__ import annotations

from binlake.errors import BinlakeError


class SparkJobError(BinlakeError):
    """Base class of the errors of ``spark_jobs`` (its message is meant for operators)."""


class MissingJarsError(SparkJobError, RuntimeError):
    """The jars dir lacks the Delta / hadoop-aws jars: run `make setup`."""


class DirectWriteRefused(SparkJobError):
    """The data files the executors wrote into a table's folder cannot be committed by delta-rs: the
    table's protocol changed since the run checked it (the files stay uncommitted, read by no one)."""


class GoldUnionError(SparkJobError):
    """A source's gold table cannot join its union table (a column's type differs)."""
