"""Both binlake DAGs run for real through Airflow (dag.test(), SQLite metadata DB) against the
loopback S3 server, with Spark in-process and Delta tables in a tmp warehouse.

One module, one story (each night is a real DAG run; kept to five runs on 2 cores):

1. night 1, three sources: ``good`` (fixture chain, last file still open), ``gappy`` (a middle
   file missing) and ``hostile`` (a ROTATE naming ``../``). The run fails; ``good`` completes
   anyway (per-source mapping); the gap is named in the task log, recorded as GAP in
   meta.gtid_reconciliation and alerted; the hostile ROTATE is rejected.
2. night 2, ``good`` only: nothing new is ingested.
3. the open file rotates (closed version uploaded) and a new file appears: night 3 ingests
   exactly those.
4. a backfill ``reprocess`` over binlog.000002..binlog.000003 re-ingests exactly those files and
   leaves every table's rows identical; a ``dry_run`` backfill writes nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from binlake.testing.s3server import S3Server
from tests._chain_util import MARIADB_FILES, make_open, read_fixture, with_rotate_to

pytestmark = [pytest.mark.airflow, pytest.mark.spark]

BUCKET = "binlake-dags-test"
DATA_TABLES = ("bronze.events", "bronze.quarantine", "silver.transactions", "silver.row_changes",
               "silver.statements", "meta.binlog_files", "meta.gtid_coverage", "meta.gtid_reconciliation")


def _write_config(path: Path, endpoint: str, warehouse: Path, state: Path, sources: list[str]) -> Path:
    jars = os.environ.get("BINLAKE_JARS_DIR", str(Path(__file__).resolve().parent.parent / ".jars"))
    lines = ["[pipeline]", f'warehouse = "{warehouse}"', f'state_dir = "{state}"', f'jars_dir = "{jars}"',
             'nightly_cron = "0 3 * * *"', ""]
    for s in sources:
        lines += ["[[sources]]", f'name = "{s}"', f'uri = "s3://{BUCKET}/{s}/"', ""]
    lines += ["[s3]", f'endpoint_url = "{endpoint}"', "path_style_access = true", "max_attempts = 3", "",
              "[spark]", 'mode = "local"', 'master = "local[2]"', "shuffle_partitions = 2", "ui_enabled = false",
              'driver_memory = "1g"', ""]
    path.write_text("\n".join(lines))
    return path


def _put(client: Any, source: str, name: str, data: bytes) -> None:
    client.put_object(Bucket=BUCKET, Key=f"{source}/{name}", Body=data)


def _task_logs(airflow_home: Path, dag_id: str, run_id: str) -> str:
    out = []
    for p in sorted(airflow_home.glob(f"logs/dag_id={dag_id}/run_id={run_id}/**/*.log")):
        out.append(p.read_text(errors="replace"))
    return "\n".join(out)


def _states_by_index(dag_id: str, run_id: str) -> dict[tuple[str, int], str]:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        tis = session.query(TaskInstance).filter(TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id).all()
        return {(ti.task_id, ti.map_index): str(getattr(ti.state, "value", ti.state)) for ti in tis}


def _xcoms(dag_id: str, run_id: str, task_id: str) -> list[Any]:
    """Return values of every map index of a (mapped) task, by map index."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.query(XComModel).filter(XComModel.dag_id == dag_id, XComModel.run_id == run_id,
                                               XComModel.task_id == task_id,
                                               XComModel.key == "return_value").all()
        return [XComModel.deserialize_value(r) for r in sorted(rows, key=lambda r: r.map_index)]


def _table_rows(spark: Any, cfg: Any, name: str) -> list[tuple]:
    from delta.tables import DeltaTable

    from binlake.tables import table_location

    path = table_location(cfg.warehouse, name)
    if not DeltaTable.isDeltaTable(spark, path):
        return []
    df = spark.read.format("delta").load(path)
    cols = sorted(c for c in df.columns if c != "run_id")
    return sorted((tuple(str(v) for v in r) for r in df.select(*cols).collect()))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, s3_server: S3Server) -> dict[str, Any]:
    from binlake.testing.demo import migrate_airflow_db

    tmp = tmp_path_factory.mktemp("dags")
    client = s3_server.client()
    client.create_bucket(Bucket=BUCKET)
    # good: the fixture chain, the last file still being written
    for name in MARIADB_FILES[:3]:
        _put(client, "good", name, read_fixture(name))
    _put(client, "good", "binlog.000004", make_open(read_fixture("binlog.000004")))
    # gappy: binlog.000003 never archived
    for name in ("binlog.000001", "binlog.000002", "binlog.000004"):
        _put(client, "gappy", name, read_fixture(name))
    # hostile: binlog.000002's ROTATE names ../binlog.000003 (CRC fixed, so it looks genuine)
    for name in MARIADB_FILES:
        data = read_fixture(name)
        if name == "binlog.000002":
            data = with_rotate_to(data, "../binlog.000003")
        _put(client, "hostile", name, data)
    migrate_airflow_db()
    return {"tmp": tmp, "client": client, "warehouse": tmp / "warehouse", "state": tmp / "state",
            "endpoint": s3_server.endpoint_url, "airflow_home": Path(os.environ["AIRFLOW_HOME"])}


