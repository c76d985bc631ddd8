"""The nightly DAG under Airflow's real services (scheduler + dag-processor + api-server, LocalExecutor).

Unlike ``dag.test()`` (one task at a time), the LocalExecutor runs the per-source task groups in
parallel, each Spark step in its own task process with its own SparkSession: exactly the setting
in which the first real run failed with ``ConcurrentAppendException`` on meta.gtid_coverage.
Three sources in one bucket of the loopback S3 server, one with a missing middle file (a GAP).
The run is triggered through the REST API and polled to its end; then

* the healthy sources' tasks succeed, the gap source's ``reconcile`` fails and its log names the
  GAP and the missing file, and the run fails (its summary says why);
* at least two task instances ran at the same time (from their start/end times);
* every table equals the one a serial run (the same task functions, one after the other, in this
  process) writes from the same archive: row counts and order-independent checksums.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from binlake.config import REPO_ROOT, load_config
from binlake.testing.airflow_services import AirflowServices, TaskInstanceInfo
from binlake.testing.s3server import S3Server
from binlake.testing.table_digest import warehouse_digests
from spark_jobs.schemas import ALL_TABLES
from tests._chain_util import MARIADB_FILES, read_fixture

# One nightly run of 3 sources = 13 task instances, each Spark step in its own JVM: ~40 min
# measured at load average 25 on the shared 2 cores (not finished in 40 min there), far less idle.
RUN_TIMEOUT = float(os.environ.get("BINLAKE_SERVICE_RUN_TIMEOUT", "4800"))
pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.cluster,
              pytest.mark.timeout(int(RUN_TIMEOUT) + 1800)]

BUCKET = "binlake-service-test"
DAG_ID = "binlake_nightly"
SOURCES = ("alpha", "beta", "gappy")
GAPPY_MISSING = "binlog.000003"


def _write_config(path: Path, endpoint: str, warehouse: Path, state: Path) -> Path:
    jars = os.environ.get("BINLAKE_JARS_DIR", str(REPO_ROOT / ".jars"))
    lines = ["[pipeline]", f'warehouse = "{warehouse}"', f'state_dir = "{state}"', f'jars_dir = "{jars}"',
             'nightly_cron = "0 3 * * *"', ""]
    for s in SOURCES:
        lines += ["[[sources]]", f'name = "{s}"', f'uri = "s3://{BUCKET}/{s}/"', ""]
    lines += ["[s3]", f'endpoint_url = "{endpoint}"', "path_style_access = true", "max_attempts = 3", "",
              "[spark]", 'mode = "local"', 'master = "local[1]"', "shuffle_partitions = 2", "ui_enabled = false",
              'driver_memory = "768m"', ""]
    path.write_text("\n".join(lines))
    return path


@pytest.fixture(scope="module")
def archive(s3_server: S3Server) -> str:
    client = s3_server.client()
    client.create_bucket(Bucket=BUCKET)
    for source in SOURCES:
        for name in MARIADB_FILES:
            if source == "gappy" and name == GAPPY_MISSING:
                continue
            client.put_object(Bucket=BUCKET, Key=f"{source}/{name}", Body=read_fixture(name))
    return BUCKET


@pytest.fixture(scope="module")
def airflow_run(archive: str, s3_server: S3Server, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("service")
    config = _write_config(tmp / "binlake.toml", s3_server.endpoint_url, tmp / "warehouse", tmp / "state")
    env = {"BINLAKE_CONFIG": str(config), "PYTHONPATH": str(REPO_ROOT), "SPARK_LOCAL_IP": "127.0.0.1"}
    with AirflowServices(home=tmp / "airflow", dags_folder=REPO_ROOT / "dags", extra_env=env,
                         parallelism=2) as services:
        services.wait_for_dag(DAG_ID)
        run_id = services.trigger(DAG_ID)
        state = services.wait_for_run(DAG_ID, run_id, timeout=RUN_TIMEOUT)
        yield {"services": services, "run_id": run_id, "state": state, "config": load_config(config),
               "tis": services.task_instances(DAG_ID, run_id)}


def _by_source(tis: list[TaskInstanceInfo]) -> dict[tuple[str, str], str | None]:
    return {(SOURCES[t.map_index] if t.map_index >= 0 else "-", t.task_id.rsplit(".", 1)[-1]): t.state
            for t in tis}


def _time(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value)


def test_healthy_sources_succeed_and_the_gap_fails(airflow_run: dict[str, Any]) -> None:
    states = _by_source(airflow_run["tis"])
    assert airflow_run["state"] == "failed", states  # the summary fails the run: gappy has a GAP
    for source in ("alpha", "beta"):
        for step in ("discover", "decode", "reconcile", "data_checks"):
            assert states[(source, step)] == "success", (source, step, states)
    assert states[("gappy", "decode")] == "success"
    assert states[("gappy", "reconcile")] == "failed"
    assert states[("-", "summary")] == "failed"
    gappy = SOURCES.index("gappy")
    log = airflow_run["services"].task_log(DAG_ID, airflow_run["run_id"], "per_source.reconcile", gappy)
    assert "source gappy: binlog chain broken" in log
    assert f"GAP (missing files {GAPPY_MISSING}" in log


def test_tasks_ran_in_parallel(airflow_run: dict[str, Any]) -> None:
    spans = [(t, _time(t.start_date), _time(t.end_date)) for t in airflow_run["tis"]
             if t.start_date and t.end_date]
    overlapping = [(a.task_id, a.map_index, b.task_id, b.map_index) for i, (a, sa, ea) in enumerate(spans)
                   for (b, sb, eb) in spans[i + 1:] if sa < eb and sb < ea]
    assert overlapping, [(t.task_id, t.map_index, t.start_date, t.end_date) for t, _, _ in spans]


def test_tables_equal_a_serial_run(airflow_run: dict[str, Any], spark: Any, tmp_path_factory: pytest.TempPathFactory,
                                   s3_server: S3Server) -> None:
    import dataclasses

    from binlake.pipeline_tasks import ChainBrokenError, discover, run_spark_step

    cfg = airflow_run["config"]
    serial_wh = tmp_path_factory.mktemp("serial") / "warehouse"
    serial = dataclasses.replace(cfg, warehouse=str(serial_wh))
    for source in SOURCES:
        discover(source, "serial", cfg=serial)
        for step in ("decode", "reconcile", "data_checks"):
            try:
                run_spark_step(step, source, "serial", serial)
            except ChainBrokenError:
                assert source == "gappy" and step == "reconcile"
    expected = warehouse_digests(serial.warehouse, ALL_TABLES)
    assert expected["meta.ingested_files"].rows == 11  # 4 + 4 + 3 files
    assert warehouse_digests(cfg.warehouse, ALL_TABLES) == expected
