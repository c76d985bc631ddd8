"""Rows events: WRITE / UPDATE / DELETE in every generation.

- pre-GA (20-22, MySQL 5.1.5-5.1.17), v1 (23-25; MariaDB, MySQL < 8.2 with log-bin-use-v1-row-events),
  v2 (30-32, with the extra-data block: NDB info, partition ids), PARTIAL_UPDATE_ROWS (39),
  MariaDB compressed (166-168 v1, 169-171 v2: the row data after the bitmaps is zlib-compressed
  behind a 1-byte header ``0x80 | len_bytes`` and a big-endian uncompressed length).
- Post-header: table_id (6 bytes; 4 when the FORMAT_DESCRIPTION's post-header length is 6),
  flags (2), v2: extra-data length (2, counting itself) + extra data.
- Body: column count (packed int), columns-present bitmap (before image / only image), a
  second bitmap for UPDATE (after image), then rows: per image a NULL bitmap over the present
  columns (LSB first) and the non-NULL values. PARTIAL_UPDATE_ROWS after images start with
  ``value_options`` (packed int) and, with PARTIAL_JSON_UPDATES, one bit per JSON column
  telling whether that column holds diffs instead of a document.

Columns absent from an image (MINIMAL / NOBLOB row images) are absent from the row dict: absent
is not NULL.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from functools import partial
from typing import Any

from binlog_parser._fast import slots_constructor
from binlog_parser.context import DecodeContext
from binlog_parser.errors import CorruptEventError, JsonDiffError, RowsLayoutError
from binlog_parser.events import Event
from binlog_parser.header import EventHeader
from binlog_parser.limits import DEFAULT_MAX_EVENT_SIZE, bounded_zlib_decompress, effective_max_event_size
from binlog_parser.rows import _native
from binlog_parser.rows.column_types import INTEGER_SIZES
from binlog_parser.rows.column_types import ColumnType as T
from binlog_parser.rows.json_binary import MySQLJson
from binlog_parser.rows.json_diff import PartialJson, apply_json_diffs, parse_json_diffs
from binlog_parser.rows.table_map import TableMapEvent
from binlog_parser.rows.temporal import _DATETIMEF_INT_OFS
from binlog_parser.wire import packed_int

WRITE, UPDATE, DELETE = "insert", "update", "delete"

_KIND = {20: WRITE, 21: UPDATE, 22: DELETE, 23: WRITE, 24: UPDATE, 25: DELETE,
         30: WRITE, 31: UPDATE, 32: DELETE, 39: UPDATE,
         166: WRITE, 167: UPDATE, 168: DELETE, 169: WRITE, 170: UPDATE, 171: DELETE}
_VERSION = {20: 0, 21: 0, 22: 0, 23: 1, 24: 1, 25: 1, 30: 2, 31: 2, 32: 2, 39: 2,
            166: 1, 167: 1, 168: 1, 169: 2, 170: 2, 171: 2}
ROWS_EVENT_TYPES = tuple(_KIND)

# Rows event flags
STMT_END_F = 0x0001
NO_FOREIGN_KEY_CHECKS_F = 0x0002
RELAXED_UNIQUE_CHECKS_F = 0x0004
COMPLETE_ROWS_F = 0x0008
PARTIAL_JSON_UPDATES = 1


@dataclass(frozen=True, slots=True)
class RowChange:
    """One changed row: ``before`` (UPDATE/DELETE) and ``after`` (INSERT/UPDATE) images.

    Each image maps column name -> typed value (None = SQL NULL); a column missing from the
    dict was not in the image.
    """

    before: dict[str, Any] | None
    after: dict[str, Any] | None


_new_row_change = slots_constructor(RowChange)  # RowChange(before, after), faster


@dataclass(frozen=True, slots=True)
class RowsEvent(Event):
    table_id: int
    flags: int
    extra_data: bytes
    column_count: int
    columns_present: bytes            # before image (UPDATE/DELETE) or the only image (WRITE)
    columns_present_after: bytes | None  # UPDATE / PARTIAL_UPDATE only
    rows: tuple[RowChange, ...]
    table: TableMapEvent | None

    type_name = "ROWS"

    @property
    def kind(self) -> str:
        return _KIND[self.header.type_code]

    @property
    def version(self) -> int:
        """0 pre-GA, 1, 2."""
        return _VERSION[self.header.type_code]

    @property
    def compressed(self) -> bool:
        return 166 <= self.header.type_code <= 171

    @property
    def schema_name(self) -> str | None:
        return self.table.schema if self.table is not None else None

    @property
    def table_name(self) -> str | None:
        return self.table.table if self.table is not None else None

    @property
    def partition_id(self) -> int | None:
        return _extra_info(self.extra_data, self.kind).get("partition_id")

    @property
    def source_partition_id(self) -> int | None:
        return _extra_info(self.extra_data, self.kind).get("source_partition_id")

    def fields_head(self) -> dict[str, Any]:
        """:meth:`fields` without its last key, ``rows`` (for callers that render the rows
        themselves, e.g. with ``render.render_row_json_text``)."""
        out: dict[str, Any] = {
            "schema": self.schema_name,
            "table": self.table_name,
            "kind": self.kind,
            "table_id": self.table_id,
            "flags": self.flags,
        }
        if self.extra_data:
            out["extra_data"] = self.extra_data.hex()
            out.update(_extra_info(self.extra_data, self.kind))
        return out

    def columns_by_name(self) -> dict[str, Any]:
        """Column name -> ``ColumnInfo`` of the event's table (empty without a TABLE_MAP)."""
        cols = self.table.columns if self.table is not None else ()
        return {c.name: c for c in cols}

    def fields(self) -> dict[str, Any]:
        from binlog_parser.rows.render import render_row

        by_name = self.columns_by_name()
        out = self.fields_head()
        out["rows"] = [
            {"before": render_row(r.before, by_name), "after": render_row(r.after, by_name)}
            for r in self.rows
        ]
        return out

    def text_lines(self) -> list[str]:
        """``mysqlbinlog -vv`` lines: ``### UPDATE `db`.`t``` / ``### WHERE`` / ``###   @1=... /* INT
        meta=0 nullable=0 is_null=0 */`` (the name instead of ``@N`` when the binlog or a schema
        gave it), then ``# Number of rows: N``."""
        from binlog_parser.rows.render import binlog_type_name, column_label, render_value_sql

        cols = self.table.columns if self.table is not None else ()
        by_name = {c.name: c for c in cols}
        verb = {WRITE: "INSERT INTO", UPDATE: "UPDATE", DELETE: "DELETE FROM"}[self.kind]
        lines = []
        for r in self.rows:
            lines.append(f"### {verb} `{self.schema_name}`.`{self.table_name}`")
            images = []
            if r.before is not None:
                images.append(("WHERE", r.before))
            if r.after is not None:
                images.append(("SET", r.after))
            for clause, img in images:
                lines.append(f"### {clause}")
                for name, v in img.items():
                    c = by_name.get(name)
                    if c is None:
                        lines.append(f"###   {name}={render_value_sql(v, None)}")
                        continue
                    lines.append(f"###   {column_label(c)}={render_value_sql(v, c)} /* {binlog_type_name(c)} "
                                 f"meta={c.meta} nullable={int(c.nullable)} is_null={int(v is None)} */")
        lines.append(f"# Number of rows: {len(self.rows)}")
        return lines


