"""The compiled framing loop (``binlog_parser._native_ext``'s ``EventTypes.frames``, issue 13)
against the pure-Python :class:`~binlog_parser.framing.EventFramer`: every fixture binlog, read
every way a reader can (path, bytes, a stream in small chunks, checksums off or lenient,
payloads not expanded, resynchronising), then damaged files (bytes changed, sizes lying, tails
cut) and random GTID / QUERY / XID bodies must give the same events (headers included), the
same values, the same ``SkippedBytes`` records, the same errors (type, words, file, offset,
event type) and the same final ``reader.position`` on both paths.

Skipped when the extension is not built (``make setup-native``; ``make test`` builds it).
"""

from __future__ import annotations

import inspect
import io
import struct
import sys
import zlib
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from _binlog_util import MAGIC, Builder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from binlog_parser import _native_framing
from binlog_parser.constants import EventType
from binlog_parser.decoders.header_only import HEADER_ONLY_DISPATCH
from binlog_parser.errors import BinlogError
from binlog_parser.framing import EventFramer, SkippedBytes
from binlog_parser.header import EventHeader
from binlog_parser.reader import BinlogReader, HeaderScan, scan_headers
from binlog_parser.rows import _native
from binlog_parser.rows.rows_event import RowsEvent
from binlog_parser.writer import BinlogFileWriter, Column, Table
from binlog_parser.writer.events import encode_status_vars, gtid_body
from tests._native_util import fixture_binlogs

pytest.importorskip("binlog_parser._native_ext", reason="compiled extension not built "
                    "(make setup-native)")

FIXTURES = Path(__file__).parent / "fixtures"
GTID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


FILES = fixture_binlogs()
#: small files of every flavour for the damaged-file tests: CRC32 and none, a v3 (4.1) binlog,
#: a relay log, ZSTD payloads, MariaDB, rows of every kind
DAMAGE_BASES = [p for p in FILES if p.name.endswith((
    "mysql-bin.checksum-crc32", "mysql-bin.checksum-none", "binlog_old_version_4_1.000001",
    "bug33029-slave-relay-bin.000001", "mysql-bin.compressed", "mariadb-bin.000001",
    "json.binlog.000001", "binlog_transaction_with_GTID.000001"))] + [FIXTURES / "mariadb-10.11" / "binlog.000001"]


@contextmanager
def _native_on(enabled: bool) -> Iterator[None]:
    assert _native.use_native(enabled) is enabled
    assert (_native_framing.event_types() is not None) is enabled
    try:
        yield
    finally:
        _native.use_native(None)


def _strict(v: Any) -> Any:
    """A value's exact identity: type and repr at every level (``==`` equates 1 and True)."""
    if isinstance(v, dict):
        return ("dict", [(k, _strict(x)) for k, x in v.items()])
    if isinstance(v, (tuple, list)):
        return (type(v).__name__, [_strict(x) for x in v])
    return (type(v).__name__, repr(v))


def _error(exc: BinlogError) -> tuple[Any, ...]:
    return type(exc).__name__, str(exc), exc.file, exc.offset, exc.type_code


def _item(item: Any) -> Any:
    """An event or a skip as a comparable value (row values and status variables strictly)."""
    if isinstance(item, SkippedBytes):
        return ("skip", item.start, item.end, item.head, item.found_by, _error(item.error))
    if isinstance(item, RowsEvent):
        return ("rows", item.header, item.table_id, item.flags, item.extra_data, item.columns_present,
                item.columns_present_after, [(_strict(r.before), _strict(r.after)) for r in item.rows])
    status = getattr(item, "status_vars", None)
    return (item, _strict(status)) if status is not None else item


def _outcome(source: Any, enabled: bool, **kw: Any) -> tuple[list[Any], Any, int]:
    """(items, the error or None, the reader's final position) on one path. ``headers_only``:
    the framer hands out each event's header in place of the event, as for ``scan_headers``."""
    if isinstance(source, bytes) and kw.pop("as_stream", False):
        source = io.BytesIO(source)
    schemas, schemas_at = kw.pop("schemas", None), kw.pop("schemas_at", 0)
    headers_only = kw.pop("headers_only", False)
    items: list[Any] = []
    err = None
    with _native_on(enabled):
        reader = BinlogReader(source, **kw)
        reader._headers_only = headers_only
        try:
            for x in reader.records():
                if len(items) == schemas_at:  # user column names, from this event on
                    reader.context.schemas = schemas
                items.append(_item(x))
        except BinlogError as exc:
            err = _error(exc)
    return items, err, reader.position


