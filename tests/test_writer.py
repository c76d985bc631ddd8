"""binlog_parser.writer: byte-identical re-encoding of real server events, and round trips
(decode(write(x)) == x, re-encode(decode(bytes)) == bytes) over random workloads (hypothesis)."""

from __future__ import annotations

import csv
import io
import struct
import zlib
from decimal import Context, Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from binlog_parser import read_events
from binlog_parser.constants import LOG_EVENT_BINLOG_IN_USE_F
from binlog_parser.gtid import GtidSet
from binlog_parser.rows import Geometry, MySQLDate, MySQLDateTime, MySQLTime, MySQLTimestamp, Vector
from binlog_parser.rows.json_binary import MySQLJson
from binlog_parser.writer import (
    BinlogFileWriter,
    Column,
    EncodeError,
    Table,
    encode_body,
    encode_event,
    encode_json,
    frame_event,
)
from binlog_parser.writer.values import encode_decimal

FIXTURES = Path(__file__).parent / "fixtures" / "binlogs"
U1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
U2 = "5d8b2e1c-0000-4000-8000-000000000002"
_WIDE = Context(prec=100)


def _modern_fixtures() -> list[Path]:
    out = []
    with open(FIXTURES / "PROVENANCE.tsv", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            if row["server_version"][:2] in ("8.", "9.") and row["truncated"] == "no":
                p = FIXTURES / row["file"]
                if p.exists():
                    out.append(p)
    return out


# events whose decoded form cannot carry everything the server wrote
_KNOWN_LOSSY = {
    # a JSON DECIMAL opaque keeps the precision of its source expression (11 here); the decoded
    # Decimal('9.00') only knows its digits, so the writer stores DECIMAL(3,2)
    ("test-data__binlogs__json-opaque.binlog", 1312),
}


@pytest.mark.parametrize("path", _modern_fixtures(), ids=lambda p: p.name[:60])
def test_reencode_real_server_events_byte_identical(path: Path) -> None:
    data = path.read_bytes()
    checked = 0
    for ev in read_events(data):
        h = ev.header
        if h.payload_pos is not None:
            continue
        if ev.header.type_code == 39:  # PARTIAL_UPDATE_ROWS: not written
            continue
        if (path.name, h.pos) in _KNOWN_LOSSY:
            continue
        assert encode_event(ev) == data[h.pos:h.next_pos], f"{ev.name} at {h.pos}"
        checked += 1
    assert checked > 0


def test_fixture_coverage_includes_every_asked_event_type() -> None:
    seen = set()
    for path in _modern_fixtures():
        data = path.read_bytes()
        for ev in read_events(data):
            if ev.header.payload_pos is None:
                seen.add(ev.name)
    for name in ("FORMAT_DESCRIPTION", "PREVIOUS_GTIDS", "GTID", "ANONYMOUS_GTID", "GTID_TAGGED",
                 "QUERY", "XID", "ROTATE", "TABLE_MAP", "WRITE_ROWS_V2", "UPDATE_ROWS_V2",
                 "DELETE_ROWS_V2", "TRANSACTION_PAYLOAD", "STOP"):
        assert name in seen, name


@pytest.mark.parametrize("name", [
    "blackbeam__rust_mysql_common/test-data__binlogs__binlog-invisible-columns.000001",  # 8.0.26
    "blackbeam__rust_mysql_common/test-data__binlogs__binlog_transaction_previous_GTID_no_tag.000001",  # 8.0.40
    "rust-us__mysql-cdc-rs/tests__events__8.0__02_query__binlog.000001",  # 8.2.0
    "blackbeam__rust_mysql_common/test-data__binlogs__json-opaque.binlog",  # 9.0.1
    "blackbeam__rust_mysql_common/test-data__binlogs__binlog_transaction_with_GTID_TAG.000001",  # 9.6.0
])
def test_new_format_description_matches_the_server(name: str) -> None:
    from binlog_parser.writer import format_description_body

    fde = next(iter(read_events(FIXTURES / name)))
    data = (FIXTURES / name).read_bytes()[4 + 19:fde.header.next_pos - 4]
    assert format_description_body(fde.server_version, fde.create_timestamp) == data


def test_fde_crc_ignores_in_use_flag_and_checksum_off_still_has_crc() -> None:
    body = bytes(range(60))
    a = frame_event(15, body, timestamp=1, server_id=2, log_pos=100, flags=LOG_EVENT_BINLOG_IN_USE_F)
    b = frame_event(15, body, timestamp=1, server_id=2, log_pos=100, flags=0)
    assert a[-4:] == b[-4:]
    assert a[17] == 1 and b[17] == 0
    assert struct.unpack("<I", b[-4:])[0] == zlib.crc32(b[:-4])


# ---------------------------------------------------------------------------------------------
# Hand-written file: every high-level method, positions, lengths, flags
# ---------------------------------------------------------------------------------------------

SHOP = Table("shop", "orders", (
    Column("id", "BIGINT UNSIGNED", nullable=False, primary_key=True),
    Column("customer", "VARCHAR(64)"),
    Column("amount", "DECIMAL(12,2)"),
    Column("doc", "JSON"),
), table_id=90)


def _sample_file(**kw) -> bytes:
    buf = io.BytesIO()
    w = BinlogFileWriter(buf, previous_gtids=f"{U1}:1-10", timestamp=1_700_000_000, server_id=9, **kw)
    w.ddl("CREATE TABLE orders (id BIGINT UNSIGNED PRIMARY KEY)", "shop", f"{U1}:11")
    w.begin_transaction(f"{U1}:12", last_committed=1, sequence_number=2, commit_timestamp=1_700_000_000_123_456)
    w.write_rows(SHOP, [{"id": i, "customer": f"c{i}", "amount": Decimal("1.50") * i,
                         "doc": {"i": i, "tags": ["x"] * (i % 3)}} for i in range(1, 200)])
    w.update_rows(SHOP, [({"id": 1}, {"id": 1, "customer": None, "amount": Decimal("-3.00"), "doc": None})])
    w.delete_rows(SHOP, [{"id": 2, "customer": "c2", "amount": Decimal("3.00"), "doc": {"i": 2, "tags": []}}])
    w.xid()
    w.begin_transaction(None, last_committed=2, sequence_number=3)
    w.xid(77)
    if w.server_version >= "8.4":
        w.begin_transaction(f"{U1}:audit:1", last_committed=3, sequence_number=4)
        w.write_rows(SHOP, [(500, "tagged", Decimal("9.99"), [1, 2, 3])])
        w.xid()
    w.rotate("binlog.000002")
    return buf.getvalue()


@pytest.mark.parametrize("version", ["8.0.40", "8.4.3", "9.1.0"])
@pytest.mark.parametrize("compression", [None, "zstd"])
def test_written_file_structure(version: str, compression: str | None) -> None:
    data = _sample_file(server_version=version, compression=compression)
    assert data[:4] == b"\xfebin"
    events = list(read_events(data))
    outer = [e for e in events if e.header.payload_pos is None]
    assert [e.name for e in outer[:2]] == ["FORMAT_DESCRIPTION", "PREVIOUS_GTIDS"]
    fde = outer[0]
    assert fde.server_version == version and fde.checksum_alg == 1 and not fde.in_use
    assert str(outer[1].gtid_set) == f"{U1}:1-10"
    assert outer[-1].name == "ROTATE" and outer[-1].next_file == "binlog.000002"
    for e in outer:
        assert e.header.checksum_ok is True
        assert e.header.log_pos == e.header.next_pos  # end position, like the server
    # transaction_length = GTID .. last event of the transaction
    gtids = [e for e in outer if e.name in ("GTID", "ANONYMOUS_GTID", "GTID_TAGGED")]
    for g, nxt in zip(gtids, gtids[1:] + [outer[-1]]):
        assert g.transaction_length == nxt.header.pos - g.header.pos
    assert gtids[1].immediate_commit_timestamp == 1_700_000_000_123_456
    assert (gtids[1].last_committed, gtids[1].sequence_number) == (1, 2)
    assert gtids[2].anonymous
    if version >= "8.4":
        assert gtids[3].name == "GTID_TAGGED" and gtids[3].gtid == f"{U1}:audit:1"
    rows = [e for e in events if e.name.endswith("ROWS_V2")]
    inserted = [r.after for e in rows if e.kind == "insert" for r in e.rows]
    assert inserted[0] == {"id": 1, "customer": "c1", "amount": Decimal("1.50"),
                           "doc": MySQLJson({"i": 1, "tags": ["x"]})}
    assert len([r for e in rows if e.kind == "insert" and e.table.table == "orders" for r in e.rows]) >= 199
    # split at ~8 KiB like the server; STMT_END_F only on a statement's last event
    writes = [e for e in rows if e.kind == "insert"]
    assert len(writes) >= 2
    assert [e.flags & 1 for e in writes[:2]] == [0, 1] or writes[0].flags & 1 == 0
    # every statement starts with its TABLE_MAP (STMT_END_F releases the table id)
    last = None
    for e in events:
        if e.name.endswith("ROWS_V2"):
            assert last is not None and last.header.type_code in (19, 30, 31, 32)
            if last.header.type_code != 19:
                assert not last.flags & 1  # same statement continues
        if e.header.type_code in (19, 30, 31, 32):
            last = e
        elif e.name not in ("TABLE_MAP",):
            last = None
    upd = next(e for e in rows if e.kind == "update")
    assert upd.rows[0].before == {"id": 1}  # partial (minimal) before image
    assert upd.rows[0].after["customer"] is None
    ddl = next(e for e in outer if e.name == "QUERY")
    assert ddl.query.startswith("CREATE TABLE") and ddl.status_vars["ddl_xid"] >= 1
    if compression:
        assert any(e.name == "TRANSACTION_PAYLOAD" for e in outer)
    # re-encoding every outer event gives the same bytes
    for e in outer:
        assert encode_event(e) == data[e.header.pos:e.header.next_pos]
    for e in events:
        if e.header.payload_pos is not None:
            h = e.header
            assert frame_event(h.type_code, encode_body(e), timestamp=h.timestamp, server_id=h.server_id,
                               log_pos=h.log_pos, flags=h.flags, checksum=False)


def test_in_use_flag_set_while_open_cleared_on_close(tmp_path: Path) -> None:
    p = tmp_path / "binlog.000001"
    with open(p, "w+b") as f:
        w = BinlogFileWriter(f, timestamp=5)
        w.begin_transaction(f"{U1}:1")
        w.xid()
        f.flush()
        assert p.read_bytes()[4 + 17] & LOG_EVENT_BINLOG_IN_USE_F
        w.close(in_use=True)
    ev = next(iter(read_events(p)))
    assert ev.in_use and ev.header.checksum_ok
    with open(p, "w+b") as f:
        w = BinlogFileWriter(f, timestamp=5)
        w.stop()
    evs = list(read_events(p))
    assert not evs[0].in_use and evs[0].header.checksum_ok and evs[-1].name == "STOP"


def test_writer_refuses_misuse() -> None:
    w = BinlogFileWriter(io.BytesIO())
    with pytest.raises(EncodeError):
        w.xid()
    w.begin_transaction(f"{U1}:1")
    with pytest.raises(EncodeError):
        w.rotate("x")
    with pytest.raises(EncodeError):
        BinlogFileWriter(io.BytesIO(), server_version="5.7.30")


# ---------------------------------------------------------------------------------------------
# Property tests: random tables, values and workloads
# ---------------------------------------------------------------------------------------------

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)