def _extra_info(extra: bytes, kind: str) -> dict[str, Any]:
    info: dict[str, Any] = {}
    pos = 0
    while pos < len(extra):
        t = extra[pos]
        pos += 1
        if t == 0 and pos < len(extra):  # NDB: length (incl. len+format), format, data
            n = extra[pos]
            info["ndb_info"] = extra[pos:pos + n].hex()
            pos += max(n, 1)
        elif t == 1 and pos + 2 <= len(extra):
            info["partition_id"] = int.from_bytes(extra[pos:pos + 2], "little")
            pos += 2
            if kind == UPDATE and pos + 2 <= len(extra):
                info["source_partition_id"] = int.from_bytes(extra[pos:pos + 2], "little")
                pos += 2
        else:
            break
    return info


# ---------------------------------------------------------------- decoding

_PLAN_CACHE_MAX = 256


def _no_progress(kind: str) -> RowsLayoutError:
    # a row whose images hold no column (an all-zero columns bitmap) consumes no bytes:
    # "decoding" it again and again would never reach the end of the event
    return RowsLayoutError(f"{kind} row image selects no column and consumes no bytes; "
                      "the rows cannot be delimited")


def _plan(tm: TableMapEvent, bitmap: bytes, partial: bool):
    """Per (table, bitmap): [(name, decoder, is_json_col, column)] for present columns."""
    key = (bitmap, partial)
    plan = tm.plan_cache.get(key)
    if plan is not None:
        return plan
    present = []
    for c in tm.columns:
        i = c.index
        if i // 8 < len(bitmap) and bitmap[i // 8] >> (i % 8) & 1:
            dec = tm.decoders[i]
            if dec is None:
                raise RowsLayoutError(f"column {i + 1} ({c.name}) has type {c.binlog_type} which cannot be decoded")
            present.append((c.name, dec, c))
    plan = _Plan(present)
    if len(tm.plan_cache) >= _PLAN_CACHE_MAX:  # one entry per distinct bitmap: keep it bounded
        tm.plan_cache.clear()
    tm.plan_cache[key] = plan
    return plan


