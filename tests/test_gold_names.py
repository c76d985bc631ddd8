"""Gold table names: one source table, one gold table (issue 43, item 13).

``gold.<source>__<db>__<table>`` is lossy (lower-case, ``-`` as ``_``); sources are checked when the
config loads (tests/test_config.py), two tables of one source that share a name when gold runs.
"""

from __future__ import annotations

import pytest

from binlake.errors import BinlakeError
from binlake.lake.tables import GoldNameError, check_gold_names, gold_table_name


def test_names_that_never_collided_are_unchanged() -> None:
    assert gold_table_name("maria-gold", "Shop", "Orders 2") == "maria_gold__shop__orders_2"
    assert gold_table_name("my8-lineitem", "test", "LINEITEM") == "my8_lineitem__test__lineitem"
    assert gold_table_name("mariadb-10.11", "_tmp", "t__x") == "mariadb_10_11___tmp__t__x"


@pytest.mark.parametrize("source", ["a__b", "a_", "_a", "..", ""])
def test_a_source_part_that_cannot_end_at_the_first_separator_is_refused(source: str) -> None:
    """``x_`` + db ``a`` and ``x`` + db ``_a`` were both ``x___a__t``."""
    with pytest.raises(GoldNameError, match="cannot start a gold table name"):
        gold_table_name(source, "a", "t")


@pytest.mark.parametrize("first, second, gold", [
    (("a__b", "c"), ("a", "b__c"), "x__a__b__c"),
    (("shop", "Orders"), ("shop", "orders"), "x__shop__orders"),
    (("shop", "a-b"), ("shop", "a_b"), "x__shop__a_b"),
])
def test_two_tables_of_a_source_sharing_a_gold_name_are_refused(first: tuple[str, str], second: tuple[str, str],
                                                                gold: str) -> None:
    with pytest.raises(GoldNameError) as info:
        check_gold_names("x", [first, second, ("shop", "other")])
    assert isinstance(info.value, BinlakeError)
    a, b = sorted([first, second])
    assert str(info.value).startswith(f"source 'x': tables `{a[0]}`.`{a[1]}` and `{b[0]}`.`{b[1]}` "
                                      f"both map to gold.{gold} ")


def test_a_table_named_like_another_ones_history_table() -> None:
    tables = [("shop", "t"), ("shop", "t__history")]
    assert check_gold_names("x", tables) == {("shop", "t"): "x__shop__t",
                                             ("shop", "t__history"): "x__shop__t__history"}
    with pytest.raises(GoldNameError, match="both map to gold.x__shop__t__history"):
        check_gold_names("x", tables, keeps_history=lambda db, table: table == "t")


def test_distinct_names_pass() -> None:
    assert check_gold_names("x", [("shop", "orders"), ("shop", "customer"), ("shop", "orders")]) == {
        ("shop", "customer"): "x__shop__customer", ("shop", "orders"): "x__shop__orders"}
