"""Fuzz campaign over the rows decoder (binlog_parser.rows): mutated TABLE_MAP and rows events
taken from real fixture binlogs must either decode or raise one of binlog_parser's own errors,
naming the file and the byte offset, in words about the binlog - never a Python internals
message ("index out of range", "unpack requires", "NoneType", ...), never another exception.

Each case is one real event (TABLE_MAP, WRITE/UPDATE/DELETE rows v0-v2, MariaDB compressed
rows, TRANSACTION_PAYLOAD) cut out of a fixture with what it needs before it (magic, the
FORMAT_DESCRIPTION, the TABLE_MAP of a rows event) and the rows events after a TABLE_MAP.
Hypothesis overwrites bytes of the event body with random and boundary values and may cut or
extend the body; the event header's size and next-position and every CRC32 are then made
consistent again, so the mutation reaches the decoders instead of stopping at the framing.
Every decoded event is also rendered (JSON fields, text lines).

The campaign is bounded in time: ``BINLAKE_FUZZ_SECONDS`` (default 30) of rounds of 200
hypothesis examples each; a failing example is shrunk and reported by hypothesis. Derandomized
(``CI`` set), round n draws the examples of seed n: new inputs each round, the same on every run.
(The default was 60 s while every derandomized round repeated the first one: 166 distinct inputs
in all; 30 s of distinct rounds is over 10 times that. Set a larger budget for a longer campaign.)
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
import time
import zlib
from dataclasses import dataclass, field

from _binlog_util import BINLOGS, FIXTURES, MAGIC
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from binlog_parser import BinlogError, read_events
from binlog_parser.render import event_to_dict, event_to_text

FILE_NAME = "fuzz.000001"
BUDGET_SECONDS = float(os.environ.get("BINLAKE_FUZZ_SECONDS", "30"))
SEEDS = [
    FIXTURES / "mariadb-10.11-types" / "alltypes-rows.bin",
    FIXTURES / "mariadb-10.11-types" / "alltypes-updates.bin",
    FIXTURES / "mariadb-10.11-types" / "compressed-rows.bin",
    FIXTURES / "mariadb-10.11" / "binlog.000002",
    FIXTURES / "mariadb-10.11" / "binlog.000003",
    BINLOGS / "osheroff__mysql-binlog-connector-java" / "src__test__resources__mysql-bin.checksum-crc32",
    BINLOGS / "osheroff__mysql-binlog-connector-java" / "src__test__resources__mysql-bin.checksum-none",
    BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__json-opaque.binlog",
    BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__json.binlog.000001",
    BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__vector.binlog",
    BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__mysql-enum-string-set.000001",
    BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__binlog-invisible-columns.000001",
    BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__update-partial-row.binlog",
    BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__write-partial-row.binlog",
    BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__mysql_type_bit.000001",
    BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__transaction_compression.000001",
    BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__ver_5_1_23.001",
    BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__mariadb-bin.000001",
    BINLOGS / "rust-us__mysql-cdc-rs" / "tests__events__8.0__31_update_rows_v2__binlog.000001",
    BINLOGS / "zalora__binlog-parser" / "data__fixtures__mysql-bin.01",
]
TABLE_MAP = 19
ROWS_TYPES = {23, 24, 25, 30, 31, 32, 39, 166, 167, 168, 169, 170, 171}
PAYLOAD = 40
#: words of Python's own exceptions that must never reach an operator
INTERNALS = re.compile(
    r"object of type|index out of range|unpack requires|referenced before assignment|"
    r"cannot access local variable|NoneType|not subscriptable|unsupported operand|"
    r"has no attribute|takes \d+ positional|invalid literal for int|object is not|"
    r"argument must be|out of range for|codec can't decode|unhashable|not iterable|"
    r"can't concat|must be real number|division by zero|maximum recursion|struct\.error|"
    r"buffer size|bytes-like object|memoryview|Traceback|Error\(|KeyError|IndexError|TypeError")


@dataclass(frozen=True)
class Case:
    """One event to mutate: ``prefix + event + suffix`` is a readable binlog."""

    seed: str
    prefix: bytes
    event: bytes
    suffix: tuple[bytes, ...]
    crc: bool


def _split_events(data: bytes) -> list[tuple[int, bytes]]:
    out = []
    pos = 4
    while pos + 19 <= len(data):
        size = struct.unpack_from("<I", data, pos + 9)[0]
        if size < 19 or pos + size > len(data):
            break
        out.append((data[pos + 4], data[pos:pos + size]))
        pos += size
    return out


def _has_crc(event: bytes) -> bool:
    return len(event) > 23 and zlib.crc32(event[:-4]) == struct.unpack_from("<I", event, len(event) - 4)[0]


def _cases() -> list[Case]:
    cases: list[Case] = []
    for path in SEEDS:
        data = path.read_bytes()
        events = _split_events(data)
        if not events or events[0][0] != 15:
            continue
        fde = events[0][1]
        crc = any(_has_crc(ev) for tc, ev in events[1:4])
        seen: set[tuple[int, int]] = set()
        maps: list[bytes] = []  # the TABLE_MAPs of the statement being read
        for i, (tc, ev) in enumerate(events):
            if tc == TABLE_MAP:
                maps = maps + [ev] if i and events[i - 1][0] in ROWS_TYPES | {TABLE_MAP} else [ev]
            if tc not in ROWS_TYPES | {TABLE_MAP, PAYLOAD}:
                continue
            key = (tc, len(ev) // 64)
            if key in seen:
                continue
            seen.add(key)
            if tc == TABLE_MAP:
                after = []
                for tc2, ev2 in events[i + 1:i + 4]:
                    if tc2 not in ROWS_TYPES:
                        break
                    after.append(ev2)
                cases.append(Case(path.name, MAGIC + fde, ev, tuple(after), crc))
            elif tc in ROWS_TYPES:
                cases.append(Case(path.name, MAGIC + fde + b"".join(maps), ev, (), crc))
            else:
                cases.append(Case(path.name, MAGIC + fde, ev, (), crc))
    return cases


CASES = _cases()


def _reframe(event: bytes, pos: int, crc: bool) -> bytes:
    """``event`` at ``pos`` with a consistent size, next-position and CRC32."""
    ts, tc, sid, _size, _next, flags = struct.unpack_from("<IBIIIH", event, 0)
    body = event[19:len(event) - 4] if crc else event[19:]
    size = 19 + len(body) + (4 if crc else 0)
    out = struct.pack("<IBIIIH", ts, tc, sid, size, pos + size, flags) + body
    return out + struct.pack("<I", zlib.crc32(out)) if crc else out


def build(case: Case, edits: list[tuple[int, int]], cut: int, tail: bytes) -> bytes:
    """The case's binlog with its event body edited, cut by ``cut`` bytes and ``tail`` appended."""
    body = bytearray(case.event[19:len(case.event) - 4] if case.crc else case.event[19:])
    for off, value in edits:
        if body:
            body[off % len(body)] = value
    if cut:
        del body[max(0, len(body) - cut):]
    body += tail
    event = case.event[:19] + bytes(body) + (b"\0\0\0\0" if case.crc else b"")
    out = bytearray(case.prefix)
    for ev in (event, *case.suffix):
        out += _reframe(ev, len(out), case.crc)
    return bytes(out)


