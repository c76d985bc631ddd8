"""SQL text from values (binlake/lake/sql_text.py): exact escapes, and the text reads back as the value, in Spark's
dialect and in delta-rs's (DataFusion: standard SQL strings)."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from binlake.lake.sql_text import (
    DELTA_RS,
    files_predicate,
    source_predicate,
    sources_predicate,
    sql_identifier,
    sql_string,
)

AWKWARD = ["binlog.000042", "it's", "back\\slash", "both\\'", "new\nline", "tab\there", "é€🐬", ""]


def test_exact_escapes() -> None:
    assert sql_string("it's") == "'it\\'s'"
    assert sql_string("back\\slash") == "'back\\\\slash'"
    assert sql_identifier("we`ird") == "`we``ird`"
    assert source_predicate("a'b") == "source = 'a\\'b'"
    assert sources_predicate(["b", "a", "b"]) == "source IN ('a', 'b')"
    assert sources_predicate([]) == "false"
    assert files_predicate([("s", "a'b"), ("t", "x"), ("s", "c"), ("s", "c")]) == (
        "(source = 's' AND file IN ('a\\'b', 'c')) OR (source = 't' AND file IN ('x'))")
    assert files_predicate([]) == "false"


@pytest.mark.parametrize("value", AWKWARD)
def test_the_spark_dialect_reads_the_value_back(value: str) -> None:
    literal = sqlglot.parse_one(f"SELECT {sql_string(value)}", read="spark").find(exp.Literal)
    assert literal is not None and literal.this == value
    column = sqlglot.parse_one(f"SELECT {sql_identifier(value or 'x')} FROM t", read="spark").find(exp.Column)
    assert column is not None and column.name == (value or "x")


def test_delta_rs_predicates_double_quotes_and_keep_backslashes() -> None:
    assert sql_string("it's", DELTA_RS) == "'it''s'"
    assert sql_string("back\\slash", DELTA_RS) == "'back\\slash'"
    assert files_predicate([("s", "a'b"), ("t", "x\\"), ("s", "c")], DELTA_RS) == (
        "(source = 's' AND file IN ('a''b', 'c')) OR (source = 't' AND file IN ('x\\'))")
    assert files_predicate([], DELTA_RS) == "false"


@pytest.mark.parametrize("value", AWKWARD)
def test_the_delta_rs_dialect_reads_the_value_back(value: str) -> None:
    literal = sqlglot.parse_one(f"SELECT {sql_string(value, DELTA_RS)}", read="postgres").find(exp.Literal)
    assert literal is not None and literal.this == value