def _json_values():
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 63), (1 << 64) - 1),
                        st.floats(allow_nan=False, allow_infinity=False), _text)
    return st.recursive(scalars, lambda kids: st.one_of(
        st.lists(kids, max_size=5), st.dictionaries(_text, kids, max_size=5)), max_leaves=20)


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


@st.composite
def _column(draw, i: int):
    """(Column, value strategy) with values equal to what the reader decodes."""
    kind = draw(st.sampled_from([
        "TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL", "DATE",
        "TIME", "DATETIME", "TIMESTAMP", "YEAR", "CHAR", "VARCHAR", "BINARY", "VARBINARY", "TEXT",
        "BLOB", "JSON", "ENUM", "SET", "BIT", "GEOMETRY", "VECTOR", "LONGTEXT"]))
    unsigned = draw(st.booleans())
    name = f"c{i}"
    nullable = draw(st.booleans())
    bits = {"TINYINT": 8, "SMALLINT": 16, "MEDIUMINT": 24, "INT": 32, "BIGINT": 64}
    if kind in bits:
        b = bits[kind]
        vals = st.integers(0, (1 << b) - 1) if unsigned else st.integers(-(1 << (b - 1)), (1 << (b - 1)) - 1)
        sql = kind + (" UNSIGNED" if unsigned else "")
    elif kind == "FLOAT":
        sql, vals = kind, st.floats(width=32, allow_nan=False).map(_f32)
    elif kind == "DOUBLE":
        sql, vals = kind, st.floats(allow_nan=False)
    elif kind == "DECIMAL":
        p = draw(st.integers(1, 65))
        s = draw(st.integers(0, min(p, 30)))
        sql = f"DECIMAL({p},{s})"
        vals = st.integers(-(10 ** p) + 1, 10 ** p - 1).map(lambda n, s=s: Decimal(n).scaleb(-s, _WIDE))
    elif kind == "DATE":
        sql, vals = kind, st.builds(MySQLDate, st.integers(0, 9999), st.integers(0, 12), st.integers(0, 31))
    elif kind in ("TIME", "DATETIME", "TIMESTAMP"):
        fsp = draw(st.integers(0, 6))
        sql = f"{kind}({fsp})"
        step = 10 ** (6 - fsp)
        usec = st.integers(0, 999_999 // step).map(lambda u, step=step: u * step)
        if kind == "TIME":
            vals = st.builds(lambda n, h, m, s, u, fsp=fsp: MySQLTime(n and bool(h or m or s or u), h, m, s, u, fsp),
                             st.booleans(), st.integers(0, 838), st.integers(0, 59), st.integers(0, 59), usec)
        elif kind == "DATETIME":
            vals = st.builds(lambda y, mo, d, h, mi, s, u, fsp=fsp: MySQLDateTime(y, mo, d, h, mi, s, u, fsp),
                             st.integers(0, 9999), st.integers(0, 12), st.integers(0, 31), st.integers(0, 23),
                             st.integers(0, 59), st.integers(0, 59), usec)
        else:
            vals = st.builds(lambda sec, u, fsp=fsp: MySQLTimestamp(sec, u, fsp), st.integers(0, 2**31 - 1), usec)
    elif kind == "YEAR":
        sql, vals = kind, st.one_of(st.just(0), st.integers(1901, 2155))
    elif kind in ("CHAR", "VARCHAR"):
        n = draw(st.integers(1, 300 if kind == "VARCHAR" else 255))
        sql = f"{kind}({n})"
        vals = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=min(n, 20))
        if kind == "CHAR":
            vals = vals.map(lambda t: t.rstrip(" "))
    elif kind == "BINARY":
        n = draw(st.integers(1, 40))
        sql, vals = f"BINARY({n})", st.binary(min_size=n, max_size=n).filter(lambda b: not b.endswith(b"\x00"))
    elif kind == "VARBINARY":
        n = draw(st.integers(1, 600))
        sql, vals = f"VARBINARY({n})", st.binary(max_size=min(n, 40))
    elif kind in ("TEXT", "LONGTEXT"):
        sql, vals = kind, _text
    elif kind == "BLOB":
        sql, vals = kind, st.binary(max_size=300)
    elif kind == "JSON":
        sql, vals = kind, _json_values().map(MySQLJson)
    elif kind in ("ENUM", "SET"):
        items = draw(st.lists(st.from_regex(r"[a-z]{1,6}", fullmatch=True), min_size=1, max_size=12, unique=True))
        sql = f"{kind}(" + ",".join(f"'{x}'" for x in items) + ")"
        if kind == "ENUM":
            vals = st.sampled_from(items)
        else:
            vals = st.lists(st.sampled_from(items), unique=True).map(
                lambda xs, items=items: ",".join(x for x in items if x in xs))
    elif kind == "BIT":
        n = draw(st.integers(1, 64))
        sql, vals = f"BIT({n})", st.binary(min_size=(n + 7) // 8, max_size=(n + 7) // 8)
    elif kind == "GEOMETRY":
        sql, vals = "POINT", st.builds(Geometry, st.integers(0, 2**32 - 1), st.binary(max_size=40))
    else:  # VECTOR
        n = draw(st.integers(1, 8))
        sql = f"VECTOR({n})"
        vals = st.lists(st.floats(width=32, allow_nan=False).map(_f32), min_size=n, max_size=n).map(
            lambda xs: Vector(tuple(xs)))
    if nullable:
        vals = st.one_of(st.none(), vals)
    return Column(name, sql, nullable=nullable, primary_key=(i == 0)), vals


@st.composite
def _workload(draw):
    ncols = draw(st.integers(1, 10))
    cols = [draw(_column(i)) for i in range(ncols)]
    table = Table("db", draw(st.from_regex(r"t[a-z0-9_]{0,10}", fullmatch=True)),
                  tuple(c for c, _ in cols), table_id=draw(st.integers(1, (1 << 48) - 1)))
    row = st.fixed_dictionaries({c.name: v for c, v in cols})
    ops = draw(st.lists(st.tuples(st.sampled_from(["insert", "update", "delete"]),
                                  st.lists(st.tuples(row, row), min_size=1, max_size=4)),
                        min_size=1, max_size=4))
    version = draw(st.sampled_from(["8.0.40", "8.4.3", "9.1.0"]))
    compression = draw(st.sampled_from([None, "zstd"]))
    return table, ops, version, compression


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_workload())
def test_round_trip_random_workloads(w) -> None:
    table, ops, version, compression = w
    buf = io.BytesIO()
    fw = BinlogFileWriter(buf, server_version=version, previous_gtids=f"{U2}:1-3",
                          compression=compression, timestamp=1_600_000_000)
    expected = []
    for n, (kind, pairs) in enumerate(ops):
        fw.begin_transaction(f"{U2}:{n + 4}", last_committed=n, sequence_number=n + 1)
        if kind == "insert":
            fw.write_rows(table, [a for _b, a in pairs])
            expected += [(kind, None, a) for _b, a in pairs]
        elif kind == "delete":
            fw.delete_rows(table, [b for b, _a in pairs])
            expected += [(kind, b, None) for b, _a in pairs]
        else:
            fw.update_rows(table, pairs)
            expected += [(kind, b, a) for b, a in pairs]
        fw.xid()
    fw.rotate("binlog.000002")
    data = buf.getvalue()
    events = list(read_events(data))
    got = [(e.kind, r.before, r.after) for e in events if e.name.endswith("ROWS_V2") for r in e.rows]
    assert got == expected
    tm = next(e for e in events if e.name == "TABLE_MAP")
    assert tm.column_names == table.column_names and tm.table_id == table.table_id
    for e in events:
        if e.header.payload_pos is None:
            assert encode_event(e) == data[e.header.pos:e.header.next_pos], e.name
    assert GtidSet.from_gtids(e.gtid for e in events if e.name == "GTID") == \
        GtidSet.from_text(f"{U2}:4-{len(ops) + 3}")


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 1), st.integers(1, (1 << 63) - 2), st.integers(0, 1 << 40), st.integers(0, 1 << 40),
       st.integers(0, (1 << 55) - 1), st.one_of(st.none(), st.integers(0, (1 << 55) - 1)),
       st.integers(1, 1 << 40), st.integers(0, (1 << 31) - 1), st.one_of(st.none(), st.integers(0, (1 << 31) - 1)),
       st.one_of(st.none(), st.from_regex(r"[a-z_][a-z0-9_]{0,31}", fullmatch=True)))