class _Plan(tuple):
    """The present columns of an image, ``(name, decoder, column)`` each; ``read`` (once the
    plan has decoded ``_COMPILE_AFTER_ROWS`` images) is :func:`_read_image` for this plan
    compiled into straight-line code. ``rows`` counts the images decoded with it."""

    read: Any = None
    rows: int = 0


# compiling a reader costs about as much as a few hundred images decoded by the generic loop:
# plans that decode fewer images never pay for it
_COMPILE_AFTER_ROWS = 256


def _reader(plan: _Plan):
    """``(buf, pos) -> (row, pos)`` for a (non-partial) plan: compiled once it is hot."""
    read = plan.read
    if read is not None:
        return read
    if plan.rows >= _COMPILE_AFTER_ROWS:
        plan.read = read = _compile_image_reader(plan)
        return read
    return partial(_read_image, plan=plan)


def _inline_column_source(i: int, dec: Any, ns: dict[str, Any]) -> list[str]:
    """Source lines reading column ``i`` (no NULL) into ``v{i}``: fixed-width unpacks and the
    hot decoders inlined, anything else a call of its decoder ``d{i}``; binds what they use in ``ns``."""
    fast: list[str] = []
    fixed = getattr(dec, "fixed_unpack", None)
    inline = getattr(dec, "inline", None)
    if fixed is not None:
        ns[f"u{i}"] = fixed[0]
        fast.append(f"        v{i} = u{i}(buf, pos)[0]; pos += {fixed[1]}")
    elif inline is not None and inline[0] == "utf8":
        # values.py _length_prefixed with a utf-8 text decoder, inlined
        if inline[1] == 1:
            fast.append("        s_ = pos + 1; e_ = s_ + buf[pos]")
        else:
            fast.append("        s_ = pos + 2; e_ = s_ + _from_bytes(buf[pos:s_], 'little')")
        fast += ["        if e_ > blen: raise ValueError('value runs past the end of the event')",
                 "        b_ = buf[s_:e_]; pos = e_",
                 f"        try: v{i} = b_.decode('utf-8')",
                 f"        except UnicodeDecodeError: v{i} = b_"]
    elif inline is not None and inline[0] == "datetime2":
        # temporal.make_datetime2_decoder's fast path, inlined; short reads take the decoder
        _k, size, fshift, fmask, mult, fsp, make = inline
        ns[f"m{i}"] = make
        fast += [f"        e_ = pos + {size}",
                 f"        if e_ > blen: v{i}, pos = d{i}(buf, pos)",
                 "        else:",
                 "            x_ = _from_bytes(buf[pos:e_], 'big'); pos = e_",
                 f"            ip_ = (x_ >> {fshift}) - _DT_OFS",
                 "            if ip_ < 0: ip_ = -ip_",
                 "            ymd_ = ip_ >> 17; ym_ = ymd_ >> 5; hms_ = ip_ & 0x1FFFF",
                 f"            v{i} = m{i}(ym_ // 13, ym_ % 13, ymd_ & 31, hms_ >> 12, (hms_ >> 6) & 63, "
                 f"hms_ & 63, (x_ & {fmask}) * {mult}, {fsp})"]
    elif inline is not None and inline[0] == "timestamp_old":
        ns[f"m{i}"] = inline[1]
        fast.append(f"        v{i} = m{i}(_from_bytes(buf[pos:pos + 4], 'little'), 0, 0); pos += 4")
    elif inline is not None and inline[0] == "datetime_old":
        # an impossible value takes the decoder, which raises the exact error
        ns[f"m{i}"] = inline[1]
        fast += ["        e_ = pos + 8",
                 "        d_, t_ = divmod(_from_bytes(buf[pos:e_], 'little'), 1000000)",
                 "        y_ = d_ // 10000; mo_ = (d_ // 100) % 100; dd_ = d_ % 100",
                 "        h_ = t_ // 10000; mi_ = (t_ // 100) % 100; s_ = t_ % 100",
                 "        if y_ > 9999 or mo_ > 12 or dd_ > 31 or h_ > 23 or mi_ > 59 or s_ > 59:",
                 f"            v{i}, pos = d{i}(buf, pos)",
                 "        else:",
                 f"            v{i} = m{i}(y_, mo_, dd_, h_, mi_, s_, 0, 0); pos = e_"]
    else:
        fast.append(f"        v{i}, pos = d{i}(buf, pos)")
    return fast


