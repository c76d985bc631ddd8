"""Event decoders, checked byte for byte against the seeds' worked examples and
against values visible in the fixtures as real servers wrote them."""

from __future__ import annotations

import struct

from _binlog_util import BINLOGS, MAGIC, Builder, event, fde, query_body

from binlog_parser import (
    FormatDescriptionEvent,
    GtidEvent,
    GtidSet,
    PreviousGtidsEvent,
    QueryEvent,
    RotateEvent,
    read_events,
)
from binlog_parser.constants import EventType

U1 = "b8ae2fd2-3005-11f0-8be8-0242ac150002"
U2 = "55778904-0299-11f1-b1b8-4ef0c4956feb"

# Seed "Part 5": GTID_LOG_EVENT at position 197 of binlog.000024 (MySQL 8.0.40), 79 bytes.
SEED_GTID_197 = bytes.fromhex(
    "2d103568" "21" "01000000" "4f000000" "14010000" "0000"
    "01" "b8ae2fd2300511f08be80242ac150002" "0c00000000000000" "02"
    "0000000000000000" "0100000000000000"
    "c6551bae133606" "fc0501" "a8380100" "68d62761")
# Seed "Part 10": ROTATE_EVENT at 1428, 44 bytes.
SEED_ROTATE_1428 = bytes.fromhex(
    "39103568" "04" "01000000" "2c000000" "c0050000" "0000"
    "0400000000000000" "62696e6c6f672e303030303235" "de7e7110")
# Seed "Part 4": PREVIOUS_GTIDS header at 126 and its 48-byte payload (checksum not shown).
SEED_PREV_HEADER = bytes.fromhex("6e0f3568" "23" "01000000" "47000000" "c5000000" "8000")
SEED_PREV_PAYLOAD = bytes.fromhex(
    "0100000000000000" "b8ae2fd2300511f08be80242ac150002" "0100000000000000"
    "0100000000000000" "0c00000000000000")
# Seed "Part 4", tagged (MySQL 9.6.0), the 95 payload bytes.
SEED_TAGGED_PAYLOAD = bytes.fromhex(
    "0102000000000001" "55778904029911f1b1b84ef0c4956feb" "00" "0100000000000000"
    "0100000000000000" "0e00000000000000"
    "55778904029911f1b1b84ef0c4956feb" "0a" "6d79746167" "0100000000000000"
    "0100000000000000" "0300000000000000")
# Seed (MySQL internals doc): FORMAT_DESCRIPTION of mysql-5.5.2-m2, offset 4 of relay-bin.000001.
SEED_FDE_552 = bytes.fromhex(
    "822dc24b" "0f" "02000000" "67000000" "6b000000" "0000" "0400"
    + "352e352e322d6d32".ljust(100, "0")
    + "822dc24b" "13" "380d0008001200040404041200005400041a0800000008080802" "00")

FDE_8040 = (BINLOGS / "blackbeam__rust_mysql_common"
            / "test-data__binlogs__binlog_transaction_previous_GTID_no_tag.000001").read_bytes()[4:126]


def _file_with(*events_at: tuple[int, bytes]) -> bytes:
    """magic + an 8.0.40 FDE, then each raw event placed at its own position (gaps filled
    with IGNORABLE events so the positions of the seed examples are kept)."""
    data = bytearray(MAGIC + FDE_8040)
    for pos, raw in events_at:
        gap = pos - len(data)
        assert gap == 0 or gap >= 23
        if gap:
            data += event(EventType.IGNORABLE, b"\x00" * (gap - 23), pos=len(data), flags=0x80)
        data += raw
    return bytes(data)


def _decode_at(data: bytes, pos: int):  # type: ignore[no-untyped-def]
    return next(e for e in read_events(data) if e.header.pos == pos)


def test_seed_gtid_event_197_all_fields() -> None:
    data = _file_with((197, SEED_GTID_197))
    ev = _decode_at(data, 197)
    assert isinstance(ev, GtidEvent)
    h = ev.header
    assert (h.timestamp, h.type_code, h.server_id, h.event_size, h.log_pos, h.flags) == (
        1748308013, 33, 1, 79, 276, 0)
    assert h.next_pos == 276 and h.checksum_ok is True
    assert ev.gtid == f"{U1}:12"
    assert ev.gtid_flags == 1 and ev.may_have_sbr
    assert ev.uuid == U1 and ev.gno == 12 and ev.tag is None
    assert ev.last_committed == 0 and ev.sequence_number == 1
    assert ev.immediate_commit_timestamp == 1748308013569478
    assert ev.original_commit_timestamp == 1748308013569478
    assert ev.transaction_length == 261
    assert ev.immediate_server_version == 80040 == ev.original_server_version
    assert ev.commit_group_ticket is None
    assert ev.fields()["gtid"] == f"{U1}:12"


