"""Credentials of an Airflow AWS connection for the pipeline's tasks, refreshed while a step runs.

The object store is reached with the standard AWS chain; under Airflow, ``[s3].aws_conn_id`` may
name an Airflow connection instead. Its credentials used to be copied into the task's env once,
at task start: role (STS) credentials then expired in a step longer than their life (an hour by
default), and the step failed half way.

Now the task process serves them on a loopback HTTP endpoint in the AWS *container credentials*
format (:class:`CredentialsEndpoint`) and exports ``AWS_CONTAINER_CREDENTIALS_FULL_URI`` plus a
random ``AWS_CONTAINER_AUTHORIZATION_TOKEN``. Every AWS SDK's default chain reads that endpoint and
fetches again before the expiry it reports: boto3 (discovery, the archiver's and the leases'
clients), the AWS SDK v2 behind S3A (``DefaultCredentialsProvider``: the in-process Spark driver,
and the spark-submit child, which inherits the env and reaches its parent's endpoint). The
endpoint answers from the connection's boto3 session (``AwsBaseHook.get_session()``), whose
role credentials botocore refreshes itself; no secret is written to disk, env or logs. Static
keys and shared credential files are taken out of the chain's way (the connection is what was
asked for). A connection with static keys (no expiry) is still copied into the env: nothing to
refresh.

Not covered: executors on other hosts (127.0.0.1 is theirs): they use their own chain
(instance role, ``spark.executorEnv.AWS_*``), as before; a delta-rs call receives the
credentials boto3 holds when it starts (``binlake.lake.delta_tables.storage_options``).
"""

from __future__ import annotations

import datetime as dt
import http.server
import json
import logging
import os
import secrets
import threading
from dataclasses import dataclass, field
from typing import Any

from binlake.config import BinlakeConfig

log = logging.getLogger("binlake.pipeline")

#: env variables of static credentials and shared files that would come before the endpoint
_SHADOWING = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
              "AWS_DEFAULT_PROFILE")
#: how long credentials without an expiry (static keys) are reported valid (the SDKs fetch again then)
_STATIC_LIFE = dt.timedelta(hours=1)


class CredentialsEndpoint:
    """A loopback HTTP endpoint serving ``credentials`` (botocore ``Credentials``; refreshable ones
    are refreshed by botocore when read) in the container-credentials JSON format, to callers
    presenting ``token`` in their ``Authorization`` header."""

    def __init__(self, credentials: Any) -> None:
        self.credentials = credentials
        self.token = secrets.token_urlsafe(32)
        endpoint = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if not secrets.compare_digest(self.headers.get("Authorization", ""), endpoint.token):
                    self.send_error(403)
                    return
                body = json.dumps(endpoint.document()).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.uri = f"http://127.0.0.1:{self.server.server_address[1]}/binlake/credentials"
        self._thread = threading.Thread(target=self.server.serve_forever, name="binlake-credentials", daemon=True)

    def start(self) -> CredentialsEndpoint:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def document(self) -> dict[str, str]:
        """The current credentials (refreshed first when near their expiry) and when they expire."""
        frozen = self.credentials.get_frozen_credentials()
        expiry = getattr(self.credentials, "_expiry_time", None)
        if not isinstance(expiry, dt.datetime):
            expiry = dt.datetime.now(dt.UTC) + _STATIC_LIFE
        return {"AccessKeyId": frozen.access_key, "SecretAccessKey": frozen.secret_key, "Token": frozen.token or "",
                "Expiration": expiry.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}

    def export(self, env: Any = None) -> None:
        """Point this process's AWS chain (and its children's) at the endpoint, and nothing before it."""
        env = os.environ if env is None else env
        for name in _SHADOWING:
            env.pop(name, None)
        env["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
        env["AWS_CONFIG_FILE"] = os.devnull
        env["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = self.uri
        env["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = self.token


#: one endpoint per connection id and process (tasks of one process share it: ``dag.test()``)
_ENDPOINTS: dict[str, CredentialsEndpoint] = {}
_ENDPOINTS_LOCK = threading.Lock()


def serve_credentials(conn_id: str, credentials: Any) -> CredentialsEndpoint:
    """The process's endpoint for ``conn_id`` (started on first use, its credentials replaced by
    ``credentials`` after), exported to the env."""
    with _ENDPOINTS_LOCK:
        endpoint = _ENDPOINTS.get(conn_id)
        if endpoint is None:
            endpoint = _ENDPOINTS[conn_id] = CredentialsEndpoint(credentials).start()
        endpoint.credentials = credentials
        endpoint.export()
        return endpoint


def export_airflow_aws_credentials(cfg: BinlakeConfig) -> None:
    """When ``s3.aws_conn_id`` names an Airflow connection, serve its (refreshing) credentials to this
    process and its children (module doc). A missing connection or no Airflow means the standard AWS
    chain is used as is."""
    if not cfg.s3.aws_conn_id:
        return
    try:
        from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

        credentials = AwsBaseHook(aws_conn_id=cfg.s3.aws_conn_id, client_type="s3").get_session().get_credentials()
    except Exception:  # noqa: BLE001 - fall back to the default chain
        log.info("Airflow connection %s not usable; using the default AWS credentials chain", cfg.s3.aws_conn_id)
        return
    frozen = credentials.get_frozen_credentials() if credentials is not None else None
    if frozen is None or not frozen.access_key:
        log.info("Airflow connection %s holds no AWS credentials; using the default chain", cfg.s3.aws_conn_id)
        return
    if getattr(credentials, "_expiry_time", None) is not None:  # role / STS credentials: they expire
        serve_credentials(cfg.s3.aws_conn_id, credentials)
        return
    # static keys never expire: the env, as before (no endpoint, nothing to refresh)
    os.environ["AWS_ACCESS_KEY_ID"] = frozen.access_key
    os.environ["AWS_SECRET_ACCESS_KEY"] = frozen.secret_key
    if frozen.token:
        os.environ["AWS_SESSION_TOKEN"] = frozen.token


@dataclass(frozen=True)
class MysqlLogin:
    """Where and as whom the archiver's replica connects, from an Airflow connection (never logged)."""

    host: str | None
    port: int | None
    user: str | None
    password: str = field(repr=False)


def airflow_mysql_login(conn_id: str) -> MysqlLogin:
    """The host, port, user and password of Airflow connection ``conn_id`` (any secrets backend
    Airflow is configured with, incl. ``AIRFLOW_CONN_<ID>`` env variables)."""
    from airflow.sdk import BaseHook

    conn = BaseHook.get_connection(conn_id)
    return MysqlLogin(host=conn.host or None, port=int(conn.port) if conn.port else None,
                      user=conn.login or None, password=conn.password or "")
