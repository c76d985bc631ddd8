"""Decode one binlog object (or a byte range of it) into table rows. Pure Python, no Spark.

This runs on the executors. Input: the bytes of one range of one file (plus, for a range
that does not start at offset 0, the file's :class:`~binlog_parser.context.DecodeContext`
from its FORMAT_DESCRIPTION). Output: a stream of ``(kind, row)`` pairs where ``kind`` is one
of :data:`KINDS` and ``row`` a dict with exactly the columns of the matching table in
``spark_jobs.schemas`` (``file_facts`` rows are partial per-range facts that
:func:`merge_file_facts` folds into one ``meta.binlog_files`` row on the driver).

Rules:

* every event becomes a ``bronze.events`` row, embedded TRANSACTION_PAYLOAD events too;
* nothing vanishes: an event that fails to decode becomes a ``quarantine`` row and decoding
  resumes after it (its size is in its header); a truncated tail becomes a ``tail`` row; a
  framing error that cannot be skipped becomes a ``range`` row covering the rest;
* CRC mismatches are decoded anyway (``checksum = 'bad'``);
* transactions are assembled as the events stream by (GTID / BEGIN ... XID / COMMIT / DDL);
  row changes are buffered per transaction (to carry its commit time) up to
  ``max_buffered_rows``, then flushed with the best time known so far.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from binlake.reconciliation import MARIADB, MYSQL, GtidIntervals, GtidIntervalsBuilder, split_series
from binlog_parser.constants import EventType, event_type_name
from binlog_parser.context import DecodeContext
from binlog_parser.errors import BinlogError, TruncatedEventError
from binlog_parser.framing import ON_ERROR_RESYNC, SkippedBytes
from binlog_parser.reader import BinlogReader, read_format_description
from binlog_parser.rows.render import render_row_text

KINDS = ("events", "quarantine", "transactions", "row_changes", "statements", "file_facts")

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


_TS_MEMO: tuple[Any, Any] = (None, None)  # (seconds, datetime) of the last _ts call


def _ts(seconds: int | None) -> _dt.datetime | None:
    global _TS_MEMO
    memo = _TS_MEMO  # events of one second come in runs: one datetime per run
    if memo[0] == seconds and seconds is not None:
        return memo[1]
    if seconds is None or seconds < 0 or seconds > _MAX_TS:
        return None
    ts = _EPOCH + _dt.timedelta(seconds=seconds)
    _TS_MEMO = (seconds, ts)
    return ts


def _ts_us(micros: int | None) -> _dt.datetime | None:
    if not micros or micros < 0 or micros > _MAX_TS * 1_000_000:
        return None
    return _EPOCH + _dt.timedelta(microseconds=micros)


def _date(ts: _dt.datetime | None) -> _dt.date | None:
    return ts.date() if ts is not None else None


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str,
                            check_circular=False)
try:  # the C encoder JSONEncoder.encode would build on every call, built once
    from json.encoder import c_make_encoder as _c_make_encoder  # type: ignore[attr-defined]
    from json.encoder import encode_basestring as _enc_str

    _C_ENCODE = _c_make_encoder(None, str, _enc_str, None, ":", ",", False, False, True) \
        if _c_make_encoder is not None else None
except ImportError:  # pragma: no cover
    _C_ENCODE = None


def _dumps(value: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)``, with the
    encoder built once (``json.dumps`` builds one per call for non-default options)."""
    if _C_ENCODE is not None:
        return "".join(_C_ENCODE(value, 0))
    return _ENCODER.encode(value)


def flavor_of(server_version: str | None) -> str:
    return MARIADB if server_version and "mariadb" in server_version.lower() else MYSQL


# ---------------------------------------------------------------------------------------
# Row images
# ---------------------------------------------------------------------------------------


def _image_text_map(image: Any) -> list[tuple[str, str | None]] | None:
    """An image (column -> value) as (name, MySQL text) pairs for a map<string,string>."""
    if image is None:
        return None
    out: list[tuple[str, str | None]] = []
    for name, value in image.items():
        if value is None:
            out.append((str(name), None))
        elif isinstance(value, str):
            out.append((str(name), value))
        elif isinstance(value, bool):
            out.append((str(name), "1" if value else "0"))
        elif isinstance(value, (int, float)):
            out.append((str(name), str(value)))
        else:
            out.append((str(name), _dumps(value)))
    return out