def _compile_image_reader(plan: _Plan):
    """``(buf, pos) -> (row, pos)``, exactly :func:`_read_image` (no partial JSON) for ``plan``,
    as straight-line code: no per-column loop, tuple unpacking or NULL test when the image has
    no NULL, and fixed-width integers unpacked inline. Column names and decoders are bound as
    variables of the generated function, never written into its source."""
    n = len(plan)
    nb = (n + 7) >> 3
    ns: dict[str, Any] = {"RowsLayoutError": RowsLayoutError, "_from_bytes": int.from_bytes, "_len": len,
                          "_DT_OFS": _DATETIMEF_INT_OFS}
    fast: list[str] = []
    slow: list[str] = []
    for i, (name, dec, _c) in enumerate(plan):
        ns[f"k{i}"] = name
        ns[f"d{i}"] = dec
        fast += _inline_column_source(i, dec, ns)
        slow.append(f"        if nulls >> {i} & 1: row[k{i}] = None")
        slow.append(f"        else: row[k{i}], pos = d{i}(buf, pos)")
    fast.append("        row = {" + ", ".join(f"k{i}: v{i}" for i in range(n)) + "}")
    src = "\n".join([
        "def read(buf, pos):",
        f"    end = pos + {nb}",
        "    if end > _len(buf):",
        "        raise RowsLayoutError('row image runs past the end of the event')",
        "    nulls = buf[pos]" if nb == 1 else "    nulls = _from_bytes(buf[pos:end], 'little')",
        "    pos = end",
        "    blen = _len(buf)",
        "    if not nulls:",
        *fast,
        "    else:",
        "        row = {}",
        *slow,
        "    if pos > blen:",
        "        raise RowsLayoutError('row image runs past the end of the event')",
        "    return row, pos",
    ])
    return _compiled_reader(src, n, ns)


