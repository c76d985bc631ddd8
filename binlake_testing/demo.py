"""`make demo`: the nightly DAG end to end on the bundled sample binlogs, no manual step.

1. start a real S3-API server on loopback (moto, server mode);
2. upload the sample binlog chains (package data: binlake_testing/samples/), one prefix per source server;
3. write a demo config (sources on that bucket, warehouse under .state/demo/warehouse);
4. migrate a SQLite Airflow metadata DB under .state/airflow and run the REAL DAG from dags/
   with ``dag.test()`` (tasks run in this process; Spark is local);
5. print a summary via SQL over the Delta tables.

The local-Airflow helpers (:func:`~orchestration.run_local.airflow_env`, ``migrate_airflow_db``,
``load_dag``) are ``binlake run``'s, so the demo, the tests and ``binlake run`` start Airflow the same
way; :func:`run_dag` adds the per-task states and XComs the demo and the tests print. Airflow reads its
settings when first imported: put :func:`airflow_env`'s result in ``os.environ`` before importing
anything from ``airflow``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.resources
import importlib.util
import logging
import os
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from binlake.config import REPO_ROOT, BinlakeConfig, load_config
from binlake.errors import BinlakeError
from orchestration.run_local import airflow_env, dags_folder, load_dag, migrate_airflow_db

DEMO_BUCKET = "binlake-demo"
NIGHTLY_DAG_ID = "binlake_nightly"
#: The sample binlogs, shipped as package data (no git checkout needed).
SAMPLES = Path(str(importlib.resources.files("binlake_testing") / "samples"))


@dataclass(frozen=True)
class DemoSource:
    """A sample source server: its name and (file, object name) pairs forming one chain.

    A file is relative to :data:`SAMPLES` or absolute (generated at demo time).
    """

    name: str
    files: tuple[tuple[str, str], ...]


DEMO_SOURCES: tuple[DemoSource, ...] = (
    DemoSource("mariadb-10.11", tuple(
        (f"mariadb-10.11/binlog.00000{i}", f"binlog.00000{i}") for i in range(1, 5)
    )),
    # Only the second 5.6 sample file: the two samples are not one server's chain (the second's
    # PREVIOUS_GTIDS holds 28 GTIDs the first never logged), which the pipeline rightly reports as
    # a GAP and fails on. Alone, it is a consistent archive start (closed by STOP).
    DemoSource("mysql-5.6", (
        ("mysql-5.6/mysql-bin.000002", "mysql-bin.000002"),
    )),
)

#: A source written by binlake's own writer (binlake_testing.synthetic): MySQL 8.4 with two server UUIDs,
#: a GTID tag, zstd TRANSACTION_PAYLOADs, and a last file still in use (left for the next night).
SYNTHETIC_SOURCE_NAME = "mysql-8.4-synthetic"


def synthetic_demo_source(work_dir: Path) -> DemoSource:
    """Generate the synthetic chain into ``work_dir`` and describe it as a demo source."""
    from binlake_testing.synthetic import Faults, SyntheticConfig, generate

    truth = generate(str(work_dir), SyntheticConfig(
        bytes_per_server=700 << 10, max_binlog_size=256 << 10, server_version="8.4.3",
        uuids=2, tags=("nightly",), compression=True, rows_per_table=200,
        faults=Faults(in_use_last=True)))
    (source,) = truth["sources"].values()
    return DemoSource(SYNTHETIC_SOURCE_NAME, tuple(
        (str(work_dir / f["object"]), f["name"]) for f in source["files"] if f["present"]))


# (title, SQL). Queries over tables that do not exist yet are reported as "not produced yet".
SUMMARY_QUERIES: tuple[tuple[str, str], ...] = (
    ("Files ingested per source",
     "SELECT source, count(*) AS files, sum(size) AS bytes FROM meta.ingested_files GROUP BY source ORDER BY source"),
    ("Events per type",
     "SELECT event_type, count(*) AS events FROM bronze.events GROUP BY event_type ORDER BY events DESC, event_type"),
    ("Transactions",
     "SELECT source, count(*) AS transactions, sum(CASE WHEN complete THEN 0 ELSE 1 END) AS incomplete "
     "FROM silver.transactions GROUP BY source ORDER BY source"),
    ("Row changes per table",
     "SELECT db, table_name, operation, count(*) AS rows FROM silver.row_changes "
     "GROUP BY db, table_name, operation ORDER BY db, table_name, operation"),
    ("GTID coverage",
     "SELECT source, flavor, sid, tag, gtid_set, transactions FROM meta.gtid_coverage ORDER BY source, sid, gno_start"),
    ("GTID reconciliation",
     "SELECT source, status, count(*) AS files FROM meta.gtid_reconciliation GROUP BY source, status ORDER BY source, status"),
)


def say(message: str, start: float | None = None) -> None:
    """Progress line on stdout (flushed, so it shows while Spark/Airflow work)."""
    elapsed = f" [{time.monotonic() - start:5.1f}s]" if start is not None else ""
    print(f"[demo]{elapsed} {message}", flush=True)


@dataclass
class DagRunResult:
    """Outcome of :func:`run_dag`: run state, per-task states, XCom return values."""

    state: str
    task_states: dict[str, str]
    xcoms: dict[str, Any] = field(default_factory=dict)
    run_id: str = ""

    @property
    def success(self) -> bool:
        return self.state == "success" and all(s in ("success", "skipped") for s in self.task_states.values())


def run_dag(dag: Any, run_conf: dict[str, Any] | None = None) -> DagRunResult:
    """Run one DagRun through Airflow's ``dag.test()`` (scheduler loop + tasks in this process)."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    dr = dag.test(run_conf=run_conf)
    with create_session() as session:
        tis = session.query(TaskInstance).filter(
            TaskInstance.dag_id == dr.dag_id, TaskInstance.run_id == dr.run_id
        ).all()
        states = {ti.task_id: str(getattr(ti.state, "value", ti.state)) for ti in tis}
        xcoms: dict[str, Any] = {}
        for row in session.query(XComModel).filter(
            XComModel.dag_id == dr.dag_id, XComModel.run_id == dr.run_id, XComModel.key == "return_value"
        ).all():
            xcoms[row.task_id] = XComModel.deserialize_value(row)
    return DagRunResult(state=str(getattr(dr.state, "value", dr.state)), task_states=states, xcoms=xcoms,
                        run_id=dr.run_id)


