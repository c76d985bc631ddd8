"""binlake.ingest.records: one binlog (or byte range) -> table rows, pure Python (no Spark)."""

from __future__ import annotations

import collections
import json
from pathlib import Path

from _binlog_util import CRC32_SAMPLE, corrupt_middle_query

from binlake.ingest.layout import KIND_TO_TABLE, batch_schema
from binlake.ingest.records import (
    SPLIT_POINT_TYPES,
    context_from_head,
    decode_file,
    decode_range,
    merge_file_facts,
    split_points,
    statement_kind,
)
from binlake.lake import tables
from binlake.reconcile.coverage import FileFacts, reconcile
from binlog_parser.reader import HeaderScan, scan_headers

ROOT = Path(__file__).resolve().parent / "fixtures"
MARIA = ROOT / "mariadb-10.11"
BL = ROOT / "binlogs"
BB = BL / "blackbeam__rust_mysql_common"


def collect(it):
    out = collections.defaultdict(list)
    for kind, row in it:
        out[kind].append(row)
    return out


def test_rows_have_exactly_the_table_columns():
    seen = set()
    paths = sorted(MARIA.glob("binlog.*")) + [BB / "test-data__binlogs__transaction_compression.000001",
                                             BB / "test-data__binlogs__binlog_truncated_prev_gtid_event.000001"]
    for path in paths:
        out = collect(decode_file(path, source="s"))
        for kind, rows in out.items():
            if kind == "file_facts":
                merged = merge_file_facts(rows, size=path.stat().st_size, etag="e")
                assert list(merged) == tables.META_BINLOG_FILES.column_names
                continue
            seen.add(kind)
            cols = tables.table(KIND_TO_TABLE[kind]).column_names
            for row in rows:
                assert list(row) == cols, kind
    assert {"events", "transactions", "statements", "quarantine"} <= seen


def test_mariadb_chain_facts_reconcile_ok():
    facts = []
    for path in sorted(MARIA.glob("binlog.*")):
        out = collect(decode_file(path, source="maria"))
        assert len(out["file_facts"]) == 1 and not out["quarantine"]
        facts.append(merge_file_facts(out["file_facts"], size=path.stat().st_size))
    assert [(f["previous_gtids_raw"], f["previous_gtids"], f["contained_gtids"]) for f in facts] == [
        ("", "", "0:1-3"), ("0-7-3", "0:1-3", "0:4-6"), ("0-7-6", "0:1-6", "0:7-10"), ("0-7-10", "0:1-10", "")]
    assert [f["closing_event"] for f in facts] == ["ROTATE", "ROTATE", "ROTATE", "STOP"]
    assert [f["next_file"] for f in facts[:3]] == ["binlog.000002", "binlog.000003", "binlog.000004"]
    assert all(f["flavor"] == "mariadb" and f["server_id"] == 7 for f in facts)
    rows = reconcile([FileFacts.from_row(f) for f in facts])
    assert [r.status for r in rows] == ["OK"] * 4


def test_transactions_and_statements_of_mariadb_file3():
    out = collect(decode_file(MARIA / "binlog.000003", source="maria"))
    trx = out["transactions"]
    assert [(t["gtid"], t["kind"], t["end_event"], t["complete"]) for t in trx] == [
        ("0-7-7", "DDL", "DDL", True), ("0-7-8", "DML", "XID", True),
        ("0-7-9", "DML", "XID", True), ("0-7-10", "DML", "XID", True)]
    assert trx[0]["statements"][0].startswith("ALTER TABLE orders ADD COLUMN channel")
    assert [t["mariadb_seq_no"] for t in trx] == [7, 8, 9, 10]
    assert out["statements"][0]["kind"] == "DDL" and out["statements"][0]["db"] == "shop"
    # every event inside a transaction carries its GTID and start position
    by_pos = {t["start_pos"]: t["gtid"] for t in trx}
    for e in out["events"]:
        if e["trx_pos"] is not None:
            assert by_pos[e["trx_pos"]] == e["gtid"]


def test_compressed_payload_events_are_expanded():
    out = collect(decode_file(BB / "test-data__binlogs__transaction_compression.000001", source="s"))
    emb = [e for e in out["events"] if e["payload_index"] is not None]
    assert [e["event_type"] for e in emb][:1] == ["QUERY"] and emb[-1]["event_type"] == "XID"
    assert [e["payload_index"] for e in emb] == list(range(len(emb)))
    assert len({e["pos"] for e in emb}) == 1 and all(e["checksum"] == "none" for e in emb)
    (t,) = out["transactions"]
    assert t["gtid_kind"] == "ANONYMOUS" and t["complete"] and t["end_event"] == "XID"
    assert t["end_pos"] == emb[0]["next_pos"] or t["end_pos"] > emb[0]["pos"]


