"""Decode one binlog object (or a byte range of it) into the ingest tables' rows, column by column.

This runs on the executors. Input: the bytes of one range of one file (plus, for a range
that does not start at offset 0, the file's :class:`~binlog_parser.context.DecodeContext`
from its FORMAT_DESCRIPTION). Output (:meth:`RangeDecoder.batches`): ``(kind, batch)`` pairs
where ``kind`` is one of :data:`KINDS` and ``batch`` a ``pyarrow.RecordBatch`` in the schema of
the matching table (:func:`binlake.ingest.layout.batch_schema`), then one ``("file_facts", dict)``: the partial
per-range facts that :func:`merge_file_facts` folds into one ``meta.binlog_files`` row on the
driver. Values go straight into per-table column buffers (:mod:`binlake.ingest.columns`), never
through a dict per row: that is what ingest spends its CPU on (issue 13). :func:`decode_range`
and :func:`decode_file` give the same rows as dicts, for tests and tools.

Rules:

* every event becomes a ``bronze.events`` row, embedded TRANSACTION_PAYLOAD events too;
* nothing vanishes: an event that fails to decode becomes a ``quarantine`` row and decoding
  resumes after it (its size is in its header); a truncated tail becomes a ``tail`` row; a
  framing error that cannot be skipped becomes a ``range`` row covering the rest;
* CRC mismatches are decoded anyway (``checksum = 'bad'``);
* transactions are assembled as the events stream by (GTID / BEGIN ... XID / COMMIT / DDL);
  row changes are buffered per transaction (to carry its commit time) up to
  ``max_buffered_rows``, then flushed with the best time known so far;
* a row image is rendered once per representation ``silver.row_changes`` stores (MySQL text
  for the maps, typed JSON); ``bronze.events.fields`` of a rows event does not repeat them: it
  has ``row_count`` and ``row_images`` (:data:`ROW_IMAGES_TABLE`) instead of ``rows``;
* with the compiled extension, the framing loop appends the rows of the events of plain
  transactions itself (``EventSink``, docs/native.md "The event sink": GTID, BEGIN,
  annotations, TABLE_MAP, rows events, XID) by these same rules, and this loop counts them in
  (:meth:`RangeDecoder._take_sunk`) before it handles anything else: the same rows, in the same
  order and batches, as without it.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import re
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from binlake.ingest.columns import ColumnRangeError, TableColumns
from binlake.ingest.layout import (
    EVENT_COLUMNS,
    QUARANTINE_COLUMNS,
    ROW_CHANGE_COLUMNS,
    ROW_CHANGE_IMAGES,
    ROW_CHANGE_LATE,
    ROW_CHANGE_SEQUENCES,
    STATEMENT_COLUMNS,
    TRX_COLUMNS,
)
from binlake.reconcile.coverage import MARIADB, MYSQL, GtidIntervals, GtidIntervalsBuilder, split_series
from binlog_parser.constants import EventType, event_type_name
from binlog_parser.context import DecodeContext
from binlog_parser.errors import BinlogError, TruncatedEventError
from binlog_parser.events import (
    AnnotateRowsEvent,
    GtidEvent,
    MariaGtidEvent,
    QueryEvent,
    RowsQueryEvent,
    XidEvent,
    to_json_value,
)
from binlog_parser.framing import ON_ERROR_RESYNC, SkippedBytes
from binlog_parser.reader import BinlogReader, read_format_description
from binlog_parser.render import event_fields_json, fields_layout
from binlog_parser.rows import _native
from binlog_parser.rows.render import (
    ImageRenderer,
    append_images,
    compact_json,
    new_image_sink,
)

if TYPE_CHECKING:
    from binlog_parser._native_ext import ImageColumns, RowColumns

KINDS = ("events", "quarantine", "transactions", "row_changes", "statements", "file_facts")
#: where the row images of a rows event are (``bronze.events.fields`` points there)
ROW_IMAGES_TABLE = "silver.row_changes"
#: rows a table's buffers gather before they are taken as one Arrow batch. Each batch costs a
#: round of Python work (its arrays wrapped, its dates, its split by partition, one write to the
#: Parquet writer), so fewer, larger batches cost fewer instructions, at the price of a little
#: more peak memory per worker; 16384 was the best of the sizes measured (bench/HISTORY.md).
DEFAULT_BATCH_ROWS = 16384

_T = EventType
_GTID_TYPES = {int(_T.GTID), int(_T.ANONYMOUS_GTID), int(_T.GTID_TAGGED)}
_MARIA_GTID = int(_T.MARIA_GTID)
_TRX_START_TYPES = _GTID_TYPES | {_MARIA_GTID}
_INSERT_TYPES = {int(_T.PRE_GA_WRITE_ROWS), int(_T.WRITE_ROWS_V1), int(_T.WRITE_ROWS_V2),
                 int(_T.MARIA_WRITE_ROWS_COMPRESSED_V1), int(_T.MARIA_WRITE_ROWS_COMPRESSED)}
_UPDATE_TYPES = {int(_T.PRE_GA_UPDATE_ROWS), int(_T.UPDATE_ROWS_V1), int(_T.UPDATE_ROWS_V2),
                 int(_T.PARTIAL_UPDATE_ROWS), int(_T.MARIA_UPDATE_ROWS_COMPRESSED_V1),
                 int(_T.MARIA_UPDATE_ROWS_COMPRESSED)}
_DELETE_TYPES = {int(_T.PRE_GA_DELETE_ROWS), int(_T.DELETE_ROWS_V1), int(_T.DELETE_ROWS_V2),
                 int(_T.MARIA_DELETE_ROWS_COMPRESSED_V1), int(_T.MARIA_DELETE_ROWS_COMPRESSED)}
_ROWS_TYPES = _INSERT_TYPES | _UPDATE_TYPES | _DELETE_TYPES
_QUERY_TYPES = {int(_T.QUERY), int(_T.MARIA_QUERY_COMPRESSED)}
_ANNOTATION_TYPES = {int(_T.ROWS_QUERY), int(_T.MARIA_ANNOTATE_ROWS)}
_XID = int(_T.XID)
_XA_PREPARE = int(_T.XA_PREPARE)
_TABLE_MAP = int(_T.TABLE_MAP)
_ROTATE = int(_T.ROTATE)
_STOP = int(_T.STOP)
_FDE = int(_T.FORMAT_DESCRIPTION)
_START_V3 = int(_T.START_V3)
_PREVIOUS_GTIDS = int(_T.PREVIOUS_GTIDS)
_GTID_LIST = int(_T.MARIA_GTID_LIST)
_PAYLOAD = int(_T.TRANSACTION_PAYLOAD)

_DDL_WORDS = {"CREATE", "ALTER", "DROP", "RENAME", "TRUNCATE"}
_DML_WORDS = {"INSERT", "UPDATE", "DELETE", "REPLACE", "LOAD", "CALL", "DO"}
_TCL_WORDS = {"BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "XA", "START"}
_DCL_WORDS = {"GRANT", "REVOKE"}
_LEADING_COMMENT = re.compile(r"^\s*(?:/\*.*?\*/\s*|--[^\n]*\n\s*|#[^\n]*\n\s*)*", re.S)
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_MAX_TS = 253402300799  # 9999-12-31T23:59:59
_MAX_US = _MAX_TS * 1_000_000


def statement_kind(sql: str | None) -> str:
    """'DDL', 'DML', 'TCL', 'DCL' or 'OTHER' by the statement's leading keyword."""
    if not sql:
        return "OTHER"
    s = _LEADING_COMMENT.sub("", sql, count=1)
    word = s[:24].split(None, 1)[0].upper().rstrip(";") if s.strip() else ""
    if word in _DDL_WORDS:
        # CREATE USER / DROP USER / ALTER USER ... are account management
        rest = s.split(None, 2)
        if len(rest) > 1 and rest[1].upper() in ("USER", "ROLE"):
            return "DCL"
        return "DDL"
    if word in _DML_WORDS:
        return "DML"
    if word in _TCL_WORDS:
        return "TCL"
    if word in _DCL_WORDS:
        return "DCL"
    return "OTHER"