# --------------------------------------------------------------------------- the demo

def upload_demo_sources(client: Any, bucket: str = DEMO_BUCKET,
                        sources: Sequence[DemoSource] = DEMO_SOURCES) -> dict[str, int]:
    """Create ``bucket`` and upload each source's chain under ``<source>/``; returns files per source."""
    existing = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
    if bucket not in existing:
        client.create_bucket(Bucket=bucket)
    counts: dict[str, int] = {}
    for src in sources:
        for fixture, object_name in src.files:
            client.upload_file(str(SAMPLES / fixture), bucket, f"{src.name}/{object_name}")
        counts[src.name] = len(src.files)
    return counts


def write_demo_config(path: Path, *, endpoint: str, warehouse: Path, state_dir: Path,
                      sources: Sequence[DemoSource] = DEMO_SOURCES, bucket: str = DEMO_BUCKET,
                      jars_dir: Path | None = None) -> Path:
    """A config file like conf/binlake.toml, pointing at the loopback bucket and a local warehouse."""
    lines = [
        "# Generated by binlake_testing.demo for one demo run; see conf/binlake.toml for the documented fields.",
        "[pipeline]",
        f'warehouse = "{warehouse}"',
        f'state_dir = "{state_dir}"',
        f'jars_dir = "{jars_dir or default_jars_dir()}"',
        'nightly_cron = "0 2 * * *"',
        "",
    ]
    for src in sources:
        lines += ["[[sources]]", f'name = "{src.name}"', f'uri = "s3://{bucket}/{src.name}/"', ""]
    lines += [
        "[s3]",
        f'endpoint_url = "{endpoint}"',
        "path_style_access = true",
        'region = "us-east-1"',
        "max_attempts = 3",
        "",
        "[spark]",
        'mode = "local"',
        'master = "local[2]"',
        "shuffle_partitions = 4",
        "ui_enabled = false",
        'driver_memory = "2g"',
        "",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))
    return path


