"""binlake on a real Spark standalone cluster (master + 2 workers on loopback), warehouse on s3a://.

The Spark steps go through ``spark-submit binlake/pipeline_tasks.py STEP ...`` exactly as the
``submit`` mode's SparkSubmitOperator runs them (``binlake.spark.spark_submit_cli_args``: jars,
Delta/S3A conf; the repo's packages as ``--py-files``); executors run in the workers' JVMs with
their own Python workers, read the archive over S3 (boto3 ranged GETs) and the driver writes the
Delta tables to ``s3a://`` on the loopback S3 server. The tables must equal those of local mode
(in-process ``local[2]``, local warehouse) on the same archive.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from binlake.config import REPO_ROOT, BinlakeConfig, load_config
from binlake.spark import spark_submit_cli_args
from binlake.testing.s3server import S3Server
from binlake.testing.spark_cluster import (
    SparkStandaloneCluster,
    package_zip,
    spark_home,
)
from binlake.testing.table_digest import warehouse_digests
from spark_jobs.schemas import ALL_TABLES
from tests._chain_util import MARIADB_FILES, read_fixture

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.timeout(7200)]

BUCKET = "binlake-cluster-test"
SOURCES = ("alpha", "beta")
STEPS = ("decode", "reconcile", "data_checks")


def _config(path: Path, endpoint: str, warehouse: str, master: str, py_files: Path) -> BinlakeConfig:
    jars = os.environ.get("BINLAKE_JARS_DIR", str(REPO_ROOT / ".jars"))
    lines = ["[pipeline]", f'warehouse = "{warehouse}"', f'state_dir = "{path.parent / "state"}"',
             f'jars_dir = "{jars}"', ""]
    for s in SOURCES:
        lines += ["[[sources]]", f'name = "{s}"', f'uri = "s3://{BUCKET}/{s}/"', ""]
    lines += ["[s3]", f'endpoint_url = "{endpoint}"', "path_style_access = true", "max_attempts = 3", "",
              "[spark]", 'mode = "submit"', f'master = "{master}"', "shuffle_partitions = 2",
              "ui_enabled = false", "jars_on_workers = true", "",
              "[spark.conf]", '"spark.executor.memory" = "512m"', '"spark.executor.cores" = "1"',
              f'"spark.submit.pyFiles" = "{py_files}"', ""]
    path.write_text("\n".join(lines))
    return load_config(path)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandaloneCluster]:
    with SparkStandaloneCluster(tmp_path_factory.mktemp("cluster"), workers=2, cores=1, memory="1g") as c:
        yield c


@pytest.fixture(scope="module")
def archive(s3_server: S3Server) -> str:
    client = s3_server.client()
    client.create_bucket(Bucket=BUCKET)
    for source in SOURCES:
        for name in MARIADB_FILES:
            client.put_object(Bucket=BUCKET, Key=f"{source}/{name}", Body=read_fixture(name))
    return BUCKET


def spark_submit(cfg: BinlakeConfig, config_path: Path, step: str, source: str, run_id: str) -> str:
    """One Spark step through spark-submit against the cluster (client deploy mode)."""
    cmd = [str(spark_home() / "bin" / "spark-submit"), "--master", cfg.spark.master, "--name", f"binlake-{step}",
           *spark_submit_cli_args(cfg), str(REPO_ROOT / "binlake" / "pipeline_tasks.py"), step,
           "--source", source, "--run-id", run_id]
    env = dict(os.environ, BINLAKE_CONFIG=str(config_path), PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200, check=False)
    assert proc.returncode == 0, f"{step} {source}: exit {proc.returncode}\n{proc.stderr[-4000:]}"
    return proc.stdout


def test_submit_mode_on_the_cluster_equals_local_mode(cluster: SparkStandaloneCluster, archive: str,
                                                      s3_server: S3Server, spark: Any,
                                                      tmp_path_factory: pytest.TempPathFactory) -> None:
    from binlake.pipeline_tasks import discover, run_spark_step

    tmp = tmp_path_factory.mktemp("submit")
    py_files = package_zip(REPO_ROOT, tmp / "binlake-py.zip")
    config_path = tmp / "binlake.toml"
    cfg = _config(config_path, s3_server.endpoint_url, f"s3://{BUCKET}/warehouse", cluster.master_url, py_files)
    for source in SOURCES:
        discover(source, "cluster-run", cfg=cfg)
        for step in STEPS:
            spark_submit(cfg, config_path, step, source, "cluster-run")
    apps = cluster.state()["completedapps"]
    assert len(apps) == len(SOURCES) * len(STEPS)
    assert {a["name"] for a in apps} == {f"binlake-{s}" for s in STEPS}

    local = dataclasses.replace(cfg, warehouse=str(tmp / "local-warehouse"),
                                spark=dataclasses.replace(cfg.spark, mode="local", master="local[2]"))
    for source in SOURCES:
        discover(source, "local-run", cfg=local)
        for step in STEPS:
            run_spark_step(step, source, "local-run", local)
    expected = warehouse_digests(local.warehouse, ALL_TABLES)
    assert expected["meta.ingested_files"].rows == 8 and expected["bronze.events"].rows > 0
    assert warehouse_digests(cfg.warehouse, ALL_TABLES, cfg.s3) == expected