def _compiled_reader(src: str, n: int, ns: dict[str, Any]) -> Any:
    """The function ``read`` defined by ``src``, its code compiled once per distinct source."""
    code = _READER_CODE.get(src)
    if code is None:
        # the source depends only on the columns' kinds and sizes: tables of the same shape
        # (and the same table in every range / context of a process) share one compilation
        if len(_READER_CODE) >= _READER_CODE_MAX:
            _READER_CODE.clear()
        code = _READER_CODE[src] = compile(src, f"<rows image reader: {n} columns>", "exec")
    exec(code, ns)
    return ns["read"]


_READER_CODE: dict[str, Any] = {}  # generated reader source -> compiled code
_READER_CODE_MAX = 1024


def _read_image_pre_ga(buf: bytes, pos: int, plan):
    """Pre-GA (5.1.5-5.1.17) images carry the record's own NULL bytes: bit 0 is reserved and
    only NULL-able columns have a bit (TABLE_MAPs of that era have no NULL bitmap, so every
    column counts as NULL-able unless the map says otherwise)."""
    n_nullable = sum(1 for _n, _d, c in plan if c.nullable)
    nb = (n_nullable + 1 + 7) >> 3
    if pos + nb > len(buf):
        raise RowsLayoutError("row image runs past the end of the event")
    nulls = int.from_bytes(buf[pos:pos + nb], "little")
    pos += nb
    row: dict[str, Any] = {}
    bit = 1
    for name, dec, c in plan:
        if c.nullable:
            is_null = nulls >> bit & 1
            bit += 1
            if is_null:
                row[name] = None
                continue
        row[name], pos = dec(buf, pos)
    if pos > len(buf):
        raise RowsLayoutError("row image runs past the end of the event")
    return row, pos


def _read_image(buf: bytes, pos: int, plan, partial_cols: set[int] | None = None):
    if partial_cols is None:
        read = getattr(plan, "read", None)
        if read is not None:
            return read(buf, pos)
    n = len(plan)
    nb = (n + 7) >> 3
    if pos + nb > len(buf):
        raise RowsLayoutError("row image runs past the end of the event")
    nulls = int.from_bytes(buf[pos:pos + nb], "little")
    pos += nb
    row: dict[str, Any] = {}
    if partial_cols is None:
        for i, (name, dec, _c) in enumerate(plan):
            if nulls >> i & 1:
                row[name] = None
            else:
                row[name], pos = dec(buf, pos)
    else:
        for i, (name, dec, c) in enumerate(plan):
            if nulls >> i & 1:
                row[name] = None
            elif c.index in partial_cols:
                ln = c.meta
                size = int.from_bytes(buf[pos:pos + ln], "little")
                start = pos + ln
                pos = start + size
                if pos > len(buf):
                    raise RowsLayoutError("JSON diff runs past the end of the event")
                row[name] = PartialJson(parse_json_diffs(buf[start:pos]))
            else:
                row[name], pos = dec(buf, pos)
    if pos > len(buf):
        raise RowsLayoutError("row image runs past the end of the event")
    return row, pos


def _uncompress(data: bytes, pos: int, limit: int = DEFAULT_MAX_EVENT_SIZE) -> bytes:
    b = data[pos]
    if not b & 0x80 or (b >> 4) & 7 != 0:
        raise RowsLayoutError(f"unknown compressed rows header 0x{b:02x}")
    lenlen = b & 7
    if not 1 <= lenlen <= 4:
        raise RowsLayoutError(f"bad compressed length size {lenlen}")
    if pos + 1 + lenlen > len(data):
        raise RowsLayoutError("compressed rows header runs past the end of the event")
    size = int.from_bytes(data[pos + 1:pos + 1 + lenlen], "big")
    # the claim is checked against the limit and deflate's reach before inflating, and the
    # output is capped at the claim: a zlib bomb cannot allocate more than it declares
    return bounded_zlib_decompress(memoryview(data)[pos + 1 + lenlen:], size, limit)


#: what a value decoder raises when the bytes are not what the TABLE_MAP promises
_VALUE_ERRORS = (ValueError, IndexError, OverflowError, struct.error, TypeError, KeyError)


