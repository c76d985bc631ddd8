"""Test helper (not a test module): replay decoded row changes into in-memory tables and
compare them with what a server's ``SELECT`` printed (``mariadb --batch`` TSV).

Used by ``test_mariadb_replay.py`` (the checked-in MariaDB 10.11 chain) and
``test_mariadb_server.py`` (a live server started by the test).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from binlog_parser.events import QueryEvent
from binlog_parser.reader import read_events
from binlog_parser.rows import RowsEvent, TableMapEvent, render_value_bytes
from binlog_parser.rows.column_types import ColumnType
from binlog_parser.rows.numbers import format_float_select

_ADD_COLUMN = re.compile(
    r"^\s*ALTER\s+TABLE\s+`?(?P<table>\w+)`?\s+ADD\s+(?:COLUMN\s+)?`?(?P<col>\w+)`?\s+[^,]*?"
    r"(?:DEFAULT\s+(?P<default>'(?:[^']|'')*'|NULL|-?[\d.]+))?(?:\s+(?:AFTER\s+`?\w+`?|FIRST))?\s*$",
    re.IGNORECASE | re.DOTALL)


class Replayer:
    """Tables as {(schema, table): {pk tuple: {column: typed value}}}, plus column metadata."""

    def __init__(self) -> None:
        self.tables: dict[tuple[str, str], dict[tuple, dict[str, Any]]] = {}
        self.columns: dict[tuple[str, str], dict[str, Any]] = {}
        self.defaults: dict[tuple[str, str], dict[str, Any]] = {}
        self.events = 0

    def feed_file(self, path: str | Path) -> None:
        for ev in read_events(str(path)):
            self.feed(ev)

    def feed(self, ev: Any) -> None:
        if isinstance(ev, QueryEvent):
            m = _ADD_COLUMN.match(ev.query)
            if m and m.group("default") is not None:
                d = m.group("default")
                value = None if d.upper() == "NULL" else (d[1:-1].replace("''", "'") if d.startswith("'") else d)
                key = (ev.schema, m.group("table"))
                self.defaults.setdefault(key, {})[m.group("col")] = value
                for row in self.tables.get(key, {}).values():
                    row.setdefault(m.group("col"), value)
            return
        if not isinstance(ev, RowsEvent):
            return
        self.events += 1
        tm: TableMapEvent = ev.table
        key = (tm.schema, tm.table)
        self.columns[key] = {c.name: c for c in tm.columns}
        pk = [c.name for c in tm.columns if c.primary_key]
        assert pk, f"{key}: replay needs a primary key in the TABLE_MAP (binlog_row_metadata=FULL)"
        table = self.tables.setdefault(key, {})
        for change in ev.rows:
            if change.before is not None:
                before_key = tuple(change.before[n] for n in pk)
                old = table.pop(before_key, None)
                assert old is not None, f"{key}: {ev.kind} of a row that is not there: {before_key}"
            else:
                old = None
            if change.after is not None:
                row = dict(old or {})
                row.update(change.after)
                table[tuple(row[n] for n in pk)] = row

    def rows_bytes(self, schema: str, table: str, column_order: Iterable[str]) -> list[list[bytes | None]]:
        """Rows (sorted by primary key) as the bytes a text-protocol SELECT would send."""
        key = (schema, table)
        cols = self.columns[key]
        out = []
        for pk in sorted(self.tables.get(key, {})):
            row = self.tables[key][pk]
            line = []
            for name in column_order:
                v = row.get(name)
                col = cols.get(name)
                if isinstance(v, str) and col is None:  # a DDL default never seen in a row
                    line.append(v.encode())
                elif isinstance(v, float) and col is not None and col.type == ColumnType.FLOAT:
                    line.append(_float_select_bytes(v, col))
                else:
                    line.append(render_value_bytes(v, col))
            out.append(line)
        return out


def _float_select_bytes(value: float, col: Any) -> bytes:
    """A FLOAT as SELECT prints it (6 digits), after checking binlake's own text is the float32.

    binlake prints the shortest text of the stored float32 (``rows.numbers.format_float``);
    the server rounds a FLOAT without (M,D) to 6 digits, so the comparison uses that rule.
    """
    text = render_value_bytes(value, col)
    assert text is not None and struct.unpack("<f", struct.pack("<f", float(text)))[0] == value, (text, value)
    return format_float_select(value).encode()


def batch_unescape(field: bytes) -> bytes | None:
    """Undo ``mysql --batch`` escaping (``\\0 \\t \\n \\\\``); ``NULL`` -> None."""
    if field == b"NULL":
        return None
    out = bytearray()
    i = 0
    while i < len(field):
        c = field[i]
        if c == 0x5C and i + 1 < len(field):
            nxt = field[i + 1]
            out += {0x30: b"\x00", 0x74: b"\t", 0x6E: b"\n", 0x5C: b"\\"}.get(nxt, bytes((0x5C, nxt)))
            i += 2
            continue
        out.append(c)
        i += 1
    return bytes(out)


def read_batch_tsv(data: bytes) -> tuple[list[str], list[list[bytes | None]]]:
    """``mariadb --batch`` output (with a header line) -> (column names, rows of raw values)."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    header = [h.decode() for h in lines[0].split(b"\t")]
    rows = [[batch_unescape(f) for f in line.split(b"\t")] for line in lines[1:]]
    return header, rows


def compare_table(replayer: Replayer, schema: str, table: str, tsv: bytes) -> None:
    """Assert value for value that the replayed table equals the server's SELECT output."""
    header, expected = read_batch_tsv(tsv)
    got = replayer.rows_bytes(schema, table, header)
    assert len(got) == len(expected), f"{schema}.{table}: {len(got)} rows replayed, server has {len(expected)}"
    # order both by the raw primary-key text of the first column(s) the server printed
    for exp_row, got_row in zip(expected, got):
        for name, e, g in zip(header, exp_row, got_row):
            assert g == e, f"{schema}.{table} row {exp_row[0]!r} column {name}: decoded {g!r}, server printed {e!r}"
