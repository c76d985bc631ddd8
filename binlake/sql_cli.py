"""`binlake sql`: Spark SQL over the binlake Delta tables, each registered by its name.

Why: the tables live in folders or buckets, not in a metastore; registering every existing table
of :mod:`binlake.tables` (``CREATE TABLE IF NOT EXISTS bronze.events USING delta LOCATION ...``)
in the session catalog lets people write ``SELECT ... FROM silver.row_changes`` directly.
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass
from typing import Any, Iterable, Sequence, TextIO

from binlake.config import BinlakeConfig, load_config, to_spark_uri
from binlake.tables import DATABASES, TABLES

PROMPT = "binlake> "
CONTINUATION = "     ...> "


@dataclass(frozen=True)
class QueryResult:
    """Column names and rows (as plain Python values) of one statement."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool = False


def delta_table_exists(spark: Any, location: str) -> bool:
    """True when ``location`` holds a Delta table (False on a missing folder or bucket)."""
    from delta.tables import DeltaTable

    try:
        return bool(DeltaTable.isDeltaTable(spark, location))
    except Exception:  # noqa: BLE001 - e.g. bucket does not exist
        return False


def _sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def register_tables(spark: Any, cfg: BinlakeConfig) -> list[str]:
    """Register every existing binlake table by name; returns the names registered.

    Tables not written yet are skipped (their database is still created, so ``SHOW TABLES IN
    silver`` works). Re-registering is harmless (IF NOT EXISTS), and a name already pointing at
    another location (another warehouse in the same session) is re-pointed.
    """
    registered: list[str] = []
    for db in DATABASES:
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {db}")
    for spec in TABLES:
        location = to_spark_uri(spec.location(cfg.warehouse))
        if not delta_table_exists(spark, location):
            continue
        if spark.catalog.tableExists(spec.full_name):
            current = spark.sql(f"DESCRIBE DETAIL {spec.full_name}").collect()[0]["location"]
            if str(current).rstrip("/") != location.rstrip("/") and not str(current).endswith(location.split("://")[-1]):
                spark.sql(f"DROP TABLE {spec.full_name}")
        spark.sql(f"CREATE TABLE IF NOT EXISTS {spec.full_name} USING delta LOCATION {_sql_string(location)}")
        registered.append(spec.full_name)
    return registered


def run_query(spark: Any, query: str, max_rows: int = 1000) -> QueryResult:
    """Run one statement; collect at most ``max_rows`` rows."""
    df = spark.sql(query)
    rows = df.limit(max_rows + 1).collect()
    truncated = len(rows) > max_rows
    return QueryResult(columns=list(df.columns), rows=[tuple(r) for r in rows[:max_rows]], truncated=truncated)


def _cell(value: Any, max_width: int) -> str:
    if value is None:
        text = "NULL"
    elif isinstance(value, (bytes, bytearray)):
        text = "0x" + bytes(value[:16]).hex() + ("..." if len(value) > 16 else "")
    else:
        text = str(value)
    text = text.replace("\n", "\\n").replace("\t", " ")
    return text if len(text) <= max_width else text[: max_width - 3] + "..."


def format_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], max_width: int = 60) -> str:
    """A plain-text table (like the mysql client prints)."""
    cells = [[_cell(v, max_width) for v in row] for row in rows]
    widths = [len(c) for c in columns]
    for row in cells:
        for i, text in enumerate(row):
            widths[i] = max(widths[i], len(text))
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [line, "| " + " | ".join(c.ljust(w) for c, w in zip(columns, widths)) + " |", line]
    for row in cells:
        out.append("| " + " | ".join(t.ljust(w) for t, w in zip(row, widths)) + " |")
    if cells:
        out.append(line)
    return "\n".join(out)


def print_result(result: QueryResult, out: TextIO = sys.stdout) -> None:
    if not result.columns:
        print("OK", file=out)
        return
    print(format_table(result.columns, result.rows), file=out)
    more = " (truncated)" if result.truncated else ""
    print(f"{len(result.rows)} row{'s' if len(result.rows) != 1 else ''}{more}", file=out)


def _split_statements(text: str) -> list[str]:
    """Split on ';' outside quotes (good enough for interactive use)."""
    parts: list[str] = []
    buf: list[str] = []
    quote: str | None = None
    for ch in text:
        if quote:
            if ch == quote:
                quote = None
        elif ch in ("'", '"', "`"):
            quote = ch
        elif ch == ";":
            parts.append("".join(buf))
            buf = []
            continue
        buf.append(ch)
    parts.append("".join(buf))
    return [p.strip() for p in parts if p.strip()]


def interactive(spark: Any, stdin: TextIO = sys.stdin, out: TextIO = sys.stdout, max_rows: int = 1000) -> int:
    """A small REPL: statements end with ';'; 'exit', 'quit' or EOF leaves."""
    try:
        import readline  # noqa: F401 - line editing and history when available
    except ImportError:  # pragma: no cover
        pass
    tty = stdin.isatty()
    print("binlake SQL. Tables: SHOW TABLES IN bronze|silver|meta. End statements with ';'. 'exit' to leave.",
          file=out)
    buffer = ""
    while True:
        prompt = CONTINUATION if buffer else PROMPT
        if tty and stdin is sys.stdin:
            try:
                line = input(prompt)
            except EOFError:
                print(file=out)
                break
        else:
            out.write(prompt)
            out.flush()
            line = stdin.readline()
            if not line:
                break
            line = line.rstrip("\n")
        if not buffer and line.strip().lower().rstrip(";") in ("exit", "quit", "\\q"):
            break
        buffer += line + "\n"
        if ";" not in line:
            continue
        for statement in _split_statements(buffer):
            try:
                print_result(run_query(spark, statement, max_rows), out)
            except Exception as exc:  # noqa: BLE001 - show the error, keep the prompt
                print(f"ERROR: {_short_error(exc)}", file=out)
        buffer = ""
    return 0


def quiet_pyspark_sql_errors() -> None:
    """pyspark logs every failed statement as a JSON stack trace; the CLI prints a one-line error instead."""
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)


def _short_error(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else exc.__class__.__name__


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout, stdin: TextIO = sys.stdin) -> int:
    """Entry for ``binlake sql [QUERY] [--config PATH] [--max-rows N]``."""
    parser = argparse.ArgumentParser(prog="binlake sql", description=__doc__.splitlines()[0])
    parser.add_argument("query", nargs="?", help="SQL to run; omit for an interactive prompt")
    parser.add_argument("--config", help="config file (default: $BINLAKE_CONFIG or conf/binlake.toml)")
    parser.add_argument("--max-rows", type=int, default=1000)
    args = parser.parse_args(argv)

    from binlake.spark import spark_session

    quiet_pyspark_sql_errors()
    cfg = load_config(args.config)
    with spark_session(cfg, "binlake-sql", ui=False) as spark:
        registered = register_tables(spark, cfg)
        if not args.query:
            print(f"registered: {', '.join(registered) or '(no tables yet under ' + cfg.warehouse + ')'}", file=out)
            return interactive(spark, stdin=stdin, out=out, max_rows=args.max_rows)
        status = 0
        for statement in _split_statements(args.query):
            try:
                print_result(run_query(spark, statement, args.max_rows), out)
            except Exception as exc:  # noqa: BLE001
                print(f"ERROR: {_short_error(exc)}", file=sys.stderr)
                status = 1
        return status
