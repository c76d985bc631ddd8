"""FLOAT / DOUBLE text (binlog_parser.rows.numbers) against what a real MariaDB stored and SELECTs.

The binlog carries only a FLOAT/DOUBLE's storage size, never its declared ``(M,D)``, and the
stored float32 / double is exact. So binlake prints the shortest decimal that reads back as
the same float32 (FLOAT) or double (DOUBLE). The server's SELECT text equals it wherever the
server prints the value exactly; where it does not, by design, the difference is one of two
kinds, each checked here against the server's own output:

* a FLOAT without ``(M,D)``: the server prints 6 significant digits (``FLT_DIG``, lossy:
  ``1234.57`` for the float32 nearest 1234.567), reproduced by ``format_float_select``;
* a column with ``(M,D)``: the server prints exactly ``D`` decimals (rounded or zero-padded);
* a stored negative zero: MariaDB's SELECT prints ``0``, binlake keeps the sign (``-0``).

Either way binlake's text must name the very value the server holds, which the server itself
prints at full precision with ``CAST(col AS DOUBLE)``.
"""

from __future__ import annotations

import math
import struct
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from rows_replay import read_batch_tsv

from binlog_parser.reader import read_events
from binlog_parser.rows import RowsEvent, render_value, render_value_text
from binlog_parser.rows.numbers import (
    format_double,
    format_float,
    format_float_select,
    shortest_float32,
)

VALUES = ["1234.567", "12345.679", "3.4028235e38", "-1.17549435e-38", "0", "-0e0", "-0", "1e-45",
          "16777217", "0.1", "6.28318", "99999.99", "123456.7", "1.5e-7", "-3e-10", "1234567",
          "2.5", "-1e-300", "1.7976931348623157e308", "4.9e-324", "0.3"]
# column -> declared decimals (None: no (M,D))
COLUMNS = {"f": ("FLOAT", None), "f73": ("FLOAT(7,3)", 3), "f102": ("FLOAT(10,2)", 2),
           "d": ("DOUBLE", None), "d124": ("DOUBLE(12,4)", 4)}


def f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


@pytest.mark.parametrize("value,text", [
    (1234.567, "1234.567"), (12345.679, "12345.679"), (3.4028235e38, "3.4028235e38"),
    (-1.17549435e-38, "-1.1754944e-38"), (1e-45, "1e-45"), (16777217, "16777216"), (0.1, "0.1"),
    (1234567, "1234567"), (99999.99, "99999.99"), (-3e-10, "-0.0000000003"), (1e-20, "1e-20"),
    (0.0, "0"), (-0.0, "-0"), (2.0**-126, "1.1754944e-38"), (3 * 2.0**-149, "4e-45"),
])
def test_float_is_the_shortest_text_of_the_float32(value, text):
    x = f32(value)
    assert format_float(x) == text
    assert f32(float(text)) == x
    assert render_value_text(x, _col("FLOAT")) == text and render_value(x, _col("FLOAT")) == float(text)
    assert shortest_float32(x) == float(text)


@pytest.mark.parametrize("value,text", [
    (1234.567, "1234.57"), (16777217, "16777200"), (3.4028235e38, "3.40282e38"), (1e-45, "1.4013e-45"),
])
def test_format_float_select_is_the_servers_six_digits(value, text):
    assert format_float_select(f32(value)) == text


def test_every_float32_pattern_sample_round_trips():
    import random

    r = random.Random(16)
    n = 0
    for _ in range(20000):
        x = struct.unpack("<f", r.getrandbits(32).to_bytes(4, "little"))[0]
        if not math.isfinite(x):
            continue
        text = format_float(x)
        assert f32(float(text)) == x, (x, text)
        digits = text.lstrip("-").split("e")[0].replace(".", "").strip("0")
        if len(digits) > 1:  # one digit fewer never reads back as x
            assert f32(float(f"{abs(x):.{len(digits) - 2}e}")) != abs(x), (x, text)
        n += 1
    assert n > 19000