def _same(source: Any, **kw: Any) -> tuple[list[Any], Any, int]:
    pure = _outcome(source, False, **kw)
    native = _outcome(source, True, **kw)
    assert native[1] == pure[1]
    assert native[0] == pure[0]
    assert native[2] == pure[2]
    return pure


MODES: dict[str, dict[str, Any]] = {
    "path": {},
    "bytes": {"as_bytes": True},
    "stream-1k-chunks": {"as_bytes": True, "as_stream": True, "chunk_size": 1000},
    "no-verify": {"verify_checksum": False},
    "lenient": {"lenient": True},
    "no-expand": {"expand_payloads": False},
    "resync": {"on_error": "resync"},
}


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[-40:])
def test_fixture_files_frame_identically(path: Path, mode: str) -> None:
    kw = dict(MODES[mode])
    source: Any = path.read_bytes() if kw.pop("as_bytes", False) else str(path)
    _same(source, **kw)


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[-40:])
def test_fixture_files_scan_identically(path: Path, mode: str) -> None:
    """scan_headers' framing (``decode_header_only`` everywhere but FORMAT_DESCRIPTION /
    START_V3, payloads not expanded, each event's header handed out in place of the event) in
    every reader mode: CRC32 checked or not, lenient, resynchronising."""
    kw = dict(MODES[mode])
    source: Any = path.read_bytes() if kw.pop("as_bytes", False) else str(path)
    items, _, _ = _same(source, **{**kw, **SCAN})
    assert all(isinstance(x, (EventHeader, tuple)) for x in items)  # headers, or skips


#: the types whose headers the ingest's split point scan reads (``binlake.ingest.records.SPLIT_POINT_TYPES``)
TRX_TYPES = frozenset({EventType.GTID, EventType.ANONYMOUS_GTID, EventType.GTID_TAGGED, EventType.MARIA_GTID,
                       EventType.XID})

#: the reader scan_headers runs
SCAN = {"dispatch": HEADER_ONLY_DISPATCH, "expand_payloads": False, "headers_only": True}


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("path", DAMAGE_BASES, ids=lambda p: p.name[-40:])
def test_headers_of_decoded_events_are_identical(path: Path, mode: str) -> None:
    """``headers_only`` with the standard decoders: every body decoded (its errors raised), the
    headers handed out, those of the events inside TRANSACTION_PAYLOADs too."""
    kw = dict(MODES[mode])
    source: Any = path.read_bytes() if kw.pop("as_bytes", False) else str(path)
    items, _, _ = _same(source, headers_only=True, **kw)
    assert all(isinstance(x, (EventHeader, tuple)) for x in items)
    full, _, _ = _same(source, **kw)
    assert items == [_header_of(x) for x in full]