# Timestamps travel as integer microseconds since the epoch (binlake.ingest.columns): no datetime
# object per event.

def _us(seconds: int | None) -> int | None:
    """A header timestamp (seconds) in microseconds; None outside what a TIMESTAMP holds."""
    if seconds is None or seconds < 0 or seconds > _MAX_TS:
        return None
    return seconds * 1_000_000


def _valid_us(micros: int | None) -> int | None:
    """A GTID event's commit timestamp (microseconds); None when absent (0) or out of range."""
    if not micros or micros < 0 or micros > _MAX_US:
        return None
    return micros


def _datetime(micros: int | None) -> _dt.datetime | None:
    return None if micros is None else _EPOCH + _dt.timedelta(microseconds=micros)


def flavor_of(server_version: str | None) -> str:
    return MARIADB if server_version and "mariadb" in server_version.lower() else MYSQL



# ---------------------------------------------------------------------------------------
# Row images
# ---------------------------------------------------------------------------------------

#: one row change's images as silver.row_changes stores them: (before JSON, after JSON)
Image = tuple[str | None, str | None]


def row_images(event: Any, fields: dict[str, Any]) -> Iterator[Image]:
    """Yield ``(before, after)`` per row of a rows event: each image's typed JSON text
    (``render_row``'s values: numbers as JSON numbers, exact DECIMALs and temporals as strings),
    None for a side the change has no image of. The server's text of a value is derived from
    it where needed (docs/row_values.md), not stored."""
    for row in fields.get("rows") or []:
        before = row.get("before")
        after = row.get("after")
        yield (None if before is None else compact_json(before), None if after is None else compact_json(after))


def rows_fields_json(head_json: str, rows: int) -> str:
    """``bronze.events.fields`` of a rows event: its fields without the row images, which
    ``silver.row_changes`` holds (same source, file, pos, payload_index), and their count.
    ``head_json``: the head's JSON without its closing brace (:func:`unclosed_json`)."""
    return f'{head_json},"row_count":{rows},"row_images":"{ROW_IMAGES_TABLE}"}}'


def unclosed_json(head: dict[str, Any]) -> str:
    """``compact_json(head)`` without its closing brace, for keys appended after it."""
    text = compact_json(head)
    if not head or not text.endswith("}"):
        raise ValueError(f"a rows event's head is not a JSON object with keys: {text[:80]}")
    return text[:-1]


# ---------------------------------------------------------------------------------------
# The decoder state machine
# ---------------------------------------------------------------------------------------


class _Trx:
    """An open transaction: its ``silver.transactions`` values so far, and its row changes not
    yet flushed (``pending``: the event time and row count of each rows event waiting for the
    commit time)."""

    __slots__ = ("start_pos", "begin_us", "server_id", "gtid", "gtid_kind", "uuid", "tag", "gno",
                 "mariadb_domain_id", "mariadb_server_id", "mariadb_seq_no", "last_committed",
                 "sequence_number", "transaction_length", "original_server_version",
                 "immediate_server_version", "original_commit_us", "immediate_commit_us", "xid",
                 "statements", "tables", "row_changes", "pending_rows", "pending", "has_ddl",
                 "has_dml", "commit_us", "began_with_begin", "events", "substantive")

    def __init__(self, start_pos: int, begin_us: int | None, server_id: int | None) -> None:
        self.start_pos = start_pos
        self.begin_us = begin_us
        self.server_id = server_id
        self.gtid: str | None = None
        self.gtid_kind = "NONE"
        self.uuid = self.tag = None
        self.gno = self.mariadb_domain_id = self.mariadb_server_id = self.mariadb_seq_no = None
        self.last_committed = self.sequence_number = self.transaction_length = None
        self.original_server_version = self.immediate_server_version = None
        self.original_commit_us: int | None = None
        self.immediate_commit_us: int | None = None
        self.xid = None
        self.statements: list[str] = []
        self.tables: set[str] = set()
        self.row_changes = 0
        self.pending_rows = 0
        self.pending: list[tuple[int | None, int]] = []
        self.has_ddl = False
        self.has_dml = False
        self.commit_us: int | None = None
        self.began_with_begin = False
        self.events = 0
        self.substantive = False  # saw a statement, table map, row or XID

    @classmethod
    def opened_by_the_sink(cls, values: tuple[Any, ...]) -> _Trx:
        """A transaction the event sink opened (its GTID's values, ``EventSink.take``; its
        counts come apart)."""
        (start_pos, begin_us, server_id, gtid, gtid_kind, uuid, gno, mariadb_domain_id, mariadb_seq_no, last_committed,
         sequence_number, transaction_length, original_server_version, immediate_server_version, original_commit_us,
         immediate_commit_us, commit_us, began_with_begin) = values
        trx = cls(start_pos, begin_us, server_id)
        trx.gtid, trx.gtid_kind, trx.uuid, trx.gno = gtid, gtid_kind, uuid, gno
        if gtid_kind == "MARIADB":
            trx.mariadb_domain_id, trx.mariadb_server_id, trx.mariadb_seq_no = mariadb_domain_id, server_id, mariadb_seq_no
        trx.last_committed, trx.sequence_number, trx.transaction_length = last_committed, sequence_number, \
            transaction_length
        trx.original_server_version, trx.immediate_server_version = original_server_version, immediate_server_version
        trx.original_commit_us, trx.immediate_commit_us, trx.commit_us = original_commit_us, immediate_commit_us, \
            commit_us
        trx.began_with_begin = began_with_begin
        return trx


class _EventPlace(NamedTuple):
    """Where an event sits, as every row derived from it records it."""

    pos: int
    payload_index: int | None
    gtid: str | None
    trx_pos: int | None
    event_us: int | None
    db: str | None
    table: str | None


#: ``_EventPlace(...)`` without the generated Python ``__new__`` (one per rows event)
_new_place = tuple.__new__

# How _on_event handles a type code: one dict lookup per event instead of a chain of set tests.
_ON_OTHER, _ON_ROWS, _ON_TABLE_MAP, _ON_QUERY, _ON_ANNOTATION, _ON_XID, _ON_XA_PREPARE, _ON_TRX_START = range(8)
_HANDLING: dict[int, int] = {
    **dict.fromkeys(_ROWS_TYPES, _ON_ROWS), _TABLE_MAP: _ON_TABLE_MAP,
    **dict.fromkeys(_QUERY_TYPES, _ON_QUERY), **dict.fromkeys(_ANNOTATION_TYPES, _ON_ANNOTATION),
    _XID: _ON_XID, _XA_PREPARE: _ON_XA_PREPARE, **dict.fromkeys(_TRX_START_TYPES, _ON_TRX_START)}