def test_truncated_tail_keeps_everything_before(tmp_path):
    data = (MARIA / "binlog.000002").read_bytes()
    full = collect(decode_file(data, source="m", file="binlog.000002"))
    cut = data[: len(data) - 500]
    out = collect(decode_file(cut, source="m", file="binlog.000002"))
    (q,) = out["quarantine"]
    assert q["scope"] == "tail" and q["error_class"] == "TruncatedEventError" and q["pos"] is not None
    assert len(out["events"]) < len(full["events"])
    assert out["events"] == full["events"][: len(out["events"])]
    (facts,) = out["file_facts"]
    assert facts["truncated"] and facts["closing_event"] is None
    assert out["transactions"][-1]["complete"] is False


def test_corrupt_event_is_quarantined_and_decoding_resumes():
    out = collect(decode_file(BB / "test-data__binlogs__corrupt-relay-bin.000624", source="s"))
    events = [q for q in out["quarantine"] if q["scope"] == "event"]
    assert events and events[0]["error_class"] == "CorruptEventError" and events[0]["raw_head"]
    assert any(e["pos"] > events[0]["pos"] for e in out["events"])


def test_not_a_binlog_is_one_quarantine_row():
    out = collect(decode_file(b"hello world, not a binlog", source="s", file="junk.000001"))
    (q,) = out["quarantine"]
    assert q["scope"] in ("range", "tail") and q["pos"] == 0
    assert out["file_facts"][0]["events"] == 0


def test_the_split_scan_skips_to_each_next_cut():
    """Told where the next cut may be (``HeaderScan.skip_to``), the scan finds the same cuts on
    both loops; the Python loop, which takes the hint at once, builds a header for fewer than
    a third of the transaction starts and XIDs (the compiled loop takes it when it next starts,
    after each 8 MiB read of a large file)."""
    from tests._native_util import native_extension

    data = _many_transactions()
    everything = list(scan_headers(data, types=SPLIT_POINT_TYPES))
    cuts = split_points(scan_headers(data), file_size=len(data), target=2000)
    assert len(cuts) >= 3
    for native in (True, False):
        with native_extension(native):
            scan = HeaderScan(data, types=SPLIT_POINT_TYPES)
            seen: list[int] = []
            assert split_points((seen.append(h.pos) or h for h in scan), file_size=len(data), target=2000,
                                skip_to=scan.skip_to) == cuts
    assert len(seen) * 3 < len(everything)


def test_split_ranges_give_the_same_rows_as_one_pass():
    path = MARIA / "binlog.000003"
    data = path.read_bytes()
    whole = collect(decode_file(data, source="m", file=path.name))
    cuts = split_points(scan_headers(data), file_size=len(data), target=300)
    assert len(cuts) >= 2
    # the ingest's scan reads only the headers split_points looks at: the same cuts
    assert split_points(scan_headers(data, types=SPLIT_POINT_TYPES), file_size=len(data), target=300) == cuts
    ctx_head = data[:65536]
    bounds = [0] + cuts + [len(data)]
    parts = collections.defaultdict(list)
    for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
        ctx = context_from_head(ctx_head, path.name) if a > 0 else None
        for kind, row in decode_range(data[a:b], source="m", file=path.name, range_start=a,
                                      range_index=i, file_size=len(data), context=ctx):
            parts[kind].append(row)
    for kind in ("events", "transactions", "statements"):
        assert parts[kind] == whole[kind], kind
    merged = merge_file_facts(parts["file_facts"], size=len(data))
    single = merge_file_facts(whole["file_facts"], size=len(data))
    for k in ("previous_gtids", "contained_gtids", "first_gtid", "last_gtid", "transactions", "events",
              "closing_event", "next_file", "truncated", "decoded_bytes"):
        assert merged[k] == single[k], k
    assert merged["ranges"] == len(bounds) - 1


def test_a_range_decoded_twice_with_one_context_gives_the_same_rows():
    """A range that starts on a rows event whose TABLE_MAP is before the cut: the context given
    is not changed by decoding (TABLE_MAPs are registered in a copy), so a second decode with
    the same context gives the same rows, the first event quarantined both times."""
    from binlog_parser.rows.rows_event import ROWS_EVENT_TYPES

    path = MARIA / "binlog.000002"
    data = path.read_bytes()
    cut = next(h.pos for h in scan_headers(data) if h.type_code in ROWS_EVENT_TYPES)
    ctx = context_from_head(data[:65536], path.name)
    runs = [collect(decode_range(data[cut:], source="m", file=path.name, range_start=cut, range_index=1,
                                 file_size=len(data), context=ctx)) for _ in range(2)]
    assert runs[0] == runs[1]
    assert runs[0]["quarantine"][0]["pos"] == cut and runs[0]["row_changes"]
    assert ctx.table_maps == {} and not ctx.rows_as_bytes


