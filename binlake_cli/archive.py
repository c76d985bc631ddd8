"""``binlake archive`` / ``python -m binlake_cli.archive``: the archiver's command line and service entry.

Why its own module: the archiver runs as a long-lived service in a small image (PyMySQL, boto3,
pydantic; no typer, no Spark, no Airflow), so this entry imports only :mod:`binlake.archive.archiver`.
With ``airflow_conn_id`` the host, port, user and password come from that Airflow connection
(:func:`orchestration.credentials.airflow_mysql_login`, imported only then).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
from pathlib import Path
from typing import Any

from binlake.archive.archiver import Archiver, ArchiverSettings, exit_code_of, load_settings
from binlake.archive.errors import ArchiverError
from binlake.errors import BinlakeError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="binlake archive",
        description="Stream a MySQL/MariaDB server's binlogs into the archive as a replica, byte for byte. "
                    "Password: BINLAKE_ARCHIVE_PASSWORD or MYSQL_PWD (or --airflow-conn-id).")
    parser.add_argument("--source", help="source name (binlake config [[sources]])")
    parser.add_argument("--dest", help="archive prefix for this source (s3://bucket/prefix/ or folder)")
    parser.add_argument("--config", default=os.environ.get("BINLAKE_CONFIG"), help="binlake TOML config")
    parser.add_argument("--status", action="store_true", help="print the running archiver's status and exit")
    for name, kind in (("host", str), ("port", int), ("user", str), ("server-id", int), ("spool-dir", Path),
                       ("upload-bytes", int), ("upload-interval-s", float), ("fsync-interval-s", float),
                       ("heartbeat-s", float), ("progress-interval-s", float), ("start-file", str),
                       ("start-gtid", str), ("ssl-mode", str), ("ssl-ca", str), ("ssl-cert", str), ("ssl-key", str),
                       ("airflow-conn-id", str), ("s3-endpoint-url", str), ("reconnect-attempts", int)):
        parser.add_argument(f"--{name}", type=kind, default=None)
    parser.add_argument("--stop-at-end", action="store_true", default=None,
                        help="stop when the server's last binlog is reached (non-blocking dump)")
    parser.add_argument("--ssl-verify-identity", action=argparse.BooleanOptionalAction, default=None,
                        help="check the server certificate's host name (default: on when --ssl-ca is set)")
    parser.add_argument("--new-series", action="store_true", default=None,
                        help="archive this server as a new series (after a failover or RESET MASTER), from "
                             "--start-file or its first binlog; archived files are never overwritten")
    return parser


def with_airflow_login(settings: ArchiverSettings) -> tuple[ArchiverSettings, str | None]:
    """Settings with host/port/user of the ``airflow_conn_id`` connection (where it sets them) and
    its password; unchanged settings and None (password from the env) without one."""
    if not settings.airflow_conn_id:
        return settings, None
    from orchestration.credentials import airflow_mysql_login

    login = airflow_mysql_login(settings.airflow_conn_id)
    resolved = dataclasses.replace(settings, host=login.host or settings.host, port=login.port or settings.port,
                                   user=login.user or settings.user)
    return resolved, login.password


def archive_command(argv: list[str]) -> int:
    """``binlake archive ...``: 0 when done; with one clear message, 1 on an error a restart may
    cure (a lost server, another archiver holding the destination) and 2 on one it would only repeat
    (a different server, an unsafe file name, a purged gap, a broken spool): systemd's
    ``RestartPreventExitStatus=2`` stops there instead of looping."""
    args = build_parser().parse_args(argv)
    cli = {k: v for k, v in vars(args).items() if k not in ("config", "status") and v is not None}
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        if args.status:
            return _print_status(cli, args.config)
        settings, password = with_airflow_login(load_settings(cli, args.config))
        Archiver(settings, password=password).run()
    except BinlakeError as exc:
        print(f"binlake archive: {exc}", file=sys.stderr)
        return exit_code_of(exc)
    except KeyboardInterrupt:
        return 130
    return 0


def _print_status(cli: dict[str, Any], config_path: str | None) -> int:
    """The status file of the archiver of ``--source`` (in its spool folder, as configured)."""
    path = load_settings({"dest": "-", **cli}, config_path).source_spool / "status.json"
    if not path.is_file():
        raise ArchiverError(f"no archiver status at {path} (has `binlake archive` run with this spool dir?)")
    print(path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(archive_command(sys.argv[1:]))
