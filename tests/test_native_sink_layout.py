"""One declaration of what the compiled extension shares with Python: the event sink's buffers
(``native/src/sink.rs`` ``SINK_LAYOUT`` against ``binlake.ingest.layout.sink_layout``, derived
from the table registry), the rows decoder's value kinds (``native/src/lib.rs`` ``K_*`` / ``C_*``
against ``binlog_parser.rows._native``) and the module's names (``binlog_parser/_native_ext.pyi``).

Each is checked in the Rust source (no build needed) and, when the extension is built, in the
module itself; a sink given buffers of another layout refuses them by name.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from binlake.ingest.layout import SINK_BUFFERS, row_kinds, sink_layout
from binlog_parser.rows import _native

ROOT = Path(__file__).resolve().parent.parent
NATIVE = ROOT / "native" / "src"
STUB = ROOT / "binlog_parser" / "_native_ext.pyi"


def _built() -> ModuleType:
    module = _native.extension()
    if module is None:
        pytest.skip("compiled extension not built (make setup-native) or switched off")
    return module


def _plain(layout: Any) -> list[tuple[str, str, tuple[tuple[str, str], ...]]]:
    return [(role, table, tuple((name, kind) for name, kind in columns)) for role, table, columns in layout]


def rust_sink_layout(source: str) -> list[tuple[str, str, tuple[tuple[str, str], ...]]]:
    """``SINK_LAYOUT`` as ``sink.rs`` spells it."""
    body = source.split("pub(crate) const SINK_LAYOUT: Layout = [", 1)[1].split("\n];", 1)[0]
    return [(role, table, tuple(re.findall(r'\("(\w+)", "(\w+)"\)', columns)))
            for role, table, columns in re.findall(r'\("(\w+)", "([\w.]+)", &\[(.*?)\]\)', body, re.S)]


def rust_value_kinds(source: str) -> dict[str, int]:
    return {name: int(value) for name, value in re.findall(r"^const ([KC]_\w+): u32 = (\d+);", source, re.M)}


def python_value_kinds() -> dict[str, int]:
    return {name: value for name, value in vars(_native).items()
            if re.fullmatch(r"[KC]_[A-Z0-9_]+", name) and isinstance(value, int)}


def test_the_sink_layout_in_the_rust_source_is_the_registrys() -> None:
    """The columns ``sink.rs`` appends its cells to, in order and kind, are those the ingest derives
    from the registry: a column added, dropped, moved or retyped in ``binlake/lake/tables.py``
    fails here until the sink follows."""
    declared = sink_layout()
    assert [role for role, _, _ in declared] == ["events", "row_changes", "commit_times", "transactions"]
    assert rust_sink_layout((NATIVE / "sink.rs").read_text()) == declared


def test_the_sink_layout_follows_the_registry() -> None:
    """The Python declaration is the registry's: every column of each buffer is a column of its
    table with the kind its batch schema gives (a silver column turned from BIGINT to INT shows)."""
    (_, _, events), *_ = sink_layout()
    assert events[:2] == (("pos", "int64"), ("payload_index", "int32"))
    assert dict(events)["event_type"] == "words" and dict(events)["fields"] == "utf8"
    for _role, table, columns, sequences in SINK_BUFFERS:
        assert len(row_kinds(table, columns, sequences)) == len(columns)
    assert row_kinds("silver.row_changes", ("row_index",), ("row_index",)) == ["int32_sequence"]


def test_the_declared_column_orders_are_the_registrys() -> None:
    """Each buffer's columns are its table's columns in registry order, less what a decoder gives
    apart (constants, dates, row images, late columns): what ``TableColumns`` derives."""
    from binlake.ingest.columns import TableColumns
    from binlake.ingest.layout import ROW_CHANGE_IMAGES, ROW_CHANGE_LATE

    same = {"source": "s", "file": "f", "file_seq": 1}
    assert TableColumns("bronze.events", same).row_columns == SINK_BUFFERS[0][2]
    row_changes = TableColumns("silver.row_changes", same, images=object(), image_columns=ROW_CHANGE_IMAGES,
                               late_columns=ROW_CHANGE_LATE)
    assert (row_changes.row_columns, row_changes.late_columns) == (SINK_BUFFERS[1][2], SINK_BUFFERS[2][2])
    assert TableColumns("silver.transactions", same).row_columns == SINK_BUFFERS[3][2]


def test_a_registry_change_is_a_drift(monkeypatch: pytest.MonkeyPatch) -> None:
    """silver.row_changes.server_id turned from BIGINT to INT in the registry: the declaration
    derived from it no longer matches the Rust source's, so this module fails until both move."""
    import dataclasses

    from binlake.ingest import layout
    from binlake.lake import tables

    spec = tables.SILVER_ROW_CHANGES
    columns = tuple(dataclasses.replace(c, type=tables.INT) if c.name == "server_id" else c for c in spec.columns)
    changed = dataclasses.replace(spec, columns=columns)
    monkeypatch.setattr(tables, "TABLES", tuple(changed if t is spec else t for t in tables.TABLES))
    layout.batch_schema.cache_clear()
    try:
        assert rust_sink_layout((NATIVE / "sink.rs").read_text()) != sink_layout()
        assert dict(sink_layout()[1][2])["server_id"] == "int32"
    finally:
        layout.batch_schema.cache_clear()


