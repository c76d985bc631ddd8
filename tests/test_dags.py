"""Both binlake DAGs run for real through Airflow (dag.test(), SQLite metadata DB) against the
loopback S3 server, with Spark in-process and Delta tables in a tmp warehouse.

One module, one story (each night is a real DAG run; kept to five runs on 2 cores):

1. night 1, three sources, two to a task (``[pipeline] sources_per_task = 2``): ``good`` (fixture
   chain, last file still open) and ``gappy`` (a middle file missing) share one task per step,
   ``hostile`` (a ROTATE naming ``../``) has its own. The run fails; ``good`` completes anyway
   (its task's later steps run for it alone); the gap is named in the task log, recorded as GAP in
   meta.gtid_reconciliation and alerted; the hostile ROTATE is rejected; ``good``'s gold task
   emits one asset event per gold table it wrote (night 3 too).
2. night 2, one source to a task: ``good`` has nothing new (settled by the discover task), ``gappy``
   reports its GAP again.
3. the open file rotates (closed version uploaded) and a new file appears: night 3 ingests
   exactly those, ``good`` and a new source in one task per step.
4. a backfill ``reprocess`` over binlog.000002..binlog.000003 re-ingests exactly those files and
   leaves every table's rows identical; a ``dry_run`` backfill writes nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from binlake_testing.s3server import S3Server
from tests._airflow_util import asset_events
from tests._chain_util import MARIADB_FILES, make_open, read_fixture, with_rotate_to

pytestmark = [pytest.mark.airflow, pytest.mark.spark]

BUCKET = "binlake-dags-test"
DATA_TABLES = ("bronze.events", "bronze.quarantine", "silver.transactions", "silver.row_changes",
               "silver.statements", "meta.binlog_files", "meta.gtid_coverage", "meta.gtid_reconciliation")


def _write_config(path: Path, endpoint: str, warehouse: Path, state: Path, sources: list[str],
                  per_task: int = 1) -> Path:
    jars = os.environ.get("BINLAKE_JARS_DIR", str(Path(__file__).resolve().parent.parent / ".jars"))
    lines = ["[pipeline]", f'warehouse = "{warehouse}"', f'state_dir = "{state}"', f'jars_dir = "{jars}"',
             'nightly_cron = "0 3 * * *"', f"sources_per_task = {per_task}", ""]
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


def _xcoms(dag_id: str, run_id: str, task_id: str, key: str = "return_value") -> list[Any]:
    """The XCom ``key`` (default: the return value) of every map index of a (mapped) task, by map index."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.query(XComModel).filter(XComModel.dag_id == dag_id, XComModel.run_id == run_id,
                                               XComModel.task_id == task_id,
                                               XComModel.key == key).all()
        return [XComModel.deserialize_value(r) for r in sorted(rows, key=lambda r: r.map_index)]


def _table_rows(spark: Any, cfg: Any, name: str) -> list[tuple]:
    from delta.tables import DeltaTable

    from binlake.lake.tables import table_location

    path = table_location(cfg.warehouse, name)
    if not DeltaTable.isDeltaTable(spark, path):
        return []
    df = spark.read.format("delta").load(path)
    cols = sorted(c for c in df.columns if c != "run_id")
    return sorted(tuple(str(v) for v in r) for r in df.select(*cols).collect())


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, s3_server: S3Server) -> dict[str, Any]:
    from orchestration.run_local import migrate_airflow_db

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


def _dag(world: dict[str, Any], monkeypatch: pytest.MonkeyPatch, dag_id: str, sources: list[str],
         per_task: int = 1) -> Any:
    from binlake.config import load_config

    path = _write_config(world["tmp"] / f"{dag_id}-{'-'.join(sources)}.toml", world["endpoint"], world["warehouse"],
                         world["state"], sources, per_task)
    monkeypatch.setenv("BINLAKE_CONFIG", str(path))
    world["cfg"] = load_config(path)
    return _load(dag_id)


def _load(dag_id: str) -> Any:
    from orchestration.run_local import load_dag

    return load_dag(dag_id)


