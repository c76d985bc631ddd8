"""The compiled rows decoder (``binlog_parser._native_ext``, built from ``native/``) against
the pure-Python reference: every fixture binlog, random tables written by
``binlog_parser.writer``, and damaged rows events must give the same events, the same values
(same types, same text: ``Decimal('-0.00')`` is not ``Decimal('0.00')`` here) and the same
errors (type, file, offset, words) on both paths.

Skipped when the extension is not built (``make setup-native``; ``make test`` builds it).
"""

from __future__ import annotations

import io
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from binlog_parser.errors import BinlogError
from binlog_parser.reader import read_events
from binlog_parser.rows import _native
from binlog_parser.rows.rows_event import RowsEvent
from binlog_parser.rows.temporal import (
    MySQLDate,
    MySQLDateTime,
    MySQLTime,
    MySQLTimestamp,
)
from binlog_parser.writer import BinlogFileWriter, Column, Table
from tests._native_util import fixture_binlogs, native_extension

pytest.importorskip("binlog_parser._native_ext", reason="compiled rows decoder not built "
                    "(make setup-native)")

FIXTURES = Path(__file__).parent / "fixtures"
GTID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


def _strict(v: Any) -> Any:
    """A value's exact identity for comparison: type and repr at every level (``==`` would
    equate ``1``/``1.0``/``True``, ``Decimal('0')``/``Decimal('-0.00')``, ``-0.0``/``0.0``)."""
    if isinstance(v, dict):
        return ("dict", [(k, _strict(x)) for k, x in v.items()])
    if isinstance(v, (tuple, list)):
        return (type(v).__name__, [_strict(x) for x in v])
    return (type(v).__name__, repr(v))


def _decode(source: Any, enabled: bool, **kw: Any) -> tuple[list[Any], Any]:
    """(events as comparable tuples, the error as (type, message, file, offset) or None)."""
    out: list[Any] = []
    err = None
    with native_extension(enabled):
        try:
            for ev in read_events(source, **kw):
                if isinstance(ev, RowsEvent):
                    out.append(("rows", ev.header, ev.table_id, ev.flags, ev.extra_data,
                                ev.columns_present, ev.columns_present_after,
                                [(_strict(r.before), _strict(r.after)) for r in ev.rows]))
                else:
                    out.append(ev)
        except BinlogError as exc:
            err = (type(exc).__name__, str(exc), exc.file, exc.offset)
    return out, err


def _rows_count(events: list[Any]) -> int:
    return sum(len(e[7]) for e in events if isinstance(e, tuple) and e[0] == "rows")


@pytest.mark.parametrize("path", fixture_binlogs(), ids=lambda p: p.name[-48:])
def test_fixture_files_decode_identically(path: Path) -> None:
    pure = _decode(str(path), False)
    native = _decode(str(path), True)
    assert native[1] == pure[1]
    assert native[0] == pure[0]


def test_fixture_corpus_exercises_the_native_path() -> None:
    """The comparison above is not vacuous: the fixtures hold thousands of rows the native
    path decodes, with DECIMAL, temporal, text and NULL values among them."""
    total = 0
    kinds: set[str] = set()
    for path in fixture_binlogs():
        events, _err = _decode(str(path), True)
        total += _rows_count(events)
        for e in events:
            if isinstance(e, tuple) and e[0] == "rows":
                for before, after in e[7]:
                    for img in (before, after):
                        if img[0] == "dict":
                            kinds.update(v[0] for _k, v in img[1])
    assert total > 10000
    assert {"Decimal", "MySQLDateTime", "MySQLTimestamp", "MySQLDate", "str", "bytes", "int",
            "float", "NoneType"} <= kinds