def _header_of(item: Any) -> Any:
    """The header of one of :func:`_item`'s values (a skip stays a skip)."""
    if isinstance(item, tuple):
        return item if item[0] == "skip" else item[1] if item[0] == "rows" else item[0].header
    return item.header


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[-40:])
def test_header_scans_and_positions_are_identical(path: Path) -> None:
    """scan_headers (its own dispatch: every body decoder replaced) with and without CRC32
    checks, and scanning and decoding between start / stop positions taken from the file's
    events."""
    headers, _ = _same_scan(str(path), verify_checksum=True)
    headers, error = _same_scan(str(path), verify_checksum=False)
    # only some types (the ingest's split point scan's): the full scan's headers of them, and its
    # error
    for types in (TRX_TYPES, frozenset({EventType.QUERY, EventType.ROTATE})):
        assert _same_scan(str(path), types=types) == ([h for h in headers if h.type_code in types], error)
    positions = [h.pos for h in headers]
    # a consumer that skips ahead (HeaderScan.skip_to, as the split point scan does): never a
    # header at or after the offset left out, nor one it wants before it
    for types in (TRX_TYPES, None):
        wanted = [h for h in headers if types is None or h.type_code in types]
        if not wanted:
            continue
        first, third = wanted[0].pos, positions[len(positions) // 3]
        python, compiled = _scans(str(path), types=types, skip_at=(first, third))
        for got, got_error in (python, compiled):
            assert got_error == error
            assert [h for h in got if h.pos >= third] == [h for h in wanted if h.pos >= third]
            assert [h for h in got if h.pos <= first] == [h for h in wanted if h.pos <= first]
            assert all(h in wanted for h in got)
        # the Python loop skips at once; without types, nothing is skipped
        skipped = [h for h in wanted if first < h.pos < third]
        assert python[0] == ([h for h in wanted if h not in skipped] if types else wanted)
        # told before it starts, the compiled loop skips as the Python loop does
        assert _same_scan(str(path), types=types, skip_at=(None, third)) == (
            [h for h in wanted if h.pos >= third] if types else wanted, error)
    if len(positions) < 3:
        return
    third, half = positions[len(positions) // 3], positions[len(positions) // 2]
    for start, stop in ((third, None), (None, half), (positions[1], positions[-1]), (third + 1, None)):
        _same(str(path), start_position=start, stop_position=stop)
        _same_scan(str(path), start_position=start, stop_position=stop)


def _same_scan(source: Any, **kw: Any) -> tuple[list[Any], Any]:
    """``scan_headers(source, **kw)`` on both paths: the same headers, then the same error
    (``as_stream``: the bytes read as a stream, as the ingest reads an object; ``skip_at``:
    ``(at, to)``, a :class:`HeaderScan` told to skip to ``to`` once it yields the header at
    ``at``, or before it starts when ``at`` is None)."""
    as_stream = kw.pop("as_stream", False)
    got = _scans(source, as_stream=as_stream, **kw)
    assert got[1] == got[0]
    return got[0]


def _scans(source: Any, *, as_stream: bool = False, skip_at: tuple[int | None, int] = (None, 0),
           **kw: Any) -> list[tuple[list[Any], Any]]:
    """:func:`_same_scan`'s scans, without the extension and with it."""
    at, to = skip_at
    got = []
    for enabled in (False, True):
        headers: list[Any] = []
        err = None
        with _native_on(enabled):
            try:
                scan = HeaderScan(io.BytesIO(source) if as_stream else source, **kw)
                if at is None and to:
                    scan.skip_to(to)  # before the first header: both loops skip from the start
                for h in scan:
                    headers.append(h)
                    if h.pos == at:
                        scan.skip_to(to)
            except BinlogError as exc:
                err = _error(exc)
        got.append((headers, err))
    return got


def test_the_compiled_loop_frames_almost_every_event(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: on sakila (1,462 events, 47,000 rows, 1.4 MB read in 1 MiB chunks) the Python
    loop frames only the FORMAT_DESCRIPTION, the event across the chunk boundary and the end."""
    calls: list[int] = []
    real = EventFramer._native_frames

    def counting(self: EventFramer, pos: int) -> Any:
        calls.append(pos)
        return real(self, pos)

    monkeypatch.setattr(EventFramer, "_native_frames", counting)
    path = next(p for p in FILES if p.name.endswith("mysql-bin.sakila"))
    events, err, _ = _outcome(str(path), True)
    assert err is None and len(events) > 1400
    print(len(calls), calls)
    assert len(calls) <= 5


def test_the_compiled_loop_scans_without_calling_python() -> None:
    """scan_headers with the extension calls no Python function per event: on sakila (1,462
    events read in 1 MiB chunks), only the events the Python loop frames (the
    FORMAT_DESCRIPTION, the one across the chunk boundary) call ``decode_header_only``. Per
    event, only the generators that pass the headers on are resumed (``yield from``: the
    reader's, the framer's and scan_headers' own)."""
    path = next(p for p in FILES if p.name.endswith("mysql-bin.sakila"))
    calls: Counter[str] = Counter()
    resumed: Counter[str] = Counter()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            generator = frame.f_code.co_flags & inspect.CO_GENERATOR
            (resumed if generator else calls)[frame.f_code.co_qualname] += 1

    with _native_on(True):
        sys.setprofile(profile)
        try:
            headers = list(scan_headers(str(path)))
        finally:
            sys.setprofile(None)
    assert len(headers) > 1400
    assert calls["decode_header_only"] <= 2
    assert max(calls.values()) < 30, calls.most_common(5)
    assert {name for name, n in resumed.items() if n > 30} == {
        "scan_headers", "BinlogReader._iter_path", "EventFramer._run"}


class _DispatchWithDefault(dict):  # type: ignore[type-arg]
    """A dispatch table that is not a plain dict (the compiled loop leaves it to Python)."""

    def get(self, key: Any, default: Any = None) -> Any:
        return super().get(key, default)


@pytest.mark.parametrize("kw", [
    {"verify_checksum": 1}, {"lenient": 1}, {"stop_position": -1}, {"stop_position": 5000.5},
    {"max_event_size": 2 ** 70}, {"max_event_size": 300}, {"dispatch": "subclass"}, {"dispatch": "scan"},
], ids=repr)
def test_unusual_reader_arguments_frame_identically(kw: dict[str, Any]) -> None:
    from binlog_parser.reader import build_dispatch

    if kw.get("dispatch") == "subclass":
        kw = {"dispatch": _DispatchWithDefault(build_dispatch())}
    elif kw.get("dispatch") == "scan":
        kw = {"dispatch": HEADER_ONLY_DISPATCH}
    path = next(p for p in FILES if p.name.endswith("mysql-bin.checksum-crc32"))
    _same(str(path), **kw)


# ------------------------------------------------------------------ damaged files


def _damage(raw: bytearray, data: st.DataObject) -> bytearray:
    """Bytes changed anywhere (headers too), an event's size field lying, or the tail cut."""
    how = data.draw(st.sampled_from(["bytes", "size", "cut", "bytes+cut"]))
    if how in ("bytes", "bytes+cut"):
        for _ in range(data.draw(st.integers(1, 6))):
            at = data.draw(st.integers(4, len(raw) - 1))
            raw[at] = data.draw(st.integers(0, 255))
    if how == "size":
        at = data.draw(st.integers(4, len(raw) - 13))
        raw[at + 9:at + 13] = data.draw(st.integers(0, 2 ** 32 - 1)).to_bytes(4, "little")
    if how in ("cut", "bytes+cut"):
        raw = raw[:data.draw(st.integers(4, len(raw)))]
    return raw


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(DAMAGE_BASES), st.data())
def test_damaged_files_give_the_same_events_and_errors(path: Path, data: st.DataObject) -> None:
    raw = bytes(_damage(bytearray(path.read_bytes()), data))
    kw = data.draw(st.sampled_from([{}, {"verify_checksum": False}, {"lenient": True},
                                    {"on_error": "resync"}, {"as_stream": True, "chunk_size": 700}]))
    _same(raw, **kw)
    _same(raw, **{**kw, **SCAN})
    _same_scan(raw, verify_checksum=data.draw(st.booleans()), as_stream=data.draw(st.booleans()))


# ------------------------------------------------------------------ GTID / QUERY / XID bodies

_TEXT = st.one_of(st.text(max_size=12), st.binary(max_size=12).map(lambda b: b.decode("latin-1")))
_STATUS_VARS = st.fixed_dictionaries({}, optional={
    "flags2": st.integers(0, 2 ** 32 - 1), "sql_mode": st.integers(0, 2 ** 64 - 1),
    "catalog": _TEXT, "auto_increment": st.fixed_dictionaries(
        {"increment": st.integers(0, 65535), "offset": st.integers(0, 65535)}),
    "charset": st.fixed_dictionaries({"client": st.integers(0, 65535), "connection": st.integers(0, 65535),
                                      "server": st.integers(0, 65535)}),
    "time_zone": _TEXT, "lc_time_names": st.integers(0, 65535), "charset_database": st.integers(0, 65535),
    "table_map_for_update": st.integers(0, 2 ** 64 - 1), "master_data_written": st.integers(0, 2 ** 32 - 1),
    "invoker": st.fixed_dictionaries({"user": _TEXT, "host": _TEXT}),
    "updated_db_names": st.one_of(st.none(), st.lists(_TEXT.filter(lambda s: "\x00" not in s), max_size=3)),
    "microseconds": st.integers(0, 2 ** 24 - 1), "commit_ts": st.integers(0, 2 ** 64 - 1),
    "explicit_defaults_ts": st.booleans(), "ddl_xid": st.integers(0, 2 ** 64 - 1),
    "default_collation_for_utf8mb4": st.integers(0, 65535), "sql_require_primary_key": st.integers(0, 255),
    "default_table_encryption": st.integers(0, 255), "hrnow": st.integers(0, 2 ** 24 - 1),
    "xid": st.integers(0, 2 ** 64 - 1), "gtid_flags3": st.integers(0, 255),
    "character_set_collations": st.lists(st.fixed_dictionaries(
        {"charset": st.integers(0, 65535), "collation": st.integers(0, 65535)}), max_size=3),
})


@st.composite
def _query_body(draw: Any) -> bytes:
    """A QUERY body: status variables as servers write them (plus raw Q_CATALOG, an unknown
    code, invalid UTF-8 in the texts), its lengths sometimes lying."""
    sv = encode_status_vars(draw(_STATUS_VARS))
    if _now_and_then(draw):
        sv += draw(st.sampled_from([b"\x02\x03std\x00", b"\x02\x09", b"\x63junk", b"\x0c\x02a\x00b"]))
    schema = draw(st.one_of(st.text(max_size=8).map(str.encode), st.binary(max_size=8)))
    query = draw(st.one_of(st.just(b"BEGIN"), st.text(max_size=20).map(str.encode), st.binary(max_size=20)))
    sv_len = draw(st.integers(0, 70)) if _now_and_then(draw) else len(sv)
    db_len = draw(st.integers(0, 255)) if _now_and_then(draw) else len(schema)
    body = (struct.pack("<IIBHH", draw(st.integers(0, 2 ** 32 - 1)), 3, db_len, 0, sv_len) + sv
            + schema + b"\x00" + query)
    return body[:draw(st.integers(0, len(body)))] if _now_and_then(draw) else body


def _now_and_then(draw: Any) -> bool:
    """True one time in five: a lie or a cut, while most bodies stay decodable."""
    return bool(draw(st.integers(0, 4)) == 0)


@st.composite
def _gtid_body(draw: Any) -> bytes:
    opt = st.one_of(st.none(), st.integers(0, 2 ** 55 - 1))
    body = gtid_body(
        uuid=GTID, gno=draw(st.one_of(st.integers(0, 2 ** 40), st.integers(2 ** 63 - 2, 2 ** 64 - 1))),
        flags=draw(st.integers(0, 255)), last_committed=draw(opt), sequence_number=draw(opt),
        immediate_commit_timestamp=draw(opt), original_commit_timestamp=draw(opt),
        transaction_length=draw(st.one_of(st.none(), st.integers(0, 2 ** 64 - 1))),
        immediate_server_version=draw(st.one_of(st.none(), st.integers(0, 2 ** 31 - 1))),
        original_server_version=draw(st.one_of(st.none(), st.integers(0, 2 ** 31 - 1))),
        commit_group_ticket=draw(st.one_of(st.none(), st.integers(0, 2 ** 64 - 1))))
    mutated = bytearray(body)
    while _now_and_then(draw):
        mutated[draw(st.integers(0, len(mutated) - 1))] = draw(st.sampled_from([0xFB, 0xFC, 0xFF, 0x80, 2]))
    return bytes(mutated)[:draw(st.integers(0, len(body)))] if _now_and_then(draw) else bytes(mutated)


# data_too_large: up to six whole event bodies per example is the point of the test
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(st.one_of(st.tuples(st.just(2), _query_body()), st.tuples(st.sampled_from([33, 34]), _gtid_body()),
                          st.tuples(st.just(16), st.binary(max_size=12))), min_size=1, max_size=6),
       st.booleans())
def test_gtid_query_xid_bodies_decode_or_fail_identically(events: list[tuple[int, bytes]], crc: bool) -> None:
    """Bodies the compiled GTID / QUERY / XID decoders see (checksums intact): well-formed ones
    give the same fields, bad ones the same error as the Python decoders."""
    b = Builder(crc=crc)
    for type_code, body in events:
        b.add(type_code, body)
    _same(b.bytes())
    _same(b.bytes(), on_error="resync")


# ------------------------------------------------------------------ header layouts


def _v1_file(queries: list[bytes]) -> bytes:
    """A binlog v1 (3.23): 13-byte headers, no next-position, QUERY post-header of 11 bytes."""
    out = bytearray(MAGIC + struct.pack("<IBII", 1, 1, 1, 69) + struct.pack("<H", 1)
                    + b"3.23.58-log".ljust(50, b"\x00") + b"\x00" * 4)
    for q in queries:
        body = struct.pack("<IIBH", 7, 0, 2, 0) + b"db\x00" + q
        out += struct.pack("<IBII", 2, 2, 1, 13 + len(body)) + body
    out += struct.pack("<IBII", 2, 16, 1, 13 + 8) + struct.pack("<Q", 5)  # XID: Python-decoded
    return bytes(out + struct.pack("<IBII", 3, 3, 1, 13))


def _long_header_file(n: int, crc: bool) -> bytes:
    """A build whose FORMAT_DESCRIPTION declares 23-byte common headers: 4 extra header bytes
    before every body."""
    from _binlog_util import fde

    out = bytearray(MAGIC + fde(header_length=23, alg=1 if crc else 0))
    for i in range(n):
        for type_code, body in ((33, gtid_body(uuid=GTID, gno=i + 1)), (16, struct.pack("<Q", i))):
            body = b"EXTR" + body
            size = 19 + len(body) + (4 if crc else 0)
            raw = struct.pack("<IBIIIH", 1, type_code, 1, size, len(out) + size, 0) + body
            out += raw + (struct.pack("<I", zlib.crc32(raw)) if crc else b"")
    return bytes(out)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["v1", "long-crc", "long"]), st.data())
