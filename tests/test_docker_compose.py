"""docker-compose.yml validates with `docker-compose config -q`, has the documented services, and is shut
by default: ports on 127.0.0.1, no Spark master port, Spark authentication, MinIO root keys in the init
step only (issue 43, item 15)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import yaml

from binlake.config import REPO_ROOT

COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"
TEST_SECRETS = {"MINIO_ROOT_USER": "ci-root", "MINIO_ROOT_PASSWORD": "ci-root-secret-not-real",
                "BINLAKE_PIPELINE_ACCESS_KEY": "ci-pipeline", "BINLAKE_PIPELINE_SECRET_KEY": "ci-pipeline-not-real",
                "BINLAKE_ARCHIVER_ACCESS_KEY": "ci-archiver", "BINLAKE_ARCHIVER_SECRET_KEY": "ci-archiver-not-real",
                "BINLAKE_SPARK_AUTH_SECRET": "ci-spark-secret-not-real", "POSTGRES_PASSWORD": "ci-pg-not-real"}
#: every service, the opt-in archiver included
PROFILES = ("--profile", "archiver")


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
    assert "MINIO_ROOT_USER" in proc.stderr or "POSTGRES_PASSWORD" in proc.stderr
    for name in ("BINLAKE_SPARK_AUTH_SECRET", "BINLAKE_PIPELINE_SECRET_KEY"):
        proc = _compose("config", "-q", env_extra={k: v for k, v in TEST_SECRETS.items() if k != name})
        assert proc.returncode != 0 and name in proc.stderr, (name, proc.stderr)


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
    assert services["minio-init"]["entrypoint"] == ["/bin/sh", "/binlake/minio-init.sh"]
    assert "mc mb --ignore-existing local/binlake-archive local/binlake-lake" in (
        REPO_ROOT / "docker" / "minio-init.sh").read_text()
    assert "airflow:3.3.2-python3.11" in (REPO_ROOT / "docker" / "airflow.Dockerfile").read_text()


def test_compose_file_commits_no_secrets() -> None:
    text = COMPOSE_FILE.read_text()
    for value in TEST_SECRETS.values():
        assert value not in text
    raw = yaml.safe_load(text)
    assert raw["services"]["minio"]["environment"]["MINIO_ROOT_PASSWORD"].startswith("${")


def _services(env_extra: dict[str, str] | None = None) -> dict[str, Any]:
    proc = _compose(*PROFILES, "config", env_extra={**TEST_SECRETS, **(env_extra or {})})
    assert proc.returncode == 0, proc.stderr
    return dict(yaml.safe_load(proc.stdout)["services"])


def _published(services: dict[str, Any]) -> list[tuple[str, str]]:
    """(service, "host_ip:published:target/proto") of every published port."""
    return [(name, str(port)) for name, svc in services.items() for port in svc.get("ports", [])]


def test_published_ports_listen_on_loopback_and_7077_is_not_published() -> None:
    """Airflow, the Spark master (7077: anyone reaching it ran code on the workers) and MinIO were
    published on every interface."""
    ports = _published(_services())
    assert sorted(ports) == [("airflow-apiserver", "127.0.0.1:8080:8080/tcp"), ("minio", "127.0.0.1:9000:9000/tcp"),
                             ("minio", "127.0.0.1:9001:9001/tcp"), ("spark-master", "127.0.0.1:8081:8080/tcp")]
    # an explicit address (a private interface) moves them all; 7077 stays unpublished
    moved = _published(_services({"BINLAKE_BIND_ADDRESS": "10.1.2.3"}))
    assert all(port.startswith("10.1.2.3:") for _, port in moved) and len(moved) == 4
    assert not any(":7077" in port for _, port in ports + moved)


def test_spark_authentication_on_master_workers_and_submitters() -> None:
    services = _services()
    script = "/opt/binlake/docker/spark-auth.sh"
    for name in ("spark-master", "spark-worker", "airflow-scheduler", "airflow-apiserver", "airflow-triggerer",
                 "airflow-dag-processor", "airflow-init"):
        svc = services[name]
        assert script in svc["entrypoint"], name
        assert svc["environment"]["BINLAKE_SPARK_AUTH_SECRET"] == TEST_SECRETS["BINLAKE_SPARK_AUTH_SECRET"], name
        assert svc["environment"]["SPARK_CONF_DIR"] == "/tmp/binlake-spark-conf", name
        assert any(str(v).startswith(f"{REPO_ROOT}/docker/spark-auth.sh:{script}") for v in svc["volumes"]), name
    # the Airflow image's own entrypoint still runs after the wrapper
    assert services["airflow-scheduler"]["entrypoint"][-3:] == ["/usr/bin/dumb-init", "--", "/entrypoint"]


def test_spark_auth_script_writes_a_private_spark_defaults(tmp_path: Path) -> None:
    """What the master, the workers and spark-submit read (SPARK_CONF_DIR/spark-defaults.conf)."""
    conf = tmp_path / "conf"
    env = {"PATH": os.environ["PATH"], "SPARK_CONF_DIR": str(conf), "BINLAKE_SPARK_AUTH_SECRET": "s3cr3t"}
    proc = subprocess.run(["sh", str(REPO_ROOT / "docker/spark-auth.sh"), "sh", "-c", "echo ran $0", "x"],
                          env=env, capture_output=True, text=True, timeout=30, check=False)
    assert (proc.returncode, proc.stdout) == (0, "ran x\n"), proc.stderr
    defaults = conf / "spark-defaults.conf"
    assert defaults.read_text() == "spark.authenticate true\nspark.authenticate.secret s3cr3t\n"
    assert stat.S_IMODE(defaults.stat().st_mode) == 0o600
    proc = subprocess.run(["sh", str(REPO_ROOT / "docker/spark-auth.sh"), "true"], capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"], "SPARK_CONF_DIR": str(conf)}, timeout=30, check=False)
    assert proc.returncode != 0 and "BINLAKE_SPARK_AUTH_SECRET" in proc.stderr


def test_minio_root_keys_only_in_minio_and_its_init() -> None:
    """Every service's environment held the MinIO root keys (the workers' too)."""
    services = _services()
    root = {TEST_SECRETS["MINIO_ROOT_USER"], TEST_SECRETS["MINIO_ROOT_PASSWORD"]}
    holders = sorted(name for name, svc in services.items()
                     if root & {str(v) for v in (svc.get("environment") or {}).values()})
    assert holders == ["minio", "minio-init"]
    keys = {name: (svc.get("environment") or {}).get("AWS_ACCESS_KEY_ID") for name, svc in services.items()}
    assert keys["archiver"] == TEST_SECRETS["BINLAKE_ARCHIVER_ACCESS_KEY"]
    for name in ("spark-worker", "airflow-scheduler", "airflow-apiserver"):
        assert keys[name] == TEST_SECRETS["BINLAKE_PIPELINE_ACCESS_KEY"], name
    assert keys["spark-master"] is None  # runs no task: no S3 keys at all
    assert "BINLAKE_SPARK_AUTH_SECRET" not in services["archiver"]["environment"]


def test_minio_init_makes_one_user_and_policy_per_client() -> None:
    script = (REPO_ROOT / "docker/minio-init.sh").read_text()
    for line in ('user archiver "$BINLAKE_ARCHIVER_ACCESS_KEY"', 'user pipeline "$BINLAKE_PIPELINE_ACCESS_KEY"',
                 'mc admin user add local "$2" "$3"', 'mc admin policy attach local "binlake-$1" --user "$2"'):
        assert line in script
    archiver = json.loads((REPO_ROOT / "docker/minio-policies/archiver.json").read_text())
    pipeline = json.loads((REPO_ROOT / "docker/minio-policies/pipeline.json").read_text())

    def grants(policy: dict[str, Any]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for statement in policy["Statement"]:
            for resource in statement["Resource"]:
                out.setdefault(resource.removeprefix("arn:aws:s3:::"), set()).update(statement["Action"])
        return out

    assert set(grants(archiver)) == {"binlake-archive", "binlake-archive/*"}
    assert "s3:PutObject" in grants(archiver)["binlake-archive/*"]
    assert grants(pipeline)["binlake-archive/*"] == {"s3:GetObject"}  # the pipeline only reads the archive
    assert {"s3:PutObject", "s3:DeleteObject"} <= grants(pipeline)["binlake-lake/*"]


def test_airflow_users_are_not_all_admins() -> None:
    env = _services()["airflow-apiserver"]["environment"]
    assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS"] == "False"
    assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] == "admin:admin,viewer:viewer"