def test_statement_kind():
    assert statement_kind("/* x */ CREATE TABLE t (a int)") == "DDL"
    assert statement_kind("create user u") == "DCL"
    assert statement_kind("insert into t values (1)") == "DML"
    assert statement_kind("XA COMMIT X'01'") == "TCL"
    assert statement_kind("") == "OTHER"


def test_row_changes_of_mariadb_file2():
    out = collect(decode_file(MARIA / "binlog.000002", source="maria"))
    rc = out["row_changes"]
    ops = [(r["table_name"], r["operation"], json.loads(r["before"] or "{}").get("id"),
            json.loads(r["after"] or "{}").get("id")) for r in rc]
    assert ops[:4] == [("customer", "update", 1, 1), ("customer", "update", 2, 2),
                       ("customer", "delete", 3, None), ("customer", "insert", None, 4)]
    upd = json.loads(rc[0]["after"])  # typed JSON: numbers stay numbers, DECIMAL and temporal text
    assert upd["id"] == 1 and upd["balance"] == "1244.56" and upd["updated"] == "2026-11-22 10:00:00.500"
    # all rows of one transaction share its GTID, start position and commit time
    (t,) = [t for t in out["transactions"] if t["gtid"] == "0-7-4"]
    mine = [r for r in rc if r["gtid"] == "0-7-4"]
    assert len(mine) == t["row_changes"] == 4
    assert {r["trx_pos"] for r in mine} == {t["start_pos"]} and {r["commit_time"] for r in mine} == {t["commit_time"]}
    assert t["tables"] == ["shop.customer"] and t["xid"] is not None
    # binlog order: (pos, payload_index, row_index) strictly increasing
    keys = [(r["pos"], r["payload_index"] or 0, r["row_index"]) for r in rc]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)


def test_truncated_transaction_is_not_contained():
    data = (MARIA / "binlog.000002").read_bytes()[:-100]
    (facts,) = [r for k, r in decode_file(data, source="m", file="binlog.000002") if k == "file_facts"]
    assert facts["contained_gtids"] == "0:4-5" and facts["last_gtid"] == "0-7-6" and facts["truncated"]


def test_plan_tasks_packs_small_files_and_isolates_ranges():
    from spark_jobs.ingest import BinlogObject, as_binlog_object, files_predicate, plan_tasks

    small = [BinlogObject("s", f"/a/b.{i:06d}", 10) for i in range(5)]
    big = BinlogObject("s", "/a/big.000001", 1000)
    tasks = plan_tasks(small + [big], {("s", "big.000001"): [300, 700]}, pack_target=25)
    sizes = [[(p["file"], p["start"], p["end"]) for p in t] for t in tasks]
    assert sizes == [[("b.000000", 0, 10), ("b.000001", 0, 10)], [("b.000002", 0, 10), ("b.000003", 0, 10)],
                     [("big.000001", 0, 300)], [("big.000001", 300, 700)], [("big.000001", 700, 1000)],
                     [("b.000004", 0, 10)]]
    ranges = [t[0] for t in tasks if t[0]["file"] == "big.000001"]
    assert [(p["start"], p["end"], p["range_index"], p["n_ranges"]) for p in ranges] == [
        (0, 300, 0, 3), (300, 700, 1, 3), (700, 1000, 2, 3)]
    assert sum(len(t) for t in tasks) == 5 + 3
    assert files_predicate([("s", "a'b"), ("t", "x"), ("s", "c")]) == (
        "(source = 's' AND file IN ('a\\'b', 'c')) OR (source = 't' AND file IN ('x'))")
    o = as_binlog_object({"source": "s", "name": "dir/binlog.000001", "uri": "s3://b/dir/binlog.000001",
                          "size": 5, "etag": "e"})
    assert (o.file, o.size, o.etag) == ("binlog.000001", 5, "e")


