"""``python -m binlog_parser`` as a subprocess: JSON lines, fixed keys, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from _binlog_util import BINLOGS, CRC32_SAMPLE, corrupt_middle_query

REPO = Path(__file__).resolve().parent.parent
TAG = BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__binlog_transaction_with_GTID_TAG.000001"
GTID57 = BINLOGS / "rust-us__mysql-cdc-rs" / "tests__events__5.7__33_35_gtid_prev_gtid__log.bin"
COMPRESSED = BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__transaction_compression.000001"
MARIA = BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__mariadb-bin.000001"
TRUNC = BINLOGS / "webscalesql__webscalesql-5.6" / "mysql-test__std_data__bug11747416_32228_binlog.000001"

COMMON = {"file", "pos", "next_pos", "type", "type_code", "timestamp", "server_id", "flags", "checksum_ok"}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "binlog_parser", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def lines(out: str) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in out.splitlines()]


def test_json_lines_fixed_keys() -> None:
    r = run(str(TAG), str(GTID57), str(COMPRESSED), str(MARIA))
    assert r.returncode == 0, r.stderr
    evs = lines(r.stdout)
    assert all(COMMON <= set(e) for e in evs)
    by_type: dict[str, list[dict]] = {}  # type: ignore[type-arg]
    for e in evs:
        by_type.setdefault(e["type"], []).append(e)
    tagged = by_type["GTID_TAGGED"][0]
    assert tagged["gtid"] == "55778904-0299-11f1-b1b8-4ef0c4956feb:mytag:3"
    assert tagged["pos"] == 245 and tagged["next_pos"] == 328 and tagged["checksum_ok"] is True
    prev = by_type["PREVIOUS_GTIDS"]
    assert prev[0]["gtid_set"] == "55778904-0299-11f1-b1b8-4ef0c4956feb:1-13:mytag:1-2"
    assert all(isinstance(p["gtid_set"], str) for p in prev)
    g = by_type["GTID"][0]
    assert g["gtid"].count(":") == 1 and g["type_code"] == 33
    rot = by_type["ROTATE"][0]
    assert rot["next_file"] == "binlog.000005" and rot["next_position"] == 4
    q = by_type["QUERY"][0]
    assert {"schema", "query"} <= set(q)
    assert all(isinstance(x["xid"], int) for x in by_type["XID"])
    # events inside the TRANSACTION_PAYLOAD carry the payload's pos
    tp = by_type["TRANSACTION_PAYLOAD"][0]
    inner = [e for e in evs if e.get("in_payload")]
    assert inner and all(e["pos"] == tp["pos"] and e["next_pos"] == tp["next_pos"] for e in inner)
    mg = by_type["MARIA_GTID"][0]
    assert mg["gtid"] == f"0-{mg['server_id']}-{mg['seq_no']}"
    assert by_type["MARIA_GTID_LIST"][0]["gtid_set"] is not None
    assert {e["file"] for e in evs} == {str(TAG), str(GTID57), str(COMPRESSED), str(MARIA)}


def test_big_ints_as_strings_and_positions() -> None:
    r = run("--start-position", "245", "--stop-position", "541", str(TAG))
    assert r.returncode == 0
    evs = lines(r.stdout)
    assert [e["pos"] for e in evs] == [245, 328, 405, 461, 510]
    assert isinstance(evs[0]["immediate_commit_timestamp"], int)  # < 2**53 stays an int


def test_truncated_exit_2_after_events() -> None:
    r = run(str(TRUNC))
    assert r.returncode == 2
    assert len(lines(r.stdout)) == 4
    assert r.stderr.strip().startswith(f"{TRUNC}:316: ")


def test_not_a_binlog_exit_2(tmp_path: Path) -> None:
    p = tmp_path / "x.bin"
    p.write_bytes(b"hello world")
    r = run(str(p))
    assert r.returncode == 2 and r.stderr.startswith(f"{p}:0: ")
    r = run(str(tmp_path / "missing"))
    assert r.returncode == 1


def test_text_view() -> None:
    r = run("--text", str(TAG))
    assert r.returncode == 0
    out = r.stdout
    assert "# at 4\n" in out and "# at 541\n" in out
    assert "server id 1  end_log_pos 328" in out
    assert "SET @@SESSION.GTID_NEXT= '55778904-0299-11f1-b1b8-4ef0c4956feb:mytag:3'" in out
    assert "Rotate to binlog.000005  pos: 4" in out


def test_render_big_ints_as_strings() -> None:
    import struct

    from _binlog_util import Builder

    from binlog_parser import read_events
    from binlog_parser.constants import EventType
    from binlog_parser.render import event_to_dict

    b = Builder()
    name = b"u"
    body = struct.pack("<I", 1) + name + b"\x00" + struct.pack("<BII", 2, 63, 8) + struct.pack("<Q", 2**64 - 1) + b"\x01"
    b.add(EventType.USER_VAR, body)
    b.add(EventType.XID, struct.pack("<Q", 2**53 + 1))
    uv, xid = list(read_events(b.bytes()))[1:]
    assert event_to_dict(uv, "f")["value"] == str(2**64 - 1)
    assert event_to_dict(xid, "f")["xid"] == str(2**53 + 1)


def test_resync_prints_the_skipped_range_and_exits_3(tmp_path: Path) -> None:
    bad, pos, next_pos = corrupt_middle_query(CRC32_SAMPLE.read_bytes())
    p = tmp_path / "binlog.000001"
    p.write_bytes(bad)
    plain = run(str(p))
    assert plain.returncode == 2 and plain.stderr.startswith(f"{p}:{pos}: ")
    r = run("--resync", str(p))
    assert r.returncode == 3, r.stderr
    out = lines(r.stdout)
    (skip,) = [o for o in out if o["type"] == "SKIPPED_BYTES"]
    assert (skip["start"], skip["end"], skip["bytes"], skip["found_by"]) == (pos, next_pos, next_pos - pos, "event_size")
    assert skip["error_class"] == "CorruptEventError" and "status variables" in skip["error"]
    assert r.stderr == f"{p}:{pos}: {skip['error']} (skipped bytes {pos}-{next_pos})\n"
    good = lines(run(str(CRC32_SAMPLE)).stdout)
    assert [o["pos"] for o in out if o["type"] != "SKIPPED_BYTES"] == [o["pos"] for o in good if o["pos"] != pos]
    text = run("--resync", "--text", str(p))
    assert text.returncode == 3 and f"# skipped {next_pos - pos} bytes ({pos}-{next_pos})" in text.stdout
    assert run("--resync", str(CRC32_SAMPLE)).returncode == 0