@pytest.fixture(autouse=True)
def _reopen_closed_log_streams() -> Any:
    """Airflow's log handlers created while one test captured stderr keep that test's (then
    closed) stream; the next test's runs would log "I/O operation on closed file"."""
    import logging
    import sys

    yield
    loggers = [logging.getLogger(), *(lg for lg in logging.Logger.manager.loggerDict.values()
                                      if isinstance(lg, logging.Logger))]
    for lg in loggers:
        for handler in lg.handlers:
            if (isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler)
                    and getattr(handler.stream, "closed", False)):
                handler.stream = sys.stderr  # not setStream(): it flushes the closed stream


# The five runs below are one story in order (pytest runs a module's tests in file order):
# each test starts from the warehouse the one before left, kept in ``world``.


def _run(world: dict[str, Any], dag: Any, name: str, **kwargs: Any) -> Any:
    import time

    from binlake_testing.demo import run_dag

    t0 = time.monotonic()
    result = run_dag(dag, **kwargs)
    world.setdefault("timings", {})[name] = round(time.monotonic() - t0, 1)
    print(f"\nDAG run {name}: {world['timings'][name]} s")
    return result


def _ingested(spark: Any, world: dict[str, Any], source: str) -> dict[str, str]:
    from binlake.lake.tables import table_location

    table = spark.read.format("delta").load(table_location(world["cfg"].warehouse, "meta.ingested_files"))
    return {r.file: r.run_id for r in table.where(f"source = '{source}'").collect()}