def row_images(event: Any, fields: dict[str, Any]) -> Iterator[tuple[Any, Any, Any, Any]]:
    """Yield ``(before_map, after_map, before_json, after_json)`` per row of a rows event.

    Maps carry each value as MySQL prints it (``render_row_text`` of the rows decoder over
    the typed values); the JSON columns carry the typed JSON values of ``fields()``
    (``render_row``: numbers as JSON numbers, exact DECIMALs and temporals as strings).
    """
    rendered = fields.get("rows") or []
    typed = getattr(event, "rows", None)
    table = getattr(event, "table", None)
    if typed is not None and len(typed) == len(rendered) and hasattr(typed[0] if typed else None, "before"):
        cols = getattr(table, "columns", None) or ()
        by_name = {c.name: c for c in cols}
        for change, row in zip(typed, rendered):
            b = render_row_text(change.before, by_name)
            a = render_row_text(change.after, by_name)
            yield (None if b is None else list(b.items()), None if a is None else list(a.items()),
                   None if row.get("before") is None else _dumps(row.get("before")),
                   None if row.get("after") is None else _dumps(row.get("after")))
        return
    for row in rendered:
        before = row.get("before")
        after = row.get("after")
        yield (_image_text_map(before), _image_text_map(after),
               None if before is None else _dumps(before),
               None if after is None else _dumps(after))


def rows_event_parts(event: Any) -> tuple[dict[str, Any], str, list[tuple[Any, Any, Any, Any]]]:
    """A typed rows event rendered once: ``(head, fields_json, images)``.

    ``head`` is ``event.fields()`` without ``rows``; ``fields_json`` is exactly
    ``_dumps(event.fields())`` (bronze ``fields``); ``images`` are the ``row_images`` tuples
    ``(before_map, after_map, before_json, after_json)`` (silver). Each image is rendered
    (``render_row_json_text``: typed JSON and MySQL text in one pass) and JSON-encoded once;
    the bronze ``rows`` array is assembled from the same JSON strings.
    """
    from binlog_parser.rows.render import render_row_json_text

    head = event.fields_head()
    by_name = event.columns_by_name()
    enc = _dumps
    images = []
    parts = []
    for change in event.rows:
        bj, bt = render_row_json_text(change.before, by_name)
        aj, at = render_row_json_text(change.after, by_name)
        b_json = None if bj is None else enc(bj)
        a_json = None if aj is None else enc(aj)
        images.append((None if bt is None else list(bt.items()),
                       None if at is None else list(at.items()), b_json, a_json))
        parts.append(f'{{"before":{b_json or "null"},"after":{a_json or "null"}}}')
    head_json = enc(head)
    fields_json = head_json[:-1] + ',"rows":[' + ",".join(parts) + "]}"
    return head, fields_json, images


# ---------------------------------------------------------------------------------------
# The decoder state machine
# ---------------------------------------------------------------------------------------


class _Trx:
    __slots__ = ("row", "statements", "tables", "row_changes", "pending_rows", "has_ddl", "has_dml",
                 "commit_us", "began_with_begin", "events", "substantive")

    def __init__(self, row: dict[str, Any], began_with_begin: bool) -> None:
        self.row = row
        self.statements: list[str] = []
        self.tables: set[str] = set()
        self.row_changes = 0
        self.pending_rows: list[dict[str, Any]] = []
        self.has_ddl = False
        self.has_dml = False
        self.commit_us: int | None = None
        self.began_with_begin = began_with_begin
        self.events = 0
        self.substantive = False  # saw a statement, table map, row or XID


@dataclass(frozen=True, slots=True)
class _EventPlace:
    """Where an event sits, as every row derived from it records it."""

    pos: int
    payload_index: int | None
    gtid: str | None
    trx_pos: int | None
    event_time: Any
    db: str | None
    table: str | None


