"""The text view (binlog_parser.render.event_to_text, RowsEvent.text_lines) against real
``mariadb-binlog -vv`` output on fixture binlogs: the same rows events, row images and columns,
``@N`` where the binlog names no column, the same ``/* TYPE meta=M nullable=N is_null=N */``
comment per value and the same ``# Number of rows``; TRANSACTION_PAYLOAD's header as fields.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import mariadb_binlog_text as mb
import pytest
from _binlog_util import BINLOGS, FIXTURES

from binlog_parser import read_events
from binlog_parser.render import event_to_text
from binlog_parser.rows import RowsEvent

FILES = [
    FIXTURES / "mariadb-10.11-types" / "alltypes-rows.bin",
    FIXTURES / "mariadb-10.11-types" / "alltypes-updates.bin",
    FIXTURES / "mariadb-10.11-types" / "compressed-rows.bin",
    FIXTURES / "mariadb-10.11" / "binlog.000002",
    FIXTURES / "mariadb-10.11" / "binlog.000003",
    BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__mariadb-bin.000001",
    BINLOGS / "osheroff__mysql-binlog-connector-java" / "src__test__resources__mysql-bin.checksum-crc32",
    BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__mysql-enum-string-set.000001",
    BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__mysql_type_bit.000001",
    BINLOGS / "zalora__binlog-parser" / "data__fixtures__mysql-bin.01",
    BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__update-partial-row.binlog",
]
_OUR_VALUE = re.compile(r"^###   (@\d+|.+?)=(.*) /\* (.*?) meta=(\d+) nullable=(\d) is_null=(\d) \*/$")
_ROWS_HEADER = re.compile(r"\t(\w+): table id (\d+)( flags: STMT_END_F)?$")


@dataclass
class Cell:
    index: int     # 1-based column number
    label: str     # "@N" or the column's name
    text: str
    typestr: str
    meta: int
    nullable: bool
    is_null: bool


def _our_rows(path: Path) -> tuple[dict[int, list[tuple[str, list[Cell] | None, list[Cell] | None]]], dict[int, int]]:
    """pos -> row images [(op, before, after)], and pos -> '# Number of rows' of each rows event."""
    images: dict[int, list] = {}
    counts: dict[int, int] = {}
    for ev in read_events(str(path)):
        if not isinstance(ev, RowsEvent) or ev.header.payload_pos is not None:
            continue
        text = event_to_text(ev).split("\n")
        assert _ROWS_HEADER.search(text[1]), text[1]
        by_label = {c.name if c.name_from != "fallback" else f"@{c.index + 1}": c for c in ev.table.columns}
        rows: list = []
        target: list[Cell] | None = None
        for line in text[2:]:
            if line.startswith("### ") and line[4:].split(" ")[0] in ("INSERT", "UPDATE", "DELETE"):
                rows.append([{"INSERT": "insert", "UPDATE": "update", "DELETE": "delete"}[line[4:].split(" ")[0]],
                             None, None])
            elif line == "### WHERE":
                rows[-1][1] = target = []
            elif line == "### SET":
                rows[-1][2] = target = []
            elif line.startswith("###   "):
                m = _OUR_VALUE.match(line)
                assert m, line
                col = by_label[m.group(1)]
                assert target is not None
                target.append(Cell(col.index + 1, m.group(1), m.group(2), m.group(3), int(m.group(4)),
                                   m.group(5) == "1", m.group(6) == "1"))
            else:
                m = re.match(r"^# Number of rows: (\d+)$", line)
                assert m, line
                counts[ev.header.pos] = int(m.group(1))
        images[ev.header.pos] = [tuple(r) for r in rows]
    return images, counts


def _same_cells(ours: list[Cell] | None, theirs: list[mb.Value] | None, where: str) -> int:
    assert (ours is None) == (theirs is None), where
    if ours is None or theirs is None:
        return 0
    assert [c.index for c in ours] == [v.index for v in theirs], where
    for c, v in zip(ours, theirs):
        at = f"{where} @{v.index}"
        assert (c.typestr, c.meta, c.nullable, c.is_null) == (v.typestr, v.meta, v.nullable, v.is_null), at
        if c.label.startswith("@"):
            assert c.label == f"@{v.index}", at
        numeric = "INT" in c.typestr or c.typestr.startswith("DECIMAL")
        if numeric and not c.is_null and b"(" not in v.text:  # mb adds "(unsigned)" to some
            assert c.text.encode() == v.text, at  # numbers are printed alike
    return len(ours)


@pytest.mark.skipif(mb.MARIADB_BINLOG is None, reason="mariadb-binlog is not installed")
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[-40:])
def test_rows_text_matches_mariadb_binlog_vv(path: Path) -> None:
    out = mb.run(path)
    images, counts = _our_rows(path)
    compared_rows = compared_cells = 0
    for group in out.groups:
        positions = [e.pos for e in group.events]
        ours = [img for p in positions for img in images[p]]
        assert len(ours) == len(group.rows), positions
        assert sum(counts[p] for p in positions) == group.count, positions
        for (op, before, after), theirs in zip(ours, group.rows):
            where = f"{path.name} rows at {positions}"
            assert op == theirs.op, where
            compared_cells += _same_cells(before, theirs.before, where) + _same_cells(after, theirs.after, where)
            compared_rows += 1
    assert set(images) == {p for g in out.groups for p in (e.pos for e in g.events)}
    assert compared_rows > 0 and compared_cells > 0
    print(f"\n{path.name}: {compared_rows} row images, {compared_cells} values compared with mariadb-binlog -vv")


def test_columns_without_names_are_at_n() -> None:
    path = BINLOGS / "osheroff__mysql-binlog-connector-java" / "src__test__resources__mysql-bin.checksum-crc32"
    ev = next(e for e in read_events(str(path)) if isinstance(e, RowsEvent))
    lines = ev.text_lines()
    assert lines[2].startswith("###   @1=") and "col_" not in "\n".join(lines)
    assert lines[-1] == f"# Number of rows: {len(ev.rows)}"


def test_transaction_payload_header_is_fields() -> None:
    path = BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__transaction_compression.000001"
    ev = next(e for e in read_events(str(path)) if e.header.type_code == 40)
    line = event_to_text(ev).split("\n")[1]
    assert line.endswith("\tTransaction_Payload\tpayload_size=124\tcompression_type=ZSTD\tuncompressed_size=179")
    assert "{" not in line


HEADER_FILES = FILES + sorted((FIXTURES / "mariadb-10.11").glob("binlog.0*")) + [
    BINLOGS / "blackbeam__rust_mysql_common" / "test-data__binlogs__ver_5_1_23.001",
    BINLOGS / "webscalesql__webscalesql-5.6" / "mysql-test__suite__binlog__std_data__ver_5_1_17.001",
]
_OUR_HEADER = re.compile(r"^#(\d{6} [ \d]\d:\d\d:\d\d) server id (\d+)  end_log_pos (\d+) (?:CRC32 \w+ )?\t(.*)$")
#: mysqlbinlog's header labels binlake prints alike (others differ by design: Query's xid,
#: MySQL-only events MariaDB calls "Ignorable", the _v1 suffix of old rows events)
SAME_LABEL_KINDS = {"Start", "Rotate", "Xid", "Table_map", "GTID", "Gtid_list", "Binlog_checkpoint",
                    "Annotate_rows", "Stop", "Intvar", "Rand"}


@pytest.mark.skipif(mb.MARIADB_BINLOG is None, reason="mariadb-binlog is not installed")
@pytest.mark.parametrize("path", HEADER_FILES, ids=lambda p: p.name[-40:])
def test_event_headers_match_mariadb_binlog(path: Path) -> None:
    theirs = mb.run(path).by_pos()
    compared = 0
    for ev in read_events(str(path)):
        if ev.header.payload_pos is not None or ev.header.pos not in theirs:
            continue
        m = _OUR_HEADER.match(event_to_text(ev).split("\n")[1])
        assert m, event_to_text(ev)
        t = theirs[ev.header.pos]
        where = f"{path.name} at {ev.header.pos}"
        assert (m.group(1), int(m.group(2)), int(m.group(3))) == (t.time_text, t.server_id, t.end_log_pos), where
        label = t.label.decode("latin-1")
        if t.kind in SAME_LABEL_KINDS:
            assert m.group(4) == label, where
            compared += 1
        elif isinstance(ev, RowsEvent) and ev.header.type_code not in (20, 21, 22):
            # (MariaDB prints no flags for the pre-GA rows events 20-22)
            assert m.group(4).split(":", 1)[1] == label.split(":", 1)[1], where
            compared += 1
    assert compared > 0
    print(f"\n{path.name}: {compared} event headers equal to mariadb-binlog's")