#: the only type codes _note_file_facts looks at
_FILE_FACT_TYPES = frozenset({_FDE, _START_V3, _PREVIOUS_GTIDS, _GTID_LIST, _ROTATE, _STOP})
#: ``event.name`` of the defined codes (``event_type_name``'s table; other codes ask ``event.name``)
_TYPE_NAMES: dict[int, str] = {int(t): t.name for t in EventType}
#: silver.row_changes.operation by rows event type code
_OPERATION: dict[int, str] = {**dict.fromkeys(_DELETE_TYPES, "delete"), **dict.fromkeys(_UPDATE_TYPES, "update"),
                              **dict.fromkeys(_INSERT_TYPES, "insert")}
_ANONYMOUS_GTID = int(_T.ANONYMOUS_GTID)
#: the event classes whose fields the event sink writes as JSON, by type code
_SUNK_FIELDS: dict[int, type] = {int(_T.QUERY): QueryEvent, _XID: XidEvent, int(_T.GTID): GtidEvent,
                                 _ANONYMOUS_GTID: GtidEvent, _MARIA_GTID: MariaGtidEvent,
                                 int(_T.ROWS_QUERY): RowsQueryEvent, int(_T.MARIA_ANNOTATE_ROWS): AnnotateRowsEvent}
#: the fields of an event read only as JSON (never mutated)
_NO_FIELDS: dict[str, Any] = {}


def _db_and_table(event: Any, fields: dict[str, Any]) -> tuple[Any, Any]:
    """The schema and table a TABLE_MAP or rows event names (``bronze.events.db`` /
    ``table_name`` before ``or None``), from its fields (or head)."""
    return fields.get("schema", getattr(event, "schema", None)), fields.get("table")


def _table_key(db: Any, table: Any) -> str | None:
    """A transaction's ``tables`` entry for a rows event's table (None: it names neither)."""
    return f"{db}.{table}" if db or table else None


def _query_word(sql: str) -> str:
    """``sql.strip().upper()`` as far as the transaction logic compares it: equal to it when it is
    9 characters or fewer, else its head (``upper`` maps each character to one or more, so a head
    of 9 can equal none of BEGIN / COMMIT / ROLLBACK and starts as the whole does), without
    upper-casing a long statement."""
    return sql.strip()[:9].upper()


