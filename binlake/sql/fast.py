"""The JVM-free path of ``binlake sql``: delta-rs reads the Delta tables, DuckDB runs the SQL.

Why: a one-shot query through Spark starts a JVM (seconds idle, a minute on a busy machine). Read-only
statements need none of it: the ``deltalake`` package (delta-rs) resolves each table's Delta log (local
or S3, same endpoint and credentials as the rest of binlake) into an Arrow dataset, DuckDB scans
those datasets, and sqlglot translates the Spark SQL dialect people write into DuckDB's (``7/2``,
``date_format``, ``m['k']`` ...). DuckDB's own ``delta`` extension is not used: it is downloaded at
run time, which offline hosts cannot do.

Only tables a statement names are opened (an S3 warehouse costs a few requests per table), and only
binlake's: every name is checked first (:mod:`binlake.sql.guard`: ``db.table`` of letters, digits and
``_``, never a path), gold names from ``meta.gold_status`` likewise, and DuckDB's own file access
(``read_csv('/any/file')``) is switched off and locked for the connection.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import re
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from binlake.config import BinlakeConfig
from binlake.errors import BinlakeError
from binlake.lake.catalog import GOLD_NAME, GOLD_TABLES_SQL, gold_specs
from binlake.lake.delta_tables import open_delta_table, storage_options
from binlake.lake.row_images import DUCKDB_TEXT_MAP_MACROS
from binlake.lake.tables import DATABASES, META_GOLD_STATUS, TABLES, TableSpec
from binlake.lake.tables import table as registered_table
from binlake.sql.describe import COLUMNS as DESCRIBE_COLUMNS
from binlake.sql.describe import describe_rows, describe_target
from binlake.sql.guard import analyse, checked_name

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

#: A table function the fast path answers itself (``asof_table(...)``): its string arguments -> rows.
#: Why injected: the stages that compute such tables (history) read through this one, so the sql
#: stage cannot import them; the command line, above both, wires them together.
TableFunction = Callable[[Sequence[str]], "pa.Table"]

_SHOW_TABLES = re.compile(r"^\s*show\s+tables(?:\s+(?:in|from)\s+`?(\w+)`?)?\s*$", re.IGNORECASE)
_SHOW_DATABASES = re.compile(r"^\s*show\s+(?:databases|schemas|namespaces)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class QueryResult:
    """Column names and rows (canonical Python values, see :mod:`binlake.sql.values`) of one statement."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool = False


class NeedsSparkError(BinlakeError):
    """The statement is not a read-only query the fast path can run (a write, DDL, Spark-only syntax)."""


class TableNotFoundError(BinlakeError):
    """A statement names a binlake table that is not (yet) under the configured warehouse."""


def show_statement(statement: str) -> tuple[str, str | None] | None:
    """``SHOW TABLES [IN db]`` -> ("tables", db); ``SHOW DATABASES`` -> ("databases", None); else None."""
    text = statement.strip().rstrip(";")
    match = _SHOW_TABLES.match(text)
    if match:
        return "tables", (match.group(1) or "").lower() or None
    if _SHOW_DATABASES.match(text):
        return "databases", None
    return None


def show_result(kind: str, database: str | None, existing: Sequence[TableSpec]) -> QueryResult:
    """SHOW TABLES across binlake's databases (both engines answer it from the table registry)."""
    if kind == "databases":
        return QueryResult(columns=["namespace"], rows=[(db,) for db in DATABASES])
    rows = [(spec.database, spec.name, spec.description) for spec in existing
            if database is None or spec.database == database]
    return QueryResult(columns=["namespace", "tableName", "description"], rows=rows)


