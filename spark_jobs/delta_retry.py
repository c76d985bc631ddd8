"""Which Delta commit failures a binlake writer may retry, and the bounded, jittered retry itself.

Why retrying is safe here: every binlake write is a deterministic full replacement of the rows of
one source (``replaceWhere`` on ``source = ... [AND file IN (...)]``), tagged with a ``txnAppId``;
re-running the same write after a conflict produces the same table. Since every table is
partitioned by ``source``, writers of different sources never conflict on data; what remains
retryable is Delta's optimistic-concurrency noise: a concurrent first-time CREATE of the table
(``ProtocolChangedException`` / ``MetadataChangedException``), a concurrent metadata change (the
one-off re-partitioning of an old table) and, for a write that still overlaps another one, a
``ConcurrentAppendException``. Anything else (schema mismatch, I/O errors, bugs, and
``ConcurrentTransactionException``: the *same* run writing twice at once) fails at once.

tenacity does the waiting (a library made for it); the attempts are bounded and the waits are
exponential with full jitter, so two writers that collided do not collide again in lock step.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from tenacity import (
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

log = logging.getLogger("binlake.delta_retry")

T = TypeVar("T")

#: Delta error classes (the ``[...]`` tag of the message) that a re-run of the same write may clear.
RETRYABLE_ERROR_CLASSES: tuple[str, ...] = (
    "DELTA_CONCURRENT_APPEND",
    "DELTA_CONCURRENT_DELETE_READ",
    "DELTA_CONCURRENT_DELETE_DELETE",
    "DELTA_METADATA_CHANGED",
    "DELTA_PROTOCOL_CHANGED",
    "DELTA_CONCURRENT_WRITE",
)
#: Python exception class names raised for them (delta.exceptions), for errors without a tag.
RETRYABLE_CLASS_NAMES: frozenset[str] = frozenset({
    "ConcurrentAppendException", "ConcurrentDeleteReadException", "ConcurrentDeleteDeleteException",
    "MetadataChangedException", "ProtocolChangedException", "ConcurrentWriteException",
})
DEFAULT_ATTEMPTS = 6
DEFAULT_MAX_WAIT_SECONDS = 20.0


def is_retryable_conflict(exc: BaseException) -> bool:
    """True for Delta's optimistic-concurrency conflicts a re-run may clear (see module doc)."""
    if type(exc).__name__ == "ConcurrentTransactionException":
        return False
    if type(exc).__name__ in RETRYABLE_CLASS_NAMES:
        return True
    text = str(exc).split("\n", 1)[0]
    return any(f"[{tag}" in text for tag in RETRYABLE_ERROR_CLASSES)


def with_conflict_retry(action: Callable[[], T], what: str, *, attempts: int = DEFAULT_ATTEMPTS,
                        max_wait: float = DEFAULT_MAX_WAIT_SECONDS) -> T:
    """Run ``action``; on a retryable Delta conflict wait (0.5 s .. ``max_wait``, jittered) and
    re-run it, at most ``attempts`` times in all; the last conflict is re-raised."""

    def before_sleep(state: object) -> None:
        outcome = getattr(state, "outcome", None)
        exc = outcome.exception() if outcome is not None else None
        log.warning("%s: Delta commit conflict (attempt %s of %d), retrying: %s", what,
                    getattr(state, "attempt_number", "?"), attempts, str(exc).split("\n", 1)[0][:300])

    retrying = Retrying(stop=stop_after_attempt(attempts),
                        wait=wait_random_exponential(multiplier=0.5, max=max_wait),
                        retry=retry_if_exception(is_retryable_conflict), before_sleep=before_sleep,
                        reraise=True)
    return retrying(action)