class RangeDecoder:
    """Decode the events of ``data`` (file bytes ``[range_start, range_start + len(data))``).

    ``context`` is required when ``range_start > 0`` (from :func:`read_format_description`
    on the file's head). ``file_size`` tells whether this range reaches the end of the file
    (truncation is only reported at the real end of the file). :meth:`batches` yields batches
    of about ``batch_rows`` rows (row changes of one transaction are only cut past
    ``max_buffered_rows``).
    """

    def __init__(self, data: bytes | memoryview, *, source: str, file: str, uri: str | None = None,
                 range_start: int = 0, range_index: int = 0, file_size: int | None = None,
                 context: DecodeContext | None = None, keep_raw: bool = False,
                 run_id: str | None = None, max_buffered_rows: int = 20000,
                 batch_rows: int = DEFAULT_BATCH_ROWS) -> None:
        self.data = data
        self.source = source
        self.file = file
        self.uri = uri or file
        self.file_seq = split_series(file)[1]
        self.range_start = range_start
        self.range_end = range_start + len(data)
        self.range_index = range_index
        self.file_size = file_size
        self.is_last_range = file_size is None or self.range_end >= file_size
        self.context = context
        self.keep_raw = keep_raw
        self.run_id = run_id
        self.max_buffered_rows = max_buffered_rows
        self.batch_rows = batch_rows
        # per-range facts
        self.flavor: str | None = flavor_of(context.server_version) if context else None
        self.facts: dict[str, Any] = {
            "source": source, "file": file, "file_seq": self.file_seq, "uri": self.uri,
            "range_index": range_index, "range_start": range_start, "range_end": self.range_end,
            "binlog_version": context.binlog_version if context else None,
            "server_version": context.server_version if context else None,
            "server_id": None, "checksum_alg": None,
            "previous_gtids": None, "previous_gtids_raw": None,
            "first_gtid": None, "last_gtid": None, "transactions": 0, "events": 0,
            "first_event_time": None, "last_event_time": None,
            "closing_event": None, "next_file": None, "truncated": False,
            "decoded_bytes": 0, "quarantined": 0,
            "skipped_ranges": [],  # [start, end) of bytes stepped over (not a meta column: the run summary's)
            "sha1": hashlib.sha1(data).hexdigest(),
        }
        self._first_us: int | None = None
        self._last_us: int | None = None
        self._gtids: GtidIntervalsBuilder | None = None
        self._trx: _Trx | None = None
        self._payload_index: int | None = None
        self._payload_pos: int | None = None
        self._payload_end: int | None = None
        self._pos = range_start
        # table_id -> (columns, fields, fields JSON) of the last TABLE_MAP seen for it
        self._table_map_json: dict[Any, tuple[Any, dict[str, Any], str]] = {}
        # table_id -> (columns, the row image renderer of its rows events)
        self._renderers: dict[Any, tuple[Any, ImageRenderer]] = {}
        # (table_id, type code, flags, extra data) -> (TABLE_MAP columns, head, head JSON unclosed)
        self._rows_heads: dict[tuple[Any, ...], tuple[Any, dict[str, Any], str]] = {}
        self._init_columns()

    def _init_columns(self) -> None:
        """One column buffer per table; a rows event's columns are appended once for its rows."""
        same = {"source": self.source, "file": self.file, "file_seq": self.file_seq}
        self._images = new_image_sink()  # the row image columns: the renderer appends to them
        self.tables: dict[str, TableColumns] = {
            "events": TableColumns("bronze.events", same, row_columns=EVENT_COLUMNS),
            "quarantine": TableColumns("bronze.quarantine", dict(same, run_id=self.run_id),
                                       row_columns=QUARANTINE_COLUMNS),
            "transactions": TableColumns("silver.transactions", same, row_columns=TRX_COLUMNS),
            "row_changes": TableColumns(
                "silver.row_changes", same, images=self._images, image_columns=ROW_CHANGE_IMAGES,
                row_columns=ROW_CHANGE_COLUMNS, late_columns=ROW_CHANGE_LATE, sequence_columns=ROW_CHANGE_SEQUENCES),
            "statements": TableColumns("silver.statements", same, row_columns=STATEMENT_COLUMNS),
        }
        t = self.tables
        # one call per row (in the order of EVENT_COLUMNS, ...); one per rows event for its row
        # changes, and one per rows event for their commit time when the transaction ends
        self._ev, self._q, self._tx, self._st = t["events"].row, t["quarantine"].row, t["transactions"].row, \
            t["statements"].row
        self._rc, self._rc_commit_time = t["row_changes"].repeated, t["row_changes"].late
        self._ev_rows, self._rc_rows = t["events"].row_buffer, t["row_changes"].row_buffer
        # with the extension, the compiled framing loop appends the rows of the events of plain
        # transactions (``_native.event_sink``; what the sink took is counted in by _take_sunk).
        # The buffers are the extension's RowColumns / ImageColumns whenever it is loaded, the
        # only case in which a sink is made (SINK_BUFFERS: the layout it checks them against)
        buffers = cast("tuple[RowColumns, RowColumns, RowColumns, RowColumns]",
                       (self._ev_rows, self._rc_rows, t["row_changes"].late_buffer, t["transactions"].row_buffer))
        self._sink = None if self.keep_raw else _native.event_sink(
            buffers, cast("ImageColumns", self._images),
            {tc: layout for tc, cls in _SUNK_FIELDS.items() if (layout := fields_layout(cls)) is not None},
            _TYPE_NAMES, _OPERATION, self.batch_rows, self.max_buffered_rows)

    # -- public ---------------------------------------------------------------------------
    def batches(self) -> Iterator[tuple[str, Any]]:
        """``(kind, RecordBatch)`` pairs as the buffers fill, the rest at the end, then
        ``("file_facts", facts)``."""
        yield from self._decode()
        self._close_trx(None, cut=True, at_end=True)
        for kind, cols in self.tables.items():
            if len(cols):
                yield kind, cols.take_batch()
        facts = self.facts
        builder = self._builder()
        facts["flavor"] = self.flavor or MYSQL
        facts["contained_gtids"] = str(builder.build())
        facts["duplicate_gtids"] = str(builder.build_duplicates())
        facts["decoded_bytes"] = self._pos - self.range_start
        facts["first_event_time"] = _datetime(self._first_us)
        facts["last_event_time"] = _datetime(self._last_us)
        yield "file_facts", facts

    def _full_batches(self) -> Iterator[tuple[str, Any]]:
        """Batches of the buffers holding ``batch_rows`` rows or more (row changes only when
        none waits for its transaction's commit time)."""
        pending = self._trx is not None and self._trx.pending
        for kind, cols in self.tables.items():
            if len(cols) >= self.batch_rows and not (pending and kind == "row_changes"):
                yield kind, cols.take_batch()

    # -- helpers --------------------------------------------------------------------------
    def _builder(self) -> GtidIntervalsBuilder:
        if self._gtids is None:
            self._gtids = GtidIntervalsBuilder(self.flavor or MYSQL)
        return self._gtids

    def _reader(self, start: int | None, context: DecodeContext | None) -> BinlogReader:
        """A resynchronising reader: one bad event is a quarantine row, not the end of the range.
        Its rows events keep their images as bytes (``rows_as_bytes``): they are rendered
        straight from them, and no Python value is built for them."""
        if context is None:
            # range 0: the bytes are the file head, the reader detects the format
            reader = BinlogReader(self.data, file_name=self.file, lenient=True, start_position=start,
                                  on_error=ON_ERROR_RESYNC)
        else:
            if context is self.context:
                # the caller's context stays as it was: decoding registers TABLE_MAPs in a copy
                # (a second decode of the range with it gives the same rows)
                context = dataclasses.replace(context, table_maps=dict(context.table_maps))
            reader = BinlogReader(self.data, file_name=self.file, lenient=True, context=context,
                                  source_offset=self.range_start,
                                  start_position=start if start is not None else max(self.range_start, 4),
                                  on_error=ON_ERROR_RESYNC)
        reader.context.rows_as_bytes = True
        reader.context.event_sink = self._sink
        return reader

    def _quarantine(self, exc: BaseException, scope: str, pos: int | None, type_code: int | None,
                    skip: SkippedBytes | None = None) -> None:
        """A quarantine row. For a skipped byte range (``skip``): scope ``event`` when exactly the
        bad event was stepped over (its own size), ``skipped`` otherwise; ``range_start`` /
        ``range_end`` are the skipped bytes and ``raw_head`` their first bytes (at most 64 KiB)."""
        self.facts["quarantined"] += 1
        message = getattr(exc, "message", None) or str(exc)
        if skip is None:
            head = None
            if pos is not None and self.range_start <= pos < self.range_end:
                off = pos - self.range_start
                head = bytes(self.data[off:off + 256])
            start, end = self.range_start, (None if self.is_last_range else self.range_end)
        else:
            message = (f"{message} (skipped bytes {skip.start}-{skip.end}, {skip.size} bytes; "
                       f"next event found by {skip.found_by.replace('_', ' ')})")
            head, start, end = skip.head, skip.start, skip.end
            self.facts["skipped_ranges"].append([skip.start, skip.end])
        self._q(pos, scope, type_code, event_type_name(type_code) if type_code is not None else None,
                type(exc).__name__, message, start, end, head)

    def _unfit(self, misfits: list[str], pos: int | None, type_code: int | None) -> None:
        """Integers that do not fit their columns (a flipped byte in an XID, say): the row was
        kept with NULL in their place; one quarantine row (scope ``value``) names them."""
        self._quarantine(ColumnRangeError("; ".join(misfits) + "; stored as NULL"), "value", pos, type_code)

    def _quarantine_skip(self, skip: SkippedBytes) -> None:
        exc = skip.error
        self._quarantine(exc, "event" if skip.found_by == "event_size" else "skipped", skip.start,
                         exc.type_code, skip)

    def _event_size_at(self, pos: int) -> int | None:
        off = pos - self.range_start
        if off < 0 or off + 13 > len(self.data):
            return None
        size = int.from_bytes(self.data[off + 9:off + 13], "little")
        return size if size >= 13 else None

    def _take_sunk(self) -> None:
        """Count in the events the sink took since the last call (``_native.event_sink``): it
        appended their rows; their part in the range's facts and in the open transaction is
        added here, as ``_on_event`` adds it for the events it handles, and a transaction the
        sink opened and has not ended becomes this loop's. Called before anything else is
        handled."""
        sink = self._sink
        if sink is None or not sink.seen:
            return
        (seen, next_pos, first_us, last_us, ended, gtids, first_gtid, last_gtid, mariadb), opened, counts = sink.take()
        facts = self.facts
        facts["events"] += seen
        facts["transactions"] += ended
        if mariadb:
            self.flavor = MARIADB
        if gtids:
            add_run = self._builder().add_run
            for sid, first, last in gtids:
                add_run(sid, first, last)
        if first_gtid is not None and facts["first_gtid"] is None:
            facts["first_gtid"] = first_gtid
        if last_gtid is not None:
            facts["last_gtid"] = last_gtid
        self._pos = max(self._pos, next_pos)
        self._payload_pos = self._payload_index = None
        if first_us is not None and (self._first_us is None or first_us < self._first_us):
            self._first_us = first_us
        if last_us is not None and (self._last_us is None or last_us > self._last_us):
            self._last_us = last_us
        if opened is not None:
            self._trx = _Trx.opened_by_the_sink(opened)
        trx = self._trx
        events, substantive, has_dml, rows, tables, pending, statements = counts
        if trx is None:
            return
        trx.events += events
        trx.statements.extend(statements)
        trx.substantive = trx.substantive or substantive
        trx.has_dml = trx.has_dml or has_dml
        trx.tables.update(tables)
        trx.pending.extend(pending)
        trx.row_changes += rows
        trx.pending_rows += rows
        sink.pending_base = trx.pending_rows

    def _decode(self) -> Iterator[tuple[str, Any]]:
        context = self.context
        start: int | None = None
        limit, ev_rows, rc_rows = self.batch_rows, self._ev_rows, self._rc_rows
        on_event = self._on_event
        events = 0  # counted here, into facts once (not a dict update per event)
        try:
            while True:
                reader = self._reader(start, context)
                try:
                    for item in reader.records():
                        if item.__class__ is SkippedBytes:
                            assert isinstance(item, SkippedBytes)
                            self._take_sunk()
                            self._quarantine_skip(item)
                        else:
                            events += 1
                            on_event(item)
                        if len(ev_rows) >= limit or len(rc_rows) >= limit:
                            yield from self._full_batches()
                    self._pos = max(self._pos, reader.position)
                    return
                except TruncatedEventError as exc:
                    self._take_sunk()
                    self._pos = max(self._pos, reader.position)
                    if self.is_last_range:
                        self.facts["truncated"] = True
                        self._quarantine(exc, "tail", exc.offset, exc.type_code)
                    else:
                        self._quarantine(exc, "range", exc.offset, exc.type_code)
                    return
                except BinlogError as exc:
                    self._take_sunk()
                    start = self._after_bad_event(exc, reader)
                    if start is None:
                        return
                    context = reader.context
                except Exception as exc:  # a decoder bug: keep it, never crash the task
                    self._take_sunk()
                    pos = reader.position
                    self._quarantine(exc, "range", pos, None)
                    self._pos = max(self._pos, pos)
                    return
        finally:
            self._take_sunk()
            self.facts["events"] += events

    def _after_bad_event(self, exc: BinlogError, reader: BinlogReader) -> int | None:
        """Quarantine an event that failed to decode; where to go on (None: the range ends)."""
        pos = exc.offset if exc.offset is not None else reader.position
        size = self._event_size_at(pos) if pos is not None else None
        context = reader.context
        if self.flavor is None and context.server_version:
            self.flavor = flavor_of(context.server_version)
        if (pos is None or size is None or pos + size > self.range_end
                or not reader.format_descriptions and self.context is None):
            self._quarantine(exc, "range", pos, exc.type_code)
            self._pos = max(self._pos, reader.position)
            return None
        self._quarantine(exc, "event", pos, exc.type_code)
        self._pos = pos + size
        return pos + size

    # -- per event ------------------------------------------------------------------------
    def _on_event(self, event: Any) -> None:
        """One event: its ``bronze.events`` row, its part in the transaction, its statement or
        row changes. Runs once per event: one dict lookup picks what the event needs, and the
        common cases of ``_locate`` and ``_track_transaction`` are inline (their calls, set
        tests and ``event.name`` were a tenth of a task's CPU)."""
        sink = self._sink
        if sink is not None and sink.seen:
            self._take_sunk()
        h = event.header
        tc = h.type_code
        handling = _HANDLING.get(tc, _ON_OTHER)
        if h.payload_pos is None:  # _locate's top-level case, inline: nearly every event
            embedded = False
            pos = h.pos
            payload_index = payload_offset = None
            self._payload_pos = self._payload_index = None
            self._pos = next_pos = h.next_pos
            if tc == _PAYLOAD:
                self._payload_end = next_pos
        else:
            embedded = True
            pos, payload_index, payload_offset = self._locate(h, tc, embedded)
        event_us = self._event_time(h.timestamp)
        fields, fields_json, images = self._event_fields(event, tc, pos)
        if tc in _FILE_FACT_TYPES:
            self._note_file_facts(event, h, tc, embedded)
        sql = word = ""
        if handling == _ON_QUERY:
            sql = getattr(event, "query", None) or ""
            word = "BEGIN" if sql == "BEGIN" else _query_word(sql)  # most are a plain BEGIN
            self._track_transaction(event, h, tc, handling, word)
            trx = self._trx
        elif handling == _ON_TRX_START:
            self._track_transaction(event, h, tc, handling, word)
            trx = self._trx
        else:  # _track_transaction's case of the others, inline
            trx = self._trx
            if trx is not None:
                trx.events += 1
                if tc != _PAYLOAD:
                    trx.substantive = True
        gtid = trx_pos = None
        if trx is not None:
            gtid = trx.gtid
            if gtid is None and trx.gtid_kind == "ANONYMOUS":
                gtid = "ANONYMOUS"
            trx_pos = trx.start_pos
        db = table = None
        if handling == _ON_ROWS or handling == _ON_TABLE_MAP:
            db, table = _db_and_table(event, fields)
        elif handling == _ON_QUERY:
            db = getattr(event, "schema", None)
        if fields_json is None:
            fields_json = self._fields_json(event, tc, fields)
        name = _TYPE_NAMES.get(tc) or event.name
        # the bronze.events row
        raw = None
        if self.keep_raw and not embedded:
            off = pos - self.range_start
            raw = bytes(self.data[off:off + h.event_size])
        ok = h.checksum_ok
        misfits = self._ev(pos, payload_index, payload_offset, h.next_pos, tc, name, event_us, h.server_id,
                           h.event_size, h.log_pos, h.flags, "none" if ok is None else ("ok" if ok else "bad"), gtid,
                           trx_pos, db or None, table, fields_json, raw)
        if misfits:
            self._unfit(misfits, pos, tc)
        if handling == _ON_OTHER or handling == _ON_TABLE_MAP or handling == _ON_TRX_START:
            return
        if handling == _ON_ROWS:
            at = _new_place(_EventPlace, (pos, payload_index, gtid, trx_pos, event_us, db, table))
            self._on_rows(event, h, images or 0, at, name)
        elif handling == _ON_QUERY:
            if word != "BEGIN":  # _on_query does nothing more for a BEGIN
                at = _new_place(_EventPlace, (pos, payload_index, gtid, trx_pos, event_us, db, table))
                self._on_query(event, h, fields, at, sql, word, name)
        elif trx is not None:
            self._in_transaction(event, h, handling, trx)

    def _in_transaction(self, event: Any, h: Any, handling: int, trx: _Trx) -> None:
        """An annotation's text, an XID's or XA PREPARE's end of the open transaction."""
        if handling == _ON_ANNOTATION:
            text = getattr(event, "query", None)
            if text:
                trx.statements.append(text)
        elif handling == _ON_XID:
            trx.xid = getattr(event, "xid", None)
            self._close_trx(h, cut=False, end_event="XID")
        elif handling == _ON_XA_PREPARE:
            self._close_trx(h, cut=False, end_event="XA_PREPARE")

    def _event_time(self, seconds: int | None) -> int | None:
        """A header timestamp in microseconds (:func:`_us`), noted as the range's first or last
        event time."""
        if seconds is None or seconds < 0 or seconds > _MAX_TS:
            return None
        event_us = seconds * 1_000_000
        first = self._first_us
        if first is None or event_us < first:
            self._first_us = event_us
        last = self._last_us
        if last is None or event_us > last:
            self._last_us = event_us
        return event_us

    def _locate(self, h: Any, tc: int, embedded: bool) -> tuple[int, int | None, int | None]:
        """(pos, payload_index, payload_offset) of an event; events inside a TRANSACTION_PAYLOAD
        are placed at the payload's position and numbered within it (``_on_event`` inlines the
        top-level case)."""
        if embedded:
            if self._payload_pos != h.payload_pos:
                self._payload_pos = h.payload_pos
                self._payload_index = 0
            else:
                self._payload_index = (self._payload_index or 0) + 1
            return h.payload_pos, self._payload_index, h.pos
        self._payload_pos = None
        self._payload_index = None
        self._pos = h.next_pos
        if tc == _PAYLOAD:
            self._payload_end = h.next_pos
        return h.pos, None, None

    def _event_fields(self, event: Any, tc: int, pos: int) -> tuple[dict[str, Any], str | None, int | None]:
        """(fields, their bronze JSON when already encoded, for a rows event the number of its
        row images, appended to the row image columns)."""
        if tc in _ROWS_TYPES:
            return self._rows_event_fields(event, tc, pos)
        if tc == _TABLE_MAP:
            # repeated TABLE_MAPs share their decoded columns (the parser's TABLE_MAP cache):
            # same columns object, same fields
            cols = getattr(event, "columns", None)
            hit = self._table_map_json.get(getattr(event, "table_id", None))
            if hit is not None and cols is not None and hit[0] is cols:
                return hit[1], hit[2], None
            return self._fields(event, tc, pos), None, None
        try:  # only TABLE_MAP and rows events' fields are read here: the others' only as JSON
            return _NO_FIELDS, event_fields_json(event), None
        except Exception as exc:  # rendering bug: keep the event, quarantine the fields
            fields, fields_json = self._fields_failed(exc, tc, pos)
            return fields, fields_json, None

    def _fields_failed(self, exc: Exception, tc: int, pos: int) -> tuple[dict[str, Any], str]:
        """An event's fields that failed to render: quarantined, the event kept with the error."""
        self._quarantine(exc, "event", pos, tc)
        fields = {"_fields_error": f"{type(exc).__name__}: {exc}"}
        return fields, compact_json(fields)

    def _rows_event_fields(self, event: Any, tc: int, pos: int) -> tuple[dict[str, Any], str | None, int]:
        """A rows event's fields, its bronze JSON (the images left to silver.row_changes) and
        the number of its images, rendered into the row image columns (``self._images``)."""
        if hasattr(event, "fields_head"):
            try:  # typed rows: each image rendered once, into the row_changes buffers
                head, head_json = self._rows_head(event)
                renderer = self._renderer(event)
                fields_json = rows_fields_json(head_json, len(event.rows))
                # last: on an exception nothing is appended, and the generic path below keeps
                # (and quarantines) the failure
                n = renderer.render_changes_into(event.rows, self._images)
            except Exception:
                pass
            else:
                if self._sink is not None:
                    self._remember_rows(event, tc, head, head_json, renderer)
                return head, fields_json, n
        fields = self._fields(event, tc, pos)
        if "rows" not in fields:  # fields() failed: nothing in silver.row_changes either
            return fields, None, 0
        images = list(row_images(event, fields))
        append_images(self._images, images)
        head = {k: v for k, v in fields.items() if k != "rows"}
        return fields, rows_fields_json(unclosed_json(head), len(images)), len(images)

    def _remember_rows(self, event: Any, tc: int, head: dict[str, Any], head_json: str,
                       renderer: ImageRenderer) -> None:
        """What the sink needs to take the next rows events of this table like this one: its
        head, where its rows go, and the layouts its images were rendered with."""
        table = getattr(event, "table", None)
        layouts = renderer.native_layouts(event.rows)
        table_id, flags = getattr(event, "table_id", None), getattr(event, "flags", None)
        if table is None or layouts is None or type(table_id) is not int or type(flags) is not int:
            return
        db, name = _db_and_table(event, head)
        where = (db or None, name, db or "", name or "", _table_key(db, name))
        assert self._sink is not None
        self._sink.remember_rows(table_id, tc, flags, getattr(event, "extra_data", None), table.columns, head_json,
                                 where, *layouts, event)

    def _rows_head(self, event: Any) -> tuple[dict[str, Any], str]:
        """A rows event's ``fields_head()`` and its JSON without the closing brace, kept while
        its table, type, table id, flags and extra data repeat: they are all the head is made
        of, and a table's rows events repeat them thousands of times."""
        table = event.table
        # a TABLE_MAP repeated with the same body shares its decoded columns (and its names:
        # the parser's TABLE_MAP cache), so the columns object stands for the table
        anchor = table.columns if table is not None else None
        key = (event.table_id, event.header.type_code, event.flags, event.extra_data)
        hit = self._rows_heads.get(key)
        if hit is not None and hit[0] is anchor:
            return hit[1], hit[2]
        head = event.fields_head()
        head_json = unclosed_json(head)
        if len(self._rows_heads) >= 4096:
            self._rows_heads.clear()
        self._rows_heads[key] = (anchor, head, head_json)
        return head, head_json

    def _renderer(self, event: Any) -> ImageRenderer:
        """The row image renderer of the event's table, kept while its TABLE_MAP repeats with
        the same decoded columns (the parser's TABLE_MAP cache): a renderer compiles its
        layouts once, not once per rows event."""
        cols = getattr(getattr(event, "table", None), "columns", None)
        table_id = getattr(event, "table_id", None)
        hit = self._renderers.get(table_id)
        if hit is not None and cols is not None and hit[0] is cols:
            return hit[1]
        renderer = ImageRenderer(event.columns_by_name())
        if cols is not None:
            if len(self._renderers) >= 4096:
                self._renderers.clear()
            self._renderers[table_id] = (cols, renderer)
        return renderer

    def _fields(self, event: Any, tc: int, pos: int) -> dict[str, Any]:
        """``event.fields()``; a rendering failure is quarantined and the event kept."""
        try:
            return event.fields()
        except Exception as exc:  # rendering bug: keep the event, quarantine the fields
            self._quarantine(exc, "event", pos, tc)
            return {"_fields_error": f"{type(exc).__name__}: {exc}"}

    def _fields_json(self, event: Any, tc: int, fields: dict[str, Any]) -> str:
        """The fields as JSON; a TABLE_MAP's are kept for its repeats (same columns object)."""
        fields_json = compact_json(fields)
        if tc == _TABLE_MAP and "_fields_error" not in fields:
            cols = getattr(event, "columns", None)
            if cols is not None:
                if len(self._table_map_json) >= 4096:
                    self._table_map_json.clear()
                table_id = getattr(event, "table_id", None)
                self._table_map_json[table_id] = (cols, fields, fields_json)
                if self._sink is not None and type(table_id) is int:
                    db, table = _db_and_table(event, fields)
                    self._sink.remember_table_map(table_id, cols, fields_json, db or None, table, event)
        return fields_json

    def _note_file_facts(self, event: Any, h: Any, tc: int, embedded: bool) -> None:
        """Server, format, previous GTIDs and closing event of the file."""
        facts = self.facts
        if tc in (_FDE, _START_V3) and not embedded:
            if facts["server_id"] is None:
                facts["server_id"] = h.server_id
            facts["binlog_version"] = getattr(event, "binlog_version", None)
            facts["server_version"] = getattr(event, "server_version", None)
            alg = getattr(event, "checksum_alg", None)
            facts["checksum_alg"] = None if alg is None else ("CRC32" if alg == 1 else "OFF")
            if self.flavor is None:
                self.flavor = flavor_of(facts["server_version"])
        elif tc == _PREVIOUS_GTIDS and facts["previous_gtids"] is None:
            facts["previous_gtids"] = str(getattr(event, "gtid_set", "") or "")
        elif tc == _GTID_LIST and facts["previous_gtids"] is None:
            glist = getattr(event, "gtid_set", None)
            raw = str(glist) if glist is not None else ""
            facts["previous_gtids_raw"] = raw
            entries = [(g.domain_id, g.server_id, g.seq_no) for g in glist] if glist is not None else []
            facts["previous_gtids"] = str(GtidIntervals.from_mariadb_list(entries))
            self.flavor = MARIADB
        elif tc == _ROTATE and not embedded and not getattr(event, "artificial", False):
            facts["closing_event"] = "ROTATE"
            facts["next_file"] = getattr(event, "next_file", None)
        elif tc == _STOP and not embedded:
            facts["closing_event"] = "STOP"
            facts["next_file"] = None


    def _track_transaction(self, event: Any, h: Any, tc: int, handling: int, word: str) -> None:
        """Open / close the transaction around this event and count it in (``word``: a QUERY's
        :func:`_query_word`). ``_on_event`` calls it for QUERY and GTID events; the other events'
        case (count it in) is inline there."""
        if handling == _ON_TRX_START:
            self._close_trx(None, cut=True)
            self._open_trx(event, h)
            trx = self._trx
            assert trx is not None
            trx.events += 1
            return
        trx = self._trx
        if handling == _ON_QUERY:
            if word == "BEGIN" or word.startswith("XA START") or word.startswith("XA BEGIN"):
                if trx is None or trx.began_with_begin or trx.substantive:
                    self._close_trx(None, cut=True)
                    self._open_trx(None, h)
                    trx = self._trx
                assert trx is not None
                trx.began_with_begin = True
            elif trx is None:
                self._open_trx(None, h)
                trx = self._trx
                assert trx is not None
            trx.events += 1
            if word != "BEGIN":
                trx.substantive = True
        elif trx is not None:
            trx.events += 1
            if tc != _PAYLOAD:
                trx.substantive = True

    def _on_query(self, event: Any, h: Any, fields: dict[str, Any], at: _EventPlace, sql: str, word: str,
                  name: str) -> None:
        """A statement row, and the statement's part in its transaction (a standalone one closes it).
        ``sql``: the event's query ("" for none), ``word``: its :func:`_query_word`, ``name``: its
        ``event.name``."""
        trx = self._trx
        if word == "BEGIN" or word == "COMMIT":
            if trx is not None and word == "COMMIT":
                self._close_trx(h, cut=False, end_event="COMMIT")
            return
        kind = statement_kind(sql)
        status_vars = None if "_fields_error" in fields else getattr(event, "status_vars", None)
        misfits = self._st(at.pos, at.payload_index, at.gtid, at.trx_pos, at.event_us, h.server_id,
                           getattr(event, "schema", None) or None, sql, kind, getattr(event, "thread_id", None),
                           getattr(event, "exec_time", None), getattr(event, "error_code", None),
                           None if status_vars is None else compact_json(to_json_value(status_vars)), name)
        if misfits:
            self._unfit(misfits, at.pos, h.type_code)
        if trx is None:
            return
        if word == "ROLLBACK":
            self._close_trx(h, cut=False, end_event="ROLLBACK")
            return
        trx.statements.append(sql)
        if kind == "DDL" or kind == "DCL":
            trx.has_ddl = True
        elif kind == "DML":
            trx.has_dml = True
        if not trx.began_with_begin:
            # a standalone statement (DDL, or a GTID + single statement): it closes
            self._close_trx(h, cut=False, end_event="DDL" if kind in ("DDL", "DCL") else "COMMIT")

    def _on_rows(self, event: Any, h: Any, n: int, at: _EventPlace, name: str) -> None:
        """The row images of a rows event, held in its transaction until the commit time is
        known (flushed early past ``max_buffered_rows``); ``n``: how many, already in the row
        image columns (``_rows_event_fields``); ``name``: the event's ``event.name``."""
        trx = self._trx
        if trx is None:
            self._open_trx(None, h)
            trx = self._trx
            assert trx is not None
            trx.events += 1
        trx.has_dml = True
        db, table = at.db, at.table
        key = _table_key(db, table)
        if key is not None:
            trx.tables.add(key)
        # its n rows in one call (row_index counts up from 0), in the order of ROW_CHANGE_COLUMNS
        misfits = self._rc(n, at.pos, at.payload_index, 0, at.gtid, at.trx_pos, at.event_us, h.server_id,
                           db or "", table or "", _OPERATION[h.type_code], name)
        if misfits:
            self._unfit(misfits, at.pos, h.type_code)
        trx.pending.append((at.event_us, n))  # their commit_time comes with the transaction's end
        trx.row_changes += n
        trx.pending_rows += n
        if trx.pending_rows >= self.max_buffered_rows:
            self._flush_rows(trx, None)
        elif self._sink is not None:
            self._sink.pending_base = trx.pending_rows

    def _open_trx(self, event: Any, h: Any) -> None:
        payload_pos = h.payload_pos
        tc = h.type_code
        trx = _Trx(payload_pos if payload_pos is not None else h.pos, _us(h.timestamp), h.server_id)
        if event is not None and tc in _GTID_TYPES:
            anonymous = tc == _ANONYMOUS_GTID
            tag = getattr(event, "tag", None) or None
            trx.gtid_kind = "ANONYMOUS" if anonymous else ("TAGGED" if tag else "GTID")
            if not anonymous:
                trx.gtid = getattr(event, "gtid", None)
                trx.uuid = getattr(event, "uuid", None)
                trx.tag = tag
                trx.gno = getattr(event, "gno", None)
            trx.last_committed = getattr(event, "last_committed", None)
            trx.sequence_number = getattr(event, "sequence_number", None)
            trx.transaction_length = getattr(event, "transaction_length", None)
            trx.original_server_version = getattr(event, "original_server_version", None)
            trx.immediate_server_version = getattr(event, "immediate_server_version", None)
            imm = getattr(event, "immediate_commit_timestamp", None)
            orig = getattr(event, "original_commit_timestamp", None)
            trx.immediate_commit_us = _valid_us(imm)
            trx.original_commit_us = _valid_us(orig if orig is not None else imm)
            trx.commit_us = imm
        elif event is not None and tc == _MARIA_GTID:
            self.flavor = MARIADB
            trx.gtid_kind = "MARIADB"
            trx.gtid = getattr(event, "gtid", None)
            trx.mariadb_domain_id = getattr(event, "domain_id", None)
            trx.mariadb_server_id = h.server_id
            trx.mariadb_seq_no = getattr(event, "seq_no", None)
            trx.sequence_number = getattr(event, "commit_id", None)
            standalone = getattr(event, "standalone", None)
            if standalone is None:
                standalone = bool((getattr(event, "flags2", None) or getattr(event, "flags", 0) or 0) & 1)
            trx.began_with_begin = not standalone
        if trx.gtid is not None:
            facts = self.facts
            if facts["first_gtid"] is None:
                facts["first_gtid"] = trx.gtid
            facts["last_gtid"] = trx.gtid
        self._trx = trx
        if self._sink is not None:
            gtid = trx.gtid if trx.gtid is not None or trx.gtid_kind != "ANONYMOUS" else "ANONYMOUS"
            self._sink.open(gtid, trx.start_pos)

    def _flush_rows(self, trx: _Trx, commit_us: int | None) -> None:
        """Give the transaction's waiting row changes their commit time (their rows event's own
        time when the commit time is not known)."""
        commit_time = self._rc_commit_time
        for event_us, n in trx.pending:
            commit_time(n, commit_us if commit_us is not None else event_us)
        trx.pending = []
        trx.pending_rows = 0
        if self._sink is not None:
            self._sink.pending_base = 0

    def _close_trx(self, h: Any, *, cut: bool, end_event: str | None = None, at_end: bool = False) -> None:
        trx = self._trx
        if trx is None:
            return
        self._trx = None
        if self._sink is not None:
            self._sink.close()
        # The archive holds a GTID once its transaction is in the file; one still open when
        # the data ends (truncated tail, snapshot of an active file) is not in the archive.
        if not (cut and at_end):
            if trx.gno and trx.uuid:
                self._builder().add(trx.uuid, trx.gno, trx.tag or "")
            elif trx.mariadb_seq_no is not None:
                self._builder().add(str(trx.mariadb_domain_id), trx.mariadb_seq_no)
        commit_us: int | None = None
        if h is not None:
            # a closing event inside a TRANSACTION_PAYLOAD: the transaction ends with the payload
            end_pos = self._payload_end if h.payload_pos is not None else h.next_pos
            commit_us = _us(h.timestamp)
        else:
            end_pos = self._pos if self._pos > trx.start_pos else None
        self.facts["transactions"] += 1
        trx_commit_us = _valid_us(trx.commit_us)
        self._flush_rows(trx, trx_commit_us if trx_commit_us is not None else commit_us)
        self._append_transaction(trx, end_pos, commit_us, None if cut else end_event, not cut)

    def _append_transaction(self, trx: _Trx, end_pos: int | None, commit_us: int | None,
                            end_event: str | None, complete: bool) -> None:
        misfits = self._tx(
            trx.start_pos, end_pos, trx.gtid, trx.gtid_kind, trx.uuid, trx.tag, trx.gno, trx.mariadb_domain_id,
            trx.mariadb_server_id, trx.mariadb_seq_no, trx.last_committed, trx.sequence_number, trx.begin_us,
            commit_us, trx.original_commit_us, trx.immediate_commit_us, trx.original_server_version,
            trx.immediate_server_version, trx.transaction_length, trx.server_id, trx.xid, trx.events,
            trx.row_changes, trx.statements, sorted(trx.tables), "MIXED" if trx.has_ddl and trx.has_dml
            else "DDL" if trx.has_ddl else "DML" if trx.has_dml else "EMPTY", end_event, complete)
        if misfits:
            self._unfit(misfits, trx.start_pos, None)


