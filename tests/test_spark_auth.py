"""The Spark authentication docker-compose.yml turns on works with Spark 4.2 (issue 43, item 15).

A standalone master and worker on loopback read the spark-defaults.conf that docker/spark-auth.sh
writes (the same script the compose services run): the worker registers, a spark-submit with the
same conf runs a job, and a spark-submit without the secret gets no application.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from binlake.config import REPO_ROOT
from binlake_testing.spark_cluster import SparkStandaloneCluster, spark_home

pytestmark = [pytest.mark.spark, pytest.mark.cluster, pytest.mark.timeout(900)]

APP = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.appName("binlake-auth-check").getOrCreate()
print("SUM", spark.sparkContext.parallelize(range(10), 2).sum())
spark.stop()
"""


def _auth_conf(folder: Path, secret: str) -> Path:
    env = {"PATH": os.environ["PATH"], "SPARK_CONF_DIR": str(folder), "BINLAKE_SPARK_AUTH_SECRET": secret}
    subprocess.run(["sh", str(REPO_ROOT / "docker/spark-auth.sh"), "true"], env=env, check=True, timeout=30)
    return folder


def _submit(cluster: SparkStandaloneCluster, app: Path, conf_dir: Path, timeout: float = 300) -> str | None:
    """spark-submit's stdout, or None when it failed or was still trying after ``timeout`` seconds
    (a refused client retries its registration for a minute before it gives up)."""
    env = {**cluster.env(), "SPARK_CONF_DIR": str(conf_dir)}
    proc = subprocess.Popen([str(spark_home() / "bin" / "spark-submit"), "--master", cluster.master_url,
                             "--conf", "spark.ui.enabled=false", "--conf", "spark.executor.memory=512m", str(app)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.communicate()
        return None
    return out if proc.returncode == 0 else None


def test_master_worker_and_submitter_share_the_secret(tmp_path: Path) -> None:
    conf = _auth_conf(tmp_path / "conf", "binlake-test-secret")
    app = tmp_path / "app.py"
    app.write_text(APP)
    cluster = SparkStandaloneCluster(tmp_path / "cluster", workers=1, cores=1, memory="1g",
                                     extra_env={"SPARK_CONF_DIR": str(conf)})
    with cluster:  # start() waits until the worker registered: it authenticated with the secret
        ok = _submit(cluster, app, conf)
        assert ok is not None and "SUM 45" in ok
        # without the secret (what anyone reaching 7077 had): no result, and (below) never registered
        plain = tmp_path / "plain"
        plain.mkdir()
        assert _submit(cluster, app, plain, timeout=45) is None
        apps = cluster.state()
        names = [a["name"] for a in apps.get("completedapps", []) + apps.get("activeapps", [])]
    assert names == ["binlake-auth-check"]  # only the authenticated application ever registered