def _dag(world: dict[str, Any], monkeypatch: pytest.MonkeyPatch, dag_id: str, sources: list[str]) -> Any:
    from binlake.config import load_config
    from binlake.testing.demo import load_dag

    path = _write_config(world["tmp"] / f"{dag_id}-{'-'.join(sources)}.toml", world["endpoint"], world["warehouse"],
                         world["state"], sources)
    monkeypatch.setenv("BINLAKE_CONFIG", str(path))
    world["cfg"] = load_config(path)
    return _load(dag_id)


def _load(dag_id: str) -> Any:
    from binlake.testing.demo import load_dag

    return load_dag(dag_id)


def test_nightly_and_backfill_through_airflow(world: dict[str, Any], spark: Any, monkeypatch: pytest.MonkeyPatch,
                                              capfd: pytest.CaptureFixture[str]) -> None:
    import time

    from binlake.testing.demo import run_dag
    from binlake.tables import table_location

    timings: dict[str, float] = {}

    # ---- night 1: three sources, two of them broken --------------------------------------
    dag = _dag(world, monkeypatch, "binlake_nightly", ["good", "gappy", "hostile"])
    assert dag.schedule if hasattr(dag, "schedule") else True
    assert dag.max_active_runs == 1 and not dag.catchup
    t0 = time.monotonic()
    r1 = run_dag(dag)
    timings["night1"] = time.monotonic() - t0
    assert r1.state == "failed", r1
    states = _states_by_index("binlake_nightly", r1.run_id)
    order = ["good", "gappy", "hostile"]
    good, gappy, hostile = (order.index(s) for s in order)
    for step in ("discover", "decode", "reconcile", "gold", "data_checks"):
        assert states[(f"per_source.{step}", good)] == "success", (step, states)
    assert states[("per_source.reconcile", gappy)] == "failed"
    assert states[("per_source.reconcile", hostile)] == "failed"
    assert states[("summary", -1)] == "failed"

    cfg = world["cfg"]
    ingested = spark.read.format("delta").load(table_location(cfg.warehouse, "meta.ingested_files"))
    files = {(r.source, r.file) for r in ingested.collect()}
    assert {f for s, f in files if s == "good"} == set(MARIADB_FILES[:3])  # open binlog.000004 left
    assert {f for s, f in files if s == "hostile"} == {"binlog.000001", "binlog.000003", "binlog.000004"}
    recon = spark.read.format("delta").load(table_location(cfg.warehouse, "meta.gtid_reconciliation"))
    gap_rows = [r for r in recon.where("source = 'gappy'").collect() if r.status == "GAP"]
    assert [r.file for r in gap_rows] == ["binlog.000004"]
    assert "binlog.000003" in gap_rows[0].missing_files

    # dag.test() runs the tasks in this process: their log lines go to stdout/stderr (and to
    # task log files when file logging is on)
    captured = capfd.readouterr()
    logs = captured.out + captured.err + _task_logs(world["airflow_home"], "binlake_nightly", r1.run_id)
    assert "binlog chain broken" in logs and "binlog.000003" in logs, logs[-3000:]
    assert "GAP: binlog.000003 is missing" in logs
    assert "hostile_rotate" in logs and "../binlog.000003" in logs
    alerts = [json.loads(line) for line in (world["state"] / "alerts.jsonl").read_text().splitlines()]
    assert any(a["task_id"] == "per_source.reconcile" and "binlog.000003" in a["reason"] for a in alerts)

    # ---- night 2: good only, nothing new -------------------------------------------------
    dag = _dag(world, monkeypatch, "binlake_nightly", ["good"])
    t0 = time.monotonic()
    r2 = run_dag(dag)
    timings["night2"] = time.monotonic() - t0
    assert r2.success, r2
    decoded, = _xcoms("binlake_nightly", r2.run_id, "per_source.decode")
    assert decoded["files"] == 0
    found, = _xcoms("binlake_nightly", r2.run_id, "per_source.discover")
    assert found["to_ingest"] == 0 and found["bytes_read"] < 8192  # ingested files not read again

    # ---- night 3: binlog.000004 rotated, binlog.000005 appeared (still open); a new source
    #      with a generated MySQL 8 chain (binlake.testing.synthetic) whose last file is still in use
    from binlake.config import S3Settings
    from binlake.testing.synthetic import Faults, SyntheticConfig, generate

    closed4 = with_rotate_to(read_fixture("binlog.000004"), "binlog.000005")
    _put(world["client"], "good", "binlog.000004", closed4)
    _put(world["client"], "good", "binlog.000005", make_open(read_fixture("binlog.000004")))
    truth = generate(f"s3://{BUCKET}/", SyntheticConfig(bytes_per_server=160 << 10, max_binlog_size=48 << 10,
                                                         faults=Faults(in_use_last=True), seed=3,
                                                         source_prefix="gen"),
                     s3_settings=S3Settings(endpoint_url=world["endpoint"], path_style_access=True))
    gen_files = truth["sources"]["gen1"]["files"]
    gen_closed = {f["name"] for f in gen_files if f["present"] and f["closing_event"] and not f["in_use"]}
    assert 2 <= len(gen_closed) < len(gen_files)
    dag = _dag(world, monkeypatch, "binlake_nightly", ["good", "gen1"])
    t0 = time.monotonic()
    r3 = run_dag(dag)
    timings["night3"] = time.monotonic() - t0
    assert r3.success, r3
    found = {d["source"]: d for d in _xcoms("binlake_nightly", r3.run_id, "per_source.discover")}
    assert found["good"]["files"] == ["binlog.000004"]
    assert set(found["gen1"]["files"]) == gen_closed
    ingested = spark.read.format("delta").load(table_location(cfg.warehouse, "meta.ingested_files"))
    assert {r.file for r in ingested.where("source = 'gen1'").collect()} == gen_closed
    recon = spark.read.format("delta").load(table_location(cfg.warehouse, "meta.gtid_reconciliation"))
    assert {r.status for r in recon.where("source = 'gen1'").collect()} == {"OK"}
    ingested = spark.read.format("delta").load(table_location(cfg.warehouse, "meta.ingested_files"))
    good_runs = {r.file: r.run_id for r in ingested.where("source = 'good'").collect()}
    assert set(good_runs) == set(MARIADB_FILES)

    # ---- backfill: reprocess binlog.000002..binlog.000003 of good ------------------------
    before = {t: _table_rows(spark, cfg, t) for t in DATA_TABLES}
    bdag = _dag(world, monkeypatch, "binlake_backfill", ["good"])
    t0 = time.monotonic()
    rb = run_dag(bdag, run_conf={"source": "good", "mode": "reprocess", "from_file": "binlog.000002",
                                 "to_file": "binlog.000003"})
    timings["backfill"] = time.monotonic() - t0
    assert rb.success, rb
    after = {t: _table_rows(spark, cfg, t) for t in DATA_TABLES}
    for t in DATA_TABLES:
        assert after[t] == before[t], t
    ingested = spark.read.format("delta").load(table_location(cfg.warehouse, "meta.ingested_files"))
    now_runs = {r.file: r.run_id for r in ingested.where("source = 'good'").collect()}
    changed = {f for f in now_runs if now_runs[f] != good_runs[f]}
    assert changed == {"binlog.000002", "binlog.000003"}

    # ---- dry run: plans, writes nothing --------------------------------------------------
    t0 = time.monotonic()
    rd = run_dag(bdag, run_conf={"source": "good", "mode": "reprocess", "dry_run": True})
    timings["dry_run"] = time.monotonic() - t0
    assert rd.success, rd
    ingested = spark.read.format("delta").load(table_location(cfg.warehouse, "meta.ingested_files"))
    assert {r.file: r.run_id for r in ingested.where("source = 'good'").collect()} == now_runs
    print("\nDAG run times (s):", {k: round(v, 1) for k, v in timings.items()})


