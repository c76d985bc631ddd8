"""docker-compose.yml validates with `docker-compose config -q` and has the documented services."""

from __future__ import annotations

import os
import shutil
import subprocess

import yaml

from binlake.config import REPO_ROOT

COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"
TEST_SECRETS = {"BINLAKE_S3_ACCESS_KEY": "ci-user", "BINLAKE_S3_SECRET_KEY": "ci-secret-not-real",
                "POSTGRES_PASSWORD": "ci-pg-not-real"}


def _compose(*args: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("docker-compose")
    assert exe, "docker-compose missing: `make setup` installs it (apt package docker-compose)"
    env = {k: v for k, v in os.environ.items() if k not in TEST_SECRETS}
    env.update(env_extra or {})
    return subprocess.run([exe, "-f", str(COMPOSE_FILE), *args], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_compose_config_validates() -> None:
    proc = _compose("config", "-q", env_extra=TEST_SECRETS)
    assert proc.returncode == 0, proc.stderr


def test_compose_refuses_to_run_without_secrets() -> None:
    proc = _compose("config", "-q")
    assert proc.returncode != 0
    assert "BINLAKE_S3_ACCESS_KEY" in proc.stderr or "POSTGRES_PASSWORD" in proc.stderr


def test_compose_services_and_wiring() -> None:
    proc = _compose("config", env_extra=TEST_SECRETS)
    assert proc.returncode == 0, proc.stderr
    cfg = yaml.safe_load(proc.stdout)
    services = cfg["services"]
    for name in ("postgres", "airflow-init", "airflow-apiserver", "airflow-scheduler", "airflow-dag-processor",
                 "airflow-triggerer", "spark-master", "spark-worker", "minio", "minio-init"):
        assert name in services, name
    sched = services["airflow-scheduler"]
    env = sched["environment"]
    assert env["BINLAKE_SPARK_MODE"] == "submit"
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql")
    assert "spark://spark-master" in env["AIRFLOW_CONN_SPARK_DEFAULT"]
    mounts = " ".join(str(v) for v in sched["volumes"])
    for folder in (".jars", "conf", "dags", "binlake", "binlog_parser", "spark_jobs", "orchestration"):
        assert f"/opt/binlake/{folder}" in mounts, folder
    assert "mc mb" in " ".join(services["minio-init"]["command"])
    assert "airflow:3.3.2-python3.11" in (REPO_ROOT / "docker" / "airflow.Dockerfile").read_text()


def test_compose_file_commits_no_secrets() -> None:
    text = COMPOSE_FILE.read_text()
    for value in TEST_SECRETS.values():
        assert value not in text
    raw = yaml.safe_load(text)
    assert raw["services"]["minio"]["environment"]["MINIO_ROOT_PASSWORD"].startswith("${")
