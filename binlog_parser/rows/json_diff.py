"""PARTIAL_UPDATE_ROWS (39) JSON diffs (``sql/json_diff.cc``) and applying them to a document.

A partially updated JSON column's after-image value is a list of diffs, each: operation byte
(0 REPLACE, 1 INSERT, 2 REMOVE), path (packed length + text, e.g. ``$.a[2]``), and unless
REMOVE, a value (packed length + binary JSON). When the before image holds the document, the
diffs are applied to give the after document, as the replica would.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

from binlog_parser.errors import JsonDiffError
from binlog_parser.rows.json_binary import MySQLJson, json_sort_key, json_to_text, parse_json_binary
from binlog_parser.wire import packed_int

OPERATIONS = ("REPLACE", "INSERT", "REMOVE")


@dataclass(frozen=True, slots=True)
class JsonDiff:
    operation: str  # 'REPLACE' | 'INSERT' | 'REMOVE'
    path: str
    value: MySQLJson | None

    def function_name(self) -> str:
        """The SQL function mysqlbinlog shows for this diff."""
        if self.operation == "REPLACE":
            return "JSON_REPLACE"
        if self.operation == "REMOVE":
            return "JSON_REMOVE"
        return "JSON_ARRAY_INSERT" if self.path.endswith("]") else "JSON_INSERT"

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"op": self.operation, "path": self.path}
        if self.value is not None:
            d["value"] = str(self.value)
        return d


@dataclass(frozen=True, slots=True)
class PartialJson:
    """The after-image of a partially updated JSON column.

    ``document`` is the after document when the before image had the column (diffs applied),
    else None: the diffs alone are then the only record of the change.
    """

    diffs: tuple[JsonDiff, ...]
    document: MySQLJson | None = None

    def __str__(self) -> str:
        if self.document is not None:
            return str(self.document)
        return describe_diffs(self.diffs)


def describe_diffs(diffs: tuple[JsonDiff, ...], column: str = "@col") -> str:
    """mysqlbinlog-style text: ``JSON_REPLACE(@col, '$.a', 1)`` (nested for several diffs)."""
    text = column
    for d in diffs:
        args = [text, mysql_quote(d.path)]
        if d.value is not None:
            args.append(json_to_text(d.value.tree))
        text = f"{d.function_name()}({', '.join(args)})"
    return text


def mysql_quote(s: str) -> str:
    """``s`` as a single-quoted MySQL string literal, backslash-escaped as mysqlbinlog prints it."""
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def parse_json_diffs(data: bytes) -> tuple[JsonDiff, ...]:
    out = []
    pos = 0
    n = len(data)
    while pos < n:
        op = data[pos]
        if op > 2:
            raise JsonDiffError(f"bad JSON diff operation {op}")
        pos += 1
        plen, pos = packed_int(data, pos)
        if plen is None or pos + plen > n:
            raise JsonDiffError("JSON diff path runs past the end")
        path = data[pos:pos + plen].decode("utf-8", errors="surrogateescape")
        pos += plen
        value = None
        if op != 2:
            vlen, pos = packed_int(data, pos)
            if vlen is None or pos + vlen > n:
                raise JsonDiffError("JSON diff value runs past the end")
            value = MySQLJson(parse_json_binary(data[pos:pos + vlen]))
            pos += vlen
        out.append(JsonDiff(OPERATIONS[op], path, value))
    return tuple(out)


# ---------------------------------------------------------------- paths

_BARE = re.compile(r"[A-Za-z_$][\w$]*")


def parse_path(path: str) -> list[Any]:
    """``$.a."b c"[3][last-1]`` -> ['a', 'b c', 3, ('last', 1)]."""
    p = path.strip()
    if not p.startswith("$"):
        raise JsonDiffError(f"bad JSON path {path!r}")
    i = 1
    legs: list[Any] = []
    while i < len(p):
        c = p[i]
        if c.isspace():
            i += 1
        elif c == ".":
            i += 1
            while i < len(p) and p[i].isspace():
                i += 1
            if i < len(p) and p[i] == '"':
                j = i + 1
                buf = []
                while j < len(p) and p[j] != '"':
                    if p[j] == "\\" and j + 1 < len(p):
                        esc = p[j + 1]
                        if esc == "u":
                            buf.append(chr(int(p[j + 2:j + 6], 16)))
                            j += 6
                            continue
                        buf.append({"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}.get(esc, esc))
                        j += 2
                        continue
                    buf.append(p[j])
                    j += 1
                legs.append("".join(buf))
                i = j + 1
            else:
                m = _BARE.match(p, i)
                if not m:
                    raise JsonDiffError(f"bad JSON path {path!r}")
                legs.append(m.group(0))
                i = m.end()
        elif c == "[":
            j = p.index("]", i)
            inner = p[i + 1:j].strip()
            if inner.startswith("last"):
                rest = inner[4:].replace(" ", "")
                legs.append(("last", int(rest[1:]) if rest.startswith("-") else 0))
            else:
                legs.append(int(inner))
            i = j + 1
        else:
            raise JsonDiffError(f"bad JSON path {path!r}")
    return legs


def _index(leg, arr_len: int) -> int:
    if isinstance(leg, tuple):
        return arr_len - 1 - leg[1]
    return leg


def apply_json_diffs(tree: Any, diffs: tuple[JsonDiff, ...]) -> Any:
    """A new tree: ``tree`` with the diffs applied in order (the input is not modified)."""
    doc = copy.deepcopy(tree)
    # objects that got a new key, re-sorted once at the end (sorting after every INSERT made
    # many inserts into one big object quadratic); REPLACE/REMOVE keep a sorted object sorted
    unsorted: dict[int, dict] = {}
    for d in diffs:
        legs = parse_path(d.path)
        value = copy.deepcopy(d.value.tree) if d.value is not None else None
        if not legs:
            if d.operation == "REMOVE":
                raise JsonDiffError("cannot remove the document root")
            doc = value
            continue
        parent = doc
        for leg in legs[:-1]:
            try:
                if isinstance(parent, dict):
                    parent = parent[leg]
                elif isinstance(parent, list):
                    parent = parent[_index(leg, len(parent))]
                else:
                    raise KeyError(leg)
            except (KeyError, IndexError, TypeError):
                raise JsonDiffError(f"path {d.path} not in the before document") from None
        last = legs[-1]
        if isinstance(parent, dict):
            if not isinstance(last, str):
                raise JsonDiffError(f"path {d.path}: array leg on an object")
            if d.operation == "REMOVE":
                parent.pop(last, None)
            else:
                if d.operation == "REPLACE" and last not in parent:
                    raise JsonDiffError(f"path {d.path} not in the before document")
                if d.operation == "INSERT":
                    unsorted[id(parent)] = parent
                parent[last] = value
        elif isinstance(parent, list):
            if isinstance(last, str):
                raise JsonDiffError(f"path {d.path}: member leg on an array")
            idx = _index(last, len(parent))
            if d.operation == "REMOVE":
                if 0 <= idx < len(parent):
                    del parent[idx]
            elif d.operation == "REPLACE":
                if not 0 <= idx < len(parent):
                    raise JsonDiffError(f"path {d.path} not in the before document")
                parent[idx] = value
            else:
                parent.insert(min(max(idx, 0), len(parent)), value)
        else:
            raise JsonDiffError(f"path {d.path}: parent is a scalar")
    for obj in unsorted.values():
        items = sorted(obj.items(), key=lambda kv: json_sort_key(kv[0]))
        obj.clear()
        obj.update(items)
    return doc
