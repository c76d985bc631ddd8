"""binlog_parser.replication: the dump command packets byte for byte, and the dump-stream framing on
streams a real MariaDB 10.11 sent (tests/fixtures/replication, re-captured by capture_stream.py)."""

from __future__ import annotations

import struct
import uuid
from pathlib import Path

import pytest

from binlog_parser import replication as rpl
from binlog_parser.constants import LOG_EVENT_ARTIFICIAL_F, EventType

FIX = Path(__file__).parent / "fixtures" / "replication"
MARIADB_FIXTURE = Path(__file__).parent / "fixtures" / "mariadb-10.11"
MYSQL_FIXTURES = Path(__file__).parent / "fixtures" / "binlogs" / "rust-us__mysql-cdc-rs"


# --- command packets (layouts: seeds' network-stream page; MySQL source where they disagree) -----

def test_register_slave_bytes() -> None:
    # 1 [15] COM_REGISTER_SLAVE (my_command.h: 21; the seed's "[14]" is COM_CONNECT_OUT), 4 server-id,
    # 1+n hostname, 1+n user, 1+n password, 2 port, 4 replication rank, 4 master-id
    payload = rpl.register_slave_payload(4242, hostname="arch", user="u", password="", port=3306)
    assert payload.hex(" ") == ("15 92 10 00 00 04 61 72 63 68 01 75 00 ea 0c "
                                "00 00 00 00 00 00 00 00")
    assert rpl.register_slave_payload(1) == bytes.fromhex("15 01000000 00 00 00 0000 00000000 00000000")


def test_register_slave_rejects_long_fields() -> None:
    with pytest.raises(ValueError, match="longer than 255"):
        rpl.register_slave_payload(1, hostname="h" * 256)


def test_binlog_dump_bytes() -> None:
    # 1 [12] COM_BINLOG_DUMP, 4 binlog-pos, 2 flags, 4 server-id, string[EOF] binlog-filename
    payload = rpl.binlog_dump_payload(7, "binlog.000001", 4, rpl.BINLOG_DUMP_NON_BLOCK)
    assert payload == bytes.fromhex("12 04000000 0100 07000000") + b"binlog.000001"
    assert rpl.binlog_dump_payload(1, "", 4) == bytes.fromhex("12 04000000 0000 01000000")
    with pytest.raises(ValueError, match="4 bytes"):
        rpl.binlog_dump_payload(1, "binlog.000001", 1 << 32)


def test_binlog_dump_gtid_bytes() -> None:
    # The UUID of the seeds' GTID_LOG_EVENT worked example: b8ae2fd2-3005-11f0-8be8-0242ac150002.
    sid = uuid.UUID("b8ae2fd2-3005-11f0-8be8-0242ac150002")
    payload = rpl.binlog_dump_gtid_payload(3, [rpl.SidIntervals(sid, ((1, 6),))])
    expected = bytes.fromhex(
        "1e"                    # COM_BINLOG_DUMP_GTID
        "0400"                  # flags: BINLOG_THROUGH_GTID
        "03000000"              # server-id
        "00000000"              # binlog-filename-len (empty name)
        "0400000000000000"      # binlog-pos (8 bytes)
        "30000000"              # data-size: 48
        "0100000000000000"      # n_sids (8 bytes: Gtid_set::encode int8store; the seed says 4)
        "b8ae2fd2300511f08be80242ac150002"
        "0100000000000000"      # n_intervals
        "0100000000000000" "0600000000000000")  # [1, 6): GTIDs 1-5
    assert payload == expected
    assert rpl.parse_mysql_gtid_set("b8ae2fd2-3005-11f0-8be8-0242ac150002:1-5") == [
        rpl.SidIntervals(sid, ((1, 6),))]


def test_parse_mysql_gtid_set_several() -> None:
    text = "b8ae2fd2-3005-11f0-8be8-0242ac150002:1-5:7,\n00000000-0000-0000-0000-000000000001:3"
    sets = rpl.parse_mysql_gtid_set(text)
    assert [s.intervals for s in sets] == [((1, 6), (7, 8)), ((3, 4),)]
    data = rpl.encode_gtid_set(sets)
    assert struct.unpack_from("<Q", data)[0] == 2 and len(data) == 8 + (16 + 8 + 32) + (16 + 8 + 16)


