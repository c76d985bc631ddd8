"""Airflow-connection credentials stay fresh in long steps (issue 43, item 15).

They used to be copied into the task's env once, at task start: role credentials then expired in a
step longer than their life. Now the task process serves them on a loopback container-credentials
endpoint that the SDKs read again before the expiry it reports (orchestration/credentials.py).
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import subprocess
import sys
from typing import Any

import pytest

from binlake_testing.s3server import S3Server
from orchestration.credentials import CredentialsEndpoint, export_airflow_aws_credentials

#: a child process with only the exported AWS variables: one boto3 session, read twice, then a request
CHILD = """
import json, sys, time, boto3
session = boto3.Session(region_name="us-east-1")
first = session.get_credentials().get_frozen_credentials().access_key
time.sleep(1.5)
second = session.get_credentials().get_frozen_credentials().access_key
buckets = [b["Name"] for b in session.client("s3", endpoint_url=sys.argv[1]).list_buckets()["Buckets"]]
print(json.dumps([first, second, buckets]))
"""


def _child_env(exported: dict[str, str]) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return {**keep, **{k: v for k, v in exported.items() if k.startswith("AWS_")}}


def _run_child(env: dict[str, str], endpoint_url: str) -> list[Any]:
    proc = subprocess.run([sys.executable, "-c", CHILD, endpoint_url], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return list(json.loads(proc.stdout))


def test_a_long_running_client_gets_each_refreshed_key(s3_server: S3Server, s3_bucket: str) -> None:
    """Role credentials that expire in 5 minutes: a boto3 session created once sees the next ones."""
    from botocore.credentials import RefreshableCredentials

    counter = itertools.count(1)

    def refresh() -> dict[str, str]:
        n = next(counter)
        expiry = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)  # inside botocore's refresh window
        return {"access_key": f"ROLEKEY{n}", "secret_key": f"secret{n}", "token": f"token{n}",
                "expiry_time": expiry.isoformat()}

    credentials = RefreshableCredentials.create_from_metadata(refresh(), refresh, "test")
    endpoint = CredentialsEndpoint(credentials).start()
    try:
        exported: dict[str, str] = {"AWS_ACCESS_KEY_ID": "STATIC", "AWS_PROFILE": "someone"}
        endpoint.export(exported)
        assert "AWS_ACCESS_KEY_ID" not in exported and "AWS_PROFILE" not in exported
        first, second, buckets = _run_child(_child_env(exported), s3_server.endpoint_url)
    finally:
        endpoint.stop()
    assert first.startswith("ROLEKEY") and second.startswith("ROLEKEY")
    assert int(second.removeprefix("ROLEKEY")) > int(first.removeprefix("ROLEKEY"))
    assert s3_bucket in buckets


def test_the_endpoint_wants_its_token() -> None:
    import urllib.error
    import urllib.request

    from botocore.credentials import Credentials

    endpoint = CredentialsEndpoint(Credentials("AK", "SK")).start()
    try:
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(endpoint.uri, timeout=10)  # noqa: S310 - loopback
        assert info.value.code == 403
        request = urllib.request.Request(endpoint.uri, headers={"Authorization": endpoint.token})
        with urllib.request.urlopen(request, timeout=10) as resp:  # noqa: S310 - loopback
            doc = json.loads(resp.read())
    finally:
        endpoint.stop()
    assert (doc["AccessKeyId"], doc["SecretAccessKey"], doc["Token"]) == ("AK", "SK", "")
    assert dt.datetime.strptime(doc["Expiration"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC) > dt.datetime.now(dt.UTC)


def test_an_airflow_connection_is_served_not_copied(s3_server: S3Server, s3_bucket: str, tmp_path: Any,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Through Airflow's own hook (connection from AIRFLOW_CONN_<ID>, a role assumed with STS on the
    loopback server): the role's keys are served, none lands in the env."""
    import dataclasses

    from conftest import make_test_config

    cfg = make_test_config(tmp_path, s3_server.endpoint_url)
    cfg = dataclasses.replace(cfg, s3=dataclasses.replace(cfg.s3, aws_conn_id="lake_aws"))
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_AWS", json.dumps({
        "conn_type": "aws", "login": "BASEKEY", "password": "base-secret",
        "extra": {"role_arn": "arn:aws:iam::123456789012:role/binlake", "region_name": "us-east-1",
                  "endpoint_url": s3_server.endpoint_url,
                  "service_config": {"sts": {"endpoint_url": s3_server.endpoint_url}}}}))
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SHARED_CREDENTIALS_FILE",
                 "AWS_CONFIG_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "STALE")
    export_airflow_aws_credentials(cfg)
    try:
        assert "AWS_ACCESS_KEY_ID" not in os.environ
        assert os.environ["AWS_CONTAINER_CREDENTIALS_FULL_URI"].startswith("http://127.0.0.1:")
        first, second, buckets = _run_child(_child_env(dict(os.environ)), s3_server.endpoint_url)
    finally:
        from orchestration import credentials

        served = credentials._ENDPOINTS.pop("lake_aws", None)
        if served is not None:
            served.stop()
    assert first == second and first not in ("BASEKEY", "STALE") and s3_bucket in buckets
