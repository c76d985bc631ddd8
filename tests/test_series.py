"""binlake.discovery.series: the one rule for numbered binlog file names (discovery and reconciliation)."""

from __future__ import annotations

from binlake.discovery.series import SeriesName, missing_between, next_in_series, parse_series_name, series_sort_key


def test_number_is_the_last_run_of_digits_and_the_series_is_prefix_plus_suffix() -> None:
    assert parse_series_name("binlog.000042") == SeriesName("binlog.", 42, 6, "")
    assert parse_series_name("x/y/mysql-bin.000002.bak") == SeriesName("mysql-bin.", 2, 6, ".bak")
    assert parse_series_name("binlog.index") == SeriesName("binlog.index", None, 0, "")
    assert parse_series_name("binlog.000002.bak").series != parse_series_name("binlog.000002").series


def test_next_name_keeps_width_suffix_and_grows_past_the_padding() -> None:
    assert next_in_series("binlog.000041") == "binlog.000042"
    assert next_in_series("mysql-bin.999999") == "mysql-bin.1000000"
    assert next_in_series("binlog.000002.bak") == "binlog.000003.bak"
    assert next_in_series("binlog.index") is None


def test_a_copy_sorts_after_its_series_and_is_never_missing_from_it() -> None:
    names = ["binlog.000002.bak", "binlog.000010", "binlog.000002", "binlog.index"]
    assert sorted(names, key=series_sort_key) == ["binlog.000002", "binlog.000010", "binlog.000002.bak",
                                                   "binlog.index"]
    assert missing_between("binlog.000002", "binlog.000005") == ["binlog.000003", "binlog.000004"]
    assert missing_between("binlog.000002", "binlog.000005.bak") == []
    assert missing_between("b.000001", "b.005000") == ["b.000002 .. b.004999"]
