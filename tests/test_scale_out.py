"""binlake as users deploy it at scale: Airflow's real services driving a Spark standalone cluster.

Everything runs on loopback, started by this module and stopped at its end:

* the S3 API server (moto, server mode) holding the archive of two sources - ``alpha`` (the real
  MariaDB 10.11 chain) and ``gappy`` (the same chain without binlog.000003) - and the warehouse,
  written over ``s3a://`` (executors never touch the driver's disk);
* a Spark standalone cluster from the installed pyspark: a master and two workers of 1 core and
  1 GiB, executors in their own JVMs with their own Python workers, the jars referenced in place
  on every worker (``jars_on_workers``), the repo's packages shipped as ``--py-files``;
* Airflow 3's ``scheduler``, ``dag-processor`` and ``api-server`` (SQLite, LocalExecutor with 2
  parallel task slots), the project's ``dags/`` parsed by the real dag-processor, ``[spark] mode =
  "submit"``: every Spark step is ``spark-submit spark_jobs/__main__.py`` through ``spark_default``.

One nightly run, triggered through the REST API, with one Spark worker SIGKILLed as soon as the
first ``decode`` application has an executor: the healthy sources still succeed (Spark re-runs
the lost tasks on the other worker, or Airflow's retry of ``decode`` re-runs the step), ``gappy``
fails naming its GAP, tasks of different sources ran at the same time, and every table (gold
included) equals the one a serial local-mode run writes from the same archive. Finally no
process that the module started is left. (One run for both the equality and the worker loss:
each cluster run costs minutes of CPU on two cores, and a run that survives a lost worker with
identical tables proves the kill-free case too.)
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from conftest import TEST_CODEGEN_OFF

from binlake.config import REPO_ROOT, BinlakeConfig, load_config
from binlake_testing.airflow_services import AirflowServices, TaskInstanceInfo
from binlake_testing.configs import s3_lake_config_lines
from binlake_testing.processes import SHORT_JVM_OPTIONS
from binlake_testing.s3server import S3Server, free_port
from binlake_testing.spark_cluster import SparkStandaloneCluster, package_zip
from binlake_testing.table_digest import TableDigest, delta_table_digest, warehouse_digests
from spark_jobs.schemas import ALL_TABLES
from tests._chain_util import MARIADB_FILES, read_fixture

RUN_TIMEOUT = float(os.environ.get("BINLAKE_SCALE_OUT_RUN_TIMEOUT", "1800"))
pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.cluster, pytest.mark.timeout(2700)]

BUCKET = "binlake-scale-out"
#: two sources fill Airflow's two task slots, so their tasks run side by side; a third (a second
#: healthy copy of the chain) only queued behind them and cost three more Spark applications
SOURCES = ("alpha", "gappy")
HEALTHY = ("alpha",)
GAPPY_MISSING = "binlog.000003"
STEPS = ("decode", "reconcile", "gold", "data_checks")
#: columns that say when and where a run happened, not what it wrote: ``silver_version`` is the
#: version of silver.row_changes (shared by every source) that a gold run read, so it counts the
#: other sources' commits before it, which a parallel run orders differently from a serial one
VOLATILE_COLUMNS = frozenset({"run_id", "location", "updated_at", "silver_version"})


def _write_config(path: Path, *, endpoint: str, master: str, py_files: Path) -> BinlakeConfig:
    # every decode on the cluster's executors (the fixtures are small enough to decode in the task)
    lines = s3_lake_config_lines(bucket=BUCKET, state_dir=str(path.parent / "state"), endpoint=endpoint,
                                 sources=SOURCES, decode_in_process_bytes=0)
    lines += ["[spark]", 'mode = "submit"', f'master = "{master}"', "shuffle_partitions = 2", "ui_enabled = false",
              "jars_on_workers = true", "",
              # gold's replays as Spark jobs on the cluster (the fixture's tables are small enough for the task)
              "[gold]", "in_process_changes = 0", "",
              "[spark.conf]", '"spark.executor.memory" = "512m"', '"spark.executor.cores" = "1"',
              f'"spark.submit.pyFiles" = "{py_files}"', '"spark.task.maxFailures" = "4"',
              # one core per application: two Airflow tasks' applications share the two workers
              # instead of the first one taking both and the second one waiting
              '"spark.cores.max" = "1"',
              # short-lived JVMs: the C1 compiler alone halves their CPU (measured 24-28 vs 49-52
              # CPU-s for a small Delta session); see docs/operations.md
              f'"spark.driver.extraJavaOptions" = "{SHORT_JVM_OPTIONS}"',
              f'"spark.executor.extraJavaOptions" = "{SHORT_JVM_OPTIONS}"',
              # the test sessions' interpreted expressions (tests/conftest.py, TEST_CODEGEN_OFF)
              *(f'"{key}" = "{value}"' for key, value in TEST_CODEGEN_OFF.items()), ""]
    path.write_text("\n".join(lines))
    return load_config(path)


def _digests(cfg: BinlakeConfig) -> dict[str, TableDigest]:
    """Every table of the warehouse, the gold tables named by meta.gold_status included."""
    out = warehouse_digests(cfg.warehouse, ALL_TABLES, cfg.s3, VOLATILE_COLUMNS)
    base = cfg.warehouse.rstrip("/")
    for name in ("silver/schema_history", "meta/gold_status"):
        out[name] = delta_table_digest(name, f"{base}/{name}", cfg.s3, VOLATILE_COLUMNS)
    from binlake.lake.delta_tables import open_delta_table

    status_table = open_delta_table(f"{base}/meta/gold_status", cfg.s3)
    assert status_table is not None, "meta.gold_status was not written"
    status = status_table.to_pyarrow_table()
    for name in sorted(set(status.column("gold_table").to_pylist())):
        out[f"gold.{name}"] = delta_table_digest(f"gold.{name}", f"{base}/gold/{name}", cfg.s3, VOLATILE_COLUMNS)
    return out


@dataclasses.dataclass
class Stack:
    """The running services of this module and what they were configured with."""

    cfg: BinlakeConfig
    cluster: SparkStandaloneCluster
    airflow: AirflowServices
    started_pids: set[int] = dataclasses.field(default_factory=set)

    def remember_processes(self) -> None:
        """Every process the cluster and Airflow run now (services, task runners, drivers, executors)."""
        for pid in self.cluster.pids() + self.airflow.pids():
            self.started_pids.add(pid)
            try:
                self.started_pids.update(c.pid for c in psutil.Process(pid).children(recursive=True))
            except psutil.Error:
                pass

    def stop(self) -> None:
        self.remember_processes()
        self.airflow.stop()
        self.cluster.stop()


@pytest.fixture(scope="module")
def stack(s3_server: S3Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    client = s3_server.client()
    client.create_bucket(Bucket=BUCKET)
    for source in SOURCES:
        for name in MARIADB_FILES:
            if not (source == "gappy" and name == GAPPY_MISSING):
                client.put_object(Bucket=BUCKET, Key=f"archive/{source}/{name}", Body=read_fixture(name))
    tmp = tmp_path_factory.mktemp("scale-out")
    # the cluster's JVMs start while Airflow migrates its database and starts its services (each
    # waits on its own processes): the master's port is chosen first, Airflow's config names it
    cluster = SparkStandaloneCluster(tmp / "cluster", workers=2, cores=1, memory="1g", master_port=free_port(),
                                     extra_env={"SPARK_DAEMON_JAVA_OPTS": SHORT_JVM_OPTIONS})
    started: list[BaseException | None] = []

    def start_cluster() -> None:
        try:
            cluster.start()
            started.append(None)
        except BaseException as exc:  # noqa: BLE001 - raised in the fixture's thread below
            started.append(exc)
    starter = threading.Thread(target=start_cluster, name="spark-cluster-start")
    starter.start()
    try:
        cfg = _write_config(tmp / "binlake.toml", endpoint=s3_server.endpoint_url, master=cluster.master_url,
                            py_files=package_zip(REPO_ROOT, tmp / "binlake-py.zip"))
        venv_bin = str(Path(sys.executable).parent)
        env = {
            "BINLAKE_CONFIG": str(cfg.config_path), "PYTHONPATH": str(REPO_ROOT), "SPARK_LOCAL_IP": "127.0.0.1",
            "PATH": venv_bin + os.pathsep + os.environ.get("PATH", ""),  # spark-submit of the pip pyspark
            "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            # the DAG files do not change during the module: parsed once (and again every 10 min,
            # not every 30 s as by default, each parse a process importing the DAGs)
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "600",
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({
                "conn_type": "spark", "host": "spark://127.0.0.1", "port": cluster.master_port,
                "extra": {"deploy-mode": "client"}}),
        }
        airflow = AirflowServices(home=tmp / "airflow", dags_folder=REPO_ROOT / "dags", extra_env=env, parallelism=2)
        airflow.start()
    except BaseException:
        starter.join()
        cluster.stop()
        raise
    starter.join()
    failed = started[0] if started else RuntimeError("the Spark cluster's start did not finish")
    if failed is not None:
        airflow.stop()
        cluster.stop()
        raise failed
    stack = Stack(cfg, cluster, airflow)
    try:
        airflow.wait_for_dag("binlake_nightly")
        airflow.wait_for_dag("binlake_backfill")
        yield stack
    finally:
        stack.stop()


def _serial_digests(cfg: BinlakeConfig, folder: Path) -> dict[str, TableDigest]:
    """The same archive through the same steps, one after the other, in-process (local mode, the
    worker's session), into a warehouse and a state folder of its own."""
    from binlake.runs import ChainBrokenError, discover
    from spark_jobs.steps import run_data_checks, run_spark_step

    local = dataclasses.replace(cfg, warehouse=str(folder / "warehouse"), state_dir=str(folder / "state"),
                                spark=dataclasses.replace(cfg.spark, mode="local", master="local[2]"))
    for source in SOURCES:
        discover(source, "serial", cfg=local)
        for step in ("decode", "reconcile", "gold"):
            if source == "gappy" and step == "gold":
                continue  # the DAG skips gold after a failed reconcile
            try:
                run_spark_step(step, source, "serial", local)
            except ChainBrokenError:
                assert (source, step) == ("gappy", "reconcile")
        if source == "gappy":
            continue  # the DAG never checks a source whose reconcile failed (upstream_failed)
        run_data_checks(source, "serial", local)
    return _digests(local)


class _Serial(threading.Thread):
    """:func:`_serial_digests` in a thread: it runs while the cluster runs the nightly, whose tasks
    leave the two cores idle for seconds at a time (Airflow starting task processes, polling)."""

    def __init__(self, cfg: BinlakeConfig, folder: Path) -> None:
        super().__init__(name="serial-local-run", daemon=True)
        self.cfg, self.folder = cfg, folder
        self.digests: dict[str, TableDigest] | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.digests = _serial_digests(self.cfg, self.folder)
        except BaseException as exc:  # noqa: BLE001 - raised by result() in the fixture's thread
            self.error = exc

    def result(self) -> dict[str, TableDigest]:
        self.join()
        if self.error is not None:
            raise self.error
        assert self.digests is not None
        return self.digests


@pytest.fixture(scope="module")
def serial_digests(nightly: dict[str, Any]) -> dict[str, TableDigest]:
    """The serial local-mode run's tables (run while the nightly ran, see :func:`nightly`)."""
    digests: dict[str, TableDigest] = nightly["serial"].result()
    assert digests["meta.ingested_files"].rows == 7  # 4 + 3 files
    assert any(name.startswith("gold.alpha__") for name in digests)
    return digests


@pytest.fixture(scope="module")
def nightly(stack: Stack, spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The nightly run, with the worker running a task of the first decode application SIGKILLed;
    meanwhile this process runs the serial local-mode reference (``spark``: the worker's session)."""
    t0 = time.monotonic()
    run_id = stack.airflow.trigger("binlake_nightly")
    serial = _Serial(stack.cfg, tmp_path_factory.mktemp("serial"))
    serial.start()
    killed_during, victim = stack.cluster.wait_for_running_task("binlake-decode", timeout=RUN_TIMEOUT)
    stack.remember_processes()
    stack.cluster.kill_worker(victim)
    # the decode application goes on without that worker; once it is done a replacement worker
    # joins (as a cluster manager would restart it), so the rest of the run has two cores again
    stack.cluster.wait_for_app_end(killed_during, timeout=RUN_TIMEOUT)
    stack.cluster.add_worker(2)
    state = stack.airflow.wait_for_run("binlake_nightly", run_id, timeout=RUN_TIMEOUT)
    tis = stack.airflow.task_instances("binlake_nightly", run_id)
    print(f"\nnightly run on the cluster: {state} in {time.monotonic() - t0:.0f}s; worker {victim} killed during "
          f"{killed_during}; decode attempts: {[t.try_number for t in tis if t.task_id.endswith('decode')]}")
    return {"run_id": run_id, "state": state, "tis": tis, "killed_during": killed_during, "serial": serial}


def _states(tis: list[TaskInstanceInfo], sources: tuple[str, ...]) -> dict[tuple[str, str], str | None]:
    return {(sources[t.map_index] if t.map_index >= 0 else "-", t.task_id.rsplit(".", 1)[-1]): t.state
            for t in tis}


def test_nightly_run_healthy_sources_succeed_and_the_gap_is_named(stack: Stack, nightly: dict[str, Any]) -> None:
    states = _states(nightly["tis"], SOURCES)
    assert nightly["state"] == "failed", states  # the summary fails the run: gappy has a GAP
    for source in HEALTHY:
        for step in STEPS:
            assert states[(source, step)] == "success", (source, step, states)
    assert states[("gappy", "decode")] == "success"
    assert states[("gappy", "reconcile")] == "failed"
    assert states[("gappy", "gold")] == "upstream_failed"
    assert states[("gappy", "data_checks")] == "upstream_failed"  # never "success" after a failed reconcile
    assert states[("-", "discover")] == "success" and states[("-", "summary")] == "failed"
    labels = {(t.task_id.rsplit(".", 1)[-1], t.map_index): t.rendered_map_index for t in nightly["tis"]}
    assert labels[("reconcile", 0)] == "alpha" and labels[("decode", 1)] == "gappy", labels  # names, not 0/1
    log = stack.airflow.task_log("binlake_nightly", nightly["run_id"], "per_source.reconcile", SOURCES.index("gappy"))
    assert "source gappy: binlog chain broken" in log
    assert f"GAP (missing files {GAPPY_MISSING}" in log


def test_nightly_run_used_the_cluster_and_ran_tasks_in_parallel(stack: Stack, nightly: dict[str, Any]) -> None:
    apps = stack.cluster.state()["completedapps"]
    names = [a["name"] for a in apps]
    # reconcile and data_checks need no Spark (delta-rs in the task process); decode and gold do
    # here (decode_in_process_bytes and in_process_changes are 0); a decode re-run by Airflow's retry
    # would be a 3rd decode app
    assert set(names) == {"binlake-decode", "binlake-gold"}, names
    assert names.count("binlake-decode") >= 2, names
    assert names.count("binlake-gold") == 1, names
    spans = [(t, dt.datetime.fromisoformat(t.start_date), dt.datetime.fromisoformat(t.end_date))
             for t in nightly["tis"] if t.start_date and t.end_date]
    overlapping = [(a.task_id, a.map_index, b.task_id, b.map_index) for i, (a, sa, ea) in enumerate(spans)
                   for (b, sb, eb) in spans[i + 1:] if sa < eb and sb < ea and a.map_index != b.map_index]
    assert overlapping, [(t.task_id, t.map_index, t.start_date, t.end_date) for t, _, _ in spans]


def test_cluster_tables_equal_a_serial_local_run(stack: Stack, nightly: dict[str, Any],
                                                 serial_digests: dict[str, TableDigest]) -> None:
    assert _digests(stack.cfg) == serial_digests


def test_a_worker_killed_mid_decode_is_survived(stack: Stack, nightly: dict[str, Any]) -> None:
    state = stack.cluster.state()
    workers = [w["state"] for w in state["workers"]]
    assert workers.count("ALIVE") == 2, workers  # the survivor and the replacement
    logs = [stack.airflow.task_log("binlake_nightly", nightly["run_id"], "per_source.decode", i)
            for i in range(len(SOURCES))]
    hit = [log for log in logs if nightly["killed_during"] in log]
    # Spark's scheduler on the driver: "Lost executor 0 on 127.0.0.1: worker lost: ... got disassociated"
    assert len(hit) == 1 and "Lost executor" in hit[0], "the decode application never saw its executor lost"
    apps = {a["id"]: a for a in state["completedapps"]}
    assert apps[nightly["killed_during"]]["name"] == "binlake-decode"
    decode = [t for t in nightly["tis"] if t.task_id == "per_source.decode"]
    assert [t.state for t in decode] == ["success"] * len(SOURCES), decode


def test_every_started_process_is_stopped(stack: Stack) -> None:
    stack.stop()
    assert stack.started_pids
    alive = []
    for pid in stack.started_pids:
        try:
            proc = psutil.Process(pid)
            if proc.status() != psutil.STATUS_ZOMBIE:
                alive.append((pid, " ".join(proc.cmdline())[:200]))
        except psutil.NoSuchProcess:
            pass
    assert not alive