def rows_of(batches: Iterable[tuple[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(kind, row dict)`` pairs of :meth:`RangeDecoder.batches` (the facts pass as they are)."""
    for kind, item in batches:
        if kind == "file_facts":
            yield kind, item
        else:
            for row in item.to_pylist():
                yield kind, row


def decode_range(data: bytes | memoryview, **kwargs: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """The rows of a range as ``(kind, row dict)`` pairs (tests and tools; the ingest job
    takes :meth:`RangeDecoder.batches`)."""
    return rows_of(RangeDecoder(data, **kwargs).batches())


def decode_file(path_or_bytes: Any, *, source: str, file: str | None = None,
                **kwargs: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """Decode a whole local file (path) or bytes into ``(kind, row dict)`` pairs: a convenience
    for tests and tools."""
    data: bytes | memoryview
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        data = bytes(path_or_bytes) if isinstance(path_or_bytes, bytearray) else path_or_bytes
        name = file or "<bytes>"
    else:
        with open(path_or_bytes, "rb") as fh:
            data = fh.read()
        name = file or str(path_or_bytes).rsplit("/", 1)[-1]
    return decode_range(data, source=source, file=name, file_size=len(data), **kwargs)


def context_from_head(head: bytes | memoryview, file: str) -> DecodeContext:
    """The DecodeContext a later range of ``file`` needs (from the file's first bytes)."""
    return read_format_description(bytes(head), file_name=file)


# ---------------------------------------------------------------------------------------
# Split points and per-file facts
# ---------------------------------------------------------------------------------------


#: the event types whose headers :func:`split_points` reads (``scan_headers(types=...)``)
SPLIT_POINT_TYPES = frozenset(_TRX_START_TYPES | {_XID})


def split_points(headers: Iterable[Any], *, file_size: int, target: int,
                 skip_to: Callable[[int], None] | None = None) -> list[int]:
    """Offsets where a file may be cut into ranges of about ``target`` bytes.

    ``headers`` are the file's top-level event headers (``scan_headers``; those of
    :data:`SPLIT_POINT_TYPES` are enough, the others are ignored). A cut is placed
    at a transaction start (GTID / ANONYMOUS_GTID / MariaDB GTID event) or, in files without
    GTIDs, right after an XID. Returns the starts of ranges 1..n (range 0 starts at 0).

    ``skip_to`` (``HeaderScan.skip_to``) is told, once the file has shown a transaction start,
    where the next cut may be: no header before it can change the answer (XIDs no longer
    count), so the scan need not build them.
    """
    cuts: list[int] = []
    next_cut = target
    has_gtids: bool | None = None
    for h in headers:
        tc = h.type_code
        if tc in _TRX_START_TYPES:
            has_gtids = True
            if h.pos >= next_cut:
                cuts.append(h.pos)
                next_cut = h.pos + target
            if skip_to is not None:
                skip_to(next_cut)
        elif tc == _XID and not has_gtids:
            if h.next_pos >= next_cut and h.next_pos < file_size:
                cuts.append(h.next_pos)
                next_cut = h.next_pos + target
    return cuts


def merge_file_facts(parts: list[dict[str, Any]], *, size: int | None = None,
                     etag: str | None = None, ranges: int | None = None) -> dict[str, Any]:
    """Fold the per-range facts of one file (any order) into one ``meta.binlog_files`` row."""
    parts = sorted(parts, key=lambda p: p["range_index"])
    first, last = parts[0], parts[-1]
    flavor = next((p["flavor"] for p in parts if p.get("flavor") == MARIADB), first.get("flavor") or MYSQL)
    contained = GtidIntervals.empty(flavor)
    dups = GtidIntervals.empty(flavor)
    for p in parts:
        c = GtidIntervals.from_text(p.get("contained_gtids") or "", flavor)
        dups = dups | (contained & c) | GtidIntervals.from_text(p.get("duplicate_gtids") or "", flavor)
        contained = contained | c
    times_first = [p["first_event_time"] for p in parts if p.get("first_event_time") is not None]
    times_last = [p["last_event_time"] for p in parts if p.get("last_event_time") is not None]
    digest = first["sha1"] if len(parts) == 1 else hashlib.sha1(
        "".join(p["sha1"] for p in parts).encode()).hexdigest()
    return {
        "source": first["source"], "file": first["file"], "file_seq": first.get("file_seq"),
        "uri": first.get("uri") or first["file"], "size": size, "etag": etag,
        "fingerprint": digest, "flavor": flavor,
        "binlog_version": first.get("binlog_version"), "server_version": first.get("server_version"),
        "server_id": first.get("server_id"), "checksum_alg": first.get("checksum_alg"),
        "previous_gtids": first.get("previous_gtids"),
        "previous_gtids_raw": first.get("previous_gtids_raw"),
        "contained_gtids": str(contained), "duplicate_gtids": str(dups),
        "first_gtid": next((p["first_gtid"] for p in parts if p.get("first_gtid")), None),
        "last_gtid": next((p["last_gtid"] for p in reversed(parts) if p.get("last_gtid")), None),
        "transactions": sum(p.get("transactions") or 0 for p in parts),
        "events": sum(p.get("events") or 0 for p in parts),
        "first_event_time": min(times_first) if times_first else None,
        "last_event_time": max(times_last) if times_last else None,
        "closing_event": last.get("closing_event"), "next_file": last.get("next_file"),
        "truncated": bool(last.get("truncated")),
        "decoded_bytes": sum(p.get("decoded_bytes") or 0 for p in parts),
        "quarantined": sum(p.get("quarantined") or 0 for p in parts),
        "ranges": ranges if ranges is not None else len(parts),
    }