def test_spread_targets_give_every_core_work():
    """A small archive is spread over the cores (packed by shares, large files cut); a large one
    keeps the given targets."""
    from spark_jobs.ingest import BinlogObject, plan_tasks, spread_targets

    mib = 1 << 20
    four = [BinlogObject("s", f"/a/binlog.{i:06d}", 10 * mib) for i in range(1, 5)]
    assert len(plan_tasks(four, {}, pack_target=64 * mib)) == 1  # one task: a core left idle
    threshold, target, pack = spread_targets(128 * mib, 64 * mib, 64 * mib, total_bytes=40 * mib, parallelism=2)
    assert (threshold, target, pack) == (20 * mib, 20 * mib, 22.5 * mib)
    tasks = plan_tasks(four, {}, pack_target=pack)
    assert [[p["file"] for p in t] for t in tasks] == [["binlog.000001", "binlog.000002"],
                                                      ["binlog.000003", "binlog.000004"]]
    # files of about equal size, the first two a little over half the archive: still two tasks
    uneven = [BinlogObject("s", f"/a/binlog.{i:06d}", n) for i, n in enumerate((101, 102, 100, 100), 1)]
    pack = spread_targets(10**6, 10**6, 10**6, total_bytes=403, parallelism=2)[2]
    assert [len(t) for t in plan_tasks(uneven, {}, pack_target=pack)] == [2, 2]
    # one 40 MiB file on 4 cores: above the 10 MiB threshold, cut into ~10 MiB ranges
    assert spread_targets(128 * mib, 64 * mib, 64 * mib, total_bytes=40 * mib, parallelism=4) == (
        10 * mib, 10 * mib, 11.25 * mib)
    # files under 4 MiB are never cut for this, ranges never under 1 MiB; packing by halves
    assert spread_targets(128 * mib, 64 * mib, 64 * mib, total_bytes=150_000, parallelism=2) == (
        4 * mib, mib, 84_375)
    # a large archive: the given targets
    assert spread_targets(128 * mib, 64 * mib, 64 * mib, total_bytes=1 << 30, parallelism=2) == (
        128 * mib, 64 * mib, 64 * mib)


def test_mid_file_corrupt_query_loses_nothing_else():
    data = CRC32_SAMPLE.read_bytes()
    bad, pos, next_pos = corrupt_middle_query(data)
    full = collect(decode_file(data, source="s", file="binlog.000001"))
    out = collect(decode_file(bad, source="s", file="binlog.000001"))
    (q,) = out["quarantine"]
    assert (q["scope"], q["pos"], q["range_start"], q["range_end"]) == ("event", pos, pos, next_pos)
    assert q["error_class"] == "CorruptEventError" and "status variables (65535 bytes)" in q["error_message"]
    assert q["raw_head"] == bad[pos:next_pos]
    assert out["events"] == [e for e in full["events"] if e["pos"] != pos]
    assert out["row_changes"] == full["row_changes"] and len(out["row_changes"]) > 0
    assert not out["file_facts"][0]["truncated"] and out["file_facts"][0]["skipped_ranges"] == [[pos, next_pos]]
    assert out["file_facts"][0]["closing_event"] == full["file_facts"][0]["closing_event"] == "ROTATE"


def test_a_lying_event_size_is_skipped_to_the_next_header_found():
    data = CRC32_SAMPLE.read_bytes()
    bad, pos, next_pos = corrupt_middle_query(data, lie_about_size=True)
    full = collect(decode_file(data, source="s", file="binlog.000001"))
    out = collect(decode_file(bad, source="s", file="binlog.000001"))
    (q,) = out["quarantine"]
    assert (q["scope"], q["pos"], q["range_start"], q["range_end"]) == ("skipped", pos, pos, next_pos)
    assert f"skipped bytes {pos}-{next_pos}" in q["error_message"] and "found by scan" in q["error_message"]
    assert out["events"] == [e for e in full["events"] if e["pos"] != pos]
    assert out["row_changes"] == full["row_changes"]


def test_rows_event_fields_point_at_row_changes_instead_of_repeating_them():
    """bronze.events.fields of a rows event: its fields without ``rows``, plus ``row_count`` and
    ``row_images``; the images are in silver.row_changes under the event's key."""
    from binlog_parser.reader import read_events

    out = collect(decode_file(MARIA / "binlog.000002", source="maria"))
    heads = {e.header.pos: {k: v for k, v in e.fields().items() if k != "rows"} | {"rows": len(e.fields()["rows"])}
             for e in read_events(str(MARIA / "binlog.000002")) if hasattr(e, "fields_head")}
    per_event = collections.Counter((r["pos"], r["payload_index"]) for r in out["row_changes"])
    rows_events = [e for e in out["events"] if e["pos"] in heads]
    assert len(rows_events) == len(heads) == len(per_event) > 3
    for e in rows_events:
        fields = json.loads(e["fields"])
        want = dict(heads[e["pos"]])
        assert fields.pop("row_images") == "silver.row_changes"
        assert fields.pop("row_count") == want.pop("rows") == per_event[(e["pos"], e["payload_index"])]
        assert fields == json.loads(json.dumps(want))
    # every other event keeps its whole fields()
    tm = next(e for e in out["events"] if e["event_type"] == "TABLE_MAP")
    assert json.loads(tm["fields"])["columns"] and "row_count" not in tm["fields"]