def test_frame_packets_header_and_split() -> None:
    assert rpl.frame_packets(b"\x0e") == bytes.fromhex("01000000 0e")  # COM_PING, seq 0
    big = bytes(rpl.MAX_PACKET_PAYLOAD) + b"xy"
    framed = rpl.frame_packets(big, sequence_id=5)
    assert framed[:4] == b"\xff\xff\xff\x05"
    assert framed[4 + rpl.MAX_PACKET_PAYLOAD:4 + rpl.MAX_PACKET_PAYLOAD + 4] == b"\x02\x00\x00\x06"
    exact = rpl.frame_packets(bytes(rpl.MAX_PACKET_PAYLOAD))  # a full packet is followed by an empty one
    assert exact[-4:] == b"\x00\x00\x00\x01" and len(exact) == rpl.MAX_PACKET_PAYLOAD + 8


# --- framing on real captured streams -----------------------------------------------------------

def _events(items: list[rpl.StreamItem]) -> list[rpl.StreamEvent]:
    return [i for i in items if isinstance(i, rpl.StreamEvent)]


def test_real_stream_from_start_reproduces_the_server_files() -> None:
    items = rpl.decode_stream([(FIX / "dump_from_start.bin").read_bytes()])
    assert isinstance(items[-1], rpl.StreamEnd)
    events = _events(items)
    first = events[0]  # the artificial ROTATE naming the first file
    assert first.is_rotate and first.is_artificial and first.log_pos == 0 and first.timestamp == 0
    assert first.flags & LOG_EVENT_ARTIFICIAL_F and first.rotate_target(4) == ("binlog.000001", 4)
    files: dict[str, bytearray] = {}
    current = ""
    for ev in events:
        if ev.is_rotate and ev.is_artificial:
            current = ev.rotate_target(4)[0]
            files[current] = bytearray(b"\xfebin")
        elif not ev.is_artificial:
            assert ev.log_pos == len(files[current]) + ev.event_size
            files[current] += ev.raw
    assert sorted(files) == ["binlog.000001", "binlog.000002", "binlog.000003"]
    for name, data in files.items():
        disk = (FIX / name).read_bytes()
        if name == "binlog.000003":  # still open on the server: its FDE carries the in-use flag
            assert disk[21] & 1 and data[21] & 1 == 0
            data[21] |= 1
        assert bytes(data) == disk, name


def test_byte_by_byte_feeding_gives_the_same_items() -> None:
    raw = (FIX / "dump_from_start.bin").read_bytes()
    whole = rpl.decode_stream([raw])
    dec = rpl.DumpStreamDecoder()
    pieces: list[rpl.StreamItem] = []
    for i in range(len(raw)):
        pieces.extend(dec.feed(raw[i:i + 1]))
    assert pieces == whole and dec.buffered == 0


def test_resumed_stream_resends_fde_with_log_pos_zero() -> None:
    offset = int((FIX / "resume_offset.txt").read_text())
    events = _events(rpl.decode_stream([(FIX / "dump_resume.bin").read_bytes()]))
    rotate, fde = events[0], events[1]
    assert rotate.rotate_target(4) == ("binlog.000002", offset) and rotate.is_artificial
    assert fde.type_code == EventType.FORMAT_DESCRIPTION and fde.log_pos == 0 and fde.is_artificial
    next_file = next(i for i, e in enumerate(events) if i > 0 and e.is_rotate and e.is_artificial)
    assert events[next_file].rotate_target(4) == ("binlog.000003", 4)
    tail = b"".join(e.raw for e in events[2:next_file])
    disk = (FIX / "binlog.000002").read_bytes()
    assert disk[offset:] == tail and events[2].log_pos == offset + events[2].event_size


def test_purged_file_gives_err_1236() -> None:
    (item,) = rpl.decode_stream([(FIX / "dump_purged.bin").read_bytes()])
    assert item == rpl.StreamError(1236, "HY000", "Could not find first log file name in binary log index file")


def test_split_event_is_reassembled() -> None:
    size = rpl.MAX_PACKET_PAYLOAD + 100  # one event longer than a packet (a big row event)
    header = struct.pack("<IBIIIH", 1700000000, EventType.WRITE_ROWS_V1, 7, size, 4 + size, 0)
    event = header + bytes(size - len(header))
    stream = rpl.frame_packets(b"\x00" + event, sequence_id=1) + rpl.frame_packets(b"\xfe\x00\x00\x02\x00", 3)
    items = rpl.decode_stream([stream[i:i + 1_000_000] for i in range(0, len(stream), 1_000_000)])
    assert len(items) == 2 and isinstance(items[1], rpl.StreamEnd)
    assert isinstance(items[0], rpl.StreamEvent) and items[0].raw == event and items[0].log_pos == 4 + size