def test_spark_submit_mode_by_configuration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """spark.mode = "submit": the Spark steps become SparkSubmitOperator, same DAG files."""
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    jars = os.environ.get("BINLAKE_JARS_DIR", str(Path(__file__).resolve().parent.parent / ".jars"))
    path = tmp_path / "c.toml"
    path.write_text('[pipeline]\nwarehouse = "s3a://lake/wh"\n'
                    f'jars_dir = "{jars}"\n'
                    '[[sources]]\nname = "a"\nuri = "s3://arch/a/"\n'
                    '[[sources]]\nname = "b"\nuri = "s3://arch/b/"\n'
                    '[spark]\nmode = "submit"\nconn_id = "spark_cluster"\n')
    monkeypatch.setenv("BINLAKE_CONFIG", str(path))
    for dag_id in ("binlake_nightly", "binlake_backfill"):
        dag = _load(dag_id)
        for step in ("decode", "reconcile", "gold"):
            op = dag.get_task(f"per_source.{step}")
            assert isinstance(op, SparkSubmitOperator), (dag_id, step)
            assert op._conn_id == "spark_cluster"
            assert op.application.endswith("spark_jobs/__main__.py")
            assert op.application_args[0] == step
        for step in ("discover", "data_checks"):  # plain Python tasks in both modes
            assert not isinstance(dag.get_task(f"per_source.{step}"), SparkSubmitOperator)
        outlets = {a.extra["table"]: a.uri for a in dag.get_task("per_source.decode").outlets}
        assert outlets["bronze.events"] == "s3://lake/wh/bronze/events"
        assert "meta.ingested_files" in outlets
        assert any(a.uri.startswith("s3://lake/wh/") for a in dag.get_task("per_source.decode").outlets)