def _col(type_name: str) -> Any:
    from binlog_parser.rows import ColumnInfo
    from binlog_parser.rows.column_types import ColumnType as T

    t = T.FLOAT if type_name == "FLOAT" else T.DOUBLE
    return ColumnInfo(index=0, name="c", type=t, binlog_type=t, meta=4 if t == T.FLOAT else 8,
                      nullable=True)


# ------------------------------------------------------------------ against a real server


@pytest.fixture(scope="module")
def float_server_run():
    """Insert VALUES into every COLUMNS shape; return decoded rows, SELECT text, exact text."""
    from test_mariadb_server import running_mariadb

    with running_mariadb("binlake-float-") as db:
        cols = ", ".join(f"{n} {t}" for n, (t, _d) in COLUMNS.items())
        inserts = "".join(f"INSERT INTO n.t VALUES ({i}, {', '.join([v] * len(COLUMNS))});"
                          for i, v in enumerate(VALUES))
        db.query(f"SET SESSION sql_mode=''; CREATE DATABASE n; CREATE TABLE n.t (id INT PRIMARY KEY, {cols});"
                 f"{inserts}")
        _h, select = read_batch_tsv(db.query("SELECT * FROM n.t ORDER BY id").stdout)
        exact_sql = ", ".join(f"CAST({n} AS DOUBLE)" for n in COLUMNS)
        _h, exact = read_batch_tsv(db.query(f"SELECT id, {exact_sql} FROM n.t ORDER BY id").stdout)
        index = (db.datadir / "binlog.index").read_text().split()
        db.stop()
        rows: dict[int, dict[str, Any]] = {}
        for name in index:
            for ev in read_events(str(db.datadir / Path(name).name)):
                if isinstance(ev, RowsEvent) and ev.table_name == "t":
                    for change in ev.rows:
                        rows[change.after["id"]] = (change.after, {c.name: c for c in ev.table.columns})
        yield rows, select, exact


def test_float_and_double_cells_equal_the_servers_text(float_server_run):
    rows, select, exact = float_server_run
    assert len(rows) == len(select) == len(VALUES)
    same = six_digit = fixed_decimals = negative_zero = 0
    for sel_row, exact_row in zip(select, exact):
        row, columns = rows[int(sel_row[0])]
        for (name, (_type, decimals)), sel, held in zip(COLUMNS.items(), sel_row[1:], exact_row[1:]):
            value = row[name]
            is_float = name.startswith("f")
            text = render_value_text(value, columns[name])
            where = f"{VALUES[int(sel_row[0])]} in {name}: binlake {text!r}, SELECT {sel!r}, held {held!r}"
            # binlake's text names exactly the value the server holds ...
            assert value == float(held.decode()), where
            if is_float:
                assert f32(float(text)) == value and text == format_float(value), where
            else:
                assert float(text) == value and text == format_double(value), where
            # ... the JSON form is the same number ...
            assert render_value(value, columns[name]) == float(text), where
            # ... and it is the SELECT text, or differs only as the declared type makes it
            if text.encode() == sel:
                same += 1
            elif text == "-0":  # the server drops the sign of a stored negative zero
                assert sel == b"0" and struct.pack("<d", value)[7] == 0x80, where
                negative_zero += 1
            elif decimals is None:
                assert is_float and sel.decode() == format_float_select(value), where
                six_digit += 1
            else:
                assert len(sel.split(b".")[1]) == decimals, where
                assert abs(Decimal(sel.decode()) - Decimal(value)) <= Decimal(10) ** -decimals / 2, where
                fixed_decimals += 1
    total = same + six_digit + fixed_decimals + negative_zero
    assert total == len(VALUES) * len(COLUMNS)
    # every plain DOUBLE cell, and the FLOAT cells the server prints exactly, are text-equal
    assert same >= len(VALUES) + 8 and six_digit >= 6 and fixed_decimals >= 10, (same, six_digit, fixed_decimals)
    print(f"\n{total} FLOAT/DOUBLE cells: {same} equal to SELECT text, {six_digit} plain-FLOAT 6-digit "
          f"SELECT text, {fixed_decimals} (M,D) fixed-decimal SELECT text, {negative_zero} negative zeros")
