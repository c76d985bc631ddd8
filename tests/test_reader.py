"""The reader: sources, version detection, checksums, positions, splits, errors."""

from __future__ import annotations

import io
import struct
from typing import Any

import pytest
from _binlog_util import (
    BINLOGS,
    CRC32_SAMPLE,
    MAGIC,
    Builder,
    corrupt_middle_query,
    event,
    fde,
    query_body,
    rotate_body,
    xid_body,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from binlog_parser import (
    BinlogError,
    BinlogReader,
    ChecksumMismatchError,
    CorruptEventError,
    NotABinlogError,
    SkippedBytes,
    TruncatedEventError,
    UnknownEvent,
    UnsupportedVersionError,
    read_events,
    read_format_description,
    read_records,
    scan_headers,
)
from binlog_parser.constants import EventType
from binlog_parser.reader import fde_has_checksum_alg, server_version_split

CRC_FILE = BINLOGS / "osheroff__mysql-binlog-connector-java" / "src__test__resources__mysql-bin.checksum-crc32"


def _sample() -> Builder:
    b = Builder()
    b.add(EventType.QUERY, query_body("BEGIN"))
    b.add(EventType.QUERY, query_body("INSERT INTO t VALUES (1)"))
    b.add(EventType.XID, xid_body(11))
    b.add(EventType.QUERY, query_body("BEGIN"))
    b.add(EventType.XID, xid_body(12))
    b.add(EventType.ROTATE, rotate_body("binlog.000002"))
    return b


class NonSeekable(io.RawIOBase):
    def __init__(self, data: bytes, piece: int = 7) -> None:
        self._d = data
        self._p = 0
        self._piece = piece

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:  # short reads on purpose
        n = self._piece if n < 0 else min(n, self._piece)
        out = self._d[self._p:self._p + n]
        self._p += len(out)
        return out


def _names(events) -> list[str]:  # type: ignore[no-untyped-def]
    return [e.name for e in events]


def test_sources_agree(tmp_path) -> None:  # type: ignore[no-untyped-def]
    data = _sample().bytes()
    p = tmp_path / "binlog.000001"
    p.write_bytes(data)
    ref = [(e.header, e.fields()) for e in read_events(data)]
    assert len(ref) == 7
    for src in (str(p), p, memoryview(data), bytearray(data), io.BytesIO(data), NonSeekable(data)):
        got = [(e.header, e.fields()) for e in read_events(src)]  # type: ignore[arg-type]
        assert got == ref
    # tiny chunks exercise the refill path
    got = [(e.header, e.fields()) for e in BinlogReader(NonSeekable(data, 3), chunk_size=5)]
    assert got == ref


def test_positions_and_next_pos_chain() -> None:
    evs = list(read_events(CRC_FILE))
    assert evs[0].header.pos == 4
    for a, b in zip(evs, evs[1:]):
        assert a.header.next_pos == b.header.pos
        assert a.header.log_pos == a.header.next_pos  # v4 binlog: end of event
    assert evs[-1].header.next_pos == CRC_FILE.stat().st_size
    assert all(e.header.checksum_ok is True for e in evs)


def test_start_and_stop_position() -> None:
    b = _sample()
    data = b.bytes()
    all_evs = list(read_events(data))
    third = all_evs[3].header.pos
    got = list(read_events(data, start_position=third))
    assert [e.header.pos for e in got] == [e.header.pos for e in all_evs[3:]]
    got = list(read_events(io.BytesIO(data), start_position=third, stop_position=all_evs[5].header.pos))
    assert [e.header.pos for e in got] == [e.header.pos for e in all_evs[3:5]]
    got = list(read_events(NonSeekable(data), start_position=third))
    assert len(got) == 4


def test_decode_from_offset_with_context(tmp_path) -> None:  # type: ignore[no-untyped-def]
    data = _sample().bytes()
    ctx = read_format_description(data[:4096])
    assert ctx.server_version == "8.0.40" and ctx.checksum_alg == 1 and ctx.header_length == 19
    all_evs = list(read_events(data))
    off = all_evs[4].header.pos
    # a stream positioned at the offset (e.g. an S3 range read): source_offset says where
    got = list(read_events(io.BytesIO(data[off:]), context=ctx, source_offset=off))
    assert [(e.header.pos, e.name) for e in got] == [(e.header.pos, e.name) for e in all_evs[4:]]
    # a path + start_position
    p = tmp_path / "b"
    p.write_bytes(data)
    got = list(read_events(p, context=read_format_description(p), start_position=off))
    assert [e.header.pos for e in got] == [e.header.pos for e in all_evs[4:]]
    # bytes of the whole file + start_position
    got = list(read_events(data, context=read_format_description(data), start_position=off))
    assert len(got) == 3


def test_checksum_mismatch_strict_and_lenient() -> None:
    b = Builder()
    b.add(EventType.QUERY, query_body("BEGIN"))
    bad = b.add(EventType.XID, xid_body(5), bad_crc=True)
    b.add(EventType.XID, xid_body(6))
    data = b.bytes()
    with pytest.raises(ChecksumMismatchError) as ei:
        list(read_events(data, file_name="binlog.000009"))
    assert ei.value.offset == bad and ei.value.file == "binlog.000009" and ei.value.type_code == 16
    assert str(ei.value).startswith(f"binlog.000009:{bad}: ")
    evs = list(read_events(data, lenient=True))
    assert [e.header.checksum_ok for e in evs] == [True, True, False, True]
    assert evs[2].xid == 5
    evs = list(read_events(data, verify_checksum=False))
    assert [e.header.checksum_ok for e in evs] == [None] * 4


def test_corrupted_fixture_byte_detected() -> None:
    data = bytearray(CRC_FILE.read_bytes())
    data[300] ^= 0x40
    with pytest.raises(ChecksumMismatchError):
        list(read_events(bytes(data)))


def test_checksum_off_and_pre_561() -> None:
    b = Builder(crc=False)
    b.add(EventType.XID, xid_body(1))
    evs = list(read_events(b.bytes()))
    assert evs[0].checksum_alg == 0 and evs[1].xid == 1 and evs[1].header.checksum_ok is None
    assert server_version_split("5.6.0-log") == (5, 6, 0) and not fde_has_checksum_alg("5.6.0-log")
    assert fde_has_checksum_alg("5.6.1") and fde_has_checksum_alg("5.5.30-MariaDB")


def test_multiple_fdes_relay_log() -> None:
    # the second FORMAT_DESCRIPTION switches the checksum algorithm for what follows
    data = bytearray(MAGIC + fde(alg=0, pos=4))
    data += event(EventType.ROTATE, rotate_body("master-bin.000001"), pos=len(data), crc=False, flags=0x20)
    data += fde(alg=1, pos=len(data))
    data += event(EventType.XID, xid_body(3), pos=len(data), crc=True)
    evs = list(read_events(bytes(data)))
    assert _names(evs) == ["FORMAT_DESCRIPTION", "ROTATE", "FORMAT_DESCRIPTION", "XID"]
    assert evs[-1].header.checksum_ok is True and evs[1].artificial


def test_longer_common_header_from_fde() -> None:
    # a build with 23-byte common headers: 4 extra header bytes skipped before the body
    data = bytearray(MAGIC + fde(header_length=23))
    pos = len(data)
    body = b"EXTR" + xid_body(77)
    size = 19 + len(body) + 4
    raw = struct.pack("<IBIIIH", 1, 16, 1, size, pos + size, 0) + body
    import zlib

    data += raw + struct.pack("<I", zlib.crc32(raw))
    evs = list(read_events(bytes(data)))
    assert evs[-1].xid == 77


def test_v3_file_and_unsupported_versions() -> None:
    v3 = BINLOGS / "webscalesql__webscalesql-5.6" / "mysql-test__suite__binlog__std_data__binlog_old_version_4_1.000001"
    r = BinlogReader(v3)
    evs = list(r)
    assert r.context.binlog_version == 3 and evs[0].name == "START_V3"
    # v1: 13-byte headers, START_V3 of 13 + 56 bytes
    start = struct.pack("<IBII", 1, 1, 1, 69) + struct.pack("<H", 1) + b"3.23.58-log".ljust(50, b"\x00") + b"\x00" * 4
    stop = struct.pack("<IBII", 2, 3, 1, 13)
    r = BinlogReader(MAGIC + start + stop)
    evs = list(r)
    assert r.context.binlog_version == 1 and _names(evs) == ["START_V3", "STOP"]
    assert evs[1].header.pos == 73 and evs[1].header.next_pos == 86
    # v2: a START_V3 of 75 bytes declaring binlog version 2
    v2 = struct.pack("<IBIIIH", 1, 1, 1, 75, 79, 0) + struct.pack("<H", 2) + b"4.0.1".ljust(50, b"\x00") + b"\x00" * 4
    with pytest.raises(UnsupportedVersionError):
        list(read_events(MAGIC + v2))
    with pytest.raises(UnsupportedVersionError):
        list(read_events(MAGIC + event(EventType.QUERY, query_body("x"), pos=4)))
    bad_fde = bytearray(MAGIC + fde())
    bad_fde[4 + 19] = 5  # binlog_version 5 in the FDE body (CRC no longer matches either)
    with pytest.raises((UnsupportedVersionError, ChecksumMismatchError)):
        list(read_events(bytes(bad_fde)))
    with pytest.raises(UnsupportedVersionError):
        list(read_events(bytes(bad_fde), verify_checksum=False))


def test_not_a_binlog() -> None:
    with pytest.raises(NotABinlogError):
        list(read_events(b"GIF89a......"))
    with pytest.raises(NotABinlogError):
        list(read_events(b""))
    with pytest.raises(TruncatedEventError):
        list(read_events(b"\xfebi"))


def test_truncation_delivers_events_before() -> None:
    data = _sample().bytes()
    cut = data[:-10]
    got = []
    with pytest.raises(TruncatedEventError) as ei:
        for e in read_events(cut):
            got.append(e)
    assert len(got) == 6 and ei.value.offset == len(data) - 44 and ei.value.type_code == 4
    got = []
    with pytest.raises(TruncatedEventError):
        for e in read_events(NonSeekable(cut)):  # unknown size: found at the end of data
            got.append(e)
    assert len(got) == 6
    with pytest.raises(TruncatedEventError):
        list(read_events(data[:-44 + 5]))  # ends inside a header


def test_garbage_lengths_fail_fast() -> None:
    b = Builder()
    pos = b.pos
    b.data += struct.pack("<IBIIIH", 1, 2, 1, 0xFFFFFFF0, 0, 0) + b"\x00" * 40
    with pytest.raises(TruncatedEventError) as ei:
        list(read_events(b.bytes()))  # known size: no allocation of 4 GiB
    assert ei.value.offset == pos
    with pytest.raises(CorruptEventError):
        list(read_events(NonSeekable(b.bytes())))  # unknown size: max_event_size cap
    with pytest.raises(CorruptEventError):
        list(read_events(NonSeekable(b.bytes()), max_event_size=1000))
    z = Builder()
    z.data += struct.pack("<IBIIIH", 1, 2, 1, 0, 0, 0) + b"\x00" * 40
    with pytest.raises(CorruptEventError, match="smaller than its header"):
        list(read_events(z.bytes()))
    short = Builder()
    short.data += struct.pack("<IBIIIH", 1, 16, 1, 20, 0, 0) + b"\x00" * 40  # no room for CRC
    with pytest.raises(CorruptEventError):
        list(read_events(short.bytes()))


def test_unknown_types_kept_never_dropped() -> None:
    b = Builder()
    b.add(200, b"\x01\x02\x03", flags=0x80)
    b.add(99, b"")
    evs = list(read_events(b.bytes()))
    assert isinstance(evs[1], UnknownEvent) and evs[1].body == b"\x01\x02\x03" and evs[1].ignorable
    assert evs[1].name == "UNKNOWN_200"
    assert isinstance(evs[2], UnknownEvent) and not evs[2].ignorable


def test_rows_types_unknown_with_empty_rows_dispatch() -> None:
    from binlog_parser.decoders import CORE_DECODERS

    path = BINLOGS / "rusuly__MySqlCdc" / "samples__MySqlCdc.Sample__mysql-bin.000001"
    evs = list(BinlogReader(path, dispatch=dict(CORE_DECODERS)))
    rows = [e for e in evs if e.header.type_code in (19, 30)]
    assert len(rows) == 6 and all(isinstance(e, UnknownEvent) for e in rows)


def test_corrupt_body_is_typed_error() -> None:
    b = Builder()
    b.add(EventType.XID, b"\x01\x02")  # XID body too short
    with pytest.raises(CorruptEventError) as ei:
        list(read_events(b.bytes()))
    assert ei.value.type_code == 16 and ei.value.offset == 4 + 122 + 0 or ei.value.offset > 4


def test_scan_headers_matches_full_decode() -> None:
    heads = list(scan_headers(CRC_FILE))
    full = [e.header for e in read_events(CRC_FILE, verify_checksum=False, expand_payloads=False)]
    assert [(h.pos, h.type_code, h.event_size) for h in heads] == [
        (h.pos, h.type_code, h.event_size) for h in full]
    gtid_positions = [h.pos for h in heads if h.type_code in (33, 34)]
    assert len(gtid_positions) == 60


def test_drop_version_permutation() -> None:
    path = BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__ver_5_1-wl2325_s.001"
    evs = list(read_events(path))
    perm = {e.header.raw_type_code: e.name for e in evs if e.header.raw_type_code is not None}
    assert perm == {20: "XID", 21: "BEGIN_LOAD_QUERY", 22: "EXECUTE_LOAD_QUERY"}
    elq = next(e for e in evs if e.name == "EXECUTE_LOAD_QUERY")
    assert elq.query == "LOAD DATA INFILE 'big_file.dat' INTO TABLE t3" and elq.file_id == 2


# -- on_error="resync": one bad event does not lose the rest of the file -----------------------


def test_resync_steps_over_one_corrupt_query_by_its_own_size() -> None:
    data = CRC32_SAMPLE.read_bytes()
    bad, pos, next_pos = corrupt_middle_query(data)
    with pytest.raises(CorruptEventError, match="status variables .65535 bytes. run past the event") as info:
        list(read_events(bad))
    assert info.value.offset == pos
    full = list(read_events(data))
    got = list(BinlogReader(bad, on_error="resync").records())
    (skip,) = [r for r in got if isinstance(r, SkippedBytes)]
    assert (skip.start, skip.end, skip.found_by) == (pos, next_pos, "event_size")
    assert skip.head == bad[pos:next_pos] and skip.error.offset == pos
    assert "status variables" in skip.error.message
    # every other event decoded, identical to the undamaged file
    assert [e for e in got if not isinstance(e, SkippedBytes)] == [e for e in full if e.header.pos != pos]


@pytest.mark.parametrize("as_stream", [False, True])
def test_resync_scans_for_the_next_header_when_the_size_lies(as_stream: bool) -> None:
    data = CRC32_SAMPLE.read_bytes()
    bad, pos, next_pos = corrupt_middle_query(data, lie_about_size=True)
    source: Any = NonSeekable(bad, piece=997) if as_stream else bad
    got = list(read_records(source))
    (skip,) = [r for r in got if isinstance(r, SkippedBytes)]
    assert (skip.start, skip.end, skip.found_by) == (pos, next_pos, "scan")
    assert isinstance(skip.error, (TruncatedEventError, CorruptEventError))
    full = list(read_events(data))
    assert [e for e in got if not isinstance(e, SkippedBytes)] == [e for e in full if e.header.pos != pos]


def test_resync_with_nothing_valid_after_skips_to_the_end() -> None:
    b = _sample()
    at = b.add(EventType.QUERY, query_body("COMMIT"))
    data = bytearray(b.bytes())
    data[at + 4] = 0  # type 0 (UNKNOWN) with a now-wrong CRC, then garbage to the end
    data += b"\xaa" * 300
    got = list(read_records(bytes(data)))
    skip = got[-1]
    assert isinstance(skip, SkippedBytes)
    assert (skip.start, skip.end, skip.found_by) == (at, len(data), "end_of_data")
    assert isinstance(skip.error, ChecksumMismatchError)
    assert _names(got[:-1]) == _names(read_events(b.bytes()))[:-1]


def test_resync_keeps_a_truncated_tail_a_truncation() -> None:
    data = CRC32_SAMPLE.read_bytes()
    with pytest.raises(TruncatedEventError):
        list(read_records(data[:-10]))


def test_resync_mode_refuses_plain_iteration() -> None:
    with pytest.raises(ValueError, match="records"):
        iter(BinlogReader(b"", on_error="resync"))
    with pytest.raises(ValueError, match="on_error"):
        list(read_records(CRC32_SAMPLE.read_bytes(), on_error="skip"))


_DAMAGE_FILES = (CRC32_SAMPLE, BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__transaction_compression.000001")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_DAMAGE_FILES), st.booleans(),
       st.lists(st.tuples(st.integers(0, 1 << 30), st.integers(0, 255)), min_size=1, max_size=8))
def test_resync_accounts_for_every_byte_of_a_damaged_file(path: Any, as_stream: bool,
                                                          edits: list[tuple[int, int]]) -> None:
    """Random byte damage anywhere after the magic (bytes or a forward-only stream): the events
    and skipped ranges of a resync read tile the file without gap or overlap, up to its end or
    to the error that stops it (a damaged FORMAT_DESCRIPTION, a truncated tail), which names its
    offset. A ``payload`` skip covers the TRANSACTION_PAYLOAD just yielded (its embedded events
    stopped decoding). An ad-hoc run of this check over 18,000 mutated files found nothing."""
    data = bytearray(path.read_bytes())
    for at, value in edits:
        data[4 + at % (len(data) - 4)] = value
    pos = last = 4
    source: Any = NonSeekable(bytes(data), piece=1000) if as_stream else bytes(data)
    try:
        for rec in read_records(source):
            if isinstance(rec, SkippedBytes):
                if rec.found_by == "payload":
                    assert (rec.start, rec.end) == (last, pos)
                else:
                    assert rec.start == pos and rec.end > rec.start and rec.error.offset == rec.start
                    pos = rec.end
                assert rec.head == bytes(data[rec.start:rec.start + len(rec.head)])
            elif rec.header.payload_pos is None:
                assert rec.header.pos == pos
                last, pos = pos, rec.header.next_pos
    except BinlogError as exc:
        assert exc.offset == pos or exc.offset == 4
        return
    assert pos == len(data)


def test_resync_reports_only_skips_at_or_after_start_position() -> None:
    bad, pos, next_pos = corrupt_middle_query(CRC32_SAMPLE.read_bytes())
    after = [r for r in read_records(bad, start_position=next_pos) if isinstance(r, SkippedBytes)]
    assert after == []
    (skip,) = [r for r in read_records(bad, start_position=pos) if isinstance(r, SkippedBytes)]
    assert (skip.start, skip.end) == (pos, next_pos)


# -- pull mode: the path and stream readers let the framer answer its own data requests --------


class _Recording(io.RawIOBase):
    """A non-seekable stream that records every read size (and whether it was closed)."""

    def __init__(self, data: bytes, piece: int) -> None:
        self._d, self._p, self._piece, self.reads = data, 0, piece, []  # type: ignore[var-annotated]

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        self.reads.append(n)
        out = self._d[self._p:self._p + min(n, self._piece)]
        self._p += len(out)
        return out


@pytest.mark.parametrize("kw", [{}, {"start_position": "third"}, {"stop_position": "third"},
                                {"on_error": "resync"}], ids=repr)
def test_pull_mode_reads_and_frames_as_a_driven_framer(kw: dict[str, Any]) -> None:
    """EventFramer(feeder=...) answers each data request from the feeder itself: the same events
    and final position as a framer driven by hand (NeedData -> feeder.supply), from the same
    reads of the stream (chunks, gaps read and dropped), and no NeedData comes out."""
    from binlog_parser.context import DecodeContext
    from binlog_parser.dispatch import build_dispatch
    from binlog_parser.feeding import StreamFeeder
    from binlog_parser.framing import EventFramer, NeedData

    data = _sample().bytes()
    third = list(read_events(data))[3].header.pos
    kw = {k: third if v == "third" else v for k, v in kw.items()}
    runs = []
    for pull in (False, True):
        stream = _Recording(data, 7)
        feeder = StreamFeeder(stream, position=0, chunk=40)
        framer = EventFramer(DecodeContext(), build_dispatch(), expect_magic=True, first_position=0,
                             total_size=len(data), feeder=feeder if pull else None, **kw)
        items = []
        for item in framer.records():
            if isinstance(item, NeedData):
                assert not pull
                feeder.supply(framer, item.offset, item.size)
            else:
                items.append(item)
        runs.append((items, framer.position, stream.reads))
    assert runs[1] == runs[0]
    assert len(runs[0][0]) >= 3 and len(runs[0][2]) > 10


def test_path_readers_open_the_file_lazily_and_close_it(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Flattened into one generator, the path reader still opens the file at the first next()
    (a missing file raises there, not when the iterator is made) and closes it at the end,
    on an error, and when the iterator is closed early."""
    from binlog_parser import reader as reader_mod

    missing = tmp_path / "missing"
    for make in (read_events, scan_headers, read_records):
        it = make(missing)
        with pytest.raises(FileNotFoundError):
            next(it)
    opened: list[Any] = []
    real_open = reader_mod.open_binlog_file

    def recording_open(path: Any, position: int = 0) -> Any:
        stream, size = real_open(path, position)
        opened.append(stream)
        return stream, size

    monkeypatch.setattr(reader_mod, "open_binlog_file", recording_open)
    good = tmp_path / "good"
    good.write_bytes(_sample().bytes())
    bad = tmp_path / "bad"
    bad.write_bytes(_sample().bytes()[:-3])
    assert len(list(read_events(good))) == 7 and len(list(scan_headers(good))) == 7
    with pytest.raises(TruncatedEventError):
        list(read_events(bad))
    it = read_events(good)
    next(it)
    it.close()  # type: ignore[attr-defined]
    assert len(opened) == 4 and all(s.closed for s in opened)
