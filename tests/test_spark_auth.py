"""The Spark authentication docker-compose.yml turns on works with Spark 4.2 (issue 43, item 15).

A standalone master and worker on loopback read the spark-defaults.conf that docker/spark-auth.sh
writes (the same script the compose services run): the worker registers, a spark-submit with the
same conf runs a job, and a spark-submit without the secret gets no application.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from binlake.config import REPO_ROOT
from binlake_testing.processes import SHORT_JVM_OPTIONS
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


#: short-lived JVMs (master, worker, the drivers): the C1 compiler and the serial collector
#: roughly halve their CPU (see docs/operations.md); authentication does not depend on either
SHORT_JVM = SHORT_JVM_OPTIONS
#: what the master logs when a client connects without authenticating (Spark's AuthRpcHandler)
REFUSED = "Expected SaslMessage, received something else"


def _spark_submit(cluster: SparkStandaloneCluster, app: Path, conf_dir: Path) -> subprocess.Popen[str]:
    env = {**cluster.env(), "SPARK_CONF_DIR": str(conf_dir)}
    return subprocess.Popen([str(spark_home() / "bin" / "spark-submit"), "--master", cluster.master_url,
                             "--conf", "spark.ui.enabled=false", "--conf", "spark.executor.memory=512m",
                             "--conf", f"spark.driver.extraJavaOptions={SHORT_JVM}",
                             "--conf", f"spark.executor.extraJavaOptions={SHORT_JVM}", str(app)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            start_new_session=True)


def _stop(proc: subprocess.Popen[str]) -> str:
    try:
        os.killpg(proc.pid, 9)
    except ProcessLookupError:
        pass
    out, _ = proc.communicate()
    return out


def _submit(cluster: SparkStandaloneCluster, app: Path, conf_dir: Path, timeout: float = 300) -> str | None:
    """spark-submit's stdout, or None when it failed or was still running after ``timeout`` seconds."""
    proc = _spark_submit(cluster, app, conf_dir)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(proc)
        return None
    return out if proc.returncode == 0 else None


def _refused_submit(cluster: SparkStandaloneCluster, app: Path, conf_dir: Path, timeout: float = 300) -> str:
    """A spark-submit the master refuses: runs until the master's log shows it refused a client
    without the secret (or the client gave up), then is stopped; returns what it printed.

    Waiting for the refusal instead of the client's own give-up (three registration attempts, 20 s
    apart) keeps the check and drops a minute of waiting: the client retries with the same conf."""
    refused_before = cluster.log("master").count(REFUSED)
    proc = _spark_submit(cluster, app, conf_dir)
    deadline = time.monotonic() + timeout
    while proc.poll() is None and cluster.log("master").count(REFUSED) == refused_before:
        assert time.monotonic() < deadline, f"the master neither refused nor ran the client after {timeout:.0f}s"
        time.sleep(0.25)
    return _stop(proc)


def test_master_worker_and_submitter_share_the_secret(tmp_path: Path) -> None:
    conf = _auth_conf(tmp_path / "conf", "binlake-test-secret")
    app = tmp_path / "app.py"
    app.write_text(APP)
    cluster = SparkStandaloneCluster(tmp_path / "cluster", workers=1, cores=1, memory="1g",
                                     extra_env={"SPARK_CONF_DIR": str(conf), "SPARK_DAEMON_JAVA_OPTS": SHORT_JVM})
    with cluster:  # start() waits until the worker registered: it authenticated with the secret
        ok = _submit(cluster, app, conf)
        assert ok is not None and "SUM 45" in ok
        # without the secret (what anyone reaching 7077 had): refused, no result, and (below) never registered
        plain = tmp_path / "plain"
        plain.mkdir()
        assert REFUSED not in cluster.log("master")  # the secret's holders were never refused
        assert "SUM" not in _refused_submit(cluster, app, plain)
        assert REFUSED in cluster.log("master")
        apps = cluster.state()
        names = [a["name"] for a in apps.get("completedapps", []) + apps.get("activeapps", [])]
    assert names == ["binlake-auth-check"]  # only the authenticated application ever registered