def print_summary(cfg: BinlakeConfig, out: Any = None) -> dict[str, int]:
    """Register the tables and print each summary query's result; returns rows per section."""
    from binlake.sql.values import format_table
    from spark_jobs.session import spark_session
    from spark_jobs.spark_logs import relay_jvm_stderr
    from spark_jobs.sql_engine import quiet_pyspark_sql_errors, register_tables, run_query

    out = out or sys.stdout
    counts: dict[str, int] = {}
    quiet_pyspark_sql_errors()
    with contextlib.ExitStack() as stack:
        with relay_jvm_stderr():  # the JVM's start-up lines to the log (a small night's DAG started none)
            spark = stack.enter_context(spark_session(cfg, "binlake-demo-summary", ui=False))
        registered = set(register_tables(spark, cfg))
        print("\n=== binlake demo summary ===", file=out)
        print(f"warehouse: {cfg.warehouse}", file=out)
        print(f"tables: {', '.join(sorted(registered)) or '(none)'}", file=out)
        for title, query in SUMMARY_QUERIES:
            print(f"\n-- {title}", file=out)
            missing = [t for t in _tables_in(query) if t not in registered]
            if missing:
                print(f"   (not produced yet: {', '.join(missing)})", file=out)
                continue
            try:
                result = run_query(spark, query, max_rows=50)
            except Exception as exc:  # noqa: BLE001 - e.g. a column the current jobs do not write yet
                print(f"   (query failed: {str(exc).strip().splitlines()[0]})", file=out)
                continue
            counts[title] = len(result.rows)
            print(format_table(result.columns, result.rows), file=out)
    out.flush()
    return counts


def _tables_in(query: str) -> list[str]:
    from binlake.lake.tables import TABLES

    return [t.full_name for t in TABLES if t.full_name in query]


def _in_checkout() -> bool:
    """True when binlake runs from a git checkout (its dags/ beside the packages), not a wheel."""
    return (REPO_ROOT / "dags").is_dir() and (REPO_ROOT / "pyproject.toml").is_file()


class _SayHandler(logging.Handler):
    """Shows the Spark steps' progress (logger ``binlake.progress``): a rich bar per step on a
    terminal, a demo line per report otherwise (pipes and CI logs would get escape codes)."""

    def __init__(self, start: float, bars: Any | None = None) -> None:
        super().__init__(logging.INFO)
        self.start = start
        self.bars = bars
        self.tasks: dict[str, Any] = {}

    def emit(self, record: logging.LogRecord) -> None:
        seen = getattr(record, "step_progress", None)
        if self.bars is None or seen is None:
            say(f"  {record.getMessage()}", self.start)
            return
        label = f"{seen.step} {seen.source}"
        if label not in self.tasks:
            self.tasks[label] = self.bars.add_task(label, total=seen.tasks_total, detail="")
        detail = record.getMessage().split(": ", 1)[-1]
        self.bars.update(self.tasks[label], completed=seen.tasks_done, total=seen.tasks_total, detail=detail)


def _terminal_bars() -> Any | None:
    """A rich Progress on an interactive terminal, else None."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn

    console = Console()
    if not console.is_terminal:
        return None
    return Progress(TextColumn("[demo]   {task.description}"), BarColumn(), TextColumn("{task.fields[detail]}"),
                    console=console, transient=False)


@contextlib.contextmanager
def progress_on_terminal(start: float) -> Iterator[None]:
    """While the DAG runs, show each Spark step's progress (every few seconds) on the terminal
    too: a decode otherwise shows nothing for minutes."""
    logger = logging.getLogger("binlake.progress")
    bars = _terminal_bars()
    handler, level = _SayHandler(start, bars), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        if bars is None:
            yield
        else:
            with bars:
                yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


class _ToRootHandlers(logging.Handler):
    """Hands a record to the root logger's handlers (the terminal), as propagation would."""

    def emit(self, record: logging.LogRecord) -> None:
        for handler in logging.getLogger().handlers:
            if record.levelno >= handler.level:
                handler.handle(record)


@contextlib.contextmanager
def spark_lines_to_file(path: Path) -> Iterator[None]:
    """While the DAG runs, the Spark JVM's own lines (logger ``spark``, at INFO and up) go to the
    demo's log file; its warnings and errors reach the terminal too, as before. The WARNs every
    healthy run prints arrive at INFO (spark_jobs.spark_logs.NOT_FAULTS): file only."""
    logger = logging.getLogger("spark")
    to_file = logging.FileHandler(path, encoding="utf-8")
    to_file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    up = _ToRootHandlers(logging.WARNING)
    level, propagate = logger.level, logger.propagate
    logger.addHandler(to_file)
    logger.addHandler(up)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(to_file)
        logger.removeHandler(up)
        logger.setLevel(level)
        logger.propagate = propagate
        to_file.close()


