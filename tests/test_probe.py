"""binlog_parser.probe: a binlog's head facts and closing event from a prefix and a tail, over bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from binlog_parser import BinlogError, NotABinlogError, read_format_description
from binlog_parser.framing import crc32_trailer_ok, event_size_at
from binlog_parser.probe import HeadNeedsMore, find_closing_event, parse_head, rotate_name_length
from tests._chain_util import read_fixture, set_in_use, with_rotate_to

MYSQL56 = Path(__file__).parents[1] / "binlake_testing" / "samples" / "mysql-5.6" / "mysql-bin.000002"


def test_head_facts_of_mariadb_and_mysql() -> None:
    data = read_fixture("binlog.000001")
    parsed = parse_head(data[:4096], len(data), "binlog.000001")
    assert not isinstance(parsed, HeadNeedsMore)
    ctx, facts = parsed
    assert (facts.flavor, facts.server_id, facts.checksum, facts.fde_end, facts.previous_gtids, facts.in_use) == (
        "mariadb", 7, "CRC32", 256, "", False)
    assert facts.server_version == "10.11.19-MariaDB-0+deb12u1-log" and ctx.table_maps == {}
    mysql = MYSQL56.read_bytes()
    parsed = parse_head(mysql, len(mysql), "mysql-bin.000002")
    assert not isinstance(parsed, HeadNeedsMore)
    assert (parsed[1].flavor, parsed[1].fde_end) == ("mysql", 120)
    assert parsed[1].previous_gtids is not None and parsed[1].previous_gtids.startswith("7e23401a-c603-11e3")
    in_use = set_in_use(data)
    parsed = parse_head(in_use[:4096], len(in_use), "binlog.000001")
    assert not isinstance(parsed, HeadNeedsMore) and parsed[1].in_use is True


def test_a_short_prefix_asks_for_the_bytes_its_head_events_need() -> None:
    data = read_fixture("binlog.000001")
    assert parse_head(data[:2], len(data), "b") == HeadNeedsMore(4)
    assert parse_head(data[:100], len(data), "b") == HeadNeedsMore(256)  # the FDE's own event_size
    # the FDE alone: the GTID_LIST's header is not there yet (a window of 64 bytes more is asked for)
    assert parse_head(data[:256], len(data), "b") == HeadNeedsMore(320)
    assert parse_head(data[:284], len(data), "b") == HeadNeedsMore(285)  # the GTID_LIST's own event_size
    parsed = parse_head(data[:285], len(data), "b")  # the GTID_LIST ends the head: nothing after it is needed
    assert not isinstance(parsed, HeadNeedsMore) and parsed[1].previous_gtids == ""


def test_probe_errors_name_the_file_and_byte_offset() -> None:
    with pytest.raises(NotABinlogError) as not_binlog:
        parse_head(b"PK\x03\x04 not a binlog", 20, "notes.zip")
    assert str(not_binlog.value) == "notes.zip:0: no binlog magic (starts with 504b0304)"
    data = read_fixture("binlog.000001")
    with pytest.raises(BinlogError) as cut:
        parse_head(data[:200], 200, "binlog.000001")  # the object ends inside its FORMAT_DESCRIPTION
    assert str(cut.value) == "binlog.000001:4: the object ends inside its head events"


def test_closing_event_needs_exact_end() -> None:
    data = read_fixture("binlog.000001")
    ctx = read_format_description(data[:4096])
    tail = data[-512:]
    assert find_closing_event(tail, len(data) - len(tail), len(data), ctx, "x") == ("ROTATE", "binlog.000002",
                                                                                     len(data) - 44)
    assert find_closing_event(tail[:-1], len(data) - len(tail), len(data) - 1, ctx, "x") is None
    long_name = with_rotate_to(data, "b" * 300 + ".000002")
    found = find_closing_event(long_name[-1024:], len(long_name) - 1024, len(long_name), ctx, "x")
    assert found is not None and found[0] == "ROTATE"
    assert rotate_name_length(len(long_name), found[2], ctx) == 307


def test_a_rotate_with_a_bad_crc_is_not_a_closing_event() -> None:
    data = bytearray(read_fixture("binlog.000001"))
    data[-10] ^= 0xFF  # inside the ROTATE's name: its CRC32 no longer matches
    ctx = read_format_description(bytes(data[:4096]))
    assert find_closing_event(bytes(data[-512:]), len(data) - 512, len(data), ctx, "x") is None
    assert not crc32_trailer_ok(bytes(data[-44:])) and crc32_trailer_ok(read_fixture("binlog.000001")[-44:])
    assert event_size_at(data, len(data) - 44) == 44 and event_size_at(data, len(data) - 10) is None
