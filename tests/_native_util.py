"""Shared by the differential tests of the compiled extension (``native/``) against the
pure-Python reference: the fixture binlogs and the run-time switch."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from binlog_parser.rows import _native

FIXTURES = Path(__file__).parent / "fixtures"


#: The fixture binlogs damaged on purpose (truncated, or a corrupt QUERY body): reading one ends
#: in the parser's error; a comparison over the fixtures stops there and nowhere else.
DAMAGED_FIXTURES = frozenset({
    "test-data__binlogs__binlog_truncated_event.000001",
    "test-data__binlogs__binlog_truncated_prev_gtid_event.000001",
    "test-data__binlogs__corrupt-relay-bin.000624",
    "mysql-test__std_data__bug11747416_32228_binlog.000001",
})


def fixture_binlogs() -> list[Path]:
    """Every fixture binlog: the 86 of ``fixtures/binlogs`` and the MariaDB 10.11 chain."""
    files = [p for p in sorted((FIXTURES / "binlogs").glob("*/*")) if p.suffix not in (".tsv", ".md")]
    return files + sorted((FIXTURES / "mariadb-10.11").glob("binlog.0*"))


@contextmanager
def native_extension(enabled: bool) -> Iterator[None]:
    """The compiled extension switched on (it must be built) or off, then back to the
    environment's choice."""
    assert _native.use_native(enabled) is enabled
    try:
        yield
    finally:
        _native.use_native(None)