def test_native_rows_are_the_same_objects_as_pure() -> None:
    """Values a real server wrote (the MariaDB 10.11 fixture chain), compared as objects: equal
    dataclasses of the same class, hashable, and rendered the same."""
    from binlog_parser.rows import render_value_text

    path = str(FIXTURES / "mariadb-10.11" / "binlog.000001")
    with native_extension(True):
        nat = [e for e in read_events(path) if isinstance(e, RowsEvent)]
    with native_extension(False):
        pure = [e for e in read_events(path) if isinstance(e, RowsEvent)]
    assert nat and [e.rows for e in nat] == [e.rows for e in pure]
    for a, b in zip(nat, pure):
        cols = a.columns_by_name()
        for ra, rb in zip(a.rows, b.rows):
            for img_a, img_b in ((ra.before, rb.before), (ra.after, rb.after)):
                assert (img_a is None) == (img_b is None)
                if img_a is None or img_b is None:
                    continue
                for k, va in img_a.items():
                    vb = img_b[k]
                    assert type(va) is type(vb)
                    assert hash(va) == hash(vb)
                    assert render_value_text(va, cols[k]) == render_value_text(vb, cols[k])


def test_a_build_of_another_revision_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    from binlog_parser import _native_ext
    from binlog_parser._native_loader import ABI, load_extension

    assert load_extension() is _native_ext
    monkeypatch.setattr(_native_ext, "ABI", ABI + 1)
    try:
        assert load_extension() is None
        assert _native.use_native(True) is False
    finally:
        monkeypatch.undo()
        _native.use_native(None)
    assert _native.extension() is _native_ext


def test_environment_switch_forces_pure_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BINLAKE_NATIVE", "0")
    assert _native.use_native(None) is False
    assert _native.extension() is None
    monkeypatch.setenv("BINLAKE_NATIVE", "1")
    assert _native.use_native(None) is True
    assert _native.extension() is not None


# ------------------------------------------------------------------ random tables (writer)

_INT_RANGES = {"TINYINT": 8, "SMALLINT": 16, "MEDIUMINT": 24, "INT": 32, "BIGINT": 64}
_SET_ITEMS = ("a", "b", "c", "d", "e", "f", "g", "h", "i")


@st.composite
def _decimal(draw: Any, p: int, s: int) -> Decimal:
    ip = draw(st.text("0123456789", min_size=0, max_size=p - s))
    fp = draw(st.text("0123456789", min_size=s, max_size=s))
    sign = draw(st.sampled_from(["", "-"]))
    return Decimal(f"{sign}{ip or '0'}" + (f".{fp}" if s else ""))


def _usec(fsp: int) -> st.SearchStrategy[int]:
    unit = 10 ** (6 - fsp)
    return st.integers(0, 10 ** fsp - 1).map(lambda x: x * unit)


def _column_strategy(draw: Any) -> tuple[str, st.SearchStrategy[Any]]:
    """(SQL type, strategy of its values)."""
    kind = draw(st.sampled_from(["int", "float", "double", "decimal", "date", "time", "datetime",
                                 "timestamp", "year", "varchar", "char", "latin1", "binary",
                                 "varbinary", "text", "blob", "enum", "set", "bit", "json"]))
    if kind == "int":
        name = draw(st.sampled_from(sorted(_INT_RANGES)))
        bits = _INT_RANGES[name]
        if draw(st.booleans()):
            return f"{name} UNSIGNED", st.integers(0, 2 ** bits - 1)
        return name, st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if kind == "float":
        return "FLOAT", st.floats(width=32, allow_nan=False, allow_infinity=False)
    if kind == "double":
        return "DOUBLE", st.floats(allow_nan=False, allow_infinity=False)
    if kind == "decimal":
        p = draw(st.integers(1, 65))
        s = draw(st.integers(0, min(p, 30)))
        return f"DECIMAL({p},{s})", _decimal(p, s)
    fsp = draw(st.integers(0, 6))
    if kind == "date":
        return "DATE", st.builds(MySQLDate, st.integers(0, 9999), st.integers(0, 12), st.integers(0, 31))
    if kind == "time":
        return f"TIME({fsp})", st.builds(MySQLTime, st.booleans(), st.integers(0, 838), st.integers(0, 59),
                                         st.integers(0, 59), _usec(fsp), st.just(fsp))
    if kind == "datetime":
        return f"DATETIME({fsp})", st.builds(
            MySQLDateTime, st.integers(0, 9999), st.integers(0, 12), st.integers(0, 31),
            st.integers(0, 23), st.integers(0, 59), st.integers(0, 59), _usec(fsp), st.just(fsp))
    if kind == "timestamp":
        return f"TIMESTAMP({fsp})", st.builds(MySQLTimestamp, st.integers(0, 2 ** 31 - 1), _usec(fsp),
                                              st.just(fsp))
    if kind == "year":
        return "YEAR", st.one_of(st.just(0), st.integers(1901, 2155))
    n = draw(st.integers(1, 300))
    text = st.text(max_size=min(n, 40))
    if kind == "varchar":
        return f"VARCHAR({n})", text
    if kind == "char":
        return f"CHAR({min(n, 255)})", st.text(max_size=min(n, 40)).map(str.rstrip)
    if kind == "latin1":
        return f"VARCHAR({n}) CHARACTER SET latin1", st.text(st.characters(max_codepoint=255), max_size=min(n, 40))
    if kind == "binary":
        return f"BINARY({min(n, 255)})", st.binary(max_size=min(n, 40))
    if kind == "varbinary":
        return f"VARBINARY({n})", st.binary(max_size=min(n, 40))
    if kind == "text":
        return draw(st.sampled_from(["TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT"])), st.text(max_size=60)
    if kind == "blob":
        return draw(st.sampled_from(["TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB"])), st.binary(max_size=60)
    if kind == "enum":
        return "ENUM('x','yy','zzz')", st.sampled_from(["x", "yy", "zzz"])
    if kind == "set":
        k = draw(st.integers(1, len(_SET_ITEMS)))
        items = ",".join(f"'{c}'" for c in _SET_ITEMS[:k])
        return f"SET({items})", st.sets(st.sampled_from(_SET_ITEMS[:k])).map(
            lambda xs: ",".join(c for c in _SET_ITEMS if c in xs))
    if kind == "bit":
        bits = draw(st.integers(1, 64))
        return f"BIT({bits})", st.integers(0, 2 ** bits - 1)
    return "JSON", st.dictionaries(st.text(max_size=5), st.integers(-5, 5), max_size=3)