class FastWarehouse:
    """A DuckDB connection over the binlake tables of one warehouse, opened on first use."""

    def __init__(self, cfg: BinlakeConfig, table_functions: Mapping[str, TableFunction] | None = None) -> None:
        import duckdb

        self.cfg = cfg
        self.table_functions = dict(table_functions or {})
        # No extension downloads at run time (offline hosts): parquet/icu/json are built in.
        self.connection = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False})
        self.connection.execute("SET TimeZone = 'UTC'")  # Spark's session zone in spark_jobs.session
        for macro in DUCKDB_TEXT_MAP_MACROS:  # row_image_text(after): the server's text map (row_images)
            self.connection.execute(macro)
        self._options: dict[str, str] | None = None
        self._opened: dict[str, bool] = {}
        self._schemas: dict[str, tuple[str, list[str]]] = {}  # name -> (Delta schema JSON, partition columns)
        for db in DATABASES:
            self.connection.execute(f"CREATE SCHEMA IF NOT EXISTS {db}")
        # the Arrow datasets delta-rs opens are DuckDB's only inputs: no file of its own choosing
        self.connection.execute("SET enable_external_access = false")
        self.connection.execute("SET lock_configuration = true")

    def storage_options(self) -> dict[str, str]:
        if self._options is None:
            self._options = storage_options(self.cfg.s3, self.cfg.warehouse)
        return self._options

    def open_table(self, spec: TableSpec) -> bool:
        """Register ``spec`` as a DuckDB view if it exists under the warehouse; True when it does."""
        if spec.full_name in self._opened:
            return self._opened[spec.full_name]
        table = open_delta_table(spec.location(self.cfg.warehouse), self.cfg.s3)
        exists = table is not None
        if table is not None:
            self._schemas[spec.full_name] = (table.schema().to_json(), list(table.metadata().partition_columns))
            with _pandas_untouched():
                dataset = table.to_pyarrow_dataset()
            arrow_name = f"__delta_{spec.database}_{spec.name}"
            self.connection.register(arrow_name, dataset)
            self.connection.execute(f"CREATE OR REPLACE VIEW {spec.full_name} AS SELECT * FROM {arrow_name}")
        self._opened[spec.full_name] = exists
        return exists

    def existing_tables(self) -> list[TableSpec]:
        """The binlake tables present under the warehouse (opens each one), gold tables last."""
        present = [spec for spec in TABLES if self.open_table(spec)]
        return present + [spec for spec in self._gold_tables() if self.open_table(spec)]

    def _gold_tables(self) -> list[TableSpec]:
        """The gold tables ``meta.gold_status`` lists (it is their catalog: one row per gold table)."""
        if not self.open_table(META_GOLD_STATUS):
            return []
        return gold_specs(str(name) for (name,) in self.connection.execute(GOLD_TABLES_SQL).fetchall())

    def run(self, statement: str, max_rows: int = 0) -> QueryResult:
        """Run one read-only statement (Spark SQL dialect). NeedsSparkError when it is not one."""
        show = show_statement(statement)
        if show is not None:
            return show_result(show[0], show[1], self.existing_tables())
        described = describe_target(statement)
        if described is not None:
            return self.describe(described)
        if not analyse(statement).read_only:
            raise NeedsSparkError("not a read-only statement")
        duck_sql, tables, calls = translate(statement, frozenset(self.table_functions))
        for i, (function, arguments) in enumerate(calls):
            self.connection.register(f"__function_{i}", self.table_functions[function](arguments))
        for name in tables:
            spec = _binlake_table(name)
            if spec is None or not self.open_table(spec):
                raise TableNotFoundError(missing_table_hint(name, self.cfg, self.existing_tables()))
        return self._fetch(duck_sql, max_rows)

    def describe(self, name: str) -> QueryResult:
        """``DESCRIBE db.table`` from the Delta schema (Spark's types and comments, not DuckDB's)."""
        spec = _binlake_table(name)
        if spec is None or not self.open_table(spec):
            raise TableNotFoundError(missing_table_hint(name, self.cfg, self.existing_tables()))
        return QueryResult(columns=list(DESCRIBE_COLUMNS), rows=describe_rows(*self._schemas[spec.full_name]))

    def _fetch(self, duck_sql: str, max_rows: int) -> QueryResult:
        """Stream Arrow batches until ``max_rows`` + 1 rows (0: all), then canonicalise them."""
        import duckdb
        import pyarrow as pa

        from binlake.sql.values import arrow_rows

        with _pandas_untouched():  # DuckDB hands its filters to the Arrow scan as pa.scalar values
            try:
                relation = self.connection.sql(duck_sql)
            except duckdb.ParserException as exc:
                raise NeedsSparkError(f"DuckDB cannot parse the translated statement: {exc}") from None
            if relation is None:
                return QueryResult(columns=[], rows=[])
            reader = relation.to_arrow_reader(1024)
            batches, count = [], 0
            for batch in reader:
                batches.append(batch)
                count += batch.num_rows
                if 0 < max_rows < count:
                    break
        table = pa.Table.from_batches(batches, schema=reader.schema)
        truncated = 0 < max_rows < table.num_rows
        if truncated:
            table = table.slice(0, max_rows)
        return QueryResult(columns=list(table.column_names), rows=arrow_rows(table), truncated=truncated)

    def close(self) -> None:
        self.connection.close()


