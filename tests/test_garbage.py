"""Fuzzing: random bytes and mutated real binlogs raise only BinlogError subclasses,
quickly, without hanging or allocating what a lying length claims."""

from __future__ import annotations

import io
import time

from _binlog_util import BINLOGS, MAGIC
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from binlog_parser import BinlogError, read_events
from binlog_parser.gtid import GtidParseError, GtidSet

SEEDS = [
    BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__binlog_transaction_with_GTID_TAG.000001",
    BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__transaction_compression.000001",
    BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__mariadb-bin.000001",
    BINLOGS / "rust-us__mysql-cdc-rs" / "tests__events__5.7__14_user_var__log.bin",
    BINLOGS / "webscalesql__webscalesql-5.6" / "mysql-test__suite__binlog__std_data__binlog_old_version_4_1.000001",
    BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__json.binlog.000001",
]
SEED_BYTES = [p.read_bytes()[:6000] for p in SEEDS]


def _drain(data: bytes, **kw) -> None:  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    n = 0
    try:
        for ev in read_events(data, **kw):
            ev.fields()
            n += 1
            assert n <= len(data)  # every event consumes bytes: no loops
    except BinlogError:
        pass
    assert time.monotonic() - t0 < 5


FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.binary(max_size=2000))
def test_random_bytes(data: bytes) -> None:
    _drain(data)
    _drain(MAGIC + data)


@FUZZ
@given(st.sampled_from(range(len(SEED_BYTES))), st.lists(
    st.tuples(st.integers(0, 5999), st.integers(0, 255)), min_size=1, max_size=8),
    st.booleans())
def test_mutated_fixtures(which: int, edits: list[tuple[int, int]], lenient: bool) -> None:
    data = bytearray(SEED_BYTES[which])
    for off, val in edits:
        if off < len(data):
            data[off] = val
    _drain(bytes(data), lenient=lenient)
    _drain(bytes(data), verify_checksum=False)  # bodies reach the decoders unchecked


@FUZZ
@given(st.sampled_from(range(len(SEED_BYTES))), st.integers(0, 5999))
def test_truncated_anywhere(which: int, cut: int) -> None:
    _drain(SEED_BYTES[which][:cut])


@FUZZ
@given(st.sampled_from(range(len(SEED_BYTES))), st.binary(min_size=1, max_size=64), st.integers(4, 3000))
def test_spliced_garbage_stream(which: int, junk: bytes, at: int) -> None:
    base = SEED_BYTES[which]
    data = base[:at] + junk + base[at:]
    t0 = time.monotonic()
    try:
        for _ in read_events(io.BufferedReader(io.BytesIO(data)), verify_checksum=False):
            pass
    except BinlogError:
        pass
    assert time.monotonic() - t0 < 5


@FUZZ
@given(st.binary(max_size=300))
def test_gtid_set_decode_garbage(data: bytes) -> None:
    try:
        GtidSet.decode(data)
    except GtidParseError:
        pass


@FUZZ
@given(st.text(max_size=80))
def test_gtid_set_text_garbage(text: str) -> None:
    try:
        GtidSet.from_text(text)
    except GtidParseError:
        pass


def test_huge_claimed_sizes_do_not_allocate() -> None:
    import struct

    from _binlog_util import fde

    for size in (0xFFFFFFFF, 1 << 31, 10**9):
        data = MAGIC + fde() + struct.pack("<IBIIIH", 1, 2, 1, size, 0, 0) + b"\x00" * 100
        t0 = time.monotonic()
        try:
            list(read_events(data))
        except BinlogError:
            pass
        try:
            list(read_events(io.BufferedReader(io.BytesIO(data))))
        except BinlogError:
            pass
        assert time.monotonic() - t0 < 2