def test_v1_and_longer_common_headers_frame_identically(layout: str, data: st.DataObject) -> None:
    if layout == "v1":
        raw = _v1_file([b"BEGIN", "INSERT é".encode(), b"\xff\xfe", b"COMMIT"] * 3)
    else:
        raw = _long_header_file(5, crc=layout == "long-crc")
    events, err, _ = _same(raw)
    assert err is None and len(events) > 10
    damaged = bytes(_damage(bytearray(raw), data))
    _same(damaged)
    _same(damaged, on_error="resync")


# ------------------------------------------------------------------ written files


def test_a_written_oltp_file_frames_identically_in_every_mode() -> None:
    """Transactions as bench/decode.py's OLTP corpus holds them (GTID, BEGIN, TABLE_MAP + rows,
    XID), compressed ones too, across stream chunk boundaries, and with user column names
    given halfway (repeated TABLE_MAPs then take the Python decoder's schema path)."""
    table = Table("db", "t", (Column("id", "INT"), Column("v", "VARCHAR(20)"), Column("d", "DECIMAL(10,2)")),
                  table_id=7)
    for compression in (None, "zstd"):
        buf = io.BytesIO()
        w = BinlogFileWriter(buf, server_version="8.0.40", previous_gtids="", compression=compression)
        for i in range(1, 200):
            w.begin_transaction(f"{GTID}:{i}", last_committed=i - 1, sequence_number=i, timestamp=1700000000 + i)
            w.write_rows(table, [{"id": i, "v": f"r{i}", "d": "1.50"}])
            w.update_rows(table, [({"id": i, "v": f"r{i}", "d": "1.50"}, {"id": i, "v": "é", "d": "-2.25"})])
            w.xid()
        w.rotate("binlog.000002")
        data = buf.getvalue()
        assert data.startswith(MAGIC)
        pos = [h.pos for h in scan_headers(data)]
        for kw in ({}, {"as_stream": True, "chunk_size": 333}, {"expand_payloads": False},
                   {"start_position": pos[len(pos) // 4], "stop_position": pos[-3]},
                   {"schemas": {"db.t": ["a", "b", "c"]}, "schemas_at": 300}):
            events, err, _ = _same(data, **kw)
            assert err is None and len(events) > 150