def test_batches_are_cut_at_batch_rows_in_each_tables_schema():
    """Small batches give the same rows as one batch per table; a transaction's row changes wait
    for its commit time (never cut before it, unless max_buffered_rows)."""
    import pyarrow as pa

    from binlake.ingest.records import RangeDecoder, rows_of

    data = (BB / "test-data__binlogs__transaction_compression.000001").read_bytes()
    whole = collect(decode_file(data, source="s", file="binlog.000001"))
    batches = list(RangeDecoder(data, source="s", file="binlog.000001", file_size=len(data), batch_rows=3).batches())
    assert batches[-1][0] == "file_facts"
    sizes = collections.defaultdict(list)
    for kind, b in batches[:-1]:
        assert isinstance(b, pa.RecordBatch) and b.schema == batch_schema(KIND_TO_TABLE[kind])
        sizes[kind].append(b.num_rows)
    assert len(sizes["events"]) > 2 and all(n == 3 for n in sizes["events"][:-1])
    assert collect(rows_of(batches)) == whole
    # a 1-row buffer cap flushes each rows event with its own time: same rows, other commit_time
    early = collect(decode_file(data, source="s", file="binlog.000001", max_buffered_rows=1, batch_rows=1))
    assert [{**r, "commit_time": None, "commit_date": None} for r in early["row_changes"]] == [
        {**r, "commit_time": None, "commit_date": None} for r in whole["row_changes"]]
    assert [r["commit_time"] for r in early["row_changes"]] == [r["event_time"] for r in early["row_changes"]]


def test_rows_event_heads_follow_their_table_flags_and_table_id():
    """Each rows event's bronze fields are its own head (kept per table, type, table id, flags
    and extra data): chunked statements (STMT_END_F on the last chunk only), two tables, and a
    table id mapped again to another table."""
    import io

    from binlog_parser.reader import read_events
    from binlog_parser.rows.render import compact_json
    from binlog_parser.writer import BinlogFileWriter, Column, Table

    cols = (Column("id", "INT"), Column("v", "VARCHAR(40)"))
    a, b = Table("db", "a", cols, table_id=7), Table("db", "b", cols, table_id=8)
    again = Table("other", "c", cols + (Column("w", "INT"),), table_id=7)  # id 7 reused
    buf = io.BytesIO()
    w = BinlogFileWriter(buf, server_version="8.0.40", previous_gtids="", max_rows_event_size=200)
    gno = 0
    for table in (a, b, a, again, b):
        gno += 1
        w.begin_transaction(f"3e11fa47-71ca-11e1-9e33-c80aa9429562:{gno}", last_committed=gno - 1,
                            sequence_number=gno, timestamp=1700000000)
        w.write_rows(table, [dict({"id": i, "v": "x" * 30}, **({"w": i} if table is again else {}))
                             for i in range(12)])
        w.update_rows(table, [({"id": 1, "v": "x", **({"w": 1} if table is again else {})},
                               {"id": 2, "v": "y", **({"w": 2} if table is again else {})})])
        w.xid()
    w.rotate("binlog.000002")
    data = buf.getvalue()
    want = {}
    flags = collections.Counter()
    for e in read_events(data):
        if hasattr(e, "fields_head"):
            want[e.header.pos] = compact_json(dict(e.fields_head(), row_count=len(e.rows),
                                                   row_images="silver.row_changes"))
            flags[(e.table_name, e.flags)] += 1
    out = collect(decode_file(data, source="s", file="binlog.000001"))
    got = {e["pos"]: e["fields"] for e in out["events"] if e["pos"] in want}
    assert got == want
    assert flags[("a", 0)] > 2 and flags[("a", 1)] == 4 and flags[("c", 1)] == 2  # chunks and ends


def _decoded_with_and_without_the_extension(data: bytes) -> dict:
    """``decode_file``'s rows of ``data``, which must be the same with and without the extension."""
    from tests._native_util import native_extension

    outs = []
    for native in (True, False):
        with native_extension(native):
            outs.append(collect(decode_file(data, source="s", file="binlog.000001")))
    assert outs[0] == outs[1]
    return outs[0]


