"""Which Delta failures spark_jobs.delta_retry retries, and that the retry is bounded.

The messages are the ones Delta 4.4 raises (the first line, as py4j hands them to Python); the
classes mirror ``delta.exceptions`` names without needing a JVM.
"""

from __future__ import annotations

import pytest

from spark_jobs.delta_retry import is_retryable_conflict, with_conflict_retry

APPEND = ("[DELTA_CONCURRENT_APPEND.WITHOUT_HINT] Transaction conflict detected. a concurrent WRITE added "
          "data to table delta.`file:/wh/meta/gtid_coverage` committed at version 3.")
PROTOCOL = ("[DELTA_PROTOCOL_CHANGED] ProtocolChangedException: The protocol version of the Delta table has "
            "been changed by a concurrent update. This happens when multiple writers are writing to an empty "
            "directory.")


class ConcurrentTransactionException(Exception):
    pass


class ProtocolChangedException(Exception):
    pass


@pytest.mark.parametrize(("exc", "retryable"), [
    (RuntimeError(APPEND), True),
    (RuntimeError(PROTOCOL), True),
    (ProtocolChangedException("no tag"), True),
    (RuntimeError("[DELTA_METADATA_CHANGED] MetadataChangedException: The metadata of the Delta table has been "
                  "changed by a concurrent update."), True),
    (ConcurrentTransactionException("[DELTA_CONCURRENT_TRANSACTION] the same txnAppId"), False),
    (RuntimeError("[DELTA_FAILED_TO_MERGE_FIELDS] Failed to merge fields 'x' and 'x'"), False),
    (OSError("Connection refused"), False),
    (RuntimeError("first line\n[DELTA_CONCURRENT_APPEND] only in the stack trace"), False),
])
def test_only_concurrency_conflicts_are_retryable(exc: BaseException, retryable: bool) -> None:
    assert is_retryable_conflict(exc) is retryable


def test_retry_stops_after_the_bound_and_reraises_the_conflict() -> None:
    calls: list[int] = []

    def always_conflicts() -> None:
        calls.append(1)
        raise RuntimeError(APPEND)

    with pytest.raises(RuntimeError, match="DELTA_CONCURRENT_APPEND"):
        with_conflict_retry(always_conflicts, "test write", attempts=3, max_wait=0.01)
    assert len(calls) == 3


def test_a_conflict_then_success_returns_the_value_and_other_errors_are_not_retried() -> None:
    calls: list[int] = []

    def conflicts_once() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError(PROTOCOL)
        return "committed"

    assert with_conflict_retry(conflicts_once, "test write", attempts=3, max_wait=0.01) == "committed"
    assert len(calls) == 2

    def broken() -> None:
        calls.append(1)
        raise ValueError("schema mismatch")

    with pytest.raises(ValueError):
        with_conflict_retry(broken, "test write", attempts=5, max_wait=0.01)
    assert len(calls) == 3
