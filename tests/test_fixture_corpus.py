"""Every real binlog in tests/fixtures/binlogs decodes to its end (or to the typed error
its damage calls for), with per-type event counts equal to PROVENANCE.tsv."""

from __future__ import annotations

import collections
import csv
from pathlib import Path

import pytest
from _binlog_util import BINLOGS, FIXTURES

from binlog_parser import BinlogError, BinlogReader, CorruptEventError, TruncatedEventError, scan_headers
from binlog_parser.constants import EventType
from binlog_parser.decoders import CORE_DECODERS

PROVENANCE = BINLOGS / "PROVENANCE.tsv"

# PROVENANCE short names that differ from EventType member names
ALIASES = {"FDE": EventType.FORMAT_DESCRIPTION}

# Files damaged on purpose whose damage is not a truncation: (error type, offset).
# corrupt-relay-bin.000624: the QUERY at 91204 has a valid header chain but its body is
# the tail of another statement plus an INTVAR and half a QUERY (mysql-test's corruption
# test); a clear CorruptEventError there is the right answer.
EXPECTED_ERRORS = {
    "blackbeam__rust_mysql_common/test-data__binlogs__corrupt-relay-bin.000624": (CorruptEventError, 91204),
}


def _rows() -> list[dict[str, str]]:
    with PROVENANCE.open(newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def _expected_counts(spec: str) -> tuple[collections.Counter, int | None]:  # type: ignore[type-arg]
    counts: collections.Counter = collections.Counter()  # type: ignore[type-arg]
    partial = None
    for item in filter(None, spec.split(";")):
        name, _, n = item.rpartition(":")
        if name.endswith("(partial)"):
            partial = int(ALIASES.get(name[:-9]) or EventType[name[:-9]])
            continue
        counts[int(ALIASES.get(name) or EventType[name])] += int(n)
    return counts, partial


ROWS = _rows()


def test_provenance_lists_every_fixture() -> None:
    listed = {r["file"] for r in ROWS}
    on_disk = {str(p.relative_to(BINLOGS)) for p in BINLOGS.glob("*/*")}
    assert listed == on_disk
    assert len(listed) >= 80


@pytest.mark.parametrize("full_dispatch", [False, True], ids=["core", "with-rows"])
@pytest.mark.parametrize("row", ROWS, ids=[r["file"].split("/")[-1] for r in ROWS])
def test_fixture_decodes(row: dict[str, str], full_dispatch: bool) -> None:
    path = BINLOGS / row["file"]
    assert path.stat().st_size == int(row["size_bytes"])
    want, partial = _expected_counts(row["event_types"])
    dispatch = None if full_dispatch else dict(CORE_DECODERS)
    reader = BinlogReader(path, dispatch=dispatch)
    got: collections.Counter = collections.Counter()  # type: ignore[type-arg]
    error: BinlogError | None = None
    checks = []
    try:
        for ev in reader:
            h = ev.header
            if h.payload_pos is not None:
                continue  # events inside a TRANSACTION_PAYLOAD are not top-level events
            got[h.raw_type_code if h.raw_type_code is not None else h.type_code] += 1
            checks.append(h.checksum_ok)
    except BinlogError as exc:
        error = exc
    expected_error = EXPECTED_ERRORS.get(row["file"])
    if row["truncated"] == "yes":
        assert isinstance(error, TruncatedEventError), error
        assert error.file == str(path) and error.offset is not None
        if partial is not None:
            assert error.type_code == partial
    elif expected_error:
        assert isinstance(error, expected_error[0]) and error.offset == expected_error[1], error
        # the header chain is intact: a header-only scan still counts what PROVENANCE counts
        scanned = collections.Counter(h.type_code for h in scan_headers(path))
        assert scanned == want
        return
    else:
        assert error is None, f"{row['file']}: {error}"
        assert reader.position == path.stat().st_size
    assert got == want
    if row["checksum"] == "CRC32":
        assert checks and all(c is True for c in checks)
    else:
        assert all(c is None for c in checks)
    if row["binlog_version"]:
        assert reader.context.binlog_version == int(row["binlog_version"])
        assert reader.context.server_version == row["server_version"]


def test_mariadb_chain_decodes() -> None:
    chain = sorted((FIXTURES / "mariadb-10.11").glob("binlog.00000*"))
    assert len(chain) == 4
    for path in chain:
        reader = BinlogReader(path)
        evs = list(reader)
        assert reader.position == path.stat().st_size
        assert evs[0].name == "FORMAT_DESCRIPTION" and "MariaDB" in evs[0].server_version
        assert all(e.header.checksum_ok is True for e in evs)
        # every file but the last ends with a ROTATE to the next one
        if path != chain[-1]:
            assert evs[-1].name == "ROTATE"
            assert evs[-1].next_file == chain[chain.index(path) + 1].name


def test_truncated_files_keep_events_before_the_damage() -> None:
    path = BINLOGS / "webscalesql__webscalesql-5.6" / "mysql-test__std_data__bug11747416_32228_binlog.000001"
    got = []
    with pytest.raises(TruncatedEventError) as ei:
        for ev in BinlogReader(path):
            got.append(ev.name)
    assert got == ["FORMAT_DESCRIPTION", "QUERY", "QUERY", "TABLE_MAP"]
    assert ei.value.offset == 316 and ei.value.type_code == 23
    assert "65567" in str(ei.value)


def test_tiny_truncated_file() -> None:
    path = BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__binlog_truncated_event.000001"
    with pytest.raises(TruncatedEventError) as ei:
        list(BinlogReader(path))
    assert ei.value.offset == 4


def _unused(p: Path) -> None:
    pass