@st.composite
def _tables(draw: Any) -> tuple[Table, list[Any], list[Any]]:
    specs = [_column_strategy(draw) for _ in range(draw(st.integers(1, 12)))]
    cols = tuple(Column(f"c{i}", sql, nullable=True) for i, (sql, _s) in enumerate(specs))
    table = Table("db", "t", cols, table_id=77)

    def row() -> st.SearchStrategy[dict[str, Any]]:
        return st.fixed_dictionaries({c.name: st.one_of(st.none(), s) for c, (_q, s) in zip(cols, specs)})

    inserts = draw(st.lists(row(), min_size=1, max_size=5))
    updates = draw(st.lists(st.tuples(row(), row()), max_size=3))
    return table, inserts, updates


def _write(table: Table, inserts: list[Any], updates: list[Any]) -> bytes:
    buf = io.BytesIO()
    w = BinlogFileWriter(buf, server_version="8.0.40", server_id=1, previous_gtids="")
    w.begin_transaction(f"{GTID}:1", last_committed=0, sequence_number=1, timestamp=1700000000)
    w.write_rows(table, inserts)
    if updates:
        w.update_rows(table, updates)
    w.delete_rows(table, inserts)
    w.xid()
    w.rotate("binlog.000002")
    return buf.getvalue()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_tables())
def test_random_tables_decode_identically(case: tuple[Table, list[Any], list[Any]]) -> None:
    data = _write(*case)
    pure = _decode(data, False)
    native = _decode(data, True)
    assert pure[1] is None
    assert _rows_count(pure[0]) >= 2 * len(case[1])
    assert native == pure


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_tables(), st.data())
def test_damaged_rows_events_fail_or_decode_identically(case: tuple[Table, list[Any], list[Any]],
                                                        data: st.DataObject) -> None:
    """Random bytes changed inside the row images (checksums not verified): the native path
    must answer exactly what the pure path answers, values or the same error."""
    raw = bytearray(_write(*case))
    spans = [(e.header.pos + 19, e.header.next_pos - 4)
             for e in read_events(bytes(raw)) if isinstance(e, RowsEvent)]
    start, end = data.draw(st.sampled_from(spans))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(start, end - 1))
        raw[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.one_of(st.none(), st.integers(start, end)))
    if cut is not None:  # also a rows event whose body ends early (its size field shrunk)
        raw = raw[:cut] + raw[end:]
        for e in read_events(bytes(_write(*case))):
            if isinstance(e, RowsEvent) and e.header.pos + 19 == start:
                new_size = e.header.event_size - (end - cut)
                raw[e.header.pos + 9:e.header.pos + 13] = new_size.to_bytes(4, "little")
    pure = _decode(bytes(raw), False, verify_checksum=False)
    native = _decode(bytes(raw), True, verify_checksum=False)
    assert native == pure


