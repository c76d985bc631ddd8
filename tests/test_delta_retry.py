"""Which Delta failures a job's write retries, and that :func:`spark_jobs.lake.committed_write`
(the one commit path of every job write) retries them, bounded, and fences each attempt.

The messages are the ones Delta 4.4 raises (the first line, as py4j hands them to Python); the
classes mirror ``delta.exceptions`` names without needing a JVM.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

from binlake.config import S3Settings
from binlake.lake.leases import CommitFence
from spark_jobs.lake import committed_write, is_retryable_conflict

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


def test_retry_stops_after_the_bound_and_reraises_the_conflict(tmp_path: Path) -> None:
    calls: list[int] = []

    def always_conflicts(fence: CommitFence) -> None:
        fence.check()
        calls.append(1)
        raise RuntimeError(APPEND)

    with pytest.raises(RuntimeError, match="DELTA_CONCURRENT_APPEND"):
        committed_write(str(tmp_path / "t"), None, always_conflicts, "test write", attempts=3, max_wait=0.01)
    assert len(calls) == 3


def test_a_conflict_then_success_returns_the_value_and_other_errors_are_not_retried(tmp_path: Path) -> None:
    calls: list[int] = []

    def conflicts_once(fence: CommitFence) -> str:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError(PROTOCOL)
        fence.check()
        return "committed"

    assert committed_write(str(tmp_path / "t"), None, conflicts_once, "test write", attempts=3,
                           max_wait=0.01) == "committed"
    assert len(calls) == 2

    def broken(fence: CommitFence) -> None:
        calls.append(1)
        raise ValueError("schema mismatch")

    with pytest.raises(ValueError, match="schema mismatch"):
        committed_write(str(tmp_path / "t"), None, broken, "test write", attempts=5, max_wait=0.01)
    assert len(calls) == 3


def test_on_s3_the_write_runs_under_the_tables_commit_lock_and_a_lost_lock_is_not_retried(
        s3_server: Any, s3_client: Any, s3_bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lock object exists while the write runs and is gone after; a fence that refuses
    (LockLostError) fails the write at once: not a conflict, so not re-run."""
    from binlake.lake import leases

    s3 = S3Settings(endpoint_url=s3_server.endpoint_url, path_style_access=True)
    path = f"s3a://{s3_bucket}/wh/meta/t"

    def lock_keys() -> list[str]:
        listed = s3_client.list_objects_v2(Bucket=s3_bucket, Prefix="_binlake/locks/")
        return [o["Key"] for o in listed.get("Contents", [])]

    def write(fence: CommitFence) -> list[str]:
        fence.check()
        return lock_keys()

    assert committed_write(path, s3, write, "test write") == ["_binlake/locks/tables/wh/meta/t.json"]
    assert lock_keys() == []

    calls: list[int] = []

    class Lost:
        def check(self) -> None:
            raise leases.LockLostError("table wh/meta/t: the commit lock was lost (test)")

    def fenced(fence: CommitFence) -> None:
        calls.append(1)
        fence.check()

    monkeypatch.setattr(leases, "table_commit_lock", lambda uri, s3: contextlib.nullcontext(Lost()))
    with pytest.raises(leases.LockLostError, match="lock was lost"):
        committed_write(path, s3, fenced, "test write", attempts=3, max_wait=0.01)
    assert calls == [1]
