"""``binlake serve``: the binlake tables over JDBC/ODBC (Spark Thrift server) and Spark Connect.

Why: BI tools (DBeaver, Superset, Tableau) speak HiveServer2's protocol and notebooks speak Spark
Connect; both need a long-running Spark driver over the tables by name. The pip pyspark ships
both servers, so one driver process runs them: it opens the persistent catalog
(:mod:`binlake.lake.catalog`), registers every table of the warehouse (``binlake catalog sync``),
then starts ``HiveThriftServer2`` inside the session (and the Spark Connect plugin when asked)
and serves until SIGINT/SIGTERM.

On loopback by default. Another address is refused unless authentication is configured in
``[spark.conf]``: ``spark.hadoop.hive.server2.authentication`` (LDAP, KERBEROS, CUSTOM) for the
Thrift server, ``spark.connect.authenticate.token`` for Spark Connect: the tables hold every
row the sources ever wrote.
"""

from __future__ import annotations

import ipaddress
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from binlake.config import BinlakeConfig, load_config
from binlake.errors import BinlakeError

AUTH_KEY = "spark.hadoop.hive.server2.authentication"
CONNECT_TOKEN_KEY = "spark.connect.authenticate.token"
CONNECT_PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"
THRIFT_SERVER = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
#: HiveServer2 authentication modes that let anyone in
NO_AUTH = ("", "NONE", "NOSASL")


class UnsafeBindError(BinlakeError):
    """A non-loopback address without authentication configured."""


@dataclass(frozen=True)
class ServeOptions:
    """What ``binlake serve`` was asked to serve, and where."""

    host: str = "127.0.0.1"
    port: int = 10000  # HiveServer2's usual port
    thrift: bool = True
    connect: bool = False
    connect_port: int = 15002  # Spark Connect's usual port
    config: str | None = None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(cfg: BinlakeConfig, options: ServeOptions) -> None:
    """UnsafeBindError for a non-loopback address whose servers have no authentication configured."""
    if is_loopback(options.host):
        return
    extra = cfg.spark.extra_conf
    if options.thrift and str(extra.get(AUTH_KEY, "")).upper() in NO_AUTH:
        raise UnsafeBindError(
            f"binlake serve on {options.host} (not loopback) needs authentication for the Thrift server: "
            f"set {AUTH_KEY} (LDAP, KERBEROS or CUSTOM, with its settings) in [spark.conf] of "
            f"{cfg.config_path or 'the config'}, or serve on 127.0.0.1 behind an authenticating proxy")
    if options.connect and not extra.get(CONNECT_TOKEN_KEY):
        raise UnsafeBindError(
            f"binlake serve --connect on {options.host} (not loopback) needs {CONNECT_TOKEN_KEY} "
            f"in [spark.conf] of {cfg.config_path or 'the config'} (clients then send it as a bearer token)")


def server_conf(options: ServeOptions) -> dict[str, str]:
    """The Thrift server's and Spark Connect's address settings."""
    conf = {
        "spark.hadoop.hive.server2.thrift.bind.host": options.host,
        "spark.hadoop.hive.server2.thrift.port": str(options.port),
        "spark.hadoop.hive.server2.transport.mode": "binary",
        "spark.sql.hive.thriftServer.singleSession": "false",
    }
    if options.connect:
        conf.update({"spark.plugins": CONNECT_PLUGIN, "spark.connect.grpc.binding.address": options.host,
                     "spark.connect.grpc.binding.port": str(options.connect_port)})
    return conf


def endpoints(options: ServeOptions) -> list[str]:
    """The addresses clients connect to (printed once the servers are up)."""
    lines = []
    if options.thrift:
        lines.append(f"JDBC: jdbc:hive2://{options.host}:{options.port}/default")
    if options.connect:
        lines.append(f"Spark Connect: sc://{options.host}:{options.connect_port}")
    return lines


def serve(options: ServeOptions, out: TextIO = sys.stdout, stop: threading.Event | None = None) -> int:
    """Start the servers over the synced catalog and serve until SIGINT/SIGTERM (or ``stop`` is set)."""
    from binlake_cli.catalog import metastore_where, prepare
    from spark_jobs.catalog import register_tables
    from spark_jobs.session import spark_session
    from spark_jobs.sql_engine import quiet_pyspark_sql_errors, stderr_to_file

    cfg = load_config(options.config)
    check_bind(cfg, options)
    if not (options.thrift or options.connect):
        raise BinlakeError("binlake serve: nothing to serve (--no-thrift without --connect)")
    prepare(cfg)
    stop = stop or _stop_on_signals()
    quiet_pyspark_sql_errors()
    log = Path(cfg.state_dir) / "logs" / "binlake-serve-spark.log"
    with stderr_to_file(log), spark_session(cfg, "binlake-serve", catalog=True, extra=server_conf(options)) as spark:
        names = register_tables(spark, cfg)
        server = None
        if options.thrift:
            jvm = spark.sparkContext._jvm
            assert jvm is not None
            server = jvm.org.apache.spark.sql.hive.thriftserver.HiveThriftServer2.startWithContext(
                spark._jsparkSession.sqlContext())
        print(f"binlake serve: {len(names)} table(s) of {cfg.warehouse} in {metastore_where(cfg)}", file=out)
        for line in endpoints(options):
            print(line, file=out)
        print(f"Spark's log: {log}; Ctrl-C stops", file=out)
        out.flush()
        while not stop.wait(0.5):
            pass
        if server is not None:
            server.stop()
    return 0


def _stop_on_signals() -> threading.Event:
    """An event set by SIGINT or SIGTERM (the servers then stop and the metastore is released)."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    return stop
