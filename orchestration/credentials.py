"""Credentials of an Airflow AWS connection for the pipeline's tasks (boto3 and S3A read the env).

The object store is reached with the standard AWS chain; under Airflow, ``[s3].aws_conn_id`` may
name an Airflow connection instead, and its credentials are put in the task process's env here
(never written to disk or logs), where boto3, S3A and a spark-submit child process all find them.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

from binlake.config import BinlakeConfig

log = logging.getLogger("binlake.pipeline")


def export_airflow_aws_credentials(cfg: BinlakeConfig) -> None:
    """When ``s3.aws_conn_id`` names an Airflow connection, put its credentials in this process's env.

    Why env: both boto3 and S3A's DefaultCredentialsProvider read it, and nothing is written to disk
    or logged. A missing connection or no Airflow means the standard AWS chain is used as is.
    """
    if not cfg.s3.aws_conn_id:
        return
    try:
        from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

        creds = AwsBaseHook(aws_conn_id=cfg.s3.aws_conn_id, client_type="s3").get_credentials()
    except Exception:  # noqa: BLE001 - fall back to the default chain
        log.info("Airflow connection %s not usable; using the default AWS credentials chain", cfg.s3.aws_conn_id)
        return
    if creds.access_key and creds.secret_key:
        os.environ["AWS_ACCESS_KEY_ID"] = creds.access_key
        os.environ["AWS_SECRET_ACCESS_KEY"] = creds.secret_key
        if creds.token:
            os.environ["AWS_SESSION_TOKEN"] = creds.token


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