@dataclass
class Tally:
    inputs: int = 0
    errors: int = 0
    events: int = 0
    distinct: set[bytes] = field(default_factory=set)  # sha1 of every input


TALLY = Tally()


def check_decode(data: bytes) -> None:
    """Decode and render every event; only a well-worded BinlogError may stop it."""
    TALLY.inputs += 1
    TALLY.distinct.add(hashlib.sha1(data).digest())
    t0 = time.monotonic()
    try:
        for ev in read_events(data, file_name=FILE_NAME, verify_checksum=True):
            event_to_dict(ev, FILE_NAME)
            event_to_text(ev)
            TALLY.events += 1
    except BinlogError as exc:
        TALLY.errors += 1
        text = str(exc)
        assert exc.file == FILE_NAME and exc.offset is not None, f"error without file/offset: {text!r}"
        assert text.startswith(f"{FILE_NAME}:{exc.offset}: "), text
        assert not INTERNALS.search(exc.message), f"Python internals in the message: {text!r}"
    assert time.monotonic() - t0 < 10, "one input took over 10 s"


BYTE = st.one_of(st.integers(0, 255), st.sampled_from([0, 1, 2, 0x7F, 0x80, 0xFA, 0xFB, 0xFC, 0xFD, 0xFE, 0xFF]))
ROUND = settings(max_examples=200, deadline=None, database=None,
                 suppress_health_check=list(HealthCheck))