def test_seed_rotate_1428() -> None:
    data = _file_with((1428, SEED_ROTATE_1428))
    ev = _decode_at(data, 1428)
    assert isinstance(ev, RotateEvent)
    assert ev.next_file == "binlog.000025" and ev.next_position == 4
    assert not ev.artificial
    assert ev.header.next_pos == 1472 == len(data)
    assert ev.header.checksum_ok is True
    f = ev.fields()
    assert f["next_file"] == "binlog.000025" and f["next_position"] == 4


def test_artificial_rotate() -> None:
    b = Builder()
    b.add(EventType.ROTATE, struct.pack("<Q", 4) + b"binlog.000007", timestamp=0, flags=0x20)
    ev = list(read_events(b.bytes()))[-1]
    assert isinstance(ev, RotateEvent) and ev.artificial and ev.header.timestamp == 0


def test_seed_previous_gtids_untagged() -> None:
    body = SEED_PREV_PAYLOAD
    raw = SEED_PREV_HEADER + body
    import zlib

    raw += struct.pack("<I", zlib.crc32(raw))
    data = _file_with((126, raw))
    ev = _decode_at(data, 126)
    assert isinstance(ev, PreviousGtidsEvent)
    assert ev.header.flags == 0x80 and ev.header.next_pos == 197
    assert str(ev.gtid_set) == f"{U1}:1-11"
    assert not ev.tagged_format
    assert ev.fields()["gtid_set"] == f"{U1}:1-11"


def test_seed_previous_gtids_tagged_matches_fixture() -> None:
    path = BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__binlog_transaction_with_GTID_TAG.000001"
    raw = path.read_bytes()
    assert raw[127 + 19:127 + 19 + 95] == SEED_TAGGED_PAYLOAD  # the same bytes a 9.6.0 server wrote
    ev = next(e for e in read_events(path) if isinstance(e, PreviousGtidsEvent))
    assert ev.tagged_format
    assert ev.gtid_set == GtidSet.from_text(f"{U2}:1-13,{U2}:mytag:1-2")
    assert str(ev.gtid_set) == f"{U2}:1-13:mytag:1-2"


def test_fixture_gtid_tagged_event() -> None:
    path = BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__binlog_transaction_with_GTID_TAG.000001"
    ev = next(e for e in read_events(path) if e.header.type_code == 42)
    assert isinstance(ev, GtidEvent)
    assert ev.gtid == f"{U2}:mytag:3" and ev.tag == "mytag" and ev.gno == 3
    assert (ev.last_committed, ev.sequence_number) == (0, 1)
    assert ev.immediate_server_version == 90600
    assert ev.transaction_length == 296 == 541 - 245  # GTID at 245, ROTATE at 541


def test_seed_fde_552_lengths() -> None:
    data = MAGIC + SEED_FDE_552
    ev = next(iter(read_events(data)))
    assert isinstance(ev, FormatDescriptionEvent)
    assert ev.header.event_size == 0x67 == 103 and ev.header.log_pos == 0x6B
    assert ev.binlog_version == 4 and ev.server_version == "5.5.2-m2"
    assert ev.header_length == 19
    assert len(ev.post_header_lengths) == 27  # 103 - 19 - 2 - 50 - 4 - 1
    assert ev.post_header_lengths[EventType.FORMAT_DESCRIPTION - 1] == 84 == 103 - 19
    assert ev.post_header_lengths[EventType.QUERY - 1] == 13
    assert ev.post_header_lengths[EventType.ROTATE - 1] == 8
    assert ev.post_header_lengths[EventType.TABLE_MAP - 1] == 8
    assert ev.checksum_alg == 255  # before 5.6.1: no algorithm byte
    assert ev.header.checksum_ok is None


def test_fixture_fde_8040() -> None:
    ev = next(iter(read_events(MAGIC + FDE_8040)))
    assert isinstance(ev, FormatDescriptionEvent)
    assert ev.server_version == "8.0.40" and ev.checksum_alg == 1 and not ev.in_use
    assert ev.header.checksum_ok is True
    assert ev.post_header_lengths[EventType.GTID - 1] == 42


