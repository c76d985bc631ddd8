"""binlake_testing ships the demo's sample binlogs as package data (no git checkout needed)."""

from __future__ import annotations

from pathlib import Path

from binlake_testing.demo import DEMO_SOURCES, SAMPLES

FIXTURES = Path(__file__).parent / "fixtures"
COPIED_FROM = {
    "mariadb-10.11/binlog.000001": "mariadb-10.11/binlog.000001",
    "mariadb-10.11/binlog.000002": "mariadb-10.11/binlog.000002",
    "mariadb-10.11/binlog.000003": "mariadb-10.11/binlog.000003",
    "mariadb-10.11/binlog.000004": "mariadb-10.11/binlog.000004",
    "mysql-5.6/mysql-bin.000002": "binlogs/ikarishinjieva__mysql_binlog_utils/test__mysql-bin56.000002",
}


def test_every_demo_file_is_package_data_equal_to_its_fixture() -> None:
    used = {f for src in DEMO_SOURCES for f, _name in src.files}
    assert used == set(COPIED_FROM)
    assert "site-packages" in str(SAMPLES) or SAMPLES.parent.name == "binlake_testing"
    for sample, fixture in COPIED_FROM.items():
        assert (SAMPLES / sample).read_bytes() == (FIXTURES / fixture).read_bytes()
