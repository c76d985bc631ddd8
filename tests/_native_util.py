"""Shared by the differential tests of the compiled extension (``native/``) against the
pure-Python reference: the fixture binlogs and the run-time switch."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from binlog_parser.rows import _native

FIXTURES = Path(__file__).parent / "fixtures"


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
