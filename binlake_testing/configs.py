"""binlake.toml text for tests and benches whose warehouse and archive live in one loopback S3 bucket."""

from __future__ import annotations

import os
from collections.abc import Iterable

from binlake.config import REPO_ROOT


def s3_lake_config_lines(*, bucket: str, state_dir: str, endpoint: str, sources: Iterable[str],
                         decode_in_process_bytes: int | None = None) -> list[str]:
    """``[pipeline]`` (warehouse ``s3a://<bucket>/warehouse``), one ``[[sources]]`` per name (its archive
    under ``s3://<bucket>/archive/<name>/``) and ``[s3]`` at ``endpoint``; the caller adds ``[spark]``.
    ``decode_in_process_bytes``: that setting (0: every decode on Spark's executors), else the default."""
    jars = os.environ.get("BINLAKE_JARS_DIR", str(REPO_ROOT / ".jars"))
    lines = ["[pipeline]", f'warehouse = "s3a://{bucket}/warehouse"', f'state_dir = "{state_dir}"',
             f'jars_dir = "{jars}"', 'nightly_cron = "0 3 * * *"',
             *([] if decode_in_process_bytes is None else [f"decode_in_process_bytes = {decode_in_process_bytes}"]), ""]
    for s in sources:
        lines += ["[[sources]]", f'name = "{s}"', f'uri = "s3://{bucket}/archive/{s}/"', ""]
    return [*lines, "[s3]", f'endpoint_url = "{endpoint}"', "path_style_access = true", "max_attempts = 3", ""]