def test_gtid_events_round_trip(flags, gno, lc, seq, ts, ots, tlen, ver, over, tag) -> None:
    from binlog_parser.writer import gtid_body, gtid_tagged_body

    kw = dict(uuid=U1, gno=gno, flags=flags, last_committed=lc, sequence_number=seq,
              immediate_commit_timestamp=ts, original_commit_timestamp=ots, transaction_length=tlen,
              immediate_server_version=ver, original_server_version=over)
    body = gtid_tagged_body(tag=tag, **kw) if tag else gtid_body(**kw)
    raw = b"\xfebin" + frame_event(15, __import__("binlog_parser.writer", fromlist=["x"]).format_description_body("9.1.0"),
                                   timestamp=0, server_id=1, log_pos=4 + 19 + 58 + 42 + 4)
    raw += frame_event(42 if tag else 33, body, timestamp=0, server_id=1, log_pos=0)
    ev = list(read_events(raw))[1]
    assert (ev.gno, ev.tag, ev.last_committed, ev.sequence_number) == (gno, tag, lc, seq)
    assert ev.immediate_commit_timestamp == ts and ev.original_commit_timestamp == (ts if ots is None else ots)
    assert ev.transaction_length == tlen and ev.original_server_version == (ver if over is None else over)
    assert encode_body(ev) == body


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 65).flatmap(lambda p: st.tuples(st.just(p), st.integers(0, min(p, 30)))).flatmap(
    lambda ps: st.tuples(st.just(ps), st.integers(-(10 ** ps[0]) + 1, 10 ** ps[0] - 1))))
