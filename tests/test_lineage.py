"""Lineage (issue 39, docs/lineage.md): a real night (``binlake run nightly`` over a folder archive of
the four-file MariaDB fixture chain, Spark in-process) emits OpenLineage events from the DAG's tasks
(Airflow's OpenLineage provider, binlake's extractor) and from the Spark jobs (OpenLineage's Spark
listener); every event validates against the OpenLineage JSON schema (tests/data/openlineage/) and
each step names its input objects and output tables.

The night runs in a child process: the provider's listener is registered when Airflow loads its
plugins, once per process, from the ``[openlineage]`` settings ``binlake run`` puts in the
environment; a pytest worker that already ran a DAG has its listeners fixed without them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from binlake.config import ConfigError, config_from_dict
from orchestration.lineage import airflow_lineage_env, object_identity, warehouse_namespace
from spark_jobs.session import OPENLINEAGE_LISTENER, spark_conf
from tests._chain_util import MARIADB_FILES, write_mariadb_chain

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO / "tests" / "data" / "openlineage" / "OpenLineage.json"
JARS = os.environ.get("BINLAKE_JARS_DIR", str(REPO / ".jars"))


def test_lineage_settings_for_airflow_and_spark(tmp_path: Path) -> None:
    base = {"pipeline": {"warehouse": str(tmp_path / "wh"), "state_dir": str(tmp_path / "st"), "jars_dir": JARS}}
    cfg = config_from_dict(base, tmp_path)
    env = airflow_lineage_env(cfg)
    assert json.loads(env["AIRFLOW__OPENLINEAGE__TRANSPORT"]) == {
        "type": "file", "log_file_path": str(tmp_path / "st" / "lineage" / "airflow.jsonl"), "append": True}
    assert env["AIRFLOW__OPENLINEAGE__EXTRACTORS"] == "orchestration.lineage.BinlakeStepExtractor"
    conf = spark_conf(cfg)
    assert conf["spark.extraListeners"] == OPENLINEAGE_LISTENER
    assert conf["spark.openlineage.transport.location"] == str(tmp_path / "st" / "lineage" / "spark.jsonl")

    marquez = config_from_dict({**base, "lineage": {"transport": "http", "url": "http://127.0.0.1:5000"}}, tmp_path)
    assert json.loads(airflow_lineage_env(marquez)["AIRFLOW__OPENLINEAGE__TRANSPORT"]) == {
        "type": "http", "url": "http://127.0.0.1:5000", "endpoint": "api/v1/lineage"}
    assert spark_conf(marquez)["spark.openlineage.transport.url"] == "http://127.0.0.1:5000"
    off = config_from_dict({**base, "lineage": {"enabled": False}}, tmp_path)
    assert airflow_lineage_env(off) == {"AIRFLOW__OPENLINEAGE__DISABLED": "True"}
    assert "spark.extraListeners" not in spark_conf(off)
    with pytest.raises(ConfigError, match=r'transport = "http" needs url'):
        config_from_dict({**base, "lineage": {"transport": "http"}}, tmp_path)

    assert warehouse_namespace(config_from_dict({**base, "pipeline": {**base["pipeline"], "warehouse": "s3a://lake/wh"}},
                                                tmp_path)) == "s3://lake/wh"
    assert object_identity("s3://arch/db1/binlog.000001") == ("s3://arch", "db1/binlog.000001")
    assert object_identity("/srv/arch/binlog.000001") == ("file", "/srv/arch/binlog.000001")


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One nightly run in a child process; its lineage files and folders."""
    tmp = tmp_path_factory.mktemp("lineage")
    archive = write_mariadb_chain(tmp / "archive")
    path = tmp / "binlake.toml"
    path.write_text(f'[pipeline]\nwarehouse = "{tmp / "wh"}"\nstate_dir = "{tmp / "state"}"\njars_dir = "{JARS}"\n'
                    f'[spark]\nui_enabled = false\n[[sources]]\nname = "chain"\nuri = "{archive}"\n'
                    # the replays as Spark jobs, so the listener's events carry gold's silver input (a replay in
                    # the step's process reads it with delta-rs: the task's event names it, docs/lineage.md)
                    '[gold]\nin_process_changes = 0\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "BINLAKE_"))}
    proc = subprocess.run([sys.executable, "-c", "import sys, binlake_cli; sys.exit(binlake_cli.main(sys.argv[1:]))",
                           "run", "nightly", "--config", str(path)], env=env, cwd=tmp, capture_output=True,
                          text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    folder = tmp / "state" / "lineage"
    return {"archive": archive, "wh": tmp / "wh", "output": proc.stdout + proc.stderr,
            "airflow": [json.loads(line) for line in (folder / "airflow.jsonl").read_text().splitlines()],
            "spark": [json.loads(line) for line in (folder / "spark.jsonl").read_text().splitlines()]}


def _names(datasets: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(d["namespace"], d["name"]) for d in datasets}


def test_a_night_emits_valid_events_naming_each_steps_inputs_and_outputs(night: dict[str, Any]) -> None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()),
                                                format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    for event in night["airflow"] + night["spark"]:
        validator.validate(event)

    wh = f"file://{night['wh']}"
    done = {e["job"]["name"]: e for e in night["airflow"] if e.get("eventType") == "COMPLETE"}
    assert {"binlake_nightly", "binlake_nightly.per_source.decode", "binlake_nightly.summary"} <= set(done)
    assert {e["job"]["namespace"] for e in night["airflow"]} == {"binlake"}

    decode = done["binlake_nightly.per_source.decode"]
    planned = {("file", str(night["archive"] / name)) for name in MARIADB_FILES}
    assert _names(decode["inputs"]) == planned
    assert _names(decode["outputs"]) == {(wh, t) for t in (
        "bronze.events", "bronze.quarantine", "silver.transactions", "silver.row_changes", "silver.statements",
        "meta.binlog_files", "meta.ingested_files")}
    row_changes = next(d for d in decode["outputs"] if d["name"] == "silver.row_changes")
    assert row_changes["facets"]["symlinks"]["identifiers"] == [
        {"namespace": "file", "name": str(night["wh"] / "silver" / "row_changes"), "type": "LOCATION"}]

    reconcile = done["binlake_nightly.per_source.reconcile"]
    assert _names(reconcile["inputs"]) == {(wh, "meta.binlog_files"), (wh, "silver.transactions")}
    assert _names(reconcile["outputs"]) == {(wh, "meta.gtid_coverage"), (wh, "meta.gtid_reconciliation")}

    gold = done["binlake_nightly.per_source.gold"]
    assert _names(gold["inputs"]) == {(wh, "silver.row_changes"), (wh, "silver.statements")}
    gold_tables = {name for ns, name in _names(gold["outputs"]) if name.startswith("gold.")}
    assert gold_tables and all(name.startswith("gold.chain__") for name in gold_tables)
    assert {(wh, "silver.schema_history"), (wh, "meta.gold_status")} <= _names(gold["outputs"])

    # the Spark jobs' own events name the tables by location (the OpenLineage naming spec): gold's
    # MERGEs read silver.row_changes and write each gold table (decode's silver tables are written by
    # the decoder's Arrow sink and committed without a Spark write command: the task's event names them)
    spark_writes = [e for e in night["spark"] if e.get("eventType") == "COMPLETE" and e.get("outputs")]
    written = {(ns, name) for e in spark_writes for ns, name in _names(e["outputs"])}
    assert {("file", str(night["wh"] / t.replace(".", "/"))) for t in gold_tables} <= written
    read = {(ns, name) for e in spark_writes for ns, name in _names(e.get("inputs", []))}
    assert ("file", str(night["wh"] / "silver" / "row_changes")) in read


def test_the_gold_asset_events_print_no_airflow_warnings(night: dict[str, Any]) -> None:
    """The night's gold step creates two gold tables and emits their asset events through the alias;
    Airflow's two WARNINGs per first-seen asset are its documented alias path, kept out of the
    output (``orchestration.run_local.airflow_env``), while the night's own lines are there."""
    assert "chain" in night["output"]  # the run's own report names its source
    assert "cannot create asset event" not in night["output"]
    assert "inactive AssetModel" not in night["output"]