def _rows_head(data: bytes, t: int, phl: int) -> tuple[int, int, bytes, int]:
    """Post-header and extra data: ``(table_id, flags, extra, pos)``, every length checked."""
    id_len = 4 if phl == 6 else 6
    if len(data) < id_len + 2:
        raise RowsLayoutError(f"post-header needs {id_len + 2} bytes, the event body has {len(data)}")
    table_id = int.from_bytes(data[0:id_len], "little")
    flags = int.from_bytes(data[id_len:id_len + 2], "little")
    pos = id_len + 2
    extra = b""
    has_extra = phl == 10 if phl else _VERSION[t] == 2
    if has_extra:
        if pos + 2 > len(data):
            raise RowsLayoutError(f"extra-data length at byte {pos} runs past the end of the event body "
                             f"({len(data)} bytes)")
        elen = int.from_bytes(data[pos:pos + 2], "little")
        if elen < 2 or pos + elen > len(data):
            raise RowsLayoutError(f"extra-data length {elen} at byte {pos} is outside 2..{len(data) - pos} "
                             f"(the bytes left in the event body)")
        extra = data[pos + 2:pos + elen]
        pos += elen
    elif phl > pos:
        pos = phl
    return table_id, flags, extra, pos


def decode_rows_event(header: EventHeader, body: memoryview, ctx: DecodeContext) -> RowsEvent:
    ev = _native.decode_rows_event(header, body, ctx, RowsEvent)  # the compiled decoder, when built
    if ev is not None:
        return ev
    t = header.type_code
    data = bytes(body)
    tm: TableMapEvent | None = None
    try:
        table_id, flags, extra, pos = _rows_head(data, t, ctx.post_header_length(t))
        tm = ctx.table_maps.get(table_id)
        if tm is None:
            raise CorruptEventError(
                f"rows event for table_id {table_id} without a preceding TABLE_MAP",
                file=ctx.file, offset=header.pos, type_code=t)
        if pos >= len(data):
            raise RowsLayoutError(f"column count expected at byte {pos}, but the event body ends at byte {len(data)}")
        width, pos = packed_int(data, pos)
        if width is None:
            raise RowsLayoutError(f"column count at byte {pos - 1} is the NULL marker 0xfb")
        if width != tm.column_count:
            raise RowsLayoutError(f"rows event has {width} columns, TABLE_MAP has {tm.column_count}")
        nb = (width + 7) // 8
        bm_before = data[pos:pos + nb]
        pos += nb
        kind = _KIND[t]
        bm_after = None
        if kind == UPDATE and _VERSION[t] > 0:
            bm_after = data[pos:pos + nb]
            pos += nb
        elif kind == UPDATE:
            bm_after = bm_before  # pre-GA update: one bitmap for both images
        if len(bm_before) != nb or (bm_after is not None and len(bm_after) != nb):
            raise RowsLayoutError(f"columns bitmap of {nb} bytes runs past the end of the event body "
                             f"({len(data)} bytes)")
        if 166 <= t <= 171:
            if pos >= len(data):
                raise RowsLayoutError(f"compressed rows header expected at byte {pos}, but the event body ends")
            data = data[:pos] + _uncompress(data, pos, effective_max_event_size(ctx))
        try:
            rows = _decode_rows(data, pos, tm, kind, t, bm_before, bm_after)
        except (RowsLayoutError, *_VALUE_ERRORS) as exc:
            if isinstance(exc, JsonDiffError):
                raise
            raise RowsLayoutError(_locate_bad_value(data, pos, tm, kind, t, bm_before, bm_after, exc)) from None
    except CorruptEventError:
        raise
    except (RowsLayoutError, ValueError, IndexError, OverflowError, struct.error, zlib.error,
            JsonDiffError) as exc:
        raise CorruptEventError(f"bad rows event: {exc}{_hires_hint(tm, ctx)}", file=ctx.file,
                                offset=header.pos, type_code=t) from None
    return RowsEvent(header, table_id, flags, extra, width, bm_before,
                     bm_after if kind == UPDATE else None, rows, tm)


