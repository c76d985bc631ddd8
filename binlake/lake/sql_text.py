"""Spark SQL text built from values: string literals, identifiers and the row predicates of writes.

Why one module: the jobs put source names, file names and locations into ``replaceWhere``
predicates and DDL, and a name holding a quote or backslash must neither break the statement nor
select other rows. sqlglot's Spark dialect does the escaping (``'a\\'b'``, ``\\`x``y\\```): the same
rules Spark's parser reads back. delta-rs parses its write predicates with DataFusion, which reads
standard SQL strings (a quote doubled, a backslash is itself): :data:`DELTA_RS` names that dialect
(sqlglot's default) for the same predicates. Pure text; no pyspark here. sqlglot is imported on
first use: the decode job's executors import this module through ``spark_jobs.ingest`` and never
quote.
"""

from __future__ import annotations

from collections.abc import Iterable

#: the dialect of Spark SQL text (``replaceWhere``, DDL)
SPARK = "spark"
#: the dialect of delta-rs predicates (DataFusion: standard SQL strings); sqlglot's default dialect
DELTA_RS = ""


def sql_string(value: str, dialect: str = SPARK) -> str:
    """``value`` as a string literal of ``dialect``: Spark SQL (quotes and backslashes escaped) or
    :data:`DELTA_RS` (quotes doubled)."""
    from sqlglot import exp

    return str(exp.Literal.string(value).sql(dialect=dialect))


def sql_identifier(name: str) -> str:
    """``name`` as a back-quoted Spark SQL identifier (back-quotes doubled)."""
    from sqlglot import exp

    return str(exp.to_identifier(name, quoted=True).sql(dialect="spark"))


def delta_rs_identifier(name: str) -> str:
    """``name`` as a double-quoted identifier of :data:`DELTA_RS` (quotes doubled; case kept)."""
    return '"' + name.replace('"', '""') + '"'


def source_predicate(source: str, dialect: str = SPARK) -> str:
    """``source = '<source>'``: the rows of one source (the partition column of every table)."""
    return f"source = {sql_string(source, dialect)}"


def sources_predicate(sources: Iterable[str], dialect: str = SPARK) -> str:
    """``source IN ('a', 'b')`` (``false`` for no source), in Spark SQL or :data:`DELTA_RS`."""
    names = sorted(set(sources))
    return f"source IN ({', '.join(sql_string(s, dialect) for s in names)})" if names else "false"


def files_predicate(pairs: Iterable[tuple[str, str]], dialect: str = SPARK) -> str:
    """``(source = 'a' AND file IN ('x','y')) OR ...`` for replaceWhere, or for a delta-rs write
    with ``dialect`` :data:`DELTA_RS` (``false`` for no file)."""
    by_source: dict[str, set[str]] = {}
    for source, file in pairs:
        by_source.setdefault(source, set()).add(file)
    parts = []
    for source in sorted(by_source):
        files = ", ".join(sql_string(f, dialect) for f in sorted(by_source[source]))
        parts.append(f"({source_predicate(source, dialect)} AND file IN ({files}))")
    return " OR ".join(parts) if parts else "false"