def test_names_that_are_not_utf8_are_kept_escaped_not_a_failed_range():
    """A TABLE_MAP whose schema and column names are not UTF-8 (a damaged or non-UTF-8 server
    name): the decoder keeps them with surrogateescape, and every table stores them as
    ``backslashreplace`` writes them, with and without the extension, instead of failing the
    range (Arrow holds no surrogate; before, the whole task failed)."""
    import io

    from binlog_parser.writer import BinlogFileWriter, Column, Table

    table = Table("dQZ", "t", (Column("id", "INT"), Column("nQZ", "VARCHAR(10)")), table_id=5)
    buf = io.BytesIO()
    w = BinlogFileWriter(buf, server_version="8.0.40", previous_gtids="", checksum=False)
    w.begin_transaction("3e11fa47-71ca-11e1-9e33-c80aa9429562:1", last_committed=0, sequence_number=1,
                        timestamp=1700000000)
    w.write_rows(table, [{"id": 1, "nQZ": "x"}])
    w.xid()
    w.rotate("binlog.000002")
    data = buf.getvalue().replace(b"QZ", b"\xfeZ")  # the names' bytes, no longer UTF-8
    out = _decoded_with_and_without_the_extension(data)
    assert "quarantine" not in out
    (change,) = out["row_changes"]
    assert change["db"] == "d\\udcfeZ"
    assert json.loads(change["after"]) == {"id": 1, "n\udcfeZ": "x"}  # the JSON escape of the name
    (tm,) = [e for e in out["events"] if e["event_type"] == "TABLE_MAP"]
    assert tm["db"] == "d\\udcfeZ" and json.loads(tm["fields"])["schema"] == "d\udcfeZ"


def test_an_xid_too_large_for_its_column_costs_that_value_not_the_range():
    """A flipped byte made an XID larger than a BIGINT holds: its transaction is kept with a
    NULL xid and one quarantine row (scope ``value``) names the value; the events after it are
    decoded as ever, with and without the extension. (Before, the rest of the range was one
    ``range`` quarantine row.)"""
    import io

    from binlog_parser.writer import BinlogFileWriter, Column, Table

    table = Table("d", "t", (Column("id", "INT"),), table_id=5)
    buf = io.BytesIO()
    w = BinlogFileWriter(buf, server_version="8.0.40", previous_gtids="", checksum=False)
    uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    for gno, xid in ((1, 2 ** 64 - 5), (2, 77)):
        w.begin_transaction(f"{uuid}:{gno}", last_committed=0, sequence_number=gno, timestamp=1700000000)
        w.write_rows(table, [{"id": gno}])
        w.xid(xid)
    w.rotate("binlog.000002")
    data = buf.getvalue()
    out = _decoded_with_and_without_the_extension(data)
    trx = out["transactions"]
    assert [(t["gtid"], t["xid"], t["end_event"], t["complete"]) for t in trx] == [
        (f"{uuid}:1", None, "XID", True), (f"{uuid}:2", 77, "XID", True)]
    (q,) = out["quarantine"]
    assert (q["scope"], q["pos"], q["error_class"]) == ("value", trx[0]["start_pos"], "ColumnRangeError")
    assert q["error_message"] == (f"silver.transactions.xid: {2 ** 64 - 5} does not fit a BIGINT (int64) column; "
                                  "stored as NULL")
    assert [c["after"] for c in out["row_changes"]] == ['{"id":1}', '{"id":2}']
    assert out["events"][-1]["event_type"] == "ROTATE"
    assert json.loads([e for e in out["events"] if e["event_type"] == "XID"][0]["fields"])["xid"] == 2 ** 64 - 5
    (facts,) = out["file_facts"]
    assert facts["quarantined"] == 1 and facts["closing_event"] == "ROTATE"


def _batches_and_python_events(data: bytes, monkeypatch, *, sink: bool, from_bytes: list[int] | None = None,
                               **kwargs) -> tuple[list, int]:
    """``RangeDecoder.batches`` of ``data`` as ``(kind, rows)`` in order, and how many events the
    Python loop (``_on_event``) handled; ``sink``: False, the extension's ``EventSink`` is not
    made (the extension decodes as ever); ``from_bytes`` gets how many events the sink took from
    their bytes."""
    from binlake.ingest import records

    handled = 0
    on_event = records.RangeDecoder._on_event

    def counted(self, event):
        nonlocal handled
        handled += 1
        return on_event(self, event)

    with monkeypatch.context() as m:
        m.setattr(records.RangeDecoder, "_on_event", counted)
        if not sink:
            m.setattr(records._native, "event_sink", lambda *args: None)
        decoder = records.RangeDecoder(data, source="s", file="binlog.000001", file_size=len(data), **kwargs)
        out = [(kind, item if kind == "file_facts" else item.to_pylist()) for kind, item in decoder.batches()]
    if from_bytes is not None:
        from_bytes.append(decoder._sink.from_bytes if decoder._sink is not None else 0)
    return out, handled


