"""Fuzzing: random bytes and mutated real binlogs raise only BinlogError subclasses,
quickly, without hanging or allocating what a lying length claims."""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from typing import Any

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


def _parsed_or_refused(parse: Callable[[Any], object], garbage: object) -> None:
    """``parse(garbage)`` returns, or raises GtidParseError: never another exception."""
    try:
        parse(garbage)
    except GtidParseError:
        pass


@FUZZ
@given(st.binary(max_size=300))
def test_gtid_set_decode_garbage(data: bytes) -> None:
    _parsed_or_refused(GtidSet.decode, data)


@FUZZ
@given(st.text(max_size=80))
def test_gtid_set_text_garbage(text: str) -> None:
    _parsed_or_refused(GtidSet.from_text, text)


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


def test_every_parser_error_is_a_binlog_error_and_value_errors_stay_value_errors() -> None:
    """One root: the value-level errors (a field, a JSON document, a value to write) are BinlogErrors
    too, and keep ValueError as a second base for the callers that catch them as one."""
    from binlog_parser.errors import (
        EncodeError,
        ImpossibleTemporalValue,
        JsonDecodeError,
        JsonDiffError,
        ShortBufferError,
        UnsupportedColumnType,
        ValueEncodeError,
    )
    from binlog_parser.rows.json_binary import parse_json_binary
    from binlog_parser.wire import uint

    for cls in (EncodeError, ImpossibleTemporalValue, JsonDecodeError, JsonDiffError, ShortBufferError,
                UnsupportedColumnType, ValueEncodeError):
        assert issubclass(cls, BinlogError) and issubclass(cls, ValueError), cls
    try:
        uint(b"\x01\x02", 0, 4)
    except BinlogError as exc:
        assert isinstance(exc, ShortBufferError) and str(exc) == "need 4 bytes at 0, have 2"
    else:
        raise AssertionError("no error")
    try:
        parse_json_binary(b"\x02\xff\xff\xff\xff")
    except BinlogError as exc:
        assert isinstance(exc, JsonDecodeError), exc
    else:
        raise AssertionError("no error")


def test_a_short_field_inside_an_event_is_reported_as_that_event_corrupt() -> None:
    """A ShortBufferError leaving a body decoder is the event's CorruptEventError, with the file,
    the event's byte offset and its type, as before it joined the BinlogError tree."""
    import struct
    import zlib

    from binlog_parser import CorruptEventError

    seed = (BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__binlog-invisible-columns.000001").read_bytes()
    fde_size = struct.unpack_from("<I", seed, 4 + 9)[0]
    head = seed[:4 + fde_size]
    gtid = 4 + fde_size
    while seed[gtid + 4] != 33:  # the first GTID event
        gtid += struct.unpack_from("<I", seed, gtid + 9)[0]
    size = struct.unpack_from("<I", seed, gtid + 9)[0]
    body = seed[gtid + 19:gtid + size - 4 - 5]  # its last 5 body bytes cut off (a field runs past the end)
    pos = len(head)
    raw = seed[gtid:gtid + 9] + struct.pack("<II", 19 + len(body) + 4, pos + 19 + len(body) + 4) \
        + seed[gtid + 17:gtid + 19] + body
    raw += struct.pack("<I", zlib.crc32(raw))
    try:
        list(read_events(io.BytesIO(head + raw), file_name="short.bin"))
    except CorruptEventError as exc:
        assert (exc.file, exc.offset, exc.type_code) == ("short.bin", pos, 33), exc
        assert str(exc) == f"short.bin:{pos}: cannot decode GTID event: need 2 bytes at 50, have 1"
    else:
        raise AssertionError("no error")