def test_night1_three_sources_two_of_them_broken(world: dict[str, Any], spark: Any, monkeypatch: pytest.MonkeyPatch,
                                                 capfd: pytest.CaptureFixture[str],
                                                 caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from binlake.lake.tables import table_location

    caplog.set_level(logging.INFO)
    dag = _dag(world, monkeypatch, "binlake_nightly", ["good", "gappy", "hostile"], per_task=2)
    assert dag.max_active_runs == 1 and not dag.catchup
    r1 = _run(world, dag, "night1")
    assert r1.state == "failed", r1
    states = _states_by_index("binlake_nightly", r1.run_id)
    good_and_gappy, hostile = 0, 1  # the discover task's batches: [good, gappy], [hostile]
    assert _xcoms("binlake_nightly", r1.run_id, "discover") == [[["good", "gappy"], ["hostile"]]]
    assert states[("discover", -1)] == "success"  # one task for every source
    assert {k: v for k, v in states.items() if k[0].startswith("per_source.")} == {
        ("per_source.decode", good_and_gappy): "success", ("per_source.decode", hostile): "success",
        ("per_source.reconcile", good_and_gappy): "failed",  # gappy's GAP; good was reconciled
        ("per_source.reconcile", hostile): "failed",
        ("per_source.gold", good_and_gappy): "success",  # for good; gappy left out
        ("per_source.gold", hostile): "skipped",  # hostile left out: nothing for the task
        ("per_source.data_checks", good_and_gappy): "success",  # good checked, gappy never "success"
        ("per_source.data_checks", hostile): "skipped"}
    assert states[("summary", -1)] == "failed"

    cfg = world["cfg"]
    assert set(_ingested(spark, world, "good")) == set(MARIADB_FILES[:3])  # open binlog.000004 left
    assert set(_ingested(spark, world, "good").values()) == {r1.run_id}  # Airflow's run id, as it is
    assert set(_ingested(spark, world, "hostile")) == {"binlog.000001", "binlog.000003", "binlog.000004"}
    recon = spark.read.format("delta").load(table_location(cfg.warehouse, "meta.gtid_reconciliation"))
    gap_rows = [r for r in recon.where("source = 'gappy'").collect() if r.status == "GAP"]
    assert [r.file for r in gap_rows] == ["binlog.000004"]
    assert "binlog.000003" in gap_rows[0].missing_files
    cov = spark.read.format("delta").load(table_location(cfg.warehouse, "meta.gtid_coverage"))
    assert all(r.first_commit_time is not None and r.last_commit_time is not None
               for r in cov.where("source = 'good'").collect())

    # dag.test() runs the tasks in this process: their log records reach the root logger (caplog);
    # what they print goes to stdout/stderr, through handlers that may hold an earlier test's
    # stream; and to task log files when file logging is on
    captured = capfd.readouterr()
    logs = "\n".join((caplog.text, captured.out, captured.err,
                      _task_logs(world["airflow_home"], "binlake_nightly", r1.run_id)))
    assert "binlog chain broken" in logs and "binlog.000003" in logs, logs[-3000:]
    assert "GAP: binlog.000003 is missing" in logs
    assert "hostile_rotate" in logs and "../binlog.000003" in logs
    assert "raise ChainBrokenError" not in logs and "raise RunFailedError" not in logs  # no tracebacks
    # a small night: decoded in the task's process (no Spark job, so none of a Spark step's progress lines)
    assert " tasks (in process), " in logs and "decode good: " not in logs
    alerts = [json.loads(line) for line in (world["state"] / "alerts.jsonl").read_text().splitlines()]
    gap_alert = next(a for a in alerts if a["task_id"] == "per_source.reconcile" and "gappy" in a["reason"])
    assert gap_alert["kind"] == "ChainBrokenError" and "binlog.000003" in gap_alert["reason"]
    summary = _xcoms("binlake_nightly", r1.run_id, "summary")
    assert summary == []  # the summary failed: its verdict is in the run folder
    page = Path(cfg.warehouse) / "_binlake" / "runs" / "_sources"
    assert list(page.glob("good/coverage/*/coverage-good.html")) and list(page.glob("gappy/coverage/*/coverage-gappy.png"))
    world["good_runs"] = _ingested(spark, world, "good")
    # one asset event per gold table written, through the gold task's alias (gappy's and hostile's gold never ran)
    (gold_doc,), = _xcoms("binlake_nightly", r1.run_id, "per_source.gold")  # good's only
    assert (gold_doc["source"], gold_doc["written"]) == ("good", ["gold.good__shop__customer", "gold.good__shop__orders"])
    assert [e for e in asset_events("binlake_nightly", r1.run_id, "per_source.gold") if e[3]] == [
        (good_and_gappy, f"file://{cfg.warehouse}/gold/good__shop__{t}", f"gold.good__shop__{t}", ("binlake.gold",))
        for t in ("customer", "orders")]
    (checked,), = _xcoms("binlake_nightly", r1.run_id, "per_source.data_checks")
    assert (checked["source"], checked["ok"], checked["checked_files"]) == ("good", True, 3)


def test_night2_nothing_new_runs_no_task_for_the_quiet_source_and_still_reports_the_gap(
        world: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from binlake.runs import get_doc, run_key

    dag = _dag(world, monkeypatch, "binlake_nightly", ["good", "gappy"])
    r2 = _run(world, dag, "night2")
    assert r2.state == "failed", r2
    states = _states_by_index("binlake_nightly", r2.run_id)
    # good has nothing new: the discover task finished it; gappy's stored GAP fails its reconcile again
    assert [_xcoms("binlake_nightly", r2.run_id, "discover", key)[0] for key in ("return_value", "settled")] == [
        [["gappy"]], ["good"]], _xcoms("binlake_nightly", r2.run_id, "discover", "reasons")  # busy: the group's map
    reasons, = _xcoms("binlake_nightly", r2.run_id, "discover", "reasons")
    assert reasons == {"gappy": "ChainBrokenError: source gappy: binlog chain broken"}
    assert {k: v for k, v in states.items() if k[0].startswith("per_source.")} == {
        ("per_source.decode", 0): "success", ("per_source.reconcile", 0): "failed",
        ("per_source.gold", 0): "upstream_failed", ("per_source.data_checks", 0): "upstream_failed"}
    found, = _xcoms("binlake_nightly", r2.run_id, "discover", "found")
    assert [(f["source"], f["to_ingest"], f["bytes_read"] < 8192) for f in found] == [
        ("good", 0, True), ("gappy", 0, True)]
    (decoded,), = _xcoms("binlake_nightly", r2.run_id, "per_source.decode")
    assert (decoded["source"], decoded["files"], decoded["spark"]) == ("gappy", 0, False)
    assert _xcoms("binlake_nightly", r2.run_id, "per_source.reconcile") == []  # gappy failed: no XCom
    cfg = world["cfg"]
    reconciled = get_doc(cfg, r2.run_id, "good", "reconcile")  # the settled source's documents, as a task's
    assert reconciled is not None and reconciled["persisted"] and reconciled["spark"] is False
    assert reconciled["statuses"] == {"OK": 3}
    assert [(get_doc(cfg, r2.run_id, "good", step) or {}).get(key) for step, key in (
        ("decode", "spark"), ("gold", "spark"), ("checks", "note"))] == [False, False, "nothing ingested"]
    summary = json.loads((Path(cfg.warehouse) / "_binlake" / "runs" / run_key(r2.run_id) / "summary.json").read_text())
    assert summary["sources"]["good"]["ok"] and not summary["sources"]["gappy"]["ok"]  # the run's verdict has both
    alerts = [json.loads(line) for line in (world["state"] / "alerts.jsonl").read_text().splitlines()]
    assert any(a["run_id"] == r2.run_id and a["task_id"] == "per_source.reconcile" and "binlog.000003" in a["reason"]
               for a in alerts)


def test_night3_a_rotated_file_and_a_new_source(world: dict[str, Any], spark: Any,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """binlog.000004 rotated, binlog.000005 appeared (still open); a new source with a generated
    MySQL 8 chain (binlake_testing.synthetic) whose last file is still in use."""
    from binlake.config import S3Settings
    from binlake.lake.tables import table_location
    from binlake_testing.synthetic import Faults, SyntheticConfig, generate

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
    dag = _dag(world, monkeypatch, "binlake_nightly", ["good", "gen1"], per_task=4)
    r3 = _run(world, dag, "night3")
    assert r3.success, r3
    found = {d["source"]: d for d in _xcoms("binlake_nightly", r3.run_id, "discover", "found")[0]}
    assert found["good"]["files"] == ["binlog.000004"]
    assert set(found["gen1"]["files"]) == gen_closed
    assert set(_ingested(spark, world, "gen1")) == gen_closed
    recon = spark.read.format("delta").load(table_location(world["cfg"].warehouse, "meta.gtid_reconciliation"))
    assert {r.status for r in recon.where("source = 'gen1'").collect()} == {"OK"}
    good_runs = _ingested(spark, world, "good")
    assert good_runs == dict(world["good_runs"], **{"binlog.000004": r3.run_id})
    world["good_runs"] = good_runs
    # one task per step for both sources: its gold asset events are exactly the tables each
    # source's gold step says it wrote
    assert _xcoms("binlake_nightly", r3.run_id, "discover") == [[["good", "gen1"]]]
    docs, = _xcoms("binlake_nightly", r3.run_id, "per_source.gold")
    assert [d["source"] for d in docs] == ["good", "gen1"]
    written = [(0, name) for doc in docs for name in doc["written"]]
    assert any(name.startswith("gold.gen1__") for _i, name in written), written
    assert [(i, table) for i, _uri, table, alias in asset_events("binlake_nightly", r3.run_id, "per_source.gold")
            if alias] == sorted(written)


def test_backfill_reprocess_leaves_every_table_identical(world: dict[str, Any], spark: Any,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = world["cfg"]
    before = {t: _table_rows(spark, cfg, t) for t in DATA_TABLES}
    bdag = _dag(world, monkeypatch, "binlake_backfill", ["good"])
    rb = _run(world, bdag, "backfill", run_conf={"source": "good", "mode": "reprocess",
                                                 "from_file": "binlog.000002", "to_file": "binlog.000003"})
    assert rb.success, rb
    after = {t: _table_rows(spark, cfg, t) for t in DATA_TABLES}
    for t in DATA_TABLES:
        assert after[t] == before[t], t
    now_runs = _ingested(spark, world, "good")
    assert {f for f in now_runs if now_runs[f] != world["good_runs"][f]} == {"binlog.000002", "binlog.000003"}
    assert now_runs["binlog.000002"] == rb.run_id
    world["good_runs"] = now_runs


def test_a_dry_run_backfill_writes_nothing_and_starts_no_spark(world: dict[str, Any], spark: Any,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    bdag = _dag(world, monkeypatch, "binlake_backfill", ["good"])
    alerts_before = (world["state"] / "alerts.jsonl").read_text()
    rd = _run(world, bdag, "dry_run", run_conf={"source": "good", "mode": "reprocess", "dry_run": True})
    assert rd.success, rd
    assert _ingested(spark, world, "good") == world["good_runs"]
    from binlake.runs import get_doc

    assert _xcoms("binlake_backfill", rd.run_id, "discover", "settled") == [["good"]]  # no per-source task
    for step in ("decode", "reconcile", "gold"):
        doc = get_doc(world["cfg"], rd.run_id, "good", step)
        assert doc is not None and doc["dry_run"] and doc["spark"] is False, (step, doc)
    assert (world["state"] / "alerts.jsonl").read_text() == alerts_before  # no alert
    print("\nDAG run times (s):", world["timings"])


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
    batched = tmp_path / "batched.toml"
    batched.write_text(path.read_text().replace("[pipeline]\n", "[pipeline]\nsources_per_task = 8\n"))
    monkeypatch.setenv("BINLAKE_CONFIG", str(path))
    for dag_id in ("binlake_nightly", "binlake_backfill"):
        dag = _load(dag_id)
        for step in ("decode", "gold"):
            op = dag.get_task(f"per_source.{step}")
            assert isinstance(op, SparkSubmitOperator), (dag_id, step)
            assert op._conn_id == "spark_cluster"
            assert op.application.endswith("spark_jobs/__main__.py")
            assert op.application_args[0] == step
        for task_id in ("discover", "per_source.reconcile", "per_source.data_checks"):  # plain Python in both modes
            assert not isinstance(dag.get_task(task_id), SparkSubmitOperator)
        outlets = {a.extra["table"]: a.uri for a in dag.get_task("per_source.decode").outlets}
        assert outlets["bronze.events"] == "s3://lake/wh/bronze/events"
        assert "meta.ingested_files" in outlets
        assert any(a.uri.startswith("s3://lake/wh/") for a in dag.get_task("per_source.decode").outlets)
        names = {a.extra["table"]: a.name for a in dag.get_task("per_source.decode").outlets}
        assert names["silver.row_changes"] == "silver.row_changes @ s3://lake/wh"  # named by table
        assert {dag.get_task(f"per_source.{s}").trigger_rule for s in ("reconcile", "gold", "data_checks")} == {
            "all_success"}  # one source to a task: Airflow stops a source after its failed step
    monkeypatch.setenv("BINLAKE_CONFIG", str(batched))
    dag = _load("binlake_nightly")  # several sources to a task: later steps run for those that succeeded
    assert [dag.get_task(f"per_source.{s}").trigger_rule for s in ("decode", "reconcile", "gold", "data_checks")] == [
        "all_success", "all_done", "all_done", "all_done"]
    assert dag.get_task("per_source.gold").application_args[2] == (
        "{{ ti.xcom_pull(task_ids='discover')[ti.map_index] | join(',') }}")


def test_the_backfill_trigger_form_can_be_submitted_with_its_text_fields_empty(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the trigger form is rendered from: the api-server's DAG details (``params`` as
    ``{name: param.dump()}`` of the serialized DAG). The form marks a field required unless its
    schema allows null, and sends an empty field as null; the api-server validates the merge."""
    from airflow.api_fastapi.core_api.datamodels.dags import DAGDetailsResponse
    from airflow.serialization.serialized_objects import DagSerialization

    path = tmp_path / "c.toml"
    path.write_text('[pipeline]\nwarehouse = "wh"\n[[sources]]\nname = "a"\nuri = "s3://arch/a/"\n')
    monkeypatch.setenv("BINLAKE_CONFIG", str(path))
    serialized = DagSerialization.from_dict(DagSerialization.to_dict(_load("binlake_backfill")))
    form = DAGDetailsResponse.get_params(serialized.params)
    assert form is not None

    def nullable(name: str) -> bool:
        kind = form[name]["schema"].get("type")
        return "null" in (kind if isinstance(kind, list) else [kind])

    assert sorted(n for n in form if form[n]["value"] is None and not nullable(n)) == []  # none blocks Trigger
    assert sorted(n for n in form if nullable(n)) == ["from_date", "from_file", "source", "to_date", "to_file"]
    empty = {n: None for n in form if nullable(n)}
    assert serialized.params.deep_merge(empty).validate() == {
        "source": None, "mode": "missing", "from_file": None, "to_file": None, "from_date": None,
        "to_date": None, "dry_run": False}