@ROUND
@given(case=st.sampled_from(CASES),
       edits=st.lists(st.tuples(st.integers(0, 1 << 16), BYTE), min_size=1, max_size=6),
       cut=st.one_of(st.just(0), st.integers(1, 64)),
       tail=st.one_of(st.just(b""), st.binary(min_size=1, max_size=16)))
def _fuzz_round(case: Case, edits: list[tuple[int, int]], cut: int, tail: bytes) -> None:
    check_decode(build(case, edits, cut, tail))


def test_cases_cover_table_maps_and_rows_events() -> None:
    types = {c.event[4] for c in CASES}
    assert TABLE_MAP in types and {30, 31, 32} <= types and {23, 24, 25} & types
    assert {166, 167} <= types and PAYLOAD in types
    assert len(CASES) >= 40, len(CASES)
    for case in CASES:  # unmutated, every case decodes to its end
        events = list(read_events(build(case, [], 0, b""), file_name=FILE_NAME))
        assert len(events) >= 2 + len(case.suffix)


def test_fuzz_rows_and_table_map_events() -> None:
    deadline = time.monotonic() + BUDGET_SECONDS
    rounds = 0
    while time.monotonic() < deadline:
        if ROUND.derandomize:
            # derandomized (the "ci" profile): every round would draw the very same examples
            # (measured: 166 distinct inputs however long the campaign); round n draws its own,
            # the same ones on every run
            seed(rounds)(_fuzz_round)
        _fuzz_round()
        rounds += 1
    print(f"\nfuzz: {TALLY.inputs} inputs ({len(TALLY.distinct)} distinct) in {rounds} rounds, "
          f"{TALLY.errors} raised BinlogError, {TALLY.events} events decoded")
    assert TALLY.inputs >= 200
    assert rounds == 1 or len(TALLY.distinct) > 200, "the rounds repeat the same inputs"


# ------------------------------------------------------------ the faults the issue names


def _error(data: bytes) -> BinlogError:
    try:
        for ev in read_events(data, file_name=FILE_NAME):
            event_to_dict(ev, FILE_NAME)
    except BinlogError as exc:
        assert not INTERNALS.search(exc.message), str(exc)
        return exc
    raise AssertionError("decoded without an error")


def _case(type_code: int, seed: str) -> Case:
    return next(c for c in CASES if c.event[4] == type_code and seed in c.seed)


def _metadata_length_at(case: Case) -> int:
    body = case.event[19:]
    pos = 8
    pos += 2 + body[pos]          # schema name
    pos += 2 + body[pos]          # table name
    ncols = body[pos]
    return pos + 1 + ncols


def test_table_map_name_length_past_the_end() -> None:
    case = _case(TABLE_MAP, "checksum-crc32")
    exc = _error(build(case, [(8, 0xFF)], 0, b""))
    assert exc.offset == len(case.prefix)
    assert "bad TABLE_MAP: schema name length 255 at byte 8 runs past the end of the event body" in exc.message


def test_table_map_null_metadata_length() -> None:
    case = _case(TABLE_MAP, "checksum-crc32")
    exc = _error(build(case, [(_metadata_length_at(case), 0xFB)], 0, b""))
    assert "column metadata length at byte" in exc.message and "NULL marker 0xfb" in exc.message


def test_table_map_metadata_block_too_short() -> None:
    case = _case(TABLE_MAP, "checksum-crc32")
    at = _metadata_length_at(case)
    exc = _error(build(case, [(at, 1)], 0, b""))
    assert "metadata block of 1 bytes ends inside the" in exc.message, exc.message


def test_rows_extra_data_length_names_field_value_and_limit() -> None:
    # the error path that used to name a local variable instead ("cannot access local variable 'tm'")
    case = _case(30, "checksum-crc32")
    exc = _error(build(case, [(8, 0xFF), (9, 0xFF)], 0, b""))
    assert exc.offset == len(case.prefix) and exc.type_code == 30
    assert "extra-data length 65535 at byte 8 is outside 2.." in exc.message


def test_rows_value_cut_names_the_column() -> None:
    case = _case(30, "checksum-crc32")
    exc = _error(build(case, [], 3, b""))
    assert exc.offset == len(case.prefix)
    assert "bad rows event: column " in exc.message and "of the rows data" in exc.message, exc.message