def test_fde_in_use_flag_crc_masked() -> None:
    data = MAGIC + fde(flags=1)
    ev = next(iter(read_events(data)))
    assert ev.in_use and ev.header.flags == 1 and ev.header.checksum_ok is True


def test_query_status_vars_all() -> None:
    sv = b"".join([
        b"\x00" + struct.pack("<I", 0x4000),                  # flags2
        b"\x01" + struct.pack("<Q", 0x2000000),               # sql_mode
        b"\x06\x03std",                                       # catalog (nz)
        b"\x03" + struct.pack("<HH", 2, 1),                   # auto_increment
        b"\x04" + struct.pack("<HHH", 33, 33, 8),             # charset
        b"\x05\x06+00:00",                                    # time_zone
        b"\x07" + struct.pack("<H", 1),                       # lc_time_names
        b"\x08" + struct.pack("<H", 45),                      # charset_database
        b"\x09" + struct.pack("<Q", 3),                       # table_map_for_update
        b"\x0a" + struct.pack("<I", 77),                      # master_data_written
        b"\x0b\x04root\x09localhost",                         # invoker
        b"\x0c\x02db1\x00db2\x00",                            # updated_db_names
        b"\x0d\x01\x02\x03",                                  # microseconds
        b"\x10\x01",                                          # explicit_defaults_ts
        b"\x11" + struct.pack("<Q", 99),                      # ddl_xid
        b"\x12" + struct.pack("<H", 255),                     # default_collation_for_utf8mb4
        b"\x13\x01",                                          # sql_require_primary_key
        b"\x14\x00",                                          # default_table_encryption
    ])
    b = Builder()
    b.add(EventType.QUERY, query_body("CREATE TABLE t (a INT)", "shop", sv, thread_id=42, exec_time=3))
    ev = list(read_events(b.bytes()))[-1]
    assert isinstance(ev, QueryEvent)
    assert (ev.thread_id, ev.exec_time, ev.error_code, ev.schema, ev.query) == (
        42, 3, 0, "shop", "CREATE TABLE t (a INT)")
    s = ev.status_vars
    assert s["flags2"] == 0x4000 and s["sql_mode"] == 0x2000000 and s["catalog"] == "std"
    assert s["auto_increment"] == {"increment": 2, "offset": 1}
    assert s["charset"] == {"client": 33, "connection": 33, "server": 8}
    assert s["time_zone"] == "+00:00" and s["lc_time_names"] == 1 and s["charset_database"] == 45
    assert s["table_map_for_update"] == 3 and s["master_data_written"] == 77
    assert s["invoker"] == {"user": "root", "host": "localhost"}
    assert s["updated_db_names"] == ["db1", "db2"]
    assert s["microseconds"] == 0x030201 and s["explicit_defaults_ts"] is True
    assert s["ddl_xid"] == 99 and s["default_collation_for_utf8mb4"] == 255
    assert s["sql_require_primary_key"] == 1 and s["default_table_encryption"] == 0
    assert ev.unknown_status_var is None


def test_query_mariadb_status_vars_and_unknown_code() -> None:
    sv = b"\x80\x01\x02\x03" + b"\x81" + struct.pack("<Q", 5) + b"\x82\x01" + b"\x83\x01" + struct.pack("<HH", 33, 45)
    b = Builder()
    b.add(EventType.QUERY, query_body("BEGIN", "", sv + b"\x7f\x00\x00"))
    ev = list(read_events(b.bytes()))[-1]
    assert ev.status_vars["hrnow"] == 0x030201 and ev.status_vars["xid"] == 5
    assert ev.status_vars["gtid_flags3"] == 1
    assert ev.status_vars["character_set_collations"] == [{"charset": 33, "collation": 45}]
    assert ev.unknown_status_var == 0x7F and ev.query == "BEGIN"


def test_fixture_query_values() -> None:
    path = BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__ver_5_1_23.001"
    queries = [e for e in read_events(path) if isinstance(e, QueryEvent)]
    assert queries[0].schema == "test"
    assert queries[0].query == "CREATE TABLE t1 (a int, b char(50)) ENGINE = MyISAM"
    assert queries[0].status_vars["charset"] == {"client": 8, "connection": 8, "server": 8}