def test_heartbeat_is_artificial_and_sequence_wraps() -> None:
    hb_body = b"binlog.000007"
    hb = struct.pack("<IBIIIH", 0, EventType.HEARTBEAT, 7, 19 + len(hb_body), 1234, LOG_EVENT_ARTIFICIAL_F)
    packets = b"".join(rpl.frame_packets(b"\x00" + hb + hb_body, seq) for seq in (254, 255, 0))
    items = rpl.decode_stream([packets], first_sequence_id=254)
    assert len(items) == 3 and all(isinstance(i, rpl.StreamEvent) and i.is_heartbeat and i.is_artificial
                                   for i in items)


def test_lost_packet_and_bad_payloads_are_clear_errors() -> None:
    ok = rpl.frame_packets(b"\xfe\x00\x00\x02\x00", 2)
    with pytest.raises(rpl.ReplicationProtocolError, match="sequence id 2, expected 1"):
        rpl.decode_stream([ok])
    with pytest.raises(rpl.ReplicationProtocolError, match="unexpected packet type 0x07"):
        rpl.decode_stream([rpl.frame_packets(b"\x07abc", 1)])
    short = struct.pack("<IBIIIH", 0, 2, 1, 40, 100, 0)  # header says 40 bytes, packet has 19
    with pytest.raises(rpl.ReplicationProtocolError, match="says 40 bytes but the packet carries 19"):
        rpl.decode_stream([rpl.frame_packets(b"\x00" + short, 1)])


# --- transaction boundaries and GTIDs ------------------------------------------------------------

NOT_IN_TRANSACTIONS = {EventType.FORMAT_DESCRIPTION, EventType.MARIA_BINLOG_CHECKPOINT, EventType.MARIA_GTID_LIST,
                       EventType.PREVIOUS_GTIDS, EventType.ROTATE, EventType.STOP}


def _file_events(path: Path) -> list[rpl.StreamEvent]:
    data, pos, out = path.read_bytes(), 4, []
    while pos < len(data):
        size = struct.unpack_from("<I", data, pos + 9)[0]
        out.append(rpl.parse_event(data[pos:pos + size]))
        pos += size
    return out


@pytest.mark.parametrize("path", sorted(MARIADB_FIXTURE.glob("binlog.00000[123]")) + [
    MYSQL_FIXTURES / "tests__events__5.7__16_xid__log.bin",
    MYSQL_FIXTURES / "tests__events__5.7__02_query__log.bin"], ids=lambda p: p.name)
def test_boundaries_fall_before_each_gtid(path: Path) -> None:
    """Every transaction starts at a boundary and nothing ends inside one: the boundary before each
    GTID event is where the previous transaction ended, and the file's last event ends one."""
    tracker = rpl.TransactionTracker()
    pos, boundaries, gtid_starts, lone_ends = 4, {4}, [], set()
    for ev in _file_events(path):
        if ev.type_code in (EventType.GTID, EventType.MARIA_GTID):
            gtid_starts.append(pos)
        if ev.type_code in NOT_IN_TRANSACTIONS:
            lone_ends.update((pos, pos + ev.event_size))
        pos += ev.event_size
        if tracker.observe(ev):
            boundaries.add(pos)
    assert gtid_starts and set(gtid_starts) <= boundaries
    assert pos in boundaries and not tracker.in_transaction
    # between the first and the last GTID, the only boundaries are transaction starts and the ends
    # of events that are never part of a transaction (a BINLOG_CHECKPOINT between two commits)
    expected = sorted({*gtid_starts, *(e for e in lone_ends if gtid_starts[0] <= e <= gtid_starts[-1])})
    assert sorted(b for b in boundaries if gtid_starts[0] <= b <= gtid_starts[-1]) == expected


def test_gtid_text_of_real_events() -> None:
    gtids = [rpl.gtid_of(e) for e in _file_events(FIX / "binlog.000001")]
    assert [g for g in gtids if g] == ["0-7-1", "0-7-2", "0-7-3", "0-7-4", "0-7-5"]
    mysql = [rpl.gtid_of(e) for e in _file_events(MYSQL_FIXTURES / "tests__events__5.7__16_xid__log.bin")]
    assert any(g and ":" in g for g in mysql)
