"""The ``binlake`` console script: ``sql``, ``catalog``, ``spark-conf``, ``serve``, ``coverage``, ``run``,
``config``, ``demo``, ``generate``, ``archive``.

Why typer: sub-commands, ``--help`` pages, option parsing and shell completion come from one
declarative place instead of a hand-written dispatcher. Commands import their modules lazily so
``binlake --help`` and the JVM-free ``binlake sql`` stay fast.

Errors: an expected failure (:class:`binlake.errors.BinlakeError`: a bad config key, a missing
table, an unknown source) prints one line ``binlake: error: ...`` and exits 1, never a traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from binlake.errors import BinlakeError

app = typer.Typer(
    name="binlake",
    help="binlake: archived MySQL/MariaDB binlogs as bronze/silver/meta Delta tables.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

# Commands that hand their arguments to another module's own parser (argparse) untouched.
_PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="config file (default: $BINLAKE_CONFIG, else conf/binlake.toml)"),
]


class OutputFormat(StrEnum):
    """How ``binlake sql`` prints results."""

    table = "table"
    csv = "csv"
    json = "json"


class Engine(StrEnum):
    """Which engine runs ``binlake sql`` (auto: the JVM-free fast path unless Spark is needed)."""

    auto = "auto"
    fast = "fast"
    spark = "spark"


@app.command(help="SQL over the binlake tables (no QUERY: interactive prompt). Read-only queries run "
                  "without a JVM (delta-rs + DuckDB); --engine spark uses Spark SQL. Read-only unless "
                  "--allow-writes (writes then run on Spark under the tables' commit locks).")
def sql(
    query: Annotated[str | None, typer.Argument(help="statement(s) to run, ';'-separated")] = None,
    config: ConfigOption = None,
    output_format: Annotated[OutputFormat, typer.Option("--format", "-f", help="output format")] = OutputFormat.table,
    engine: Annotated[Engine, typer.Option(help="auto | fast (no JVM) | spark")] = Engine.auto,
    max_rows: Annotated[int, typer.Option(help="print at most this many rows (0: all)")] = 1000,
    allow_writes: Annotated[bool, typer.Option(
        "--allow-writes", help="run statements that change tables (DELETE, MERGE, VACUUM ...)")] = False,
) -> None:
    from binlake_cli.sql import SqlOptions, run_sql

    _done(run_sql(SqlOptions(query=query, config=str(config) if config else None,
                             output_format=output_format.value, engine=engine.value, max_rows=max_rows,
                             allow_writes=allow_writes)))


catalog_app = typer.Typer(help="The catalog: every binlake table by name in a persistent metastore.",
                          no_args_is_help=True, rich_markup_mode=None)
app.add_typer(catalog_app, name="catalog")


@catalog_app.command(name="sync", help="Register every table of the warehouse (bronze, silver, meta, gold with "
                                       "its histories and unions) in the metastore (default: embedded Derby "
                                       "under state_dir).")
def catalog_sync(config: ConfigOption = None) -> None:
    from binlake.config import load_config
    from binlake_cli.catalog import sync_catalog

    sync_catalog(load_config(config))


class ConfFormat(StrEnum):
    """How ``binlake spark-conf`` prints the settings."""

    both = "both"
    conf = "conf"
    defaults = "defaults"


@app.command(name="spark-conf", help="Print the Spark settings (as --conf lines and/or a spark-defaults.conf "
                                     "block) with which a plain pyspark / spark-sql session finds the binlake "
                                     "tables by name and reads them.")
def spark_conf_command(
    config: ConfigOption = None,
    output_format: Annotated[ConfFormat, typer.Option("--format", "-f", help="conf | defaults | both")]
    = ConfFormat.both,
) -> None:
    from binlake_cli.catalog import print_spark_conf

    _done(print_spark_conf(str(config) if config else None, output_format.value))


@app.command(help="Serve the tables by name: the Spark Thrift JDBC/ODBC server (HiveServer2 protocol) and/or "
                  "Spark Connect, over the synced catalog, on loopback unless authentication is configured.")
def serve(
    config: ConfigOption = None,
    host: Annotated[str, typer.Option(help="address to listen on (non-loopback needs authentication)")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option(help="the Thrift (JDBC) server's port")] = 10000,
    thrift: Annotated[bool, typer.Option("--thrift/--no-thrift", help="serve JDBC/ODBC")] = True,
    connect: Annotated[bool, typer.Option("--connect/--no-connect", help="serve Spark Connect too")] = False,
    connect_port: Annotated[int, typer.Option(help="Spark Connect's port")] = 15002,
) -> None:
    from binlake_cli.serve import ServeOptions
    from binlake_cli.serve import serve as serve_tables

    _done(serve_tables(ServeOptions(host=host, port=port, thrift=thrift, connect=connect,
                                    connect_port=connect_port, config=str(config) if config else None)))


@app.command(help="Timeline of what the archive holds for SOURCE (gaps, duplicates, chain breaks in red), "
                  "as a self-contained HTML page and a PNG.")
def coverage(
    source: Annotated[str, typer.Argument(help="source name from [[sources]]")],
    out: Annotated[Path, typer.Option("--out", "-o", help="folder for coverage-SOURCE.html/.png")] = Path("."),
    config: ConfigOption = None,
    png: Annotated[bool, typer.Option(help="also write a PNG (headless Chromium)")] = True,
) -> None:
    from binlake.config import load_config
    from binlake.reconcile.report import write_coverage_report

    report = write_coverage_report(load_config(config), source, out, png=png)
    for path in report.files:
        print(path)


class RunKind(StrEnum):
    """Which DAG ``binlake run`` runs."""

    nightly = "nightly"
    backfill = "backfill"


@app.command(help="Run the nightly or backfill DAG once against the configured sources, through Airflow's "
                  "dag.test() (Airflow's own task runner, in this process). Backfill parameters: "
                  "--param source=orders --param mode=missing --param from_file=binlog.000040 ...")
def run(
    kind: Annotated[RunKind, typer.Argument(help="nightly | backfill")],
    config: ConfigOption = None,
    param: Annotated[list[str] | None, typer.Option("--param", "-p", help="backfill parameter KEY=VALUE")] = None,
) -> None:
    from orchestration.run_local import PipelineRunError, run_pipeline

    params: dict[str, object] = {}
    for item in param or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise PipelineRunError(f"--param wants KEY=VALUE, got {item!r}")
        params[key] = value.lower() == "true" if key == "dry_run" else value
    result = run_pipeline(kind.value, params, config_path=str(config) if config else None)
    for line in result.lines():
        print(line)
    _done(0 if result.success else 1)


@app.command(name="config", help="Print the resolved configuration (no secrets are ever in it).")
def config_command(
    path: Annotated[Path | None, typer.Argument(help="config file (default: as for --config)")] = None,
    config: ConfigOption = None,
    example: Annotated[bool, typer.Option("--example", help="print a documented starting point")] = False,
) -> None:
    from binlake.config import EXAMPLE_CONFIG_PATH, load_config

    if example:
        print(EXAMPLE_CONFIG_PATH.read_text(), end="")
        return
    print(json.dumps(asdict(load_config(path or config)), indent=2, default=str))


@app.command(context_settings=_PASS_THROUGH, add_help_option=False,
             help="The end-to-end demo (same as `make demo`; `binlake demo --help` for options).")
def demo(ctx: typer.Context) -> None:
    from binlake_testing.demo import main as demo_main

    _done(int(demo_main(list(ctx.args)) or 0))


@app.command(context_settings=_PASS_THROUGH, add_help_option=False,
             help="Synthetic binlog archive + ground truth (`binlake generate --help` for options).")
def generate(ctx: typer.Context) -> None:
    import argparse

    from binlake_testing.synthetic import build_parser, run_args

    parser = build_parser(argparse.ArgumentParser(
        prog="binlake generate", description="Generate a synthetic MySQL binlog archive with ground truth."))
    _done(int(run_args(parser.parse_args(list(ctx.args))) or 0))


# --- binlake archive -------------------------------------------------------------------------
# The archiver (issue 15) owns its options: it exposes ``archive_command(argv) -> int`` and this
# command hands it every argument untouched.
@app.command(context_settings=_PASS_THROUGH, add_help_option=False,
             help="Archive binlogs from a live server (`binlake archive --help` for options).")
def archive(ctx: typer.Context) -> None:
    from binlake_cli.archive import archive_command

    _done(int(archive_command(list(ctx.args))))


# --- binlake asof / flashback (docs/history.md): one source's table, named the same way in both --------
SourceOption = Annotated[str, typer.Option("--source", "-s", help="source name from [[sources]]")]
TableOption = Annotated[str, typer.Option("--table", "-t", help="db.table")]
CoverageCheckOption = Annotated[bool, typer.Option(help="refuse when reconciliation found a GAP")]


@app.command(help="SOURCE's table db.t as it was at a moment: --gtid (MariaDB d-s-n[,...], a MySQL GTID or GTID "
                  "set: everything up to it), --time (commit time, UTC) or --position FILE:POS; typed like gold. "
                  "Refuses across a GAP, DDL it cannot follow, or a moment outside the archive (docs/history.md).")
def asof(
    source: SourceOption,
    table: TableOption,
    gtid: Annotated[str | None, typer.Option(help="GTID / GTID set: everything up to here")] = None,
    time: Annotated[str | None, typer.Option(help="commit time (YYYY-MM-DD HH:MM:SS[.ffffff], UTC)")] = None,
    position: Annotated[str | None, typer.Option(help="binlog FILE:POS (transactions ending at or before it)")] = None,
    config: ConfigOption = None,
    output_format: Annotated[OutputFormat, typer.Option("--format", "-f", help="output format")] = OutputFormat.table,
    to_delta: Annotated[str | None, typer.Option("--to-delta", help="write a Delta table here instead")] = None,
    overwrite: Annotated[bool, typer.Option(help="replace an existing --to-delta table")] = False,
    coverage_check: CoverageCheckOption = True,
    start: Annotated[str, typer.Option(help="nearest | replay (from the archive's start) | gold (taken back) | history "
                                                  "(gold's __history table)")
                     ] = "nearest",
) -> None:
    from binlake_cli.history import AsofOptions, run_asof

    _done(run_asof(AsofOptions(source, table, gtid, time, position, str(config) if config else None,
                               output_format.value, to_delta, overwrite, coverage_check, start)))


@app.command(help="Print the SQL that undoes what some transactions did to SOURCE's table db.t (reverse binlog "
                  "order, keyed by the primary key); refuses across DDL, TRUNCATE or a GAP; warns about later "
                  "changes to the same rows (docs/history.md).")
def flashback(
    source: SourceOption,
    table: TableOption,
    gtid_range: Annotated[str | None, typer.Option(help="A..B (0-1-5..0-1-9, uuid:5..uuid:9) or uuid:5-9")] = None,
    from_time: Annotated[str | None, typer.Option(help="first commit time (UTC) of the window")] = None,
    to_time: Annotated[str | None, typer.Option(help="last commit time (UTC) of the window")] = None,
    transaction: Annotated[list[str] | None, typer.Option(help="one GTID to undo (repeat the option)")] = None,
    single_transaction: Annotated[bool, typer.Option(help="wrap the undo in START TRANSACTION ... COMMIT")] = False,
    config: ConfigOption = None,
    coverage_check: CoverageCheckOption = True,
) -> None:
    from binlake_cli.history import FlashbackOptions, run_flashback

    _done(run_flashback(FlashbackOptions(source, table, gtid_range, from_time, to_time, list(transaction or []),
                                         single_transaction, str(config) if config else None, coverage_check)))


def _done(code: int) -> None:
    """End a command with ``code`` (typer ignores a command's return value)."""
    if code:
        raise typer.Exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; BinlakeError becomes one line on stderr and exit code 1, usage errors exit 2."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        app(args=args, prog_name="binlake")
    except SystemExit as exc:  # typer/click end every run with sys.exit
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BinlakeError as exc:
        print(f"binlake: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