_FIXED_SIZES = {**INTEGER_SIZES, T.FLOAT: 4, T.DOUBLE: 8}


@dataclass(frozen=True)
class _CheckedTable:
    """A TABLE_MAP's columns with value decoders that name the column when they fail."""

    columns: tuple
    decoders: tuple
    plan_cache: dict


def _checked_decoder(dec: Any, col: Any) -> Any:
    if dec is None:
        return None
    size = _FIXED_SIZES.get(col.type)

    def run(buf: bytes, pos: int) -> tuple[Any, int]:
        where = f"column {col.index + 1} ({col.name}, {col.type_name}) at byte {pos} of the rows data"
        if size is not None and pos + size > len(buf):
            raise RowsLayoutError(f"{where}: the value needs {size} bytes, {len(buf) - pos} are left in the event")
        try:
            value, end = dec(buf, pos)
        except _VALUE_ERRORS as exc:
            raise RowsLayoutError(f"{where}: {_why(exc, len(buf) - pos)}") from None
        if end > len(buf):
            raise RowsLayoutError(f"{where}: the value needs {end - pos} bytes, {len(buf) - pos} are left")
        return value, end
    return run


def _why(exc: BaseException, left: int) -> str:
    """The decoder's own words, or - for a Python-level failure - what it means here."""
    if isinstance(exc, (struct.error, IndexError)):
        return f"the value runs past the end of the event ({left} bytes left)"
    own = type(exc).__module__.startswith("binlog_parser.") or (
        type(exc) is ValueError and str(exc).startswith(("value ", "decimal ")))
    if own:  # binlog_parser's own errors (and the decoders' ValueErrors) speak about the binlog
        return str(exc)
    return f"the bytes are not a valid value of this type ({left} bytes left)"


def _locate_bad_value(data: bytes, pos: int, tm: TableMapEvent, kind: str, t: int,
                      bm_before: bytes, bm_after: bytes | None, first: BaseException) -> str:
    """Which column of which row a failed decode stopped at, in words about the binlog.

    Why a second pass: the hot path (compiled readers, inlined integer and UTF-8 reads) leaves
    the bounds to Python's own slicing and ``struct``, whose errors name neither the column nor
    the limit. Only a rows event that already failed pays for the checked decode.
    """
    checked = _CheckedTable(tm.columns, tuple(_checked_decoder(d, c) for d, c in zip(tm.decoders, tm.columns)), {})
    try:
        _decode_rows(data, pos, checked, kind, t, bm_before, bm_after)
    except RowsLayoutError as exc:
        return str(exc)
    except _VALUE_ERRORS as exc:
        return f"row data does not match the TABLE_MAP's columns: {_why(exc, len(data) - pos)}"
    if isinstance(first, RowsLayoutError):
        return str(first)
    return f"row data does not match the TABLE_MAP's columns: {_why(first, len(data) - pos)}"


def _hires_hint(tm, ctx: DecodeContext) -> str:
    """Why a MariaDB rows event with old-code temporal columns may not decode."""
    if tm is None or not ctx.is_mariadb:
        return ""
    cols = [c.name for c in tm.columns if c.type in (T.TIME, T.DATETIME, T.TIMESTAMP) and not c.fsp]
    if not cols:
        return ""
    return (f" (table {tm.schema}.{tm.table}: columns {', '.join(cols)} are logged with the old "
            f"TIME/DATETIME/TIMESTAMP type codes; if any is TIME/DATETIME/TIMESTAMP(n>0) in "
            f"MariaDB's 5.3 format (mysql56_temporal_format=OFF, or a table from MariaDB <= 10.0), "
            f"its size is not in the binlog: give its fsp in the schema, e.g. "
            f"SchemaRegistry.add_ddl(CREATE TABLE ...))")