# ------------------------------------------------------------------ a real MariaDB server

@pytest.fixture(scope="module")
def mariadb_server_binlogs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Binlogs a real mariadbd writes for tests/sql/all_types.sql (every column type, edge
    values) and 300 rows of the benchmark's wide-row scenario (bench/mariadb_corpus.py)."""
    from bench.mariadb_corpus import SCENARIO, write_binlogs

    sql = (Path(__file__).parent / "sql" / "all_types.sql").read_text() + SCENARIO.format(rows=300)
    try:
        return write_binlogs(tmp_path_factory.mktemp("mariadb-native"), sql)
    except SystemExit as exc:
        pytest.skip(f"!!! REAL-SERVER TEST SKIPPED: {exc} !!!")


def test_real_mariadb_binlogs_decode_identically(mariadb_server_binlogs: list[Path]) -> None:
    rows = 0
    for path in mariadb_server_binlogs:
        pure = _decode(str(path), False)
        native = _decode(str(path), True)
        assert pure[1] is None
        assert native == pure
        rows += _rows_count(pure[0])
    assert rows >= 300 + 150 + 30  # the scenario's INSERT, UPDATE (half) and DELETE (a tenth)


# ------------------------------------------------------------------ the compiled slots constructor

def _constructor_cases() -> list[tuple[type, tuple[Any, ...]]]:
    from binlog_parser.header import EventHeader
    from binlog_parser.rows.rows_event import RowChange

    header = EventHeader(4, 100, 1700000000, 30, 7, 96, 100, 0, True, None, None)
    return [
        (EventHeader, (4, 100, 1700000000, 30, 7, 96, 100, 0, True, None, None)),
        (EventHeader, (0, 19, 0, 15, 1, 19, 0, 1, None, 1234, 2)),
        (RowChange, (None, {"a": Decimal("-0.00"), "b": None})),
        (MySQLDate, (0, 0, 0)),
        (MySQLDateTime, (2024, 2, 29, 23, 59, 59, 999999, 6)),
        (MySQLTime, (True, 838, 59, 59, 0, 0)),
        (MySQLTimestamp, (2 ** 31 - 1, 5, 3)),
        (type(_table_map_event()), (header, *_table_map_fields())),
    ]


def _table_map_event() -> Any:
    return next(e for e in read_events(str(FIXTURES / "mariadb-10.11" / "binlog.000001"))
                if type(e).__name__ == "TableMapEvent")


def _table_map_fields() -> tuple[Any, ...]:
    import dataclasses

    ev = _table_map_event()
    return tuple(getattr(ev, f.name) for f in dataclasses.fields(ev) if f.name != "header")


@pytest.mark.parametrize("cls, args", _constructor_cases(), ids=lambda x: getattr(x, "__name__", ""))
def test_compiled_slots_constructor_builds_the_python_constructors_object(
        cls: type, args: tuple[Any, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    import copy
    import pickle

    from binlog_parser._fast import slots_constructor

    native = slots_constructor(cls)
    monkeypatch.setenv("BINLAKE_NATIVE", "0")
    python = slots_constructor(cls)
    assert type(native).__name__ == "SlotsConstructor" and type(python).__name__ == "function"
    a, b, c = native(*args), python(*args), cls(*args)
    assert type(a) is type(b) is cls
    assert a == b == c and repr(a) == repr(b) == repr(c)
    if cls.__hash__ is not None and not any(isinstance(x, dict) for x in args):
        assert hash(a) == hash(b)
    assert copy.copy(a) == a
    if cls.__name__ != "TableMapEvent":  # holds decoder closures
        assert pickle.loads(pickle.dumps(a)) == b
    with pytest.raises(TypeError):
        native(*args[:-1])
