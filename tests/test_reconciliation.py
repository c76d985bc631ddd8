"""Pure GTID coverage / reconciliation logic (binlake.reconcile.coverage), no Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from binlake.reconcile.coverage import (
    MARIADB,
    FileFacts,
    GtidIntervals,
    GtidIntervalsBuilder,
    GtidTextError,
    chain_order,
    coverage,
    parse_mariadb_gtid,
    reconcile,
    split_series,
)

A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
B = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"


def G(text: str) -> GtidIntervals:
    return GtidIntervals.from_text(text)


# ---- GTID set text and algebra ----------------------------------------------------------


def test_text_roundtrip_is_canonical():
    g = G(f"{B.upper()}:3-4, {A}:5-9:1-4:11,{A}:zed:2:alpha:1-3")
    assert str(g) == f"{A}:1-9:11:alpha:1-3:zed:2,{B}:3-4"
    assert str(G(str(g))) == str(g)
    assert str(G("")) == "" and G("").is_empty()
    assert G(f"{A}:1-3").count() == 3


@pytest.mark.parametrize("bad", [f"{A}:0", f"{A}:5-3", f"{A}:1-x", ":1-3"])
def test_bad_text_raises(bad):
    with pytest.raises(GtidTextError):
        G(bad)


def test_set_algebra():
    x = G(f"{A}:1-10:20-30,{B}:1-5")
    y = G(f"{A}:5-25,{B}:6")
    assert str(x | y) == f"{A}:1-30,{B}:1-6"
    assert str(x - y) == f"{A}:1-4:26-30,{B}:1-5"
    assert str(x & y) == f"{A}:5-10:20-25"
    assert G(f"{A}:2-3").issubset(x) and not y.issubset(x)
    assert str(x.holes()) == f"{A}:11-19"


def test_builder_merges_and_finds_duplicates():
    b = GtidIntervalsBuilder()
    for gno in [1, 2, 3, 7, 8, 5, 2, 9]:
        b.add(A.upper(), gno)
    b.add(A, 1, tag="t1")
    assert str(b.build()) == f"{A}:1-3:5:7-9:t1:1"
    assert str(b.build_duplicates()) == f"{A}:2"


@pytest.mark.parametrize("runs", [
    [(A, 1, 5), (A, 6, 9)],                        # one run extending the last interval
    [(A, 1, 5), (A.upper(), 6, 6), (B, 1, 3), (A, 7, 8)],
    [(A, 3, 5), (A, 1, 2), (A, 9, 9), (A, 6, 8)],   # out of order, then filling the hole
    [(A, 1, 5), (A, 4, 7), (A, 2, 2)],              # overlaps: duplicates
    [(A, 1, 3), (A, 3, 3), (A, 10, 9)],             # a repeat; an empty run
    [("0", 1, 4), ("1", 1, 1), ("0", 5, 5)],        # MariaDB domains
])
def test_builder_add_run_is_adding_each_gtid_in_turn(runs):
    one_by_one, by_run = GtidIntervalsBuilder(), GtidIntervalsBuilder()
    for sid, first, last in runs:
        for gno in range(first, last + 1):
            one_by_one.add(sid, gno)
        by_run.add_run(sid, first, last)
    assert str(by_run.build()) == str(one_by_one.build())
    assert str(by_run.build_duplicates()) == str(one_by_one.build_duplicates())
    assert by_run.n == one_by_one.n


def test_mariadb_list_as_set():
    g = GtidIntervals.from_mariadb_list("0-7-10,1-8-5")
    assert str(g) == "0:1-10,1:1-5"
    assert str(GtidIntervals.from_mariadb_list([(10, 1, 3), (2, 1, 4)])) == "2:1-4,10:1-3"
    assert GtidIntervals.from_mariadb_list("").is_empty()


def test_split_series():
    assert split_series("binlog.000012") == ("binlog.", 12)
    assert split_series("x/mysql-bin.000002.bak") == ("mysql-bin.", 2)
    assert split_series("nodigits") == ("nodigits", None)


# ---- scenarios --------------------------------------------------------------------------


def f(name, prev, contained, nxt="auto", closing="ROTATE", source="s1", **kw):
    base, seq = split_series(name)
    if nxt == "auto":
        nxt = f"{base}{seq + 1:06d}" if closing == "ROTATE" else None
    return FileFacts(source=source, file=name, seq=seq, previous_gtids=prev, contained_gtids=contained,
                     closing_event=closing, next_file=nxt, fingerprint=kw.pop("fp", name + source), **kw)


def chain():
    return [
        f("binlog.000001", "", f"{A}:1-5"),
        f("binlog.000002", f"{A}:1-5", f"{A}:6-8"),
        f("binlog.000003", f"{A}:1-8", f"{A}:9-12"),
        f("binlog.000004", f"{A}:1-12", f"{A}:13-14", closing=None),
    ]


def statuses(rows):
    return [(r.file, r.status, r.missing_gtids, r.extra_gtids) for r in rows]


def test_clean_chain_ok():
    rows = reconcile(chain())
    assert [r.status for r in rows] == ["OK"] * 4
    assert [r.chain_index for r in rows] == [0, 1, 2, 3]
    assert rows[2].expected_gtids == f"{A}:1-8" and rows[2].previous_file == "binlog.000002"


def test_missing_file_is_gap_with_missing_set():
    files = [x for x in chain() if x.file != "binlog.000002"]
    rows = reconcile(files)
    assert statuses(rows) == [
        ("binlog.000001", "OK", "", ""),
        ("binlog.000003", "GAP", f"{A}:6-8", ""),
        ("binlog.000004", "OK", "", ""),
    ]
    assert rows[1].missing_files == ["binlog.000002"]
    assert rows[1].expected_file == "binlog.000002"


def test_gno_gap_between_and_inside_files():
    files = chain()
    files[1].contained_gtids = f"{A}:6-7"           # GNO 8 never archived
    files[2].contained_gtids = f"{A}:9:11-12"        # GNO 10 missing inside the file
    files[3].previous_gtids = f"{A}:1-12"
    rows = reconcile(files)
    assert statuses(rows) == [
        ("binlog.000001", "OK", "", ""),
        ("binlog.000002", "OK", "", ""),
        # previous says 1-8 but the archive has 1-7; and GNO 10 is a hole inside the file
        ("binlog.000003", "GAP", f"{A}:8:10", ""),
        ("binlog.000004", "OK", "", ""),  # each missing GTID is reported once
    ]


def test_gno_hole_inside_one_file_reported_once():
    files = chain()
    files[1].contained_gtids = f"{A}:6:8"
    rows = reconcile(files)
    assert statuses(rows)[1] == ("binlog.000002", "GAP", f"{A}:7", "")
    assert [r.status for r in rows[2:]] == ["OK", "OK"]


def test_duplicate_upload_same_bytes():
    files = chain()
    dup = f("binlog.000002.copy", f"{A}:1-5", f"{A}:6-8", nxt="binlog.000003", fp="binlog.000002s1")
    rows = reconcile(files + [dup])
    assert [r.status for r in rows[:4]] == ["OK"] * 4
    assert rows[4].file == "binlog.000002.copy" and rows[4].status == "DUPLICATE"
    assert rows[4].duplicate_of == "binlog.000002" and rows[4].extra_gtids == f"{A}:6-8"
    # the canonical copy is the one the ROTATE names, whatever the sort order says
    order, dups = chain_order([dup] + files)
    assert [x.file for x in order] == [x.file for x in files] and list(dups) == ["binlog.000002.copy"]


def test_partial_duplicate_and_overlap():
    files = chain()
    # a truncated older copy of file 2 uploaded under another name
    part = f("binlog.000002.part", f"{A}:1-5", f"{A}:6-7", closing=None, truncated=True)
    rows = reconcile(files + [part])
    assert statuses(rows)[:4] == [(x.file, "OK", "", "") for x in files]
    assert rows[4].file == "binlog.000002.part" and rows[4].status == "DUPLICATE"
    # GTIDs logged twice in the chain
    files = chain()
    files[2].contained_gtids = f"{A}:8-12"
    rows = reconcile(files)
    assert statuses(rows)[2] == ("binlog.000003", "DUPLICATE", "", f"{A}:8")
    # PREVIOUS_GTIDS forgets part of the predecessor: overlap
    files = chain()
    files[2].previous_gtids = f"{A}:1-7"
    rows = reconcile(files)
    assert statuses(rows)[2] == ("binlog.000003", "OVERLAP", "", f"{A}:8")


def test_truncated_tail_shows_gap_on_successor():
    files = chain()
    files[1].contained_gtids = f"{A}:6-7"
    files[1].closing_event, files[1].next_file, files[1].truncated = None, None, True
    rows = reconcile(files)
    assert statuses(rows) == [
        ("binlog.000001", "OK", "", ""),
        ("binlog.000002", "OK", "", ""),
        ("binlog.000003", "GAP", f"{A}:8", ""),
        ("binlog.000004", "OK", "", ""),
    ]
    assert rows[1].truncated and "truncated" in rows[1].detail
    assert rows[2].missing_files == []


def test_chain_breaks():
    files = chain()
    files[2].previous_gtids = ""                      # RESET BINARY LOGS AND GTIDS
    files[2].contained_gtids = f"{A}:1-4"
    files[3].previous_gtids = f"{A}:1-4"
    files[3].contained_gtids = f"{A}:5"
    rows = reconcile(files)
    assert [r.status for r in rows] == ["OK", "OK", "CHAIN_BREAK", "OK"]
    files = chain()
    files[2].previous_gtids = f"{B}:1-3"             # another server's history
    files[2].contained_gtids = f"{B}:4"
    files[3].previous_gtids = f"{B}:1-4"
    files[3].contained_gtids = ""
    rows = reconcile(files)
    assert statuses(rows)[2] == ("binlog.000003", "CHAIN_BREAK", f"{B}:1-3", f"{A}:1-8")
    assert rows[3].status == "OK"


def test_two_sources_reconcile_independently_and_stop_series():
    s2 = [
        f("mysql-bin.000007", f"{B}:1-100", f"{B}:101-102", closing="STOP", source="s2"),
        f("mysql-bin.000008", f"{B}:1-102", "", source="s2"),         # after restart
        f("mysql-bin.000010", f"{B}:1-102", f"{B}:103", closing=None, source="s2"),
    ]
    rows = reconcile(chain() + s2)
    assert [(r.source, r.status) for r in rows] == [("s1", "OK")] * 4 + [
        ("s2", "OK"), ("s2", "OK"), ("s2", "GAP")]
    assert rows[-1].missing_files == ["mysql-bin.000009"] and rows[-1].missing_gtids == ""
    assert rows[4].detail.startswith("archive starting point")


def test_mariadb_chain():
    def m(name, gl, contained, **kw):
        x = f(name, str(GtidIntervals.from_mariadb_list(gl)), contained, **kw)
        x.flavor = MARIADB
        return x
    files = [
        m("binlog.000001", "", "0:1-3"),
        m("binlog.000002", "0-7-3", "0:4-8"),
        m("binlog.000003", "0-7-8", "0:9-10"),
        m("binlog.000004", "0-7-10", "", closing=None),
    ]
    assert [r.status for r in reconcile(files)] == ["OK"] * 4
    rows = reconcile([files[0], files[2], files[3]])
    assert statuses(rows)[1] == ("binlog.000003", "GAP", "0:4-8", "")


def test_coverage_intervals_and_files():
    files = chain()
    files[2].contained_gtids = f"{A}:9-10:12,{A}:t:1-2"
    rows = coverage(files + [f("x.000001", "", f"{B}:1", source="s2")])
    got = [(r.source, r.sid, r.tag, r.gno_start, r.gno_end, r.first_file, r.last_file, r.files) for r in rows]
    assert got == [
        ("s1", A, "", 1, 10, "binlog.000001", "binlog.000003", 3),
        ("s1", A, "", 12, 14, "binlog.000003", "binlog.000004", 2),
        ("s1", A, "t", 1, 2, "binlog.000003", "binlog.000003", 1),
        ("s2", B, "", 1, 1, "x.000001", "x.000001", 1),
    ]
    assert rows[2].gtid_set == f"{A}:t:1-2"


def test_from_row_defaults():
    x = FileFacts.from_row({"source": "s", "file": "b.000001", "contained_gtids": None,
                            "truncated": None, "extra_column": 1})
    assert x.contained_gtids == "" and x.truncated is False and x.flavor == "mysql"


# ---- generated archives: writer -> records -> reconciliation (no Spark) ------------------

def _gen_file(name: str, prev: str, gnos: list[int], *, uuid: str = A, last: bool = False,
              tag: str | None = None) -> bytes:
    from binlake.reconcile.coverage import split_series
    from binlog_parser.writer import BinlogFileWriter, Column, Table, write_binlog_bytes

    t = Table("app", "t", (Column("id", "BIGINT", nullable=False, primary_key=True), Column("v", "VARCHAR(8)")),
              table_id=7)

    def build(w: BinlogFileWriter) -> None:
        for g in gnos:
            gtid = f"{uuid}:{tag}:{g}" if tag else f"{uuid}:{g}"
            w.begin_transaction(gtid, last_committed=g - 1, sequence_number=g, timestamp=1767225600 + g)
            w.write_rows(t, [{"id": g, "v": "x"}])
            w.xid()
        if not last:
            base, seq = split_series(name)
            w.rotate(f"{base}{seq + 1:06d}")

    return write_binlog_bytes(build, server_version="8.0.40", previous_gtids=prev)


def _facts(source: str, files: dict[str, bytes]) -> list[FileFacts]:
    from binlake.ingest.records import decode_file, merge_file_facts

    out = []
    for name, data in files.items():
        parts = [r for k, r in decode_file(data, source=source, file=name) if k == "file_facts"]
        out.append(FileFacts.from_row(merge_file_facts(parts, size=len(data))))
    return out


def test_generated_archives_give_exact_statuses():
    pytest.importorskip("binlog_parser.writer")
    f1 = _gen_file("binlog.000001", "", [1, 2, 3])
    f2 = _gen_file("binlog.000002", f"{A}:1-3", [4, 5, 6])
    f3 = _gen_file("binlog.000003", f"{A}:1-6", [7, 8, 9])
    f4 = _gen_file("binlog.000004", f"{A}:1-9", [10], last=True)
    hole = _gen_file("binlog.000002", f"{A}:1-3", [4, 6])          # GNO 5 never logged
    other = _gen_file("binlog.000001", f"{B}:1-40", [41, 42], uuid=B, last=True)  # a second server
    scenarios = {
        "clean": {"binlog.000001": f1, "binlog.000002": f2, "binlog.000003": f3, "binlog.000004": f4},
        "missing": {"binlog.000001": f1, "binlog.000003": f3, "binlog.000004": f4},
        "gno_gap": {"binlog.000001": f1, "binlog.000002": hole, "binlog.000003": f3, "binlog.000004": f4},
        "dup": {"binlog.000001": f1, "binlog.000002": f2, "copy-of-binlog.000002": f2, "binlog.000003": f3,
                "binlog.000004": f4},
        "trunc": {"binlog.000001": f1, "binlog.000002": f2[:-60], "binlog.000003": f3, "binlog.000004": f4},
        "server_b": {"binlog.000001": other},
    }
    facts = [x for src, files in scenarios.items() for x in _facts(src, files)]
    rows = reconcile(facts)
    got = {}
    for r in rows:
        got.setdefault(r.source, []).append((r.file, r.status, r.missing_gtids, r.extra_gtids))
    assert got["clean"] == [(f"binlog.00000{i}", "OK", "", "") for i in range(1, 5)]
    assert got["missing"] == [("binlog.000001", "OK", "", ""), ("binlog.000003", "GAP", f"{A}:4-6", ""),
                              ("binlog.000004", "OK", "", "")]
    assert got["gno_gap"] == [("binlog.000001", "OK", "", ""), ("binlog.000002", "GAP", f"{A}:5", ""),
                              ("binlog.000003", "OK", "", ""), ("binlog.000004", "OK", "", "")]
    assert got["dup"] == [(f"binlog.00000{i}", "OK", "", "") for i in range(1, 5)] + [
        ("copy-of-binlog.000002", "DUPLICATE", "", f"{A}:4-6")]
    assert got["trunc"] == [("binlog.000001", "OK", "", ""), ("binlog.000002", "OK", "", ""),
                            ("binlog.000003", "GAP", f"{A}:6", ""), ("binlog.000004", "OK", "", "")]
    assert got["server_b"] == [("binlog.000001", "OK", "", "")]
    cov = {(c.source, c.sid, c.gno_start, c.gno_end) for c in coverage(facts)}
    assert ("gno_gap", A, 1, 4) in cov and ("gno_gap", A, 6, 10) in cov
    assert ("server_b", B, 41, 42) in cov


def test_text_matches_core_gtidset():
    from binlog_parser.gtid import GtidSet

    for text in [f"{B}:3-4,{A}:5-9:1-4:11", f"{A}:zed:2:alpha:1-3,{A}:7", ""]:
        assert str(G(text)) == str(GtidSet.from_text(text))


# ---- an archive that starts mid-history (issue 16, item 1) -------------------------------


def _m(name, gl, contained, **kw):
    x = f(name, str(GtidIntervals.from_mariadb_list(gl)), contained, **kw)
    x.flavor = MARIADB
    return x


def test_mariadb_domain_starting_at_high_seq_reports_only_the_lost_range():
    # The chain: empty first GTID_LISTs, domain 0 starts at 250080, 000003 lost.
    files = [
        _m("binlog.000001", "", "0:250080-250100"),
        _m("binlog.000002", "0-10-250100", "0:250101-254512"),
        _m("binlog.000004", "0-10-262175", "0:262176-262180", closing=None),
    ]
    rows = reconcile(files)
    assert statuses(rows) == [
        ("binlog.000001", "OK", "", ""),
        ("binlog.000002", "OK", "", ""),
        ("binlog.000004", "GAP", "0:254513-262175", ""),
    ]
    assert rows[2].missing_files == ["binlog.000003"]
    assert "0:1-" not in rows[2].detail and "0:254513-262175" in rows[2].detail
    # the same chain with every file archived is clean
    whole = files[:2] + [_m("binlog.000003", "0-10-254512", "0:254513-262175"), files[2]]
    assert [r.status for r in reconcile(whole)] == ["OK"] * 4


def test_mariadb_new_domain_mid_chain_starts_at_its_first_gtid():
    files = [
        _m("binlog.000001", "0-1-40", "0:41-42"),
        _m("binlog.000002", "0-1-42", "0:43,9:700-701"),          # domain 9 appears at 700
        _m("binlog.000003", "0-1-43,9-1-701", "9:702", closing=None),
    ]
    assert statuses(reconcile(files)) == [(x.file, "OK", "", "") for x in files]
    # a domain whose first GTIDs sat in the lost file: the list names it, the loss is reported
    lost = [files[0], _m("binlog.000003", "0-1-43,9-1-701", "9:702", closing=None)]
    assert statuses(reconcile(lost))[1] == ("binlog.000003", "GAP", "0:43,9:1-701", "")


def test_mysql_archive_starting_mid_history_reports_only_the_lost_range():
    # MySQL equivalent, files written by the project's writer: an empty first
    # PREVIOUS_GTIDS, GNOs from 250080, the middle file not archived.
    pytest.importorskip("binlog_parser.writer")
    f1 = _gen_file("binlog.000001", "", list(range(250080, 250084)))
    f3 = _gen_file("binlog.000003", f"{A}:250080-250087", list(range(250088, 250090)))
    f4 = _gen_file("binlog.000004", f"{A}:250080-250089", [250090], last=True)
    rows = reconcile(_facts("s", {"binlog.000001": f1, "binlog.000003": f3, "binlog.000004": f4}))
    assert statuses(rows) == [
        ("binlog.000001", "OK", "", ""),
        ("binlog.000003", "GAP", f"{A}:250084-250087", ""),
        ("binlog.000004", "OK", "", ""),
    ]
    assert rows[1].missing_files == ["binlog.000002"]


@pytest.fixture(scope="module")
def mariadb_high_seq_chain(tmp_path_factory):
    """A real MariaDB writes 4 binlogs: domain 0 from seq 250080, domain 5 from 900 (file 2).

    Yields the files and the server's ``@@gtid_binlog_pos`` at the end of files 2 and 3.
    """
    from test_mariadb_server import MariaDB, _ensure_installed

    reason = _ensure_installed()
    if reason:
        pytest.skip(f"!!! REAL-SERVER TEST SKIPPED: {reason} !!!")
    db = MariaDB(tmp_path_factory.mktemp("mariadb-gtid"))
    try:
        db.start()

        def pos() -> str:
            return db.query("SELECT @@gtid_binlog_pos", batch=True).stdout.decode().split()[-1]

        db.query("SET gtid_seq_no=250080; CREATE DATABASE d; CREATE TABLE d.t (id INT PRIMARY KEY);"
                 "INSERT INTO d.t VALUES (1); INSERT INTO d.t VALUES (2); FLUSH BINARY LOGS;")
        db.query("SET gtid_domain_id=5; SET gtid_seq_no=900; INSERT INTO d.t VALUES (3);"
                 "INSERT INTO d.t VALUES (4); SET gtid_domain_id=0; INSERT INTO d.t VALUES (5);")
        end2 = pos()
        db.query("FLUSH BINARY LOGS; INSERT INTO d.t VALUES (6); INSERT INTO d.t VALUES (7);"
                 "SET gtid_domain_id=5; INSERT INTO d.t VALUES (8);")
        end3 = pos()
        db.query("FLUSH BINARY LOGS; INSERT INTO d.t VALUES (9);")
        index = (db.datadir / "binlog.index").read_text().split()
        db.stop()
        yield {Path(n).name: (db.datadir / Path(n).name).read_bytes() for n in index}, end2, end3
    finally:
        db.stop()


def _lost_between(before: str, after: str) -> str:
    """The GTIDs logged between two ``@@gtid_binlog_pos`` values, as reconciliation text."""
    b = {d: s for d, _srv, s in map(parse_mariadb_gtid, before.split(","))}
    ivs = {}
    for d, _srv, s in map(parse_mariadb_gtid, after.split(",")):
        if s > b.get(d, 0):
            ivs[(str(d), "")] = [(b.get(d, 0) + 1, s)]
    return str(GtidIntervals(ivs, MARIADB))


def test_real_mariadb_chain_with_high_seq_and_lost_middle_file(mariadb_high_seq_chain):
    files, end2, end3 = mariadb_high_seq_chain
    names = sorted(files)
    assert len(names) == 4, names
    facts = _facts("mdb", files)
    first = next(x for x in facts if x.file == names[0])
    assert first.flavor == MARIADB and first.previous_gtids == ""
    assert first.contained_gtids.startswith("0:250080-")
    assert [r.status for r in reconcile(facts)] == ["OK"] * 4
    lost = _lost_between(end2, end3)
    assert lost == "0:250085-250086,5:902"  # what the server logged into file 3
    rows = reconcile([x for x in facts if x.file != names[2]])
    assert statuses(rows) == [
        (names[0], "OK", "", ""),
        (names[1], "OK", "", ""),
        (names[3], "GAP", lost, ""),
    ]
    assert rows[2].missing_files == [names[2]]