def test_the_value_kinds_in_the_rust_source_are_pythons() -> None:
    rust = rust_value_kinds((NATIVE / "lib.rs").read_text())
    assert len(rust) == 21 and rust == python_value_kinds()


def test_the_built_module_says_the_same() -> None:
    module = _built()
    assert _plain(module.SINK_LAYOUT) == sink_layout()
    assert module.VALUE_KINDS == python_value_kinds()


def _stub_names() -> set[str]:
    tree = ast.parse(STUB.read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_the_stub_names_what_the_module_holds() -> None:
    module = _built()
    public = {n for n in dir(module) if not n.startswith("_")}
    assert _stub_names() == public


def test_the_stub_methods_are_the_classes_methods() -> None:
    module = _built()
    tree = ast.parse(STUB.read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            declared = {f.name for f in node.body if isinstance(f, ast.FunctionDef) and not f.name.startswith("__")}
            declared |= {f.target.id for f in node.body if isinstance(f, ast.AnnAssign) and isinstance(f.target, ast.Name)}
            cls = getattr(module, node.name)
            assert {n for n in dir(cls) if not n.startswith("_")} == declared, node.name


def _buffers(**override: tuple[str, ...]) -> list[Any]:
    """A ``RowColumns`` per sink buffer, of the declared columns or, by role, of others."""
    module = _built()
    out = []
    for role, table, columns, sequences in SINK_BUFFERS:
        columns = override.get(role, columns)
        out.append(module.RowColumns(row_kinds(table, columns, sequences), [f"{table}.{c}" for c in columns]))
    return out


def _sink(tables: list[Any]) -> Any:
    module = _built()
    return module.EventSink(tuple(tables), module.ImageColumns(), {}, {}, {}, 1000, 1000)


def test_the_sink_takes_the_buffers_of_its_layout() -> None:
    assert _sink(_buffers()).seen == 0


def test_the_sink_refuses_buffers_of_another_layout() -> None:
    """Two silver columns swapped (as a registry edit would swap them), or one more: the sink
    names the buffer, the column and both sides, before anything is appended to a wrong column."""
    row_changes = SINK_BUFFERS[1][2]
    swapped = ("pos", "payload_index", "row_index", "gtid", "trx_pos", "event_time", "server_id", "table_name",
               "db", "operation", "event_type")
    assert sorted(swapped) == sorted(row_changes) and swapped != row_changes
    with pytest.raises(ValueError, match=r"the row_changes buffer's column 7 is silver\.row_changes\.table_name "
                                         r"\(words\), the event sink appends silver\.row_changes\.db \(words\)"):
        _sink(_buffers(row_changes=swapped))
    trx = SINK_BUFFERS[3][2]
    tables = _buffers()
    tables[3] = _built().RowColumns(row_kinds("silver.transactions", trx) + ["utf8"],
                                    [f"silver.transactions.{c}" for c in (*trx, "extra")])
    with pytest.raises(ValueError, match=r"the transactions buffer's column 28 is silver\.transactions\.extra \(utf8\), "
                                         r"the event sink appends nothing there \(29 columns given, 28 expected\)"):
        _sink(tables)