class RangeDecoder:
    """Decode the events of ``data`` (file bytes ``[range_start, range_start + len(data))``).

    ``context`` is required when ``range_start > 0`` (from :func:`read_format_description`
    on the file's head). ``file_size`` tells whether this range reaches the end of the file
    (truncation is only reported at the real end of the file).
    """

    def __init__(self, data: bytes | memoryview, *, source: str, file: str, uri: str | None = None,
                 range_start: int = 0, range_index: int = 0, file_size: int | None = None,
                 context: DecodeContext | None = None, keep_raw: bool = False,
                 run_id: str | None = None, max_buffered_rows: int = 20000) -> None:
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
        self._gtids: GtidIntervalsBuilder | None = None
        self._trx: _Trx | None = None
        self._payload_index: int | None = None
        self._payload_pos: int | None = None
        self._payload_end: int | None = None
        self._pos = range_start
        # table_id -> (columns, fields, fields JSON) of the last TABLE_MAP seen for it
        self._table_map_json: dict[Any, tuple[Any, dict[str, Any], str]] = {}

    # -- public ---------------------------------------------------------------------------
    def __iter__(self) -> Iterator[tuple[str, dict[str, Any]]]:
        yield from self._decode()
        yield from self._close_trx(None, cut=True, at_end=True)
        facts = self.facts
        builder = self._builder()
        facts["flavor"] = self.flavor or MYSQL
        facts["contained_gtids"] = str(builder.build())
        facts["duplicate_gtids"] = str(builder.build_duplicates())
        facts["decoded_bytes"] = self._pos - self.range_start
        yield "file_facts", facts

    # -- helpers --------------------------------------------------------------------------
    def _builder(self) -> GtidIntervalsBuilder:
        if self._gtids is None:
            self._gtids = GtidIntervalsBuilder(self.flavor or MYSQL)
        return self._gtids

    def _reader(self, start: int | None, context: DecodeContext | None) -> BinlogReader:
        """A resynchronising reader: one bad event is a quarantine row, not the end of the range."""
        if context is None:
            # range 0: the bytes are the file head, the reader detects the format
            return BinlogReader(self.data, file_name=self.file, lenient=True, start_position=start,
                                on_error=ON_ERROR_RESYNC)
        return BinlogReader(self.data, file_name=self.file, lenient=True, context=context,
                            source_offset=self.range_start,
                            start_position=start if start is not None else max(self.range_start, 4),
                            on_error=ON_ERROR_RESYNC)

    def _quarantine(self, exc: BaseException, scope: str, pos: int | None,
                    type_code: int | None) -> dict[str, Any]:
        self.facts["quarantined"] += 1
        head = None
        if pos is not None and self.range_start <= pos < self.range_end:
            off = pos - self.range_start
            head = bytes(self.data[off:off + 256])
        return {
            "source": self.source, "file": self.file, "file_seq": self.file_seq, "pos": pos,
            "scope": scope, "type_code": type_code,
            "event_type": event_type_name(type_code) if type_code is not None else None,
            "error_class": type(exc).__name__,
            "error_message": getattr(exc, "message", None) or str(exc),
            "range_start": self.range_start,
            "range_end": None if self.is_last_range else self.range_end,
            "raw_head": head, "run_id": self.run_id,
        }

    def _quarantine_skip(self, skip: SkippedBytes) -> dict[str, Any]:
        """A skipped byte range as a quarantine row: scope ``event`` when exactly the bad event
        was stepped over (its own size), ``skipped`` otherwise; ``range_start``/``range_end``
        are the skipped bytes and ``raw_head`` their first bytes (at most 64 KiB)."""
        exc = skip.error
        row = self._quarantine(exc, "event" if skip.found_by == "event_size" else "skipped",
                               skip.start, exc.type_code)
        row["error_message"] = (f"{row['error_message']} (skipped bytes {skip.start}-{skip.end}, "
                                f"{skip.size} bytes; next event found by {skip.found_by.replace('_', ' ')})")
        row.update(range_start=skip.start, range_end=skip.end, raw_head=skip.head)
        self.facts["skipped_ranges"].append([skip.start, skip.end])
        return row

    def _event_size_at(self, pos: int) -> int | None:
        off = pos - self.range_start
        if off < 0 or off + 13 > len(self.data):
            return None
        size = int.from_bytes(self.data[off + 9:off + 13], "little")
        return size if size >= 13 else None

    def _decode(self) -> Iterator[tuple[str, dict[str, Any]]]:
        context = self.context
        start: int | None = None
        while True:
            reader = self._reader(start, context)
            try:
                for item in reader.records():
                    if item.__class__ is SkippedBytes:
                        assert isinstance(item, SkippedBytes)
                        yield "quarantine", self._quarantine_skip(item)
                    else:
                        yield from self._on_event(item)
                self._pos = max(self._pos, reader.position)
                return
            except TruncatedEventError as exc:
                self._pos = max(self._pos, reader.position)
                if self.is_last_range:
                    self.facts["truncated"] = True
                    yield "quarantine", self._quarantine(exc, "tail", exc.offset, exc.type_code)
                else:
                    yield "quarantine", self._quarantine(exc, "range", exc.offset, exc.type_code)
                return
            except BinlogError as exc:
                pos = exc.offset if exc.offset is not None else reader.position
                size = self._event_size_at(pos) if pos is not None else None
                context = reader.context
                if self.flavor is None and context.server_version:
                    self.flavor = flavor_of(context.server_version)
                if (pos is None or size is None or pos + size > self.range_end
                        or not reader.format_descriptions and self.context is None):
                    yield "quarantine", self._quarantine(exc, "range", pos, exc.type_code)
                    self._pos = max(self._pos, reader.position)
                    return
                yield "quarantine", self._quarantine(exc, "event", pos, exc.type_code)
                start = pos + size
                self._pos = start
            except Exception as exc:  # a decoder bug: keep it, never crash the task
                pos = reader.position
                yield "quarantine", self._quarantine(exc, "range", pos, None)
                self._pos = max(self._pos, pos)
                return

    # -- per event ------------------------------------------------------------------------
    def _on_event(self, event: Any) -> Iterator[tuple[str, dict[str, Any]]]:
        h = event.header
        tc = h.type_code
        self.facts["events"] += 1
        embedded = h.payload_pos is not None
        pos, payload_index, payload_offset = self._locate(h, tc, embedded)
        event_time = _ts(h.timestamp)
        self._note_event_time(event_time)
        fields, fields_json, images = yield from self._event_fields(event, tc, pos)
        self._note_file_facts(event, h, tc, embedded)
        yield from self._track_transaction(event, h, tc)
        trx = self._trx
        gtid = trx.row["gtid"] if trx is not None else None
        if trx is not None and gtid is None and trx.row["gtid_kind"] == "ANONYMOUS":
            gtid = "ANONYMOUS"
        trx_pos = trx.row["start_pos"] if trx is not None else None
        db = getattr(event, "schema", None) if tc in _QUERY_TYPES or tc == _TABLE_MAP or tc in _ROWS_TYPES else None
        table = None
        if tc == _TABLE_MAP or tc in _ROWS_TYPES:
            db = fields.get("schema", db)
            table = fields.get("table")
        if fields_json is None:
            fields_json = self._fields_json(event, tc, fields)
        raw = None
        if self.keep_raw and not embedded:
            off = h.pos - self.range_start
            raw = bytes(self.data[off:off + h.event_size])
        yield "events", {
            "source": self.source, "file": self.file, "file_seq": self.file_seq,
            "pos": pos, "payload_index": payload_index, "payload_offset": payload_offset,
            "next_pos": h.next_pos, "type_code": tc, "event_type": event.name,
            "event_time": event_time, "server_id": h.server_id, "event_size": h.event_size,
            "log_pos": h.log_pos, "flags": h.flags,
            "checksum": "none" if h.checksum_ok is None else ("ok" if h.checksum_ok else "bad"),
            "gtid": gtid, "trx_pos": trx_pos, "db": db or None, "table_name": table,
            "fields": fields_json, "raw": raw, "event_date": _date(event_time),
        }
        at = _EventPlace(pos, payload_index, gtid, trx_pos, event_time, db, table)
        if tc in _QUERY_TYPES:
            yield from self._on_query(event, h, fields, at)
        elif tc in _ANNOTATION_TYPES:
            if trx is not None:
                text = getattr(event, "query", None)
                if text:
                    trx.statements.append(text)
        elif tc in _ROWS_TYPES:
            yield from self._on_rows(event, h, fields, images, at)
        elif tc == _XID:
            if trx is not None:
                trx.row["xid"] = getattr(event, "xid", None)
                yield from self._close_trx(h, cut=False, end_event="XID")
        elif tc == _XA_PREPARE:
            if trx is not None:
                yield from self._close_trx(h, cut=False, end_event="XA_PREPARE")

    def _locate(self, h: Any, tc: int, embedded: bool) -> tuple[int, int | None, int | None]:
        """(pos, payload_index, payload_offset) of an event; events inside a TRANSACTION_PAYLOAD
        are placed at the payload's position and numbered within it."""
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

    def _note_event_time(self, event_time: Any) -> None:
        facts = self.facts
        if event_time is not None:
            if facts["first_event_time"] is None or event_time < facts["first_event_time"]:
                facts["first_event_time"] = event_time
            if facts["last_event_time"] is None or event_time > facts["last_event_time"]:
                facts["last_event_time"] = event_time

    def _event_fields(self, event: Any, tc: int, pos: int) -> Generator[
            tuple[str, dict[str, Any]], None, tuple[dict[str, Any], str | None, list[Any] | None]]:
        """(fields, their JSON when already encoded, row images): quarantines a rendering failure."""
        fields_json: str | None = None
        images: list[tuple[Any, Any, Any, Any]] | None = None
        fields: dict[str, Any] | None = None
        if tc in _ROWS_TYPES and hasattr(event, "fields_head"):
            try:  # typed rows: each image rendered and JSON-encoded once (bronze + silver)
                fields, fields_json, images = rows_event_parts(event)
            except Exception:  # the generic path below keeps (and quarantines) any failure
                fields = fields_json = images = None
        elif tc == _TABLE_MAP:
            # repeated TABLE_MAPs share their decoded columns (the parser's TABLE_MAP cache):
            # same columns object, same fields
            cols = getattr(event, "columns", None)
            hit = self._table_map_json.get(getattr(event, "table_id", None))
            if hit is not None and cols is not None and hit[0] is cols:
                fields, fields_json = hit[1], hit[2]
        if fields is None:
            try:
                fields = event.fields()
            except Exception as exc:  # rendering bug: keep the event, quarantine the fields
                fields = {"_fields_error": f"{type(exc).__name__}: {exc}"}
                yield "quarantine", self._quarantine(exc, "event", pos, tc)
        assert fields is not None
        return fields, fields_json, images

    def _fields_json(self, event: Any, tc: int, fields: dict[str, Any]) -> str:
        """The fields as JSON; a TABLE_MAP's are kept for its repeats (same columns object)."""
        fields_json = _dumps(fields)
        if tc == _TABLE_MAP and "_fields_error" not in fields:
            cols = getattr(event, "columns", None)
            if cols is not None:
                if len(self._table_map_json) >= 4096:
                    self._table_map_json.clear()
                self._table_map_json[getattr(event, "table_id", None)] = (cols, fields, fields_json)
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

    def _track_transaction(self, event: Any, h: Any, tc: int) -> Iterator[tuple[str, dict[str, Any]]]:
        """Open / close the transaction around this event and count it in."""
        if tc in _TRX_START_TYPES:
            yield from self._close_trx(None, cut=True)
            self._open_trx(event, h)
        elif tc in _QUERY_TYPES:
            sql = getattr(event, "query", None) or ""
            word = sql.strip().upper()
            if word == "BEGIN" or word.startswith("XA START") or word.startswith("XA BEGIN"):
                if self._trx is None or self._trx.began_with_begin or self._trx.substantive:
                    yield from self._close_trx(None, cut=True)
                    self._open_trx(None, h)
                assert self._trx is not None
                self._trx.began_with_begin = True
            elif self._trx is None:
                self._open_trx(None, h)

        trx = self._trx
        if trx is not None:
            trx.events += 1
            if tc not in _TRX_START_TYPES and tc != _PAYLOAD:
                is_begin = tc in _QUERY_TYPES and (getattr(event, "query", "") or "").strip().upper() == "BEGIN"
                trx.substantive = trx.substantive or not is_begin

    def _on_query(self, event: Any, h: Any, fields: dict[str, Any], at: _EventPlace) -> Iterator[tuple[str, dict[str, Any]]]:
        """A statement row, and the statement's part in its transaction (a standalone one closes it)."""
        pos, payload_index, gtid, trx_pos, event_time = at.pos, at.payload_index, at.gtid, at.trx_pos, at.event_time
        event_name = event.name
        trx = self._trx
        sql = getattr(event, "query", None) or ""
        word = sql.strip().upper()
        if word not in ("BEGIN", "COMMIT"):
            kind = statement_kind(sql)
            yield "statements", {
                "source": self.source, "file": self.file, "file_seq": self.file_seq,
                "pos": pos, "payload_index": payload_index, "gtid": gtid, "trx_pos": trx_pos,
                "event_time": event_time, "server_id": h.server_id,
                "db": getattr(event, "schema", None) or None, "sql": sql, "kind": kind,
                "thread_id": getattr(event, "thread_id", None),
                "exec_time": getattr(event, "exec_time", None),
                "error_code": getattr(event, "error_code", None),
                "status_vars": _dumps(fields.get("status_vars")) if fields.get("status_vars") is not None else None,
                "event_type": event_name, "event_date": _date(event_time),
            }
        if trx is not None:
            if word in ("COMMIT", "ROLLBACK"):
                yield from self._close_trx(h, cut=False, end_event="ROLLBACK" if word == "ROLLBACK" else "COMMIT")
            elif word not in ("BEGIN", "COMMIT"):
                kind = statement_kind(sql)
                trx.statements.append(sql)
                if kind == "DDL" or kind == "DCL":
                    trx.has_ddl = True
                elif kind == "DML":
                    trx.has_dml = True
                if not trx.began_with_begin:
                    # a standalone statement (DDL, or a GTID + single statement): it closes
                    yield from self._close_trx(h, cut=False, end_event="DDL" if kind in ("DDL", "DCL") else "COMMIT")

    def _on_rows(self, event: Any, h: Any, fields: dict[str, Any], images: list[Any] | None,
                 at: _EventPlace) -> Iterator[tuple[str, dict[str, Any]]]:
        """The row images of a rows event, buffered in its transaction (flushed past the limit)."""
        pos, payload_index, gtid, trx_pos, event_time = at.pos, at.payload_index, at.gtid, at.trx_pos, at.event_time
        db, table, tc, event_name = at.db, at.table, h.type_code, event.name
        trx = self._trx
        if trx is None:
            self._open_trx(None, h)
            trx = self._trx
            assert trx is not None
            trx.events += 1
        op = "insert" if tc in _INSERT_TYPES else ("update" if tc in _UPDATE_TYPES else "delete")
        trx.has_dml = True
        if db or table:
            trx.tables.add(f"{db}.{table}")
        if images is None:
            images = list(row_images(event, fields))
        source, file, file_seq, server_id = self.source, self.file, self.file_seq, h.server_id
        db_s, table_s = db or "", table or ""
        append = trx.pending_rows.append
        for i, (b_map, a_map, b_json, a_json) in enumerate(images):
            append({
                "source": source, "file": file, "file_seq": file_seq,
                "pos": pos, "payload_index": payload_index, "row_index": i,
                "gtid": gtid, "trx_pos": trx_pos, "commit_time": None, "event_time": event_time,
                "server_id": server_id, "db": db_s, "table_name": table_s,
                "operation": op, "before": b_map, "after": a_map,
                "before_json": b_json, "after_json": a_json, "event_type": event_name,
                "commit_date": None,
            })
        trx.row_changes += len(images)
        if len(trx.pending_rows) >= self.max_buffered_rows:
            yield from self._flush_rows(trx, None)

    def _open_trx(self, event: Any, h: Any) -> None:
        pos = h.payload_pos if h.payload_pos is not None else h.pos
        tc = h.type_code
        row: dict[str, Any] = {
            "source": self.source, "file": self.file, "file_seq": self.file_seq,
            "start_pos": pos, "end_pos": None, "gtid": None, "gtid_kind": "NONE",
            "uuid": None, "tag": None, "gno": None,
            "mariadb_domain_id": None, "mariadb_server_id": None, "mariadb_seq_no": None,
            "last_committed": None, "sequence_number": None,
            "begin_time": _ts(h.timestamp), "commit_time": None,
            "original_commit_time": None, "immediate_commit_time": None,
            "original_server_version": None, "immediate_server_version": None,
            "transaction_length": None, "server_id": h.server_id, "xid": None,
            "events": 0, "row_changes": 0, "statements": [], "tables": [], "kind": "EMPTY",
            "end_event": None, "complete": False, "commit_date": None,
        }
        trx = _Trx(row, began_with_begin=False)
        facts = self.facts
        if event is not None and tc in _GTID_TYPES:
            anonymous = tc == int(_T.ANONYMOUS_GTID)
            tag = getattr(event, "tag", None) or None
            row["gtid_kind"] = "ANONYMOUS" if anonymous else ("TAGGED" if tag else "GTID")
            if not anonymous:
                row["gtid"] = getattr(event, "gtid", None)
                row["uuid"] = getattr(event, "uuid", None)
                row["tag"] = tag
                row["gno"] = getattr(event, "gno", None)
            for f in ("last_committed", "sequence_number", "transaction_length",
                      "original_server_version", "immediate_server_version"):
                row[f] = getattr(event, f, None)
            imm = getattr(event, "immediate_commit_timestamp", None)
            orig = getattr(event, "original_commit_timestamp", None)
            row["immediate_commit_time"] = _ts_us(imm)
            row["original_commit_time"] = _ts_us(orig if orig is not None else imm)
            trx.commit_us = imm
        elif event is not None and tc == _MARIA_GTID:
            self.flavor = MARIADB
            row["gtid_kind"] = "MARIADB"
            row["gtid"] = getattr(event, "gtid", None)
            row["mariadb_domain_id"] = getattr(event, "domain_id", None)
            row["mariadb_server_id"] = h.server_id
            row["mariadb_seq_no"] = getattr(event, "seq_no", None)
            row["sequence_number"] = getattr(event, "commit_id", None)
            standalone = getattr(event, "standalone", None)
            if standalone is None:
                standalone = bool((getattr(event, "flags2", None) or getattr(event, "flags", 0) or 0) & 1)
            trx.began_with_begin = not standalone
        if row["gtid"] is not None:
            if facts["first_gtid"] is None:
                facts["first_gtid"] = row["gtid"]
            facts["last_gtid"] = row["gtid"]
        self._trx = trx

    def _flush_rows(self, trx: _Trx, commit_time: _dt.datetime | None) -> Iterator[tuple[str, dict[str, Any]]]:
        for r in trx.pending_rows:
            ct = commit_time or r["event_time"]
            r["commit_time"] = ct
            r["commit_date"] = _date(ct)
            yield "row_changes", r
        trx.pending_rows = []

    def _close_trx(self, h: Any, *, cut: bool, end_event: str | None = None,
                   at_end: bool = False) -> Iterator[tuple[str, dict[str, Any]]]:
        trx = self._trx
        if trx is None:
            return
        self._trx = None
        row = trx.row
        # The archive holds a GTID once its transaction is in the file; one still open when
        # the data ends (truncated tail, snapshot of an active file) is not in the archive.
        if not (cut and at_end):
            if row["gno"] and row["uuid"]:
                self._builder().add(row["uuid"], row["gno"], row["tag"] or "")
            elif row["mariadb_seq_no"] is not None:
                self._builder().add(str(row["mariadb_domain_id"]), row["mariadb_seq_no"])
        if h is not None:
            # a closing event inside a TRANSACTION_PAYLOAD: the transaction ends with the payload
            row["end_pos"] = self._payload_end if h.payload_pos is not None else h.next_pos
            row["commit_time"] = _ts(h.timestamp)
        else:
            row["end_pos"] = self._pos if self._pos > row["start_pos"] else None
        row["end_event"] = None if cut else end_event
        row["complete"] = not cut
        commit_time = _ts_us(trx.commit_us) or row["commit_time"]
        row["events"] = trx.events
        row["row_changes"] = trx.row_changes
        row["statements"] = trx.statements
        row["tables"] = sorted(trx.tables)
        row["kind"] = ("MIXED" if trx.has_ddl and trx.has_dml else "DDL" if trx.has_ddl
                       else "DML" if trx.has_dml else "EMPTY")
        row["commit_date"] = _date(row["commit_time"] or row["begin_time"])
        self.facts["transactions"] += 1
        yield from self._flush_rows(trx, commit_time)
        yield "transactions", row


def decode_range(data: bytes | memoryview, **kwargs: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """Functional form of :class:`RangeDecoder`."""
    return iter(RangeDecoder(data, **kwargs))


def decode_file(path_or_bytes: Any, *, source: str, file: str | None = None,
                **kwargs: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """Decode a whole local file (path) or bytes: a convenience for tests and tools."""
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


def split_points(headers: Iterable[Any], *, file_size: int, target: int) -> list[int]:
    """Offsets where a file may be cut into ranges of about ``target`` bytes.

    ``headers`` are the file's top-level event headers (``scan_headers``). A cut is placed
    at a transaction start (GTID / ANONYMOUS_GTID / MariaDB GTID event) or, in files without
    GTIDs, right after an XID. Returns the starts of ranges 1..n (range 0 starts at 0).
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
