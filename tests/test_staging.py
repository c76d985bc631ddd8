"""binlake.ingest.staging: staging folders of dead ingest runs are removed, live and current ones kept."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from binlake.config import S3Settings
from binlake.ingest.staging import StaleStaging, clean_stale_staging, default_stale_after, part_name, staging_folder

HOUR = 3600.0


def _stage(warehouse: Path, run_id: str, age: float) -> Path:
    """A staging folder as the ingest tasks write it (a folder of parts per table), ``age`` s old."""
    folder = Path(staging_folder(str(warehouse), run_id))
    files = [folder / part_name("events", 0, 0), folder / part_name("quarantine", 0, 0),
             folder / part_name("events", 1, 0)]
    when = time.time() - age
    for f in files:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"PAR1" * 25)
        os.utime(f, (when, when))
    return folder


def test_only_old_folders_of_other_runs_are_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BINLAKE_SOURCE_LEASE_TTL", raising=False)
    wh = tmp_path / "warehouse"
    dead = _stage(wh, "dead-run", 7 * HOUR)
    live = _stage(wh, "other-source-run", 10)  # another source's run, decoding right now
    mine = _stage(wh, "this-run", 9 * HOUR)  # the current run's own folder (same run id re-run)
    (wh / "bronze").mkdir()
    assert default_stale_after() == 6 * HOUR
    removed = clean_stale_staging(str(wh), None, keep_run="this-run")
    assert [(r.run_id, r.objects, r.bytes) for r in removed] == [("dead-run", 3, 300)]
    assert removed[0].newest_age_seconds == pytest.approx(7 * HOUR, abs=60)
    assert not dead.exists() and live.is_dir() and mine.is_dir() and (wh / "bronze").is_dir()
    assert clean_stale_staging(str(wh), None, keep_run="this-run") == []


def test_threshold_follows_the_lease_lifetime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BINLAKE_SOURCE_LEASE_TTL", raising=False)
    wh = tmp_path / "warehouse"
    _stage(wh, "r1", 2 * HOUR)
    assert clean_stale_staging(str(wh), None, keep_run=None) == []
    monkeypatch.setenv("BINLAKE_SOURCE_LEASE_TTL", str(HOUR))
    assert [r.run_id for r in clean_stale_staging(str(wh), None, keep_run=None, dry_run=True)] == ["r1"]
    assert (wh / "_staging" / "ingest-r1").is_dir()  # dry run
    assert [r.run_id for r in clean_stale_staging(str(wh), None, keep_run=None)] == ["r1"]
    assert not (wh / "_staging" / "ingest-r1").exists()


def test_staging_layout() -> None:
    """The layout the executors write and this module cleans: one folder per run, one per table."""
    assert staging_folder("s3a://lake/wh/", "r-1") == "s3a://lake/wh/_staging/ingest-r-1"
    assert staging_folder("/data/wh", "r-1") == "/data/wh/_staging/ingest-r-1"
    assert part_name("row_changes", 3, 12) == "row_changes/part-00003-0012.parquet"


def test_no_staging_folder_at_all(tmp_path: Path) -> None:
    assert clean_stale_staging(str(tmp_path / "nothing"), None, keep_run="x") == []


def test_s3_warehouse(s3_server: Any, s3_client: Any, s3_bucket: str) -> None:
    """On S3 the folder is a prefix: every object under it is deleted, nothing else."""
    keys = [f"lake/_staging/ingest-{run}/kind=events/part-0.parquet" for run in ("dead", "kept")]
    keys += ["lake/_staging/ingest-dead/_SUCCESS", "lake/bronze/events/_delta_log/00000.json"]
    for k in keys:
        s3_client.put_object(Bucket=s3_bucket, Key=k, Body=b"x" * 10)
    settings = S3Settings(endpoint_url=s3_server.endpoint_url, path_style_access=True, max_attempts=3)
    # moto stamps objects "now": look from 7 hours later
    removed = clean_stale_staging(f"s3a://{s3_bucket}/lake", settings, keep_run="kept", now=time.time() + 7 * HOUR)
    assert removed == [StaleStaging("dead", 2, 20, pytest.approx(7 * HOUR, abs=120))]  # type: ignore[arg-type]
    left = sorted(o["Key"] for o in s3_client.list_objects_v2(Bucket=s3_bucket)["Contents"])
    assert left == ["lake/_staging/ingest-kept/kind=events/part-0.parquet", "lake/bronze/events/_delta_log/00000.json"]