@contextlib.contextmanager
def _pandas_untouched() -> Iterator[None]:
    """Open or scan a Delta table's Arrow dataset without importing pandas (a one-shot query's start-up).

    Why: pyarrow's ``_dataset`` module builds ``pa.scalar(True)`` as it is imported, delta-rs builds
    a ``pa.scalar`` per partition value and DuckDB one per pushed-down filter constant. With numpy
    installed, ``pa.scalar`` asks pyarrow's lazy pandas shim whether the value is a pandas array, and
    an untyped one infers its type, which first loads pandas' constants (NaT, NA): both import pandas,
    about a third of a one-shot query's CPU, for no pandas object at all. Meanwhile ``pyarrow.lib.np``
    is unset (nothing here hands pyarrow a numpy array, so the shim need not be asked, and stays
    untried) and ``pa.scalar`` of a plain bool, int, float, str, bytes, None, date or naive datetime
    is given the type inference would give it. Nothing is refused: any other value still imports pandas, as before, and pandas
    works as ever afterwards. Only in a single-threaded process (the command line): another thread
    could be converting numpy data through pyarrow meanwhile.
    """
    import pyarrow as pa
    import pyarrow.lib

    if "pandas" in sys.modules or threading.active_count() > 1 or not hasattr(pyarrow.lib, "np"):
        yield
        return
    numpy, scalar = pyarrow.lib.np, pyarrow.lib.scalar
    plain_types = {bool: pa.bool_(), int: pa.int64(), float: pa.float64(), str: pa.string(), bytes: pa.binary(),
                   type(None): pa.null(), dt.date: pa.date32()}

    def typed_scalar(value: Any, type: Any = None, **options: Any) -> Any:  # noqa: A002 - pa.scalar's name
        if type is None and value.__class__ is dt.datetime and value.tzinfo is None:
            type = pa.timestamp("us")
        return scalar(value, type if type is not None else plain_types.get(value.__class__), **options)

    swapped = {"np": (pyarrow.lib, None, numpy), "scalar": (pyarrow.lib, typed_scalar, scalar)}
    for name, (module, during, _) in swapped.items():
        setattr(module, name, during)
    setattr(pa, "scalar", typed_scalar)  # noqa: B010 - delta-rs calls pyarrow.scalar
    try:
        yield
    finally:
        for name, (module, _, before) in swapped.items():
            setattr(module, name, before)
        setattr(pa, "scalar", scalar)  # noqa: B010


def _binlake_table(name: str) -> TableSpec | None:
    """The registered table ``name`` names, or a gold table; None for anything else."""
    database, _, rest = name.partition(".")
    if database == "gold" and not GOLD_NAME.fullmatch(rest):
        return None
    try:
        return registered_table(name.lower())
    except KeyError:
        return None


_READ_ONLY_ROOTS = ("Select", "Union", "Intersect", "Except", "Describe", "Subquery", "Values")


