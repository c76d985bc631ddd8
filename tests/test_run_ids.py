"""Run ids of jobs started outside Airflow (binlake/run_ids.py)."""

from __future__ import annotations

import datetime as dt
import re

from binlake.run_ids import new_run_id


def test_utc_start_time_then_random_suffix() -> None:
    moment = dt.datetime(2026, 1, 2, 4, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    first, second = new_run_id(moment), new_run_id(moment)
    assert first.startswith("20260102T030405-") and second.startswith("20260102T030405-")
    assert re.fullmatch(r"\d{8}T\d{6}-[0-9a-f]{8}", first) and first != second
    assert sorted([new_run_id(moment + dt.timedelta(seconds=1)), first])[1].startswith("20260102T030406")