def _many_transactions() -> bytes:
    """A written binlog of 40 transactions on two tables: GTID, BEGIN, TABLE_MAP + WRITE_ROWS,
    every third one a TABLE_MAP + UPDATE_ROWS too, XID."""
    import io

    from binlog_parser.writer import BinlogFileWriter, Column, Table

    t1 = Table("shop", "orders", (Column("id", "INT"), Column("note", "VARCHAR(20)")), table_id=7)
    t2 = Table("shop", "stock", (Column("sku", "BIGINT"), Column("qty", "INT")), table_id=8)
    buf = io.BytesIO()
    w = BinlogFileWriter(buf, server_version="8.0.40", previous_gtids="", checksum=True)
    uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    for gno in range(1, 41):
        w.begin_transaction(f"{uuid}:{gno}", last_committed=gno - 1, sequence_number=gno,
                            timestamp=1700000000 + gno * 3600)
        w.write_rows(t1, [{"id": gno * 10 + k, "note": f"n{k}"} for k in range(gno % 4 + 1)])
        if gno % 3 == 0:
            w.update_rows(t2, [({"sku": gno, "qty": 1}, {"sku": gno, "qty": 2})])
        w.xid(gno)
    w.rotate("binlog.000002")
    return buf.getvalue()


def _table_id_reused_for_another_table() -> bytes:
    """Ten transactions on table id 7, then ten where table id 7 is another table (an extra
    column, another name), then ten on the first again: the same table id, head and flags, other
    TABLE_MAP bytes and columns."""
    import io

    from binlog_parser.writer import BinlogFileWriter, Column, Table

    first = Table("shop", "orders", (Column("id", "INT"), Column("note", "VARCHAR(20)")), table_id=7)
    other = Table("shop", "orders2", (Column("id", "INT"), Column("note", "VARCHAR(20)"), Column("n", "INT")),
                  table_id=7)
    buf = io.BytesIO()
    w = BinlogFileWriter(buf, server_version="8.0.40", previous_gtids="", checksum=True)
    uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    for gno in range(1, 31):
        w.begin_transaction(f"{uuid}:{gno}", last_committed=gno - 1, sequence_number=gno, timestamp=1700000000 + gno)
        if 10 < gno <= 20:
            w.write_rows(other, [{"id": gno, "note": "b", "n": gno}])
        else:
            w.write_rows(first, [{"id": gno, "note": "a"}])
        w.xid(gno)
    return buf.getvalue()


def _misfit_in_the_second_transaction() -> bytes:
    """Five transactions; the fourth's GTID has a last_committed too large for its BIGINT
    column, which only the transactions row, appended at the XID, finds out."""
    import io

    from binlog_parser.writer import BinlogFileWriter, Column, Table

    table = Table("d", "t", (Column("id", "INT"),), table_id=5)
    buf = io.BytesIO()
    w = BinlogFileWriter(buf, server_version="8.0.40", previous_gtids="", checksum=False)
    for gno, last_committed in ((1, 0), (2, 1), (3, 2), (4, 2 ** 64 - 3), (5, 4)):
        w.begin_transaction(f"3e11fa47-71ca-11e1-9e33-c80aa9429562:{gno}", last_committed=last_committed,
                            sequence_number=gno, timestamp=1700000000)
        w.write_rows(table, [{"id": gno}])
        w.xid(gno)
    w.rotate("binlog.000002")
    return buf.getvalue()


def _mariadb_transaction_repeated(times: int) -> bytes:
    """The MariaDB 10.11 chain's binlog.000002 with its last transaction (MariaDB GTID,
    ANNOTATE_ROWS, TABLE_MAP, WRITE_ROWS, XID; bytes 73389-73900) written ``times`` more times
    before its ROTATE, as they are (the same GTID each time)."""
    data = (MARIA / "binlog.000002").read_bytes()
    start, end = 73389, 73900
    assert [h.type_code for h in scan_headers(data) if start <= h.pos < end] == [162, 160, 19, 23, 16]
    return data[:end] + data[start:end] * times + data[end:]