def translate(statement: str, functions: frozenset[str] = frozenset(),
              ) -> tuple[str, list[str], list[tuple[str, list[str]]]]:
    """Spark SQL -> (DuckDB SQL, ``db.table`` names it reads, calls of ``functions`` it makes).

    NeedsSparkError unless read-only. Each call of one of ``functions`` (string literal arguments
    only) becomes a reference to ``__function_<i>``, the i-th call's rows, which the caller registers.
    """
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError

    logging.getLogger("sqlglot").setLevel(logging.ERROR)
    try:
        tree = sqlglot.parse_one(statement, read="spark")
    except ParseError as exc:
        raise NeedsSparkError(f"not parsed as Spark SQL by sqlglot: {str(exc).splitlines()[0]}") from None
    if type(tree).__name__ not in _READ_ONLY_ROOTS:
        raise NeedsSparkError(f"{type(tree).__name__.upper()} statements run on Spark")
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    tables: list[str] = []
    calls: list[tuple[str, list[str]]] = []
    for table in list(tree.find_all(exp.Table)):
        name = checked_name(table, ctes)  # UnsafeStatementError for a path, a file table ...
        if name is not None:
            tables.append(name)
        elif table.name.lower() in ctes:
            continue
        elif isinstance(table.this, exp.Anonymous) and str(table.this.name).lower() in functions:
            calls.append((str(table.this.name).lower(), _string_arguments(table.this)))
            table.set("this", exp.to_identifier(f"__function_{len(calls) - 1}"))
        else:  # a table function (range(3) ...)
            raise NeedsSparkError(f"table function {table.this.sql(dialect='spark')} runs on Spark")
    _keep_spark_column_names(tree)
    return tree.sql(dialect="duckdb"), list(dict.fromkeys(tables)), calls


def _string_arguments(call: Any) -> list[str]:
    """The arguments of a binlake table function: string literals only (they name a moment, not data)."""
    from sqlglot import exp

    arguments = []
    for argument in call.expressions:
        if not (isinstance(argument, exp.Literal) and argument.is_string):
            raise BinlakeError(f"{call.name}(...) takes string literals only, got {argument.sql(dialect='spark')}")
        arguments.append(str(argument.this))
    return arguments


def _keep_spark_column_names(tree: Any) -> None:
    """Alias unnamed output expressions by their Spark SQL text (``7 / 2``, ``count(*)``).

    Why: DuckDB would name them by the *translated* text (``(7 / "nullif"(2, 0))``), which
    the user never wrote; the alias keeps the header the same as the query's own wording.
    """
    from sqlglot import exp

    select = tree if isinstance(tree, exp.Select) else None
    if select is None:
        return
    projections: list[Any] = []
    for projection in select.expressions:
        if isinstance(projection, (exp.Alias, exp.Column, exp.Star)):
            projections.append(projection)
        else:
            projections.append(exp.alias_(projection, projection.sql(dialect="spark"), quoted=True))
    select.set("expressions", projections)


def missing_table_hint(name: str, cfg: BinlakeConfig, existing: Sequence[TableSpec]) -> str:
    """Which warehouse and config were searched, what is there, and where the demo's tables are."""
    import os
    from pathlib import Path

    from_env = os.environ.get("BINLAKE_CONFIG")
    # name the variable only when it is what chose this config (not a --config beside a stale export)
    chosen_by_env = bool(from_env) and str(Path(from_env or "").resolve()) == (cfg.config_path or "")
    source = "BINLAKE_CONFIG" if chosen_by_env else "config"
    there = ", ".join(spec.full_name for spec in existing) or "no binlake tables yet"
    hint = (f"table {name} not found in warehouse {cfg.warehouse} ({source}: {cfg.config_path or 'built in'}); "
            f"there: {there}")
    demo_config = Path(cfg.state_dir) / "demo" / "binlake.toml"
    if demo_config.is_file() and str(demo_config.resolve()) != (cfg.config_path or ""):
        hint += f". The demo's tables: BINLAKE_CONFIG={demo_config} binlake sql ..."
    return hint