def test_decimal_round_trip(arg) -> None:
    from binlog_parser.rows.decimal import decode_decimal

    (p, s), n = arg
    v = Decimal(n).scaleb(-s, _WIDE)
    assert decode_decimal(encode_decimal(v, p, s), p, s) == v


@settings(max_examples=200, deadline=None)
@given(_json_values())
def test_json_round_trip(tree) -> None:
    from binlog_parser.rows.json_binary import parse_json_binary

    assert parse_json_binary(encode_json(tree)) == tree


def test_json_large_container() -> None:
    from binlog_parser.rows.json_binary import parse_json_binary

    tree = {"k": ["x" * 1000] * 100, "n": list(range(-40000, 40000, 7))}
    b = encode_json(tree)
    assert b[0] == 0x01  # LARGE_OBJECT (does not fit 16-bit offsets)
    assert parse_json_binary(b) == tree


def test_checksum_off_file() -> None:
    data = _sample_file(server_version="8.0.40", checksum=False)
    events = list(read_events(data))
    assert events[0].checksum_alg == 0
    fde = data[4:events[0].header.next_pos]
    assert struct.unpack("<I", fde[-4:])[0] == zlib.crc32(fde[:-4])  # the FDE keeps its CRC (as servers do)
    assert all(e.header.checksum_ok is None for e in events[1:])
    for e in events:
        if e.header.payload_pos is None:
            assert encode_event(e, checksum=e.name == "FORMAT_DESCRIPTION") == data[e.header.pos:e.header.next_pos]
    assert sum(len(e.rows) for e in events if e.name == "WRITE_ROWS_V2") == 199
