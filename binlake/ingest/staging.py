"""Ingest staging: where a run stages its decoded rows, and removing what dead runs left behind.

The ingest job's executors stage each table's decoded rows as Parquet part files under
``<warehouse>/_staging/ingest-<run id>/<kind>/part-<task>-<n>.parquet`` (:func:`staging_folder`,
:func:`part_name`); the driver writes the Delta tables from them and deletes that folder after
its Delta writes. A run killed in between (during its Delta writes) leaves the folder; re-run
with the same run id its parts are overwritten (the driver reads only the parts its tasks
reported) and the folder deleted, but the next scheduled run has a new run id and nothing would
ever remove it. :func:`clean_stale_staging`
runs at the start of each ingest and removes the staging folders of other runs that have not
changed for ``older_than`` seconds.

Why an age and not "every other run's folder": runs for different sources ingest at the same
time (each holds only its own source's lease), and a live run's staging must not vanish under
it. Why the source-lease lifetime as the default age: a run's staging is written during its
decode step and read until its last Delta write, and every step renews the run's lease; a
folder untouched for longer than a lease lives belongs to a run that no longer holds any lease,
finished (``keep_staging``) or dead, and no live run can still read it.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass

from binlake.config import S3Settings
from binlake.lake.storage import LocalObjectStore, ObjectNotFound, open_object_store

log = logging.getLogger(__name__)

STAGING_DIR = "_staging"
RUN_PREFIX = "ingest-"


def staging_folder(warehouse: str, run_id: str) -> str:
    """The staging folder of one ingest run (a local path or an object-store URI, as the warehouse)."""
    return f"{warehouse.rstrip('/')}/{STAGING_DIR}/{RUN_PREFIX}{run_id}"


def part_name(kind: str, task: int, n: int) -> str:
    """The ``n``-th part file of table ``kind`` written by ingest task ``task``, relative to the
    run's staging folder. Deterministic: a retried Spark task overwrites its own parts."""
    return f"{kind}/part-{task:05d}-{n:04d}.parquet"


@dataclass(frozen=True)
class StaleStaging:
    """One removed (or, in a dry run, removable) staging folder of a run."""

    run_id: str
    objects: int
    bytes: int
    newest_age_seconds: float


def default_stale_after() -> float:
    """The source-lease lifetime (``BINLAKE_SOURCE_LEASE_TTL``, default 6 h): see the module doc."""
    from binlake.lake.leases import default_ttl

    return default_ttl()


def clean_stale_staging(warehouse: str, s3: S3Settings | None, *, keep_run: str | None,
                        older_than: float | None = None, now: float | None = None,
                        dry_run: bool = False) -> list[StaleStaging]:
    """Remove the ``_staging/ingest-<run>/`` folders of runs other than ``keep_run`` whose newest
    object is older than ``older_than`` seconds (default :func:`default_stale_after`)."""
    limit = default_stale_after() if older_than is None else older_than
    now = time.time() if now is None else now
    store = open_object_store(warehouse.rstrip("/") + f"/{STAGING_DIR}/", s3)
    by_run: dict[str, list[tuple[str, int, float]]] = {}
    for obj in store.list(RUN_PREFIX):
        folder = obj.name.split("/", 1)[0]
        modified = obj.last_modified if obj.last_modified is not None else now
        by_run.setdefault(folder[len(RUN_PREFIX):], []).append((obj.name, obj.size, modified))
    removed = []
    for run_id, objs in sorted(by_run.items()):
        age = now - max(m for _, _, m in objs)
        if run_id == keep_run or age < limit:
            continue
        removed.append(StaleStaging(run_id, len(objs), sum(s for _, s, _ in objs), age))
        if dry_run:
            continue
        log.warning("removing stale ingest staging of run %s: %d object(s), %d bytes, untouched for %.0f s",
                    run_id, len(objs), sum(s for _, s, _ in objs), age)
        if isinstance(store, LocalObjectStore):
            shutil.rmtree(store.root / f"{RUN_PREFIX}{run_id}", ignore_errors=True)
            continue
        for name, _, _ in objs:
            try:
                store.delete(name)
            except ObjectNotFound:
                pass
    return removed