def test_fixture_user_var_rand_intvar_load() -> None:
    path = BINLOGS / "webscalesql__webscalesql-5.6" / "mysql-test__suite__binlog__std_data__binlog_old_version_4_1.000001"
    evs = list(read_events(path))
    assert evs[0].name == "START_V3" and evs[0].binlog_version == 3
    assert evs[0].server_version == "4.1.24-debug-log"
    uv = next(e for e in evs if e.name == "USER_VAR")
    assert (uv.var_name, uv.value, uv.value_type_name) == ("x", 4, "INT")
    cf = next(e for e in evs if e.name == "CREATE_FILE")
    assert (cf.table, cf.schema, cf.file_name, cf.field_names, cf.file_id) == (
        "t3", "test", "big_file.dat", ("a",), 2)
    assert any(e.name == "RAND" for e in evs) and any(e.name == "EXEC_LOAD" for e in evs)
    iv = next(e for e in evs if e.name == "INTVAR")
    assert iv.intvar_name in ("LAST_INSERT_ID", "INSERT_ID")


def test_fixture_incident() -> None:
    path = BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__bug40482-bin.000001"
    inc = next(e for e in read_events(path) if e.name == "INCIDENT")
    # bug#40482's test binlog carries an incident number no server defines (0x42): it is
    # decoded as written, not rejected (MySQL's reader refuses it; we keep the event)
    assert inc.header.event_size == 22 and bytes.fromhex("420000") == path.read_bytes()[125:128]
    assert (inc.incident, inc.incident_name, inc.message) == (66, "UNKNOWN_66", "")


def test_fixture_mariadb_events() -> None:
    path = BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__mariadb-bin.000001"
    evs = list(read_events(path))
    gl = next(e for e in evs if e.name == "MARIA_GTID_LIST")
    cp = next(e for e in evs if e.name == "MARIA_BINLOG_CHECKPOINT")
    gtids = [e for e in evs if e.name == "MARIA_GTID"]
    assert cp.binlog_file.startswith("mariadb-bin.")
    assert all(g.gtid == f"{g.domain_id}-{g.header.server_id}-{g.seq_no}" for g in gtids)
    assert "gtid_set" in gl.fields()
    ann = next(e for e in evs if e.name == "MARIA_ANNOTATE_ROWS")
    assert ann.query.upper().startswith("INSERT")


def test_mariadb_chain_gtids() -> None:
    chain = sorted((BINLOGS.parent / "mariadb-10.11").glob("binlog.00000*"))
    seen = []
    for path in chain:
        evs = list(read_events(path))
        gl = next(e for e in evs if e.name == "MARIA_GTID_LIST")
        # each file's GTID list is the state after the previous file's last GTID
        if seen:
            assert str(seen[-1]) in str(gl.gtid_set)
        seen += [e.gtid for e in evs if e.name == "MARIA_GTID"]
    assert len(seen) == len(set(seen)) > 0


def test_fixture_transaction_payload() -> None:
    path = BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__transaction_compression.000001"
    evs = list(read_events(path))
    tp = next(e for e in evs if e.name == "TRANSACTION_PAYLOAD")
    assert tp.compression_name == "ZSTD" and tp.uncompressed_size == 179
    inner = [e for e in evs if e.header.payload_pos is not None]
    assert [e.name for e in inner] == ["QUERY", "TABLE_MAP", "WRITE_ROWS_V2", "XID"]
    assert all(e.header.payload_pos == tp.header.pos for e in inner)
    assert inner[0].header.pos == 0 and inner[-1].header.next_pos == 179
    assert inner[-1].xid == 462
    assert all(e.header.checksum_ok is None for e in inner)


def test_xa_prepare_and_view_change_and_trx_context() -> None:
    b = Builder()
    b.add(EventType.XA_PREPARE, b"\x00" + struct.pack("<iII", 1, 3, 2) + b"abcde")
    view = b"1234:5".ljust(40, b"\x00") + struct.pack("<QI", 9, 1) + struct.pack("<H", 3) + b"key" + struct.pack("<I", 2) + b"vv"
    b.add(EventType.VIEW_CHANGE, view)
    tc = struct.pack("<BIBIII", 3, 77, 1, 2, 1, 0) + b"abc" + b"sv" + struct.pack("<H", 2) + b"ws"
    b.add(EventType.TRANSACTION_CONTEXT, tc)
    xa, vc, ctx = list(read_events(b.bytes()))[1:]
    assert (xa.one_phase, xa.format_id, xa.gtrid, xa.bqual) == (False, 1, b"abc", b"de")
    assert (vc.view_id, vc.seq_number, vc.certification_info) == ("1234:5", 9, {"key": b"vv"})
    assert (ctx.server_uuid, ctx.thread_id, ctx.gtid_specified, ctx.write_set) == ("abc", 77, True, (b"ws",))


