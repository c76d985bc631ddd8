"""Run ids of jobs started outside Airflow (a CLI call, a test, the benchmark).

Why one generator: the run id names the Delta commits a job makes (``txnAppId``,
``userMetadata``), so every job must make it the same way: sortable by start time (UTC) and
unique across hosts. Airflow runs pass their own run id instead.
"""

from __future__ import annotations

import datetime as dt
import uuid


def new_run_id(now: dt.datetime | None = None) -> str:
    """``20260102T030405-1a2b3c4d``: UTC start time, then 8 random hex digits."""
    moment = now or dt.datetime.now(dt.UTC)
    return f"{moment.astimezone(dt.UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
