"""Spark SQL text built from values: string literals, identifiers and the row predicates of writes.

Why one module: the jobs put source names, file names and locations into ``replaceWhere``
predicates and DDL, and a name holding a quote or backslash must neither break the statement nor
select other rows. sqlglot's Spark dialect does the escaping (``'a\\'b'``, ``\\`x``y\\```): the same
rules Spark's parser reads back. Pure text; no pyspark here. sqlglot is imported on first use:
the decode job's executors import this module through ``spark_jobs.ingest`` and never quote.
"""

from __future__ import annotations

from collections.abc import Iterable


def sql_string(value: str) -> str:
    """``value`` as a Spark SQL string literal (quotes and backslashes escaped)."""
    from sqlglot import exp

    return str(exp.Literal.string(value).sql(dialect="spark"))


def sql_identifier(name: str) -> str:
    """``name`` as a back-quoted Spark SQL identifier (back-quotes doubled)."""
    from sqlglot import exp

    return str(exp.to_identifier(name, quoted=True).sql(dialect="spark"))


def source_predicate(source: str) -> str:
    """``source = '<source>'``: the rows of one source (the partition column of every table)."""
    return f"source = {sql_string(source)}"


def sources_predicate(sources: Iterable[str]) -> str:
    """``source IN ('a', 'b')`` (``false`` for no source)."""
    names = sorted(set(sources))
    return f"source IN ({', '.join(sql_string(s) for s in names)})" if names else "false"


def files_predicate(pairs: Iterable[tuple[str, str]]) -> str:
    """``(source = 'a' AND file IN ('x','y')) OR ...`` for replaceWhere (``false`` for no file)."""
    by_source: dict[str, set[str]] = {}
    for source, file in pairs:
        by_source.setdefault(source, set()).add(file)
    parts = []
    for source in sorted(by_source):
        files = ", ".join(sql_string(f) for f in sorted(by_source[source]))
        parts.append(f"({source_predicate(source)} AND file IN ({files}))")
    return " OR ".join(parts) if parts else "false"