def _decode_rows(data, pos, tm, kind, t, bm_before, bm_after):
    # the compiled decoder when built (binlog_parser/rows/_native.py); not for the checked
    # second pass of _locate_bad_value, whose column decoders word the error
    if _VERSION[t] and t != 39 and type(tm) is TableMapEvent:
        native_rows = _native.decode_rows(data, pos, kind, _plan(tm, bm_before, False),
                                          _plan(tm, bm_after, False) if kind == UPDATE else None, RowChange)
        if native_rows is not None:
            return native_rows
    if _VERSION[t] == 0:
        return _decode_rows_pre_ga(data, pos, tm, kind, bm_before)
    if t == 39:
        return _decode_partial_json_updates(data, pos, tm, bm_before, bm_after)
    rows: list[Any] = []
    end = len(data)
    if kind == WRITE or kind == DELETE:
        # one image per row (the after image of a WRITE, the before image of a DELETE); the
        # two loops stay apart so that no row pays for the choice
        plan = _plan(tm, bm_before, False)
        if not plan and pos < end:
            raise _no_progress(kind)
        read = _reader(plan)
        append = rows.append
        if kind == WRITE:
            while pos < end:
                after, pos = read(data, pos)
                append(_new_row_change(None, after))
        else:
            while pos < end:
                before, pos = read(data, pos)
                append(_new_row_change(before, None))
        plan.rows += len(rows)
    else:
        plan_b = _plan(tm, bm_before, False)
        plan_a = _plan(tm, bm_after, False)
        if not plan_b and not plan_a and pos < end:
            raise _no_progress(kind)
        read_b, read_a = _reader(plan_b), _reader(plan_a)
        append = rows.append
        while pos < end:
            before, pos = read_b(data, pos)
            after, pos = read_a(data, pos)
            append(_new_row_change(before, after))
        plan_b.rows += len(rows)
        if plan_a is not plan_b:
            plan_a.rows += len(rows)
    return tuple(rows)


def _decode_rows_pre_ga(data, pos, tm, kind, bm_before):
    """Rows of a pre-GA (MySQL 5.1.5-5.1.17) rows event: one column plan for both images."""
    rows = []
    end = len(data)
    plan = _plan(tm, bm_before, False)
    while pos < end:
        first, pos = _read_image_pre_ga(data, pos, plan)
        if kind == WRITE:
            rows.append(_new_row_change(None, first))
        elif kind == DELETE:
            rows.append(_new_row_change(first, None))
        else:
            second, pos = _read_image_pre_ga(data, pos, plan)
            rows.append(_new_row_change(first, second))
    return tuple(rows)


def _decode_partial_json_updates(data, pos, tm, bm_before, bm_after):
    """Rows of a PARTIAL_UPDATE_ROWS event: JSON columns may hold diffs, applied to the before image."""
    rows = []
    end = len(data)
    plan_b = _plan(tm, bm_before, False)
    plan_a = _plan(tm, bm_after, True)
    json_cols = [c.index for c in tm.columns if c.type == T.JSON]
    while pos < end:
        before, pos = _read_image(data, pos, plan_b)
        opts, pos = packed_int(data, pos)
        partial_cols: set[int] | None = None
        if opts and opts & PARTIAL_JSON_UPDATES:
            jb = (len(json_cols) + 7) // 8
            bits = int.from_bytes(data[pos:pos + jb], "little")
            pos += jb
            partial_cols = {ci for k, ci in enumerate(json_cols) if bits >> k & 1}
        after, pos = _read_image(data, pos, plan_a, partial_cols)
        if partial_cols:
            for c in tm.columns:
                if c.index in partial_cols and isinstance(after.get(c.name), PartialJson):
                    pj = after[c.name]
                    prev = before.get(c.name)
                    if isinstance(prev, MySQLJson):
                        try:
                            doc = MySQLJson(apply_json_diffs(prev.tree, pj.diffs))
                        except JsonDiffError:
                            doc = None
                        after[c.name] = PartialJson(pj.diffs, doc)
        rows.append(_new_row_change(before, after))
    return tuple(rows)
