"""`binlake sql`: SQL over the binlake Delta tables, each addressed by its name (``silver.row_changes``).

Two engines behind one prompt:

* the **fast path** (:mod:`binlake.sql.fast`, delta-rs + DuckDB, no JVM) runs every read-only
  statement (SELECT, WITH, DESCRIBE, SHOW TABLES) in well under a second;
* **Spark** (:mod:`spark_jobs.sql_engine`) runs what the fast path cannot translate, everything
  under ``--engine spark``, and writes. It is started only when first needed.

Read-only by default: a statement that changes a table (DELETE, INSERT, MERGE, VACUUM, OPTIMIZE,
ALTER, DROP ...) is refused before any engine starts unless ``--allow-writes`` is given; then it
runs on Spark under the commit locks of the tables it writes (:mod:`binlake.sql.guard` tells which),
like the jobs' own writes. Names outside the warehouse are refused either way.

Results print as a rich table, CSV or JSON Lines, with full cell values (:mod:`binlake.sql.values`).
The interactive prompt (prompt_toolkit) keeps a history file under ``state_dir``, completes table
and column names, and Ctrl-C cancels the statement being typed or run, not the prompt.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from binlake.config import BinlakeConfig, load_config
from binlake.errors import BinlakeError
from binlake.history.table_function import ASOF_TABLE, asof_table_function
from binlake.lake.tables import TableSpec
from binlake.sql.fast import FastWarehouse, NeedsSparkError, QueryResult, show_statement
from binlake.sql.guard import analyse

if TYPE_CHECKING:  # pragma: no cover - the Spark engine is imported only when first needed (a JVM)
    from spark_jobs.sql_engine import SparkSqlEngine

PROMPT = "binlake> "
CONTINUATION = "     ...> "
SQL_KEYWORDS = (
    "SELECT", "FROM", "WHERE", "GROUP BY", "ORDER BY", "HAVING", "LIMIT", "JOIN", "LEFT JOIN", "ON",
    "AS", "AND", "OR", "NOT", "NULL", "IS", "IN", "COUNT", "SUM", "MIN", "MAX", "DISTINCT", "WITH",
    "DESCRIBE", "SHOW TABLES", "SHOW DATABASES", "CASE", "WHEN", "THEN", "ELSE", "END", "DESC", "ASC",
)


@dataclass(frozen=True)
class SqlOptions:
    """What ``binlake sql`` was asked to do."""

    query: str | None = None
    config: str | None = None
    output_format: str = "table"  # table | csv | json
    engine: str = "auto"  # auto | fast | spark
    max_rows: int = 1000  # 0: no limit
    allow_writes: bool = False  # run statements that change tables (under their commit locks)


class Engine(Protocol):
    """What the CLI needs of an engine (fast path or Spark)."""

    def run(self, statement: str, max_rows: int = 0) -> QueryResult: ...
    def existing_tables(self) -> list[TableSpec]: ...
    def close(self) -> None: ...


_FAST_ONLY = re.compile(rf"\b{ASOF_TABLE}\s*\(", re.IGNORECASE)


def _refuse_fast_only(statement: str, why: str) -> None:
    """``asof_table(...)`` is computed by binlake (delta-rs), which only the fast path calls."""
    if _FAST_ONLY.search(statement):
        raise BinlakeError(f"asof_table(...) runs on the fast path only ({why}); use binlake asof --to-delta "
                           "and query that table on Spark")


class SqlSession:
    """Routes each statement to the fast path or Spark (per ``engine``) and remembers both engines."""

    def __init__(self, cfg: BinlakeConfig, engine: str = "auto", err: TextIO = sys.stderr,
                 allow_writes: bool = False) -> None:
        self.cfg = cfg
        self.engine = engine
        self.allow_writes = allow_writes
        self.err = err
        self._fast: FastWarehouse | None = None
        self._spark: SparkSqlEngine | None = None

    @property
    def fast(self) -> FastWarehouse:
        if self._fast is None:
            self._fast = FastWarehouse(self.cfg, table_functions={ASOF_TABLE: asof_table_function(self.cfg)})
        return self._fast

    @property
    def spark(self) -> SparkSqlEngine:
        if self._spark is None:
            from spark_jobs.sql_engine import SparkSqlEngine

            self._spark = SparkSqlEngine(self.cfg, allow_writes=self.allow_writes)
        return self._spark

    def primary(self) -> Engine:
        return self.spark if self.engine == "spark" else self.fast

    def run(self, statement: str, max_rows: int) -> QueryResult:
        if show_statement(statement) is None:
            access = analyse(statement)  # a name outside the warehouse: refused here, before any engine
            access.refuse_unless(self.allow_writes)
            if not access.read_only:
                if self.engine == "fast":
                    raise BinlakeError(f"the fast path runs no {access.verb}; try --engine spark")
                try:
                    return self.spark.run(statement, max_rows)
                finally:  # the fast path holds the versions it opened: read the new ones next time
                    if self._fast is not None:
                        self._fast.close()
                        self._fast = None
        if self.engine == "spark":
            _refuse_fast_only(statement, "--engine spark")
            return self.spark.run(statement, max_rows)
        try:
            return self.fast.run(statement, max_rows)
        except NeedsSparkError as exc:
            _refuse_fast_only(statement, f"the rest of the statement needs Spark: {exc}")
            if self.engine == "fast":
                raise BinlakeError(f"the fast path cannot run this statement ({exc}); try --engine spark") from None
            print(f"(running on Spark: {exc})", file=self.err)
            return self.spark.run(statement, max_rows)

    def cancel(self) -> None:
        if self._fast is not None:
            self._fast.connection.interrupt()
        if self._spark is not None:
            self._spark.cancel()

    def columns_for_completion(self) -> list[str]:
        """``db.table`` names and their column names (for the prompt's completer)."""
        words: list[str] = []
        engine = self.primary()
        for spec in engine.existing_tables():
            words.append(spec.full_name)
            if engine is self.fast:
                words += [str(row[0]) for row in self.fast.run(f"DESCRIBE {spec.full_name}").rows
                          if row[0] and not str(row[0]).startswith("#")]
            else:
                words += self.spark.columns(spec)
        return list(dict.fromkeys(words))

    def close(self) -> None:
        for engine in (self._fast, self._spark):
            if engine is not None:
                engine.close()


def print_result(result: QueryResult, output_format: str = "table", out: TextIO = sys.stdout) -> None:
    """Print one statement's result in the chosen format (full values, nothing cut)."""
    from binlake.sql.values import write_csv, write_json_lines, write_table

    if output_format == "csv":
        write_csv(result.columns, result.rows, out)
    elif output_format == "json":
        write_json_lines(result.columns, result.rows, out)
    elif not result.columns:
        print("OK", file=out)
    else:
        write_table(result.columns, result.rows, out)
        more = " (truncated: --max-rows)" if result.truncated else ""
        print(f"{len(result.rows)} row{'s' if len(result.rows) != 1 else ''}{more}", file=out)
    out.flush()


def split_statements(text: str) -> list[str]:
    """Split on ';' outside quotes and comments (sqlglot's tokenizer knows SQL's quoting rules)."""
    import sqlglot
    from sqlglot.errors import TokenError
    from sqlglot.tokens import TokenType

    try:
        tokens = sqlglot.tokenize(text, read="spark")
    except TokenError:
        return [text.strip()] if text.strip() else []
    parts, start = [], 0
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            parts.append(text[start:token.start])
            start = token.end + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def run_statements(session: SqlSession, text: str, options: SqlOptions, out: TextIO, err: TextIO) -> int:
    """Run each statement of ``text``; an error is one line on ``err`` and the next statement still runs."""
    status = 0
    for statement in split_statements(text):
        try:
            print_result(session.run(statement, options.max_rows), options.output_format, out)
        except KeyboardInterrupt:
            session.cancel()
            print("statement cancelled", file=err)
            status = 130
        except Exception as exc:  # noqa: BLE001 - Spark/DuckDB errors too: one line, keep going
            print(f"ERROR: {short_error(exc)}", file=err)
            status = 1
    return status


def short_error(exc: BaseException) -> str:
    """The first line of an error (Spark and DuckDB append plans and stack traces)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else exc.__class__.__name__


def run_sql(options: SqlOptions, out: TextIO | None = None, err: TextIO | None = None,
            stdin: TextIO | None = None) -> int:
    """Entry of ``binlake sql``: one-shot when a query is given, else the interactive prompt."""
    out, err, stdin = out or sys.stdout, err or sys.stderr, stdin or sys.stdin
    cfg = load_config(options.config)
    session = SqlSession(cfg, options.engine, err=err, allow_writes=options.allow_writes)
    try:
        if options.query:
            return run_statements(session, options.query, options, out, err)
        return interactive(session, options, out=out, err=err, stdin=stdin)
    finally:
        session.close()


def interactive(session: SqlSession, options: SqlOptions, out: TextIO = sys.stdout, err: TextIO = sys.stderr,
                stdin: TextIO = sys.stdin, prompt_input: Any = None, prompt_output: Any = None) -> int:
    """The prompt: prompt_toolkit on a terminal (or given input/output), plain lines from a pipe."""
    tables = ", ".join(spec.full_name for spec in session.primary().existing_tables())
    print(f"binlake SQL on {session.cfg.warehouse}\ntables: {tables or '(none yet)'}\n"
          "End statements with ';'. Ctrl-C cancels, Ctrl-D or 'exit' leaves.", file=out)
    if prompt_input is None and not stdin.isatty():
        return _pipe_loop(session, options, stdin, out, err)
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory

    history = Path(session.cfg.state_dir) / "sql_history"
    history.parent.mkdir(parents=True, exist_ok=True)
    prompt = PromptSession[str](
        history=FileHistory(str(history)), input=prompt_input, output=prompt_output,
        completer=make_completer(session), multiline=True, key_bindings=_enter_runs_complete_statements(),
        prompt_continuation=CONTINUATION)
    while True:
        try:
            text = prompt.prompt(PROMPT)
        except KeyboardInterrupt:  # Ctrl-C while typing: drop the statement, keep the prompt
            continue
        except EOFError:
            break
        if _is_exit(text):
            break
        run_statements(session, text, options, out, err)
    return 0


def _is_exit(text: str) -> bool:
    return text.strip().lower().rstrip(";") in ("exit", "quit", "\\q")


def _enter_runs_complete_statements() -> Any:
    """Enter submits once the text ends with ';' (or is exit/empty); before that it starts a new line.

    Why: a statement spanning lines is one history entry, edited and recalled as a whole.
    """
    from prompt_toolkit.key_binding import KeyBindings

    bindings = KeyBindings()

    @bindings.add("enter")
    def _enter(event: Any) -> None:
        text = event.current_buffer.text
        if not text.strip() or text.rstrip().endswith(";") or _is_exit(text):
            event.current_buffer.validate_and_handle()
        else:
            event.current_buffer.insert_text("\n")

    return bindings


def make_completer(session: SqlSession) -> Any:
    """Tab completes table names, their column names and SQL keywords."""
    from prompt_toolkit.completion import WordCompleter

    words = [*session.columns_for_completion(), *SQL_KEYWORDS]
    return WordCompleter(words, ignore_case=True, pattern=re.compile(r"([\w.]+)"))


def _take_line(session: SqlSession, options: SqlOptions, buffer: str, line: str,
               out: TextIO, err: TextIO) -> Any:
    """Add a line; run the buffer once it holds a ';'. Returns the new buffer, or None to leave."""
    if not buffer and _is_exit(line):
        return None
    buffer += line + "\n"
    if ";" not in line:
        return buffer
    run_statements(session, buffer, options, out, err)
    return ""


def _pipe_loop(session: SqlSession, options: SqlOptions, lines: Iterable[str], out: TextIO, err: TextIO) -> int:
    buffer: str | None = ""
    for line in lines:
        buffer = _take_line(session, options, buffer or "", line.rstrip("\n"), out, err)
        if buffer is None:
            return 0
    if buffer and buffer.strip():
        run_statements(session, buffer, options, out, err)
    return 0