def test_the_event_sink_takes_plain_transactions_and_changes_no_row(monkeypatch):
    """With the extension, the compiled framing loop appends the rows of the events of plain
    transactions (GTID, BEGIN, TABLE_MAP, rows events, XID: ``EventSink``), which the Python
    loop then never sees. Every table's rows,
    their order and their cut into batches, and the file facts are the same without the sink:
    on every fixture binlog, and on a written one cut into batches of 7 rows with at most 10 row
    changes waiting for their commit time (the sink leaves those events to the Python loop)."""
    from tests._native_util import fixture_binlogs, native_extension

    written = _many_transactions()
    inputs = [(p.name, p.read_bytes(), {}) for p in fixture_binlogs()]
    inputs += [("written", written, {}), ("written, small batches", written, {"batch_rows": 7, "max_buffered_rows": 10}),
               ("written, cut in a transaction", written[:len(written) // 2], {}),
               ("a misfit at the XID", _misfit_in_the_second_transaction(), {}),
               ("MariaDB, a transaction repeated", _mariadb_transaction_repeated(12), {}),
               ("a table id reused", _table_id_reused_for_another_table(), {})]
    fewer = 0
    with native_extension(True):
        for name, data, kwargs in inputs:
            from_bytes: list[int] = []
            with_sink, python_events = _batches_and_python_events(data, monkeypatch, sink=True, from_bytes=from_bytes,
                                                                  **kwargs)
            without, all_events = _batches_and_python_events(data, monkeypatch, sink=False, **kwargs)
            assert with_sink == without, name
            fewer += python_events < all_events
            if name == "written":
                # the sink takes 40 x (GTID, BEGIN, XID) and the TABLE_MAPs and rows events
                # but FORMAT_DESCRIPTION, PREVIOUS_GTIDS, ROTATE and, of each table, the first
                # TABLE_MAP and the first two rows events: the first TABLE_MAP is decoded in
                # Python, so the rows event after it has its values decoded, and the next tells
                # the sink what its repeats share. A transaction the Python loop handles an event
                # of is its own from then on: so it handles their XIDs too.
                assert (python_events, all_events) == (3 + 2 * (3 + 2), 3 * 40 + 3 + 2 * (40 + 13))
                assert sum(len(rows) for kind, rows in with_sink if kind == "transactions") == 40
                # of those, taken from their bytes (never built): each table's TABLE_MAPs but the
                # first and its rows events but the first two (40 and 13 of each), every GTID, the
                # BEGINs but the first (the sink has not seen its bytes yet), and the XIDs of the
                # 36 transactions the Python loop handled no event of
                assert from_bytes == [(40 - 1) + (13 - 1) + (40 - 2) + (13 - 2) + 40 + (40 - 1) + 36]
            if name == "MariaDB, a transaction repeated":
                # of the 60 repeated events the Python loop handles 2: the first repeat's rows
                # event (which tells the sink what the next share) and so its XID
                _, alone = _batches_and_python_events((MARIA / "binlog.000002").read_bytes(), monkeypatch, sink=True)
                assert (all_events, python_events) == (23 + 5 * 12, alone + 2)
                (facts,) = [f for k, f in with_sink if k == "file_facts"]
                assert facts["flavor"] == "mariadb" and facts["transactions"] == 3 + 12
                repeats = [t for k, rows in with_sink if k == "transactions" for t in rows][3:]
                assert len(repeats) == 12 and len({t["start_pos"] for t in repeats}) == 12
                for t in repeats:  # each the sink's own from its GTID to its XID
                    assert t["gtid"] == f'{t["mariadb_domain_id"]}-{t["mariadb_server_id"]}-{t["mariadb_seq_no"]}'
                    assert (t["gtid_kind"], t["end_event"], t["kind"], t["complete"]) == ("MARIADB", "XID", "DML", True)
                    assert [s[:6] for s in t["statements"]] == ["INSERT"] and t["row_changes"] == 2
            if name == "a table id reused":
                # at each switch of table 7's TABLE_MAP bytes, the TABLE_MAP after it is the Python
                # loop's, and so are the rows events until one has its images kept as bytes (the
                # first two; the first one when the parser's TABLE_MAP cache decoded the switch
                # back) with their transactions' XIDs: 2 + 5 + 5 + 3 events. From their bytes the
                # sink takes the other TABLE_MAPs (9 of each 10) and rows events (8, 8 and 9),
                # the 30 GTIDs, the BEGINs but the first and the 25 other XIDs; none of the other
                # table's bytes is taken as the first's
                tables = [r["table_name"] for k, rows in with_sink if k == "row_changes" for r in rows]
                assert tables == ["orders"] * 10 + ["orders2"] * 10 + ["orders"] * 10
                assert python_events == 2 + 5 + 5 + 3
                assert from_bytes == [(9 + 8) + (9 + 8) + (9 + 9) + 30 + 29 + 25]
            if name == "a misfit at the XID":
                # the sink appended the fourth transactions row, met the misfit, took the row back
                # and left the XID to the Python loop (the ninth event it handles, after the file's
                # three and the first two transactions' five): one NULL, one quarantine row, as
                # without the sink
                assert python_events == 9
                ((_, quarantine),) = [(k, rows) for k, rows in with_sink if k == "quarantine"]
                assert [q["scope"] for q in quarantine] == ["value"]
                assert [t["last_committed"] for k, rows in with_sink if k == "transactions" for t in rows] == \
                    [0, 1, 2, None, 4]
    assert fewer >= 20  # (25 of the 97 inputs when written)