def default_jars_dir() -> Path:
    """``$BINLAKE_JARS_DIR``, else a checkout's ``.jars/`` (what ``make setup`` fills)."""
    return Path(os.environ.get("BINLAKE_JARS_DIR") or (REPO_ROOT / ".jars"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="binlake demo", description="end-to-end demo on the bundled binlogs")
    # an installed wheel has no checkout: state goes under the working directory, never site-packages
    default_state = REPO_ROOT / ".state" if _in_checkout() else Path.cwd() / ".binlake-demo"
    parser.add_argument("--state-dir", default=str(default_state), help="where demo state goes")
    parser.add_argument("--dags-folder", default=str(dags_folder()),
                        help="the DAG files to run (default: the checkout's dags/ or the installed copy)")
    parser.add_argument("--jars-dir", default=str(default_jars_dir()),
                        help="the Delta / hadoop-aws jars (default: $BINLAKE_JARS_DIR, else the checkout's .jars/)")
    parser.add_argument("--keep", action="store_true", help="keep the previous demo warehouse (default: fresh)")
    args = parser.parse_args(list(argv) if argv is not None else None)
    dag_files = Path(args.dags_folder).resolve()
    if not (dag_files / f"{NIGHTLY_DAG_ID}.py").is_file():
        raise BinlakeError(f"binlake demo runs the DAG file {NIGHTLY_DAG_ID}.py, not found in {dag_files}: "
                           "run it from a clone of the repository, or pass --dags-folder PATH")
    from spark_jobs.session import jar_paths

    jar_paths(args.jars_dir)  # a missing jar is one clear error now, not a JVM failure minutes later

    t0 = time.monotonic()
    state = Path(args.state_dir).resolve()
    demo_dir = state / "demo"
    warehouse = demo_dir / "warehouse"
    airflow_home = state / "airflow"
    if not args.keep:
        # A fresh metadata DB per demo, like the fresh warehouse: dag.test() runs no scheduler, so
        # nothing would ever retire assets or runs left by an earlier demo of another DAG version
        # (an asset renamed since then stays active and blocks the new one).
        (airflow_home / "airflow.db").unlink(missing_ok=True)
    if not args.keep and demo_dir.exists():
        shutil.rmtree(demo_dir)
    demo_dir.mkdir(parents=True, exist_ok=True)

    from binlake_testing.s3server import DUMMY_AWS_ENV, S3Server

    say("starting the S3-API server (moto, server mode) on 127.0.0.1", t0)
    server = S3Server(mode="thread").start()
    try:
        say(f"S3 endpoint {server.endpoint_url}; uploading sample binlog chains to s3://{DEMO_BUCKET}/", t0)
        os.environ.update(DUMMY_AWS_ENV)
        say("generating a MySQL 8.4 chain with binlake's own writer (tags, zstd payloads, open last file)", t0)
        sources = (*DEMO_SOURCES, synthetic_demo_source(demo_dir / "synthetic"))
        counts = upload_demo_sources(server.client(), sources=sources)
        for name, n in counts.items():
            say(f"  s3://{DEMO_BUCKET}/{name}/  {n} files", t0)
        cfg_path = write_demo_config(demo_dir / "binlake.toml", endpoint=server.endpoint_url,
                                     warehouse=warehouse, state_dir=demo_dir, sources=sources,
                                     jars_dir=Path(args.jars_dir).resolve())
        os.environ["BINLAKE_CONFIG"] = str(cfg_path)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        from orchestration.lineage import airflow_lineage_env

        # [lineage] before Airflow is imported: its OpenLineage provider reads them as it loads
        cfg = load_config(cfg_path)
        env = {**airflow_env(airflow_home, dag_files), **airflow_lineage_env(cfg)}
        os.environ.update(env)
        say(f"migrating the Airflow metadata DB (SQLite, {airflow_home})", t0)
        migrate_airflow_db(env)
        say(f"running DAG {NIGHTLY_DAG_ID} through Airflow (dag.test(); Spark local[2])", t0)
        dag = load_dag(NIGHTLY_DAG_ID, dag_files)
        with progress_on_terminal(t0), spark_lines_to_file(demo_dir / "demo.log"):
            result = run_dag(dag)
        for task_id, task_state in sorted(result.task_states.items()):
            say(f"  task {task_id}: {task_state}", t0)
        if not result.success:
            say(f"DAG run {result.run_id} ended {result.state}; task logs are under {airflow_home}/logs", t0)
            return 1
        say(f"DAG run {result.run_id}: success", t0)
        with spark_lines_to_file(demo_dir / "demo.log"):
            print_summary(cfg)
        say(f"done in {time.monotonic() - t0:.0f}s. Query more: BINLAKE_CONFIG={cfg_path} "
            f"{'.venv/bin/' if _in_checkout() else ''}binlake sql \"SHOW TABLES IN meta\" "
            "(the S3 server is gone; the warehouse stays)")
        return 0
    finally:
        server.stop()


if __name__ == "__main__":
    raise SystemExit(main())