def test_heartbeats_ignorable_rows_query_large_trx_header() -> None:
    b = Builder()
    b.add(EventType.HEARTBEAT, b"binlog.000003")
    b.add(EventType.HEARTBEAT_V2, b"\x01\x0dbinlog.000003" + b"\x02\x03\xfc\x00\x10" + b"\x00")
    b.add(EventType.ROWS_QUERY, b"\x0eINSERT INTO t1")
    b.add(EventType.LARGE_TRANSACTION_HEADER, b"\x01" + struct.pack("<Q", 123456) + b"\x10" + b"\x00" * 5, flags=0x80)
    hb, hb2, rq, lt = list(read_events(b.bytes()))[1:]
    assert hb.log_file == "binlog.000003"
    assert (hb2.log_file, hb2.log_position) == ("binlog.000003", 0x1000)
    assert rq.query == "INSERT INTO t1"
    assert (lt.version, lt.terminating_event_offset, lt.terminating_event_type, lt.padding_size) == (1, 123456, 16, 5)


def test_user_var_types() -> None:
    def uv(name: bytes, vtype: int, charset: int, value: bytes, flags: bytes = b"") -> bytes:
        return struct.pack("<I", len(name)) + name + b"\x00" + struct.pack("<BII", vtype, charset, len(value)) + value + flags

    b = Builder()
    b.add(EventType.USER_VAR, uv(b"s", 0, 33, "héllo".encode()))
    b.add(EventType.USER_VAR, uv(b"r", 1, 33, struct.pack("<d", 1.5)))
    b.add(EventType.USER_VAR, uv(b"i", 2, 63, struct.pack("<q", -5)))
    b.add(EventType.USER_VAR, uv(b"u", 2, 63, struct.pack("<Q", 2**64 - 1), b"\x01"))
    # DECIMAL(5,2) -123.45: precision 5, scale 2, bin: intg 3 digits (2 bytes), frac 2 digits (1 byte)
    dec = bytes([0x80 | 0, 123, 45])
    dec = bytes(x ^ 0xFF for x in dec)
    b.add(EventType.USER_VAR, uv(b"d", 4, 63, bytes([5, 2]) + dec))
    b.add(EventType.USER_VAR, struct.pack("<I", 1) + b"n" + b"\x01")
    s, r, i, u, d, n = list(read_events(b.bytes()))[1:]
    assert s.value == "héllo" and r.value == 1.5 and i.value == -5
    assert u.value == 2**64 - 1 and u.unsigned
    assert d.value == "-123.45" and d.value_type_name == "DECIMAL"
    assert n.is_null and n.value is None


def test_maria_gtid_and_list_and_compressed_query() -> None:
    import zlib

    b = Builder(version="10.11.6-MariaDB-log")
    b.add(EventType.MARIA_GTID, struct.pack("<QIB", 42, 0, 1 | 2) + struct.pack("<Q", 7), server_id=5)
    b.add(EventType.MARIA_GTID_LIST, struct.pack("<I", 2) + struct.pack("<IIQ", 0, 5, 41) + struct.pack("<IIQ", 1, 2, 3))
    q = b"INSERT INTO t VALUES (1)"
    comp = bytes([0x80 | 1, len(q)]) + zlib.compress(q)
    b.add(EventType.MARIA_QUERY_COMPRESSED, query_body("", "db")[:-0 or None].replace(b"", b"", 0) + comp)
    b.add(EventType.MARIA_START_ENCRYPTION, b"\x01" + struct.pack("<I", 3) + b"N" * 12)
    g, gl, cq, se = list(read_events(b.bytes()))[1:]
    assert g.gtid == "0-5-42" and g.commit_id == 7 and g.standalone
    assert gl.fields()["gtid_set"] == "0-5-41,1-2-3"
    assert cq.query == "INSERT INTO t VALUES (1)" and cq.compressed and cq.schema == "db"
    assert (se.scheme, se.key_version, se.nonce) == (1, 3, b"N" * 12)
